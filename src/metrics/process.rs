//! The `jvm` registry's Rust counterpart: process numbers (CPU, RSS, open files, threads),
//! tokio runtime numbers, and jemalloc's allocator statistics with the `jemalloc` feature.
//! Nothing in Uniffle reads this registry; it is what an operator looks at when memory or CPU
//! does not add up.

use prometheus::core::{Collector, Desc};
use prometheus::proto::{MetricFamily, MetricType};

/// Scrape-time collector of tokio runtime and allocator numbers.
pub struct RuntimeCollector {
    runtime: Option<tokio::runtime::Handle>,
    tags: String,
    desc: Desc,
}

impl RuntimeCollector {
    /// Reads the runtime of the calling task (none outside a runtime: those families are left
    /// out).
    pub fn new(tags: &str) -> prometheus::Result<Self> {
        Ok(RuntimeCollector {
            runtime: tokio::runtime::Handle::try_current().ok(),
            tags: tags.to_owned(),
            desc: Desc::new(
                "spillway_runtime_collector".into(),
                "tokio and allocator metrics".into(),
                Vec::new(),
                Default::default(),
            )?,
        })
    }
}

fn family(name: &str, help: &str, ty: MetricType, tags: &str, value: f64) -> MetricFamily {
    let m = super::families::sample(
        vec![super::families::label("tags", tags.to_owned())],
        ty,
        value,
    );
    super::families::family(name, help.to_owned(), ty, vec![m])
}

impl Collector for RuntimeCollector {
    fn desc(&self) -> Vec<&Desc> {
        vec![&self.desc]
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let mut out = Vec::new();
        let tags = &self.tags;
        if let Some(rt) = &self.runtime {
            let m = rt.metrics();
            let gauge = MetricType::GAUGE;
            out.push(family(
                "tokio_workers",
                "Worker threads of the tokio runtime",
                gauge,
                tags,
                m.num_workers() as f64,
            ));
            out.push(family(
                "tokio_alive_tasks",
                "Tasks alive in the tokio runtime",
                gauge,
                tags,
                m.num_alive_tasks() as f64,
            ));
            out.push(family(
                "tokio_global_queue_depth",
                "Tasks waiting in the runtime's global queue",
                gauge,
                tags,
                m.global_queue_depth() as f64,
            ));
            if let Some(threads) = crate::runtime::runtime_threads() {
                out.push(family(
                    "tokio_threads",
                    "Threads alive in the tokio runtime: workers and the blocking pool, which \
                     keeps as many as ran blocking calls at once while its load lasts",
                    gauge,
                    tags,
                    threads as f64,
                ));
            }
            out.push(family(
                "tokio_blocking_tasks",
                "Blocking file and socket calls queued or running; above zero with no load \
                 means a call that never returns",
                gauge,
                tags,
                crate::runtime::blocking_tasks() as f64,
            ));
            let busy: f64 = (0..m.num_workers())
                .map(|w| m.worker_total_busy_duration(w).as_secs_f64())
                .sum();
            out.push(family(
                "tokio_workers_busy_seconds_total",
                "Time the runtime's workers spent polling tasks",
                MetricType::COUNTER,
                tags,
                busy,
            ));
        }
        out.extend(allocator(tags));
        out
    }
}

/// jemalloc's own numbers (refreshed by advancing its stats epoch).
#[cfg(feature = "jemalloc")]
fn allocator(tags: &str) -> Vec<MetricFamily> {
    use tikv_jemalloc_ctl::{epoch, stats};
    if epoch::advance().is_err() {
        return Vec::new();
    }
    let read = [
        (
            "jemalloc_allocated_bytes",
            "Bytes allocated by the application",
            stats::allocated::read(),
        ),
        (
            "jemalloc_active_bytes",
            "Bytes in active pages",
            stats::active::read(),
        ),
        (
            "jemalloc_resident_bytes",
            "Bytes in physically resident data pages",
            stats::resident::read(),
        ),
        (
            "jemalloc_mapped_bytes",
            "Bytes in active extents mapped by the allocator",
            stats::mapped::read(),
        ),
        (
            "jemalloc_retained_bytes",
            "Bytes retained (not returned to the OS)",
            stats::retained::read(),
        ),
        (
            "jemalloc_metadata_bytes",
            "Bytes of allocator metadata",
            stats::metadata::read(),
        ),
    ];
    let mut out: Vec<MetricFamily> = read
        .into_iter()
        .filter_map(|(name, help, v)| {
            v.ok()
                .map(|v| family(name, help, MetricType::GAUGE, tags, v as f64))
        })
        .collect();
    // The arena count decides how much freed memory stays resident (src/main.rs); shown so an
    // operator can see that a `_RJEM_MALLOC_CONF=narenas:N` override took effect.
    if let Ok(n) = tikv_jemalloc_ctl::arenas::narenas::read() {
        out.push(family(
            "jemalloc_arenas",
            "Arenas jemalloc multiplexes threads over",
            MetricType::GAUGE,
            tags,
            f64::from(n),
        ));
    }
    out
}

/// Without jemalloc there are no allocator statistics to read.
#[cfg(not(feature = "jemalloc"))]
fn allocator(_tags: &str) -> Vec<MetricFamily> {
    Vec::new()
}
