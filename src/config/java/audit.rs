//! The audit logs.

use super::mapper::Mapper;
use crate::config::ConfigError;

impl Mapper {
    pub(super) fn map_audit(&mut self) -> Result<(), ConfigError> {
        self.map(
            "rss.server.rpc.audit.log.enabled",
            Self::boolean,
            "audit.rpc_log",
            |c, v| c.audit.rpc_log = v,
        )?;
        self.map(
            "rss.server.rpc.audit.log.excludeList",
            Self::list,
            "audit.rpc_exclude",
            |c, v| c.audit.rpc_exclude = v,
        )?;
        self.map(
            "rss.server.storage.audit.log.enabled",
            Self::boolean,
            "audit.storage_log",
            |c, v| c.audit.storage_log = v,
        )
    }
}
