//! The run's report: throughputs, their shares of the ceilings, server CPU and memory,
//! latency percentiles and the verification verdict.

use std::fmt;
use std::time::Duration;

use super::client::Op;
use super::disk::DiskCeiling;
use super::driver::{Phase, Verification};
use super::payload::Shape;
use super::{Options, Transport};

/// Everything one run measured.
pub struct Report {
    transport: Transport,
    shape: Shape,
    concurrency: usize,
    capacity: Option<u64>,
    /// Write phase against the server.
    pub write: Option<Phase>,
    /// `finishShuffle` time (the spill of what was still in memory).
    pub finish: Option<Duration>,
    /// Read phase against the server.
    pub read: Option<Phase>,
    /// What the read phase found.
    pub verification: Option<Verification>,
    /// Server CPU seconds over write + finish + read.
    pub server_cpu: Option<f64>,
    /// Server CPU seconds of the write phase, `finishShuffle` and the read phase.
    pub server_cpu_phases: Option<[f64; 3]>,
    /// Server peak RSS over the whole run, bytes.
    pub server_peak_rss: Option<u64>,
    /// Server RSS before the first write (code, runtime, empty tiers).
    pub server_base_rss: Option<u64>,
    /// Peak RSS sampled during the last write phase and finishShuffle.
    pub server_write_rss: Option<u64>,
    /// Peak RSS sampled during the last read phase.
    pub server_read_rss: Option<u64>,
    /// RSS [`IDLE_AFTER`](super::IDLE_AFTER) after the run's apps were unregistered: what the
    /// server gives back once it holds no data.
    pub server_idle_rss: Option<u64>,
    /// Write phase against the discard server.
    pub ceiling_write: Option<Phase>,
    /// Read phase against the discard server.
    pub ceiling_read: Option<Phase>,
    /// Discard server CPU seconds.
    pub ceiling_cpu: Option<f64>,
    /// Raw disk figures.
    pub disk: Option<DiskCeiling>,
}

impl Report {
    pub(super) fn new(opts: &Options, shape: &Shape) -> Report {
        Report {
            transport: opts.transport,
            shape: *shape,
            concurrency: opts.concurrency,
            capacity: opts.addr.is_none().then_some(opts.capacity.0),
            write: None,
            finish: None,
            read: None,
            verification: None,
            server_cpu: None,
            server_cpu_phases: None,
            server_peak_rss: None,
            server_base_rss: None,
            server_idle_rss: None,
            server_write_rss: None,
            server_read_rss: None,
            ceiling_write: None,
            ceiling_read: None,
            ceiling_cpu: None,
            disk: None,
        }
    }

    /// True when every block came back intact.
    pub fn verified(&self) -> bool {
        self.verification.as_ref().is_some_and(Verification::ok)
    }

    /// Spill throughput: the shuffle's bytes over the `finishShuffle` time (meaningful when
    /// nothing spilled before, i.e. capacity above the total over the high watermark).
    pub fn spill_gb_s(&self) -> Option<f64> {
        self.finish
            .map(|d| self.shape.total_bytes() as f64 / d.as_secs_f64().max(1e-9) / 1e9)
    }

    /// Server CPU seconds per GB moved (written + read).
    pub fn cpu_per_gb(&self) -> Option<f64> {
        let moved = self.write.as_ref()?.bytes + self.read.as_ref()?.bytes;
        Some(self.server_cpu? / (moved as f64 / 1e9))
    }
}

fn pct(a: f64, b: f64) -> String {
    format!("{:.0}%", 100.0 * a / b.max(1e-12))
}

fn mib(b: u64) -> String {
    format!("{:.0} MiB", b as f64 / (1 << 20) as f64)
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.shape;
        writeln!(
            f,
            "spillway-bench: {:?}, {} maps x {} partitions x {} blocks of {} B = {}, concurrency {}",
            self.transport,
            s.maps,
            s.partitions,
            s.blocks_per_partition,
            s.block_size,
            mib(s.total_bytes()),
            self.concurrency
        )?;
        writeln!(
            f,
            "{:<28} {:>10} {:>10} {:>10}",
            "phase", "GB/s", "ceiling", "share"
        )?;
        let row = |f: &mut fmt::Formatter<'_>, name: &str, p: Option<&Phase>, c: Option<&Phase>| {
            if let Some(p) = p {
                let (cs, share) = match c {
                    Some(c) => (
                        format!("{:.3}", c.gb_per_s()),
                        pct(p.gb_per_s(), c.gb_per_s()),
                    ),
                    None => ("-".into(), "-".into()),
                };
                writeln!(
                    f,
                    "{:<28} {:>10.3} {:>10} {:>10}",
                    name,
                    p.gb_per_s(),
                    cs,
                    share
                )
            } else {
                Ok(())
            }
        };
        row(
            f,
            "write (transport ceiling)",
            self.write.as_ref(),
            self.ceiling_write.as_ref(),
        )?;
        row(
            f,
            "read (transport ceiling)",
            self.read.as_ref(),
            self.ceiling_read.as_ref(),
        )?;
        if let Some(spill) = self.spill_gb_s() {
            let (c, share) = match &self.disk {
                Some(d) => (format!("{:.3}", d.write_gb_s()), pct(spill, d.write_gb_s())),
                None => ("-".into(), "-".into()),
            };
            writeln!(
                f,
                "{:<28} {:>10.3} {:>10} {:>10}",
                "spill at finish (disk write)", spill, c, share
            )?;
        }
        if let (Some(r), Some(d)) = (&self.read, &self.disk) {
            writeln!(
                f,
                "{:<28} {:>10.3} {:>10.3} {:>10}",
                "read (disk read)",
                r.gb_per_s(),
                d.read_gb_s(),
                pct(r.gb_per_s(), d.read_gb_s())
            )?;
        }
        if let Some(cpu) = self.server_cpu {
            write!(f, "server CPU {cpu:.2} s")?;
            if let Some(per) = self.cpu_per_gb() {
                write!(f, " = {per:.3} CPU-s/GB moved")?;
            }
            if let (Some([w, fin, r]), Some(wp), Some(rp)) =
                (self.server_cpu_phases, &self.write, &self.read)
            {
                write!(
                    f,
                    "; write {:.3} + finish {:.3} per GB written, read {:.3} per GB read",
                    w / (wp.bytes as f64 / 1e9),
                    fin / (wp.bytes as f64 / 1e9),
                    r / (rp.bytes as f64 / 1e9)
                )?;
            }
            if let (Some(c), Some(w), Some(r)) =
                (self.ceiling_cpu, &self.ceiling_write, &self.ceiling_read)
            {
                write!(
                    f,
                    " (discard server: {:.3} CPU-s/GB)",
                    c / ((w.bytes + r.bytes) as f64 / 1e9)
                )?;
            }
            writeln!(f)?;
        }
        if let Some(rss) = self.server_peak_rss {
            write!(f, "server peak RSS {}", mib(rss))?;
            if let Some(cap) = self.capacity {
                write!(
                    f,
                    " = {:.2}x memory capacity ({})",
                    rss as f64 / cap as f64,
                    mib(cap)
                )?;
            }
            writeln!(f)?;
            if let (Some(base), Some(w), Some(r)) = (
                self.server_base_rss,
                self.server_write_rss,
                self.server_read_rss,
            ) {
                write!(
                    f,
                    "  at start {}, writing {}, reading {}",
                    mib(base),
                    mib(w),
                    mib(r)
                )?;
                if let Some(cap) = self.capacity {
                    write!(
                        f,
                        "; writing minus start = {:.2}x capacity",
                        w.saturating_sub(base) as f64 / cap as f64
                    )?;
                }
                writeln!(f)?;
            }
            if let (Some(base), Some(idle)) = (self.server_base_rss, self.server_idle_rss) {
                writeln!(
                    f,
                    "  idle {} s after the apps ended: {} ({} MiB over start)",
                    super::IDLE_AFTER.as_secs(),
                    mib(idle),
                    (idle as i64 - base as i64) >> 20
                )?;
            }
        }
        if let Some(w) = &self.write {
            writeln!(f, "NO_BUFFER answers: {}", w.no_buffer)?;
        }
        writeln!(
            f,
            "{:<22} {:>8} {:>9} {:>9} {:>9} {:>9}",
            "latency (ms)", "calls", "p50", "p99", "p99.9", "max"
        )?;
        if let (Some(w), Some(r)) = (&self.write, &self.read) {
            for op in Op::ALL {
                let h = if matches!(op, Op::Require | Op::Send) {
                    w.latencies.of(op)
                } else {
                    r.latencies.of(op)
                };
                if h.is_empty() {
                    continue;
                }
                let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
                writeln!(
                    f,
                    "{:<22} {:>8} {:>9.2} {:>9.2} {:>9.2} {:>9.2}",
                    op.name(),
                    h.len(),
                    ms(0.5),
                    ms(0.99),
                    ms(0.999),
                    h.max() as f64 / 1000.0
                )?;
            }
        }
        if let Some(v) = &self.verification {
            writeln!(
                f,
                "verification: {} blocks checked ({} from memory, {} read twice), {} lost, {} corrupt, {} bad result bitmaps: {}",
                v.blocks,
                v.from_memory,
                v.duplicates,
                v.lost,
                v.corrupt,
                v.bad_results,
                if v.ok() { "OK" } else { "FAILED" }
            )?;
            for p in &v.problems {
                writeln!(f, "  {p}")?;
            }
        }
        Ok(())
    }
}
