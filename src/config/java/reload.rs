//! How often the file is re-read for the keys that can change at runtime.

use super::mapper::Mapper;
use crate::config::ConfigError;

impl Mapper {
    pub(super) fn map_reload(&mut self) -> Result<(), ConfigError> {
        // Java: a positive number of seconds (`POSITIVE_LONG_VALIDATOR`).
        if let Some((e, every)) = self.positive_duration("rss.reconfigure.interval.sec", 1000)? {
            self.config.reconfigure_interval = every;
            self.set_origin("reconfigure_interval", &e);
        }
        Ok(())
    }
}
