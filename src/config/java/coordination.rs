//! The coordinators, and the lifetimes the server keeps for apps, buffer tickets and commits.

use super::mapper::Mapper;
use crate::config::ConfigError;

impl Mapper {
    pub(super) fn map_coordination(&mut self) -> Result<(), ConfigError> {
        self.map(
            "rss.coordinator.quorum",
            Self::list,
            "coordinator_quorum",
            |c, v| c.coordinator_quorum = v,
        )?;
        self.map("rss.server.tags", Self::list, "tags", |c, v| c.tags = v)?;
        self.map(
            "rss.server.heartbeat.interval",
            Self::positive_millis,
            "heartbeat_interval",
            |c, v| c.heartbeat_interval = v,
        )?;
        self.map_expiry(
            "rss.server.app.expired.withoutHeartbeat",
            ["app.app_heartbeat_timeout", "app.expiry_check_interval"],
            |c| {
                (
                    &mut c.app.app_heartbeat_timeout,
                    &mut c.app.expiry_check_interval,
                )
            },
        )?;
        self.map_expiry(
            "rss.server.preAllocation.expired",
            [
                "memory_store.buffer_ticket_timeout",
                "memory_store.buffer_ticket_check_interval",
            ],
            |c| {
                let m = &mut c.memory_store;
                (
                    &mut m.buffer_ticket_timeout,
                    &mut m.buffer_ticket_check_interval,
                )
            },
        )?;
        self.map(
            "rss.server.commit.timeout",
            Self::positive_millis,
            "app.commit_timeout",
            |c, v| c.app.commit_timeout = v,
        )
    }
}
