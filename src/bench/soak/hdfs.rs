//! The soak's HDFS side: the NameNode restart fault, and what every server wrote to HDFS, so
//! the report shows that HDFS really took data (a soak whose HDFS apps all fell back to local
//! files would prove nothing about the HDFS tier) and how many appends failed during outages.
//!
//! The servers' counters start from zero in each new process, so [`Stats`] polls them and
//! adds up each process's last value: the sum is a lower bound (what a process wrote after
//! its last poll and before a SIGKILL is not seen).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::cluster::Shared;
use super::minidfs::MiniDfs;

/// Stops the NameNode, waits `hold` (or until `stop`), and starts it again on the same port
/// with the same metadata; `start-namenode` returns once the DataNode has registered again.
/// While it is down every server's HDFS appends fail: the servers must keep the blocks in
/// memory or put them on local disks, never drop them.
pub async fn restart(
    dfs: &mut MiniDfs,
    hold: Duration,
    stop: &CancellationToken,
) -> anyhow::Result<()> {
    dfs.command("stop-namenode").await?;
    tokio::select! {
        _ = stop.cancelled() => {}
        _ = tokio::time::sleep(hold) => {}
    }
    dfs.command("start-namenode").await
}

/// The HDFS counters of one server, summed over its processes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Written {
    /// Bytes appended to HDFS (`total_hadoop_write_data`).
    pub bytes: f64,
    /// Appends that succeeded (`storage_success_write_remote`).
    pub appends: f64,
    /// Appends that failed (`storage_failed_write_remote`): the batch stayed in memory or
    /// went to local files.
    pub failed: f64,
}

/// The counters of this process.
const NAMES: [&str; 3] = [
    "total_hadoop_write_data",
    "storage_success_write_remote",
    "storage_failed_write_remote",
];

/// Per server: the finished processes' sum and the current process's last values.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    done: Vec<Written>,
    current: Vec<Written>,
}

impl Stats {
    /// Takes one reading of server `i`. A counter lower than the last reading means a new
    /// process: the old one's last values are kept.
    pub fn observe(&mut self, i: usize, now: Written) {
        if self.done.len() <= i {
            self.done.resize(i + 1, Written::default());
            self.current.resize(i + 1, Written::default());
        }
        let last = self.current[i];
        if now.bytes < last.bytes || now.appends < last.appends || now.failed < last.failed {
            let d = &mut self.done[i];
            d.bytes += last.bytes;
            d.appends += last.appends;
            d.failed += last.failed;
        }
        self.current[i] = now;
    }

    /// Each server's totals.
    pub fn totals(&self) -> Vec<Written> {
        self.done
            .iter()
            .zip(&self.current)
            .map(|(d, c)| Written {
                bytes: d.bytes + c.bytes,
                appends: d.appends + c.appends,
                failed: d.failed + c.failed,
            })
            .collect()
    }
}

/// One server's counters from a `/metrics/server` body. `total_hadoop_write_data` has one
/// sample per NameNode host plus `storage_host="ALL"`, their sum: the largest is the total.
pub fn written_of(body: &serde_json::Value) -> Option<Written> {
    let samples = body.get("metrics")?.as_array()?;
    let mut v = [None::<f64>; 3];
    for m in samples {
        let Some(name) = m.get("name").and_then(|n| n.as_str()) else {
            continue;
        };
        let Some(k) = NAMES.iter().position(|n| *n == name) else {
            continue;
        };
        let Some(x) = m.get("value").and_then(|x| x.as_f64()) else {
            continue;
        };
        v[k] = Some(v[k].map_or(x, |y: f64| y.max(x)));
    }
    Some(Written {
        // No HDFS write yet: the labelled family has no sample.
        bytes: v[0].unwrap_or(0.0),
        appends: v[1]?,
        failed: v[2]?,
    })
}

/// Polls every server's HDFS counters every 2 s until `stop`, then once more.
pub async fn poll(shared: Arc<Shared>, stop: CancellationToken) -> Stats {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap_or_default();
    let query = NAMES
        .iter()
        .map(|n| format!("name[]={n}"))
        .collect::<Vec<_>>()
        .join("&");
    let mut stats = Stats::default();
    loop {
        let last = stop.is_cancelled();
        for (i, node) in shared.nodes.iter().enumerate() {
            if !node.up.load(std::sync::atomic::Ordering::Relaxed) {
                continue;
            }
            let body = super::sampler::server_metrics(&http, node.http, &query).await;
            if let Some(w) = body.as_ref().and_then(written_of) {
                stats.observe(i, w);
            }
        }
        if last {
            return stats;
        }
        tokio::select! {
            _ = stop.cancelled() => {}
            _ = tokio::time::sleep(Duration::from_secs(2)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::faults::{schedule, Kind};
    use super::*;

    #[test]
    fn restarted_processes_add_up() {
        let w = |bytes, appends, failed| Written {
            bytes,
            appends,
            failed,
        };
        let mut s = Stats::default();
        s.observe(1, w(100.0, 2.0, 0.0));
        s.observe(1, w(300.0, 5.0, 1.0));
        // A new process: counters from zero.
        s.observe(1, w(50.0, 1.0, 0.0));
        s.observe(1, w(70.0, 2.0, 0.0));
        assert_eq!(s.totals()[0], Written::default());
        assert_eq!(s.totals()[1], w(370.0, 7.0, 1.0));
    }

    #[test]
    fn hadoop_bytes_are_the_all_hosts_sample() {
        let body = serde_json::json!({"metrics": [
            {"name": "total_hadoop_write_data", "labelValues": ["127.0.0.1:9000"], "value": 40.0},
            {"name": "total_hadoop_write_data", "labelValues": ["ALL"], "value": 40.0},
            {"name": "storage_success_write_remote", "value": 3.0},
            {"name": "storage_failed_write_remote", "value": 1.0},
        ]});
        let got = written_of(&body).unwrap();
        assert_eq!((got.bytes, got.appends, got.failed), (40.0, 3.0, 1.0));
        // Before the first HDFS write the labelled family is empty.
        let body = serde_json::json!({"metrics": [
            {"name": "storage_success_write_remote", "value": 0.0},
            {"name": "storage_failed_write_remote", "value": 0.0},
        ]});
        assert_eq!(written_of(&body), Some(Written::default()));
        assert_eq!(written_of(&serde_json::json!({"metrics": []})), None);
    }

    #[test]
    fn namenode_restarts_are_planned_only_with_hdfs() {
        let with = schedule(7, 600.0, 20.0, 20.0, true, true, true);
        // Every kind once per round, the NameNode restart among them.
        let mut kinds: Vec<String> = with.iter().map(|f| format!("{:?}", f.kind)).collect();
        kinds.sort();
        kinds.dedup();
        for round in with.chunks_exact(kinds.len()) {
            assert_eq!(
                round
                    .iter()
                    .filter(|f| f.kind == Kind::NameNodeRestart)
                    .count(),
                1,
                "{round:?}"
            );
        }
        assert!(with.len() >= kinds.len());
        assert!(schedule(7, 600.0, 20.0, 20.0, true, true, false)
            .iter()
            .all(|f| f.kind != Kind::NameNodeRestart));
    }
}
