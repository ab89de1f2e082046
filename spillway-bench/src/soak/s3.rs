//! The soak's object storage: a real S3 server process (moto's, from `tests/s3`, the same one
//! the tests use), one bucket, the s3a conf items every server gets in its `hadoop_conf` (as a
//! Java operator sets `rss.server.hadoop.fs.s3a.*`), and the store-frozen fault.
//!
//! moto keeps its objects in memory, so the fault freezes the process (SIGSTOP, then SIGCONT)
//! instead of restarting it: to a server that is a store that stopped answering, every
//! request hanging until its timeout, which is the harder case for a server than a refused
//! connection. Flushes that hit it must time out and go to local disk; none may be lost.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::remote_read::S3Reader;
pub use s3server::S3Server;

use spillway_test_support::s3server;

/// The bucket the soak's S3 apps register.
const BUCKET: &str = "spillway-soak";

/// The folder inside the bucket.
const ROOT: &str = "soak";

/// A running S3 server with the soak's bucket.
pub struct SoakS3 {
    server: Arc<S3Server>,
}

impl SoakS3 {
    /// Starts the server (installing it first when `tests/s3` has not yet) and creates the
    /// bucket. Fails, never skips, when it cannot: pass `--no-s3` to run without it.
    pub async fn start() -> anyhow::Result<SoakS3> {
        let server = tokio::task::spawn_blocking(|| {
            let server = s3server::try_start()?;
            // CreateBucket panics on a refusal; caught below as the task's error.
            server.create_bucket(BUCKET);
            Ok::<_, String>(server)
        })
        .await
        .map_err(|e| anyhow::anyhow!("the soak's S3 server: {e}"))?
        .map_err(|e| anyhow::anyhow!("the soak's S3 server: {e} (or pass --no-s3)"))?;
        Ok(SoakS3 {
            server: Arc::new(server),
        })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> &str {
        &self.server.endpoint
    }

    /// The s3a conf items of the servers and of the soak's reader. A frozen store answers
    /// nothing, so requests give up after 2 s and a flush retries at most twice within the
    /// servers' 10 s remote write timeout before it goes to local disk.
    pub fn conf(&self) -> Vec<(String, String)> {
        [
            ("fs.s3a.endpoint", self.server.endpoint.as_str()),
            ("fs.s3a.path.style.access", "true"),
            ("fs.s3a.access.key", "soak"),
            ("fs.s3a.secret.key", "soak-secret"),
            ("fs.s3a.endpoint.region", "us-east-1"),
            ("fs.s3a.connection.timeout", "2s"),
            ("fs.s3a.retry.limit", "2"),
            ("fs.s3a.retry.interval", "200ms"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }

    /// Reads the apps' objects back as the client does.
    pub fn reader(&self) -> anyhow::Result<S3Reader> {
        S3Reader::new(BUCKET, ROOT, &self.conf())
    }

    /// The bucket: the servers' `storage_host` label of what they wrote there.
    pub fn bucket(&self) -> &'static str {
        BUCKET
    }

    /// The server, for the freeze fault.
    pub fn server(&self) -> Arc<S3Server> {
        Arc::clone(&self.server)
    }
}

/// Freezes the S3 server for `hold` (or until `stop`), then resumes it with its objects.
pub async fn freeze(
    server: &S3Server,
    hold: Duration,
    stop: &CancellationToken,
) -> anyhow::Result<()> {
    server.set_frozen(true).map_err(anyhow::Error::msg)?;
    tokio::select! {
        _ = stop.cancelled() => {}
        _ = tokio::time::sleep(hold) => {}
    }
    server.set_frozen(false).map_err(anyhow::Error::msg)
}
