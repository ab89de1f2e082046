//! `Config::validate`: the range and cross-field rules serde cannot express.

use std::collections::HashSet;
use std::time::Duration;

use super::{
    AppConfig, AuditConfig, ByteSize, Config, ConfigError, CoordinatorConfig, HdfsStoreConfig,
    HealthConfig, HttpsConfig, HybridStoreConfig, LimitsConfig, LocalfileStoreConfig,
    MemoryStoreConfig, MetricsConfig, QuotaConfig, RecoveryConfig, ShutdownConfig, StoreType,
};

impl Config {
    /// Checks the rules serde cannot: ranges and cross-field constraints.
    ///
    /// Rules, each reported under the key to fix:
    /// - watermarks satisfy `0 < low < high <= 1` (memory and disk);
    /// - capacities and sizes are non-zero, every concurrency is at least 1;
    /// - periodic intervals and timeouts are non-zero (shutdown budgets may be zero);
    /// - `data_paths` is non-empty and distinct when `store_type` includes LOCALFILE, a set
    ///   `disk_capacity` is non-zero and `disk_capacity_ratio` is in `(0, 1]`;
    /// - `[health]` ratios are in `[0, 1]`, its intervals non-zero; it needs LOCALFILE when
    ///   enabled, and a set `script_path` is not empty;
    /// - the huge-partition ratio is in `(0, 1]`;
    /// - `grpc_port != metrics.http_port` unless both are 0;
    /// - `netty_port` is in `-1..=65535` and, when positive, differs from `grpc_port` and
    ///   `metrics.http_port`;
    /// - tags are non-empty and comma-free, coordinators look like `host:port`, and the push
    ///   gateway is an http(s) URL;
    /// - the coordinator's timeouts are non-zero, its default server number is at least 1,
    ///   client-conf keys are non-empty and the remote storage path has no spaces.
    ///
    /// Returns the first violation.
    pub fn validate(&self) -> Result<(), ConfigError> {
        // Destructure without `..` so a new field cannot be forgotten here.
        let Config {
            // Either role is valid with any other setting: a coordinator-only process reads
            // `grpc_port`, `bind_ip`, `[metrics]` and `[coordinator]`, all checked below.
            role: _,
            store_type,
            grpc_port,
            netty_port,
            bind_ip,
            coordinator_quorum,
            tags,
            heartbeat_interval,
            reconfigure_interval,
            worker_ip,
            memory_store,
            localfile_store,
            hdfs_store,
            hybrid_store,
            app,
            metrics,
            shutdown,
            coordinator,
            recovery,
            limits,
            audit,
            health,
            quota,
            java_properties: _,
            source_path: _,
        } = self;

        refuse_if(
            bind_ip.parse::<std::net::IpAddr>().is_err(),
            "bind_ip",
            format!("{bind_ip:?}: expected an IP address such as 0.0.0.0 or 127.0.0.1"),
        )?;
        for addr in coordinator_quorum {
            check_host_port(addr).map_err(|reason| {
                ConfigError::new("coordinator_quorum", format!("{addr:?}: {reason}"))
            })?;
        }
        for tag in tags {
            refuse_if(
                tag.trim().is_empty() || tag.contains(','),
                "tags",
                format!("{tag:?}: tags must be non-empty and contain no commas"),
            )?;
            // The client-type tag promises a data plane: Netty clients would be assigned a
            // server that answers them on no port.
            refuse_if(
                tag.trim() == "GRPC_NETTY" && *netty_port < 0,
                "tags",
                "\"GRPC_NETTY\" with netty_port = -1: the server would be assigned to Netty \
                 clients and serve them no Netty port; set netty_port, or remove the tag (the \
                 server adds it itself when it has a Netty port)",
            )?;
        }
        nonzero_duration("heartbeat_interval", *heartbeat_interval)?;
        nonzero_duration("reconfigure_interval", *reconfigure_interval)?;
        if let Some(ip) = worker_ip {
            refuse_if(
                ip.is_empty() || ip.contains(char::is_whitespace),
                "worker_ip",
                format!("{ip:?}: expected an address without spaces"),
            )?;
        }
        check_netty_port(*netty_port, *grpc_port, metrics.http_port)?;
        memory_store.check()?;
        localfile_store.check(*store_type)?;
        hdfs_store.check()?;
        hybrid_store.check()?;
        app.check()?;
        metrics.check(*grpc_port)?;
        if let Some(https) = &metrics.https {
            https.check([
                ("grpc_port", i32::from(*grpc_port)),
                ("netty_port", *netty_port),
                ("metrics.http_port", i32::from(metrics.http_port)),
            ])?;
        }
        shutdown.check()?;
        recovery.check()?;
        limits.check()?;
        audit.check()?;
        health.check(*store_type)?;
        quota.check()?;
        coordinator.check()
    }
}

impl AuditConfig {
    fn check(&self) -> Result<(), ConfigError> {
        let AuditConfig {
            rpc_log,
            rpc_log_path,
            rpc_exclude: _,
            storage_log,
            storage_log_path,
            coordinator_rpc_log,
            coordinator_rpc_log_path,
            coordinator_rpc_exclude: _,
        } = self;
        refuse_if(
            *rpc_log && rpc_log_path.as_os_str().is_empty(),
            "audit.rpc_log_path",
            "is empty while audit.rpc_log is on",
        )?;
        refuse_if(
            *storage_log && storage_log_path.as_os_str().is_empty(),
            "audit.storage_log_path",
            "is empty while audit.storage_log is on",
        )?;
        refuse_if(
            *coordinator_rpc_log && coordinator_rpc_log_path.as_os_str().is_empty(),
            "audit.coordinator_rpc_log_path",
            "is empty while audit.coordinator_rpc_log is on",
        )?;
        Ok(())
    }
}

impl LimitsConfig {
    fn check(&self) -> Result<(), ConfigError> {
        let LimitsConfig {
            max_connections,
            max_connections_per_address,
            idle_timeout,
            stall_timeout,
            receive_budget,
            max_blocks_per_request,
            max_partitions_per_request,
            max_block_ids_per_request,
            max_string_length,
            max_response_size,
            max_request_size,
        } = self;
        let positive = [
            ("limits.max_connections", *max_connections as u64),
            (
                "limits.max_connections_per_address",
                *max_connections_per_address as u64,
            ),
            (
                "limits.max_blocks_per_request",
                *max_blocks_per_request as u64,
            ),
            (
                "limits.max_partitions_per_request",
                *max_partitions_per_request as u64,
            ),
            (
                "limits.max_block_ids_per_request",
                *max_block_ids_per_request as u64,
            ),
            ("limits.max_string_length", max_string_length.as_u64()),
        ];
        for (key, value) in positive {
            refuse_if(value == 0, key, "must be above zero")?;
        }
        nonzero_duration("limits.idle_timeout", *idle_timeout)?;
        nonzero_duration("limits.stall_timeout", *stall_timeout)?;
        // One semaphore acquisition counts in u32, and a request must fit a Netty frame.
        let budget = receive_budget.as_u64();
        refuse_if(
            budget < (1 << 20) || budget > i32::MAX as u64,
            "limits.receive_budget",
            format!("{receive_budget}: must be between 1M and 2G - 1"),
        )?;
        let response = max_response_size.as_u64();
        refuse_if(
            response == 0 || response > i32::MAX as u64,
            "limits.max_response_size",
            format!(
                "{max_response_size}: must be between 1 and 2G - 1 (a Netty frame's int32 length)"
            ),
        )?;
        let request = max_request_size.as_u64();
        refuse_if(
            request == 0 || request > i32::MAX as u64,
            "limits.max_request_size",
            format!(
                "{max_request_size}: must be between 1 and 2G - 1 (gRPC's int32 message length)"
            ),
        )?;
        Ok(())
    }
}

impl RecoveryConfig {
    fn check(&self) -> Result<(), ConfigError> {
        let RecoveryConfig {
            enabled: _,
            dir,
            compact_size,
            takeover: _,
        } = self;
        refuse_if(
            dir.as_ref().is_some_and(|d| d.as_os_str().is_empty()),
            "recovery.dir",
            "is empty",
        )?;
        refuse_if(
            compact_size.as_u64() == 0,
            "recovery.compact_size",
            "must be above zero",
        )?;
        Ok(())
    }
}

/// `netty_port`: -1 (off), 0 (any free port) or a port no other listener uses.
fn check_netty_port(netty_port: i32, grpc_port: u16, http_port: u16) -> Result<(), ConfigError> {
    refuse_if(
        !(-1..=65535).contains(&netty_port),
        "netty_port",
        format!("{netty_port}: expected -1 (off), 0 (any free port) or 1..=65535"),
    )?;
    refuse_if(
        netty_port > 0
            && (netty_port == i32::from(grpc_port) || netty_port == i32::from(http_port)),
        "netty_port",
        format!(
            "{netty_port} is also grpc_port or metrics.http_port; each listener needs its own port"
        ),
    )?;
    Ok(())
}

impl MemoryStoreConfig {
    fn check(&self) -> Result<(), ConfigError> {
        let MemoryStoreConfig {
            capacity,
            read_capacity,
            buffer_ticket_timeout,
            buffer_ticket_check_interval,
            // Any duration: 0 turns the wait off.
            require_buffer_wait: _,
        } = self;
        nonzero_size("memory_store.capacity", *capacity)?;
        nonzero_size("memory_store.read_capacity", *read_capacity)?;
        nonzero_duration("memory_store.buffer_ticket_timeout", *buffer_ticket_timeout)?;
        nonzero_duration(
            "memory_store.buffer_ticket_check_interval",
            *buffer_ticket_check_interval,
        )
    }
}

/// What released clients send in one request at most by default
/// (`rss.client.send.size.limit`).
pub const CLIENT_SEND_SIZE: u64 = 16 * ByteSize::MIB;

impl Config {
    /// The largest `requireBuffer` a released client makes with its default send size: over
    /// the Netty plane it reserves the encoded message on top of the blocks (SEMANTICS §3.4),
    /// about twice the send size (33,568,713 bytes measured with 0.9.2 against 16,783,815 over
    /// gRPC); the server gives that part back when the send arrives.
    pub fn largest_client_request(&self) -> u64 {
        if self.netty_port >= 0 {
            2 * CLIENT_SEND_SIZE
        } else {
            CLIENT_SEND_SIZE
        }
    }

    /// A start-up warning when one full-size client request does not fit in the memory above
    /// the high watermark. Such a request is still served (it makes the server spill for it,
    /// see `memory::budget`), but each one then waits for a spill instead of being granted
    /// at once. The smallest capacity without that cost is `request / (1 − high)`.
    pub fn memory_headroom_warning(&self) -> Option<String> {
        let capacity = self.memory_store.capacity.as_u64();
        let high = self.hybrid_store.memory_spill_high_watermark;
        let request = self.largest_client_request();
        let headroom = (capacity as f64 * (1.0 - high)) as u64;
        if headroom >= request {
            return None;
        }
        // In MiB, rounded to a thousandth first: 1 − 0.8 is 0.19999999999999996 in f64.
        let mib = ByteSize::MIB as f64;
        let smallest =
            ((request as f64 / mib / (1.0 - high) * 1000.0).round() / 1000.0).ceil() as u64;
        let plane = if self.netty_port >= 0 {
            "over the Netty plane, twice the client's send size of "
        } else {
            "the client's send size, "
        };
        Some(format!(
            "memory_store.capacity {} with hybrid_store.memory_spill_high_watermark {high} leaves {:.1} MiB above the high watermark, less than one full-size client request ({} {plane}rss.client.send.size.limit {} by default): such requests make the server spill before they are granted{}. A capacity of at least {} avoids that (or a lower high watermark, or a smaller client send size)",
            self.memory_store.capacity,
            headroom as f64 / mib,
            ByteSize(request),
            ByteSize(CLIENT_SEND_SIZE),
            if request > capacity {
                ", and a request larger than the capacity is refused (INVALID_REQUEST)"
            } else {
                ""
            },
            ByteSize(smallest * ByteSize::MIB),
        ))
    }
}

impl LocalfileStoreConfig {
    fn check(&self, store_type: StoreType) -> Result<(), ConfigError> {
        let LocalfileStoreConfig {
            data_paths,
            healthy_check_min_disks,
            disk_capacity,
            disk_capacity_ratio,
            disk_high_watermark,
            disk_low_watermark,
            disk_usage_watermark_check: _,
            init_max_failed_paths: _,
            disk_max_concurrency,
            disk_health_check_interval,
            sync_on_write: _,
            direct_io: _,
            write_timeout,
            leak_check_interval,
        } = self;
        nonzero_duration("localfile_store.write_timeout", *write_timeout)?;
        if store_type.uses_localfile() {
            refuse_if(
                data_paths.is_empty(),
                "localfile_store.data_paths",
                "must list at least one directory when store_type includes LOCALFILE",
            )?;
            let mut seen = HashSet::new();
            for path in data_paths {
                refuse_if(
                    path.as_os_str().is_empty(),
                    "localfile_store.data_paths",
                    "contains an empty path",
                )?;
                refuse_if(
                    !seen.insert(path),
                    "localfile_store.data_paths",
                    format!("{} is listed twice", path.display()),
                )?;
            }
        }
        refuse_if(
            *healthy_check_min_disks > data_paths.len(),
            "localfile_store.healthy_check_min_disks",
            format!(
                "is {healthy_check_min_disks} but data_paths lists only {} disk(s)",
                data_paths.len()
            ),
        )?;
        if let Some(capacity) = disk_capacity {
            nonzero_size("localfile_store.disk_capacity", *capacity)?;
        }
        in_unit_interval_or_refuse("localfile_store.disk_capacity_ratio", *disk_capacity_ratio)?;
        watermarks(
            ("localfile_store.disk_low_watermark", *disk_low_watermark),
            ("localfile_store.disk_high_watermark", *disk_high_watermark),
        )?;
        at_least_one(
            "localfile_store.disk_max_concurrency",
            *disk_max_concurrency,
        )?;
        nonzero_duration(
            "localfile_store.disk_health_check_interval",
            *disk_health_check_interval,
        )?;
        nonzero_duration("localfile_store.leak_check_interval", *leak_check_interval)
    }
}

impl HealthConfig {
    fn check(&self, store_type: StoreType) -> Result<(), ConfigError> {
        let HealthConfig {
            enabled,
            check_interval,
            min_healthy_disks_ratio,
            disk_max_usage,
            disk_recovery_usage,
            disk_check_timeout,
            unhealthy_on_failed_disk: _,
            script_path,
            script_timeout,
        } = self;
        nonzero_duration("health.check_interval", *check_interval)?;
        nonzero_duration("health.disk_check_timeout", *disk_check_timeout)?;
        nonzero_duration("health.script_timeout", *script_timeout)?;
        for (key, v) in [
            ("health.min_healthy_disks_ratio", *min_healthy_disks_ratio),
            ("health.disk_max_usage", *disk_max_usage),
            ("health.disk_recovery_usage", *disk_recovery_usage),
        ] {
            refuse_if(
                !(0.0..=1.0).contains(&v),
                key,
                format!("must be in [0, 1], got {v}"),
            )?;
        }
        refuse_if(
            *enabled && !store_type.uses_localfile(),
            "health.enabled",
            "the storage checker needs local data paths: store_type has no LOCALFILE \
             (the Java server refuses this too: \"Not support storage checker\")",
        )?;
        if let Some(path) = script_path {
            refuse_if(
                path.as_os_str().is_empty(),
                "health.script_path",
                "is empty",
            )?;
        }
        Ok(())
    }
}

impl HdfsStoreConfig {
    fn check(&self) -> Result<(), ConfigError> {
        let HdfsStoreConfig {
            max_concurrency,
            partition_write_max_concurrency,
            partition_write_max_concurrency_limit,
            cold_storage_threshold_size,
            write_timeout,
            failure_cooldown,
            keep_open,
            max_open_pairs: _,
            kerberos_principal,
            kerberos_keytab,
            write_as: _,
            user,
            hadoop_conf,
        } = self;
        refuse_if(
            hadoop_conf.keys().any(|k| k.trim().is_empty()),
            "hdfs_store.hadoop_conf",
            "keys must be non-empty",
        )?;
        refuse_if(
            user.as_deref()
                .is_some_and(|u| u.trim().is_empty() || u.contains(['/', '@']) || u.trim() != u),
            "hdfs_store.user",
            "must be a plain user name (no spaces, '/' or '@'; set kerberos_principal for a \
             principal)",
        )?;
        at_least_one("hdfs_store.max_concurrency", *max_concurrency)?;
        at_least_one(
            "hdfs_store.partition_write_max_concurrency",
            *partition_write_max_concurrency,
        )?;
        at_least_one(
            "hdfs_store.partition_write_max_concurrency_limit",
            *partition_write_max_concurrency_limit,
        )?;
        nonzero_size(
            "hdfs_store.cold_storage_threshold_size",
            *cold_storage_threshold_size,
        )?;
        nonzero_duration("hdfs_store.write_timeout", *write_timeout)?;
        nonzero_duration("hdfs_store.failure_cooldown", *failure_cooldown)?;
        // A DataNode drops a write pipeline that sent nothing for its read timeout
        // (dfs.client.socket-timeout, 60 s by default); Hadoop's client sends heartbeat packets
        // at half of it, hdfs-native none, so a pair idles at most half of it.
        refuse_if(
            *keep_open > Duration::from_secs(30),
            "hdfs_store.keep_open",
            "must be at most 30s: an idle write pipeline meets the DataNodes' read timeout \
             (dfs.client.socket-timeout, 60s by default); \"0s\" closes after every append",
        )?;
        refuse_if(
            kerberos_principal
                .as_deref()
                .is_some_and(|p| p.trim().is_empty()),
            "hdfs_store.kerberos_principal",
            "must not be empty",
        )?;
        refuse_if(
            kerberos_keytab.is_some() && kerberos_principal.is_none(),
            "hdfs_store.kerberos_keytab",
            "needs hdfs_store.kerberos_principal",
        )?;
        Ok(())
    }
}

impl HybridStoreConfig {
    fn check(&self) -> Result<(), ConfigError> {
        let HybridStoreConfig {
            memory_spill_high_watermark,
            memory_spill_low_watermark,
            memory_single_buffer_max_spill_size,
            memory_single_buffer_spill: _,
            spill_concurrency,
            huge_partition_size_threshold,
            huge_partition_memory_limit_ratio,
            huge_partition_hard_limit,
            // Any size is meaningful, 0 included (split every partition).
            huge_partition_split_limit: _,
            spill_retry_max_backoff,
        } = self;
        watermarks(
            (
                "hybrid_store.memory_spill_low_watermark",
                *memory_spill_low_watermark,
            ),
            (
                "hybrid_store.memory_spill_high_watermark",
                *memory_spill_high_watermark,
            ),
        )?;
        nonzero_size(
            "hybrid_store.memory_single_buffer_max_spill_size",
            *memory_single_buffer_max_spill_size,
        )?;
        at_least_one("hybrid_store.spill_concurrency", *spill_concurrency)?;
        nonzero_size(
            "hybrid_store.huge_partition_size_threshold",
            *huge_partition_size_threshold,
        )?;
        let ratio = *huge_partition_memory_limit_ratio;
        in_unit_interval_or_refuse("hybrid_store.huge_partition_memory_limit_ratio", ratio)?;
        if let Some(limit) = huge_partition_hard_limit {
            nonzero_size("hybrid_store.huge_partition_hard_limit", *limit)?;
        }
        nonzero_duration(
            "hybrid_store.spill_retry_max_backoff",
            *spill_retry_max_backoff,
        )
    }
}

impl QuotaConfig {
    fn check(&self) -> Result<(), ConfigError> {
        let QuotaConfig {
            app_local_disk_share,
            app_local_disk_bytes,
            user_local_disk_share,
            user_local_disk_bytes,
            app_remote_bytes,
            user_remote_bytes,
            // Checked when parsed: `MemoryShare` holds only "fair" or a share in (0, 1].
            app_memory_share: _,
        } = self;
        in_unit_interval_or_refuse("quota.app_local_disk_share", *app_local_disk_share)?;
        in_unit_interval_or_refuse("quota.user_local_disk_share", *user_local_disk_share)?;
        for (key, size) in [
            ("quota.app_local_disk_bytes", app_local_disk_bytes),
            ("quota.user_local_disk_bytes", user_local_disk_bytes),
            ("quota.app_remote_bytes", app_remote_bytes),
            ("quota.user_remote_bytes", user_remote_bytes),
        ] {
            if let Some(size) = size {
                nonzero_size(key, *size)?;
            }
        }
        Ok(())
    }
}

impl AppConfig {
    fn check(&self) -> Result<(), ConfigError> {
        let AppConfig {
            app_heartbeat_timeout,
            expiry_check_interval,
            commit_timeout,
        } = self;
        nonzero_duration("app.app_heartbeat_timeout", *app_heartbeat_timeout)?;
        nonzero_duration("app.expiry_check_interval", *expiry_check_interval)?;
        nonzero_duration("app.commit_timeout", *commit_timeout)
    }
}

impl MetricsConfig {
    fn check(&self, grpc_port: u16) -> Result<(), ConfigError> {
        let MetricsConfig {
            http_port,
            push_gateway_endpoint,
            push_interval,
            push_gateway_job,
            push_gateway_grouping_key,
            push_timeout,
            console_port: _,
            admin_token,
            basic_credentials,
            // Any count is valid; 0 leaves the top-N families without samples.
            top_n_apps: _,
            block_size_statistics,
            block_size_buckets,
            // Checked with the other listeners' ports, in `HttpsConfig::check`.
            https: _,
        } = self;
        refuse_if(
            *block_size_statistics && block_size_buckets.is_empty(),
            "metrics.block_size_buckets",
            "needs at least one bound when block_size_statistics is on",
        )?;
        refuse_if(
            admin_token
                .as_ref()
                .is_some_and(|t| t.len() < 16 || t.contains(char::is_whitespace)),
            "metrics.admin_token",
            "must be at least 16 characters without spaces",
        )?;
        refuse_if(
            basic_credentials
                .as_ref()
                .is_some_and(|c| c.is_empty() || c.contains(char::is_whitespace)),
            "metrics.basic_credentials",
            "must be the base64 text of user:password, without spaces",
        )?;
        refuse_if(
            push_gateway_job.is_empty() || push_gateway_job.contains('/'),
            "metrics.push_gateway_job",
            format!("{push_gateway_job:?}: must be non-empty and without '/'"),
        )?;
        super::parse_grouping_key(push_gateway_grouping_key).map_err(|reason| {
            ConfigError::new(
                "metrics.push_gateway_grouping_key",
                format!("{reason}; expected k1=v1;k2=v2"),
            )
        })?;
        nonzero_duration("metrics.push_timeout", *push_timeout)?;
        refuse_if(
            *http_port == grpc_port && grpc_port != 0,
            "metrics.http_port",
            format!("{http_port} is also grpc_port; the two listeners need different ports"),
        )?;
        if let Some(endpoint) = push_gateway_endpoint {
            let rest = endpoint
                .strip_prefix("http://")
                .or_else(|| endpoint.strip_prefix("https://"));
            refuse_if(
                rest.is_none_or(|rest| rest.is_empty() || rest.contains(char::is_whitespace)),
                "metrics.push_gateway_endpoint",
                format!("{endpoint:?}: expected an http:// or https:// URL"),
            )?;
        }
        nonzero_duration("metrics.push_interval", *push_interval)
    }
}

impl HttpsConfig {
    /// The key material is one of the two shapes, and the port is the listener's own (`others`:
    /// the other listeners' keys and ports; 0 and -1 never collide).
    fn check(&self, others: [(&str, i32); 3]) -> Result<(), ConfigError> {
        let HttpsConfig {
            port,
            cert_path,
            key_path,
            keystore_path,
            keystore_password: _,
            key_password: _,
        } = self;
        match (keystore_path, cert_path, key_path) {
            (Some(_), None, None) | (None, Some(_), Some(_)) => {}
            (Some(_), _, _) => {
                return Err(ConfigError::new(
                    "metrics.https.keystore_path",
                    "set either keystore_path, or cert_path and key_path, not both",
                ))
            }
            (None, Some(_), None) => {
                return Err(ConfigError::new(
                    "metrics.https.key_path",
                    "is required with cert_path",
                ))
            }
            (None, None, _) => {
                return Err(ConfigError::new(
                    "metrics.https.cert_path",
                    "set cert_path and key_path (PEM), or keystore_path",
                ))
            }
        }
        for (key, other) in others {
            refuse_if(
                *port != 0 && i32::from(*port) == other,
                "metrics.https.port",
                format!("{port} is also {key}; each listener needs its own port"),
            )?;
        }
        Ok(())
    }
}

impl ShutdownConfig {
    fn check(&self) -> Result<(), ConfigError> {
        // Both budgets may be 0 ("don't wait"); nothing to check yet, but destructure so a new
        // field gets a decision.
        let ShutdownConfig {
            drain_timeout: _,
            spill_timeout: _,
            after_decommission: _,
        } = self;
        Ok(())
    }
}

impl CoordinatorConfig {
    fn check(&self) -> Result<(), ConfigError> {
        let CoordinatorConfig {
            enabled: _,
            register_self: _,
            server_heartbeat_timeout,
            app_heartbeat_timeout,
            shuffle_server_number,
            remote_storage_path,
            client_conf,
            remote_storage_cluster_conf,
            assignment_host_strategy: _,
            select_partition_strategy: _,
            access_checkers,
            access_load_memory_percentage,
            access_load_server_num_threshold,
            access_candidates_path,
            access_candidates_update_interval,
            quota_default_app_num: _,
            quota_path: _,
            quota_update_interval,
            dynamic_client_conf_enabled,
            dynamic_client_conf_path,
            dynamic_client_conf_parser: _,
            dynamic_client_conf_update_interval,
            exclude_nodes_file_path: _,
            exclude_nodes_check_interval,
            dashboard_sample_interval,
        } = self;
        refuse_if(
            !(0.0..=100.0).contains(access_load_memory_percentage),
            "coordinator.access_load_memory_percentage",
            format!("must be in [0, 100], got {access_load_memory_percentage}"),
        )?;
        refuse_if(
            *access_load_server_num_threshold == Some(0),
            "coordinator.access_load_server_num_threshold",
            "must be at least 1 when set",
        )?;
        let candidates_on =
            access_checkers.contains(&crate::config::coordinator::AccessCheckerKind::Candidates);
        refuse_if(
            candidates_on && access_candidates_path.is_none(),
            "coordinator.access_candidates_path",
            "must be set when access_checkers includes \"candidates\"",
        )?;
        refuse_if(
            *dynamic_client_conf_enabled && dynamic_client_conf_path.is_none(),
            "coordinator.dynamic_client_conf_path",
            "must be set when dynamic_client_conf_enabled is true",
        )?;
        nonzero_duration(
            "coordinator.access_candidates_update_interval",
            *access_candidates_update_interval,
        )?;
        nonzero_duration("coordinator.quota_update_interval", *quota_update_interval)?;
        nonzero_duration(
            "coordinator.dynamic_client_conf_update_interval",
            *dynamic_client_conf_update_interval,
        )?;
        nonzero_duration(
            "coordinator.exclude_nodes_check_interval",
            *exclude_nodes_check_interval,
        )?;
        nonzero_duration(
            "coordinator.dashboard_sample_interval",
            *dashboard_sample_interval,
        )?;
        for (cluster, items) in remote_storage_cluster_conf {
            refuse_if(
                cluster.is_empty() || cluster.contains([',', ';', '=']),
                "coordinator.remote_storage_cluster_conf",
                format!("{cluster:?}: expected a storage host"),
            )?;
            refuse_if(
                items.keys().any(|k| k.trim().is_empty()),
                "coordinator.remote_storage_cluster_conf",
                format!("{cluster:?}: keys must be non-empty"),
            )?;
        }
        nonzero_duration(
            "coordinator.server_heartbeat_timeout",
            *server_heartbeat_timeout,
        )?;
        nonzero_duration("coordinator.app_heartbeat_timeout", *app_heartbeat_timeout)?;
        at_least_one("coordinator.shuffle_server_number", *shuffle_server_number)?;
        if let Some(path) = remote_storage_path {
            refuse_if(
                path.split(',').any(|p| p.trim().is_empty()) || path.contains(char::is_whitespace),
                "coordinator.remote_storage_path",
                format!("{path:?}: expected paths or URIs without spaces, comma-separated"),
            )?;
        }
        for key in client_conf.keys() {
            refuse_if(
                key.trim().is_empty(),
                "coordinator.client_conf",
                "keys must be non-empty",
            )?;
        }
        Ok(())
    }
}

/// Fails with `reason` under `key` when `bad`, so each rule is one statement.
fn refuse_if(bad: bool, key: &str, reason: impl Into<String>) -> Result<(), ConfigError> {
    if bad {
        return Err(ConfigError::new(key, reason));
    }
    Ok(())
}

fn nonzero_size(key: &str, size: ByteSize) -> Result<(), ConfigError> {
    refuse_if(size.as_u64() == 0, key, "must be greater than 0")
}

fn nonzero_duration(key: &str, duration: Duration) -> Result<(), ConfigError> {
    refuse_if(duration.is_zero(), key, "must be greater than 0s")
}

fn at_least_one(key: &str, n: usize) -> Result<(), ConfigError> {
    refuse_if(n == 0, key, "must be at least 1")
}

/// Whether `x` is in `(0, 1]`; false for NaN.
fn in_unit_interval(x: f64) -> bool {
    x > 0.0 && x <= 1.0
}

/// `x` is in `(0, 1]`, else the error names `key`.
fn in_unit_interval_or_refuse(key: &str, x: f64) -> Result<(), ConfigError> {
    refuse_if(
        !in_unit_interval(x),
        key,
        format!("must be in (0, 1], got {x}"),
    )
}

/// Checks `0 < low < high <= 1`, blaming the key that is out of place.
fn watermarks(
    (low_key, low): (&str, f64),
    (high_key, high): (&str, f64),
) -> Result<(), ConfigError> {
    in_unit_interval_or_refuse(high_key, high)?;
    refuse_if(
        low.is_nan() || low <= 0.0,
        low_key,
        format!("must be greater than 0, got {low}"),
    )?;
    refuse_if(
        low >= high,
        low_key,
        format!("must be below {high_key} ({high}), got {low}"),
    )?;
    Ok(())
}

/// Accepts `host:port` with a DNS name, IPv4 address or bracketed IPv6 address and a non-zero
/// port; rejects URLs and bare hosts.
fn check_host_port(addr: &str) -> Result<(), String> {
    let (host, port) = addr
        .rsplit_once(':')
        .ok_or_else(|| "expected host:port".to_string())?;
    match port.parse::<u16>() {
        Ok(p) if p != 0 => {}
        _ => return Err(format!("port {port:?} is not a number in 1..=65535")),
    }
    let host_ok = if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        v6.parse::<std::net::Ipv6Addr>().is_ok()
    } else {
        !host.is_empty()
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
    };
    if !host_ok {
        return Err(format!(
            "host {host:?} is not a hostname, IPv4 address or [IPv6] address"
        ));
    }
    Ok(())
}
