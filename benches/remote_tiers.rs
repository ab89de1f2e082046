//! The two remote tiers side by side in one run: flushes of 16 MiB batches (64 KiB blocks, 8
//! partitions, 4 in flight) to the HDFS tier (a MiniDFS on loopback) and to the object-store
//! tier: moto's S3 server over HTTP, and S3Proxy over HTTP (payloads signed) and over HTTPS
//! (`UNSIGNED-PAYLOAD`), in turn within each round so all see the same machine state.
//!
//! Per tier: throughput, this process's CPU seconds per GB (user + system, `getrusage`: the
//! tier's own cost; the MiniDFS JVM and moto run in processes of their own and are reported
//! apart), and for S3 the requests per GB by kind, counted from the S3 server's request log,
//! with what they would cost at AWS S3 Standard list prices.
//!
//! Then the HDFS flush latency: 4 MiB flushes one at a time, the tier closing every pair after
//! each append (Java's way) against keeping it open (`keep_open`), in turn on the same MiniDFS.
//!
//! `cargo bench --bench remote_tiers` (1 GiB per tier and round, 2 rounds);
//! `cargo bench --bench remote_tiers -- --test` (64 MiB, 1 round: does it still run).

use spillway_test_support::{minicluster, s3proxy, s3server};

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use spillway::ids::{AppId, BlockIdLayout, PartitionKey, PartitionRange};
use spillway::store::hdfs::{HdfsOptions, HdfsTier, Identity};
use spillway::store::object::{ObjectOptions, ObjectTier};
use spillway::store::{Block, BlockBatch, PurgeScope, RemoteStorage, Tier};

const BATCH_BYTES: usize = 16 << 20;
const BLOCK_BYTES: usize = 64 << 10;
const PARTITIONS: i32 = 8;
const IN_FLIGHT: usize = 4;
const SERVER_ID: &str = "127.0.0.1-19999";

fn cpu_seconds() -> f64 {
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF)
        .expect("getrusage");
    let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
    t(usage.user_time()) + t(usage.system_time())
}

/// CPU seconds of another process so far (utime + stime from /proc).
fn process_cpu(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, a)| a).unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // Fields after the command: state is 0, utime 11, stime 12 (proc(5) numbers 14 and 15).
    (ticks(11) + ticks(12)) / 100.0
}

/// Processes whose command line contains `needle` (the MiniDFS JVM, moto).
fn pids_of(needle: &str) -> Vec<u32> {
    let mut out = Vec::new();
    let me = std::process::id();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let cmd = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmd).contains(needle) {
            out.push(pid);
        }
    }
    out
}

fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn batch(seed: i64) -> BlockBatch {
    sized_batch(seed, BATCH_BYTES)
}

fn sized_batch(seed: i64, bytes: usize) -> BlockBatch {
    let layout = BlockIdLayout::DEFAULT;
    let data = Bytes::from(
        (0..BLOCK_BYTES)
            .map(|i| (i as i64 * 31 + seed) as u8)
            .collect::<Vec<u8>>(),
    );
    BlockBatch::new(
        (0..(bytes / BLOCK_BYTES) as i64)
            .map(|i| Block {
                block_id: layout.block_id(seed * 1000 + i, 0, seed),
                task_attempt_id: seed,
                uncompress_length: BLOCK_BYTES as i32,
                crc: 0,
                data: data.clone(),
            })
            .collect(),
    )
}

/// 4 MiB flushes one at a time to the HDFS tier, each timed from the call to its return (what
/// a spill holds its memory for): `parts` partitions in turn, or with `parts` 0 a new partition
/// every flush (a cold flush: a new file pair each). Returns the latencies in seconds.
async fn flush_latencies(tier: &HdfsTier, app: &AppId, flushes: usize, parts: i32) -> Vec<f64> {
    let mut out = Vec::with_capacity(flushes);
    for n in 0..flushes {
        let p = if parts == 0 {
            1000 + n as i32
        } else {
            n as i32 % parts
        };
        let key = PartitionKey::new(app.clone(), 1, PartitionRange::new(p, p).unwrap());
        let b = sized_batch(n as i64, LATENCY_FLUSH_BYTES);
        let t0 = Instant::now();
        tier.append(&key, &b).await.expect("append");
        out.push(t0.elapsed().as_secs_f64());
    }
    out
}

const LATENCY_FLUSH_BYTES: usize = 4 << 20;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

struct Row {
    round: usize,
    tier: &'static str,
    bytes: u64,
    secs: f64,
    cpu: f64,
    peer_cpu: f64,
}

async fn flush_all(tier: Arc<dyn Tier>, app: &AppId, batches: usize) -> (f64, f64) {
    let cpu0 = cpu_seconds();
    let t0 = Instant::now();
    let mut n = 0usize;
    let mut inflight = tokio::task::JoinSet::new();
    while n < batches || !inflight.is_empty() {
        while n < batches && inflight.len() < IN_FLIGHT {
            let (tier, app) = (Arc::clone(&tier), app.clone());
            let b = batch(n as i64);
            let p = n as i32 % PARTITIONS;
            inflight.spawn(async move {
                let key = PartitionKey::new(app, 0, PartitionRange::new(p, p).unwrap());
                tier.append(&key, &b).await.expect("append");
            });
            n += 1;
        }
        inflight.join_next().await.unwrap().unwrap();
    }
    (t0.elapsed().as_secs_f64(), cpu_seconds() - cpu0)
}

fn main() {
    let quick =
        std::env::args().any(|a| a == "--test") || !std::env::args().any(|a| a == "--bench");
    let (per_round, rounds) = if quick {
        (64u64 << 20, 1)
    } else {
        (1u64 << 30, 2)
    };
    let batches = (per_round / BATCH_BYTES as u64) as usize;
    // S3Proxy serves HTTP and HTTPS (a CA made for it), for the signed-payload and the
    // unsigned-payload rows side by side. The object tier's HTTPS client trusts that CA as an
    // operator's trusts a private one, through SSL_CERT_FILE; set before any thread starts.
    let proxy = s3proxy::start_with(&s3proxy::Options {
        tls: true,
        ..Default::default()
    });
    let proxy_https = proxy.tls.as_ref().expect("TLS").endpoint.clone();
    std::env::set_var("SSL_CERT_FILE", &proxy.tls.as_ref().expect("TLS").ca_pem);
    std::env::remove_var("SSL_CERT_DIR");
    let proxy_bucket = format!("bench-{}", std::process::id());
    proxy.create_bucket(&proxy_bucket);
    let hdfs_url = minicluster::shared().url.clone();
    let s3 = s3server::start();
    let bucket = format!("bench-{}", std::process::id());
    s3.create_bucket(&bucket);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let hdfs = HdfsTier::new(HdfsOptions {
        file_prefix: SERVER_ID.to_owned(),
        max_concurrency: IN_FLIGHT,
        partition_write_max_concurrency: 1,
        partition_write_max_concurrency_limit: 1,
        write_timeout: Duration::from_secs(120),
        failure_cooldown: Duration::from_secs(1),
        keep_open: Duration::from_secs(2),
        max_open_pairs: 40,
        identity: Identity::default(),
        hadoop_conf: Vec::new(),
    });
    // The same tier closing every pair after each append (Java's way, and Spillway's before
    // round 9), for the flush-latency table.
    let hdfs_close = HdfsTier::new(HdfsOptions {
        file_prefix: SERVER_ID.to_owned(),
        max_concurrency: IN_FLIGHT,
        partition_write_max_concurrency: 1,
        partition_write_max_concurrency_limit: 1,
        write_timeout: Duration::from_secs(120),
        failure_cooldown: Duration::from_secs(1),
        keep_open: Duration::ZERO,
        max_open_pairs: 40,
        identity: Identity::default(),
        hadoop_conf: Vec::new(),
    });
    let object_tier = || {
        ObjectTier::new(ObjectOptions {
            file_prefix: SERVER_ID.to_owned(),
            max_concurrency: IN_FLIGHT,
            write_timeout: Duration::from_secs(120),
            failure_cooldown: Duration::from_secs(1),
            hadoop_conf: Vec::new(),
        })
    };
    let (object, over_http, over_https) = (object_tier(), object_tier(), object_tier());
    let s3_conf: Vec<(String, String)> = [
        ("fs.s3a.endpoint", s3.endpoint.as_str()),
        ("fs.s3a.path.style.access", "true"),
        ("fs.s3a.access.key", "bench"),
        ("fs.s3a.secret.key", "bench"),
        ("fs.s3a.endpoint.region", "us-east-1"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let java_pids = pids_of("io.spillway.hdfs.MiniHdfs");
    let moto_pids = pids_of("moto_server");
    let proxy_pids = pids_of("s3proxy.conf");
    let peer = |pids: &[u32]| pids.iter().map(|p| process_cpu(*p)).sum::<f64>();
    let log_before = std::fs::read_to_string(&s3.log).unwrap_or_default().len();
    let mut rows = Vec::new();
    // (mode, pattern) -> latencies over all rounds.
    let mut latencies: BTreeMap<(&'static str, &'static str), Vec<f64>> = BTreeMap::new();
    let flushes = if quick { 8 } else { 48 };
    rt.block_on(async {
        for round in 0..rounds {
            let app = AppId::parse(&format!("app_bench_{round}")).unwrap();
            hdfs.register_app(
                &app,
                "bench",
                &RemoteStorage {
                    path: format!("{hdfs_url}/bench-{}-{round}", std::process::id()),
                    conf: Vec::new(),
                },
            )
            .unwrap();
            object
                .register_app(
                    &app,
                    &RemoteStorage {
                        path: format!("s3a://{bucket}/rss"),
                        conf: s3_conf.clone(),
                    },
                )
                .unwrap();
            for (tier, endpoint) in [(&over_http, &proxy.endpoint), (&over_https, &proxy_https)] {
                tier.register_app(
                    &app,
                    &RemoteStorage {
                        path: format!("s3a://{proxy_bucket}/rss"),
                        conf: proxy.s3a_conf_at(endpoint, s3proxy::SECRET_KEY),
                    },
                )
                .unwrap();
            }
            let tiers: [(&'static str, Arc<dyn Tier>, &[u32]); 4] = [
                ("hdfs", Arc::clone(&hdfs) as Arc<dyn Tier>, &java_pids),
                (
                    "s3 (moto, http: signed payload)",
                    Arc::clone(&object) as Arc<dyn Tier>,
                    &moto_pids,
                ),
                (
                    "s3 (S3Proxy, http: signed payload)",
                    Arc::clone(&over_http) as Arc<dyn Tier>,
                    &proxy_pids,
                ),
                (
                    "s3 (S3Proxy, https: unsigned payload)",
                    Arc::clone(&over_https) as Arc<dyn Tier>,
                    &proxy_pids,
                ),
            ];
            for (name, tier, pids) in tiers {
                let peer0 = peer(pids);
                let (secs, cpu) = flush_all(Arc::clone(&tier), &app, batches).await;
                rows.push(Row {
                    round: round + 1,
                    tier: name,
                    bytes: per_round,
                    secs,
                    cpu,
                    peer_cpu: peer(pids) - peer0,
                });
                // S3Proxy's filesystem backend answers DeleteObjects 501 Not Implemented;
                // its objects stay in its temporary directory.
                if let Err(e) = tier.purge(&PurgeScope::App(app.clone())).await {
                    assert!(name.contains("S3Proxy"), "purge of {name}: {e}");
                }
            }
            // Flush latency: both modes in turn, on the same MiniDFS.
            let lat_app = AppId::parse(&format!("app_latency_{round}")).unwrap();
            for (mode, tier) in [("close", &hdfs_close), ("keep_open", &hdfs)] {
                tier.register_app(
                    &lat_app,
                    "bench",
                    &RemoteStorage {
                        path: format!("{hdfs_url}/latency-{mode}-{}-{round}", std::process::id()),
                        conf: Vec::new(),
                    },
                )
                .unwrap();
                for (pattern, parts) in [("8 partitions in turn", 8), ("a new partition each", 0)] {
                    let got = flush_latencies(tier, &lat_app, flushes, parts).await;
                    latencies.entry((mode, pattern)).or_default().extend(got);
                }
                tier.purge(&PurgeScope::App(lat_app.clone()))
                    .await
                    .expect("purge");
            }
        }
    });
    // moto logs one line per request: `"PUT /bucket/key?… HTTP/1.1" 200 -`.
    let log = std::fs::read_to_string(&s3.log).unwrap_or_default();
    let mut requests: BTreeMap<&str, u64> = BTreeMap::new();
    for line in log[log_before.min(log.len())..].lines() {
        // werkzeug colours some lines: drop its ANSI escapes.
        let line = strip_ansi(line);
        let Some(rest) = line.split_once('"').map(|(_, r)| r) else {
            continue;
        };
        let method = rest.split_whitespace().next().unwrap_or("");
        let target = rest.split_whitespace().nth(1).unwrap_or("");
        let kind: &'static str = match method {
            "GET" if target.contains("list-type=2") => "LIST",
            "GET" => "GET",
            "PUT" => "PUT",
            "POST" => "POST",
            "HEAD" => "HEAD",
            "DELETE" => "DELETE",
            _ => continue,
        };
        if target.starts_with(&format!("/{bucket}")) {
            *requests.entry(kind).or_default() += 1;
        }
    }
    println!("remote tiers, {} MiB batches of {} KiB blocks, {PARTITIONS} partitions, {IN_FLIGHT} in flight:", BATCH_BYTES >> 20, BLOCK_BYTES >> 10);
    println!("| round | tier | MB/s | CPU-s/GB (this process) | CPU-s/GB (storage process) |");
    println!("|---|---|---|---|---|");
    for r in &rows {
        let gb = r.bytes as f64 / 1e9;
        println!(
            "| {} | {} | {:.0} | {:.3} | {:.3} |",
            r.round,
            r.tier,
            r.bytes as f64 / 1e6 / r.secs,
            r.cpu / gb,
            r.peer_cpu / gb
        );
    }
    println!(
        "HDFS flush latency, {} MiB flushes one at a time ({} per mode, pattern and round), from the append's call to its return:",
        LATENCY_FLUSH_BYTES >> 20,
        flushes
    );
    println!("| pattern | mode | p50 ms | p90 ms | p99 ms | max ms | memory held per flush, mean (MiB·s) |");
    println!("|---|---|---|---|---|---|---|");
    for ((mode, pattern), mut l) in latencies {
        l.sort_by(f64::total_cmp);
        let mean = l.iter().sum::<f64>() / l.len() as f64;
        println!(
            "| {pattern} | {mode} | {:.1} | {:.1} | {:.1} | {:.1} | {:.3} |",
            percentile(&l, 0.5) * 1e3,
            percentile(&l, 0.9) * 1e3,
            percentile(&l, 0.99) * 1e3,
            l.last().copied().unwrap_or(0.0) * 1e3,
            mean * (LATENCY_FLUSH_BYTES >> 20) as f64
        );
    }
    let s3_gb: f64 = rows
        .iter()
        .filter(|r| r.tier.contains("moto"))
        .map(|r| r.bytes as f64 / 1e9)
        .sum();
    // AWS S3 Standard list prices: PUT, COPY, POST, LIST $0.005 per 1,000; GET and the rest
    // $0.0004 per 1,000; DELETE free.
    let price = |kind: &str| match kind {
        "PUT" | "POST" | "LIST" => 0.005 / 1000.0,
        "DELETE" => 0.0,
        _ => 0.0004 / 1000.0,
    };
    let mut dollars = 0.0;
    println!("S3 requests per GB written and purged (server side):");
    for (kind, n) in &requests {
        let per_gb = *n as f64 / s3_gb;
        dollars += per_gb * price(kind);
        println!("  {kind}: {per_gb:.1}");
    }
    println!("  cost at AWS list prices: ${dollars:.5} per GB");
}
