//! Tests for the config module: the shipped example, the operator shape, error keys, loading.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;

use proptest::prelude::*;

use super::*;

pub(super) const EXAMPLE: &str = include_str!("../../config.toml.example");

const OPERATOR_SAMPLE: &str = r#"
store_type = "MEMORY_LOCALFILE"
grpc_port = 21100
coordinator_quorum = ["host1:19999", "host2:19999"]
tags = ["uniffle-worker"]
[memory_store]
capacity = "10G"
[localfile_store]
data_paths = ["/data1/uniffle", "/data2/uniffle"]
healthy_check_min_disks = 0
[hdfs_store]
max_concurrency = 10
[hybrid_store]
memory_spill_high_watermark = 0.8
memory_spill_low_watermark = 0.2
memory_single_buffer_max_spill_size = "256M"
[metrics]
http_port = 19998
push_gateway_endpoint = "http://gateway:9091"
"#;

fn no_env(_: &str) -> Option<String> {
    None
}

/// An environment of `pairs` (the loader's tests and the operator's read it).
pub(super) fn map_env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| map.get(name).cloned()
}

#[test]
fn defaults_are_valid() {
    Config::default().validate().unwrap();
}

#[test]
fn example_parses_validates_and_shows_the_defaults() {
    let config = Config::from_toml_str(EXAMPLE).unwrap();
    // The example differs from the defaults only where the brief asks it to.
    let mut expected = Config::default();
    expected.localfile_store.data_paths = vec![
        PathBuf::from("/tmp/spillway/data1"),
        PathBuf::from("/tmp/spillway/data2"),
    ];
    // The example runs the embedded coordinator, serving the storage type clients need.
    expected.coordinator.enabled = true;
    expected.coordinator.client_conf =
        BTreeMap::from([("rss.storage.type".into(), "MEMORY_LOCALFILE".into())]);
    assert_eq!(config, expected);
    assert!(config.coordinator_quorum.is_empty());
    assert_eq!(config.grpc_port, 19999);
    assert_eq!(config.netty_port, 17000);
    assert_eq!(config.metrics.http_port, 19998);
    assert_eq!(config.memory_store.capacity, ByteSize(ByteSize::GIB));
}

/// `(section, key)` pairs of every line `key = …` or `# key = …` in a TOML text.
pub(super) fn documented_keys(text: &str) -> BTreeSet<(String, String)> {
    let mut section = String::new();
    let mut keys = BTreeSet::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(header) = line.strip_prefix('[') {
            section = header.trim_end_matches(']').to_string();
            continue;
        }
        let line = line.strip_prefix("# ").unwrap_or(line);
        if let Some((key, _)) = line.split_once(" = ") {
            if key.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
                keys.insert((section.clone(), key.to_string()));
            }
        }
    }
    keys
}

#[test]
fn example_documents_every_key() {
    let mut full = Config {
        worker_ip: Some("10.0.0.1".into()),
        ..Config::default()
    };
    full.metrics.push_gateway_endpoint = Some("http://gateway:9091".into());
    full.hybrid_store.huge_partition_hard_limit = Some(ByteSize(ByteSize::GIB));
    full.hybrid_store.huge_partition_split_limit = Some(ByteSize(ByteSize::GIB));
    full.coordinator.remote_storage_path = Some("hdfs://ns/rss".into());
    full.coordinator.access_load_server_num_threshold = Some(3);
    full.coordinator.access_candidates_path = Some("/etc/spillway/candidates".into());
    full.coordinator.quota_path = Some("/etc/spillway/quota".into());
    full.coordinator.dynamic_client_conf_path = Some("/etc/spillway/dynamic_client.conf".into());
    full.coordinator.exclude_nodes_file_path = Some("/etc/spillway/exclude_nodes".into());
    full.hdfs_store.kerberos_principal = Some("rss@EXAMPLE.COM".into());
    full.hdfs_store.kerberos_keytab = Some("/etc/rss.keytab".into());
    full.hdfs_store.user = Some("rss".into());
    full.recovery.dir = Some("/data1/spillway-meta".into());
    full.quota.app_local_disk_bytes = Some(ByteSize(ByteSize::GIB));
    full.quota.user_local_disk_bytes = Some(ByteSize(ByteSize::GIB));
    full.quota.app_remote_bytes = Some(ByteSize(ByteSize::GIB));
    full.quota.user_remote_bytes = Some(ByteSize(ByteSize::GIB));
    full.localfile_store.disk_capacity = Some(ByteSize(ByteSize::GIB));
    full.health.script_path = Some("/etc/spillway/health.sh".into());
    full.metrics.https = Some(super::HttpsConfig {
        port: 19443,
        cert_path: None,
        key_path: None,
        keystore_path: Some("/etc/spillway/server.p12".into()),
        keystore_password: None,
        key_password: None,
    });
    let table = toml::Table::try_from(&full).unwrap();
    let mut all_keys = BTreeSet::new();
    for (key, value) in &table {
        match value.as_table() {
            Some(section) => {
                for inner in section.keys() {
                    all_keys.insert((key.clone(), inner.clone()));
                }
            }
            None => {
                all_keys.insert((String::new(), key.clone()));
            }
        }
    }
    // The one secret: never serialized (the conf endpoint must not show it), still documented.
    all_keys.insert(("metrics".into(), "admin_token".into()));
    all_keys.insert(("metrics".into(), "basic_credentials".into()));
    assert_eq!(documented_keys(EXAMPLE), all_keys);

    // Every commented-out example value is itself valid.
    let uncommented: String = EXAMPLE
        .lines()
        .map(|line| match line.strip_prefix("# ") {
            Some(rest)
                if rest
                    .split_once(" = ")
                    .is_some_and(|(k, _)| !k.contains(' ')) =>
            {
                rest
            }
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let config = Config::from_toml_str(&uncommented).unwrap();
    assert_eq!(config.worker_ip.as_deref(), Some("10.0.0.12"));
    assert_eq!(
        config.metrics.push_gateway_endpoint.as_deref(),
        Some("http://gateway:9091")
    );
    assert_eq!(
        config.hybrid_store.huge_partition_hard_limit,
        Some(ByteSize(100 * ByteSize::GIB))
    );
    assert_eq!(
        config.hybrid_store.huge_partition_split_limit,
        Some(ByteSize(50 * ByteSize::GIB))
    );
    assert_eq!(
        config.coordinator.remote_storage_path.as_deref(),
        Some("hdfs://namenode:8020/rss")
    );
}

#[test]
fn operator_sample_parses_as_is() {
    let config = Config::from_toml_str(OPERATOR_SAMPLE).unwrap();
    assert_eq!(config.store_type, StoreType::MemoryLocalfile);
    assert_eq!(config.grpc_port, 21100);
    assert_eq!(config.coordinator_quorum, ["host1:19999", "host2:19999"]);
    assert_eq!(config.tags, ["uniffle-worker"]);
    assert_eq!(config.memory_store.capacity, ByteSize(10 * ByteSize::GIB));
    assert_eq!(
        config.localfile_store.data_paths,
        [
            PathBuf::from("/data1/uniffle"),
            PathBuf::from("/data2/uniffle")
        ]
    );
    assert_eq!(config.hdfs_store.max_concurrency, 10);
    assert_eq!(
        config.hybrid_store.memory_single_buffer_max_spill_size,
        ByteSize(256 * ByteSize::MIB)
    );
    assert_eq!(
        config.metrics.push_gateway_endpoint.as_deref(),
        Some("http://gateway:9091")
    );
    // Untouched keys keep their defaults.
    assert_eq!(config.app, AppConfig::default());
    assert_eq!(
        config.memory_store.read_capacity,
        MemoryStoreConfig::default().read_capacity
    );
}

#[test]
fn empty_document_is_the_default() {
    assert_eq!(Config::from_toml_str("").unwrap(), Config::default());
}

#[test]
fn store_type_names() {
    for (text, store_type) in StoreType::ALL {
        let toml = format!("store_type = \"{text}\"");
        let config = Config::from_toml_str(&toml).unwrap();
        assert_eq!(config.store_type, store_type);
        // The TOML name is the Uniffle name.
        assert_eq!(
            toml::Value::try_from(store_type).unwrap().as_str(),
            Some(text)
        );
        assert_eq!(store_type.with_memory(), text.starts_with("MEMORY_"));
        assert_eq!(store_type.uses_localfile(), text.contains("LOCALFILE"));
        assert_eq!(store_type.uses_hdfs(), text.contains("HDFS"));
    }
    assert!(StoreType::MemoryLocalfileHdfs.uses_localfile());
    assert!(StoreType::MemoryLocalfileHdfs.uses_hdfs());
    assert!(!StoreType::MemoryHdfs.uses_localfile());
    assert!(!StoreType::MemoryLocalfile.uses_hdfs());
}

#[test]
fn invalid_samples_name_the_key() {
    let cases: &[(&str, &str)] = &[
        // Unknown keys, at every depth and in every TOML spelling.
        ("grpc_portt = 1", "grpc_portt"),
        (
            "[memory_store]\ncapacitty = \"1G\"",
            "memory_store.capacitty",
        ),
        ("memory_store.capacitty = 1", "memory_store.capacitty"),
        (
            "hybrid_store = { memory_spill_low_watermarkk = 0.1 }",
            "hybrid_store.memory_spill_low_watermarkk",
        ),
        ("[memory_stor]\ncapacity = \"1G\"", "memory_stor"),
        ("[shutdown]\ndrain = \"1s\"", "shutdown.drain"),
        ("[metrics.extra]\nx = 1", "metrics.extra"),
        (
            "[hybrid_store]\nmemory_spill_low_watermark = 0.1\n[memory_store]\nread_capacityy = 1",
            "memory_store.read_capacityy",
        ),
        // Wrong types and values serde rejects.
        ("grpc_port = \"19999\"", "grpc_port"),
        ("grpc_port = 70000", "grpc_port"),
        ("netty_port = 70000", "netty_port"),
        ("netty_port = -2", "netty_port"),
        ("netty_port = \"17000\"", "netty_port"),
        ("netty_port = 19999", "netty_port"),
        ("[metrics]\nhttp_port = 17000", "netty_port"),
        ("tags = \"uniffle-worker\"", "tags"),
        ("tags = [\"a\", 1]", "tags"),
        ("memory_store = 5", "memory_store"),
        ("store_type = \"MEMORY\"", "store_type"),
        ("heartbeat_interval = \"10 parsecs\"", "heartbeat_interval"),
        (
            "[app]\napp_heartbeat_timeout = 60",
            "app.app_heartbeat_timeout",
        ),
        (
            "[localfile_store]\nsync_on_write = \"yes\"",
            "localfile_store.sync_on_write",
        ),
        (
            "[hybrid_store]\nmemory_spill_high_watermark = \"80%\"",
            "hybrid_store.memory_spill_high_watermark",
        ),
        // Bad sizes.
        (
            "[memory_store]\ncapacity = \"10Q\"",
            "memory_store.capacity",
        ),
        (
            "[memory_store]\ncapacity = \"-1G\"",
            "memory_store.capacity",
        ),
        ("[memory_store]\ncapacity = -1", "memory_store.capacity"),
        ("[memory_store]\ncapacity = 0", "memory_store.capacity"),
        ("[memory_store]\ncapacity = \"0G\"", "memory_store.capacity"),
        (
            "[memory_store]\nread_capacity = 0",
            "memory_store.read_capacity",
        ),
        (
            "[hybrid_store]\nhuge_partition_hard_limit = \"0\"",
            "hybrid_store.huge_partition_hard_limit",
        ),
        // Syntax errors still point at the key on the offending line.
        ("[memory_store]\ncapacity = 10G", "memory_store.capacity"),
        ("grpc_port = 1\ngrpc_port = 2", "grpc_port"),
        // Watermarks.
        (
            "[hybrid_store]\nmemory_spill_high_watermark = 0.5\nmemory_spill_low_watermark = 0.5",
            "hybrid_store.memory_spill_low_watermark",
        ),
        (
            "[hybrid_store]\nmemory_spill_high_watermark = 0.3\nmemory_spill_low_watermark = 0.6",
            "hybrid_store.memory_spill_low_watermark",
        ),
        (
            "[hybrid_store]\nmemory_spill_low_watermark = 0.0",
            "hybrid_store.memory_spill_low_watermark",
        ),
        (
            "[hybrid_store]\nmemory_spill_high_watermark = 1.5",
            "hybrid_store.memory_spill_high_watermark",
        ),
        (
            "[hybrid_store]\nmemory_spill_high_watermark = nan",
            "hybrid_store.memory_spill_high_watermark",
        ),
        (
            "[localfile_store]\ndisk_low_watermark = 0.96",
            "localfile_store.disk_low_watermark",
        ),
        (
            "[localfile_store]\ndisk_high_watermark = 0",
            "localfile_store.disk_high_watermark",
        ),
        // Disks.
        (
            "[localfile_store]\ndata_paths = [\"/a\"]\nhealthy_check_min_disks = 2",
            "localfile_store.healthy_check_min_disks",
        ),
        (
            "[localfile_store]\ndisk_capacity = \"0\"",
            "localfile_store.disk_capacity",
        ),
        (
            "[localfile_store]\ndisk_capacity_ratio = 1.5",
            "localfile_store.disk_capacity_ratio",
        ),
        (
            "store_type = \"MEMORY_HDFS\"\n[health]\nenabled = true",
            "health.enabled",
        ),
        ("[health]\nscript_path = \"\"", "health.script_path"),
        ("[health]\ndisk_max_usage = 90", "health.disk_max_usage"),
        ("[health]\ncheck_interval = \"0s\"", "health.check_interval"),
        (
            "[localfile_store]\ndata_paths = []",
            "localfile_store.data_paths",
        ),
        (
            "[localfile_store]\ndata_paths = [\"/a\", \"/a\"]",
            "localfile_store.data_paths",
        ),
        (
            "[localfile_store]\ndata_paths = [\"\"]",
            "localfile_store.data_paths",
        ),
        // Ports.
        (
            "grpc_port = 20000\n[metrics]\nhttp_port = 20000",
            "metrics.http_port",
        ),
        ("[metrics]\nhttp_port = 19999", "metrics.http_port"),
        // Concurrency and ratios.
        (
            "[localfile_store]\ndisk_max_concurrency = 0",
            "localfile_store.disk_max_concurrency",
        ),
        (
            "[hdfs_store]\nmax_concurrency = 0",
            "hdfs_store.max_concurrency",
        ),
        (
            "[hdfs_store]\npartition_write_max_concurrency = 0",
            "hdfs_store.partition_write_max_concurrency",
        ),
        (
            "[hdfs_store]\ncold_storage_threshold_size = 0",
            "hdfs_store.cold_storage_threshold_size",
        ),
        (
            "[hdfs_store]\nwrite_timeout = \"0s\"",
            "hdfs_store.write_timeout",
        ),
        (
            "[hdfs_store]\nfailure_cooldown = \"0s\"",
            "hdfs_store.failure_cooldown",
        ),
        ("[hdfs_store]\nkeep_open = \"31s\"", "hdfs_store.keep_open"),
        (
            "[hdfs_store]\nkerberos_keytab = \"/k\"",
            "hdfs_store.kerberos_keytab",
        ),
        (
            "[hdfs_store]\nkerberos_principal = \" \"",
            "hdfs_store.kerberos_principal",
        ),
        ("[hdfs_store]\nuser = \"rss/h@R\"", "hdfs_store.user"),
        ("[hdfs_store]\nwrite_as = \"job\"", "hdfs_store.write_as"),
        (
            "[hybrid_store]\nspill_concurrency = 0",
            "hybrid_store.spill_concurrency",
        ),
        (
            "[hybrid_store]\nhuge_partition_memory_limit_ratio = 0.0",
            "hybrid_store.huge_partition_memory_limit_ratio",
        ),
        (
            "[hybrid_store]\nhuge_partition_memory_limit_ratio = 1.5",
            "hybrid_store.huge_partition_memory_limit_ratio",
        ),
        // Intervals that would make a ticker spin or panic.
        ("heartbeat_interval = \"0s\"", "heartbeat_interval"),
        (
            "[memory_store]\nbuffer_ticket_check_interval = \"0s\"",
            "memory_store.buffer_ticket_check_interval",
        ),
        (
            "[app]\nexpiry_check_interval = \"0s\"",
            "app.expiry_check_interval",
        ),
        (
            "[metrics]\npush_interval = \"0ms\"",
            "metrics.push_interval",
        ),
        // Tags, coordinators, addresses.
        ("tags = [\"a,b\"]", "tags"),
        ("tags = [\"\"]", "tags"),
        ("coordinator_quorum = [\"host1\"]", "coordinator_quorum"),
        ("coordinator_quorum = [\"host1:0\"]", "coordinator_quorum"),
        (
            "coordinator_quorum = [\"host1:99999\"]",
            "coordinator_quorum",
        ),
        (
            "coordinator_quorum = [\"http://host1:19999\"]",
            "coordinator_quorum",
        ),
        ("coordinator_quorum = [\":19999\"]", "coordinator_quorum"),
        ("coordinator_quorum = [\"::1:19999\"]", "coordinator_quorum"),
        ("worker_ip = \"\"", "worker_ip"),
        ("bind_ip = \"localhost\"", "bind_ip"),
        (
            "[metrics]\npush_gateway_endpoint = \"gateway:9091\"",
            "metrics.push_gateway_endpoint",
        ),
        (
            "[metrics]\npush_gateway_job = \"\"",
            "metrics.push_gateway_job",
        ),
        (
            "[metrics]\npush_gateway_job = \"a/b\"",
            "metrics.push_gateway_job",
        ),
        (
            "[metrics]\npush_gateway_grouping_key = \"cluster\"",
            "metrics.push_gateway_grouping_key",
        ),
        (
            "[metrics]\npush_gateway_grouping_key = \"instance=x\"",
            "metrics.push_gateway_grouping_key",
        ),
        (
            "[metrics]\npush_gateway_grouping_key = \"1a=x\"",
            "metrics.push_gateway_grouping_key",
        ),
        ("[metrics]\npush_timeout = \"0s\"", "metrics.push_timeout"),
        ("[metrics]\nconsole_port = -1", "metrics.console_port"),
        // The embedded coordinator.
        ("[coordinator]\nenabeld = true", "coordinator.enabeld"),
        ("[coordinator]\nenabled = \"yes\"", "coordinator.enabled"),
        (
            "[coordinator]\nserver_heartbeat_timeout = \"0s\"",
            "coordinator.server_heartbeat_timeout",
        ),
        (
            "[coordinator]\napp_heartbeat_timeout = \"0s\"",
            "coordinator.app_heartbeat_timeout",
        ),
        (
            "[coordinator]\nshuffle_server_number = 0",
            "coordinator.shuffle_server_number",
        ),
        (
            "[coordinator]\nshuffle_server_number = -1",
            "coordinator.shuffle_server_number",
        ),
        (
            "[coordinator]\nremote_storage_path = \"\"",
            "coordinator.remote_storage_path",
        ),
        (
            "[coordinator]\nremote_storage_path = \"hdfs://a/x,,hdfs://b/x\"",
            "coordinator.remote_storage_path",
        ),
        (
            "[coordinator]\nremote_storage_cluster_conf = { \"a,b\" = { k = \"v\" } }",
            "coordinator.remote_storage_cluster_conf",
        ),
        (
            "[coordinator]\nassignment_host_strategy = \"SAME\"",
            "coordinator.assignment_host_strategy",
        ),
        (
            "[coordinator]\nselect_partition_strategy = \"round\"",
            "coordinator.select_partition_strategy",
        ),
        (
            "[coordinator]\naccess_checkers = [\"banned\"]",
            "coordinator.access_checkers",
        ),
        (
            "[coordinator]\naccess_load_memory_percentage = 100.5",
            "coordinator.access_load_memory_percentage",
        ),
        (
            "[coordinator]\naccess_load_memory_percentage = -1.0",
            "coordinator.access_load_memory_percentage",
        ),
        (
            "[coordinator]\naccess_load_server_num_threshold = 0",
            "coordinator.access_load_server_num_threshold",
        ),
        (
            "[coordinator]\naccess_checkers = [\"candidates\"]",
            "coordinator.access_candidates_path",
        ),
        (
            "[coordinator]\naccess_candidates_update_interval = \"0s\"",
            "coordinator.access_candidates_update_interval",
        ),
        (
            "[coordinator]\nquota_update_interval = \"0s\"",
            "coordinator.quota_update_interval",
        ),
        (
            "[coordinator]\ndynamic_client_conf_enabled = true",
            "coordinator.dynamic_client_conf_path",
        ),
        (
            "[coordinator]\ndynamic_client_conf_update_interval = \"0s\"",
            "coordinator.dynamic_client_conf_update_interval",
        ),
        (
            "[coordinator]\nexclude_nodes_check_interval = \"0s\"",
            "coordinator.exclude_nodes_check_interval",
        ),
        (
            "[coordinator]\ndashboard_sample_interval = \"0s\"",
            "coordinator.dashboard_sample_interval",
        ),
        (
            "[coordinator]\nremote_storage_path = \"hdfs://a b\"",
            "coordinator.remote_storage_path",
        ),
        (
            "[coordinator]\nclient_conf = { \"\" = \"x\" }",
            "coordinator.client_conf",
        ),
        (
            "[coordinator]\nclient_conf = { \"rss.x\" = 1 }",
            "coordinator.client_conf.rss.x",
        ),
    ];
    for &(sample, key) in cases {
        let err = Config::from_toml_str(sample)
            .expect_err(&format!("sample should be rejected:\n{sample}"));
        assert_eq!(err.key, key, "sample:\n{sample}\nerror: {err}");
        assert!(!err.reason.is_empty());
    }
}

#[test]
fn valid_edge_samples() {
    for sample in [
        "grpc_port = 0\n[metrics]\nhttp_port = 0",
        "store_type = \"MEMORY_HDFS\"\n[localfile_store]\ndata_paths = []",
        "coordinator_quorum = [\"[::1]:19999\", \"10.0.0.1:19999\", \"coord-1.example_x.com:1\"]",
        "[hybrid_store]\nmemory_spill_high_watermark = 1.0\nhuge_partition_memory_limit_ratio = 1.0",
        "[shutdown]\ndrain_timeout = \"0s\"\nspill_timeout = \"0s\"",
        "[memory_store]\ncapacity = 1073741824",
        "[metrics]\npush_gateway_endpoint = \"https://gateway:9091/\"",
        "[coordinator]\nenabled = true\nserver_heartbeat_timeout = \"300ms\"",
        "[coordinator.client_conf]\n\"rss.storage.type\" = \"MEMORY_LOCALFILE\"\n\"spark.rss.x\" = \"\"",
    ] {
        if let Err(err) = Config::from_toml_str(sample) {
            panic!("sample should be accepted:\n{sample}\nerror: {err}");
        }
    }
}

#[test]
fn error_display_names_the_key() {
    let err = Config::from_toml_str("[memory_store]\ncapacitty = \"1G\"").unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with("config key `memory_store.capacitty`: "),
        "{text}"
    );
    let err = Config::from_toml_str("[memory_store\n").unwrap_err();
    assert!(err.reason.contains("line 1"), "{err}");
    // A syntax error with no key anywhere near it names the document and the position.
    let err = Config::from_toml_str("grpc_port = 1\n= 3").unwrap_err();
    assert_eq!(err.key, "<document>");
    assert!(err.reason.starts_with("line 2, column 1: "), "{err}");
}

#[test]
fn load_without_file_uses_defaults_and_env_ip() {
    let env = map_env(&[(ENV_WORKER_IP, "10.1.2.3")]);
    let config = Config::load(None, &env).unwrap();
    let expected = Config {
        worker_ip: Some("10.1.2.3".into()),
        ..Config::default()
    };
    assert_eq!(config, expected);

    assert_eq!(Config::load(None, &no_env).unwrap(), Config::default());
    // Empty variables count as unset.
    let env = map_env(&[(ENV_WORKER_IP, ""), (ENV_WORKER_CONFIG_PATH, " ")]);
    assert_eq!(Config::load(None, &env).unwrap(), Config::default());
}

#[test]
fn load_reads_env_path_and_overlays_ip() {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    // Top-level keys must come before the first [section].
    file.write_all(b"worker_ip = \"192.168.0.9\"\n").unwrap();
    file.write_all(OPERATOR_SAMPLE.as_bytes()).unwrap();
    let path = file.path().to_str().unwrap();

    let env = map_env(&[(ENV_WORKER_CONFIG_PATH, path)]);
    let config = Config::load(None, &env).unwrap();
    assert_eq!(config.grpc_port, 21100);
    assert_eq!(config.worker_ip.as_deref(), Some("192.168.0.9"));

    let env = map_env(&[(ENV_WORKER_CONFIG_PATH, path), (ENV_WORKER_IP, "10.9.9.9")]);
    let config = Config::load(None, &env).unwrap();
    assert_eq!(config.grpc_port, 21100);
    assert_eq!(config.worker_ip.as_deref(), Some("10.9.9.9"));
}

#[test]
fn load_prefers_explicit_path_over_env() {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(b"grpc_port = 21200\n").unwrap();
    let env = map_env(&[(ENV_WORKER_CONFIG_PATH, "/nonexistent/spillway.toml")]);
    let config = Config::load(Some(file.path()), &env).unwrap();
    assert_eq!(config.grpc_port, 21200);
}

#[test]
fn load_errors_name_the_source() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.toml");

    let err = Config::load(Some(&missing), &no_env).unwrap_err();
    assert_eq!(err.key, "--config");
    assert!(err.reason.contains("missing.toml"), "{err}");

    let env = map_env(&[(ENV_WORKER_CONFIG_PATH, missing.to_str().unwrap())]);
    let err = Config::load(None, &env).unwrap_err();
    assert_eq!(err.key, ENV_WORKER_CONFIG_PATH);

    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[memory_store]\ncapacitty = \"1G\"\n").unwrap();
    let err = Config::load(Some(&bad), &no_env).unwrap_err();
    assert_eq!(err.key, "memory_store.capacitty");
    assert!(err.reason.contains("bad.toml"), "{err}");

    // The overlay is validated too.
    let env = map_env(&[(ENV_WORKER_IP, "10.0.0.1 10.0.0.2")]);
    assert_eq!(Config::load(None, &env).unwrap_err().key, "worker_ip");
}

fn duration() -> impl Strategy<Value = Duration> {
    (1u64..1_000_000, 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n))
}

/// `(low, high)` with `0 < low < high <= 1`.
fn watermarks() -> impl Strategy<Value = (f64, f64)> {
    (0.01f64..=1.0, 0.01f64..0.99).prop_map(|(high, fraction)| (high * fraction, high))
}

fn config() -> impl Strategy<Value = Config> {
    let top = (
        prop_oneof![
            Just(StoreType::MemoryLocalfile),
            Just(StoreType::MemoryHdfs),
            Just(StoreType::MemoryLocalfileHdfs),
        ],
        (1u16..=u16::MAX, -1i32..=65535),
        proptest::collection::vec("[a-z][a-z0-9.-]{0,8}:[1-9][0-9]{0,3}", 0..3),
        proptest::collection::vec("[a-zA-Z0-9_-]{1,12}", 0..3),
        duration(),
        proptest::option::of("[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}"),
    );
    let sections = (
        (1u64..=u64::MAX, 1u64..=u64::MAX, duration()),
        (
            proptest::collection::btree_set("/[a-z0-9]{1,8}", 1..4),
            watermarks(),
            1usize..64,
            any::<bool>(),
        ),
        (watermarks(), 1u64..=u64::MAX, 1usize..64, 0.001f64..=1.0),
        (
            proptest::option::of(1u64..=u64::MAX),
            duration(),
            duration(),
        ),
        proptest::option::of("https?://[a-z]{1,8}:[0-9]{2,4}"),
        (
            any::<bool>(),
            (duration(), duration()),
            1usize..10_000,
            proptest::option::of("hdfs://[a-z]{1,8}/[a-z/]{0,8}"),
            proptest::collection::btree_map("[a-z][a-z.]{0,12}", "[ -~]{0,12}", 0..4),
        ),
    );
    (top, sections).prop_map(
        |(
            (
                store_type,
                (grpc_port, netty_port),
                coordinator_quorum,
                tags,
                heartbeat_interval,
                worker_ip,
            ),
            (
                (capacity, read_capacity, ticket_timeout),
                (paths, (disk_low, disk_high), disk_concurrency, sync_on_write),
                ((mem_low, mem_high), single_buffer, spill_concurrency, huge_ratio),
                (hard_limit, app_timeout, drain_timeout),
                push_gateway_endpoint,
                (
                    enabled,
                    (server_timeout, app_expiry),
                    server_number,
                    remote_storage_path,
                    client_conf,
                ),
            ),
        )| {
            let mut c = Config {
                store_type,
                grpc_port,
                netty_port,
                coordinator_quorum,
                tags,
                heartbeat_interval,
                worker_ip,
                ..Config::default()
            };
            c.memory_store.capacity = ByteSize(capacity);
            c.memory_store.read_capacity = ByteSize(read_capacity);
            c.memory_store.buffer_ticket_timeout = ticket_timeout;
            c.localfile_store.data_paths = paths.into_iter().map(PathBuf::from).collect();
            c.localfile_store.disk_low_watermark = disk_low;
            c.localfile_store.disk_high_watermark = disk_high;
            c.localfile_store.disk_max_concurrency = disk_concurrency;
            c.localfile_store.sync_on_write = sync_on_write;
            c.hybrid_store.memory_spill_low_watermark = mem_low;
            c.hybrid_store.memory_spill_high_watermark = mem_high;
            c.hybrid_store.memory_single_buffer_max_spill_size = ByteSize(single_buffer);
            c.hybrid_store.spill_concurrency = spill_concurrency;
            c.hybrid_store.huge_partition_memory_limit_ratio = huge_ratio;
            c.hybrid_store.huge_partition_hard_limit = hard_limit.map(ByteSize);
            // Any split limit is valid, 0 included (h / 2 is 0 for h = 1).
            c.hybrid_store.huge_partition_split_limit = hard_limit.map(|h| ByteSize(h / 2));
            c.app.app_heartbeat_timeout = app_timeout;
            c.shutdown.drain_timeout = drain_timeout;
            c.metrics.push_gateway_endpoint = push_gateway_endpoint;
            c.coordinator = CoordinatorConfig {
                enabled,
                register_self: !enabled,
                server_heartbeat_timeout: server_timeout,
                app_heartbeat_timeout: app_expiry,
                shuffle_server_number: server_number,
                remote_storage_path,
                client_conf,
                ..CoordinatorConfig::default()
            };
            if c.metrics.http_port == c.grpc_port {
                c.metrics.http_port = 0;
            }
            if c.netty_port == i32::from(c.grpc_port)
                || c.netty_port == i32::from(c.metrics.http_port)
            {
                c.netty_port = -1;
            }
            c
        },
    )
}

proptest! {
    #[test]
    fn config_round_trips_through_toml(config in config()) {
        config.validate().unwrap();
        let text = toml::to_string(&config).unwrap();
        let parsed = Config::from_toml_str(&text);
        prop_assert_eq!(parsed, Ok(config), "toml:\n{}", text);
    }
}

#[test]
fn grouping_key_pairs_parse_in_order() {
    let mut m = crate::config::MetricsConfig {
        push_gateway_grouping_key: " cluster=c1; zone = a/b ;".into(),
        ..Default::default()
    };
    assert_eq!(
        m.grouping_key(),
        vec![
            ("cluster".to_owned(), "c1".to_owned()),
            ("zone".to_owned(), "a/b".to_owned())
        ]
    );
    m.push_gateway_grouping_key.clear();
    assert!(m.grouping_key().is_empty());
}

#[test]
fn admin_token_never_shows_in_debug_output() {
    let env = map_env(&[(ENV_ADMIN_TOKEN, "0123456789abcdef-secret")]);
    let config = Config::load(None, &env).unwrap();
    assert_eq!(
        config.metrics.admin_token.as_deref(),
        Some("0123456789abcdef-secret")
    );
    assert!(!format!("{config:?}").contains("0123456789abcdef-secret"));
}

#[test]
fn a_store_too_small_for_one_client_request_above_its_high_mark_is_warned_about() {
    let mut c = Config {
        netty_port: -1,
        ..Config::default()
    };
    assert_eq!(c.memory_headroom_warning(), None, "1G leaves 204.8M");
    c.memory_store.capacity = ByteSize(64 * ByteSize::MIB);
    let w = c.memory_headroom_warning().expect("64M leaves 12.8M < 16M");
    assert!(w.contains("memory_store.capacity 64M"), "{w}");
    assert!(w.contains("at least 80M"), "16M / (1 - 0.8): {w}");
    assert!(!w.contains("INVALID_REQUEST"), "{w}");
    c.hybrid_store.memory_spill_high_watermark = 0.7;
    assert_eq!(c.memory_headroom_warning(), None, "0.3 × 64M = 19.2M");
    // The Netty plane's requests carry their encoded message on top: 32M.
    c.netty_port = 17000;
    let w = c.memory_headroom_warning().expect("19.2M < 32M");
    assert!(w.contains("at least 107M"), "32M / 0.3: {w}");
    c.memory_store.capacity = ByteSize(16 * ByteSize::MIB);
    let w = c.memory_headroom_warning().unwrap();
    assert!(w.contains("INVALID_REQUEST"), "{w}");
}
