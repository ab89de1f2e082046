//! The sampler: once per `coordinator.dashboard_sample_interval`, one [`Sample`] of every live
//! server into the coordinator's [`History`](super::history::History).
//!
//! Memory comes from the registry (the servers' last heartbeats). Throughput comes from each
//! server's own monotonic byte counters, `total_received_data` and `total_read_data`, read from
//! its HTTP port (`GET /metrics/server?name[]=…`, the JSON every Uniffle server and Spillway
//! serve; the port is the heartbeat's `jetty_port`, sent by 0.10 servers). That is the only true
//! source the coordinator can reach for every server, local or remote, Java or Spillway: the
//! heartbeat carries no counters, and the per-app sizes it does carry shrink when apps are
//! purged, so their deltas are not traffic. Rate = counter delta / time between the two reads;
//! a server without an HTTP port, a failed fetch or a counter that went backwards (a restart)
//! gives no rate for that sample, shown as a gap, never as 0.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::history::{Sample, ServerSample};
use crate::coordinator::registry::ServerNode;
use crate::coordinator::Coordinator;

/// Longest wait for one server's counters; a slow server loses its rate for that sample
/// instead of delaying the others'.
const FETCH_TIMEOUT: Duration = Duration::from_secs(3);

/// Counter fetches in flight at once: a cluster of hundreds of servers is read in waves
/// rather than with hundreds of connections per sample. Each reading carries its own time, so
/// the wait does not skew the rates.
const MAX_FETCHES: usize = 32;

/// The counters a throughput chart is derived from.
const WRITE_COUNTER: &str = "total_received_data";
const READ_COUNTER: &str = "total_read_data";

/// One reading of a server's counters.
#[derive(Debug, Clone, Copy)]
struct Reading {
    at: Instant,
    received: f64,
    read: f64,
}

/// Starts the sampler on `tracker`; it ends when `cancel` fires.
pub fn spawn(coordinator: Arc<Coordinator>, cancel: CancellationToken, tracker: &TaskTracker) {
    let client = match reqwest::Client::builder().timeout(FETCH_TIMEOUT).build() {
        Ok(c) => Some(c),
        Err(e) => {
            tracing::warn!(error = %e, "dashboard: no HTTP client; throughput charts stay empty");
            None
        }
    };
    let previous: Arc<Mutex<HashMap<String, Reading>>> = Arc::default();
    let interval = coordinator.history().interval();
    crate::periodic::periodic(tracker, interval, cancel, move || {
        let coordinator = Arc::clone(&coordinator);
        let client = client.clone();
        let previous = Arc::clone(&previous);
        async move {
            let servers = coordinator.servers().live();
            let readings = match &client {
                Some(client) => fetch_all(client, &servers).await,
                None => HashMap::new(),
            };
            let sample = {
                let mut previous = previous.lock();
                let sample = build_sample(&servers, &readings, &previous);
                *previous = readings;
                sample
            };
            coordinator.history().push(sample);
        }
    });
}

/// The sample of `servers` given this round's counter readings and the previous round's.
fn build_sample(
    servers: &[ServerNode],
    now: &HashMap<String, Reading>,
    before: &HashMap<String, Reading>,
) -> Sample {
    let servers = servers
        .iter()
        .map(|s| {
            let pair = now.get(&s.id).zip(before.get(&s.id));
            let rate = |pick: fn(&Reading) -> f64| {
                pair.and_then(|(now, before)| {
                    let secs = now.at.saturating_duration_since(before.at).as_secs_f64();
                    let delta = pick(now) - pick(before);
                    (secs > 0.0 && delta >= 0.0).then(|| delta / secs)
                })
            };
            ServerSample {
                id: s.id.clone(),
                used_memory: s.used_memory,
                capacity: s.used_memory.saturating_add(s.available_memory),
                write_rate: rate(|r| r.received),
                read_rate: rate(|r| r.read),
            }
        })
        .collect();
    Sample {
        at_ms: crate::clock::now_ms(),
        servers,
    }
}

/// Reads every server's counters, [`MAX_FETCHES`] at a time; servers without an HTTP port or
/// that fail are left out.
async fn fetch_all(client: &reqwest::Client, servers: &[ServerNode]) -> HashMap<String, Reading> {
    let permits = Arc::new(tokio::sync::Semaphore::new(MAX_FETCHES));
    let mut tasks = JoinSet::new();
    for s in servers.iter().filter(|s| s.jetty_port > 0) {
        let url = format!(
            "http://{}:{}/metrics/server?name[]={WRITE_COUNTER}&name[]={READ_COUNTER}",
            s.ip, s.jetty_port
        );
        let (client, id, permits) = (client.clone(), s.id.clone(), Arc::clone(&permits));
        tasks.spawn(async move {
            // The semaphore is never closed, so a permit always comes.
            let _permit = permits.acquire_owned().await;
            (id, fetch(&client, &url).await)
        });
    }
    let mut readings = HashMap::new();
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((id, Ok(reading))) => {
                readings.insert(id, reading);
            }
            Ok((id, Err(e))) => {
                tracing::debug!(server_id = %id, error = %e, "dashboard: counters not read");
            }
            Err(e) => tracing::warn!(error = %e, "dashboard: counter fetch task failed"),
        }
    }
    readings
}

async fn fetch(client: &reqwest::Client, url: &str) -> Result<Reading, String> {
    let resp = client.get(url).send().await.map_err(|e| e.to_string())?;
    if !resp.status().is_success() {
        return Err(format!("HTTP {}", resp.status()));
    }
    let text = resp.bytes().await.map_err(|e| e.to_string())?;
    let body: serde_json::Value = serde_json::from_slice(&text).map_err(|e| e.to_string())?;
    let at = Instant::now();
    Ok(Reading {
        at,
        received: counter(&body, WRITE_COUNTER).ok_or("no total_received_data")?,
        read: counter(&body, READ_COUNTER).ok_or("no total_read_data")?,
    })
}

/// The sum of `name`'s samples in a `/metrics/{type}` JSON answer (Java labels each counter
/// with the server's tags, so one name may have several samples).
fn counter(body: &serde_json::Value, name: &str) -> Option<f64> {
    let samples = body.get("metrics")?.as_array()?;
    let values: Vec<f64> = samples
        .iter()
        .filter(|m| m.get("name").and_then(|n| n.as_str()) == Some(name))
        .filter_map(|m| m.get("value").and_then(|v| v.as_f64()))
        .collect();
    (!values.is_empty()).then(|| values.iter().sum())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::ServerStatus;

    fn node(id: &str, used: i64, available: i64) -> ServerNode {
        ServerNode {
            id: id.into(),
            ip: "127.0.0.1".into(),
            grpc_port: 1,
            netty_port: 0,
            jetty_port: 2,
            tags: Default::default(),
            status: ServerStatus::Active,
            available_memory: available,
            used_memory: used,
            last_seen: Instant::now(),
        }
    }

    /// 80 servers on one slow counter endpoint: every reading arrives, and never more than
    /// `MAX_FETCHES` requests are open at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn fetches_are_capped_and_all_arrive() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let (open, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (o, p) = (Arc::clone(&open), Arc::clone(&peak));
        let app = axum::Router::new().route(
            "/metrics/server",
            axum::routing::get(move || {
                let (o, p) = (Arc::clone(&o), Arc::clone(&p));
                async move {
                    let now = o.fetch_add(1, Ordering::SeqCst) + 1;
                    p.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    o.fetch_sub(1, Ordering::SeqCst);
                    axum::Json(serde_json::json!({"metrics": [
                        {"name": WRITE_COUNTER, "value": 1.0},
                        {"name": READ_COUNTER, "value": 2.0},
                    ]}))
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let servers: Vec<ServerNode> = (0..80)
            .map(|i| ServerNode {
                jetty_port: i32::from(port),
                ..node(&format!("s{i}"), 0, 0)
            })
            .collect();
        let client = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .build()
            .unwrap();
        let readings = fetch_all(&client, &servers).await;
        assert_eq!(readings.len(), 80);
        let peak = peak.load(Ordering::SeqCst);
        assert!((2..=MAX_FETCHES).contains(&peak), "peak {peak}");
    }

    #[test]
    fn counters_sum_every_labelled_sample_and_missing_ones_are_none() {
        let body = serde_json::json!({"metrics": [
            {"name": "total_received_data", "labelNames": ["tags"], "labelValues": ["a"], "value": 10.0},
            {"name": "total_received_data", "labelNames": ["tags"], "labelValues": ["b"], "value": 5.0},
            {"name": "total_read_data", "labelNames": [], "labelValues": [], "value": 7.0},
        ], "timeStamp": 0});
        assert_eq!(counter(&body, WRITE_COUNTER), Some(15.0));
        assert_eq!(counter(&body, READ_COUNTER), Some(7.0));
        assert_eq!(counter(&body, "nope"), None);
        assert_eq!(counter(&serde_json::json!({}), READ_COUNTER), None);
    }

    #[tokio::test(start_paused = true)]
    async fn rates_are_deltas_over_time_and_unknown_without_two_good_readings() {
        let t0 = Instant::now();
        let reading = |at, received, read| Reading { at, received, read };
        let servers = [node("a", 30, 70), node("b", 1, 1), node("c", 0, 0)];
        let before = HashMap::from([
            ("a".to_string(), reading(t0, 1000.0, 0.0)),
            ("b".to_string(), reading(t0, 500.0, 500.0)),
        ]);
        let t1 = t0 + Duration::from_secs(10);
        let now = HashMap::from([
            ("a".to_string(), reading(t1, 3000.0, 100.0)),
            // b restarted: its counters went back to near zero.
            ("b".to_string(), reading(t1, 10.0, 10.0)),
            ("c".to_string(), reading(t1, 1.0, 1.0)),
        ]);
        let sample = build_sample(&servers, &now, &before);
        let a = &sample.servers[0];
        assert_eq!((a.used_memory, a.capacity), (30, 100));
        assert_eq!((a.write_rate, a.read_rate), (Some(200.0), Some(10.0)));
        assert_eq!(
            (sample.servers[1].write_rate, sample.servers[1].read_rate),
            (None, None)
        );
        assert_eq!(sample.servers[2].write_rate, None, "first reading");
    }
}
