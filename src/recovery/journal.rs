//! The journal file: generations, the group-commit writer, and loading on start.
//!
//! ```text
//! <dir>/journal-<gen>.log     header, snapshot records, snapshot end, then records as they come
//! ```
//!
//! A generation starts with a snapshot of the whole live state, so the newest complete
//! generation alone is enough to recover; older ones are deleted once a newer one is durable.
//! The writer starts a new generation when the journal grows past `compact_size` (and twice
//! its snapshot), and when a write fails: then in the next candidate directory, so a journal on
//! a disk that filled up or failed moves to a healthy one and the record that failed is not
//! lost.
//!
//! Writes are group-committed on one thread: requests queue up while a batch is written (and
//! `fdatasync`ed when `sync`), then the whole queue is the next batch. A caller that waits
//! (`write`) is answered only after its line is in the file.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use tokio::sync::{mpsc, oneshot};

use super::record::Record;
use super::state::RecoveredState;
use crate::error::{Error, Result};

/// Produces the snapshot records of the live state (the registry, set once it exists).
pub type SnapshotFn = Arc<dyn Fn() -> Vec<Record> + Send + Sync>;

/// Where and how the journal is written.
#[derive(Clone, Debug)]
pub struct JournalOptions {
    /// Candidate directories, preferred first; the journal lives in one of them.
    pub dirs: Vec<PathBuf>,
    /// `fdatasync` every batch before answering.
    pub sync: bool,
    /// Start a new generation once the current one is larger than this.
    pub compact_size: u64,
    /// Written into every header; a journal of another id is not replayed.
    pub server_id: String,
    /// A batch write (with its sync) taking longer counts as failed: the journal moves to
    /// another directory, so a hung disk cannot hold registrations and reports forever.
    pub write_timeout: std::time::Duration,
}

/// What [`load`] found.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The replayed state.
    pub state: RecoveredState,
    /// Generation replayed (0: none found).
    pub gen: u64,
    /// The file it came from.
    pub path: Option<PathBuf>,
    /// Records replayed.
    pub records: usize,
    /// The file ended in a torn or corrupt line (a crash mid-write); replay stopped there.
    pub torn_tail: bool,
    /// Generations or files that could not be used, with why.
    pub skipped: Vec<String>,
}

struct Pending {
    line: Vec<u8>,
    done: Option<oneshot::Sender<io::Result<()>>>,
}

/// Handle on the journal writer; cheap to share. Dropping every handle ends the writer thread
/// after it wrote what was queued.
pub struct Journal {
    tx: mpsc::UnboundedSender<Pending>,
    snapshot: Arc<OnceLock<SnapshotFn>>,
    thread: parking_lot::Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Makes the next append fail (tests only).
    #[cfg(test)]
    fail_next: Arc<std::sync::atomic::AtomicBool>,
}

const PREFIX: &str = "journal-";
const SUFFIX: &str = ".log";

fn gen_path(dir: &Path, gen: u64) -> PathBuf {
    dir.join(format!("{PREFIX}{gen:016}{SUFFIX}"))
}

fn parse_gen(name: &str) -> Option<u64> {
    name.strip_prefix(PREFIX)?
        .strip_suffix(SUFFIX)?
        .parse()
        .ok()
}

/// Every journal generation in `dirs`, newest first.
fn generations(dirs: &[PathBuf]) -> Vec<(u64, PathBuf)> {
    let mut all: Vec<(u64, PathBuf)> = dirs
        .iter()
        .filter_map(|d| fs::read_dir(d).ok())
        .flat_map(|entries| entries.flatten())
        .filter_map(|e| {
            let gen = parse_gen(&e.file_name().to_string_lossy())?;
            Some((gen, e.path()))
        })
        .collect();
    all.sort_by(|a, b| b.cmp(a));
    all
}

/// Replays the newest complete generation written by `server_id` found in `dirs`. Never
/// fails: what cannot be read is reported in [`Loaded::skipped`] and the next older generation
/// is tried; with none, the state is empty.
pub fn load(dirs: &[PathBuf], server_id: &str) -> Loaded {
    let mut loaded = Loaded::default();
    for (gen, path) in generations(dirs) {
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) => {
                loaded.skipped.push(format!("{}: {e}", path.display()));
                continue;
            }
        };
        let mut lines = bytes.split(|b| *b == b'\n');
        match lines.next().and_then(Record::from_line) {
            Some(Record::Header {
                gen: g,
                server_id: id,
            }) if g == gen && id == server_id => {}
            Some(Record::Header { server_id: id, .. }) if id != server_id => {
                loaded.skipped.push(format!(
                    "{}: written by server id {id}, this server is {server_id}",
                    path.display()
                ));
                continue;
            }
            _ => {
                loaded
                    .skipped
                    .push(format!("{}: no valid header", path.display()));
                continue;
            }
        }
        let mut state = RecoveredState::default();
        let mut records = 0;
        let mut snapshot_done = false;
        let mut torn = false;
        let body: Vec<&[u8]> = lines.collect();
        let n = body.len();
        for (i, line) in body.into_iter().enumerate() {
            if line.is_empty() && i + 1 == n {
                break; // the final newline
            }
            match Record::from_line(line) {
                Some(Record::SnapshotEnd) => snapshot_done = true,
                Some(rec) => {
                    state.apply(rec);
                    records += 1;
                }
                None => {
                    torn = true;
                    break;
                }
            }
        }
        if !snapshot_done {
            loaded
                .skipped
                .push(format!("{}: snapshot incomplete", path.display()));
            continue;
        }
        loaded.state = state;
        loaded.gen = gen;
        loaded.path = Some(path);
        loaded.records = records;
        loaded.torn_tail = torn;
        return loaded;
    }
    loaded
}

impl Journal {
    /// Starts generation `gen` with `snapshot` as its opening records (in the first candidate
    /// directory that takes it), deletes older generations, and starts the writer thread.
    pub fn start(opts: JournalOptions, gen: u64, snapshot: Vec<Record>) -> Result<Journal> {
        let writer = Writer::open(opts, gen, &snapshot)?;
        #[cfg(test)]
        let fail_next = Arc::clone(&writer.fail_next);
        let (tx, rx) = mpsc::unbounded_channel();
        let snap: Arc<OnceLock<SnapshotFn>> = Arc::new(OnceLock::new());
        let thread = {
            let snap = Arc::clone(&snap);
            std::thread::Builder::new()
                .name("spillway-journal".to_owned())
                .spawn(move || writer.run(rx, snap))
                .map_err(|e| Error::Startup(format!("cannot start the journal thread: {e}")))?
        };
        Ok(Journal {
            tx,
            snapshot: snap,
            thread: parking_lot::Mutex::new(Some(thread)),
            #[cfg(test)]
            fail_next,
        })
    }

    /// Makes the writer's next append fail as a full disk would (tests only).
    #[cfg(test)]
    pub(crate) fn fail_next_write(&self) {
        self.fail_next
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Sets where snapshots come from when the writer starts a new generation (once).
    pub fn set_snapshot(&self, f: SnapshotFn) {
        let _ = self.snapshot.set(f);
    }

    /// Appends `rec` and waits until it is in the file (and synced, with `sync`).
    pub async fn write(&self, rec: &Record) -> Result<()> {
        let (done, wait) = oneshot::channel();
        self.tx
            .send(Pending {
                line: rec.to_line(),
                done: Some(done),
            })
            .map_err(|_| journal_error("the journal writer has stopped"))?;
        match wait.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(journal_error(&format!("journal write failed: {e}"))),
            Err(_) => Err(journal_error("the journal writer has stopped")),
        }
    }

    /// Queues `rec` without waiting (its order with other records is kept).
    pub fn write_detached(&self, rec: &Record) {
        let _ = self.tx.send(Pending {
            line: rec.to_line(),
            done: None,
        });
    }

    /// Waits until everything queued before this call is in the file.
    pub async fn flush(&self) -> Result<()> {
        self.write(&Record::Seen { apps: Vec::new() }).await
    }

    /// Stops the writer after what is queued (blocking; shutdown only).
    pub fn close(self) {
        let Journal { tx, thread, .. } = self;
        drop(tx);
        let handle = thread.into_inner();
        if let Some(t) = handle {
            let _ = t.join();
        }
    }
}

fn journal_error(reason: &str) -> Error {
    Error::TierFailed {
        tier: "journal",
        reason: reason.to_owned(),
    }
}

/// The writer thread's state.
struct Writer {
    opts: JournalOptions,
    gen: u64,
    dir_index: usize,
    file: File,
    path: PathBuf,
    len: u64,
    snapshot_len: u64,
    #[cfg(test)]
    fail_next: Arc<std::sync::atomic::AtomicBool>,
}

impl Writer {
    /// Writes generation `gen` in the first directory (from `opts.dirs[start..]`, wrapping)
    /// that takes it.
    fn open(opts: JournalOptions, gen: u64, snapshot: &[Record]) -> Result<Writer> {
        let mut why = Vec::new();
        for dir_index in 0..opts.dirs.len() {
            match write_generation(&opts, dir_index, gen, snapshot, &[]) {
                Ok((file, path, len)) => {
                    delete_older(&opts.dirs, gen);
                    return Ok(Writer {
                        opts,
                        gen,
                        dir_index,
                        file,
                        path,
                        len,
                        snapshot_len: len,
                        #[cfg(test)]
                        fail_next: Arc::default(),
                    });
                }
                Err(e) => why.push(format!("{}: {e}", opts.dirs[dir_index].display())),
            }
        }
        Err(Error::Startup(format!(
            "no directory takes the journal: {}",
            why.join("; ")
        )))
    }

    fn run(mut self, mut rx: mpsc::UnboundedReceiver<Pending>, snap: Arc<OnceLock<SnapshotFn>>) {
        while let Some(first) = rx.blocking_recv() {
            let mut batch = vec![first];
            while batch.len() < 4096 {
                match rx.try_recv() {
                    Ok(p) => batch.push(p),
                    Err(_) => break,
                }
            }
            let buf: Vec<u8> = batch.iter().flat_map(|p| p.line.iter().copied()).collect();
            let mut result = self.append(&buf);
            if let Err(e) = &result {
                tracing::error!(path = %self.path.display(), error = %e, "journal write failed; moving the journal to another directory");
                result = self.rotate(snap.get(), &buf, true);
            } else if self.len > self.opts.compact_size && self.len > 2 * self.snapshot_len {
                if let Err(e) = self.rotate(snap.get(), &[], false) {
                    tracing::warn!(error = %e, "journal compaction failed; the journal keeps growing");
                }
            }
            for p in batch {
                if let Some(done) = p.done {
                    let _ = done.send(match &result {
                        Ok(()) => Ok(()),
                        Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
                    });
                }
            }
        }
        let _ = self.file.sync_data();
    }

    fn append(&mut self, buf: &[u8]) -> io::Result<()> {
        #[cfg(test)]
        if self
            .fail_next
            .swap(false, std::sync::atomic::Ordering::SeqCst)
        {
            return Err(io::Error::from_raw_os_error(28)); // ENOSPC
        }
        // The write runs on its own thread so that a hung disk (the call never returns) turns
        // into a timeout here; the stuck thread is abandoned with the old file.
        let mut file = self.file.try_clone()?;
        let data = buf.to_vec();
        let sync = self.opts.sync;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("spillway-journal-io".to_owned())
            .spawn(move || {
                let r =
                    file.write_all(&data)
                        .and_then(|()| if sync { file.sync_data() } else { Ok(()) });
                let _ = tx.send(r);
            })?;
        match rx.recv_timeout(self.opts.write_timeout) {
            Ok(r) => r?,
            Err(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "journal write did not finish within {:?}",
                        self.opts.write_timeout
                    ),
                ))
            }
        }
        self.len += buf.len() as u64;
        Ok(())
    }

    /// Starts the next generation with a fresh snapshot plus `pending`. After a failure the
    /// other directories are tried first, for compaction the current one.
    fn rotate(
        &mut self,
        snap: Option<&SnapshotFn>,
        pending: &[u8],
        failed: bool,
    ) -> io::Result<()> {
        let Some(snap) = snap else {
            return Err(io::Error::other("no snapshot source yet"));
        };
        let records = snap();
        let n = self.opts.dirs.len();
        let order: Vec<usize> = if failed {
            (1..=n).map(|k| (self.dir_index + k) % n).collect()
        } else {
            (0..n).map(|k| (self.dir_index + k) % n).collect()
        };
        let gen = self.gen + 1;
        let mut last_err = io::Error::other("no journal directory");
        for dir_index in order {
            match write_generation(&self.opts, dir_index, gen, &records, pending) {
                Ok((file, path, len)) => {
                    let old = std::mem::replace(&mut self.path, path);
                    // Off this thread: on a hung disk the unlink hangs too.
                    let _ = std::thread::Builder::new()
                        .name("spillway-journal-rm".to_owned())
                        .spawn(move || {
                            let _ = fs::remove_file(&old);
                        });
                    self.file = file;
                    self.gen = gen;
                    self.dir_index = dir_index;
                    self.len = len;
                    self.snapshot_len = len - pending.len() as u64;
                    tracing::info!(path = %self.path.display(), gen, bytes = len, "journal generation started");
                    return Ok(());
                }
                Err(e) => {
                    tracing::warn!(dir = %self.opts.dirs[dir_index].display(), error = %e, "journal directory refused a new generation");
                    last_err = e;
                }
            }
        }
        Err(last_err)
    }
}

/// Writes a complete generation file (header, snapshot, end marker, `pending`) under a
/// temporary name, syncs it and renames it into place, so a generation is visible only whole.
fn write_generation(
    opts: &JournalOptions,
    dir_index: usize,
    gen: u64,
    snapshot: &[Record],
    pending: &[u8],
) -> io::Result<(File, PathBuf, u64)> {
    let dir = &opts.dirs[dir_index];
    fs::create_dir_all(dir)?;
    let path = gen_path(dir, gen);
    let tmp = path.with_extension("tmp");
    let mut buf = Record::Header {
        gen,
        server_id: opts.server_id.clone(),
    }
    .to_line();
    for r in snapshot {
        buf.extend_from_slice(&r.to_line());
    }
    buf.extend_from_slice(&Record::SnapshotEnd.to_line());
    buf.extend_from_slice(pending);
    {
        let mut f = File::create(&tmp)?;
        f.write_all(&buf)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, &path)?;
    File::open(dir)?.sync_all()?;
    let file = OpenOptions::new().append(true).open(&path)?;
    Ok((file, path, buf.len() as u64))
}

/// Deletes generations older than `gen` (and leftover temporary files) in every directory.
fn delete_older(dirs: &[PathBuf], gen: u64) {
    for (g, path) in generations(dirs) {
        if g < gen {
            if let Err(e) = fs::remove_file(&path) {
                tracing::warn!(path = %path.display(), error = %e, "could not delete an old journal generation");
            }
        }
    }
    for dir in dirs {
        if let Ok(entries) = fs::read_dir(dir) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with(PREFIX) && name.ends_with(".tmp") {
                    let _ = fs::remove_file(e.path());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(dirs: Vec<PathBuf>) -> JournalOptions {
        JournalOptions {
            dirs,
            sync: false,
            compact_size: 1 << 20,
            server_id: "10.0.0.1-19999".into(),
            write_timeout: std::time::Duration::from_secs(10),
        }
    }

    /// A recovered state the journal compacts from, as the registry's is.
    fn snapshot_from_state(j: &Journal) -> Arc<parking_lot::Mutex<RecoveredState>> {
        let state = Arc::new(parking_lot::Mutex::new(RecoveredState::default()));
        let held = Arc::clone(&state);
        j.set_snapshot(Arc::new(move || held.lock().to_records()));
        state
    }

    fn register(app: &str) -> Record {
        Record::Register {
            app: app.into(),
            shuffle: 0,
            ranges: vec![(0, 0)],
            local_order: false,
            user: String::new(),
            remote: None,
            at_ms: 5,
        }
    }

    #[tokio::test]
    async fn what_was_acknowledged_is_loaded_and_a_torn_tail_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let o = opts(vec![dir.path().join("a"), dir.path().join("b")]);
        let j = Journal::start(o.clone(), 1, vec![register("old")]).unwrap();
        j.write(&register("x")).await.unwrap();
        j.write_detached(&Record::DropApp { app: "old".into() });
        j.flush().await.unwrap();
        j.close();
        let path = gen_path(&o.dirs[0], 1);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"0000 {\"t\":\"drop").unwrap();

        let l = load(&o.dirs, &o.server_id);
        assert_eq!(l.gen, 1);
        assert!(l.torn_tail);
        assert_eq!(l.state.apps.keys().collect::<Vec<_>>(), vec!["x"]);
        // Another server id's journal is not replayed.
        assert_eq!(load(&o.dirs, "10.0.0.2-19999").gen, 0);

        // The next start writes generation 2 and removes generation 1.
        let j = Journal::start(o.clone(), 2, l.state.to_records()).unwrap();
        j.close();
        assert!(!path.exists());
        assert_eq!(load(&o.dirs, &o.server_id).state, l.state);
    }

    #[tokio::test]
    async fn a_failing_directory_moves_the_journal_without_losing_the_record() {
        let dir = tempfile::tempdir().unwrap();
        let o = opts(vec![dir.path().join("a"), dir.path().join("b")]);
        let j = Journal::start(o.clone(), 1, Vec::new()).unwrap();
        let state = snapshot_from_state(&j);
        state.lock().apply(register("w"));
        j.write(&register("w")).await.unwrap();
        // The disk of the current generation fills up: the record that hit it goes into a new
        // generation in the other directory, behind a snapshot, and the old file is gone.
        j.fail_next_write();
        let rec = register("y");
        state.lock().apply(rec.clone());
        j.write(&rec).await.unwrap();
        j.write(&register("z")).await.unwrap();
        j.close();
        // The old generation is unlinked on a thread of its own (a hung disk hangs the unlink
        // too), so it goes shortly after the move, not before `close` returns.
        let old = gen_path(&o.dirs[0], 1);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while old.exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!old.exists(), "the failed generation's file is removed");
        assert!(gen_path(&o.dirs[1], 2).exists());
        let l = load(&o.dirs, &o.server_id);
        assert_eq!(l.gen, 2);
        assert_eq!(l.state.apps.keys().collect::<Vec<_>>(), vec!["w", "y", "z"]);
    }

    #[tokio::test]
    async fn compaction_keeps_the_state() {
        let dir = tempfile::tempdir().unwrap();
        let o = JournalOptions {
            compact_size: 2000,
            ..opts(vec![dir.path().join("a")])
        };
        let j = Journal::start(o.clone(), 1, Vec::new()).unwrap();
        let state = snapshot_from_state(&j);
        state.lock().apply(register("keep"));
        j.write(&register("keep")).await.unwrap();
        for i in 0..200 {
            let r = Record::Commit {
                app: "keep".into(),
                shuffle: 0,
                count: i,
            };
            state.lock().apply(r.clone());
            j.write(&r).await.unwrap();
        }
        j.close();
        let l = load(&o.dirs, &o.server_id);
        assert!(l.gen > 1, "compacted at least once");
        assert_eq!(l.state, *state.lock());
        // The old generation is unlinked by a thread of its own (a hung disk must not hang
        // the writer), which a loaded machine may run after `close`.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while generations(&o.dirs).len() > 1 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(generations(&o.dirs).len(), 1);
    }
}
