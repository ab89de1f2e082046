//! The local disks' capacity and watermarks, their initialisation, and the health checks.

use super::mapper::Mapper;
use crate::config::{ByteSize, ConfigError};

/// The one checker class Spillway can run from `rss.server.health.checker.class.names`.
const SCRIPT_CHECKER: &str = "org.apache.uniffle.server.HealthScriptChecker";

impl Mapper {
    pub(super) fn map_disks(&mut self) -> Result<(), ConfigError> {
        self.map(
            "rss.server.high.watermark.write",
            Self::percentage,
            "localfile_store.disk_high_watermark",
            |c, v| c.localfile_store.disk_high_watermark = v,
        )?;
        self.map(
            "rss.server.low.watermark.write",
            Self::percentage,
            "localfile_store.disk_low_watermark",
            |c, v| c.localfile_store.disk_low_watermark = v,
        )?;
        // Negative (Java's default -1) means "use the ratio"; 0 is left for validation to
        // refuse (Java would accept it and never write to the disk).
        self.map(
            "rss.server.disk.capacity",
            |m, k| Ok(m.size(k)?.filter(|(_, v)| *v >= 0)),
            "localfile_store.disk_capacity",
            |c, v| c.localfile_store.disk_capacity = Some(ByteSize(v as u64)),
        )?;
        self.map(
            "rss.server.disk.capacity.ratio",
            Self::double,
            "localfile_store.disk_capacity_ratio",
            |c, v| c.localfile_store.disk_capacity_ratio = v,
        )?;
        self.map(
            "rss.server.disk-capacity.watermark.check.enabled",
            Self::boolean,
            "localfile_store.disk_usage_watermark_check",
            |c, v| c.localfile_store.disk_usage_watermark_check = v,
        )?;
        self.map(
            "rss.server.localstorage.initialize.max.fail.number",
            Self::count,
            "localfile_store.init_max_failed_paths",
            |c, v| c.localfile_store.init_max_failed_paths = v,
        )?;
        self.map_health_checks()
    }

    fn map_health_checks(&mut self) -> Result<(), ConfigError> {
        self.map(
            "rss.server.health.check.enable",
            Self::boolean,
            "health.enabled",
            |c, v| c.health.enabled = v,
        )?;
        self.map(
            "rss.server.health.check.interval.ms",
            Self::positive_millis,
            "health.check_interval",
            |c, v| c.health.check_interval = v,
        )?;
        self.map(
            "rss.server.health.min.storage.percentage",
            Self::percentage,
            "health.min_healthy_disks_ratio",
            |c, v| c.health.min_healthy_disks_ratio = v,
        )?;
        self.map(
            "rss.server.health.max.storage.usage.percentage",
            Self::percentage,
            "health.disk_max_usage",
            |c, v| c.health.disk_max_usage = v,
        )?;
        self.map(
            "rss.server.health.storage.recovery.usage.percentage",
            Self::percentage,
            "health.disk_recovery_usage",
            |c, v| c.health.disk_recovery_usage = v,
        )?;
        self.map(
            "rss.server.health.checker.localStorageExecutionTimeoutMS",
            Self::positive_millis,
            "health.disk_check_timeout",
            |c, v| c.health.disk_check_timeout = v,
        )?;
        self.map(
            "rss.server.health.markUnhealthyOnceStorageCorruption",
            Self::boolean,
            "health.unhealthy_on_failed_disk",
            |c, v| c.health.unhealthy_on_failed_disk = v,
        )?;
        self.map(
            "rss.server.health.checker.script.execute.timeout",
            Self::positive_millis,
            "health.script_timeout",
            |c, v| c.health.script_timeout = v,
        )?;
        // Java builds the listed classes by reflection; Spillway knows one of them. Another
        // name cannot be honoured, and quietly dropping an operator's health rule would report
        // a server healthy that Java would not, so it stops start-up.
        let classes = self.take("rss.server.health.checker.class.names");
        let mut script_listed = false;
        if let Some(e) = &classes {
            for class in super::values::java_list(&e.value) {
                if class == SCRIPT_CHECKER {
                    script_listed = true;
                } else {
                    return Err(e.error(format!(
                        "checker class {class:?} cannot be run by Spillway: only \
                         {SCRIPT_CHECKER} is supported (the storage checker is built in and \
                         always runs when rss.server.health.check.enable is true)"
                    )));
                }
            }
        }
        let script = self.string("rss.server.health.checker.script.path");
        match (&classes, script) {
            (_, Some(path)) if !script_listed => self.ignore(
                &path,
                "HealthScriptChecker is not listed in rss.server.health.checker.class.names",
            ),
            (_, Some(path)) if !self.config.health.enabled => self.ignore(
                &path,
                "health checks are off: rss.server.health.check.enable is not true",
            ),
            (_, Some(path)) => {
                self.config.health.script_path = Some(path.value.clone().into());
                self.set_origin("health.script_path", &path);
            }
            (Some(e), None) if script_listed && self.config.health.enabled => {
                return Err(e.error(format!(
                    "{SCRIPT_CHECKER} is listed but rss.server.health.checker.script.path is \
                     not set (the Java server refuses to start too: \"Health script not \
                     available\")"
                )));
            }
            _ => {}
        }
        Ok(())
    }
}
