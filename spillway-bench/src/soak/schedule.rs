//! The fault schedule: drawn up front from `--seed`, so the same seed and options give the
//! same faults at the same times on the same servers, and printed before the run starts.
//! Faults with a hold often get the next fault inside that hold (see [`schedule`]); `faults`
//! applies them.

use super::cluster::{COORDINATORS, LOOP_PATH, PATHS, SERVERS};

/// The server no process fault restarts: every other fault (stalls, disk fills, freezes and
/// removals, NameNode restarts) still hits it. A resource slope is only measurable over a long
/// process life: a fresh process's RSS and threads ramp up for minutes (a jemalloc arena touches
/// its huge pages, the blocking pool grows to the load), and with restarts every few minutes
/// that ramp is all a slope sees. This server lives for the whole run, so its slope over the
/// last half is a leak's, under every fault but a restart.
pub const LONG_LIVED: usize = SERVERS - 1;

/// A small deterministic generator (splitmix64): the schedule must not depend on a crate's
/// algorithm choice between versions.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// Seeded.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// One kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// SIGKILL, then start again on the same config.
    Kill,
    /// SIGTERM (final spill), then start again.
    Term,
    /// A new process with `--takeover` replaces the running one.
    Takeover,
    /// Fill one data path with a file until ENOSPC; the file is removed `hold` later.
    DiskFill,
    /// SIGTERM a server that embeds a coordinator, start it again `hold` later.
    CoordinatorStop,
    /// Drop the packets of one server's client-facing ports for `hold` (own namespace only;
    /// see `netstall`).
    NetStall,
    /// Stop the MiniDFS NameNode, start it again `hold` later (same port, same metadata).
    NameNodeRestart,
    /// `fsfreeze` the loop disk for `hold`: its writes block in the kernel, then resume.
    DiskFreeze,
    /// Pull the loop disk out (its path turns empty and read-only), put a new empty file
    /// system in `hold` later; the apps that had files on it are recorded as gone.
    DiskRemove,
    /// Freeze the S3 server (SIGSTOP) for `hold`, then resume it with its objects: every
    /// server's object-storage requests hang meanwhile.
    S3Freeze,
}

impl Kind {
    /// Whether the fault needs the soak's own mounts (it would hit the host's disk otherwise).
    fn needs_disks(self) -> bool {
        matches!(self, Kind::DiskFill | Kind::DiskFreeze | Kind::DiskRemove)
    }

    /// Whether the fault lasts its hold in the background while later faults fire.
    pub fn overlaps(self) -> bool {
        matches!(
            self,
            Kind::DiskFill
                | Kind::NetStall
                | Kind::NameNodeRestart
                | Kind::DiskFreeze
                | Kind::DiskRemove
                | Kind::S3Freeze
        )
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Kind::Kill => "SIGKILL + restart",
            Kind::Term => "SIGTERM + restart",
            Kind::Takeover => "--takeover upgrade",
            Kind::DiskFill => "disk fill",
            Kind::CoordinatorStop => "coordinator stopped",
            Kind::NetStall => "client network stall",
            Kind::NameNodeRestart => "NameNode stopped",
            Kind::DiskFreeze => "disk freeze",
            Kind::DiskRemove => "disk removal",
            Kind::S3Freeze => "S3 store frozen",
        }
    }
}

/// What the soak runs, which decides the faults it can plan.
#[derive(Clone, Copy, Debug)]
pub struct Parts {
    /// tmpfs data paths and loop disks of its own (disk fills, freezes, removals).
    pub disks: bool,
    /// Its own network namespace (client network stalls).
    pub net: bool,
    /// A MiniDFS (NameNode restarts).
    pub hdfs: bool,
    /// An S3 server (store freezes).
    pub s3: bool,
}

#[cfg(test)]
impl Parts {
    /// Everything.
    pub fn all() -> Parts {
        Parts {
            disks: true,
            net: true,
            hdfs: true,
            s3: true,
        }
    }
}

/// A planned fault.
#[derive(Clone, Debug)]
pub struct Fault {
    /// Seconds after the start.
    pub at: f64,
    /// What.
    pub kind: Kind,
    /// Which server.
    pub node: usize,
    /// Which data path (disk faults; always the loop disk for a freeze or a removal).
    pub path: usize,
}

/// Draws the schedule: gaps uniform in `[interval/2, 3*interval/2)`, from 10 s after the
/// start to `hold` + 10 s before the end (so the last restarts settle before the final
/// checks). After a fault that lasts its `hold` in the background ([`Kind::overlaps`]), half
/// the time the next one comes within that hold instead, uniform in `[hold/5, 4*hold/5)`, so
/// faults overlap. Kinds come in rounds holding each kind once, in a seeded order, so even a
/// 5-minute run meets every kind. Which kinds can be planned depends on the soak's [`Parts`].
pub fn schedule(seed: u64, duration: f64, interval: f64, hold: f64, parts: Parts) -> Vec<Fault> {
    let Parts {
        disks,
        net,
        hdfs,
        s3,
    } = parts;
    let tail = hold + 10.0;
    let mut rng = Rng::new(seed);
    let kinds: Vec<Kind> = [
        Kind::Kill,
        Kind::Term,
        Kind::Takeover,
        Kind::DiskFill,
        Kind::CoordinatorStop,
        Kind::NetStall,
        Kind::NameNodeRestart,
        Kind::DiskFreeze,
        Kind::DiskRemove,
        Kind::S3Freeze,
    ]
    .into_iter()
    .filter(|k| disks || !k.needs_disks())
    .filter(|k| net || *k != Kind::NetStall)
    .filter(|k| hdfs || *k != Kind::NameNodeRestart)
    .filter(|k| s3 || *k != Kind::S3Freeze)
    .collect();
    let mut round: Vec<Kind> = Vec::new();
    let mut out = Vec::new();
    let mut at = 10.0;
    let mut within_hold = false;
    loop {
        at += if within_hold {
            hold * (0.2 + 0.6 * rng.unit())
        } else {
            interval * (0.5 + rng.unit())
        };
        if at > duration - tail {
            return out;
        }
        if round.is_empty() {
            round = kinds.clone();
            // Fisher-Yates with the seeded generator.
            for i in (1..round.len()).rev() {
                round.swap(i, rng.below(i as u64 + 1) as usize);
            }
        }
        let kind = round.pop().unwrap_or(Kind::Kill);
        let node = match kind {
            Kind::CoordinatorStop => rng.below(COORDINATORS as u64) as usize,
            // The last server is never restarted (see [`LONG_LIVED`]).
            Kind::Kill | Kind::Term | Kind::Takeover => rng.below(LONG_LIVED as u64) as usize,
            _ => rng.below(SERVERS as u64) as usize,
        };
        let drawn = rng.below(PATHS as u64) as usize;
        // Only the loop disk can be frozen (tmpfs cannot) or removed.
        let path = match kind {
            Kind::DiskFreeze | Kind::DiskRemove => LOOP_PATH,
            _ => drawn,
        };
        within_hold = kind.overlaps() && rng.unit() < 0.5;
        out.push(Fault {
            at,
            kind,
            node,
            path,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind comes once per round of `n`.
    fn rounds_of(s: &[Fault], n: usize) {
        assert!(s.len() >= n, "{s:?}");
        for round in s.chunks_exact(n) {
            let mut kinds: Vec<String> = round.iter().map(|f| format!("{:?}", f.kind)).collect();
            kinds.sort();
            kinds.dedup();
            assert_eq!(kinds.len(), n, "{round:?}");
        }
    }

    #[test]
    fn same_seed_same_schedule() {
        let a = schedule(7, 600.0, 20.0, 20.0, Parts::all());
        let b = schedule(7, 600.0, 20.0, 20.0, Parts::all());
        let c = schedule(8, 600.0, 20.0, 20.0, Parts::all());
        let key = |s: &[Fault]| {
            s.iter()
                .map(|f| (f.at.to_bits(), f.kind, f.node, f.path))
                .collect::<Vec<_>>()
        };
        assert_eq!(key(&a), key(&b));
        assert_ne!(key(&a), key(&c));
        assert!(a.iter().all(|f| f.at >= 10.0 && f.at <= 570.0));
        assert!(a
            .iter()
            .filter(|f| f.kind == Kind::CoordinatorStop)
            .all(|f| f.node < COORDINATORS));
        assert!(a
            .iter()
            .filter(|f| matches!(f.kind, Kind::DiskFreeze | Kind::DiskRemove))
            .all(|f| f.path == LOOP_PATH));
        rounds_of(&a, 10);
        assert!(a
            .iter()
            .filter(|f| matches!(f.kind, Kind::Kill | Kind::Term | Kind::Takeover))
            .all(|f| f.node < LONG_LIVED));
        assert!(
            a.iter().any(|f| f.node == LONG_LIVED),
            "other faults still hit it"
        );
        // Faults come within the hold (20 s) of a background fault, and only after one
        // (other gaps are 20-60 s here).
        let o = schedule(7, 1200.0, 40.0, 20.0, Parts::all());
        let close: Vec<(&Fault, &Fault)> = o
            .windows(2)
            .map(|w| (&w[0], &w[1]))
            .filter(|(x, y)| y.at - x.at < 20.0)
            .collect();
        assert!(close.len() >= 3, "{o:?}");
        assert!(close
            .iter()
            .all(|(x, y)| x.kind.overlaps() && y.at - x.at >= 4.0));
        // Without the soak's mounts, no disk is filled, frozen or removed (it would be the
        // host's disk).
        let no_disks = schedule(
            7,
            600.0,
            20.0,
            20.0,
            Parts {
                disks: false,
                ..Parts::all()
            },
        );
        assert!(no_disks.iter().all(|f| !f.kind.needs_disks()));
        rounds_of(&no_disks, 7);
        // Outside the soak's own network namespace, no stall (it would be the host's
        // firewall).
        let no_net = schedule(
            7,
            600.0,
            20.0,
            20.0,
            Parts {
                net: false,
                ..Parts::all()
            },
        );
        assert!(no_net.iter().all(|f| f.kind != Kind::NetStall));
        rounds_of(&no_net, 9);
        // NameNode restarts only with a MiniDFS.
        let no_hdfs = schedule(
            7,
            600.0,
            20.0,
            20.0,
            Parts {
                hdfs: false,
                ..Parts::all()
            },
        );
        assert!(no_hdfs.iter().all(|f| f.kind != Kind::NameNodeRestart));
        rounds_of(&no_hdfs, 9);
        // Store freezes only with an S3 server.
        let no_s3 = schedule(
            7,
            600.0,
            20.0,
            20.0,
            Parts {
                s3: false,
                ..Parts::all()
            },
        );
        assert!(no_s3.iter().all(|f| f.kind != Kind::S3Freeze));
        rounds_of(&no_s3, 9);
    }
}
