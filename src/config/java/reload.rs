//! How often the file is re-read for the keys that can change at runtime.

use super::mapper::Mapper;
use crate::config::ConfigError;

impl Mapper {
    pub(super) fn map_reload(&mut self) -> Result<(), ConfigError> {
        // Java: a positive number of seconds (`POSITIVE_LONG_VALIDATOR`).
        self.map(
            "rss.reconfigure.interval.sec",
            Self::positive_secs,
            "reconfigure_interval",
            |c, v| c.reconfigure_interval = v,
        )
    }
}
