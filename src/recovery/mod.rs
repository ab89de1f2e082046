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
//! the dropped ones), and the registry is rebuilt from the state (`restore.rs`) before the
//! ports accept requests. The journal then starts a new generation with a snapshot.

mod journal;
mod lock;
mod record;
mod restore;
mod state;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use journal::{Journal, JournalOptions, Loaded};
pub use lock::{acquire as acquire_lock, StateLock};
pub use record::{now_ms, Record};
pub use state::{AppState, RecoveredState, ShuffleState};

use crate::app::AppRegistry;
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
        let now = now_ms();
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
        if let Some(local) = local {
            report.scan = Some(local.recover(&|app| state.apps.contains_key(app.as_str())));
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

    /// Rebuilds `registry` from the recovered state (once), then connects it to the journal:
    /// from here on its changes are journaled and snapshots come from it.
    pub fn attach(&mut self, registry: &Arc<AppRegistry>) {
        if let Some(state) = self.state.take() {
            restore::restore(registry, state);
        }
        registry.set_journal(Arc::clone(&self.journal));
        let weak = Arc::downgrade(registry);
        self.journal.set_snapshot(Arc::new(move || {
            weak.upgrade()
                .map(|r| restore::export(&r).to_records())
                .unwrap_or_default()
        }));
    }

    /// Writes when each app was last seen every `interval` until `cancel` fires, and once
    /// more at the end (so a restart expires apps by their real last contact).
    pub fn spawn_seen(
        &self,
        registry: Arc<AppRegistry>,
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
                let apps = restore::seen(&registry);
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
