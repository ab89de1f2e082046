//! The `server` registry: Uniffle's shuffle-server gauges and counters, computed at scrape time
//! from the state the server keeps anyway (memory budget, read cap, tickets, app registry,
//! spiller statistics, disk reports, status). Nothing on the request path touches Prometheus.
//! The server attaches it to the metrics layer below ([`ServerFamilies`]), which knows the
//! families and not the parts they are read from.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use prometheus::core::{Collector, Desc};
use prometheus::proto::{self, MetricFamily, MetricType};

use crate::app::AppRegistry;
use crate::metrics::pools::PoolValues;
use crate::metrics::{family, label, sample, ServerFamilies};
use crate::store::localfile::{DiskStatus, LocalFileTier};
use crate::store::TierKind;

/// Java's top-N families with their HELP texts, in the order of the sizes the collector
/// computes (total, in memory, local files, HDFS).
const TOP_N: [(&str, &str); 4] = [
    (
        "topN_of_total_data_size_for_app",
        "top N of total shuffle data size for app level",
    ),
    (
        "topN_of_in_memory_data_size_for_app",
        "top N of in memory shuffle data size for app level",
    ),
    (
        "topN_of_on_localfile_data_size_for_app",
        "top N of on disk shuffle data size for app level",
    ),
    (
        "topN_of_on_hadoop_data_size_for_app",
        "top N of on hadoop shuffle data size for app level",
    ),
];

/// Scrape-time collector of the `server` registry.
pub struct ServerCollector {
    registry: Arc<AppRegistry>,
    local: Option<Arc<LocalFileTier>>,
    /// Apps listed in each top-N family (Java `rss.server.topN.appShuffleDataSize.number`).
    top_n: usize,
    tags: String,
    /// Collectors must describe themselves; the families here are dynamic (per disk), so one
    /// umbrella description is registered and `collect` returns the real families.
    desc: Desc,
}

impl ServerCollector {
    /// A collector over the server's parts.
    pub fn new(
        registry: Arc<AppRegistry>,
        local: Option<Arc<LocalFileTier>>,
        top_n: usize,
        tags: &str,
    ) -> prometheus::Result<Self> {
        Ok(ServerCollector {
            registry,
            local,
            top_n,
            tags: tags.to_owned(),
            desc: Desc::new(
                "spillway_server_collector".into(),
                "scrape-time shuffle server metrics".into(),
                Vec::new(),
                Default::default(),
            )?,
        })
    }
}

/// What the metrics layer asks at each scrape of the `server` registry.
impl ServerFamilies for ServerCollector {
    fn families(&self) -> Vec<MetricFamily> {
        self.collect()
    }

    /// The spill writers seen as Java's flush thread pools.
    fn pools(&self) -> Vec<(&'static str, PoolValues)> {
        self.registry
            .store()
            .spiller()
            .pools()
            .snapshots()
            .into_iter()
            .map(|(name, s)| {
                let values = PoolValues {
                    active: s.active,
                    queued: s.queued,
                    completed: s.completed,
                    limit: s.limit,
                };
                (name, values)
            })
            .collect()
    }
}

/// Builds families in Uniffle's shape: HELP "Gauge <name>"/"Counter <name>", label `tags`
/// first, then any extra labels.
struct Families<'a> {
    tags: &'a str,
    out: Vec<MetricFamily>,
}

impl Families<'_> {
    fn push(&mut self, name: &str, ty: MetricType, samples: Vec<(Vec<(&str, String)>, f64)>) {
        let help = match ty {
            MetricType::COUNTER => "Counter",
            _ => "Gauge",
        };
        self.push_with(name, ty, &format!("{help} {name}"), true, samples);
    }

    /// Like [`Families::push`] with Java's own HELP text, and without the `tags` label where
    /// Java registers the family without it. A family may have no samples: it is then
    /// exported as HELP and TYPE only, as simpleclient does with a labelled family that has
    /// no children yet.
    fn push_with(
        &mut self,
        name: &str,
        ty: MetricType,
        help: &str,
        with_tags: bool,
        samples: Vec<(Vec<(&str, String)>, f64)>,
    ) {
        let metrics = samples
            .into_iter()
            .map(|(labels, value)| {
                let mut pairs = Vec::with_capacity(labels.len() + 1);
                if with_tags {
                    pairs.push(label("tags", self.tags.to_owned()));
                }
                pairs.extend(labels.into_iter().map(|(k, v)| label(k, v)));
                sample(pairs, ty, value)
            })
            .collect();
        self.out.push(family(name, help.to_owned(), ty, metrics));
    }

    fn gauge(&mut self, name: &str, value: f64) {
        self.push(name, MetricType::GAUGE, vec![(Vec::new(), value)]);
    }

    fn counter(&mut self, name: &str, value: u64) {
        self.push(name, MetricType::COUNTER, vec![(Vec::new(), value as f64)]);
    }
}

impl Collector for ServerCollector {
    fn desc(&self) -> Vec<&Desc> {
        vec![&self.desc]
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let mut f = Families {
            tags: &self.tags,
            out: Vec::with_capacity(96),
        };
        let reg = &self.registry;
        let store = reg.store();
        let mem = store.memory().budget().snapshot();
        let spiller = store.spiller();
        let flush = spiller.stats();
        let stats = reg.stats();
        let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        let gload = |a: &std::sync::atomic::AtomicI64| a.load(Ordering::Relaxed).max(0) as f64;

        // Memory and flow control.
        f.gauge("used_buffer_size", (mem.reserved + mem.used) as f64);
        f.gauge("allocated_buffer_size", mem.reserved as f64);
        f.gauge("in_flush_buffer_size", mem.in_flush as f64);
        f.gauge("read_used_buffer_size", reg.read_budget().used() as f64);
        f.gauge("require_buffer_count", reg.tickets().len() as f64);
        f.gauge("app_num_with_node", reg.app_count() as f64);
        f.gauge("partition_num_with_node", reg.partition_count() as f64);
        let buffers = store.memory().all_buffers();
        f.gauge("buffer_count_in_buffer_pool", buffers.len() as f64);
        let shuffles: std::collections::HashSet<_> = buffers
            .iter()
            .map(|b| (&b.key().app, b.key().shuffle))
            .collect();
        f.gauge("shuffle_count_in_buffer_pool", shuffles.len() as f64);
        // Java refreshes these three every 2 minutes (their sums walk every buffer); here they
        // are summed at scrape time from counters each buffer keeps, which is as cheap as the
        // buffer count above and never stale.
        let (mut staged, mut flushing, mut committed) = (0u64, 0u64, 0u64);
        for b in &buffers {
            let (s, f) = b.block_counts();
            staged += s;
            flushing += f;
            committed += b.committed_blocks();
        }
        f.gauge("block_count_in_buffer_pool", staged as f64);
        f.gauge("in_flush_block_count_in_buffer_pool", flushing as f64);
        f.gauge("committed_block_count", committed as f64);
        let apps = reg.apps();
        let reported: u64 = apps
            .iter()
            .flat_map(|a| a.shuffle_ids().into_iter().filter_map(|id| a.shuffle(id)))
            .map(|s| s.block_ids.total())
            .sum();
        f.gauge("reported_block_count", reported as f64);
        // Java fills its cached block ids only when the storage type has no memory tier
        // (`ShuffleTaskManager.updateCachedBlockIds`); every type Spillway runs (MEMORY_*)
        // has one, so Java exports 0 here too.
        f.gauge("cached_block_count", 0.0);
        let threshold = reg.huge_partition_threshold();
        let huge: Vec<_> = buffers
            .iter()
            .filter(|b| b.total_bytes() > threshold)
            .collect();
        let huge_apps: std::collections::HashSet<_> = huge.iter().map(|b| &b.key().app).collect();
        f.gauge("huge_partition_num", huge.len() as f64);
        f.gauge("app_with_huge_partition_num", huge_apps.len() as f64);

        // Flush queue: every batch handed to the spiller and not yet durable.
        let pending = spiller.pending() as f64;
        f.gauge("event_queue_size", pending);
        f.gauge("total_write_handler", pending);
        let (local_q, hdfs_q) = if spiller.has_local() {
            (pending, 0.0)
        } else {
            (0.0, pending)
        };
        f.gauge("localfile_flush_thread_pool_queue_size", local_q);
        f.gauge("hadoop_flush_thread_pool_queue_size", hdfs_q);
        // Java counts a pended event here from its dispatch to the fallback pool until it is
        // handled: the retries waiting or being written.
        let fallback = spiller.pools().fallback().snapshot();
        f.gauge(
            "fallback_flush_thread_pool_queue_size",
            (fallback.queued + fallback.active) as f64,
        );

        // Inverted like Java: 0 healthy, 1 unhealthy. Java's gauge follows its health checks
        // even while decommissioning; so does this (checks or storage failing).
        let unhealthy = reg.status().health_failing();
        f.gauge("is_healthy", if unhealthy { 1.0 } else { 0.0 });

        // Read memory held by responses of each kind (tagged read permits). Netty data reads
        // sent from the file (sendfile) hold no memory and are not counted.
        {
            use crate::memory::ReadUse;
            let reads = reg.read_budget();
            f.gauge(
                "read_local_data_file_buffer_size",
                reads.used_for(ReadUse::DataFile) as f64,
            );
            f.gauge(
                "read_local_index_file_buffer_size",
                reads.used_for(ReadUse::IndexFile) as f64,
            );
            f.gauge(
                "read_memory_data_buffer_size",
                reads.used_for(ReadUse::Memory) as f64,
            );
        }

        // Reads in progress.
        for (name, value) in [
            ("read_local_data_file_thread_num", &stats.reading_data_files),
            (
                "read_local_index_file_thread_num",
                &stats.reading_index_files,
            ),
            ("read_memory_data_thread_num", &stats.reading_memory),
        ] {
            f.gauge(name, gload(value));
        }

        // Disks: totals under local_disk_path="ALL", the rest per path.
        let disks = self
            .local
            .as_ref()
            .map(|l| l.disk_reports())
            .unwrap_or_default();
        let path = |d: &crate::store::localfile::DiskReport| d.path.to_string_lossy().into_owned();
        let all = || vec![("local_disk_path", "ALL".to_owned())];
        let per_disk = |value: &dyn Fn(&crate::store::localfile::DiskReport) -> f64| {
            disks
                .iter()
                .map(|d| (vec![("local_disk_path", path(d))], value(d)))
                .collect::<Vec<_>>()
        };
        f.push(
            "local_storage_total_dirs_num",
            MetricType::GAUGE,
            vec![(all(), disks.len() as f64)],
        );
        let corrupted = disks
            .iter()
            .filter(|d| d.status == DiskStatus::Unhealthy)
            .count();
        f.push(
            "local_storage_corrupted_dirs_num",
            MetricType::GAUGE,
            vec![(all(), corrupted as f64)],
        );
        let sum = |v: &dyn Fn(&crate::store::localfile::DiskReport) -> u64| {
            disks.iter().map(v).sum::<u64>() as f64
        };
        let mut with_all = |name: &str, v: &dyn Fn(&crate::store::localfile::DiskReport) -> u64| {
            let mut samples = vec![(all(), sum(v))];
            samples.extend(per_disk(&|d| v(d) as f64));
            f.push(name, MetricType::GAUGE, samples);
        };
        with_all("local_storage_total_space", &|d| d.capacity_bytes);
        with_all("local_storage_whole_disk_used_space", &|d| {
            d.capacity_bytes.saturating_sub(d.available_bytes)
        });
        with_all("local_storage_service_used_space", &|d| d.written_bytes);
        let total: u64 = disks.iter().map(|d| d.capacity_bytes).sum();
        let used: u64 = disks
            .iter()
            .map(|d| d.capacity_bytes.saturating_sub(d.available_bytes))
            .sum();
        let mut ratio = vec![(
            all(),
            if total == 0 {
                0.0
            } else {
                used as f64 / total as f64
            },
        )];
        ratio.extend(per_disk(&|d| {
            if d.capacity_bytes == 0 {
                0.0
            } else {
                d.capacity_bytes.saturating_sub(d.available_bytes) as f64 / d.capacity_bytes as f64
            }
        }));
        f.push("local_storage_used_space_ratio", MetricType::GAUGE, ratio);
        // Per-disk only, as Java (label local_disk_path without the ALL sample). Inverted like
        // `is_healthy`: Java's LocalStorageChecker sets 0 when the path can be written, 1 when
        // it cannot (corrupted or over the write watermark).
        f.push(
            "local_storage_is_writable",
            MetricType::GAUGE,
            per_disk(&|d| (d.status != DiskStatus::Normal) as u8 as f64),
        );
        f.push(
            "local_storage_is_timeout",
            MetricType::GAUGE,
            per_disk(&|d| d.timed_out as u8 as f64),
        );
        // Spillway's own: partitions that failed over from each disk to another.
        let mut moved = vec![(all(), sum(&|d| d.partitions_moved_off))];
        moved.extend(per_disk(&|d| d.partitions_moved_off as f64));
        f.push("total_partition_failover", MetricType::COUNTER, moved);
        f.gauge(
            "storage_used_bytes",
            disks.iter().map(|d| d.written_bytes).sum::<u64>() as f64,
        );

        // Counters: data in and out (a table: one row per family).
        #[rustfmt::skip]
        let counters = [
            ("total_received_data", load(&stats.received_bytes)),
            ("total_read_data", load(&stats.read_bytes)),
            ("total_read_local_data_file", load(&stats.read_data_file_bytes)),
            ("total_read_local_index_file", load(&stats.read_index_file_bytes)),
            ("total_read_memory_data", load(&stats.read_memory_bytes)),
            ("total_read_time", load(&stats.read_time_ms)),
            ("total_require_read_memory_num", load(&stats.read_memory_requests)),
            ("total_require_read_memory_retry_num", 0),
            ("total_require_read_memory_failed_num", load(&stats.read_memory_refused)),
            ("total_require_buffer_failed", stats.require_failed()),
            ("total_require_buffer_failed_for_regular_partition", load(&stats.require_failed_regular)),
            ("total_require_buffer_failed_for_huge_partition", load(&stats.require_failed_huge)),
            ("total_huge_partition_exceed_hard_limit_num", load(&stats.huge_hard_limit)),
            ("total_expired_preAllocated_buffer_num", reg.tickets().expired_total()),
            ("total_app_num", load(&stats.apps_created)),
            ("total_partition_num", load(&stats.ranges_registered)),
            ("total_app_not_found_num", load(&stats.app_not_found)),
            ("total_delete_data", load(&stats.deleted_bytes)),
        ];
        for (name, value) in counters {
            f.counter(name, value);
        }

        // Counters: flushes.
        f.counter("total_write_data", load(&flush.write_data));
        f.counter("total_write_block", load(&flush.write_blocks));
        f.counter("total_write_num", load(&flush.write_num));
        f.counter("total_write_time", load(&flush.write_time_ms));
        f.counter("total_write_exception", load(&flush.write_exceptions));
        f.counter("total_write_slow", load(&flush.write_slow));
        f.counter("total_dropped_event_num", load(&flush.dropped_events));
        f.counter("total_failed_written_event_num", load(&flush.failed_events));
        for (i, n) in flush.size_levels.iter().enumerate() {
            f.counter(&format!("event_size_threshold_level{}", i + 1), load(n));
        }
        let by_location = flush.by_location();
        let located = |kind: TierKind, label: &'static str| {
            by_location
                .iter()
                .filter(|(k, _, _)| *k == kind)
                .map(|(_, l, b)| (vec![(label, l.clone())], *b as f64))
                .collect::<Vec<_>>()
        };
        f.push(
            "total_localfile_write_data",
            MetricType::COUNTER,
            located(TierKind::LocalFile, "local_disk_path"),
        );
        // Java adds every HDFS write to its host and to `storage_host="ALL"`.
        let with_all_hosts = |mut samples: Vec<(Vec<(&'static str, String)>, f64)>| {
            if !samples.is_empty() {
                let all: f64 = samples.iter().map(|(_, v)| v).sum();
                samples.push((vec![("storage_host", "ALL".to_owned())], all));
            }
            samples
        };
        f.push(
            "total_hadoop_write_data",
            MetricType::COUNTER,
            with_all_hosts(located(TierKind::Hdfs, "storage_host")),
        );
        f.push(
            "total_hadoop_write_data_for_huge_partition",
            MetricType::COUNTER,
            with_all_hosts(
                flush
                    .huge_by_location()
                    .into_iter()
                    .map(|(l, b)| (vec![("storage_host", l)], b as f64))
                    .collect(),
            ),
        );
        for (kind, suffix, events) in [
            (TierKind::LocalFile, "local", "local_file_event_flush_num"),
            (TierKind::Hdfs, "remote", "hadoop_event_flush_num"),
        ] {
            let k = flush.kind(kind);
            f.counter(&format!("storage_total_write_{suffix}"), load(&k.attempts));
            f.counter(&format!("storage_retry_write_{suffix}"), load(&k.retries));
            f.counter(&format!("storage_failed_write_{suffix}"), load(&k.failures));
            f.counter(
                &format!("storage_success_write_{suffix}"),
                load(&k.successes),
            );
            f.counter(events, load(&k.successes));
        }

        // Files: Java counts a "file" per flush event written (see `AppWritten`), and moves
        // an app's count to the deleted total when the app is removed.
        let written = flush.per_app();
        f.counter("total_flush_file_num", load(&flush.flush_files));
        f.gauge(
            "flush_file_num",
            written.iter().map(|(_, w)| w.events).sum::<u64>() as f64,
        );
        f.counter("total_delete_file_num", load(&stats.deleted_files));
        f.counter(
            "total_local_rename_and_deletion_failed",
            self.local.as_ref().map_or(0, |l| l.deletion_failures()),
        );
        f.counter("total_huge_partition_num", load(&stats.huge_partitions));
        f.counter(
            "total_app_with_huge_partition_num",
            load(&stats.apps_with_huge),
        );

        // Top-N apps, as Java's TopNShuffleDataSizeOfAppCalcTask: label `app_id` only, the N
        // largest by each measure, in memory = received − written to files.
        let mut sizes: std::collections::HashMap<&crate::ids::AppId, [u64; 4]> = apps
            .iter()
            .map(|a| (a.id(), [a.data_bytes(), 0, 0, 0]))
            .collect();
        for (app, w) in &written {
            if let Some(s) = sizes.get_mut(app) {
                s[2] = w.local_bytes;
                s[3] = w.hdfs_bytes;
            }
        }
        for s in sizes.values_mut() {
            s[1] = s[0].saturating_sub(s[2] + s[3]);
        }
        for (i, (name, help)) in TOP_N.iter().enumerate() {
            let mut ranked: Vec<(&crate::ids::AppId, u64)> =
                sizes.iter().map(|(a, s)| (*a, s[i])).collect();
            ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
            ranked.truncate(self.top_n);
            f.push_with(
                name,
                MetricType::GAUGE,
                help,
                false,
                ranked
                    .into_iter()
                    .map(|(a, v)| (vec![("app_id", a.to_string())], v as f64))
                    .collect(),
            );
        }

        let mut in_memory: std::collections::HashMap<crate::ids::AppId, u64> = Default::default();
        for b in &buffers {
            *in_memory.entry(b.key().app.clone()).or_default() += b.memory_bytes();
        }
        tenant_families(&mut f, store.router().quotas(), &in_memory, self.top_n);
        f.counter(
            "tenant_memory_share_refused_total",
            store.memory().budget().snapshot().share_refused,
        );

        // Registered (labelled `appId`) even when off, as Java's; filled only with
        // `[metrics] block_size_statistics`.
        f.out.push(block_size_histogram(stats.block_sizes.get()));

        f.out.extend(stats.removals.app.collect());
        f.out.extend(stats.removals.shuffle.collect());
        f.out
    }
}

/// Spillway's tenant families (Java has none): what each app and user holds on the file
/// tiers, the quotas in force and the requests refused at them. Labels are bounded: the
/// `top_n` largest apps and users by name, the rest summed under `app_id="other"` /
/// `user="other"`.
fn tenant_families(
    f: &mut Families,
    quotas: &crate::store::quota::Quotas,
    in_memory: &std::collections::HashMap<crate::ids::AppId, u64>,
    top_n: usize,
) {
    use crate::store::usage::Held;
    let mut apps = quotas.usage().apps();
    // Memory is the write budget's, read here per app from the buffers; the users' sums
    // follow from the apps' users.
    let memory_of = |a: &crate::store::usage::AppUsage| in_memory.get(&a.app).copied().unwrap_or(0);
    let mut users: std::collections::BTreeMap<String, (Held, u64)> = Default::default();
    for a in &apps {
        let u = users.entry(a.user.clone()).or_default();
        u.1 += memory_of(a);
    }
    for (user, held) in quotas.usage().users() {
        users.entry(user).or_default().0 = held;
    }
    let users: Vec<(String, Held, u64)> = users.into_iter().map(|(u, (h, m))| (u, h, m)).collect();
    apps.retain(|a| !a.held.is_empty() || memory_of(a) > 0);
    type Pick = fn(&Held, u64) -> u64;
    let measures: [(&str, &str, Pick); 3] = [
        ("memory", "in memory", |_, memory| memory),
        ("local", "on the local disks", |h, _| h.local_bytes),
        ("remote", "on the remote tier", |h, _| h.remote_bytes),
    ];
    for (tier, where_, pick) in measures {
        let mut ranked: Vec<_> = apps
            .iter()
            .map(|a| (a, pick(&a.held, memory_of(a))))
            .collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.app.cmp(&b.0.app)));
        let rest: u64 = ranked.iter().skip(top_n).map(|(_, v)| v).sum();
        let mut samples: Vec<(Vec<(&str, String)>, f64)> = ranked
            .iter()
            .take(top_n)
            .map(|(a, v)| {
                let labels = vec![("app_id", a.app.to_string()), ("user", a.user.clone())];
                (labels, *v as f64)
            })
            .collect();
        if ranked.len() > top_n {
            let labels = vec![("app_id", "other".to_owned()), ("user", String::new())];
            samples.push((labels, rest as f64));
        }
        let help =
            format!("Bytes each app holds {where_} (the {top_n} largest, the rest as other)");
        f.push_with(
            &format!("tenant_app_{tier}_bytes"),
            MetricType::GAUGE,
            &help,
            true,
            samples,
        );

        let mut ranked: Vec<_> = users.iter().map(|(u, h, m)| (u, pick(h, *m))).collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        let rest: u64 = ranked.iter().skip(top_n).map(|(_, v)| v).sum();
        let mut samples: Vec<(Vec<(&str, String)>, f64)> = ranked
            .iter()
            .take(top_n)
            .map(|(u, v)| (vec![("user", (*u).clone())], *v as f64))
            .collect();
        if ranked.len() > top_n {
            samples.push((vec![("user", "other".to_owned())], rest as f64));
        }
        let help = format!(
            "Bytes all apps of each user hold {where_} (the {top_n} largest, the rest as other)"
        );
        f.push_with(
            &format!("tenant_user_{tier}_bytes"),
            MetricType::GAUGE,
            &help,
            true,
            samples,
        );
    }
    let (app_limit, user_limit) = quotas.local_limits();
    f.gauge(
        "tenant_app_local_quota_bytes",
        app_limit.unwrap_or(0) as f64,
    );
    f.gauge(
        "tenant_user_local_quota_bytes",
        user_limit.unwrap_or(0) as f64,
    );
    f.counter("tenant_quota_refused_total", quotas.refused());
}

/// `write_block_size{appId}`: one histogram per app, Java's bucket bounds in bytes.
fn block_size_histogram(sizes: Option<&crate::app::block_sizes::BlockSizes>) -> MetricFamily {
    let metrics = sizes
        .map(|s| {
            s.snapshot()
                .into_iter()
                .map(|(app, h)| {
                    let mut m = proto::Metric::from_label(vec![label("appId", app.to_string())]);
                    let mut hist = proto::Histogram::default();
                    let mut cumulative = 0;
                    let buckets = s
                        .bounds()
                        .iter()
                        .zip(&h.buckets)
                        .map(|(bound, n)| {
                            cumulative += n;
                            let mut b = proto::Bucket::default();
                            b.set_upper_bound(*bound as f64);
                            b.set_cumulative_count(cumulative);
                            b
                        })
                        .collect();
                    hist.set_bucket(buckets);
                    hist.set_sample_count(h.count());
                    hist.set_sample_sum(h.sum);
                    m.set_histogram(hist);
                    m
                })
                .collect()
        })
        .unwrap_or_default();
    let mut f = MetricFamily::default();
    f.set_name("write_block_size".to_owned());
    f.set_help("Histogram write_block_size".to_owned());
    f.set_field_type(MetricType::HISTOGRAM);
    f.set_metric(metrics);
    f
}
