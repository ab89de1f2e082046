//! The coordinators, and the lifetimes the server keeps for apps, buffer tickets and commits.

use super::mapper::{half, Mapper};
use super::values::java_list;
use crate::config::ConfigError;

impl Mapper {
    pub(super) fn map_coordination(&mut self) -> Result<(), ConfigError> {
        if let Some(e) = self.take("rss.coordinator.quorum") {
            self.config.coordinator_quorum = java_list(&e.value);
            self.set_origin("coordinator_quorum", &e);
        }
        if let Some(e) = self.take("rss.server.tags") {
            self.config.tags = java_list(&e.value);
            self.set_origin("tags", &e);
        }
        if let Some((e, interval)) = self.positive_duration("rss.server.heartbeat.interval", 1)? {
            self.config.heartbeat_interval = interval;
            self.set_origin("heartbeat_interval", &e);
        }
        if let Some((e, timeout)) =
            self.positive_duration("rss.server.app.expired.withoutHeartbeat", 1)?
        {
            self.config.app.app_heartbeat_timeout = timeout;
            self.config.app.expiry_check_interval = half(timeout);
            self.set_origin("app.app_heartbeat_timeout", &e);
            self.set_origin("app.expiry_check_interval", &e);
        }
        if let Some((e, timeout)) = self.positive_duration("rss.server.preAllocation.expired", 1)? {
            self.config.memory_store.buffer_ticket_timeout = timeout;
            self.config.memory_store.buffer_ticket_check_interval = half(timeout);
            self.set_origin("memory_store.buffer_ticket_timeout", &e);
            self.set_origin("memory_store.buffer_ticket_check_interval", &e);
        }
        if let Some((e, timeout)) = self.positive_duration("rss.server.commit.timeout", 1)? {
            self.config.app.commit_timeout = timeout;
            self.set_origin("app.commit_timeout", &e);
        }
        Ok(())
    }
}
