//! The audit logs.

use super::mapper::Mapper;
use super::values::java_list;
use crate::config::ConfigError;

impl Mapper {
    pub(super) fn map_audit(&mut self) -> Result<(), ConfigError> {
        if let Some((e, on)) = self.boolean("rss.server.rpc.audit.log.enabled")? {
            self.config.audit.rpc_log = on;
            self.set_origin("audit.rpc_log", &e);
        }
        if let Some(e) = self.take("rss.server.rpc.audit.log.excludeList") {
            self.config.audit.rpc_exclude = java_list(&e.value);
            self.set_origin("audit.rpc_exclude", &e);
        }
        if let Some((e, on)) = self.boolean("rss.server.storage.audit.log.enabled")? {
            self.config.audit.storage_log = on;
            self.set_origin("audit.storage_log", &e);
        }
        Ok(())
    }
}
