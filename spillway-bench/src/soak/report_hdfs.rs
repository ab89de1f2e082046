//! The report's HDFS, S3 and Spark sections, and the failures they add: HDFS or S3 that never
//! received a byte although apps registered it (the tier was not exercised at all), a Spark job with a wrong
//! result, no Spark job succeeding in a run that started one, or no vanilla baseline.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

use super::faults::Logged;
use super::hdfs::Written;
use super::spark;

/// HDFS append failures as the router logs them: one WARN per app and cause (then a count when
/// the cause passes), so this counts causes, not appends. The servers' `storage_failed_write_remote`
/// counts only batches given up, as Java's does, so the log is where these show.
fn failed_over(log: &PathBuf) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("spill to tier failed") && l.contains("tier=\"hdfs\""))
        .count()
}

/// The HDFS section: per server what it wrote to HDFS, and what the apps read back from it.
pub fn section(
    written: &[Written],
    logs: &[PathBuf],
    apps: u64,
    blocks: u64,
    rereads: u64,
    faults: &[Logged],
    failures: &mut Vec<String>,
) -> String {
    let mut md = String::new();
    let restarts = faults
        .iter()
        .filter(|f| f.what.starts_with("NameNode stopped"))
        .count();
    let total: f64 = written.iter().map(|w| w.bytes).sum();
    let _ = writeln!(
        md,
        "### HDFS (MiniDFS, `MEMORY_LOCALFILE_HDFS`)\n\n{apps} apps registered it as remote storage; {blocks} of their blocks were read back from HDFS directly (as the client does) and verified; {rereads} reads missed blocks and were read again; {restarts} NameNode restarts. Bytes each server appended to HDFS (at least: counters are summed over its processes, polled every 2 s):\n"
    );
    let _ = writeln!(
        md,
        "| server | HDFS bytes | appends | append failure causes logged (one per app and cause) | batches given up |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|");
    for (i, w) in written.iter().enumerate() {
        let _ = writeln!(
            md,
            "| server{i} | {:.1} MiB | {:.0} | {} | {:.0} |",
            w.bytes / (1u64 << 20) as f64,
            w.appends,
            logs.get(i).map_or(0, failed_over),
            w.failed
        );
    }
    md.push('\n');
    if apps > 0 && total == 0.0 && blocks == 0 {
        failures.push(format!(
            "HDFS received no data although {apps} apps registered it (the HDFS tier was not exercised)"
        ));
    }
    md
}

/// The S3 section: per server what it wrote to the soak's bucket, and what the apps read back
/// from it. A soak whose S3 apps all went to local disk fails: it proved nothing about the tier.
pub fn s3_section(
    written: &[Written],
    apps: u64,
    blocks: u64,
    rereads: u64,
    faults: &[Logged],
    failures: &mut Vec<String>,
) -> String {
    let mut md = String::new();
    let freezes = faults
        .iter()
        .filter(|f| f.what.starts_with("S3 store frozen"))
        .count();
    let total: f64 = written.iter().map(|w| w.s3_bytes).sum();
    let _ = writeln!(
        md,
        "### S3 (moto's S3 server, `s3a://` bucket, `MEMORY_LOCALFILE_HDFS`)\n\n{apps} apps registered it as remote storage; {blocks} of their blocks were read back from the bucket directly (as the client's s3a does) and verified; {rereads} reads missed blocks and were read again; {freezes} store freezes. Bytes each server wrote to the bucket (at least: counters are summed over its processes, polled every 2 s):\n"
    );
    let _ = writeln!(md, "| server | S3 bytes |");
    let _ = writeln!(md, "|---|---|");
    for (i, w) in written.iter().enumerate() {
        let _ = writeln!(
            md,
            "| server{i} | {:.1} MiB |",
            w.s3_bytes / (1u64 << 20) as f64
        );
    }
    md.push('\n');
    if apps > 0 && total == 0.0 && blocks == 0 {
        failures.push(format!(
            "S3 received no data although {apps} apps registered it (the object tier was not exercised)"
        ));
    }
    md
}

/// The Spark section; `result` is the Spark task's end (an error: no baseline, no JVM).
pub fn spark_section(
    counts: &spark::Counts,
    result: anyhow::Result<()>,
    jobs: &[String],
    hdfs: bool,
    failures: &mut Vec<String>,
) -> String {
    let get = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let (started, ok, failed, wrong) = (
        get(&counts.started),
        get(&counts.ok),
        get(&counts.failed),
        get(&counts.wrong),
    );
    let mut md = String::new();
    let _ = writeln!(
        md,
        "### Spark jobs ({}, client {}, GRPC and GRPC_NETTY, replica 3 / write 2 / read 2, one at a time, {})\n",
        jobs.join(", "),
        spark::CLIENT_VERSION,
        if hdfs {
            "every other round MEMORY_LOCALFILE_HDFS"
        } else {
            "MEMORY_LOCALFILE"
        }
    );
    let _ = writeln!(
        md,
        "| started | ok (= vanilla) | failed and retried | wrong result |"
    );
    let _ = writeln!(md, "|---|---|---|---|");
    let _ = writeln!(md, "| {started} | {ok} | {failed} | {wrong} |\n");
    if let Err(e) = result {
        failures.push(format!("Spark jobs: {e:#}"));
    }
    if wrong > 0 {
        failures.push(format!(
            "{wrong} Spark jobs with a result other than vanilla Spark's"
        ));
    }
    if started > 0 && ok == 0 {
        failures.push(format!("none of the {started} Spark jobs succeeded"));
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_without_data_fails() {
        let mut f = Vec::new();
        s3_section(&[Written::default(); 3], 10, 0, 0, &[], &mut f);
        assert_eq!(f.len(), 1, "{f:?}");
        let mut f = Vec::new();
        let some = [Written {
            s3_bytes: 2.0 * (1u64 << 20) as f64,
            ..Written::default()
        }];
        let md = s3_section(&some, 10, 5, 0, &[], &mut f);
        assert!(f.is_empty(), "{f:?}");
        assert!(md.contains("| server0 | 2.0 MiB |"), "{md}");
    }

    #[test]
    fn hdfs_without_data_and_spark_without_success_fail() {
        let mut f = Vec::new();
        let none = [Written::default(); 3];
        section(&none, &[], 10, 0, 0, &[], &mut f);
        assert_eq!(f.len(), 1, "{f:?}");
        let some = [Written {
            bytes: 1.0,
            s3_bytes: 0.0,
            appends: 1.0,
            failed: 0.0,
        }];
        let mut f = Vec::new();
        let dir = tempfile::TempDir::new().unwrap();
        let log = dir.path().join("server0.log");
        std::fs::write(
            &log,
            "x WARN spillway::store::router: spill to tier failed partition=a/0/1-1 tier=\"hdfs\" error=e\n\
             x WARN spillway::store::router: spill to tier failed partition=a/0/1-1 tier=\"localfile\" error=e\n",
        )
        .unwrap();
        let md = section(&some, &[log], 10, 5, 0, &[], &mut f);
        assert!(md.contains("| server0 | 0.0 MiB | 1 | 1 | 0 |"), "{md}");
        assert!(f.is_empty() && md.contains("| server0 |"), "{f:?} {md}");

        let c = spark::Counts::default();
        c.started.store(2, Ordering::Relaxed);
        c.failed.store(2, Ordering::Relaxed);
        let mut f = Vec::new();
        spark_section(&c, Ok(()), &["sort".into()], true, &mut f);
        assert_eq!(f, vec!["none of the 2 Spark jobs succeeded".to_string()]);
        c.ok.store(1, Ordering::Relaxed);
        c.wrong.store(1, Ordering::Relaxed);
        let mut f = Vec::new();
        spark_section(&c, Ok(()), &["sort".into()], true, &mut f);
        assert_eq!(f.len(), 1, "{f:?}");
        let mut f = Vec::new();
        c.wrong.store(0, Ordering::Relaxed);
        spark_section(&c, Err(anyhow::anyhow!("no baseline")), &[], false, &mut f);
        assert_eq!(f.len(), 1, "{f:?}");
    }
}
