//! Restart recovery: what the server acknowledged survives a restart on the same server id.
//!
//! Two sources, each the owner of its facts:
//! - **block data**: the local data/index files are self-describing; the local-file tier
//!   adopts them again by walking its data paths (`store/localfile/scan.rs`), cutting a tail
//!   that a crash left half written. HDFS files are read by clients directly and need nothing.
//! - **everything else** (apps, shuffles, ranges, user and remote storage, commit counters,
//!   reported block ids, when each app was last seen) goes into an append-only **journal**
//!   (`journal.rs`): one small record per registration, report, commit or drop, never per
//!   block. Registrations and reports are answered only once their record is in the file
//!   (fdatasynced with `sync_on_write`), batched across concurrent callers.
//!
//! On start, [`Recovery::open`] replays the journal, drops apps whose heartbeat timed out
//! while the server was down, lets the tier adopt the files of the others (deleting ours of
//! the dropped ones), and the registry rebuilds itself from the state (`app/restore.rs`) before the
//! ports accept requests. The journal then starts a new generation with a snapshot.

mod journal;
mod lock;
mod record;
mod state;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use journal::{load as load_journal, Journal, JournalOptions, Loaded};
pub use lock::{acquire as acquire_lock, StateLock};
pub use record::Record;
pub use state::{AppState, RecoveredState, ShuffleState};

use crate::error::Result;
use crate::store::localfile::{LocalFileTier, ScanReport};

/// The journal directory's name inside a data path.
pub const META_DIR: &str = ".spillway-meta";

/// What recovery did at start-up, for the log, `/status` and tests.
#[derive(Debug, Default, Clone)]
pub struct RecoveryReport {
    /// Journal generation replayed (0: none).
    pub generation: u64,
    /// Records replayed.
    pub records: usize,
    /// The journal ended in a torn line.
    pub torn_tail: bool,
    /// Apps restored.
    pub apps: usize,
    /// Apps dropped because their heartbeat timed out while the server was down.
    pub expired_apps: usize,
    /// Reported block ids restored.
    pub block_ids: u64,
    /// What the local-file tier adopted.
    pub scan: Option<ScanReport>,
    /// How long recovery took.
    pub elapsed: Duration,
}

/// Start-up recovery and the journal that keeps the next one possible.
pub struct Recovery {
    journal: Arc<Journal>,
    report: RecoveryReport,
    state: Option<RecoveredState>,
}

impl Recovery {
    /// Replays the journal in `opts.dirs`, drops apps not seen for `app_timeout`, and lets
    /// `local` adopt the files of the apps kept. Blocking; call before serving.
    pub fn open(
        opts: JournalOptions,
        app_timeout: Duration,
        local: Option<&LocalFileTier>,
    ) -> Result<Recovery> {
        let started = std::time::Instant::now();
        let loaded = journal::load(&opts.dirs, &opts.server_id);
        for why in &loaded.skipped {
            tracing::warn!(reason = %why, "journal generation not used");
        }
        let mut state = loaded.state;
        let now = crate::clock::now_ms().unsigned_abs();
        let before = state.apps.len();
        state.apps.retain(|app, a| {
            let idle = Duration::from_millis(now.saturating_sub(a.last_seen_ms));
            let keep = idle <= app_timeout;
            if !keep {
                tracing::info!(app_id = %app, idle = ?idle, "app expired while the server was down; purging it");
            }
            keep
        });
        let mut report = RecoveryReport {
            generation: loaded.gen,
            records: loaded.records,
            torn_tail: loaded.torn_tail,
            apps: state.apps.len(),
            expired_apps: before - state.apps.len(),
            block_ids: state
                .apps
                .values()
                .flat_map(|a| a.shuffles.values())
                .flat_map(|s| s.ids.values())
                .map(|m| m.len())
                .sum(),
            ..RecoveryReport::default()
        };
        match local {
            // Without any journal (first start, or the disk that held it is gone) nothing says
            // which files are live: leave them all alone rather than delete a live shuffle.
            Some(_) if loaded.gen == 0 => tracing::warn!(
                "no journal found: files already in the data paths are neither served nor deleted"
            ),
            Some(local) => {
                report.scan = Some(local.recover(&|app| state.apps.contains_key(app.as_str())));
            }
            None => {}
        }
        let journal = Journal::start(opts, loaded.gen + 1, state.to_records())?;
        report.elapsed = started.elapsed();
        tracing::info!(?report, "recovery done");
        Ok(Recovery {
            journal: Arc::new(journal),
            report,
            state: Some(state),
        })
    }

    /// The journal directories: `dir` if configured, else `.spillway-meta` in every data path
    /// (preferred in order).
    pub fn dirs(dir: Option<&PathBuf>, data_paths: &[PathBuf]) -> Vec<PathBuf> {
        match dir {
            Some(d) => vec![d.clone()],
            None => data_paths.iter().map(|p| p.join(META_DIR)).collect(),
        }
    }

    /// What recovery did.
    pub fn report(&self) -> &RecoveryReport {
        &self.report
    }

    /// The recovered state, for the registry to rebuild itself from (once; later calls get
    /// None).
    pub fn take_state(&mut self) -> Option<RecoveredState> {
        self.state.take()
    }

    /// Writes when each app was last seen every `interval` until `cancel` fires, and once
    /// more at the end (so a restart expires apps by their real last contact).
    pub fn spawn_seen(
        &self,
        seen: impl Fn() -> Vec<(String, u64)> + Send + 'static,
        interval: Duration,
        cancel: CancellationToken,
        tracker: &TaskTracker,
    ) {
        let journal = Arc::clone(&self.journal);
        tracker.spawn(async move {
            loop {
                let stop = tokio::select! {
                    _ = cancel.cancelled() => true,
                    _ = tokio::time::sleep(interval) => false,
                };
                let apps = seen();
                if !apps.is_empty() {
                    let _ = journal.write(&Record::Seen { apps }).await;
                }
                if stop {
                    break;
                }
            }
        });
    }

    /// The journal (the registry writes through it).
    pub fn journal(&self) -> &Arc<Journal> {
        &self.journal
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{AppId, PartitionKey, PartitionRange};
    use crate::store::localfile::LocalFileOptions;
    use crate::store::{BlockBatch, FileTier, Tier};

    fn tier(root: &std::path::Path) -> Arc<LocalFileTier> {
        LocalFileTier::new(LocalFileOptions {
            max_concurrency_per_disk: 1,
            ..LocalFileOptions::testing(vec![root.join("d0")], "127.0.0.1-1-2")
        })
        .unwrap()
    }

    fn opts(root: &std::path::Path) -> JournalOptions {
        JournalOptions {
            dirs: vec![root.join("d0").join(META_DIR)],
            sync: false,
            compact_size: 1 << 20,
            server_id: "127.0.0.1-1-2".into(),
            write_timeout: Duration::from_secs(10),
        }
    }

    #[tokio::test]
    async fn files_are_kept_for_journaled_apps_only_and_never_deleted_without_a_journal() {
        let dir = tempfile::tempdir().unwrap();
        let live = PartitionKey::new(
            AppId::parse("live").unwrap(),
            0,
            PartitionRange::new(0, 0).unwrap(),
        );
        let gone = PartitionKey::new(
            AppId::parse("gone").unwrap(),
            0,
            PartitionRange::new(0, 0).unwrap(),
        );
        let t = tier(dir.path());
        let batch = BlockBatch::new(vec![crate::store::conformance::test_block(
            1,
            1,
            vec![7u8; 16].into(),
        )]);
        t.append(&live, &batch).await.unwrap();
        t.append(&gone, &batch).await.unwrap();
        drop(t);

        // No journal yet: nothing is adopted, nothing deleted.
        let t = tier(dir.path());
        let r = Recovery::open(opts(dir.path()), Duration::from_secs(60), Some(&t)).unwrap();
        assert!(r.report().scan.is_none());
        assert!(dir.path().join("d0/gone").exists());
        // The journal now exists (generation 1, empty); journal "live" only.
        r.journal()
            .write(&Record::Register {
                app: "live".into(),
                shuffle: 0,
                ranges: vec![(0, 0)],
                local_order: false,
                user: String::new(),
                remote: None,
                at_ms: crate::clock::now_ms().unsigned_abs(),
            })
            .await
            .unwrap();
        drop(r);
        drop(t);

        let t = tier(dir.path());
        let r = Recovery::open(opts(dir.path()), Duration::from_secs(60), Some(&t)).unwrap();
        let scan = r.report().scan.clone().unwrap();
        assert_eq!((scan.partitions, scan.dropped_partitions), (1, 1));
        assert_eq!(r.report().apps, 1);
        assert!(!dir.path().join("d0/gone").exists());
        assert_eq!(t.read_index(&live).await.unwrap().data_len, 16);
    }
}
