//! The dashboard as a person sees it: Spillway A runs the embedded coordinator, B heartbeats to
//! A, a client writes and reads shuffle data on both, and headless Chromium renders
//! `/dashboard`, a server page, an app page and a 404 page against that live cluster. The test
//! reads the rendered DOM (what is shown, not the HTML sent) and keeps screenshots in
//! `target/dashboard-screenshots/`.
//!
//! Chromium is required: without `/usr/bin/chromium` the test fails (tests/run-all.sh installs
//! it).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use spillway::proto::coordinator_server_client::CoordinatorServerClient;
use spillway::proto::{self, StatusCode};
use tonic::transport::Channel;

use common::{status_of, TestServer};

const CHROMIUM: &str = "/usr/bin/chromium";
const BEAT: Duration = Duration::from_millis(100);
const SAMPLE: Duration = Duration::from_millis(200);
const APP: &str = "app_dashboard_1";
/// An app id that would run script if the page did not escape it.
const EVIL_APP: &str = "<script>document.title='pwned'</script><b>x</b>";

/// Runs headless Chromium on `url` with a fresh profile: `--dump-dom` when `screenshot` is
/// `None` (returns the DOM after load), else writes the PNG and returns stdout.
fn chromium(url: &str, screenshot: Option<&Path>) -> String {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: the dashboard test needs headless Chromium; tests/run-all.sh \
         installs it (Debian package `chromium`)"
    );
    let profile = tempfile::TempDir::new().unwrap();
    let mut cmd = Command::new(CHROMIUM);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
    ])
    .arg(format!("--user-data-dir={}", profile.path().display()));
    match screenshot {
        None => {
            cmd.arg("--dump-dom");
        }
        Some(path) => {
            cmd.arg(format!("--screenshot={}", path.display()))
                .arg("--window-size=1280,1000");
        }
    }
    cmd.arg(url);
    let out = common::output_within(&mut cmd, Duration::from_secs(120));
    assert!(
        out.status.success(),
        "chromium failed on {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Chromium off the async runtime, so the servers keep serving while it loads the page.
async fn render(url: String) -> String {
    tokio::task::spawn_blocking(move || chromium(&url, None))
        .await
        .unwrap()
}

async fn screenshot(url: String, name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/dashboard-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    let p = path.clone();
    tokio::task::spawn_blocking(move || chromium(&url, Some(&p)))
        .await
        .unwrap();
    let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    assert!(len > 1000, "{} is empty ({len} bytes)", path.display());
    path
}

/// The value of `attr="…"` in the first element that also has `marker` (an attribute pair)
/// before it on the same tag.
fn attr_after(dom: &str, marker: &str, attr: &str) -> Option<String> {
    let at = dom.find(marker)?;
    let rest = &dom[at..];
    let key = format!("{attr}=\"");
    let start = rest.find(&key)? + key.len();
    let end = rest[start..].find('"')? + start;
    Some(rest[start..end].to_owned())
}

/// The text inside the element with the id `id` (no nested markup).
fn text_of(dom: &str, id: &str) -> String {
    let at = dom
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no element {id}"));
    let start = dom[at..].find('>').unwrap() + at + 1;
    let end = dom[start..].find('<').unwrap() + start;
    dom[start..end].to_owned()
}

fn points(dom: &str, series: &str) -> usize {
    attr_after(dom, &format!("data-name=\"{series}\""), "data-points")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no chart series {series:?} in the page"))
}

async fn coordinator_client(s: &TestServer) -> CoordinatorServerClient<Channel> {
    let channel = Channel::from_shared(format!("http://{}", s.running.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    CoordinatorServerClient::new(channel)
}

async fn register_app(coord: &mut CoordinatorServerClient<Channel>, app: &str, user: &str) {
    let resp = coord
        .register_application_info(proto::ApplicationInfoRequest {
            app_id: app.into(),
            user: user.into(),
            version: Some("0.10.0".into()),
            git_commit_id: Some("abc1234".into()),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(resp.status), StatusCode::Success);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_the_live_cluster_in_chromium() {
    let mut a = common::start(1, |c| {
        c.coordinator.enabled = true;
        c.coordinator.dashboard_sample_interval = SAMPLE;
        c.heartbeat_interval = BEAT;
    })
    .await;
    let quorum = vec![a.running.grpc_addr.to_string()];
    let mut b = common::start(1, |c| {
        c.coordinator_quorum = quorum;
        c.heartbeat_interval = BEAT;
    })
    .await;
    let coordinator = a.running.coordinator().expect("coordinator on").clone();
    let (ida, idb) = (a.running.server_id.clone(), b.running.server_id.clone());
    common::eventually("both servers registered", || {
        coordinator.servers().get(&ida).is_some() && coordinator.servers().get(&idb).is_some()
    })
    .await;
    // Two samples of both servers' counters before any traffic, so the next deltas cover it.
    common::eventually("counters sampled", || {
        coordinator.history().samples().len() >= 2
            && coordinator.history().last().is_some_and(|s| {
                s.servers.len() == 2 && s.servers.iter().all(|x| x.write_rate.is_some())
            })
    })
    .await;

    // Traffic as a Spark job makes it: the app registers with the coordinator, gets its
    // servers, writes to both, reports, and reads back.
    let mut coord = coordinator_client(&a).await;
    register_app(&mut coord, APP, "alice").await;
    register_app(&mut coord, EVIL_APP, "mallory<i>").await;
    let assigned = coord
        .get_shuffle_assignments(proto::GetShuffleServerRequest {
            application_id: APP.into(),
            shuffle_id: 7,
            partition_num: 4,
            partition_num_per_range: 1,
            data_replica: 1,
            assignment_shuffle_server_number: 2,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(assigned.status), StatusCode::Success);
    for server in [&mut a, &mut b] {
        common::register(&mut server.client, APP, 7, 0..4, false).await;
        let expected = common::write_shuffle(&mut server.client, APP, 7, 2, 4, 4, 32 << 10).await;
        common::verify_shuffle(&mut server.client, APP, 7, &expected).await;
    }
    // B spills its part to local files; A keeps its own in memory.
    common::finish(&mut b.client, APP, 7).await;
    common::eventually("write and read throughput sampled", || {
        let samples = coordinator.history().samples();
        let seen = |f: fn(&spillway::coordinator::dashboard::ServerSample) -> Option<f64>| {
            samples
                .iter()
                .any(|s| s.servers.iter().any(|x| f(x).is_some_and(|r| r > 0.0)))
        };
        seen(|x| x.write_rate) && seen(|x| x.read_rate)
    })
    .await;
    let reported = |id: &str| {
        coordinator
            .servers()
            .get_report(id)
            .and_then(|(_, r)| r.app_infos.iter().find(|i| i.app_id == APP).cloned())
    };
    common::eventually("B reports its spill, A its memory", || {
        reported(&idb).is_some_and(|i| i.memory_size == 0 && i.local_total_size > 0)
            && reported(&ida).is_some_and(|i| i.memory_size > 0 && i.total_size > 0)
    })
    .await;

    let base = format!("http://{}", a.running.http_addr);
    // Enough sampler ticks for a line worth looking at.
    common::eventually("six samples", || coordinator.history().samples().len() >= 6).await;
    let samples_before = coordinator.history().samples().len();
    let used_before = coordinator.servers().get(&ida).unwrap().used_memory;
    let cluster = render(format!("{base}/dashboard")).await;
    let node_a = coordinator.servers().get(&ida).unwrap();

    // Servers: ids, status, tags, memory as their heartbeats report it.
    for id in [&ida, &idb] {
        assert!(
            cluster.contains(&format!("data-server=\"{id}\"")),
            "server {id} missing"
        );
    }
    assert!(cluster.contains(">ACTIVE<"));
    assert!(cluster.contains("ss_v5"), "tags shown");
    let row = format!("data-server=\"{ida}\"");
    let capacity: i64 = attr_after(&cluster, &row, "data-capacity")
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        capacity,
        node_a.used_memory + node_a.available_memory,
        "capacity = used + available, as Java's totalMemory"
    );
    assert_eq!(capacity, 64 << 20, "A's memory_store.capacity");
    let used: i64 = attr_after(&cluster, &row, "data-used")
        .unwrap()
        .parse()
        .unwrap();
    let (lo, hi) = (
        used_before.min(node_a.used_memory),
        used_before.max(node_a.used_memory),
    );
    assert!(
        (lo..=hi).contains(&used) && used > 0,
        "used {used} not within the heartbeats' {lo}..={hi}"
    );

    // Apps with users and sizes; the hostile id is text, not markup.
    assert!(cluster.contains(&format!("data-app=\"{APP}\"")));
    assert!(cluster.contains(">alice<"));
    let size: i64 = attr_after(&cluster, &format!("data-app=\"{APP}\""), "data-bytes")
        .unwrap()
        .parse()
        .unwrap();
    assert!(size > 0, "app size {size}");
    assert!(
        cluster.contains("&lt;script&gt;document.title='pwned'&lt;/script&gt;&lt;b&gt;x&lt;/b&gt;"),
        "the hostile app id is shown as text"
    );
    assert!(
        !cluster.contains("<script>document.title"),
        "no injected script"
    );
    assert!(!cluster.contains("<b>x</b>"), "no injected markup");
    assert!(!cluster.contains("<title>pwned"), "the script did not run");
    assert!(cluster.contains("mallory&lt;i&gt;"));

    // Charts: at least one point per sample taken before the page was rendered; throughput
    // points are real deltas.
    for series in ["used", "capacity"] {
        let n = points(&cluster, series);
        assert!(n >= samples_before, "{series}: {n} < {samples_before}");
    }
    assert!(points(&cluster, "write") >= 1);
    assert!(points(&cluster, "read") >= 1);

    // The server page.
    let server_url = format!("{base}/dashboard/server/{ida}");
    let server_page = render(server_url.clone()).await;
    assert!(server_page.contains(&format!("<span id=\"server-id\">{ida}</span>")));
    assert!(server_page.contains("id=\"server-status\">ACTIVE<"));
    let disk = a.disks[0].path().display().to_string();
    assert!(server_page.contains(&disk), "disk {disk} listed");
    assert!(
        server_page.contains(&format!(">{APP}</a>")),
        "app on the server"
    );
    assert!(points(&server_page, "used") >= samples_before);

    // The app page: user, shuffle, size, servers.
    let app_url = format!("{base}/dashboard/app/{APP}");
    let app_page = render(app_url.clone()).await;
    assert!(app_page.contains(&format!("<span id=\"app-id\">{APP}</span>")));
    assert!(app_page.contains("<td id=\"app-user\">alice</td>"));
    assert!(app_page.contains("data-shuffle=\"7\""), "shuffle 7 listed");
    // Storage summed over both servers, as `/api/app/appInfos` gives it.
    let bytes_of = |id: &str| -> i64 {
        attr_after(&app_page, &format!("id=\"{id}\""), "data-bytes")
            .unwrap_or_else(|| panic!("{id} missing"))
            .parse()
            .unwrap()
    };
    let (ra, rb) = (reported(&ida).unwrap(), reported(&idb).unwrap());
    assert_eq!(text_of(&app_page, "app-partitions"), "8", "4 per server");
    assert_eq!(bytes_of("app-memory"), ra.memory_size, "A's memory only");
    assert_eq!(bytes_of("app-local"), rb.local_total_size, "B's spill only");
    assert_eq!(bytes_of("app-remote"), 0);
    assert_eq!(bytes_of("app-size"), ra.total_size + rb.total_size);
    assert_eq!(
        text_of(&app_page, "app-local-files"),
        "not reported",
        "servers leave the count unset; 0 would be a made-up value"
    );
    assert_eq!(text_of(&app_page, "app-remote-files"), "0");
    let rest: serde_json::Value = serde_json::from_str(
        &reqwest::get(format!("{base}/api/app/appInfos"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    )
    .unwrap();
    let info = rest["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["appId"] == APP)
        .unwrap();
    for (key, id) in [
        ("memorySize", "app-memory"),
        ("localTotalSize", "app-local"),
        ("hadoopTotalSize", "app-remote"),
        ("totalSize", "app-size"),
    ] {
        assert_eq!(info[key].as_i64().unwrap(), bytes_of(id), "{key} = {id}");
    }
    for id in [&ida, &idb] {
        assert!(
            app_page.contains(&format!(">{id}</a>")),
            "{id} on the app page"
        );
    }

    // The hostile app's own page, reached by its percent-encoded link.
    let evil = percent_encoding::utf8_percent_encode(EVIL_APP, percent_encoding::NON_ALPHANUMERIC);
    let evil_page = render(format!("{base}/dashboard/app/{evil}")).await;
    assert!(evil_page.contains("mallory&lt;i&gt;"));
    assert!(!evil_page.contains("<script>document.title"));

    // Unknown ids: a 404 page that says so.
    let resp = reqwest::get(format!("{base}/dashboard/app/no_such_app"))
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 404);
    let missing = render(format!("{base}/dashboard/app/no_such_app")).await;
    assert!(missing.contains("Application not found") && missing.contains("no_such_app"));
    let resp = reqwest::get(format!("{base}/dashboard/server/10.9.9.9-1"))
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 404);
    assert!(resp.text().await.unwrap().contains("Server not found"));

    // Screenshots, kept as artifacts.
    screenshot(format!("{base}/dashboard"), "cluster.png").await;
    screenshot(server_url, "server.png").await;
    screenshot(app_url, "app.png").await;

    b.running.shutdown().await;
    a.running.shutdown().await;
}

/// A shuffle server without the coordinator has no dashboard, as it has no REST API.
#[tokio::test]
async fn no_dashboard_without_the_coordinator() {
    let s = common::start(1, |_| {}).await;
    let resp = reqwest::get(format!("http://{}/dashboard", s.running.http_addr))
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 404);
    s.running.shutdown().await;
}

/// A heartbeat of a made-up server `n`: enough for the registry to list it.
fn fake_beat(n: usize) -> proto::ShuffleServerHeartBeatRequest {
    let ip = format!("10.7.{}.{}", n / 250, n % 250 + 1);
    proto::ShuffleServerHeartBeatRequest {
        server_id: Some(proto::ShuffleServerId {
            id: format!("{ip}-19999"),
            ip,
            port: 19999,
            netty_port: -1,
            jetty_port: 19998,
        }),
        available_memory: 1 << 30,
        tags: vec!["ss_v5".into(), "GRPC".into()],
        ..Default::default()
    }
}

/// The "Rows a–b of n · page k of m" line of a table's pager, without its links.
fn pager(dom: &str, id: &str) -> String {
    text_of(dom, id).trim_end_matches([' ', '·']).to_owned()
}

/// The rows of the table `id` in a rendered DOM (`data-server` / `data-app` rows).
fn rows(dom: &str, marker: &str) -> usize {
    dom.matches(&format!("{marker}=\"")).count()
}

/// At cluster scale the cluster page would list every server and app (5 MB and 11 s in
/// Chromium at 2,000 servers and 10,000 apps), so each table shows 100 rows with links to the
/// rest; paging one table keeps the other's page, and a page past the end shows the last.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_page_pages_its_tables_in_chromium() {
    let a = common::start(1, |c| {
        c.coordinator.enabled = true;
        c.heartbeat_interval = BEAT;
    })
    .await;
    let coordinator = a.running.coordinator().expect("coordinator on").clone();
    let own = a.running.server_id.clone();
    common::eventually("the server registered", || {
        coordinator.servers().get(&own).is_some()
    })
    .await;
    let mut coord = coordinator_client(&a).await;
    for n in 0..130 {
        coord.heartbeat(fake_beat(n)).await.unwrap();
    }
    for n in 0..250 {
        register_app(&mut coord, &format!("app_page_{n:03}"), "pat").await;
    }
    let base = format!("http://{}", a.running.http_addr);

    let first = render(format!("{base}/dashboard")).await;
    assert_eq!(rows(&first, "data-server"), 100);
    assert_eq!(rows(&first, "data-app"), 100);
    assert_eq!(
        pager(&first, "server-pager"),
        "Rows 1–100 of 131 · page 1 of 2"
    );
    assert_eq!(
        pager(&first, "app-pager"),
        "Rows 1–100 of 250 · page 1 of 3"
    );
    assert!(first.contains("data-app=\"app_page_099\"") && !first.contains("app_page_100"));
    assert!(
        first.contains("href=\"/dashboard?server_page=1&amp;app_page=2\""),
        "the apps' next page keeps the servers' page"
    );
    assert!(first.contains("href=\"/dashboard?server_page=2&amp;app_page=1\""));

    let second = render(format!("{base}/dashboard?server_page=2&app_page=2")).await;
    assert_eq!(rows(&second, "data-server"), 31);
    assert_eq!(rows(&second, "data-app"), 100);
    assert_eq!(
        pager(&second, "app-pager"),
        "Rows 101–200 of 250 · page 2 of 3"
    );
    assert!(second.contains("data-app=\"app_page_100\"") && !second.contains("app_page_099\""));
    assert!(
        second.contains("data-server=\"10.7.0.99-19999\""),
        "sorted by id"
    );

    // Past the end: the last page, its links built from the clamped pages.
    let past = render(format!("{base}/dashboard?server_page=7&app_page=9")).await;
    assert_eq!(rows(&past, "data-app"), 50);
    assert_eq!(
        pager(&past, "app-pager"),
        "Rows 201–250 of 250 · page 3 of 3"
    );
    assert!(past.contains("data-app=\"app_page_249\""));
    assert!(past.contains("href=\"/dashboard?server_page=2&amp;app_page=2\""));
    screenshot(
        format!("{base}/dashboard?server_page=2&app_page=3"),
        "cluster-paged.png",
    )
    .await;
    a.running.shutdown().await;
}
