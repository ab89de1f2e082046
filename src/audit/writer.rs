//! The audit sink: a bounded queue in front of a thread that formats records into a buffered
//! file, so a request never formats, allocates a line, or touches the disk.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use prometheus::IntCounter;
use tokio::sync::{mpsc, oneshot};

/// Records queued but not yet written; beyond this a record is dropped (and counted) rather
/// than making a request wait for the disk.
pub const QUEUE_CAPACITY: usize = 1 << 16;

/// Size of the file buffer; the writer flushes after each drain of the queue.
const FILE_BUFFER: usize = 64 << 10;

/// How long the writer sleeps between drains of the queue. Polling keeps a request from waking
/// the writer thread for every record: waiting on the queue cost a futex wake and a context
/// switch per line, measured at about 15 µs of server CPU per line at full load (+29 % CPU
/// per GB written with 4 KiB blocks in 64 KiB requests). A line reaches the file at most this
/// late; `close` still flushes everything at shutdown.
const DRAIN_INTERVAL: std::time::Duration = std::time::Duration::from_millis(50);

/// A record the writer thread can render as one line (without the newline).
pub trait Record: Send + 'static {
    /// Writes the line, its own timestamp included.
    fn write_line(&self, out: &mut dyn Write) -> io::Result<()>;
}

enum Msg<R> {
    Line(R),
    /// Flush and stop; answered once the file is flushed.
    Close(oneshot::Sender<()>),
}

/// The sending half; cheap to clone.
pub struct Sink<R> {
    tx: mpsc::Sender<Msg<R>>,
    dropped: IntCounter,
}

impl<R> Clone for Sink<R> {
    fn clone(&self) -> Self {
        Sink {
            tx: self.tx.clone(),
            dropped: self.dropped.clone(),
        }
    }
}

impl<R: Record> Sink<R> {
    /// Opens (appends to, creating parents as log4j does) `path` and starts the writer thread
    /// `name`. `dropped` counts records lost to a full queue or a dead writer.
    pub fn open(path: &Path, name: &str, dropped: IntCounter) -> io::Result<Sink<R>> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
        let path = path.to_path_buf();
        std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || run(rx, BufWriter::with_capacity(FILE_BUFFER, file), path))?;
        Ok(Sink { tx, dropped })
    }

    /// Queues `record` without waiting; a full queue drops it and counts the loss.
    pub fn send(&self, record: R) {
        if self.tx.try_send(Msg::Line(record)).is_err() {
            self.dropped.inc();
        }
    }

    /// Writes everything queued so far, flushes the file and stops the writer. Later records
    /// are counted as dropped.
    pub async fn close(&self) {
        let (done, flushed) = oneshot::channel();
        if self.tx.send(Msg::Close(done)).await.is_ok() {
            let _ = flushed.await;
        }
    }
}

fn run<R: Record>(mut rx: mpsc::Receiver<Msg<R>>, mut out: BufWriter<File>, path: PathBuf) {
    let mut failed = false;
    let mut write = |out: &mut BufWriter<File>, r: &R| {
        let result = r.write_line(out).and_then(|()| out.write_all(b"\n"));
        if let Err(e) = result {
            // One log line per failure streak, not per record.
            if !failed {
                tracing::error!(path = %path.display(), error = %e, "cannot write the audit log");
            }
            failed = true;
        } else {
            failed = false;
        }
    };
    loop {
        let mut wrote = false;
        loop {
            match rx.try_recv() {
                Ok(Msg::Line(r)) => {
                    write(&mut out, &r);
                    wrote = true;
                }
                Ok(Msg::Close(done)) => {
                    let _ = out.flush();
                    let _ = done.send(());
                    return;
                }
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    let _ = out.flush();
                    return;
                }
            }
        }
        // One flush per drain: a burst costs one write syscall per buffer.
        if wrote {
            let _ = out.flush();
        }
        std::thread::sleep(DRAIN_INTERVAL);
    }
}

/// `[yyyy-MM-dd HH:mm:ss.SSS]` in local time: log4j's `%d{yyyy-MM-dd HH:mm:ss.SSS}`, which
/// uses the JVM's default (the host's) time zone.
pub fn write_millis(out: &mut dyn Write, at: SystemTime) -> io::Result<()> {
    let local: chrono::DateTime<chrono::Local> = at.into();
    write!(out, "{}", local.format("%Y-%m-%d %H:%M:%S%.3f"))
}
