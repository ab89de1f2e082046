//! Typed server configuration: TOML sections with one set of defaults, the env overlay, and
//! cross-field validation, all failing with the dotted key an operator has to fix.
//!
//! The file shape follows what riffle/Uniffle operators already write (`store_type`,
//! `[memory_store]`, `[localfile_store]`, `[hybrid_store]`, …). Every section is
//! `#[serde(default, deny_unknown_fields)]`: a missing key takes the section's `Default`, and a
//! typo (`capacitty`) fails startup instead of silently running with the default.

mod bytesize;
pub mod coordinator;
mod error;
pub mod java;
mod load;
pub mod operator;
mod quota;
pub mod reload;
pub mod sensitive;
#[cfg(test)]
mod tests;
mod validate;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use bytesize::{ByteSize, ParseByteSizeError};
pub use coordinator::CoordinatorConfig;
pub use error::ConfigError;
pub use quota::{MemoryShare, QuotaConfig};

use error::error_with_key;

/// Env variable that overrides `worker_ip` (the address this server registers with the
/// coordinators). Set by deployment tooling, e.g. from the pod IP. Empty means unset.
pub const ENV_WORKER_IP: &str = "WORKER_IP";

/// Env variable naming the config file when no explicit `--config` path is given. Empty means
/// unset.
pub const ENV_WORKER_CONFIG_PATH: &str = "WORKER_CONFIG_PATH";

/// Env variable that sets `metrics.admin_token` (kept out of config files that many can read).
/// Empty means unset.
pub const ENV_ADMIN_TOKEN: &str = "SPILLWAY_ADMIN_TOKEN";

/// How often the config file is re-read for the reconfigurable keys (`reconfigure_interval`),
/// Java's `rss.reconfigure.interval.sec` default. Default: 5 s.
pub const RECONFIGURE_INTERVAL: Duration = Duration::from_secs(5);

/// The config file read, if present, when nothing else names one: where the container image
/// bakes its config (an env variable there would shadow the Uniffle operator's mount).
pub const DEFAULT_CONFIG_FILE: &str = "/etc/spillway/config.toml";

/// A config value that must not reach logs: `Debug` prints `"<redacted>"`, so a config logged
/// with `?config` does not leak it.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("\"<redacted>\"")
    }
}

impl std::ops::Deref for Secret {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

/// What a Spillway process runs (`role`). Default: `server`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// A shuffle server, with the embedded coordinator when `coordinator.enabled`.
    #[default]
    Server,
    /// A coordinator-only process: the `[coordinator]` policy on `grpc_port`, its REST API and
    /// metrics on `metrics.http_port`; the store, Netty and heartbeat settings are not used.
    Coordinator,
}

/// Where spilled data goes, mirroring Uniffle's `rss.storage.type`.
///
/// Which tiers hold the data, as Uniffle's `StorageType` names them. Memory always buffers
/// writes; the `MEMORY_` prefix says whether clients also *read* from memory.
///
/// Without it (Java's `LOCALFILE`, `HDFS`, `LOCALFILE_HDFS`) clients read files only and
/// call `commitShuffleTask` after each map task, and the server answers that call only once the
/// shuffle's buffered blocks are on a file tier (`app.commit_timeout`), as the Java server does
/// for these types; otherwise a reader would miss blocks still in memory.
/// Default: `MEMORY_LOCALFILE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum StoreType {
    /// `MEMORY_LOCALFILE`: spill to local disks only (the usual deployment).
    #[default]
    MemoryLocalfile,
    /// `MEMORY_HDFS`: spill to the HDFS path each app registers.
    MemoryHdfs,
    /// `MEMORY_LOCALFILE_HDFS`: local disks, with large spills and overflow going to HDFS.
    MemoryLocalfileHdfs,
    /// `LOCALFILE`: as `MEMORY_LOCALFILE`, and a commit waits until the shuffle is on disk.
    Localfile,
    /// `HDFS`: as `MEMORY_HDFS`, and a commit waits until the shuffle is on HDFS.
    Hdfs,
    /// `LOCALFILE_HDFS`: as `MEMORY_LOCALFILE_HDFS`, and a commit waits until the shuffle is
    /// on a file tier.
    LocalfileHdfs,
}

impl StoreType {
    /// Every type, with its Uniffle name (Java's `rss.storage.type` values that name a file
    /// tier).
    pub const ALL: [(&'static str, StoreType); 6] = [
        (
            StoreType::MemoryLocalfile.name(),
            StoreType::MemoryLocalfile,
        ),
        (StoreType::MemoryHdfs.name(), StoreType::MemoryHdfs),
        (
            StoreType::MemoryLocalfileHdfs.name(),
            StoreType::MemoryLocalfileHdfs,
        ),
        (StoreType::Localfile.name(), StoreType::Localfile),
        (StoreType::Hdfs.name(), StoreType::Hdfs),
        (StoreType::LocalfileHdfs.name(), StoreType::LocalfileHdfs),
    ];

    /// The Uniffle name (`MEMORY_LOCALFILE`, …), for messages.
    pub const fn name(self) -> &'static str {
        match self {
            StoreType::MemoryLocalfile => "MEMORY_LOCALFILE",
            StoreType::MemoryHdfs => "MEMORY_HDFS",
            StoreType::MemoryLocalfileHdfs => "MEMORY_LOCALFILE_HDFS",
            StoreType::Localfile => "LOCALFILE",
            StoreType::Hdfs => "HDFS",
            StoreType::LocalfileHdfs => "LOCALFILE_HDFS",
        }
    }

    /// Whether local disks are a spill target, so `localfile_store.data_paths` must be usable.
    pub fn uses_localfile(self) -> bool {
        matches!(
            self,
            StoreType::MemoryLocalfile
                | StoreType::MemoryLocalfileHdfs
                | StoreType::Localfile
                | StoreType::LocalfileHdfs
        )
    }

    /// Whether HDFS is a spill target.
    pub fn uses_hdfs(self) -> bool {
        matches!(
            self,
            StoreType::MemoryHdfs
                | StoreType::MemoryLocalfileHdfs
                | StoreType::Hdfs
                | StoreType::LocalfileHdfs
        )
    }

    /// Whether clients of this type read from memory (Java's `StorageType.withMemory`); when
    /// not, `commitShuffleTask` waits for the shuffle's spill.
    pub fn with_memory(self) -> bool {
        matches!(
            self,
            StoreType::MemoryLocalfile | StoreType::MemoryHdfs | StoreType::MemoryLocalfileHdfs
        )
    }
}

/// The whole server configuration, as read from the TOML file plus the env overlay.
///
/// Build it with [`Config::load`] (startup) or [`Config::from_toml_str`] (tests); both return
/// only validated configs. `Config::default()` is a valid config that needs no external service.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// What this process is: a shuffle server (with the embedded coordinator when
    /// `coordinator.enabled`), or a coordinator-only process, which serves the coordinator's
    /// gRPC service and its HTTP metrics and nothing else (no store, no heartbeats). A Java
    /// `coordinator.conf` sets it to `coordinator`. Default: `"server"`.
    pub role: Role,
    /// Which tiers sit behind memory. Default: `MEMORY_LOCALFILE`.
    pub store_type: StoreType,
    /// gRPC listen port; 0 picks an ephemeral port (tests). Default: 19999 (Uniffle's
    /// `rss.rpc.server.port`).
    pub grpc_port: u16,
    /// Netty data-plane port (Uniffle `rss.server.netty.port`): 0 picks a free port (tests),
    /// -1 turns the plane off (gRPC only). When on, the server id becomes
    /// `<ip>-<grpcPort>-<nettyPort>` and heartbeats carry both `GRPC` and `GRPC_NETTY` tags.
    /// In -1..=65535 and distinct from the other ports. Default: 17000 (Uniffle 0.10).
    pub netty_port: i32,
    /// Local address the listeners bind to; `127.0.0.1` keeps a server private to the host
    /// (tests). Default: `"0.0.0.0"`.
    pub bind_ip: String,
    /// Coordinators to heartbeat, as `host:port`; empty runs standalone. Default: `[]`.
    pub coordinator_quorum: Vec<String>,
    /// Tags reported in heartbeats so coordinators can place apps on tagged servers; no commas.
    /// Default: `[]`.
    pub tags: Vec<String>,
    /// Time between coordinator heartbeats. Default: `10s`.
    #[serde(with = "humantime_serde")]
    pub heartbeat_interval: Duration,
    /// How often the config file (`--config`) is checked for changes to the keys that can
    /// change at runtime (see `config::reload`); a change is applied once the file's
    /// modification time moves. Must be > 0. Default: `5s` (Java's
    /// `rss.reconfigure.interval.sec`).
    #[serde(with = "humantime_serde")]
    pub reconfigure_interval: Duration,
    /// Address registered with coordinators; `None` means detect the local IP. Overridden by env
    /// `WORKER_IP`. Default: none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_ip: Option<String>,
    /// Write and read memory. Default: see [`MemoryStoreConfig`].
    pub memory_store: MemoryStoreConfig,
    /// Local disks. Default: see [`LocalfileStoreConfig`].
    pub localfile_store: LocalfileStoreConfig,
    /// HDFS writes. Default: see [`HdfsStoreConfig`].
    pub hdfs_store: HdfsStoreConfig,
    /// When and how memory spills to the next tier. Default: see [`HybridStoreConfig`].
    pub hybrid_store: HybridStoreConfig,
    /// App lifecycle. Default: see [`AppConfig`].
    pub app: AppConfig,
    /// HTTP metrics endpoint and push gateway. Default: see [`MetricsConfig`].
    pub metrics: MetricsConfig,
    /// Graceful-shutdown budgets. Default: see [`ShutdownConfig`].
    pub shutdown: ShutdownConfig,
    /// The embedded Uniffle coordinator. Default: see [`CoordinatorConfig`].
    pub coordinator: CoordinatorConfig,
    /// Restart recovery (the metadata journal). Default: see [`RecoveryConfig`].
    pub recovery: RecoveryConfig,
    /// What one client, connection or request may take. Default: see [`LimitsConfig`].
    pub limits: LimitsConfig,
    /// Audit logs. Default: see [`AuditConfig`].
    pub audit: AuditConfig,
    /// Health checks that report the server UNHEALTHY to coordinators. Default: off, see
    /// [`HealthConfig`].
    pub health: HealthConfig,
    /// Per-app and per-user quotas on the file tiers. Default: see [`QuotaConfig`].
    pub quota: QuotaConfig,
    /// The `rss.*` properties of the Java `server.conf` this config was read from, in file
    /// order (last value of a repeated key), exactly as written: the Java server's
    /// `/api/shuffleServer/conf` lists what the operator set, so ours does too. Empty for a
    /// TOML config. Not a config key.
    #[serde(skip)]
    pub java_properties: Vec<(String, String)>,
    /// The file this config was loaded from (`--config` or `WORKER_CONFIG_PATH`), which the
    /// server re-reads every `reconfigure_interval` for runtime changes; `None` for built-in
    /// defaults and configs made in code. Not a config key.
    #[serde(skip)]
    pub source_path: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            role: Role::default(),
            store_type: StoreType::default(),
            grpc_port: 19999,
            netty_port: 17000,
            bind_ip: "0.0.0.0".into(),
            coordinator_quorum: Vec::new(),
            tags: Vec::new(),
            heartbeat_interval: Duration::from_secs(10),
            reconfigure_interval: RECONFIGURE_INTERVAL,
            worker_ip: None,
            memory_store: MemoryStoreConfig::default(),
            localfile_store: LocalfileStoreConfig::default(),
            hdfs_store: HdfsStoreConfig::default(),
            hybrid_store: HybridStoreConfig::default(),
            app: AppConfig::default(),
            metrics: MetricsConfig::default(),
            shutdown: ShutdownConfig::default(),
            recovery: RecoveryConfig::default(),
            coordinator: CoordinatorConfig::default(),
            limits: LimitsConfig::default(),
            audit: AuditConfig::default(),
            health: HealthConfig::default(),
            quota: QuotaConfig::default(),
            java_properties: Vec::new(),
            source_path: None,
        }
    }
}

/// `[memory_store]`: how much memory holds written blocks and serves reads.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct MemoryStoreConfig {
    /// Write-memory cap: reservations beyond it get `NO_BUFFER` (back-pressure, never OOM).
    /// Must be > 0. Default: `"1G"`.
    pub capacity: ByteSize,
    /// Read-memory cap for data being served; a read that would reach it gets `NO_BUFFER`.
    /// Must be > 0. Default: `"256M"`.
    pub read_capacity: ByteSize,
    /// How long a `requireBuffer` reservation lives without a matching send before it is
    /// released. Default: `20s` (Uniffle's `rss.server.preAllocation.expired`).
    #[serde(with = "humantime_serde")]
    pub buffer_ticket_timeout: Duration,
    /// How often expired reservations are swept. Default: `10s`.
    #[serde(with = "humantime_serde")]
    pub buffer_ticket_check_interval: Duration,
    /// How long a `requireBuffer` that finds memory full waits for a release (a spill
    /// completing) before it answers `NO_BUFFER`; `0s` answers at once, as Java does. Writers
    /// then take freed memory at once instead of after their back-off. Default: `100ms`.
    #[serde(with = "humantime_serde")]
    pub require_buffer_wait: Duration,
}

impl Default for MemoryStoreConfig {
    fn default() -> Self {
        MemoryStoreConfig {
            capacity: ByteSize(ByteSize::GIB),
            read_capacity: ByteSize(256 * ByteSize::MIB),
            buffer_ticket_timeout: Duration::from_secs(20),
            buffer_ticket_check_interval: Duration::from_secs(10),
            require_buffer_wait: Duration::from_millis(100),
        }
    }
}

/// `[localfile_store]`: the local disks spills are written to.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct LocalfileStoreConfig {
    /// One root directory per disk; must be non-empty and distinct when `store_type` includes
    /// LOCALFILE. Default: `["/tmp/spillway/data"]`.
    pub data_paths: Vec<PathBuf>,
    /// riffle's key, kept so its configs load unchanged: the server reports itself UNHEALTHY
    /// while fewer disks than this can take new partitions (0: while none can). At most
    /// `data_paths.len()`. Java's rule (a share of healthy disks) is `[health]`. Default: 0.
    pub healthy_check_min_disks: usize,
    /// What each data path may hold of this server's own files (data + index), as Java's
    /// `rss.server.disk.capacity`; unset = `disk_capacity_ratio` × the file system's size. A path
    /// with less free space than this at start-up fails to initialise. Default: unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk_capacity: Option<ByteSize>,
    /// Share of each data path's file system this server may fill when `disk_capacity` is
    /// unset; in (0, 1]. Default: 0.9 (Java's `rss.server.disk.capacity.ratio`).
    pub disk_capacity_ratio: f64,
    /// Ratio of a path's capacity (its own bytes over `disk_capacity`) at which it stops taking
    /// new partitions; in (0, 1]. Default: 0.95.
    pub disk_high_watermark: f64,
    /// Ratio of a path's capacity below which a path over the high watermark takes new
    /// partitions again; at most `disk_high_watermark`. Default: 0.85.
    pub disk_low_watermark: f64,
    /// Also hold each path's whole file-system usage to the same watermarks (for disks shared
    /// with other services), as Java's `rss.server.disk-capacity.watermark.check.enabled`.
    /// Default: false.
    pub disk_usage_watermark_check: bool,
    /// How many data paths may fail to initialise (cannot be created, no file-system size, less
    /// free space than `disk_capacity`) before start-up fails; the failed ones are left out
    /// until the next start. Default: 0 (Java's
    /// `rss.server.localstorage.initialize.max.fail.number`).
    pub init_max_failed_paths: usize,
    /// Concurrent writes per disk (write permits). At least 1. Default: 8.
    pub disk_max_concurrency: usize,
    /// How often each disk's health and usage are probed (always on; `[health]` adds the
    /// server-level verdict). Default: `10s`.
    #[serde(with = "humantime_serde")]
    pub disk_health_check_interval: Duration,
    /// Whether a spill is `fdatasync`ed before memory is released, so acknowledged data survives
    /// a power loss. Default: true.
    pub sync_on_write: bool,
    /// Whether a spill writes the whole 4 KiB pages of its data with `O_DIRECT`, around the
    /// page cache (a file system that refuses it is written buffered). Not a Java setting. Off
    /// by default: it saves CPU only where page-cache pages are dear to get, and a reader of a
    /// just-spilled range then reads the disk (benches/README, round 9). Default: false.
    pub direct_io: bool,
    /// A spill write to one disk that takes longer marks that disk unhealthy (a hung disk) and
    /// the partition moves to another disk. Default: `60s`.
    #[serde(with = "humantime_serde")]
    pub write_timeout: Duration,
    /// How often the data paths are swept for directories of apps the server does not know
    /// (left by a crash without recovery, or by an earlier server on the same disks); they are
    /// deleted, as Java's leak check does. Default: `1h` (Java's
    /// `rss.server.leak.shuffledata.check.interval`).
    #[serde(with = "humantime_serde")]
    pub leak_check_interval: Duration,
}

impl Default for LocalfileStoreConfig {
    fn default() -> Self {
        LocalfileStoreConfig {
            data_paths: vec![PathBuf::from("/tmp/spillway/data")],
            healthy_check_min_disks: 0,
            disk_capacity: None,
            disk_capacity_ratio: 0.9,
            disk_high_watermark: 0.95,
            disk_low_watermark: 0.85,
            disk_usage_watermark_check: false,
            init_max_failed_paths: 0,
            disk_max_concurrency: 8,
            disk_health_check_interval: Duration::from_secs(10),
            sync_on_write: true,
            direct_io: false,
            write_timeout: Duration::from_secs(60),
            leak_check_interval: Duration::from_secs(3600),
        }
    }
}

/// `[health]`: Java's health checks (`rss.server.health.*`). While on, every `check_interval`
/// the storage checker probes every data path and, if it passes, the health script runs; the
/// first failure makes the server UNHEALTHY in its heartbeats, a pass where both succeed makes
/// it ACTIVE again. Decommissioning is never overridden.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct HealthConfig {
    /// Run the health checks (`rss.server.health.check.enable`); needs a `store_type` with
    /// LOCALFILE, as in Java. Default: false.
    pub enabled: bool,
    /// Time between two passes (`rss.server.health.check.interval.ms`). Default: `5s`.
    #[serde(with = "humantime_serde")]
    pub check_interval: Duration,
    /// The server is healthy while at least this share of its data paths is healthy
    /// (`rss.server.health.min.storage.percentage` / 100); in [0, 1]. Default: 0.8.
    pub min_healthy_disks_ratio: f64,
    /// A data path whose file system is this full or fuller is not healthy
    /// (`rss.server.health.max.storage.usage.percentage` / 100); in [0, 1]. Default: 0.9.
    pub disk_max_usage: f64,
    /// ...until its usage falls to this (`rss.server.health.storage.recovery.usage.percentage`
    /// / 100); in [0, 1]. Default: 0.8.
    pub disk_recovery_usage: f64,
    /// A data path whose probe takes longer is not healthy
    /// (`rss.server.health.checker.localStorageExecutionTimeoutMS`). Default: `60s`.
    #[serde(with = "humantime_serde")]
    pub disk_check_timeout: Duration,
    /// Whether one data path whose probe fails (a corrupted storage, in Java's words) makes the
    /// server unhealthy whatever the healthy share
    /// (`rss.server.health.markUnhealthyOnceStorageCorruption`). Default: false.
    pub unhealthy_on_failed_disk: bool,
    /// An executable run at every pass after the storage checker: the server is unhealthy when
    /// it exits non-zero, prints a line starting with `ERROR` on standard output, or outlives
    /// `script_timeout` (`rss.server.health.checker.script.path` with
    /// `org.apache.uniffle.server.HealthScriptChecker` listed). Default: none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub script_path: Option<PathBuf>,
    /// How long the script may run before it is killed and the pass fails
    /// (`rss.server.health.checker.script.execute.timeout`). Default: `5s`.
    #[serde(with = "humantime_serde")]
    pub script_timeout: Duration,
}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            enabled: false,
            check_interval: Duration::from_secs(5),
            min_healthy_disks_ratio: 0.8,
            disk_max_usage: 0.9,
            disk_recovery_usage: 0.8,
            disk_check_timeout: Duration::from_secs(60),
            unhealthy_on_failed_disk: false,
            script_path: None,
            script_timeout: Duration::from_secs(5),
        }
    }
}

/// `[hdfs_store]`: the HDFS tier (`MEMORY_HDFS`, `MEMORY_LOCALFILE_HDFS`): writer limits, which
/// spills go to HDFS, how failures are handled, and the Kerberos identity.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct HdfsStoreConfig {
    /// Concurrent HDFS spills across the server. At least 1. Default: 10.
    pub max_concurrency: usize,
    /// Concurrent writes to one partition's HDFS files; each concurrent writer has its own file
    /// pair (`<serverId>_<writerIndex>_<failTimes>`; `<serverId>_<failTimes>` when 1). At least 1.
    /// Default: 20. An app may ask for its own number at registration
    /// (`maxConcurrencyPerPartitionToWrite`), capped by the next key.
    pub partition_write_max_concurrency: usize,
    /// The most writers per partition an app may ask for. Default: 2147483647 (Java's
    /// `rss.server.max.concurrency.limit.of.per-partition.write`: no cap).
    pub partition_write_max_concurrency_limit: usize,
    /// In `MEMORY_LOCALFILE_HDFS`, a spill batch at least this large goes to HDFS (so do all
    /// spills of a huge partition); smaller ones go to local files. Uniffle's
    /// `rss.server.flush.cold.storage.threshold.size`. Must be > 0. Default: `"64M"`.
    pub cold_storage_threshold_size: ByteSize,
    /// One HDFS append (data and index) taking longer is abandoned: its file pair is never
    /// written again and the spill is retried or goes to local files. Must be > 0.
    /// Default: `30s`.
    #[serde(with = "humantime_serde")]
    pub write_timeout: Duration,
    /// After a failed append, HDFS takes no new spills for this long (they go to local files
    /// when the store type has them, else wait); then one spill tries again. Must be > 0.
    /// Default: `10s`.
    #[serde(with = "humantime_serde")]
    pub failure_cooldown: Duration,
    /// How long a partition's file pair stays open after an append, for the next append to
    /// write on: each append makes its bytes visible with an `hsync` (milliseconds) instead of
    /// a close, which waits for the NameNode to confirm the last block (about half a second
    /// per file). `0s` closes the pair after every append, as the Java server does. At most
    /// `30s`: a DataNode drops a write pipeline idle for its read timeout (60 s by default).
    /// Default: `2s`.
    #[serde(with = "humantime_serde")]
    pub keep_open: Duration,
    /// The most file pairs kept open across the server; each holds a write pipeline (a
    /// transfer thread on each DataNode of the block). Past it, appends close their pairs.
    /// Default: 40.
    pub max_open_pairs: usize,
    /// Kerberos principal the server logs in as (`hadoop.security.authentication = kerberos` in
    /// `HADOOP_CONF_DIR`). Unset: the default principal of the credential cache (`KRB5CCNAME`).
    /// Default: none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kerberos_principal: Option<String>,
    /// Keytab for `kerberos_principal`; needs the principal. Default: none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kerberos_keytab: Option<PathBuf>,
    /// Whose identity owns the files apps spill to HDFS: `"auto"` (the server's own under
    /// simple authentication, a proxy of each app's user under Kerberos, as the Java server
    /// does), `"server"` (always the server's own: its principal under Kerberos), or
    /// `"app_user"` (always the app's user, also under simple authentication).
    /// Default: `"auto"`.
    pub write_as: HdfsWriteAs,
    /// Under simple authentication, the HDFS user the server writes as. Unset: the
    /// `HADOOP_USER_NAME` environment variable, else the server's OS user (the Java server's
    /// identity). Not used under Kerberos, where the principal is the identity. Default: none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Hadoop conf items of the server (the Java server's `rss.server.hadoop.*`, prefix
    /// stripped): applied on top of `HADOOP_CONF_DIR`, under each app's remote-storage conf
    /// items, which win as they do in Java. E.g. `{ "fs.defaultFS" = "hdfs://ns" }`.
    /// Default: empty.
    pub hadoop_conf: BTreeMap<String, String>,
}

impl Default for HdfsStoreConfig {
    fn default() -> Self {
        HdfsStoreConfig {
            max_concurrency: 10,
            partition_write_max_concurrency: 20,
            partition_write_max_concurrency_limit: i32::MAX as usize,
            cold_storage_threshold_size: ByteSize(64 << 20),
            write_timeout: Duration::from_secs(30),
            failure_cooldown: Duration::from_secs(10),
            keep_open: Duration::from_secs(2),
            max_open_pairs: 40,
            kerberos_principal: None,
            kerberos_keytab: None,
            write_as: HdfsWriteAs::Auto,
            user: None,
            hadoop_conf: BTreeMap::new(),
        }
    }
}

/// `hdfs_store.write_as`: whose identity owns the files an app spills to HDFS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HdfsWriteAs {
    /// The server's own identity under simple authentication, a proxy user of the app's user
    /// when Hadoop security is on (what the Java server does).
    #[default]
    Auto,
    /// Always the server's own identity (its principal under Kerberos). The Java server's
    /// `rss.security.hadoop.kerberos.proxy.user.enable = false`.
    Server,
    /// Always the app's user: under simple authentication the server claims the job's user
    /// name, so the job's own HDFS permissions apply (an opt-in; Java has no equivalent).
    AppUser,
}

/// `[hybrid_store]`: when memory spills, how much, and how huge partitions are limited.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct HybridStoreConfig {
    /// Fraction of `memory_store.capacity` in use that wakes the spiller; in (0, 1].
    /// Default: 0.8.
    pub memory_spill_high_watermark: f64,
    /// Fraction the spiller spills down to; above 0 and below the high watermark. Default: 0.2.
    pub memory_spill_low_watermark: f64,
    /// A single partition buffer larger than this is spilled on its own, whatever the
    /// watermarks. Must be > 0. Default: `"128M"` (Uniffle's
    /// `rss.server.single.buffer.flush.threshold`).
    pub memory_single_buffer_max_spill_size: ByteSize,
    /// Whether `memory_single_buffer_max_spill_size` applies to every buffer. With false only a
    /// huge partition's buffer is spilled on its own, the rest wait for the watermarks (fewer,
    /// larger files). Default: true (Java's `rss.server.single.buffer.flush.enabled`).
    pub memory_single_buffer_spill: bool,
    /// Spills running at once. At least 1. Default: 8.
    pub spill_concurrency: usize,
    /// A partition holding more than this (memory plus spilled) is "huge" and gets a tighter
    /// memory cap. Must be > 0. Default: `"20G"`.
    pub huge_partition_size_threshold: ByteSize,
    /// A huge partition may hold at most this fraction of `memory_store.capacity` in memory;
    /// in (0, 1]. Default: 0.2.
    pub huge_partition_memory_limit_ratio: f64,
    /// Writes that would take a partition beyond this size are rejected; `None` means no limit.
    /// Must be > 0 when set. Default: none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub huge_partition_hard_limit: Option<ByteSize>,
    /// A 0.10 client's `requireBuffer` that takes a partition beyond this size (its encoded
    /// size so far plus what the request asks for it) still gets its ticket, and the answer
    /// lists the partition in `needSplitPartitionIds`: the client has the driver reassign the
    /// partition's later blocks to another server (Uniffle's
    /// `rss.server.huge-partition.split.limit`). `"0"` lists every partition a request
    /// carries; none means never. Default: none (Java's `Long.MAX_VALUE`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub huge_partition_split_limit: Option<ByteSize>,
    /// Upper bound on the backoff between retries of a failed spill. Must be > 0.
    /// Default: `30s`.
    #[serde(with = "humantime_serde")]
    pub spill_retry_max_backoff: Duration,
}

impl Default for HybridStoreConfig {
    fn default() -> Self {
        HybridStoreConfig {
            memory_spill_high_watermark: 0.8,
            memory_spill_low_watermark: 0.2,
            memory_single_buffer_max_spill_size: ByteSize(128 * ByteSize::MIB),
            memory_single_buffer_spill: true,
            spill_concurrency: 8,
            huge_partition_size_threshold: ByteSize(20 * ByteSize::GIB),
            huge_partition_memory_limit_ratio: 0.2,
            huge_partition_hard_limit: None,
            huge_partition_split_limit: None,
            spill_retry_max_backoff: Duration::from_secs(30),
        }
    }
}

/// `[app]`: app lifecycle on this server.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct AppConfig {
    /// An app with no heartbeat for this long is expired and its data purged. Must be > 0.
    /// Default: `60s` (Uniffle's `rss.server.app.expired.withoutHeartbeat`).
    #[serde(with = "humantime_serde")]
    pub app_heartbeat_timeout: Duration,
    /// How often apps are checked for expiry. Must be > 0. Default: `10s`.
    #[serde(with = "humantime_serde")]
    pub expiry_check_interval: Duration,
    /// How long `finishShuffle`, and `commitShuffleTask` under a store type without `MEMORY_`,
    /// wait for the shuffle's spill before answering an error. Must be > 0. Default: `600s`
    /// (Uniffle's `rss.server.commit.timeout`).
    #[serde(with = "humantime_serde")]
    pub commit_timeout: Duration,
}

impl Default for AppConfig {
    fn default() -> Self {
        AppConfig {
            app_heartbeat_timeout: Duration::from_secs(60),
            expiry_check_interval: Duration::from_secs(10),
            commit_timeout: Duration::from_secs(600),
        }
    }
}

/// `[metrics]`: the HTTP endpoint (`/metrics`, `/status`, admin) and the optional push gateway.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsConfig {
    /// HTTP listen port; 0 picks an ephemeral port. Must differ from `grpc_port` unless both are
    /// 0. Default: 19998 (Uniffle's `rss.jetty.http.port`).
    pub http_port: u16,
    /// Prometheus push gateway base URL (`http://…` or `https://…`); `None` disables pushing.
    /// Default: none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub push_gateway_endpoint: Option<String>,
    /// How often metrics are pushed when a gateway is set. Must be > 0. Default: `10s`.
    #[serde(with = "humantime_serde")]
    pub push_interval: Duration,
    /// Push gateway job name (Uniffle `rss.metrics.prometheus.pushgateway.jobname`); no `/`.
    /// Default: `spillway`.
    pub push_gateway_job: String,
    /// Extra grouping-key pairs `k1=v1;k2=v2` (Uniffle
    /// `rss.metrics.prometheus.pushgateway.groupingkey`); `instance=<server id>` is always
    /// added. Default: empty.
    pub push_gateway_grouping_key: String,
    /// Deadline of one push attempt, so a slow gateway never holds the reporter. Must be > 0.
    /// Default: `5s`.
    #[serde(with = "humantime_serde")]
    pub push_timeout: Duration,
    /// tokio-console port on `bind_ip`, served only by a binary built with the `console`
    /// feature. Default: 6669 (tokio-console's default).
    pub console_port: u16,
    /// Token the HTTP endpoints that change state or cost resources (decommission, profiles)
    /// require as `Authorization: Bearer <token>`. Unset: those endpoints answer loopback
    /// clients only. Env `SPILLWAY_ADMIN_TOKEN` overrides it. Never shown by the conf
    /// endpoint. Default: none.
    #[serde(skip_serializing)]
    pub admin_token: Option<Secret>,
    /// Credentials for HTTP Basic authentication, as the Java server's
    /// `rss.http.basic.authorizationCredentials`: the base64 text of `user:password`, compared
    /// as it stands with what follows `Authorization: Basic ` (Java decodes nothing either).
    /// When set, the guarded endpoints (admin calls, profiles, runtime reconfiguration) accept
    /// these credentials beside the bearer token. Never shown by the conf endpoint. Default:
    /// none.
    #[serde(skip_serializing)]
    pub basic_credentials: Option<Secret>,
    /// Apps listed in each `topN_of_*_data_size_for_app` family (Java
    /// `rss.server.topN.appShuffleDataSize.number`). Default: 10 (Java's).
    pub top_n_apps: usize,
    /// Fill the `write_block_size{appId}` histogram with every received block's payload
    /// length (Java `rss.server.metrics.blockSizeStatisticsEnabled`): one short lock per send
    /// and a series per app and bucket, so off unless asked for. Default: false (Java's).
    pub block_size_statistics: bool,
    /// Its bucket bounds (Java `rss.server.metrics.blockSizeStatistics.buckets`); at least
    /// one when the histogram is on. Default: 32 KiB, 64 KiB, … 16 MiB (Java's).
    pub block_size_buckets: Vec<ByteSize>,
    /// HTTPS on a port of its own beside `http_port`, serving the same endpoints (Java's
    /// `rss.jetty.ssl.enable`, which adds a Jetty connector and keeps the HTTP one). None: HTTP
    /// only. Default: none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub https: Option<HttpsConfig>,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            http_port: 19998,
            push_gateway_endpoint: None,
            push_interval: Duration::from_secs(10),
            push_gateway_job: "spillway".into(),
            push_gateway_grouping_key: String::new(),
            push_timeout: Duration::from_secs(5),
            console_port: 6669,
            admin_token: None,
            basic_credentials: None,
            top_n_apps: 10,
            block_size_statistics: false,
            block_size_buckets: [32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]
                .into_iter()
                .map(|k| ByteSize(k * ByteSize::KIB))
                .collect(),
            https: None,
        }
    }
}

/// `[metrics.https]`: the HTTPS listener and its key material. Either `keystore_path` (a
/// PKCS#12 `.p12`/`.pfx` keystore, or one PEM file with the chain and the key), or `cert_path`
/// with `key_path` (PEM). A JKS keystore is refused with the `keytool` command that converts it.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HttpsConfig {
    /// The HTTPS port on `bind_ip` (Java's `rss.jetty.https.port`, which has no default); 0
    /// picks a free port (tests). Must differ from the other listeners' ports.
    pub port: u16,
    /// PEM certificate chain, leaf first. Needs `key_path`. Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_path: Option<PathBuf>,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1) of `cert_path`. Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_path: Option<PathBuf>,
    /// A PKCS#12 keystore, or a PEM file holding the chain and the key (Java's
    /// `rss.jetty.ssl.keystore.path`). Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keystore_path: Option<PathBuf>,
    /// The keystore's password (`rss.jetty.ssl.keystore.password`); unset opens a keystore
    /// without one. Never shown by the conf endpoint. Default: none.
    #[serde(default, skip_serializing)]
    pub keystore_password: Option<Secret>,
    /// The key's password (`rss.jetty.ssl.keymanager.password`). A PKCS#12 keystore has one
    /// password, so when set it must equal `keystore_password`. Default: none.
    #[serde(default, skip_serializing)]
    pub key_password: Option<Secret>,
}

impl MetricsConfig {
    /// The grouping-key pairs of `push_gateway_grouping_key`, in order (validated at load).
    pub fn grouping_key(&self) -> Vec<(String, String)> {
        parse_grouping_key(&self.push_gateway_grouping_key).unwrap_or_default()
    }
}

/// Parses `k1=v1;k2=v2`; empty parts are skipped. Keys must be Prometheus label names.
pub(crate) fn parse_grouping_key(s: &str) -> std::result::Result<Vec<(String, String)>, String> {
    s.split(';')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| format!("{pair:?} is not key=value"))?;
            let (k, v) = (k.trim(), v.trim());
            let valid = k
                .chars()
                .enumerate()
                .all(|(i, c)| c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit()));
            if k.is_empty() || !valid {
                return Err(format!("{k:?} is not a label name"));
            }
            if k == "job" || k == "instance" {
                return Err(format!("{k:?} is set by the server"));
            }
            Ok((k.to_owned(), v.to_owned()))
        })
        .collect()
}

/// `[shutdown]`: time budgets for the ordered shutdown; 0 skips waiting for that step.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ShutdownConfig {
    /// How long in-flight requests may take to finish after the listener stops.
    /// Default: `30s`.
    #[serde(with = "humantime_serde")]
    pub drain_timeout: Duration,
    /// How long the final spill of memory to disk may take. Default: `60s`.
    #[serde(with = "humantime_serde")]
    pub spill_timeout: Duration,
    /// Whether the server stops by itself once decommissioned (its last app gone). With false it
    /// stays up as DECOMMISSIONED, assigned nothing, until `cancel_decommission` makes it ACTIVE
    /// again or it is stopped: for operators who recycle servers without restarting them.
    /// Default: true (Java's `rss.server.decommission.shutdown`).
    pub after_decommission: bool,
}

impl Default for ShutdownConfig {
    fn default() -> Self {
        ShutdownConfig {
            drain_timeout: Duration::from_secs(30),
            spill_timeout: Duration::from_secs(60),
            after_decommission: true,
        }
    }
}

/// `[recovery]`: what the server writes so that a restart finds its apps again. The block data
/// is in the data files already; the journal adds the apps, shuffles, ranges, commit counters and
/// reported block ids (see `src/recovery/`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct RecoveryConfig {
    /// Keep the journal and recover on start. Off: a restart starts empty and deletes nothing
    /// (as the Java server). Default: true.
    pub enabled: bool,
    /// Where the journal lives; `None` keeps it in `.spillway-meta/` of the first writable data
    /// path (moving to the next one when that disk fails). Required for `MEMORY_HDFS`, which
    /// has no data paths. Default: none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dir: Option<PathBuf>,
    /// The journal is rewritten as a snapshot of the live state once it grows past this (and
    /// past twice the last snapshot). Default: `64M`.
    pub compact_size: ByteSize,
    /// When another process holds this server's state (an upgrade), ask it to stop (SIGTERM)
    /// and take over once it has saved everything, instead of refusing to start. The ports are
    /// bound first with `SO_REUSEPORT`, so clients queue rather than being refused. Also set by
    /// `--takeover`. Default: false.
    pub takeover: bool,
}

impl Default for RecoveryConfig {
    fn default() -> Self {
        RecoveryConfig {
            enabled: true,
            dir: None,
            compact_size: ByteSize(64 << 20),
            takeover: false,
        }
    }
}

/// `[audit]`: Uniffle's RPC and storage audit logs, each written to a file of its own
/// (independent of `RUST_LOG`) in the Java server's line format (see `src/audit/`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuditConfig {
    /// One line per request (`rss.server.rpc.audit.log.enabled`). Turning it off removes the
    /// whole cost from the request path. Default: true (as Java).
    pub rpc_log: bool,
    /// The RPC audit file, appended to; its directory is created. Java's default is
    /// `${RSS_HOME}/logs/shuffle_server_rpc_audit.log`; a single binary has no install
    /// directory, and its working directory is `/` under the rendered container and systemd
    /// unit (read-only there), so the default sits beside the default data path instead.
    /// A path that cannot be opened stops start-up, naming this key.
    /// Default: `"/tmp/spillway/logs/shuffle_server_rpc_audit.log"`.
    pub rpc_log_path: PathBuf,
    /// Commands not logged, by the name the line carries (`rss.server.rpc.audit.log.excludeList`).
    /// Default: `["appHeartbeat"]` (as Java).
    pub rpc_exclude: Vec<String>,
    /// The 0.10 storage audit log: one `w|…` line per spill written to local files or HDFS,
    /// `d|…` lines per app or shuffle purge (`rss.server.storage.audit.log.enabled`).
    /// Default: false (as Java).
    pub storage_log: bool,
    /// The storage audit file, appended to; its directory is created. Java's default is
    /// `${RSS_LOG_DIR}/shuffle_server_storage_audit.log`; placed beside `rpc_log_path` for the
    /// same reason. Default: `"/tmp/spillway/logs/shuffle_server_storage_audit.log"`.
    pub storage_log_path: PathBuf,
    /// The coordinator's RPC audit log (`rss.coordinator.rpc.audit.log.enabled`), written
    /// whenever this process runs a coordinator (`coordinator.enabled`, or
    /// `role = "coordinator"`). On by default like the server's log: Java's default, and a
    /// coordinator answers a few calls per app and server, so the cost is small.
    /// Default: true (as Java).
    pub coordinator_rpc_log: bool,
    /// The coordinator's audit file, appended to; its directory is created. Java's default is
    /// `${RSS_LOG_DIR}/coordinator_rpc_audit.log`; placed beside `rpc_log_path` for the same
    /// reason. Default: `"/tmp/spillway/logs/coordinator_rpc_audit.log"`.
    pub coordinator_rpc_log_path: PathBuf,
    /// Coordinator commands not logged, by the name the line carries
    /// (`rss.coordinator.rpc.audit.log.excludeList`): the two heartbeats, which arrive every
    /// few seconds per app and per server. Default: `["appHeartbeat", "heartbeat"]` (as Java).
    pub coordinator_rpc_exclude: Vec<String>,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            rpc_log: true,
            rpc_log_path: PathBuf::from("/tmp/spillway/logs/shuffle_server_rpc_audit.log"),
            rpc_exclude: vec!["appHeartbeat".into()],
            storage_log: false,
            storage_log_path: PathBuf::from("/tmp/spillway/logs/shuffle_server_storage_audit.log"),
            coordinator_rpc_log: true,
            coordinator_rpc_log_path: PathBuf::from("/tmp/spillway/logs/coordinator_rpc_audit.log"),
            coordinator_rpc_exclude: vec!["appHeartbeat".into(), "heartbeat".into()],
        }
    }
}

/// `[limits]`: hard limits against broken or hostile clients. Each refusal gets a clear status
/// (requests) or a logged close (connections) and counts in `total_limit_hits{limit}`. The
/// defaults are far above what released Uniffle clients send, so only misbehaving peers meet
/// them.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Open connections per plane (gRPC, Netty). At the cap a newcomer is still accepted and the
    /// longest-idle connection is closed instead (clients reconnect on their next request);
    /// only when every connection is inside a request is the newcomer closed at once. Accepting
    /// always keeps the kernel's accept queue empty, so no client waits unseen. Default: 16384.
    pub max_connections: usize,
    /// Open connections per client IP address and plane, handled like `max_connections` among
    /// that address's connections. As high as the total by default: a host that leaks
    /// connections is already handled by the total cap (its idle connections go first), and
    /// many executors may share one address behind NAT. Default: 16384.
    pub max_connections_per_address: usize,
    /// A connection with no request in flight and no bytes moving for this long is closed
    /// (Java's Netty server: 600 s). Default: `600s`.
    #[serde(with = "humantime_serde")]
    pub idle_timeout: Duration,
    /// Longest pause inside a request being received or a response being sent: a peer that
    /// sends half a request (or stops reading its answer) is cut off after it, and what it held
    /// (receive budget, read memory) is released. Default: `60s`.
    #[serde(with = "humantime_serde")]
    pub stall_timeout: Duration,
    /// Bytes of requests received and not yet handled, server-wide, on both planes. A request
    /// waits for its share before its body is read, so no number of connections makes the
    /// server buffer more; a request larger than this is refused. Default: `256M`.
    pub receive_budget: ByteSize,
    /// Blocks in one sendShuffleData request. Default: 1000000.
    pub max_blocks_per_request: usize,
    /// Partitions (or ranges) named in one request (register, requireBuffer, send, report,
    /// getShuffleResultForMultiPart). Default: 1000000.
    pub max_partitions_per_request: usize,
    /// Block ids in one reportShuffleResult, and in one serialized bitmap sent by a client
    /// (a read's expected task ids). Default: 16000000.
    pub max_block_ids_per_request: usize,
    /// Bytes of any string in a request other than the app id (which is a file name and capped
    /// at 255): user, storage path, conf and property keys and values. Default: `16K`.
    pub max_string_length: ByteSize,
    /// Bytes of one response's payload (a read's data, index or block-id bitmap); larger
    /// answers fail with a status instead of being built. Default: `1G`.
    pub max_response_size: ByteSize,
    /// Bytes of one gRPC request message; a larger one is refused before it is read (Java's
    /// `rss.rpc.message.max.size`, the gRPC server's inbound message limit). The Netty plane
    /// frames by `receive_budget`, as Java's Netty server ignores this key. Default: `1G`
    /// (Java's).
    pub max_request_size: ByteSize,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_connections: 16384,
            max_connections_per_address: 16384,
            idle_timeout: Duration::from_secs(600),
            stall_timeout: Duration::from_secs(60),
            receive_budget: ByteSize(256 * ByteSize::MIB),
            max_blocks_per_request: 1_000_000,
            max_partitions_per_request: 1_000_000,
            max_block_ids_per_request: 16_000_000,
            max_string_length: ByteSize(16 << 10),
            max_response_size: ByteSize(ByteSize::GIB),
            max_request_size: ByteSize(ByteSize::GIB),
        }
    }
}

impl Config {
    /// Parses a TOML document and validates it.
    ///
    /// Ok means every key was known, every value had the right type and [`Config::validate`]
    /// passed. Missing keys take their defaults. Errors name the full dotted key, also for
    /// unknown keys (`memory_store.capacitty`) and type errors. No env overlay is applied.
    pub fn from_toml_str(s: &str) -> Result<Config, ConfigError> {
        let config = Self::parse_toml(s)?;
        config.validate()?;
        Ok(config)
    }

    /// Deserializes without validating, mapping serde errors to the dotted key at fault.
    fn parse_toml(s: &str) -> Result<Config, ConfigError> {
        toml::from_str(s).map_err(|e| error_with_key(s, &e))
    }

    /// The env overlay: every env variable that changes a parsed config goes through here.
    fn apply_env(&mut self, env: &dyn Fn(&str) -> Option<String>) {
        if let Some(ip) = non_empty_env(env, ENV_WORKER_IP) {
            self.worker_ip = Some(ip);
        }
        if let Some(token) = non_empty_env(env, ENV_ADMIN_TOKEN) {
            self.metrics.admin_token = Some(Secret(token));
        }
    }
}

fn non_empty_env(env: &dyn Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    env(name).filter(|value| !value.trim().is_empty())
}
