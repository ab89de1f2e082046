//! Once a second, per server: RSS, open fds and threads from `/proc/<pid>`, the runtime's
//! threads and blocking calls from its `/metrics/jvm` JSON (`spillway::runtime` says why the
//! threads are split three ways), the write-memory gauges from its `/metrics/server` JSON, and
//! the size of its recovery journal on disk. A
//! restarted server continues the same series (the pid is read afresh each time); while no
//! process serves, the sample is a gap, not a zero.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::cluster::Shared;

/// The resources sampled, in report order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resource {
    /// VmRSS, bytes.
    Rss,
    /// Entries of `/proc/<pid>/fd`.
    Fds,
    /// `Threads:` of `/proc/<pid>/status`.
    Threads,
    /// `tokio_threads`: the runtime's workers and blocking pool (a high-water mark of the
    /// blocking calls run at once while the load lasts).
    RuntimeThreads,
    /// [`Resource::Threads`] − [`Resource::RuntimeThreads`]: threads the server starts itself
    /// (journal, audit writers) and the allocator's; fixed by design.
    OtherThreads,
    /// `tokio_blocking_tasks`: blocking file and socket calls queued or running.
    BlockingTasks,
    /// `used_buffer_size`: write memory in use (reserved + cached + in flush).
    UsedBuffer,
    /// `allocated_buffer_size`: bytes reserved by requireBuffer tickets not yet used.
    AllocatedBuffer,
    /// `require_buffer_count`: outstanding tickets.
    Tickets,
    /// `app_num_with_node`: apps the server holds (kept apps, running apps, and failed
    /// attempts until they expire).
    Apps,
    /// Bytes of `.spillway-meta/journal-*.log` over the data paths.
    Journal,
}

impl Resource {
    /// Every resource.
    pub const ALL: [Resource; COUNT] = [
        Resource::Rss,
        Resource::Fds,
        Resource::Threads,
        Resource::RuntimeThreads,
        Resource::OtherThreads,
        Resource::BlockingTasks,
        Resource::UsedBuffer,
        Resource::AllocatedBuffer,
        Resource::Tickets,
        Resource::Apps,
        Resource::Journal,
    ];

    /// Name in the table and the plot's file name.
    pub fn name(self) -> &'static str {
        match self {
            Resource::Rss => "rss",
            Resource::Fds => "fds",
            Resource::Threads => "threads",
            Resource::RuntimeThreads => "runtime_threads",
            Resource::OtherThreads => "other_threads",
            Resource::BlockingTasks => "blocking_tasks",
            Resource::UsedBuffer => "used_buffer_size",
            Resource::AllocatedBuffer => "allocated_buffer_size",
            Resource::Tickets => "require_buffer_count",
            Resource::Apps => "app_num_with_node",
            Resource::Journal => "journal_bytes",
        }
    }

    /// True when the value is bytes (shown in MiB).
    pub fn bytes(self) -> bool {
        matches!(
            self,
            Resource::Rss | Resource::UsedBuffer | Resource::AllocatedBuffer | Resource::Journal
        )
    }
}

/// How many resources are sampled.
pub const COUNT: usize = 11;

/// One sample of one server: seconds since the start and a value per [`Resource::ALL`].
#[derive(Clone, Debug)]
pub struct Sample {
    /// Seconds since the start.
    pub t: f64,
    /// In [`Resource::ALL`] order; `None`: not measured (no process, or the endpoint failed).
    pub values: [Option<f64>; COUNT],
}

/// Every server's series.
#[derive(Default, Debug)]
pub struct Series {
    /// Per server, in time order.
    pub per_node: Vec<Vec<Sample>>,
}

fn proc_values(pid: u32) -> (Option<f64>, Option<f64>, Option<f64>) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok();
    let field = |name: &str| -> Option<f64> {
        let s = status.as_deref()?;
        let line = s.lines().find(|l| l.starts_with(name))?;
        line[name.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()
    };
    let rss = field("VmRSS:").map(|kb| kb * 1024.0);
    let threads = field("Threads:");
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .ok()
        .map(|d| d.count() as f64);
    (rss, fds, threads)
}

fn journal_bytes(paths: &[PathBuf]) -> Option<f64> {
    let mut total = 0u64;
    let mut found = false;
    for p in paths {
        let Ok(dir) = std::fs::read_dir(p.join(".spillway-meta")) else {
            continue;
        };
        for e in dir.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with("journal-") {
                found = true;
                total += e.metadata().map(|m| m.len()).unwrap_or(0);
            }
        }
    }
    found.then_some(total as f64)
}

/// A server's `/metrics/server?{query}` JSON on its HTTP port; `None` when it does not answer
/// (restarting, stalled) or answers something else, which the callers record as a gap.
pub async fn server_metrics(
    http: &reqwest::Client,
    port: u16,
    query: &str,
) -> Option<serde_json::Value> {
    metrics_json(http, port, "server", query).await
}

async fn metrics_json(
    http: &reqwest::Client,
    port: u16,
    kind: &str,
    query: &str,
) -> Option<serde_json::Value> {
    let url = format!("http://127.0.0.1:{port}/metrics/{kind}?{query}");
    match http.get(&url).send().await {
        Ok(r) if r.status().is_success() => r
            .bytes()
            .await
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok()),
        _ => None,
    }
}

/// A server's `/metrics/jvm` JSON with the runtime's two gauges.
pub async fn jvm_metrics(http: &reqwest::Client, port: u16) -> Option<serde_json::Value> {
    let query = "name[]=tokio_threads&name[]=tokio_blocking_tasks";
    metrics_json(http, port, "jvm", query).await
}

/// `tokio_threads` and `tokio_blocking_tasks` of a [`jvm_metrics`] answer.
pub fn runtime_values(body: Option<&serde_json::Value>) -> [Option<f64>; 2] {
    let g = body.map_or(vec![None; 2], |b| {
        gauges(b, &["tokio_threads", "tokio_blocking_tasks"])
    });
    [g[0], g[1]]
}

/// The values of `names` in a `/metrics/server` JSON answer (summed over label sets).
pub fn gauges_of(body: &serde_json::Value, names: &[&str]) -> Vec<Option<f64>> {
    gauges(body, names)
}

fn gauges(body: &serde_json::Value, names: &[&str]) -> Vec<Option<f64>> {
    let samples = body.get("metrics").and_then(|m| m.as_array());
    names
        .iter()
        .map(|name| {
            let samples = samples?;
            let mut found = None;
            for m in samples {
                if m.get("name").and_then(|n| n.as_str()) == Some(name) {
                    let v = m.get("value").and_then(|v| v.as_f64())?;
                    found = Some(found.unwrap_or(0.0) + v);
                }
            }
            found
        })
        .collect()
}

/// Samples every second until `stop`; returns the series.
pub async fn run(
    shared: Arc<Shared>,
    data_paths: Vec<Vec<PathBuf>>,
    stop: tokio_util::sync::CancellationToken,
) -> Series {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap_or_default();
    let mut series = Series {
        per_node: vec![Vec::new(); shared.nodes.len()],
    };
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return series,
            _ = tick.tick() => {}
        }
        for (i, node) in shared.nodes.iter().enumerate() {
            let t = shared.now();
            let pid = node.pid.load(Ordering::Relaxed);
            let up = node.up.load(Ordering::Relaxed) && pid != 0;
            // The runtime's count first and the process's right after, so a blocking thread
            // started between the two reads is rare (it would count as another thread once).
            let runtime = if up {
                jvm_metrics(&http, node.http).await
            } else {
                None
            };
            let (rss, fds, threads) = if up {
                proc_values(pid)
            } else {
                (None, None, None)
            };
            let [runtime_threads, blocking] = runtime_values(runtime.as_ref());
            let other = threads.zip(runtime_threads).map(|(all, rt)| all - rt);
            let metrics = if up {
                server_metrics(
                    &http,
                    node.http,
                    "name[]=used_buffer_size&name[]=allocated_buffer_size\
                     &name[]=require_buffer_count&name[]=app_num_with_node",
                )
                .await
            } else {
                None
            };
            let g = metrics.as_ref().map_or(vec![None; 4], |b| {
                gauges(
                    b,
                    &[
                        "used_buffer_size",
                        "allocated_buffer_size",
                        "require_buffer_count",
                        "app_num_with_node",
                    ],
                )
            });
            let journal = journal_bytes(&data_paths[i]);
            series.per_node[i].push(Sample {
                t,
                values: [
                    rss,
                    fds,
                    threads,
                    runtime_threads,
                    other,
                    blocking,
                    g[0],
                    g[1],
                    g[2],
                    g[3],
                    journal,
                ],
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauges_sum_label_sets_and_miss_absent_names() {
        let body = serde_json::json!({"metrics": [
            {"name": "used_buffer_size", "value": 3.0},
            {"name": "used_buffer_size", "value": 4.0},
            {"name": "require_buffer_count", "value": 0.0},
        ]});
        assert_eq!(
            gauges(&body, &["used_buffer_size", "require_buffer_count", "x"]),
            vec![Some(7.0), Some(0.0), None]
        );
        let (rss, fds, threads) = proc_values(std::process::id());
        assert!(rss.unwrap() > 0.0 && fds.unwrap() > 0.0 && threads.unwrap() >= 1.0);
    }
}
