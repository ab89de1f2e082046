//! Shared helpers for the integration tests: an in-process server on an ephemeral port with
//! temporary disks, and a small client that speaks the protocol the way the Java client does.
#![allow(dead_code, missing_docs)]

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use spillway::codec::bitmap;
use spillway::config::{ByteSize, Config};
use spillway::ids::BlockIdLayout;
use spillway::proto;
use spillway::proto::shuffle_server_client::ShuffleServerClient;
use spillway::proto::StatusCode;
use spillway::server::{self, Running};
use spillway::store::index::IndexEntry;
use tempfile::TempDir;
use tonic::transport::Channel;

pub type Client = ShuffleServerClient<Channel>;

pub struct TestServer {
    pub running: Running,
    pub client: Client,
    pub disks: Vec<TempDir>,
}

/// A config for tests: loopback, ephemeral ports (gRPC, Netty, HTTP), `disks` temporary data
/// paths.
pub fn test_config(disks: &[TempDir]) -> Config {
    let mut c = Config {
        grpc_port: 0,
        netty_port: 0,
        bind_ip: "127.0.0.1".into(),
        worker_ip: Some("127.0.0.1".into()),
        ..Config::default()
    };
    c.metrics.http_port = 0;
    c.memory_store.capacity = ByteSize(64 << 20);
    c.localfile_store.data_paths = disks.iter().map(|d| d.path().to_path_buf()).collect();
    // The temp dirs live on the host's disk, whose usage is not under test: a host disk over
    // the default 95 % would otherwise refuse every spill and hang the write tests on NO_BUFFER.
    c.localfile_store.disk_high_watermark = 1.0;
    c.localfile_store.disk_low_watermark = 0.99;
    // The RPC audit log (on by default) would land in the working directory; tests that check
    // it turn it on with a path of their own.
    c.audit.rpc_log = false;
    c.audit.coordinator_rpc_log = false;
    c
}

pub async fn start(disks: usize, tweak: impl FnOnce(&mut Config)) -> TestServer {
    let disks: Vec<TempDir> = (0..disks).map(|_| TempDir::new().unwrap()).collect();
    let mut config = test_config(&disks);
    tweak(&mut config);
    config.validate().expect("test config is valid");
    let running = server::start(config).await.expect("server starts");
    let client = connect(running.grpc_addr).await;
    TestServer {
        running,
        client,
        disks,
    }
}

pub async fn connect(addr: std::net::SocketAddr) -> Client {
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .expect("connects");
    ShuffleServerClient::new(channel)
        .max_decoding_message_size(usize::MAX)
        .max_encoding_message_size(usize::MAX)
}

pub const LAYOUT: BlockIdLayout = BlockIdLayout::DEFAULT;

/// A block as the Java client builds it: id from (seq, partition, task), CRC-32 of the data.
pub fn make_block(seq: i64, partition: i32, task: i64, len: usize) -> proto::ShuffleBlock {
    let block_id = LAYOUT.block_id(seq, partition, task);
    let data: Vec<u8> = (0..len)
        .map(|i| (block_id as usize).wrapping_mul(31).wrapping_add(i) as u8)
        .collect();
    proto::ShuffleBlock {
        block_id,
        length: len as i32,
        uncompress_length: len as i32 * 2,
        crc: crc32fast::hash(&data) as i64,
        data: Bytes::from(data),
        task_attempt_id: task,
    }
}

pub fn status_of(code: i32) -> StatusCode {
    StatusCode::try_from(code).unwrap_or(StatusCode::InternalError)
}

pub async fn register(
    client: &mut Client,
    app: &str,
    shuffle: i32,
    partitions: std::ops::Range<i32>,
    local_order: bool,
) {
    let resp = client
        .register_shuffle(proto::ShuffleRegisterRequest {
            app_id: app.into(),
            shuffle_id: shuffle,
            partition_ranges: partitions
                .map(|p| proto::ShufflePartitionRange { start: p, end: p })
                .collect(),
            user: "test".into(),
            shuffle_data_distribution: if local_order {
                proto::DataDistribution::LocalOrder as i32
            } else {
                proto::DataDistribution::Normal as i32
            },
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        status_of(resp.status),
        StatusCode::Success,
        "{}",
        resp.ret_msg
    );
}

/// One `requireBuffer` of `size` bytes for partition 0 of shuffle 0, answered as it is.
pub async fn require_once(
    client: &mut Client,
    app: &str,
    size: i32,
) -> proto::RequireBufferResponse {
    require_for(client, app, vec![0], size).await
}

/// One `requireBuffer` of `size` bytes for `partitions` of shuffle 0, answered as it is.
pub async fn require_for(
    client: &mut Client,
    app: &str,
    partitions: Vec<i32>,
    size: i32,
) -> proto::RequireBufferResponse {
    client
        .require_buffer(proto::RequireBufferRequest {
            require_size: size,
            app_id: app.into(),
            shuffle_id: 0,
            partition_ids: partitions,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
}

/// requireBuffer + sendShuffleData with retries on NO_BUFFER, as the client does. Returns the
/// number of NO_BUFFER answers seen.
pub async fn send(
    client: &mut Client,
    app: &str,
    shuffle: i32,
    blocks: Vec<(i32, Vec<proto::ShuffleBlock>)>,
) -> usize {
    let size: i32 = blocks
        .iter()
        .flat_map(|(_, b)| b)
        .map(|b| b.length + 32)
        .sum();
    let partitions: Vec<i32> = blocks.iter().map(|(p, _)| *p).collect();
    let mut no_buffer = 0;
    loop {
        let r = client
            .require_buffer(proto::RequireBufferRequest {
                require_size: size,
                app_id: app.into(),
                shuffle_id: shuffle,
                partition_ids: partitions.clone(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        match status_of(r.status) {
            StatusCode::Success => {}
            StatusCode::NoBuffer | StatusCode::NoBufferForHugePartition => {
                no_buffer += 1;
                assert!(no_buffer < 10_000, "no buffer forever");
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            }
            other => panic!("requireBuffer: {other:?} {}", r.ret_msg),
        }
        let resp = client
            .send_shuffle_data(proto::SendShuffleDataRequest {
                app_id: app.into(),
                shuffle_id: shuffle,
                require_buffer_id: r.require_buffer_id,
                shuffle_data: blocks
                    .iter()
                    .map(|(p, b)| proto::ShuffleData {
                        partition_id: *p,
                        block: b.clone(),
                    })
                    .collect(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            status_of(resp.status),
            StatusCode::Success,
            "{}",
            resp.ret_msg
        );
        return no_buffer;
    }
}

pub async fn report(
    client: &mut Client,
    app: &str,
    shuffle: i32,
    task: i64,
    ids: &BTreeMap<i32, Vec<i64>>,
) {
    let resp = client
        .report_shuffle_result(proto::ReportShuffleResultRequest {
            app_id: app.into(),
            shuffle_id: shuffle,
            task_attempt_id: task,
            bitmap_num: 1,
            partition_to_block_ids: ids
                .iter()
                .map(|(p, ids)| proto::PartitionToBlockIds {
                    partition_id: *p,
                    block_ids: ids.clone(),
                })
                .collect(),
            partition_stats: Vec::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        status_of(resp.status),
        StatusCode::Success,
        "{}",
        resp.ret_msg
    );
}

pub async fn expected_ids(
    client: &mut Client,
    app: &str,
    shuffle: i32,
    partition: i32,
) -> Vec<u64> {
    let resp = client
        .get_shuffle_result_for_multi_part(proto::GetShuffleResultForMultiPartRequest {
            app_id: app.into(),
            shuffle_id: shuffle,
            partitions: vec![partition],
            block_id_layout: Some(proto::BlockIdLayout {
                sequence_no_bits: 18,
                partition_id_bits: 24,
                task_attempt_id_bits: 21,
            }),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        status_of(resp.status),
        StatusCode::Success,
        "{}",
        resp.ret_msg
    );
    bitmap::decode(&resp.serialized_bitmap)
        .unwrap()
        .iter()
        .collect()
}

/// Where the blocks of a read came from.
#[derive(Debug, Default)]
pub struct ReadBack {
    /// block id → data
    pub blocks: BTreeMap<i64, Bytes>,
    pub from_memory: usize,
    pub from_files: usize,
    /// Task attempt ids in index order (for LOCAL_ORDER checks).
    pub index_tasks: Vec<i64>,
}

/// Reads one partition the way the Java reader does: memory until an empty answer, then the
/// index and the data segments. Every block's CRC and length is checked.
pub async fn read_partition(
    client: &mut Client,
    app: &str,
    shuffle: i32,
    partition: i32,
) -> ReadBack {
    let mut out = ReadBack::default();
    let mut last = -1i64;
    loop {
        let r = client
            .get_memory_shuffle_data(proto::GetMemoryShuffleDataRequest {
                app_id: app.into(),
                shuffle_id: shuffle,
                partition_id: partition,
                last_block_id: last,
                read_buffer_size: 64 << 10,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        if status_of(r.status) == StatusCode::NoBuffer {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        }
        assert_eq!(status_of(r.status), StatusCode::Success, "{}", r.ret_msg);
        if r.shuffle_data_block_segments.is_empty() {
            break;
        }
        for s in &r.shuffle_data_block_segments {
            let data = r
                .data
                .slice(s.offset as usize..s.offset as usize + s.length as usize);
            assert_eq!(
                crc32fast::hash(&data) as i64,
                s.crc,
                "crc of block {}",
                s.block_id
            );
            if out.blocks.insert(s.block_id, data).is_none() {
                out.from_memory += 1;
            }
            last = s.block_id;
        }
    }
    let idx = client
        .get_local_shuffle_index(proto::GetLocalShuffleIndexRequest {
            app_id: app.into(),
            shuffle_id: shuffle,
            partition_id: partition,
            partition_num_per_range: 1,
            partition_num: 1 << 20,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        status_of(idx.status),
        StatusCode::Success,
        "{}",
        idx.ret_msg
    );
    assert_eq!(idx.index_data.len() % IndexEntry::SIZE, 0);
    let entries = IndexEntry::decode_all(&idx.index_data);
    let mut expected_offset = 0i64;
    for e in &entries {
        assert_eq!(
            e.offset, expected_offset,
            "index records must be contiguous"
        );
        expected_offset += e.length as i64;
        assert!(expected_offset <= idx.data_file_len);
        out.index_tasks.push(e.task_attempt_id);
    }
    // Segments of at most 1 MiB, as the client groups them.
    let mut i = 0;
    while i < entries.len() {
        let start = i;
        let mut len = 0i64;
        while i < entries.len() && (len == 0 || len + (entries[i].length as i64) <= 1 << 20) {
            len += entries[i].length as i64;
            i += 1;
        }
        let d = client
            .get_local_shuffle_data(proto::GetLocalShuffleDataRequest {
                app_id: app.into(),
                shuffle_id: shuffle,
                partition_id: partition,
                partition_num_per_range: 1,
                partition_num: 1 << 20,
                offset: entries[start].offset,
                length: len as i32,
                storage_id: -1,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(status_of(d.status), StatusCode::Success, "{}", d.ret_msg);
        assert_eq!(d.data.len() as i64, len);
        let mut at = 0usize;
        for e in &entries[start..i] {
            let data = d.data.slice(at..at + e.length as usize);
            at += e.length as usize;
            assert_eq!(
                crc32fast::hash(&data) as i64,
                e.crc,
                "crc of block {}",
                e.block_id
            );
            if out.blocks.insert(e.block_id, data).is_none() {
                out.from_files += 1;
            }
        }
    }
    out
}

/// Writes `maps` map tasks × `partitions` partitions × `blocks_per` blocks of `len` bytes and
/// reports them; returns what every partition must read back.
pub async fn write_shuffle(
    client: &mut Client,
    app: &str,
    shuffle: i32,
    maps: i64,
    partitions: i32,
    blocks_per: i64,
    len: usize,
) -> BTreeMap<i32, BTreeMap<i64, Bytes>> {
    let mut expected: BTreeMap<i32, BTreeMap<i64, Bytes>> = BTreeMap::new();
    for task in 0..maps {
        let mut reported: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
        for seq in 0..blocks_per {
            let batch: Vec<(i32, Vec<proto::ShuffleBlock>)> = (0..partitions)
                .map(|p| (p, vec![make_block(seq, p, task, len)]))
                .collect();
            for (p, blocks) in &batch {
                for b in blocks {
                    expected
                        .entry(*p)
                        .or_default()
                        .insert(b.block_id, b.data.clone());
                    reported.entry(*p).or_default().push(b.block_id);
                }
            }
            send(client, app, shuffle, batch).await;
        }
        report(client, app, shuffle, task, &reported).await;
    }
    expected
}

/// Reads every partition back and checks it is byte-identical to `expected`, and that the
/// reported ids match.
pub async fn verify_shuffle(
    client: &mut Client,
    app: &str,
    shuffle: i32,
    expected: &BTreeMap<i32, BTreeMap<i64, Bytes>>,
) -> (usize, usize) {
    let (mut mem, mut files) = (0, 0);
    for (p, blocks) in expected {
        let ids = expected_ids(client, app, shuffle, *p).await;
        let want: Vec<u64> = blocks.keys().map(|id| *id as u64).collect();
        assert_eq!(ids, want, "reported ids of partition {p}");
        let got = read_partition(client, app, shuffle, *p).await;
        assert_eq!(&got.blocks, blocks, "data of partition {p}");
        mem += got.from_memory;
        files += got.from_files;
    }
    (mem, files)
}

/// Polls `cond` until true; the deadline only guards against hangs.
pub async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `finishShuffle`: spills the shuffle and waits until it is durable; asserts SUCCESS.
pub async fn finish(client: &mut Client, app: &str, shuffle: i32) {
    let r = client
        .finish_shuffle(proto::FinishShuffleRequest {
            app_id: app.into(),
            shuffle_id: shuffle,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::Success, "{}", r.ret_msg);
}

/// `cmd.output()`, bounded: after `limit` the child's whole process group (a bench and the
/// server it started) is killed and the test fails with what was printed so far. A hung
/// child must fail its test, not hold the test run until CI stops it with nothing said.
pub fn output_within(cmd: &mut std::process::Command, limit: Duration) -> std::process::Output {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    use std::sync::{Arc, Mutex};

    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd:?} does not start: {e}"));
    let printed = Arc::new(Mutex::new((Vec::new(), Vec::new())));
    let pipe = |mut from: Box<dyn Read + Send>, stderr: bool| {
        let printed = Arc::clone(&printed);
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n @ 1..) = from.read(&mut buf) {
                let mut p = printed.lock().unwrap();
                if stderr { &mut p.1 } else { &mut p.0 }.extend_from_slice(&buf[..n]);
            }
        })
    };
    let readers = [
        pipe(Box::new(child.stdout.take().unwrap()), false),
        pipe(Box::new(child.stderr.take().unwrap()), true),
    ];
    let deadline = std::time::Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for the child") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let group = nix::unistd::Pid::from_raw(-(child.id() as i32));
            let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGKILL);
            let _ = child.wait();
            std::thread::sleep(Duration::from_millis(200));
            let p = printed.lock().unwrap();
            panic!(
                "{cmd:?} still running after {limit:?}: killed. It printed:\n{}{}",
                String::from_utf8_lossy(&p.0),
                String::from_utf8_lossy(&p.1)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    for r in readers {
        let _ = r.join();
    }
    let (stdout, stderr) = std::mem::take(&mut *printed.lock().unwrap());
    std::process::Output {
        status,
        stdout,
        stderr,
    }
}

/// registerShuffle with the app's remote storage (`path`, two conf items) and Hadoop `user`.
pub async fn register_remote(
    client: &mut Client,
    app: &str,
    shuffle: i32,
    partitions: std::ops::Range<i32>,
    path: &str,
    user: &str,
) {
    // `simple` as a client whose own Hadoop conf has no security sends it: on a kerberized
    // server the server's setting must win.
    let conf = [
        ("dfs.client.socket-timeout", "20000"),
        ("hadoop.security.authentication", "simple"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    register_remote_with(client, app, shuffle, partitions, path, user, conf).await;
}

/// `registerShuffle` with a remote storage `path` and its conf items, as the client sends what
/// the coordinator's cluster conf gave it.
pub async fn register_remote_with(
    client: &mut Client,
    app: &str,
    shuffle: i32,
    partitions: std::ops::Range<i32>,
    path: &str,
    user: &str,
    conf: Vec<(String, String)>,
) {
    let resp = register_remote_answer(client, app, shuffle, partitions, path, user, conf).await;
    assert_eq!(
        status_of(resp.status),
        StatusCode::Success,
        "{}",
        resp.ret_msg
    );
}

/// [`register_remote_with`]'s request, answered as it is (for refusals).
pub async fn register_remote_answer(
    client: &mut Client,
    app: &str,
    shuffle: i32,
    partitions: std::ops::Range<i32>,
    path: &str,
    user: &str,
    conf: Vec<(String, String)>,
) -> proto::ShuffleRegisterResponse {
    client
        .register_shuffle(proto::ShuffleRegisterRequest {
            app_id: app.into(),
            shuffle_id: shuffle,
            partition_ranges: partitions
                .map(|p| proto::ShufflePartitionRange { start: p, end: p })
                .collect(),
            remote_storage: Some(proto::RemoteStorage {
                path: path.into(),
                remote_storage_conf: conf
                    .into_iter()
                    .map(|(key, value)| proto::RemoteStorageConfItem { key, value })
                    .collect(),
            }),
            user: user.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
}

/// One partition's blocks as the Uniffle client reads them from HDFS: every `*.index` in the
/// range directory whose name starts with the server id; per pair, whole records, stopping at
/// the first that ends past the data file's length; blocks CRC-checked; each id once.
pub async fn read_hdfs(
    hdfs: &hdfs_native::Client,
    root: &str,
    app: &str,
    shuffle: i32,
    partition: i32,
    server_id: &str,
) -> BTreeMap<i64, Bytes> {
    let dir = format!("{root}/{app}/{shuffle}/{partition}-{partition}");
    let mut out = BTreeMap::new();
    let Ok(listing) = hdfs.list_status(&dir, false).await else {
        return out;
    };
    for s in listing {
        let name = s.path.rsplit('/').next().unwrap().to_owned();
        if !(name.starts_with(server_id) && name.ends_with(".index")) {
            continue;
        }
        let index = read_all(hdfs, &s.path).await;
        let data_path = format!("{}.data", s.path.trim_end_matches(".index"));
        let data = read_all(hdfs, &data_path).await;
        blocks_of_pair(&index, &data, &mut out);
    }
    out
}

/// The blocks of one remote data/index pair as the Uniffle client takes them: records up to
/// the first whose running length passes the data's, CRC-checked, each block id once (the
/// first pair read wins).
pub fn blocks_of_pair(index: &Bytes, data: &Bytes, out: &mut BTreeMap<i64, Bytes>) {
    let mut sum = 0u64;
    for e in IndexEntry::decode_all(index) {
        sum += e.length as u64;
        if sum > data.len() as u64 {
            break;
        }
        let block = data.slice(e.offset as usize..e.offset as usize + e.length as usize);
        assert_eq!(
            crc32fast::hash(&block) as i64,
            e.crc,
            "crc of {}",
            e.block_id
        );
        out.entry(e.block_id).or_insert(block);
    }
}

/// A whole HDFS file.
pub async fn read_all(hdfs: &hdfs_native::Client, path: &str) -> Bytes {
    let r = hdfs.read(path).await.expect("open");
    r.read_range(0, r.file_length()).await.expect("read")
}

/// `name` made unique for this run (HDFS paths that earlier runs may have left).
pub fn unique(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{name}-{nanos}")
}

/// `N` distinct free ports: every listener is held until all are bound, so the kernel cannot
/// hand out the same port twice (two `free_port()` calls can, and a server given one port
/// for two listeners refuses to start: seen once in CI, `tests/operator.rs`).
pub fn free_ports<const N: usize>() -> [u16; N] {
    let listeners: Vec<std::net::TcpListener> = (0..N)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    std::array::from_fn(|i| listeners[i].local_addr().unwrap().port())
}

/// A loopback port free right now, for a server started as a separate process.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child process (a spillway binary) killed and reaped on drop, so a failed assertion leaves
/// no server behind.
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
