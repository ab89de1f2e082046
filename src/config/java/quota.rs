//! `[quota]` from a `server.conf`: Spillway's own keys, spelled the Java way (the Java server
//! has no such quota).

use super::mapper::Mapper;
use crate::config::quota::MemoryShare;
use crate::config::{ByteSize, ConfigError};

/// Java's `Long.MAX_VALUE`, which a size key takes for "no limit".
const NO_LIMIT: u64 = i64::MAX as u64;

impl Mapper {
    pub(super) fn map_quota(&mut self) -> Result<(), ConfigError> {
        let limit = |size: ByteSize| (size.as_u64() != NO_LIMIT).then_some(size);
        self.map(
            "rss.server.quota.app.localfile.ratio",
            Self::ratio,
            "quota.app_local_disk_share",
            |c, v| c.quota.app_local_disk_share = v,
        )?;
        self.map(
            "rss.server.quota.user.localfile.ratio",
            Self::ratio,
            "quota.user_local_disk_share",
            |c, v| c.quota.user_local_disk_share = v,
        )?;
        self.map(
            "rss.server.quota.app.localfile.size",
            Self::positive_size,
            "quota.app_local_disk_bytes",
            |c, v| c.quota.app_local_disk_bytes = limit(v),
        )?;
        self.map(
            "rss.server.quota.user.localfile.size",
            Self::positive_size,
            "quota.user_local_disk_bytes",
            |c, v| c.quota.user_local_disk_bytes = limit(v),
        )?;
        self.map(
            "rss.server.quota.app.remote.size",
            Self::positive_size,
            "quota.app_remote_bytes",
            |c, v| c.quota.app_remote_bytes = limit(v),
        )?;
        self.map(
            "rss.server.quota.user.remote.size",
            Self::positive_size,
            "quota.user_remote_bytes",
            |c, v| c.quota.user_remote_bytes = limit(v),
        )?;
        self.map(
            "rss.server.quota.app.memory.ratio",
            |m, key| {
                let Some((e, v)) = m.text(key)? else {
                    return Ok(None);
                };
                let share = v.parse::<MemoryShare>().map_err(|why| e.error(why))?;
                Ok(Some((e, share)))
            },
            "quota.app_memory_share",
            |c, v| c.quota.app_memory_share = v,
        )
    }
}
