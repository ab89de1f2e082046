//! Spark jobs as soak apps: the harness's `SparkJobs` (tests/spark, Spark 3.5 in local mode
//! with the released Uniffle client) run one after the other against the soak's coordinators
//! while the generator apps and the faults go on, each job's result compared with the same
//! job on Spark's own shuffle (a vanilla baseline taken once at the start).
//!
//! Replicas: `spark.rss.data.replica=3`, write 2, read 2. The client refuses a write + read
//! quorum that is not above the replica count ("Replica config is unsafe"), so 2/1/1 cannot
//! run; 3/2/2 lets one server go away at any time after the shuffle was assigned: writes go to
//! the third replica when one of the first two fails, and block-id reports and reads still
//! have two servers. A shuffle registered while one of the three is down fails, as Uniffle's
//! does. With HDFS, every other round of jobs registers the MiniDFS as remote storage
//! (`MEMORY_LOCALFILE_HDFS`), so the released client's own HDFS reads meet NameNode restarts,
//! and every other pair of rounds runs over `GRPC_NETTY` (writes and reads on the Netty plane),
//! so both planes meet every fault with the real client.
//!
//! How a job counts, as the generator's apps do (the soak module doc): a job whose result
//! equals the vanilla one is **ok**; a job that threw (a task failed: Spark would retry the
//! stage, the harness's jobs allow one attempt per task so an RSS error shows) is **failed
//! and retried**, the next job runs; a job that completed with a result other than vanilla's
//! (or that broke its own checks) is **wrong**, a failure of the soak.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

use super::cluster::{Shared, COORDINATORS};

/// Where the harness is by default: this checkout's `tests/spark`.
pub fn default_harness() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/spark"))
}

/// The client version the soak's jobs use (the harness's first, built by
/// `tests/spark/run.sh --build-only`).
pub const CLIENT_VERSION: &str = "0.9.2";

/// A job that ran longer than this is killed and counted as failed: a hang is a failure of
/// that job, not of the soak's schedule.
const JOB_TIMEOUT: Duration = Duration::from_secs(300);

/// The harness's compiled client classpath (`classes` + `deps`), if it was built.
pub fn classpath(harness: &Path) -> Option<String> {
    let dir = harness
        .join("target")
        .join(format!("uniffle-{CLIENT_VERSION}"));
    (dir.join("classes").is_dir() && dir.join("deps").is_dir()).then(|| {
        format!(
            "{}:{}/*",
            dir.join("classes").display(),
            dir.join("deps").display()
        )
    })
}

/// What the Spark jobs did.
#[derive(Default, Debug)]
pub struct Counts {
    /// Jobs started.
    pub started: AtomicU64,
    /// Jobs whose result equalled vanilla Spark's.
    pub ok: AtomicU64,
    /// Jobs that threw or timed out (failed and retried: the next job runs).
    pub failed: AtomicU64,
    /// Jobs that completed with another result than vanilla Spark's.
    pub wrong: AtomicU64,
}

/// How the jobs run.
pub struct Jobs {
    /// The classpath from [`classpath`].
    pub classpath: String,
    /// The jobs, taken in turn (`SparkJobs` names).
    pub jobs: Vec<String>,
    /// Where logs, the baseline and Spark's local dirs go.
    pub dir: PathBuf,
    /// `-Xmx` of each JVM.
    pub heap: String,
    /// With HDFS: the `spark.rss.remote.storage.path` of every other round of jobs, which run
    /// `MEMORY_LOCALFILE_HDFS`, so the released client reads what the servers spilled to
    /// HDFS itself (across NameNode restarts); the other rounds run `MEMORY_LOCALFILE`.
    pub remote_storage: Option<String>,
}

/// The JVM options the harness uses (run.sh `JAVA_OPTS`), with a small heap.
fn java_opts(heap: &str) -> Vec<String> {
    let mut v = vec![format!("-Xmx{heap}"), "-XX:+UseSerialGC".to_string()];
    v.push("-XX:+IgnoreUnrecognizedVMOptions".into());
    for pkg in [
        "java.lang",
        "java.lang.invoke",
        "java.lang.reflect",
        "java.io",
        "java.net",
        "java.nio",
        "java.util",
        "java.util.concurrent",
        "java.util.concurrent.atomic",
        "jdk.internal.ref",
        "sun.nio.ch",
        "sun.nio.cs",
        "sun.security.action",
        "sun.util.calendar",
    ] {
        v.push(format!("--add-opens=java.base/{pkg}=ALL-UNNAMED"));
    }
    v.extend(
        [
            "-Djdk.reflect.useDirectMethodHandle=false",
            "-Dio.netty.tryReflectionSetAccessible=true",
            // apache/uniffle#2082: the 0.9.x client's shaded Netty fails reads on Java 17.
            "-Dorg.apache.uniffle.shaded.io.netty.noUnsafe=true",
            "-Dorg.apache.uniffle.io.netty.noUnsafe=true",
        ]
        .map(String::from),
    );
    v
}

/// What one `SparkJobs` run printed.
enum Outcome {
    Ok,
    Threw(String),
    Wrong(String),
}

impl Jobs {
    /// Runs `SparkJobs` with `args`, stdout to `<name>.out`, stderr to `<name>.log`.
    async fn spark(&self, name: &str, args: &[String]) -> anyhow::Result<(bool, String)> {
        let local = self.dir.join("spark-local");
        std::fs::create_dir_all(&local)?;
        let log = std::fs::File::create(self.dir.join(format!("{name}.log")))?;
        let mut cmd = Command::new("java");
        cmd.args(java_opts(&self.heap))
            .arg(format!("-Djava.io.tmpdir={}", local.display()))
            .arg("-cp")
            .arg(&self.classpath)
            .arg("io.spillway.sparktest.SparkJobs")
            .arg("--local-dir")
            .arg(&local)
            .args(["--label", name])
            .args(args)
            .env("SPARK_LOCAL_IP", "127.0.0.1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(true);
        let child = cmd.spawn().context("starting java (SparkJobs)")?;
        let out = tokio::time::timeout(JOB_TIMEOUT, child.wait_with_output()).await;
        let Ok(out) = out else {
            return Ok((false, format!("timed out after {JOB_TIMEOUT:?}")));
        };
        let out = out?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        std::fs::write(self.dir.join(format!("{name}.out")), &text)?;
        Ok((out.status.success(), text))
    }

    /// The vanilla baseline of every job (Spark's own shuffle), once.
    pub async fn baseline(&self) -> anyhow::Result<PathBuf> {
        std::fs::create_dir_all(&self.dir)?;
        let file = self.dir.join("baseline.tsv");
        let args = [
            "--mode".to_string(),
            "vanilla".into(),
            "--job".into(),
            self.jobs.join(","),
            "--baseline-out".into(),
            file.display().to_string(),
        ];
        let (ok, text) = self.spark("vanilla", &args).await?;
        anyhow::ensure!(
            ok,
            "the vanilla Spark baseline failed (log {}): {}",
            self.dir.join("vanilla.log").display(),
            text.lines()
                .filter(|l| l.starts_with("FAIL"))
                .collect::<Vec<_>>()
                .join("; ")
        );
        Ok(file)
    }

    async fn rss_job(
        &self,
        name: &str,
        job: &str,
        coordinators: &str,
        baseline: &Path,
        remote_storage: Option<&str>,
        client_type: &str,
    ) -> anyhow::Result<Outcome> {
        let mut args: Vec<String> = [
            "--mode",
            "rss",
            "--coordinator",
            coordinators,
            "--job",
            job,
            "--client-type",
            client_type,
        ]
        .map(String::from)
        .to_vec();
        args.push("--baseline-in".into());
        args.push(baseline.display().to_string());
        for kv in [
            "spark.rss.data.replica=3",
            "spark.rss.data.replica.write=2",
            "spark.rss.data.replica.read=2",
            // Retries 1 s apart, not 20 s per batch, while a server restarts.
            "spark.rss.client.retry.interval.max=1000",
        ] {
            args.push("--rss-conf".into());
            args.push(kv.into());
        }
        if let Some(path) = remote_storage {
            for kv in [
                "spark.rss.storage.type=MEMORY_LOCALFILE_HDFS".to_string(),
                format!("spark.rss.remote.storage.path={path}"),
            ] {
                args.push("--rss-conf".into());
                args.push(kv);
            }
        }
        let (_, text) = self.spark(name, &args).await?;
        let threw = text.lines().any(|l| l.contains("(threw)"));
        Ok(
            match text
                .lines()
                .find(|l| l.starts_with("PASS ") || l.starts_with("FAIL "))
            {
                Some(l) if l.starts_with("PASS ") => Outcome::Ok,
                Some(l) if threw => Outcome::Threw(l.to_owned()),
                Some(l) => Outcome::Wrong(l.to_owned()),
                None => Outcome::Threw(format!(
                    "no result line (log {})",
                    self.dir.join(format!("{name}.log")).display()
                )),
            },
        )
    }
}

/// Takes the baseline, then runs the jobs one after the other until `duration` seconds after
/// the soak's start or `stop`. The first problems go to `problems`; an error is a failure of
/// the soak (no baseline: nothing could be verified).
pub async fn run(
    jobs: Arc<Jobs>,
    shared: Arc<Shared>,
    duration: f64,
    counts: Arc<Counts>,
    problems: Arc<parking_lot::Mutex<Vec<String>>>,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let baseline = jobs.baseline().await?;
    let coordinators = shared.nodes[..COORDINATORS]
        .iter()
        .map(|n| n.grpc.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let mut k = 0usize;
    while shared.now() < duration && !stop.is_cancelled() {
        let job = &jobs.jobs[k % jobs.jobs.len()];
        let remote = jobs
            .remote_storage
            .as_deref()
            .filter(|_| (k / jobs.jobs.len()) % 2 == 1);
        let store = if remote.is_some() {
            "MEMORY_LOCALFILE_HDFS"
        } else {
            "MEMORY_LOCALFILE"
        };
        // Every store type over both planes: two rounds of jobs on gRPC, two on Netty.
        let client_type = if (k / (2 * jobs.jobs.len())) % 2 == 1 {
            "GRPC_NETTY"
        } else {
            "GRPC"
        };
        let name = format!("job{k}-{job}");
        k += 1;
        counts.started.fetch_add(1, Ordering::Relaxed);
        let t = shared.now();
        let outcome = tokio::select! {
            _ = stop.cancelled() => break,
            r = jobs.rss_job(&name, job, &coordinators, &baseline, remote, client_type) => r?,
        };
        let (what, counter) = match &outcome {
            Outcome::Ok => ("ok".to_string(), &counts.ok),
            Outcome::Threw(l) => (format!("failed and retried: {l}"), &counts.failed),
            Outcome::Wrong(l) => {
                let mut p = problems.lock();
                if p.len() < 50 {
                    p.push(format!("Spark {name}: wrong result: {l}"));
                }
                (format!("WRONG RESULT: {l}"), &counts.wrong)
            }
        };
        counter.fetch_add(1, Ordering::Relaxed);
        eprintln!(
            "spillway-bench soak: t={t:.1}s Spark {name} (replica 3/2/2, {client_type}, {store}): {what} ({:.1} s)",
            shared.now() - t
        );
        if matches!(outcome, Outcome::Threw(_)) {
            // As a rescheduled stage, not at once: a coordinator may still list a server
            // that just went away.
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }
    Ok(())
}
