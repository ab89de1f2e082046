//! The two phases of a run against one server: `concurrency` map tasks write the shuffle
//! (requireBuffer, send, report, commit), then `concurrency` readers read every partition the
//! way the Java client does (result bitmap, memory by cursor, index, data ranges) and check
//! every block's id, CRC and bytes against what was written.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use parking_lot::Mutex;
use tokio::task::JoinSet;
use tonic::transport::Channel;

use super::client::{channel, Client, Latencies, ReadBlock, Transport};
use super::payload::{app_key, Payloads, Shape};
use spillway::codec::bitmap;
use spillway::proto;
use spillway::store::index::IndexEntry;

/// Where the server listens.
#[derive(Clone, Copy, Debug)]
pub struct Target {
    /// gRPC address.
    pub grpc: SocketAddr,
    /// Netty address (needed for `--transport netty`).
    pub netty: Option<SocketAddr>,
}

/// What one run does.
#[derive(Clone, Debug)]
pub struct Workload {
    /// The shuffle written.
    pub shape: Shape,
    /// App id (fresh per run).
    pub app: String,
    /// Shuffle id.
    pub shuffle: i32,
    /// Bytes per send request (blocks of several partitions, as the client's buffers fill).
    pub request_bytes: usize,
    /// Map tasks writing at once, and partitions read at once.
    pub concurrency: usize,
    /// gRPC connections shared by the workers (Netty: one connection per worker).
    pub grpc_connections: usize,
    /// Bytes per read request (memory `readBufferSize`, local data range).
    pub read_size: usize,
    /// First back-off after `NO_BUFFER` (doubles up to 32×).
    pub backoff: Duration,
    /// Which plane carries data.
    pub transport: Transport,
    /// `registerShuffle.remoteStorage.path` (an HDFS URL or an `s3a://` bucket), so a `*_HDFS`
    /// server may spill the app there; `None`: the app has no remote storage.
    pub remote_storage: Option<String>,
}

/// The outcome of one phase.
pub struct Phase {
    /// Payload bytes moved.
    pub bytes: u64,
    /// Wall time of the phase.
    pub elapsed: Duration,
    /// Every worker's latencies, merged.
    pub latencies: Latencies,
    /// `NO_BUFFER` answers seen.
    pub no_buffer: u64,
}

impl Phase {
    /// Payload GB/s (10^9 bytes).
    pub fn gb_per_s(&self) -> f64 {
        self.bytes as f64 / self.elapsed.as_secs_f64().max(1e-9) / 1e9
    }
}

/// What the read phase found.
#[derive(Default, Debug)]
pub struct Verification {
    /// Distinct blocks read back and checked.
    pub blocks: u64,
    /// Of which read from memory.
    pub from_memory: u64,
    /// Of which read from the extra source (HDFS), not through the server.
    pub from_extra: u64,
    /// Blocks read twice (moved from memory to a file between the two reads; not an error).
    pub duplicates: u64,
    /// Blocks written but never read back.
    pub lost: u64,
    /// Blocks with a wrong CRC, wrong bytes or an id that was never written.
    pub corrupt: u64,
    /// Partitions whose result bitmap differs from the ids written.
    pub bad_results: u64,
    /// The first problems, for the report.
    pub problems: Vec<String>,
}

impl Verification {
    /// True when everything written came back intact.
    pub fn ok(&self) -> bool {
        self.lost == 0 && self.corrupt == 0 && self.bad_results == 0 && self.problems.is_empty()
    }

    fn problem(&mut self, p: String) {
        if self.problems.len() < 20 {
            self.problems.push(p);
        }
    }

    fn merge(&mut self, o: Verification) {
        self.blocks += o.blocks;
        self.from_memory += o.from_memory;
        self.from_extra += o.from_extra;
        self.duplicates += o.duplicates;
        self.lost += o.lost;
        self.corrupt += o.corrupt;
        self.bad_results += o.bad_results;
        for p in o.problems {
            self.problem(p);
        }
    }
}

async fn channels(target: &Target, n: usize) -> anyhow::Result<Vec<Channel>> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n.max(1) {
        out.push(channel(target.grpc).await?);
    }
    Ok(out)
}

async fn client(
    target: &Target,
    w: &Workload,
    channels: &[Channel],
    i: usize,
    latencies: &Arc<Mutex<Latencies>>,
) -> anyhow::Result<Client> {
    let netty = match w.transport {
        Transport::Grpc => None,
        Transport::Netty => Some(
            target
                .netty
                .context("--transport netty needs the server's Netty address")?,
        ),
    };
    let channel = channels[i % channels.len()].clone();
    Client::new(channel, netty, &w.app, w.shuffle, Arc::clone(latencies)).await
}

/// A client for one control call (its latencies are not reported).
async fn control(target: &Target, w: &Workload) -> anyhow::Result<Client> {
    let chans = channels(target, 1).await?;
    client(target, w, &chans, 0, &Arc::default()).await
}

/// Runs `work(client)` on `w.concurrency` workers and merges what they measured.
async fn workers<F, Fut, T>(
    target: &Target,
    w: &Workload,
    work: F,
) -> anyhow::Result<(Latencies, u64, Vec<T>)>
where
    F: Fn(Client) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = anyhow::Result<(Client, T)>> + Send,
    T: Send + 'static,
{
    let chans = channels(target, w.grpc_connections).await?;
    let latencies = Arc::new(Mutex::new(Latencies::default()));
    let mut set = JoinSet::new();
    for i in 0..w.concurrency.max(1) {
        let c = client(target, w, &chans, i, &latencies).await?;
        let work = work.clone();
        set.spawn(async move { work(c).await });
    }
    let mut no_buffer = 0;
    let mut outs = Vec::new();
    while let Some(joined) = set.join_next().await {
        let (c, out) = joined.context("worker task")??;
        no_buffer += c.no_buffer;
        outs.push(out);
    }
    drop(set);
    let latencies = Arc::try_unwrap(latencies)
        .map_err(|_| anyhow::anyhow!("a worker outlived its phase"))?
        .into_inner();
    Ok((latencies, no_buffer, outs))
}

/// Registers the shuffle and writes it: map tasks are taken in order by `concurrency`
/// workers; each sends its requests one after the other, then reports and commits.
pub async fn write(
    target: &Target,
    w: &Workload,
    payloads: &Arc<Payloads>,
) -> anyhow::Result<Phase> {
    control(target, w)
        .await?
        .register_remote(w.shape.partitions, w.remote_storage.as_deref())
        .await?;
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let (shape, request_bytes, backoff) = (w.shape, w.request_bytes, w.backoff);
    let key = app_key(&w.app);
    let payloads = Arc::clone(payloads);
    let (latencies, no_buffer, _) = workers(target, w, move |mut c: Client| {
        let (next, payloads) = (Arc::clone(&next), Arc::clone(&payloads));
        async move {
            loop {
                let map = next.fetch_add(1, Ordering::Relaxed);
                if map >= shape.maps {
                    return Ok((c, ()));
                }
                for request in shape.requests(map, request_bytes) {
                    let blocks = request
                        .into_iter()
                        .map(|(p, id)| {
                            let data = payloads.block(key, id, shape.block_size);
                            let block = proto::ShuffleBlock {
                                block_id: id,
                                length: data.len() as i32,
                                uncompress_length: data.len() as i32,
                                crc: i64::from(crc32fast::hash(&data)),
                                data,
                                task_attempt_id: map as i64,
                            };
                            (p as i32, block)
                        })
                        .collect();
                    c.send(blocks, backoff).await?;
                }
                let ids = (0..shape.partitions)
                    .map(|p| {
                        let ids = (0..shape.blocks_per_partition)
                            .map(|s| shape.block_id(map, p, s))
                            .collect();
                        (p as i32, ids)
                    })
                    .collect();
                c.report_and_commit(map as i64, ids).await?;
            }
        }
    })
    .await?;
    Ok(Phase {
        bytes: w.shape.total_bytes(),
        elapsed: start.elapsed(),
        latencies,
        no_buffer,
    })
}

/// `finishShuffle`, timed: with nothing spilled before, the server writes the whole shuffle to
/// its files inside this call.
pub async fn finish(target: &Target, w: &Workload) -> anyhow::Result<Duration> {
    let mut c = control(target, w).await?;
    let start = Instant::now();
    c.finish().await?;
    Ok(start.elapsed())
}

/// Unregisters the run's app (frees the server's memory and files).
pub async fn cleanup(target: &Target, w: &Workload) -> anyhow::Result<()> {
    control(target, w).await?.unregister_app().await
}

/// Blocks of one partition (the argument) that the server does not serve, read after its
/// memory and files: the Uniffle client reads an app's HDFS files itself.
pub type ExtraRead = Arc<
    dyn Fn(usize) -> Pin<Box<dyn Future<Output = anyhow::Result<Vec<ReadBlock>>> + Send>>
        + Send
        + Sync,
>;

/// Reads every partition back as the Java client does and verifies every block.
pub async fn read_verify(
    target: &Target,
    w: &Workload,
    payloads: &Arc<Payloads>,
) -> anyhow::Result<(Phase, Verification)> {
    read_verify_with(target, w, payloads, None).await
}

/// [`read_verify`], with the blocks of `extra` (HDFS) counted as read too: a block is lost
/// only when neither the server nor `extra` returned it.
pub async fn read_verify_with(
    target: &Target,
    w: &Workload,
    payloads: &Arc<Payloads>,
    extra: Option<ExtraRead>,
) -> anyhow::Result<(Phase, Verification)> {
    let next = Arc::new(AtomicUsize::new(0));
    let moved = Arc::new(Mutex::new(0u64));
    let start = Instant::now();
    let (shape, read_size) = (w.shape, w.read_size);
    let key = app_key(&w.app);
    let payloads = Arc::clone(payloads);
    let moved2 = Arc::clone(&moved);
    let (latencies, _, outs) = workers(target, w, move |mut c: Client| {
        let (next, payloads, moved, extra) = (
            Arc::clone(&next),
            Arc::clone(&payloads),
            Arc::clone(&moved2),
            extra.clone(),
        );
        async move {
            let mut v = Verification::default();
            loop {
                let p = next.fetch_add(1, Ordering::Relaxed);
                if p >= shape.partitions {
                    return Ok((c, v));
                }
                let bytes = read_partition(
                    &mut c,
                    &shape,
                    p,
                    read_size,
                    AppBytes {
                        pool: &payloads,
                        key,
                    },
                    extra.as_ref(),
                    &mut v,
                )
                .await?;
                *moved.lock() += bytes;
            }
        }
    })
    .await?;
    let mut v = Verification::default();
    for o in outs {
        v.merge(o);
    }
    let bytes = *moved.lock();
    Ok((
        Phase {
            bytes,
            elapsed: start.elapsed(),
            latencies,
            no_buffer: 0,
        },
        v,
    ))
}

/// The bytes one app wrote: the shared pool seen through the app's payload key.
#[derive(Clone, Copy)]
struct AppBytes<'a> {
    pool: &'a Payloads,
    key: u64,
}

/// One partition: result bitmap, memory blocks, then the file's blocks, each checked against
/// the bytes of the app. Returns the payload bytes transferred.
async fn read_partition(
    c: &mut Client,
    shape: &Shape,
    p: usize,
    read_size: usize,
    app: AppBytes<'_>,
    extra: Option<&ExtraRead>,
    v: &mut Verification,
) -> anyhow::Result<u64> {
    let expected = shape.partition_ids(p);
    let mut seen = vec![false; expected.len()];
    let pi = p as i32;
    let bitmap = c.shuffle_result(pi, shape.layout).await?;
    match bitmap::decode(&bitmap) {
        Ok(ids) => {
            let missing = expected
                .iter()
                .filter(|id| !ids.contains(**id as u64))
                .count();
            if missing > 0 || ids.len() != expected.len() as u64 {
                v.bad_results += 1;
                v.problem(format!(
                    "partition {p}: result bitmap holds {} ids, {} written, {missing} missing",
                    ids.len(),
                    expected.len()
                ));
            }
        }
        Err(e) => {
            v.bad_results += 1;
            v.problem(format!("partition {p}: result bitmap does not decode: {e}"));
        }
    }
    let mut moved = 0u64;
    let mut check = |b: ReadBlock, from_memory: bool, v: &mut Verification| {
        moved += b.data.len() as u64;
        let Ok(pos) = expected.binary_search(&b.block_id) else {
            v.corrupt += 1;
            v.problem(format!(
                "partition {p}: block {} was never written",
                b.block_id
            ));
            return;
        };
        if seen[pos] {
            v.duplicates += 1;
            return;
        }
        seen[pos] = true;
        v.blocks += 1;
        if from_memory {
            v.from_memory += 1;
        }
        if !app
            .pool
            .matches(app.key, b.block_id, shape.block_size, &b.data, b.crc)
        {
            let crc = i64::from(crc32fast::hash(&b.data));
            v.corrupt += 1;
            v.problem(format!(
                "partition {p}: block {} ({} bytes) is corrupt (crc field {}, crc of data {crc})",
                b.block_id,
                b.data.len(),
                b.crc
            ));
        }
    };
    let mut last = -1;
    loop {
        let blocks = c.read_memory(pi, last, read_size as i32).await?;
        let Some(tail) = blocks.last() else { break };
        last = tail.block_id;
        for b in blocks {
            check(b, true, v);
        }
    }
    let index = c.read_index(pi, shape.partitions as i32).await?;
    if index.len() % IndexEntry::SIZE != 0 {
        v.problem(format!(
            "partition {p}: index of {} bytes is not whole records",
            index.len()
        ));
    }
    let entries = IndexEntry::decode_all(&index);
    let mut i = 0;
    while i < entries.len() {
        // One range of whole consecutive blocks up to read_size, as the client's segments.
        let first = entries[i].offset;
        let mut end = i;
        let mut len = 0i64;
        while end < entries.len()
            && entries[end].offset == first + len
            && (end == i || len + i64::from(entries[end].length) <= read_size as i64)
        {
            len += i64::from(entries[end].length);
            end += 1;
        }
        let data = c
            .read_data(pi, shape.partitions as i32, first, len as i32)
            .await?;
        for e in &entries[i..end] {
            let at = (e.offset - first) as usize;
            let block = ReadBlock {
                block_id: e.block_id,
                crc: e.crc,
                data: data.slice(at..at + e.length as usize),
            };
            check(block, false, v);
        }
        i = end;
    }
    if let Some(extra) = extra {
        for b in extra(p).await? {
            let before = v.blocks;
            check(b, false, v);
            v.from_extra += v.blocks - before;
        }
    }
    let lost = seen.iter().filter(|s| !**s).count() as u64;
    if lost > 0 {
        v.lost += lost;
        v.problem(format!(
            "partition {p}: {lost} of {} blocks not read back",
            expected.len()
        ));
    }
    Ok(moved)
}

/// The read phase against the discard server: every partition's bytes in `read_size`
/// ranges (the transport's ceiling for reads). Each range gets the same client work as a
/// verified read (a CRC and a comparison with the pool the discard server answers from), so
/// the ratio to a verified run measures the server, not the checking.
pub async fn read_raw(
    target: &Target,
    w: &Workload,
    payloads: &Arc<Payloads>,
) -> anyhow::Result<Phase> {
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let (shape, read_size) = (w.shape, w.read_size as u64);
    let payloads = Arc::clone(payloads);
    let (latencies, _, outs) = workers(target, w, move |mut c: Client| {
        let (next, payloads) = (Arc::clone(&next), Arc::clone(&payloads));
        async move {
            let mut moved = 0u64;
            loop {
                let p = next.fetch_add(1, Ordering::Relaxed);
                if p >= shape.partitions {
                    return Ok((c, moved));
                }
                let mut offset = 0;
                while offset < shape.partition_bytes() {
                    let len = read_size.min(shape.partition_bytes() - offset);
                    let data = c
                        .read_data(p as i32, shape.partitions as i32, offset as i64, len as i32)
                        .await?;
                    let crc = crc32fast::hash(&data);
                    anyhow::ensure!(
                        data == payloads.prefix(data.len()),
                        "the discard server answered bytes other than its pool (crc {crc})"
                    );
                    moved += data.len() as u64;
                    offset += len;
                }
            }
        }
    })
    .await?;
    Ok(Phase {
        bytes: outs.iter().sum(),
        elapsed: start.elapsed(),
        latencies,
        no_buffer: 0,
    })
}
