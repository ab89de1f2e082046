//! The local disks' watermarks and the storage health checks.

use super::mapper::Mapper;
use crate::config::ConfigError;

impl Mapper {
    pub(super) fn map_disks(&mut self) -> Result<(), ConfigError> {
        if let Some((e, v)) = self.percentage("rss.server.high.watermark.write")? {
            self.config.localfile_store.disk_high_watermark = v;
            self.set_origin("localfile_store.disk_high_watermark", &e);
        }
        if let Some((e, v)) = self.percentage("rss.server.low.watermark.write")? {
            self.config.localfile_store.disk_low_watermark = v;
            self.set_origin("localfile_store.disk_low_watermark", &e);
        }
        let enabled = self.boolean("rss.server.health.check.enable")?;
        let min_percentage = self.percentage("rss.server.health.min.storage.percentage")?;
        match &enabled {
            Some((e, true)) => {
                let fraction = min_percentage.as_ref().map_or(0.8, |p| p.1);
                let disks = self.config.localfile_store.data_paths.len() as f64;
                self.config.localfile_store.healthy_check_min_disks =
                    (disks * fraction).ceil() as usize;
                let origin = min_percentage.as_ref().map_or(e, |p| &p.0);
                self.origins.insert(
                    "localfile_store.healthy_check_min_disks",
                    origin.key.clone(),
                );
            }
            _ => {
                if let Some((e, _)) = &min_percentage {
                    self.ignore(
                        e,
                        "health checks are off: rss.server.health.check.enable is not true",
                    );
                }
            }
        }
        if let Some((e, interval)) =
            self.positive_duration("rss.server.health.check.interval.ms", 1)?
        {
            self.config.localfile_store.disk_health_check_interval = interval;
            self.set_origin("localfile_store.disk_health_check_interval", &e);
        }
        Ok(())
    }
}
