//! The local disks' capacity and watermarks, their initialisation, and the health checks.

use super::mapper::Mapper;
use crate::config::{ByteSize, ConfigError};

/// The one checker class Spillway can run from `rss.server.health.checker.class.names`.
const SCRIPT_CHECKER: &str = "org.apache.uniffle.server.HealthScriptChecker";

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
        // Negative (Java's default -1) means "use the ratio"; 0 is left for validation to
        // refuse (Java would accept it and never write to the disk).
        if let Some((e, v)) = self.size("rss.server.disk.capacity")? {
            if v >= 0 {
                self.config.localfile_store.disk_capacity = Some(ByteSize(v as u64));
                self.set_origin("localfile_store.disk_capacity", &e);
            }
        }
        if let Some((e, v)) = self.double("rss.server.disk.capacity.ratio")? {
            self.config.localfile_store.disk_capacity_ratio = v;
            self.set_origin("localfile_store.disk_capacity_ratio", &e);
        }
        if let Some((e, v)) = self.boolean("rss.server.disk-capacity.watermark.check.enabled")? {
            self.config.localfile_store.disk_usage_watermark_check = v;
            self.set_origin("localfile_store.disk_usage_watermark_check", &e);
        }
        if let Some((e, v)) = self.int(
            "rss.server.localstorage.initialize.max.fail.number",
            0..=i64::from(i32::MAX),
        )? {
            self.config.localfile_store.init_max_failed_paths = v as usize;
            self.set_origin("localfile_store.init_max_failed_paths", &e);
        }
        self.map_health_checks()
    }

    fn map_health_checks(&mut self) -> Result<(), ConfigError> {
        if let Some((e, v)) = self.boolean("rss.server.health.check.enable")? {
            self.config.health.enabled = v;
            self.set_origin("health.enabled", &e);
        }
        if let Some((e, interval)) =
            self.positive_duration("rss.server.health.check.interval.ms", 1)?
        {
            self.config.health.check_interval = interval;
            self.set_origin("health.check_interval", &e);
        }
        for (java, spillway) in [
            (
                "rss.server.health.min.storage.percentage",
                "health.min_healthy_disks_ratio",
            ),
            (
                "rss.server.health.max.storage.usage.percentage",
                "health.disk_max_usage",
            ),
            (
                "rss.server.health.storage.recovery.usage.percentage",
                "health.disk_recovery_usage",
            ),
        ] {
            if let Some((e, v)) = self.percentage(java)? {
                let health = &mut self.config.health;
                *match spillway {
                    "health.min_healthy_disks_ratio" => &mut health.min_healthy_disks_ratio,
                    "health.disk_max_usage" => &mut health.disk_max_usage,
                    _ => &mut health.disk_recovery_usage,
                } = v;
                self.set_origin(spillway, &e);
            }
        }
        if let Some((e, timeout)) = self.positive_duration(
            "rss.server.health.checker.localStorageExecutionTimeoutMS",
            1,
        )? {
            self.config.health.disk_check_timeout = timeout;
            self.set_origin("health.disk_check_timeout", &e);
        }
        if let Some((e, on)) =
            self.boolean("rss.server.health.markUnhealthyOnceStorageCorruption")?
        {
            self.config.health.unhealthy_on_failed_disk = on;
            self.set_origin("health.unhealthy_on_failed_disk", &e);
        }
        if let Some((e, timeout)) =
            self.positive_duration("rss.server.health.checker.script.execute.timeout", 1)?
        {
            self.config.health.script_timeout = timeout;
            self.set_origin("health.script_timeout", &e);
        }
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
