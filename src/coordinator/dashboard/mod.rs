//! The operator's dashboard on the HTTP port: `/dashboard` (the cluster), `/dashboard/server/{id}`
//! and `/dashboard/app/{id}`, server-rendered HTML with inline SVG charts, nothing fetched
//! from the network, reloading itself every few seconds.
//!
//! Data flow: heartbeats → [`ServerRegistry`](super::ServerRegistry) (status, tags, memory,
//! disks, per-app sizes of 0.10 servers); client calls → the app registry (users, shuffles
//! assigned); `sampler.rs` → [`History`] (memory and throughput over the last hour) → `view.rs`
//! and `chart.rs` → HTML. Every figure shown is one the coordinator was told or measured; a
//! figure nobody reported reads `n/a`, never 0.
//!
//! Java's Uniffle dashboard (apache/incubator-uniffle `dashboard/`: `Dashboard.java`,
//! `WebProxyServlet.java`, the Vue pages `ShuffleServerPage.vue`, `ApplicationPage.vue`,
//! `serverstatus/NodeListPage.vue`; master snapshots, not the 0.10.0 tag) is a separate Jetty
//! process serving a Vue app that calls the coordinator's REST API and proxies to each server's
//! HTTP port. It shows the same registries (server counts by status, the node list with memory
//! and tags, apps with users) but keeps no history. This one is served by the binary itself,
//! adds the charts, and needs no JavaScript. Like Java's pages it is open (no login): it shows
//! what `/api/server/nodes` and `/api/app/appInfos` already show anyone, and changes nothing.
//!
//! [`routes`] is the one entry point; a process with a coordinator mounts it beside the REST
//! routes, and `sampler::spawn` fills the history.

mod chart;
pub mod history;
pub mod sampler;
mod view;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use minijinja::Value;
use serde::{Deserialize, Serialize};

pub use history::{History, Sample, ServerSample};

use super::registry::{AppStorage, NodeReport, ServerNode};
use super::rest::{walk, RestContext};
use crate::proto::{self, ServerStatus};
use chart::{line_chart, Series, Unit};
use view::{ago, href, human_bytes, or_na, svg, time, Views, REFRESH_SECS};

/// What the handlers read: the coordinator (through the REST context, which also names this
/// process) and the compiled templates.
struct Dashboard {
    ctx: Arc<RestContext>,
    views: Views,
}

type Dash = State<Arc<Dashboard>>;

/// The dashboard's routes over `ctx`.
pub fn routes(ctx: Arc<RestContext>) -> Router {
    let views = match Views::new() {
        Ok(v) => v,
        Err(e) => {
            // The templates are constants checked by unit tests; if one is broken anyway, the
            // rest of the HTTP port keeps working and the dashboard paths say why.
            tracing::error!(error = %e, "dashboard templates do not compile; /dashboard disabled");
            let why = format!("dashboard unavailable: {e}");
            return Router::new().route(
                "/dashboard",
                get(move || async move { (StatusCode::INTERNAL_SERVER_ERROR, why) }),
            );
        }
    };
    Router::new()
        .route("/dashboard", get(cluster))
        .route("/dashboard/", get(cluster))
        .route("/dashboard/server/{id}", get(server))
        .route("/dashboard/app/{id}", get(app))
        .with_state(Arc::new(Dashboard { ctx, views }))
}

/// The fields every page's header shows.
#[derive(Serialize)]
struct Frame {
    title: String,
    refresh_secs: u64,
    coordinator: String,
    generated: String,
}

impl Dashboard {
    fn frame(&self, title: impl Into<String>) -> Frame {
        Frame {
            title: title.into(),
            refresh_secs: REFRESH_SECS,
            coordinator: format!("{}:{}", self.ctx.ip, self.ctx.grpc_port),
            generated: time(crate::clock::now_ms()),
        }
    }

    fn page(
        &self,
        status: StatusCode,
        template: &str,
        title: String,
        page: impl Serialize,
    ) -> Response {
        match self.views.render(template, self.frame(title), page) {
            Ok(html) => (
                status,
                [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
                html,
            )
                .into_response(),
            Err(e) => {
                tracing::error!(error = %e, template, "dashboard page failed to render");
                (StatusCode::INTERNAL_SERVER_ERROR, "dashboard page failed").into_response()
            }
        }
    }

    fn not_found(&self, what: &str, id: &str) -> Response {
        #[derive(Serialize)]
        struct Page<'a> {
            what: &'a str,
            id: &'a str,
        }
        self.page(
            StatusCode::NOT_FOUND,
            "not_found.html",
            format!("{what} not found"),
            Page { what, id },
        )
    }
}

/// One server row / the server page's facts.
#[derive(Serialize)]
struct ServerView {
    id: String,
    href: String,
    status: &'static str,
    ip: String,
    grpc_port: i32,
    netty_port: String,
    jetty_port: String,
    tags: Vec<String>,
    used: String,
    used_bytes: i64,
    capacity: String,
    capacity_bytes: i64,
    available: String,
    pre_allocated: String,
    flush_events: i32,
    disks: String,
    write_rate: String,
    read_rate: String,
    version: String,
    git_commit: String,
    started: String,
    registered: String,
    heartbeat: String,
    metrics: Vec<(String, String)>,
}

fn port(p: i32) -> String {
    if p > 0 {
        p.to_string()
    } else {
        "n/a".into()
    }
}

fn rate(r: Option<f64>) -> String {
    r.map_or_else(
        || "n/a".into(),
        |r| format!("{}/s", human_bytes(r.round() as i64)),
    )
}

fn server_view(
    node: &ServerNode,
    report: &NodeReport,
    last: Option<&ServerSample>,
    now_ms: i64,
) -> ServerView {
    let capacity = node.used_memory.saturating_add(node.available_memory);
    let disks = if report.storage_info.is_empty() {
        "n/a".into()
    } else {
        report
            .storage_info
            .iter()
            .map(|(mount, d)| {
                format!(
                    "{mount}: {} / {} {}",
                    human_bytes(d.used_bytes),
                    human_bytes(d.capacity),
                    disk_status(d)
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    ServerView {
        id: node.id.clone(),
        href: href("server", &node.id),
        status: node.status.as_str_name(),
        ip: node.ip.clone(),
        grpc_port: node.grpc_port,
        netty_port: port(node.netty_port),
        jetty_port: port(node.jetty_port),
        tags: node.tags.iter().cloned().collect(),
        used: human_bytes(node.used_memory),
        used_bytes: node.used_memory,
        capacity: human_bytes(capacity),
        capacity_bytes: capacity,
        available: human_bytes(node.available_memory),
        pre_allocated: human_bytes(report.pre_allocated_memory),
        flush_events: report.event_num_in_flush,
        disks,
        write_rate: rate(last.and_then(|s| s.write_rate)),
        read_rate: rate(last.and_then(|s| s.read_rate)),
        version: or_na(&report.version),
        git_commit: report.git_commit_id.clone(),
        started: time(report.start_time_ms),
        registered: time(report.registration_ms),
        heartbeat: ago(report.timestamp_ms, now_ms),
        metrics: report
            .display_metrics
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    }
}

fn disk_status(d: &proto::StorageInfo) -> &'static str {
    use proto::storage_info::StorageStatus;
    match StorageStatus::try_from(d.status) {
        Ok(StorageStatus::Normal) => "NORMAL",
        Ok(StorageStatus::Unhealthy) => "UNHEALTHY",
        Ok(StorageStatus::Overused) => "OVERUSED",
        _ => "UNKNOWN",
    }
}

fn disk_media(d: &proto::StorageInfo) -> &'static str {
    use proto::storage_info::StorageMedia;
    match StorageMedia::try_from(d.storage_media) {
        Ok(StorageMedia::Hdd) => "HDD",
        Ok(StorageMedia::Ssd) => "SSD",
        Ok(StorageMedia::Hdfs) => "HDFS",
        Ok(StorageMedia::ObjectStore) => "OBJECT_STORE",
        _ => "UNKNOWN",
    }
}

/// One tier's share of an app on a server (`localTotalSize` or `hadoopTotalSize`), or `n/a`
/// when the server's per-tier figures do not account for the app's total: proto3 cannot tell
/// an unsent field from 0, and a server that does not split its bytes by tier would otherwise
/// read as holding nothing on disk.
fn tier_size(info: &proto::ApplicationInfo, bytes: i64) -> String {
    let mut one = AppStorage::default();
    one.add(info);
    summed_tier(&one, bytes)
}

/// [`tier_size`] for figures summed over servers: `n/a` unless every tier is accounted for.
fn summed_tier(sum: &AppStorage, bytes: i64) -> String {
    if sum.tiers_account_for_total() {
        human_bytes(bytes)
    } else {
        "n/a".into()
    }
}

/// A file count from heartbeats. Java's servers and ours leave the counts unset, so 0 next to
/// bytes on that tier means "not reported", not "no files"; showing 0 would be a made-up value.
fn file_count(files: i64, bytes: i64) -> String {
    if files == 0 && bytes > 0 {
        "not reported".into()
    } else {
        files.to_string()
    }
}

/// The last sample of server `id`, if the sampler has seen it.
/// Server `id` in `last`, whose servers are sorted by id: a binary search, so the cluster
/// page's one lookup per server is not quadratic in servers.
fn last_of<'a>(last: Option<&'a Arc<Sample>>, id: &str) -> Option<&'a ServerSample> {
    let servers = &last?.servers;
    let at = servers.binary_search_by(|x| x.id.as_str().cmp(id)).ok()?;
    servers.get(at)
}

/// Memory and throughput charts over `samples`, of the servers `pick` selects. A point is a
/// sum over the selected servers with a known value; `None` when none had one.
fn charts(samples: &[Arc<Sample>], pick: impl Fn(&ServerSample) -> bool) -> (Value, Value) {
    let sum = |f: &dyn Fn(&ServerSample) -> Option<f64>| -> Vec<(i64, Option<f64>)> {
        samples
            .iter()
            .map(|s| {
                // An hour of samples × every server, per series: summed without collecting.
                let known = s.servers.iter().filter(|x| pick(x)).filter_map(f);
                (
                    s.at_ms,
                    known.fold(None, |sum, v| Some(sum.unwrap_or(0.0) + v)),
                )
            })
            .collect()
    };
    let memory = line_chart(
        "Memory",
        Unit::Bytes,
        &[
            Series {
                name: "capacity",
                dashed: false,
                color: "#999999",
                points: sum(&|x| Some(x.capacity as f64)),
            },
            Series {
                name: "used",
                dashed: false,
                color: "#2a6fdb",
                points: sum(&|x| Some(x.used_memory as f64)),
            },
        ],
    );
    let throughput = line_chart(
        "Throughput",
        Unit::BytesPerSec,
        &[
            Series {
                name: "write",
                dashed: false,
                color: "#d9480f",
                points: sum(&|x| x.write_rate),
            },
            Series {
                name: "read",
                dashed: true,
                color: "#2b8a3e",
                points: sum(&|x| x.read_rate),
            },
        ],
    );
    (svg(memory), svg(throughput))
}

/// An app's footprint summed over the servers whose heartbeats report it.
#[derive(Default)]
struct Footprint {
    servers: usize,
    partitions: i64,
    total: i64,
}

#[derive(Serialize)]
struct Card {
    label: &'static str,
    value: String,
    class: &'static str,
}

#[derive(Serialize)]
struct AppRow {
    id: String,
    href: String,
    user: String,
    servers: String,
    partitions: String,
    size: String,
    size_bytes: String,
    registered: String,
    updated: String,
}

/// Rows per page of the cluster page's server and app tables.
const PAGE_ROWS: usize = 100;

/// The cluster page's query: which page of each table (from 1). The two are independent, so a
/// link that pages one table keeps the other where it was, and the page's own reload keeps both.
#[derive(Debug, Default, Deserialize)]
struct ClusterQuery {
    server_page: Option<usize>,
    app_page: Option<usize>,
}

/// One table's place in its rows, with the links to its neighbours (`None` at either end).
#[derive(Debug, Serialize, PartialEq)]
struct Pager {
    /// Rows in the table, all pages.
    total: usize,
    page: usize,
    pages: usize,
    /// First and last row shown, from 1 (0 and 0 for an empty table).
    first_row: usize,
    last_row: usize,
    first: Option<String>,
    prev: Option<String>,
    next: Option<String>,
    last: Option<String>,
}

impl Pager {
    /// Page `asked` (clamped into range: a page past the end, as a table shrinks under a
    /// reloading page, shows the last one) of `total` rows; `link(k)` is the URL of page k.
    fn new(total: usize, asked: Option<usize>, link: impl Fn(usize) -> String) -> Self {
        let pages = total.div_ceil(PAGE_ROWS).max(1);
        let page = asked.unwrap_or(1).clamp(1, pages);
        let first_row = if total == 0 {
            0
        } else {
            (page - 1) * PAGE_ROWS + 1
        };
        let to = |k: usize, show: bool| show.then(|| link(k));
        Pager {
            total,
            page,
            pages,
            first_row,
            last_row: (page * PAGE_ROWS).min(total),
            first: to(1, page > 2),
            prev: to(page.saturating_sub(1), page > 1),
            next: to(page + 1, page < pages),
            last: to(pages, page + 1 < pages),
        }
    }

    /// The rows of this page.
    fn range(&self) -> std::ops::Range<usize> {
        self.first_row.saturating_sub(1)..self.last_row
    }
}

/// `/dashboard` with the two tables at the given pages.
fn cluster_href(server_page: usize, app_page: usize) -> String {
    format!("/dashboard?server_page={server_page}&app_page={app_page}")
}

async fn cluster(State(d): Dash, Query(q): Query<ClusterQuery>) -> Response {
    walk(move || {
        let c = &d.ctx.coordinator;
        let now_ms = crate::clock::now_ms();
        let live = c.servers().live_reports();
        let lost = c.servers().lost();
        let samples = c.history().samples();
        let last = samples.last();

        let mut by_status: BTreeMap<&str, usize> = BTreeMap::new();
        for (node, _) in live.iter().chain(lost.iter()) {
            *by_status.entry(node.status.as_str_name()).or_insert(0) += 1;
        }
        let count = |s: ServerStatus| by_status.get(s.as_str_name()).copied().unwrap_or(0);
        let cards = vec![
            card("Active", count(ServerStatus::Active), "ACTIVE"),
            card("Unhealthy", count(ServerStatus::Unhealthy), "UNHEALTHY"),
            card(
                "Decommissioning",
                count(ServerStatus::Decommissioning),
                "DECOMMISSIONING",
            ),
            card(
                "Decommissioned",
                count(ServerStatus::Decommissioned),
                "DECOMMISSIONED",
            ),
            card("Lost", count(ServerStatus::Lost), "LOST"),
            card("Excluded", c.excluded_count(), ""),
            card("Apps", c.app_count(), ""),
            Card {
                label: "Apps since start",
                value: c.app_total().to_string(),
                class: "",
            },
        ];

        let all_apps = c.apps();
        // Each pager's links keep the other table's page as the request gave it, clamped.
        let app_page = Pager::new(all_apps.len(), q.app_page, |_| String::new()).page;
        let server_pager = Pager::new(live.len() + lost.len(), q.server_page, |k| {
            cluster_href(k, app_page)
        });
        let app_pager = Pager::new(all_apps.len(), q.app_page, |k| {
            cluster_href(server_pager.page, k)
        });
        let servers: Vec<ServerView> = live
            .iter()
            .chain(lost.iter())
            .skip(server_pager.range().start)
            .take(server_pager.range().len())
            .map(|(node, report)| server_view(node, report, last_of(last, &node.id), now_ms))
            .collect();
        let page_apps = &all_apps[app_pager.range()];

        // Footprints of this page's apps only; `None` until a server reports the app.
        let mut footprints: HashMap<&str, Option<Footprint>> = page_apps
            .iter()
            .map(|a| (a.app_id.as_str(), None))
            .collect();
        for (_, report) in &live {
            for info in &report.app_infos {
                if let Some(slot) = footprints.get_mut(info.app_id.as_str()) {
                    let f = slot.get_or_insert_with(Footprint::default);
                    f.servers += 1;
                    f.partitions += info.partition_num;
                    f.total += info.total_size;
                }
            }
        }
        let apps: Vec<AppRow> = page_apps
            .iter()
            .map(|a| {
                let f = footprints.get(a.app_id.as_str()).and_then(Option::as_ref);
                AppRow {
                    href: href("app", &a.app_id),
                    user: or_na(&a.user),
                    servers: f.map_or("n/a".into(), |f| f.servers.to_string()),
                    partitions: f.map_or("n/a".into(), |f| f.partitions.to_string()),
                    size: f.map_or("n/a".into(), |f| human_bytes(f.total)),
                    size_bytes: f.map_or(String::new(), |f| f.total.to_string()),
                    registered: time(a.registration_ms),
                    updated: ago(a.update_ms, now_ms),
                    id: a.app_id.clone(),
                }
            })
            .collect();

        let (memory_chart, throughput_chart) = charts(&samples, |_| true);
        #[derive(Serialize)]
        struct Page {
            cards: Vec<Card>,
            servers: Vec<ServerView>,
            server_pager: Pager,
            apps: Vec<AppRow>,
            app_pager: Pager,
            memory_chart: Value,
            throughput_chart: Value,
            interval: String,
        }
        let page = Page {
            cards,
            servers,
            server_pager,
            apps,
            app_pager,
            memory_chart,
            throughput_chart,
            interval: format!("{:?}", c.history().interval()),
        };
        d.page(StatusCode::OK, "cluster.html", "Cluster".into(), page)
    })
    .await
}

fn card(label: &'static str, n: usize, class: &'static str) -> Card {
    Card {
        label,
        value: n.to_string(),
        class,
    }
}

#[derive(Serialize)]
struct AppOnServer {
    id: String,
    href: String,
    partitions: i64,
    memory: String,
    local: String,
    hadoop: String,
    total: String,
}

#[derive(Serialize)]
struct DiskRow {
    mount: String,
    media: &'static str,
    status: &'static str,
    used: String,
    capacity: String,
}

async fn server(State(d): Dash, Path(id): Path<String>) -> Response {
    walk(move || {
        let c = &d.ctx.coordinator;
        let found = c
            .servers()
            .get_report(&id)
            .or_else(|| c.servers().lost().into_iter().find(|(n, _)| n.id == id));
        let Some((node, report)) = found else {
            tracing::info!(server_id = %id, "dashboard: unknown server");
            return d.not_found("Server", &id);
        };
        let samples = c.history().samples();
        let s = server_view(
            &node,
            &report,
            last_of(samples.last(), &id),
            crate::clock::now_ms(),
        );
        let disks = report
            .storage_info
            .iter()
            .map(|(mount, info)| DiskRow {
                mount: mount.clone(),
                media: disk_media(info),
                status: disk_status(info),
                used: human_bytes(info.used_bytes),
                capacity: human_bytes(info.capacity),
            })
            .collect::<Vec<_>>();
        let apps = report
            .app_infos
            .iter()
            .map(|a| AppOnServer {
                id: a.app_id.clone(),
                href: href("app", &a.app_id),
                partitions: a.partition_num,
                memory: human_bytes(a.memory_size),
                local: tier_size(a, a.local_total_size),
                hadoop: tier_size(a, a.hadoop_total_size),
                total: human_bytes(a.total_size),
            })
            .collect::<Vec<_>>();
        let (memory_chart, throughput_chart) = charts(&samples, |x| x.id == id);
        #[derive(Serialize)]
        struct Page {
            s: ServerView,
            disks: Vec<DiskRow>,
            apps: Vec<AppOnServer>,
            memory_chart: Value,
            throughput_chart: Value,
        }
        let page = Page {
            s,
            disks,
            apps,
            memory_chart,
            throughput_chart,
        };
        d.page(StatusCode::OK, "server.html", format!("Server {id}"), page)
    })
    .await
}

#[derive(Serialize)]
struct Link {
    id: String,
    href: String,
}

#[derive(Serialize)]
struct ShuffleRow {
    id: i32,
    partitions: i32,
    servers: Vec<Link>,
}

#[derive(Serialize)]
struct AppServerRow {
    id: String,
    href: String,
    assigned: String,
    partitions: String,
    memory: String,
    local: String,
    hadoop: String,
    total: String,
    total_bytes: String,
}

#[derive(Serialize)]
struct AppView {
    id: String,
    user: String,
    version: String,
    git_commit: String,
    registered: String,
    updated: String,
}

/// The app's storage figures on the app page: Java 0.10's `AppInfoVO` storage fields.
#[derive(Serialize)]
struct AppStorageView {
    servers: u64,
    partitions: String,
    memory: String,
    memory_bytes: i64,
    local: String,
    local_bytes: i64,
    local_files: String,
    remote: String,
    remote_bytes: i64,
    remote_files: String,
    size: String,
    size_bytes: String,
}

async fn app(State(d): Dash, Path(id): Path<String>) -> Response {
    walk(move || {
        let c = &d.ctx.coordinator;
        let Some(detail) = c.app_detail(&id) else {
            tracing::info!(app_id = %id, "dashboard: unknown application");
            return d.not_found("Application", &id);
        };
        let now_ms = crate::clock::now_ms();
        let link = |server: &str| Link {
            id: server.to_owned(),
            href: href("server", server),
        };
        // Servers that hold data of the app (heartbeats) or were assigned some of it.
        let mut rows: BTreeMap<String, AppServerRow> = BTreeMap::new();
        let mut sum = AppStorage::default();
        for (node, report) in c.servers().live_reports() {
            if let Some(info) = report.app_infos.iter().find(|a| a.app_id == id) {
                sum.add(info);
                rows.insert(
                    node.id.clone(),
                    AppServerRow {
                        href: href("server", &node.id),
                        assigned: "—".into(),
                        partitions: info.partition_num.to_string(),
                        memory: human_bytes(info.memory_size),
                        local: tier_size(info, info.local_total_size),
                        hadoop: tier_size(info, info.hadoop_total_size),
                        total: human_bytes(info.total_size),
                        total_bytes: info.total_size.to_string(),
                        id: node.id.clone(),
                    },
                );
            }
        }
        for (server, n) in &detail.assigned {
            let row = rows.entry(server.clone()).or_insert_with(|| AppServerRow {
                id: server.clone(),
                href: href("server", server),
                assigned: String::new(),
                partitions: "n/a".into(),
                memory: "n/a".into(),
                local: "n/a".into(),
                hadoop: "n/a".into(),
                total: "n/a".into(),
                total_bytes: String::new(),
            });
            row.assigned = n.to_string();
        }
        let a = &detail.snapshot;
        let page_app = AppView {
            id: a.app_id.clone(),
            user: or_na(&a.user),
            version: or_na(&a.version),
            git_commit: a.git_commit_id.clone(),
            registered: time(a.registration_ms),
            updated: ago(a.update_ms, now_ms),
        };
        // The app's figures summed over the servers, as `/api/app/appInfos` gives them; "n/a" when
        // no live server's heartbeat names the app.
        let reported = sum.servers > 0;
        let shown = |text: String| if reported { text } else { "n/a".into() };
        let storage = AppStorageView {
            servers: sum.servers,
            partitions: shown(sum.partition_num.to_string()),
            memory: shown(human_bytes(sum.memory_size)),
            memory_bytes: sum.memory_size,
            local: shown(summed_tier(&sum, sum.local_total_size)),
            local_bytes: sum.local_total_size,
            local_files: shown(file_count(sum.local_file_num, sum.local_total_size)),
            remote: shown(summed_tier(&sum, sum.hadoop_total_size)),
            remote_bytes: sum.hadoop_total_size,
            remote_files: shown(file_count(sum.hadoop_file_num, sum.hadoop_total_size)),
            size: shown(human_bytes(sum.total_size)),
            size_bytes: if reported {
                sum.total_size.to_string()
            } else {
                String::new()
            },
        };
        let shuffles = detail
            .shuffles
            .iter()
            .map(|s| ShuffleRow {
                id: s.shuffle_id,
                partitions: s.partitions,
                servers: s.servers.iter().map(|id| link(id)).collect(),
            })
            .collect::<Vec<_>>();
        #[derive(Serialize)]
        struct Page {
            a: AppView,
            storage: AppStorageView,
            shuffles: Vec<ShuffleRow>,
            servers: Vec<AppServerRow>,
        }
        let page = Page {
            a: page_app,
            storage,
            shuffles,
            servers: rows.into_values().collect(),
        };
        d.page(
            StatusCode::OK,
            "app.html",
            format!("Application {id}"),
            page,
        )
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tier_reads_na_when_the_tiers_do_not_account_for_the_total() {
        let mut info = proto::ApplicationInfo {
            memory_size: 100,
            total_size: 100,
            ..Default::default()
        };
        assert_eq!(
            tier_size(&info, info.local_total_size),
            "0 B",
            "all in memory"
        );
        info.memory_size = 0;
        assert_eq!(
            tier_size(&info, info.local_total_size),
            "n/a",
            "spilled, unsplit"
        );
        info.local_total_size = 60;
        info.hadoop_total_size = 40;
        assert_eq!(tier_size(&info, info.local_total_size), "60 B");
    }
}
