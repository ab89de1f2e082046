//! CPU time and resident memory of a server process, read from `/proc/<pid>` (Linux).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A process whose CPU and memory the run reports.
#[derive(Clone, Copy, Debug)]
pub struct Proc {
    /// The process id.
    pub pid: u32,
    ticks_per_second: u64,
}

impl Proc {
    /// The process `pid`, if `/proc/<pid>/stat` can be read.
    pub fn new(pid: u32) -> Option<Proc> {
        // USER_HZ: the unit of /proc times, fixed at 100 by the Linux ABI on every
        // architecture this runs on.
        let p = Proc {
            pid,
            ticks_per_second: 100,
        };
        p.cpu_seconds().map(|_| p)
    }

    /// User + system CPU seconds used so far.
    pub fn cpu_seconds(&self) -> Option<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).ok()?;
        // The command name may contain spaces; fields are counted after its closing paren.
        let rest = &stat[stat.rfind(')')? + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
        let utime: u64 = fields.get(11)?.parse().ok()?;
        let stime: u64 = fields.get(12)?.parse().ok()?;
        Some((utime + stime) as f64 / self.ticks_per_second as f64)
    }

    /// `(VmRSS, VmHWM)` in bytes: current and peak resident set.
    pub fn rss(&self) -> Option<(u64, u64)> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).ok()?;
        let field = |name: &str| -> Option<u64> {
            let line = status.lines().find(|l| l.starts_with(name))?;
            let kb: u64 = line[name.len()..]
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .ok()?;
            Some(kb * 1024)
        };
        Some((field("VmRSS:")?, field("VmHWM:")?))
    }

    /// Samples VmRSS every 50 ms until the returned guard is dropped; the guard's
    /// [`RssSampler::peak`] is the largest sample (useful for an external server, whose
    /// VmHWM covers its whole life, not this run).
    pub fn sample_rss(&self) -> RssSampler {
        let peak = Arc::new(AtomicU64::new(0));
        let (p, me) = (Arc::clone(&peak), *self);
        let task = tokio::spawn(async move {
            loop {
                if let Some((rss, _)) = me.rss() {
                    p.fetch_max(rss, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        RssSampler { peak, task }
    }
}

/// A running RSS sampler; stops when dropped.
pub struct RssSampler {
    peak: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl RssSampler {
    /// The largest VmRSS seen so far, in bytes.
    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }

    /// The largest VmRSS seen since the last call (or the start), then starts a new window.
    pub fn take_peak(&self) -> u64 {
        self.peak.swap(0, Ordering::Relaxed)
    }
}

impl Drop for RssSampler {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let me = Proc::new(std::process::id()).expect("/proc/self is readable");
        assert!(me.cpu_seconds().unwrap() >= 0.0);
        let (rss, hwm) = me.rss().unwrap();
        assert!(rss > 0 && hwm >= rss);
    }
}
