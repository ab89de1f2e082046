//! A Java `coordinator.conf`: the keys a coordinator-only process maps (see
//! `coordinator_keys.rs` for every key and what happens to it).

use super::mapper::Mapper;
use super::values::java_list;
use crate::config::{ConfigError, Role};

impl Mapper {
    /// Maps a coordinator.conf: the process becomes a coordinator (`role`), with Java's
    /// ports, expiry and assignment size, and pushes to a gateway as the Java coordinator does.
    pub(super) fn map_coordinator_conf(&mut self) -> Result<(), ConfigError> {
        self.coordinator_conf = true;
        self.config.role = Role::Coordinator;
        self.config.coordinator.enabled = true;
        // There is no shuffle server in the process to register.
        self.config.coordinator.register_self = false;
        if let Some((e, port)) = self.port("rss.rpc.server.port")? {
            self.config.grpc_port = port;
            self.set_origin("grpc_port", &e);
        }
        if let Some((e, port)) = self.port("rss.jetty.http.port")? {
            self.config.metrics.http_port = port;
            self.set_origin("metrics.http_port", &e);
        }
        if let Some((e, timeout)) =
            self.positive_duration("rss.coordinator.server.heartbeat.timeout", 1)?
        {
            self.config.coordinator.server_heartbeat_timeout = timeout;
            self.set_origin("coordinator.server_heartbeat_timeout", &e);
        }
        if let Some((e, timeout)) = self.positive_duration("rss.coordinator.app.expired", 1)? {
            self.config.coordinator.app_heartbeat_timeout = timeout;
            self.set_origin("coordinator.app_heartbeat_timeout", &e);
        }
        if let Some((e, n)) = self.positive_count("rss.coordinator.shuffle.nodes.max")? {
            self.config.coordinator.shuffle_server_number = n;
            self.set_origin("coordinator.shuffle_server_number", &e);
        }
        // Spillway's rule is PARTITION_BALANCE's; BASIC would ask for another one.
        self.choice(
            "rss.coordinator.assignment.strategy",
            &["PARTITION_BALANCE"],
        )?;
        if let Some(e) = self.string("rss.coordinator.remote.storage.path") {
            let paths = java_list(&e.value);
            match paths.as_slice() {
                [path] => {
                    self.config.coordinator.remote_storage_path = Some(path.clone());
                    self.set_origin("coordinator.remote_storage_path", &e);
                }
                [] => {}
                _ => {
                    return Err(e.error(format!(
                        "{} paths are set; Spillway's coordinator serves one path (there is no \
                         per-app selection among several yet)",
                        paths.len()
                    )))
                }
            }
        }
        self.map_push_gateway()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use super::super::{from_coordinator_properties, is_coordinator_file};
    use crate::config::Role;

    /// Java's `conf/coordinator.conf` as shipped, plus a few more keys.
    const CONF: &str = "\
rss.rpc.server.port 19999
rss.jetty.http.port 19998
rss.coordinator.server.heartbeat.timeout 30000
rss.coordinator.app.expired 60000
rss.coordinator.shuffle.nodes.max 13
rss.coordinator.remote.storage.path hdfs://ns1/rss
rss.coordinator.server.periodic.output.interval.times 10
rss.coordinator.access.checkers org.apache.uniffle.coordinator.access.checker.AccessClusterLoadChecker
rss.rpc.executor.size 1000
rss.coordinator.no.such.key x
";

    #[test]
    fn a_java_coordinator_conf_maps_onto_a_coordinator_process() {
        let loaded = from_coordinator_properties(CONF).unwrap();
        let c = &loaded.config;
        assert_eq!(c.role, Role::Coordinator);
        assert!(c.coordinator.enabled && !c.coordinator.register_self);
        assert_eq!((c.grpc_port, c.metrics.http_port), (19999, 19998));
        assert_eq!(
            c.coordinator.server_heartbeat_timeout,
            Duration::from_secs(30)
        );
        assert_eq!(c.coordinator.app_heartbeat_timeout, Duration::from_secs(60));
        assert_eq!(c.coordinator.shuffle_server_number, 13);
        assert_eq!(
            c.coordinator.remote_storage_path.as_deref(),
            Some("hdfs://ns1/rss")
        );
        let ignored = loaded.ignored.join("; ");
        assert!(
            ignored.contains(
                "rss.coordinator.server.periodic.output.interval.times (how often Java logs"
            ),
            "{ignored}"
        );
        assert!(
            ignored.contains("rss.rpc.executor.size ("),
            "a base key answered from the server table: {ignored}"
        );
        assert!(
            ignored.contains("rss.coordinator.no.such.key (not a key of the Java coordinator"),
            "{ignored}"
        );
        assert!(
            !ignored.contains("access.checkers"),
            "Java's default is accepted"
        );
    }

    #[test]
    fn what_the_coordinator_cannot_do_stops_start_up_with_the_key_named() {
        for (line, key) in [
            (
                "rss.coordinator.exclude.nodes.file.path /etc/rss/exclude",
                "rss.coordinator.exclude.nodes.file.path",
            ),
            (
                "rss.coordinator.remote.storage.path hdfs://a/rss,hdfs://b/rss",
                "rss.coordinator.remote.storage.path",
            ),
            (
                "rss.coordinator.assignment.strategy BASIC",
                "rss.coordinator.assignment.strategy",
            ),
            (
                "rss.coordinator.dynamicClientConf.enabled true",
                "rss.coordinator.dynamicClientConf.enabled",
            ),
            (
                "rss.coordinator.app.expired 0",
                "rss.coordinator.app.expired",
            ),
        ] {
            let e = from_coordinator_properties(&format!("{line}\n")).unwrap_err();
            assert_eq!(e.key, key, "{line}: {e}");
        }
    }

    #[test]
    fn a_coordinator_conf_is_told_from_a_server_conf() {
        let any = Path::new("/etc/rss/rss.conf");
        assert!(is_coordinator_file(any, CONF));
        assert!(is_coordinator_file(
            Path::new("/opt/rss/conf/coordinator.conf"),
            "rss.rpc.server.port 19999\n"
        ));
        // A server.conf names its coordinators, which is no coordinator key.
        let server = "rss.rpc.server.port 19999\nrss.coordinator.quorum c1:19999\n\
                      rss.storage.type MEMORY_LOCALFILE\nrss.storage.basePath /data\n";
        assert!(!is_coordinator_file(any, server));
        // A coordinator key beside a server key: still a server.conf (the mapper then warns it).
        let mixed = format!("{server}rss.coordinator.app.expired 60000\n");
        assert!(!is_coordinator_file(any, &mixed));
        assert!(!is_coordinator_file(any, "rss.rpc.server.port 19999\n"));
    }
}
