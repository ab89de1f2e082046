//! The soak's HDFS side: the NameNode restart fault, and what every server wrote to its remote
//! tiers (HDFS, and the S3 bucket apart), so the report shows that each really took data (a
//! soak whose remote apps all fell back to local files would prove nothing about the remote
//! tiers) and how many appends failed during outages.
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

/// The remote-tier counters of one server, summed over its processes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Written {
    /// Bytes appended to HDFS (`total_hadoop_write_data`, all hosts but the S3 bucket).
    pub bytes: f64,
    /// Bytes written to the soak's S3 bucket (`total_hadoop_write_data{storage_host=<bucket>}`:
    /// the object tier labels its writes with the bucket, as Java labels a remote storage by
    /// its host).
    pub s3_bytes: f64,
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
        if now.bytes < last.bytes
            || now.s3_bytes < last.s3_bytes
            || now.appends < last.appends
            || now.failed < last.failed
        {
            let d = &mut self.done[i];
            d.bytes += last.bytes;
            d.s3_bytes += last.s3_bytes;
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
                s3_bytes: d.s3_bytes + c.s3_bytes,
                appends: d.appends + c.appends,
                failed: d.failed + c.failed,
            })
            .collect()
    }
}

/// One server's counters from a `/metrics/server` body. `total_hadoop_write_data` has one
/// sample per remote host (a NameNode, a bucket) plus `storage_host="ALL"`, their sum: the
/// largest is the total, and the HDFS share is the total minus the sample of `bucket`.
pub fn written_of(body: &serde_json::Value, bucket: Option<&str>) -> Option<Written> {
    let samples = body.get("metrics")?.as_array()?;
    let mut v = [None::<f64>; 3];
    let mut s3 = 0.0;
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
        let host = m
            .get("labelNames")
            .and_then(|n| n.as_array())
            .and_then(|n| n.iter().position(|n| n == "storage_host"))
            .and_then(|at| m.get("labelValues")?.get(at))
            .and_then(|h| h.as_str());
        if k == 0 && bucket.is_some() && host == bucket {
            s3 = x;
        }
        v[k] = Some(v[k].map_or(x, |y: f64| y.max(x)));
    }
    Some(Written {
        // No remote write yet: the labelled family has no sample.
        bytes: v[0].unwrap_or(0.0) - s3,
        s3_bytes: s3,
        appends: v[1]?,
        failed: v[2]?,
    })
}

/// Polls every server's remote-tier counters every 2 s until `stop`, then once more; writes
/// labelled `bucket` are the S3 bucket's.
pub async fn poll(shared: Arc<Shared>, bucket: Option<&str>, stop: CancellationToken) -> Stats {
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
            if let Some(w) = body.as_ref().and_then(|b| written_of(b, bucket)) {
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
    use super::super::schedule::{schedule, Kind, Parts};
    use super::*;

    #[test]
    fn restarted_processes_add_up() {
        let w = |bytes, appends, failed| Written {
            bytes,
            s3_bytes: 0.0,
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
        let got = written_of(&body, None).unwrap();
        assert_eq!((got.bytes, got.appends, got.failed), (40.0, 3.0, 1.0));
        // With the S3 bucket as a second host.
        let body = serde_json::json!({"metrics": [
            {"name": "total_hadoop_write_data", "labelNames": ["tags", "storage_host"],
             "labelValues": ["ss_v5", "127.0.0.1:9000"], "value": 40.0},
            {"name": "total_hadoop_write_data", "labelNames": ["tags", "storage_host"],
             "labelValues": ["ss_v5", "soak-bucket"], "value": 25.0},
            {"name": "total_hadoop_write_data", "labelNames": ["tags", "storage_host"],
             "labelValues": ["ss_v5", "ALL"], "value": 65.0},
            {"name": "storage_success_write_remote", "value": 5.0},
            {"name": "storage_failed_write_remote", "value": 0.0},
        ]});
        let got = written_of(&body, Some("soak-bucket")).unwrap();
        assert_eq!((got.bytes, got.s3_bytes), (40.0, 25.0));
        // Before the first HDFS write the labelled family is empty.
        let body = serde_json::json!({"metrics": [
            {"name": "storage_success_write_remote", "value": 0.0},
            {"name": "storage_failed_write_remote", "value": 0.0},
        ]});
        assert_eq!(written_of(&body, Some("b")), Some(Written::default()));
        assert_eq!(written_of(&serde_json::json!({"metrics": []}), None), None);
    }

    #[test]
    fn namenode_restarts_are_planned_only_with_hdfs() {
        let with = schedule(7, 600.0, 20.0, 20.0, Parts::all());
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
        assert!(schedule(
            7,
            600.0,
            20.0,
            20.0,
            Parts {
                hdfs: false,
                ..Parts::all()
            }
        )
        .iter()
        .all(|f| f.kind != Kind::NameNodeRestart));
    }
}
