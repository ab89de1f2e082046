//! One app as curve 5 drives it: `requireBuffer` (retried on `NO_BUFFER`, with the wait from
//! the first refusal until the grant measured), `sendShuffleData`, `reportShuffleResult` and
//! `getShuffleResult` with the returned bitmap decoded, each call timed into [`Rpcs`].

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use hdrhistogram::Histogram;
use tonic::transport::Channel;

use super::grpc_client;
use spillway::proto::shuffle_server_client::ShuffleServerClient;
use spillway::proto::{self, StatusCode};

/// The four calls a map task and its reducer make per send, in column order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Rpc {
    Require,
    Send,
    Report,
    Result,
}

impl Rpc {
    pub(super) const ALL: [Rpc; 4] = [Rpc::Require, Rpc::Send, Rpc::Report, Rpc::Result];

    pub(super) fn name(self) -> &'static str {
        match self {
            Rpc::Require => "requireBuffer",
            Rpc::Send => "sendShuffleData",
            Rpc::Report => "reportShuffleResult",
            Rpc::Result => "getShuffleResult",
        }
    }
}

/// Client-side latency (µs) of each [`Rpc`]; one per worker, merged at the end.
pub(super) struct Rpcs(Vec<Histogram<u64>>);

impl Default for Rpcs {
    fn default() -> Self {
        Rpcs(
            Rpc::ALL
                .iter()
                .map(|_| {
                    Histogram::new_with_bounds(1, 3_600_000_000, 3)
                        .expect("1 µs to 1 h at 3 digits is a valid range")
                })
                .collect(),
        )
    }
}

impl Rpcs {
    fn record(&mut self, rpc: Rpc, start: Instant) {
        let us = start.elapsed().as_micros().max(1) as u64;
        self.0[rpc as usize].saturating_record(us);
    }

    /// Adds another worker's histograms.
    pub(super) fn merge(&mut self, other: &Rpcs) {
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            // Same bounds on both sides: the add cannot fail.
            let _ = a.add(b);
        }
    }

    /// The `q` quantile of `rpc` in ms.
    pub(super) fn ms(&self, rpc: Rpc, q: f64) -> f64 {
        self.0[rpc as usize].value_at_quantile(q) as f64 / 1e3
    }

    /// The server's own view: every call's `executionTimeUs` in its RPC audit log (Java's
    /// layout, `cmd=<rpc>\t…\texecutionTimeUs=<µs>\t…`), from the handler's start to its
    /// answer. The log is written by a thread of its own within milliseconds; callers read it
    /// after their calls were answered.
    pub(super) fn from_audit_log(text: &str) -> Rpcs {
        let mut rpcs = Rpcs::default();
        for line in text.lines() {
            let field = |key: &str| {
                line.split('\t')
                    .find_map(|f| f.split_once(key).map(|(_, v)| v))
            };
            let Some(rpc) =
                field("cmd=").and_then(|cmd| Rpc::ALL.into_iter().find(|r| r.name() == cmd))
            else {
                continue;
            };
            if let Some(us) = field("executionTimeUs=").and_then(|v| v.parse::<u64>().ok()) {
                rpcs.0[rpc as usize].saturating_record(us.max(1));
            }
        }
        rpcs
    }

    /// Calls of `rpc` recorded.
    pub(super) fn count(&self, rpc: Rpc) -> u64 {
        self.0[rpc as usize].len()
    }
}

/// What one granted `requireBuffer` cost the app.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Grant {
    /// The ticket.
    pub ticket: i64,
    /// `NO_BUFFER` answers before the grant.
    pub refusals: u32,
    /// From the start of the first refused call until the grant arrived (zero when the first
    /// call was granted): the time the app could not write.
    pub waited: Duration,
    /// From the start of the first call until the grant arrived: `waited` plus what the
    /// server held the calls (it may wait for room before it answers).
    pub took: Duration,
}

/// One app's client (a clone of a shared channel).
pub(super) struct AppWriter {
    grpc: ShuffleServerClient<Channel>,
    pub app: String,
    pub shuffle: i32,
}

fn check(op: &str, status: i32, msg: &str) -> anyhow::Result<()> {
    match StatusCode::try_from(status) {
        Ok(StatusCode::Success) => Ok(()),
        Ok(other) => bail!("{op}: {other:?} {msg}"),
        Err(_) => bail!("{op}: unknown status {status} {msg}"),
    }
}

impl AppWriter {
    pub(super) fn new(channel: Channel, app: &str, shuffle: i32) -> AppWriter {
        AppWriter {
            grpc: grpc_client(channel),
            app: app.to_owned(),
            shuffle,
        }
    }

    /// `requireBuffer` until granted: after a `NO_BUFFER` the app sleeps `backoff`, doubling
    /// up to `backoff × 32` (the load generator's client). Fails when the app got nothing
    /// for longer than `starve`: a starved app fails the run instead of hanging it.
    pub(super) async fn require(
        &mut self,
        size: i32,
        partitions: &[i32],
        backoff: Duration,
        starve: Duration,
        rpcs: &mut Rpcs,
    ) -> anyhow::Result<Grant> {
        let mut grant = Grant::default();
        let mut first_refused: Option<Instant> = None;
        let first_call = Instant::now();
        let mut sleep = backoff;
        loop {
            let start = Instant::now();
            let call = self.grpc.require_buffer(proto::RequireBufferRequest {
                require_size: size,
                app_id: self.app.clone(),
                shuffle_id: self.shuffle,
                partition_ids: partitions.to_vec(),
                ..Default::default()
            });
            let r = tokio::time::timeout(starve, call)
                .await
                .with_context(|| {
                    format!("app {}: requireBuffer unanswered for {starve:?}", self.app)
                })??
                .into_inner();
            rpcs.record(Rpc::Require, start);
            match StatusCode::try_from(r.status) {
                Ok(StatusCode::Success) => {
                    grant.ticket = r.require_buffer_id;
                    grant.waited = first_refused.map_or(Duration::ZERO, |t| t.elapsed());
                    grant.took = first_call.elapsed();
                    return Ok(grant);
                }
                Ok(StatusCode::NoBuffer | StatusCode::NoBufferForHugePartition) => {
                    grant.refusals += 1;
                    let since = *first_refused.get_or_insert(start);
                    if since.elapsed() > starve {
                        bail!(
                            "app {} starved: requireBuffer refused {} times over {:.1} s (bound {} s)",
                            self.app,
                            grant.refusals,
                            since.elapsed().as_secs_f64(),
                            starve.as_secs()
                        );
                    }
                    tokio::time::sleep(sleep).await;
                    sleep = (sleep * 2).min(backoff * 32);
                }
                _ => {
                    check("requireBuffer", r.status, &r.ret_msg)?;
                    bail!("requireBuffer: status {} {}", r.status, r.ret_msg);
                }
            }
        }
    }

    /// `sendShuffleData` of `blocks` (`(partition, blocks)`) under `ticket`.
    pub(super) async fn send(
        &mut self,
        ticket: i64,
        blocks: Vec<(i32, Vec<proto::ShuffleBlock>)>,
        rpcs: &mut Rpcs,
    ) -> anyhow::Result<()> {
        let start = Instant::now();
        let r = self
            .grpc
            .send_shuffle_data(proto::SendShuffleDataRequest {
                app_id: self.app.clone(),
                shuffle_id: self.shuffle,
                require_buffer_id: ticket,
                shuffle_data: blocks
                    .into_iter()
                    .map(|(partition_id, block)| proto::ShuffleData {
                        partition_id,
                        block,
                    })
                    .collect(),
                ..Default::default()
            })
            .await?
            .into_inner();
        rpcs.record(Rpc::Send, start);
        check("sendShuffleData", r.status, &r.ret_msg)
    }

    /// `reportShuffleResult` of one map task's ids, `(partition, ids)`.
    pub(super) async fn report(
        &mut self,
        task: i64,
        ids: Vec<(i32, Vec<i64>)>,
        rpcs: &mut Rpcs,
    ) -> anyhow::Result<()> {
        let start = Instant::now();
        let r = self
            .grpc
            .report_shuffle_result(crate::client::report_request(
                &self.app,
                self.shuffle,
                task,
                ids,
            ))
            .await?
            .into_inner();
        rpcs.record(Rpc::Report, start);
        check("reportShuffleResult", r.status, &r.ret_msg)
    }

    /// `getShuffleResult` of `partition`: the reported ids, sorted.
    pub(super) async fn result(
        &mut self,
        partition: i32,
        rpcs: Option<&mut Rpcs>,
    ) -> anyhow::Result<Vec<u64>> {
        let start = Instant::now();
        let r = self
            .grpc
            .get_shuffle_result(proto::GetShuffleResultRequest {
                app_id: self.app.clone(),
                shuffle_id: self.shuffle,
                partition_id: partition,
                block_id_layout: None,
            })
            .await?
            .into_inner();
        if let Some(rpcs) = rpcs {
            rpcs.record(Rpc::Result, start);
        }
        check("getShuffleResult", r.status, &r.ret_msg)?;
        let ids = spillway::codec::bitmap::decode(&r.serialized_bitmap).with_context(|| {
            format!(
                "getShuffleResult of {} partition {partition}: bitmap",
                self.app
            )
        })?;
        Ok(ids.iter().collect())
    }
}
