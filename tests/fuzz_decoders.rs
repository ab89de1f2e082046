//! Fuzz harnesses for every decoder that reads bytes this server does not control: Netty frames
//! and messages, client bitmaps, index records and the data/index files adopted at start-up, the
//! recovery journal, the config file, and every gRPC request message with its domain checks.
//!
//! Built on proptest rather than cargo-fuzz so that it runs on the pinned stable toolchain and in
//! the ordinary test suite. Inputs are not only random bytes: valid encodings are built with the
//! crate's own encoders and then mutated (cut, bytes flipped or overwritten, and length or count
//! fields set to -1, `i32::MIN`, `i32::MAX`, `u32::MAX`, `i64::MAX`...), which is what reaches
//! the code behind the first length check. Every target checks that the decoder never panics,
//! that one decode never has more than `64 × input + 1 MiB` bytes live (a counting global
//! allocator below, per thread), and, where the types allow, that `decode(encode(x)) == x`.
//!
//! The smoke run is part of `cargo test --all-targets` (about 10 s for the whole file in a debug
//! build on 2 cores). A longer run, in release with overflow checks kept on (they are what turns
//! a silent wrap into a finding), about 15 minutes on 2 cores:
//!
//! ```text
//! CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true PROPTEST_CASES=100000000 FUZZ_SECONDS=100 \
//!     cargo test --release --test fuzz_decoders -- --nocapture --test-threads 2
//! ```
//!
//! `PROPTEST_CASES` replaces every target's default case count; `FUZZ_SECONDS` (only read by
//! this file) stops each target after that many seconds, so a time-boxed run is possible even
//! though the targets that write files (`fs_*`) are a hundred times slower per case than the
//! others. Each target prints `fuzz <name>: <n> executions in <time>` (visible with
//! `--nocapture`); a test-name filter (`... fuzz_decoders config_toml -- ...`) runs one target.
//! The overflow-checked release build is a different build of every crate: give it its own
//! `CARGO_TARGET_DIR` to keep the usual one warm.
//!
//! A failure is shrunk to a minimal input, printed, and its seed saved in
//! `tests/fuzz_decoders.proptest-regressions`, which is replayed first on every later run: keep
//! that file in git.
#![allow(unsafe_code)] // the counting global allocator

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{
    contextualize_config, FileFailurePersistence, TestCaseError, TestError, TestRunner,
};
use roaring::RoaringTreemap;

use spillway::codec::bitmap;
use spillway::config::Config;
use spillway::ids::{AppId, PartitionKey, PartitionRange};
use spillway::netty::client::send_frame;
use spillway::netty::frame::{FrameError, Header, HEADER_LEN};
use spillway::netty::messages::{
    DataRequest, DataVersion, IndexRequest, MemoryRequest, Replica, SendBlock, SendRequest,
    SortedRequest,
};
use spillway::netty::{Request, Response, ResponseHead};
use spillway::proto;
use spillway::protocol::convert;
use spillway::recovery::{load_journal, Record, RecoveredState};
use spillway::store::index::{encode_blocks, shift_offsets, IndexEntry};
use spillway::store::localfile::{LocalFileOptions, LocalFileTier};
use spillway::store::memory::Segment;
use spillway::store::{Block, FileTier, Span};

// ---------------------------------------------------------------------------------------------
// Allocation accounting
// ---------------------------------------------------------------------------------------------

/// Counts the bytes allocated by the thread that is inside [`bounded`], so that a decoder which
/// trusts a hostile length (and reserves gigabytes for a few bytes of input) fails the test
/// instead of passing on a machine with enough memory. Per thread because the test harness runs
/// targets in parallel.
struct Counting;

#[global_allocator]
static ALLOCATOR: Counting = Counting;

thread_local! {
    static TRACKING: Cell<bool> = const { Cell::new(false) };
    static LIVE: Cell<i64> = const { Cell::new(0) };
    static PEAK: Cell<i64> = const { Cell::new(0) };
}

fn note(delta: i64) {
    // `try_with`: the allocator also runs while thread-locals are being torn down.
    let _ = TRACKING.try_with(|tracking| {
        if tracking.get() {
            let live = LIVE.get() + delta;
            LIVE.set(live);
            if live > PEAK.get() {
                PEAK.set(live);
            }
        }
    });
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size() as i64);
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size() as i64);
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note(-(layout.size() as i64));
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size as i64 - layout.size() as i64);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Ends tracking even when the decoder panics (proptest catches the panic and shrinks).
struct StopTracking;

impl Drop for StopTracking {
    fn drop(&mut self) {
        TRACKING.set(false);
    }
}

/// Runs one decode and fails the case if it had more than `64 × input_len + 1 MiB` bytes live
/// at any point: a hostile count may cost memory in proportion to the bytes that carry it, never
/// in proportion to the number it claims.
fn bounded<T>(
    what: &str,
    input_len: usize,
    decode: impl FnOnce() -> T,
) -> Result<T, TestCaseError> {
    LIVE.set(0);
    PEAK.set(0);
    TRACKING.set(true);
    let stop = StopTracking;
    let out = decode();
    drop(stop);
    let peak = PEAK.get();
    let limit = 64 * input_len as i64 + (1 << 20);
    prop_assert!(
        peak <= limit,
        "{what}: {peak} bytes live for {input_len} input bytes (limit {limit})"
    );
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Runner
// ---------------------------------------------------------------------------------------------

/// Runs `test` on `default_cases` inputs from `strategy` (or `PROPTEST_CASES`), stopping early
/// after `FUZZ_SECONDS` when that is set, and prints how many inputs were run.
///
/// Not the `proptest!` macro: it cannot report the number of executions or stop on a clock.
fn fuzz<S>(
    name: &'static str,
    default_cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) where
    S: Strategy,
    S::Value: Debug,
{
    let config = contextualize_config(ProptestConfig {
        cases: default_cases,
        source_file: Some(file!()),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        test_name: Some(name),
        ..ProptestConfig::default()
    });
    let deadline = std::env::var("FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .map(|s| Instant::now() + Duration::from_secs_f64(s));
    let executions = AtomicU64::new(0);
    let started = Instant::now();
    let mut done = 0u32;
    while done < config.cases {
        // With a deadline, run in batches so the clock is looked at between them.
        let batch = match deadline {
            Some(_) => (config.cases - done).min(500),
            None => config.cases - done,
        };
        let mut runner = TestRunner::new(ProptestConfig {
            cases: batch,
            ..config.clone()
        });
        let result = runner.run(&strategy, |value| {
            executions.fetch_add(1, Ordering::Relaxed);
            test(value)
        });
        match result {
            Ok(()) => {}
            Err(TestError::Fail(why, input)) => panic!(
                "fuzz target {name} failed after {} executions: {why}\nminimal input: {input:#?}",
                executions.load(Ordering::Relaxed)
            ),
            Err(TestError::Abort(why)) => panic!("fuzz target {name} aborted: {why}"),
        }
        done += batch;
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
    }
    eprintln!(
        "fuzz {name}: {} executions in {:.1?}",
        executions.load(Ordering::Relaxed),
        started.elapsed()
    );
}

// ---------------------------------------------------------------------------------------------
// Mutations
// ---------------------------------------------------------------------------------------------

/// A value that breaks length and count fields: negative, zero, one past a boundary, maximal.
#[derive(Clone, Copy, Debug)]
enum Extreme {
    I32(i32),
    I64(i64),
}

fn extreme() -> impl Strategy<Value = Extreme> {
    prop_oneof![
        prop::sample::select(vec![
            -1,
            -2,
            i32::MIN,
            i32::MAX,
            i32::MAX - 7,
            0,
            1,
            40,
            65_536,
            65_537,
            12_346, // the roaring cookies, when written little-endian
            12_347,
        ])
        .prop_map(Extreme::I32),
        prop::sample::select(vec![i64::MIN, i64::MAX, -1, u32::MAX as i64, 1 << 40])
            .prop_map(Extreme::I64),
    ]
}

/// One edit of an encoding.
#[derive(Clone, Debug)]
enum Mutation {
    /// Keep only a prefix.
    Truncate(Index),
    /// XOR one byte.
    Flip(Index, u8),
    /// Overwrite one byte.
    Set(Index, u8),
    /// Overwrite 4 or 8 bytes with an extreme value; `length_like` picks among the positions
    /// that currently hold a small non-negative int32 (most likely a length or a count).
    Overwrite {
        at: Index,
        value: Extreme,
        big_endian: bool,
        length_like: bool,
    },
    /// Insert bytes.
    Insert(Index, Vec<u8>),
    /// Remove up to this many bytes.
    Remove(Index, u8),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        1 => any::<Index>().prop_map(Mutation::Truncate),
        2 => (any::<Index>(), 1..=255u8).prop_map(|(i, x)| Mutation::Flip(i, x)),
        1 => (any::<Index>(), any::<u8>()).prop_map(|(i, x)| Mutation::Set(i, x)),
        4 => (any::<Index>(), extreme(), any::<bool>(), prop::bool::weighted(0.7)).prop_map(
            |(at, value, big_endian, length_like)| Mutation::Overwrite { at, value, big_endian, length_like }
        ),
        1 => (any::<Index>(), prop::collection::vec(any::<u8>(), 1..8)).prop_map(|(i, b)| Mutation::Insert(i, b)),
        1 => (any::<Index>(), 1..16u8).prop_map(|(i, n)| Mutation::Remove(i, n)),
    ]
}

fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    prop::collection::vec(mutation(), 1..5)
}

fn apply(bytes: &mut Vec<u8>, mutations: &[Mutation]) {
    for m in mutations {
        match m {
            Mutation::Truncate(at) => bytes.truncate(at.index(bytes.len() + 1)),
            Mutation::Flip(at, x) if !bytes.is_empty() => {
                let i = at.index(bytes.len());
                bytes[i] ^= x;
            }
            Mutation::Set(at, x) if !bytes.is_empty() => {
                let i = at.index(bytes.len());
                bytes[i] = *x;
            }
            Mutation::Overwrite {
                at,
                value,
                big_endian,
                length_like,
            } => {
                let raw: Vec<u8> = match (value, big_endian) {
                    (Extreme::I32(v), true) => v.to_be_bytes().to_vec(),
                    (Extreme::I32(v), false) => v.to_le_bytes().to_vec(),
                    (Extreme::I64(v), true) => v.to_be_bytes().to_vec(),
                    (Extreme::I64(v), false) => v.to_le_bytes().to_vec(),
                };
                if bytes.len() < raw.len() {
                    continue;
                }
                let starts = bytes.len() - raw.len() + 1;
                let candidates: Vec<usize> = if *length_like {
                    (0..bytes.len().saturating_sub(3))
                        .filter(|&i| {
                            let w = [bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]];
                            let v = if *big_endian {
                                u32::from_be_bytes(w)
                            } else {
                                u32::from_le_bytes(w)
                            };
                            v as usize <= bytes.len() && i < starts
                        })
                        .collect()
                } else {
                    Vec::new()
                };
                let i = if candidates.is_empty() {
                    at.index(starts)
                } else {
                    candidates[at.index(candidates.len())]
                };
                bytes[i..i + raw.len()].copy_from_slice(&raw);
            }
            Mutation::Insert(at, b) => {
                let i = at.index(bytes.len() + 1);
                bytes.splice(i..i, b.iter().copied());
            }
            Mutation::Remove(at, n) if !bytes.is_empty() => {
                let i = at.index(bytes.len());
                let end = (i + *n as usize).min(bytes.len());
                bytes.drain(i..end);
            }
            _ => {}
        }
    }
}

fn random_bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..max)
}

fn app_id_text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-zA-Z0-9_-]{1,24}",
        1 => ".{0,10}",
        1 => Just(String::new()),
        1 => Just("..".to_owned()),
        1 => "[a-z]{250,260}",
    ]
}

// ---------------------------------------------------------------------------------------------
// 1. Netty frames and messages
// ---------------------------------------------------------------------------------------------

fn replica() -> impl Strategy<Value = Replica> {
    (
        prop::option::of(".{0,6}"),
        prop::option::of(".{0,6}"),
        any::<i32>(),
        any::<i32>(),
    )
        .prop_map(|(id, host, grpc_port, netty_port)| Replica {
            id,
            host,
            grpc_port,
            netty_port,
        })
}

fn send_block() -> impl Strategy<Value = SendBlock> {
    (
        (any::<i32>(), any::<i64>(), any::<i32>(), any::<i32>()),
        (any::<i64>(), any::<i64>(), random_bytes(24)),
        prop::collection::vec(replica(), 0..3),
        (any::<i32>(), any::<i64>(), prop::bool::weighted(0.8)),
    )
        .prop_map(
            |(
                (partition_id, block_id, length, shuffle_id),
                (crc, task_attempt_id, data),
                replicas,
                (uncompress_length, free_memory, honest),
            )| {
                SendBlock {
                    partition_id,
                    block_id,
                    // Mostly what the server accepts, so its checks after the decode run too.
                    length: if honest { data.len() as i32 } else { length },
                    shuffle_id,
                    crc,
                    task_attempt_id,
                    data: Bytes::from(data),
                    replicas,
                    uncompress_length,
                    free_memory,
                }
            },
        )
}

fn send_request() -> impl Strategy<Value = SendRequest> {
    (
        any::<i64>(),
        app_id_text(),
        any::<i32>(),
        any::<i64>(),
        prop::collection::vec(
            (any::<i32>(), prop::collection::vec(send_block(), 0..3)),
            0..3,
        ),
        any::<i64>(),
    )
        .prop_map(
            |(request_id, app_id, shuffle_id, require_buffer_id, partitions, timestamp)| {
                SendRequest {
                    request_id,
                    app_id,
                    shuffle_id,
                    require_buffer_id,
                    partitions,
                    timestamp,
                }
            },
        )
}

/// Mostly the small ids and counts the server accepts (so the range checks after the decode
/// run), sometimes anything.
fn small_int() -> impl Strategy<Value = i32> {
    prop_oneof![3 => -2..64i32, 1 => any::<i32>()]
}

/// Valid Java-legacy bitmaps, so the memory request's bitmap is sometimes decodable.
fn bitmap_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(0u64..(1 << 34), 0..20)
            .prop_map(|ids| bitmap::encode(&ids.into_iter().collect()).to_vec()),
        random_bytes(32),
    ]
}

fn request() -> impl Strategy<Value = Request> {
    let index = (
        any::<i64>(),
        app_id_text(),
        [small_int(), small_int(), small_int(), small_int()],
    )
        .prop_map(|(request_id, app_id, [a, b, c, d])| {
            Request::Index(IndexRequest {
                request_id,
                app_id,
                shuffle_id: a,
                partition_id: b,
                partition_num_per_range: c,
                partition_num: d,
            })
        });
    let data = (
        prop::sample::select(vec![DataVersion::V1, DataVersion::V2, DataVersion::V3]),
        (
            any::<i64>(),
            app_id_text(),
            [small_int(), small_int(), small_int(), small_int()],
        ),
        (any::<i64>(), any::<i32>(), any::<i64>(), any::<i32>()),
        (
            prop::collection::vec(any::<(i64, i64)>(), 0..4),
            any::<i64>(),
        ),
    )
        .prop_map(
            |(
                version,
                (request_id, app_id, [a, b, c, d]),
                (offset, length, timestamp, storage_id),
                (segments, task),
            )| {
                Request::Data(DataRequest {
                    version,
                    request_id,
                    app_id,
                    shuffle_id: a,
                    partition_id: b,
                    partition_num_per_range: c,
                    partition_num: d,
                    offset,
                    length,
                    timestamp,
                    // What a V1/V2 frame cannot carry decodes as these defaults.
                    storage_id: if version == DataVersion::V1 {
                        -1
                    } else {
                        storage_id
                    },
                    next_segments: if version == DataVersion::V3 {
                        segments
                    } else {
                        Vec::new()
                    },
                    task_attempt_id: if version == DataVersion::V3 { task } else { 0 },
                })
            },
        );
    let memory = (
        (any::<i64>(), app_id_text(), any::<i32>(), any::<i32>()),
        (any::<i64>(), any::<i32>(), any::<i64>()),
        prop::option::of(bitmap_bytes()),
    )
        .prop_map(
            |(
                (request_id, app_id, shuffle_id, partition_id),
                (last_block_id, read_buffer_size, timestamp),
                bitmap,
            )| {
                Request::Memory(MemoryRequest {
                    request_id,
                    app_id,
                    shuffle_id,
                    partition_id,
                    last_block_id,
                    read_buffer_size,
                    timestamp,
                    expected_task_ids: bitmap.map(Bytes::from),
                })
            },
        );
    let sorted = (
        (any::<i64>(), app_id_text(), any::<i32>(), any::<i32>()),
        (any::<i64>(), any::<i32>(), any::<i64>()),
    )
        .prop_map(
            |((request_id, app_id, shuffle_id, partition_id), (block_id, length, timestamp))| {
                Request::Sorted(SortedRequest {
                    request_id,
                    app_id,
                    shuffle_id,
                    partition_id,
                    block_id,
                    length,
                    timestamp,
                })
            },
        );
    prop_oneof![
        3 => send_request().prop_map(Request::Send),
        1 => index,
        2 => data,
        2 => memory,
        1 => sorted,
    ]
}

fn response_head() -> impl Strategy<Value = ResponseHead> {
    (any::<i64>(), any::<i32>(), prop::option::of(".{0,12}")).prop_map(
        |(request_id, status, ret_message)| ResponseHead {
            request_id,
            status,
            ret_message,
        },
    )
}

fn segment() -> impl Strategy<Value = Segment> {
    // The Netty wire carries the offset as an int32.
    (
        any::<i64>(),
        any::<i32>(),
        any::<i32>(),
        any::<i32>(),
        any::<i64>(),
        any::<i64>(),
    )
        .prop_map(
            |(block_id, offset, length, uncompress_length, crc, task_attempt_id)| Segment {
                block_id,
                offset: i64::from(offset),
                length,
                uncompress_length,
                crc,
                task_attempt_id,
            },
        )
}

fn response() -> impl Strategy<Value = Response> {
    let body = || random_bytes(80).prop_map(Bytes::from);
    prop_oneof![
        response_head().prop_map(Response::Rpc),
        (response_head(), any::<i64>(), body()).prop_map(|(head, data_file_len, index)| {
            Response::Index {
                head,
                data_file_len,
                index,
            }
        }),
        (
            response_head(),
            any::<i64>(),
            prop::collection::vec(any::<i32>(), 0..5),
            body()
        )
            .prop_map(
                |(head, data_file_len, storage_ids, index)| Response::IndexV2 {
                    head,
                    data_file_len,
                    storage_ids,
                    index
                }
            ),
        (response_head(), body()).prop_map(|(head, data)| Response::Data { head, data }),
        (
            response_head(),
            prop::collection::vec(segment(), 0..5),
            body()
        )
            .prop_map(|(head, segments, data)| {
                Response::Memory {
                    head,
                    segments,
                    data,
                }
            }),
        (response_head(), any::<i64>(), any::<i32>(), body()).prop_map(
            |(head, next_block_id, merge_state, data)| Response::Sorted {
                head,
                next_block_id,
                merge_state,
                data
            }
        ),
    ]
}

/// Splits a whole frame into `(type, message, body)` the way both ends do: header first, then
/// nothing is sliced unless the frame holds every byte the header promised.
fn split_frame(frame: &[u8], limit: usize) -> Result<(i8, Bytes, Bytes), FrameError> {
    let header = Header::parse(frame, limit)?;
    if frame.len() < HEADER_LEN + header.payload_len() {
        return Err(FrameError::Eof {
            got: frame.len(),
            want: HEADER_LEN + header.payload_len(),
        });
    }
    let all = Bytes::copy_from_slice(&frame[..HEADER_LEN + header.payload_len()]);
    Ok((
        header.ty,
        all.slice(HEADER_LEN..HEADER_LEN + header.msg_len),
        all.slice(HEADER_LEN + header.msg_len..),
    ))
}

/// The server's checks after a request decodes (netty/server.rs `send`, `read_data`).
fn server_side_checks(req: &Request) {
    match req {
        Request::Send(r) => {
            let _ = convert::app_id(&r.app_id);
            for (partition, blocks) in &r.partitions {
                if let Ok(p) = convert::partition(*partition) {
                    for b in blocks {
                        let block = Block {
                            block_id: b.block_id,
                            task_attempt_id: b.task_attempt_id,
                            uncompress_length: b.uncompress_length,
                            crc: b.crc,
                            data: b.data.clone(),
                        };
                        if let Ok(ok) = convert::block(p, b.length, block) {
                            assert_eq!(ok.len(), b.length);
                        }
                    }
                }
            }
        }
        Request::Index(IndexRequest {
            app_id,
            partition_id,
            partition_num_per_range,
            partition_num,
            ..
        })
        | Request::Data(DataRequest {
            app_id,
            partition_id,
            partition_num_per_range,
            partition_num,
            ..
        }) => {
            let _ = convert::app_id(app_id);
            read_range_checks(*partition_id, *partition_num_per_range, *partition_num);
        }
        Request::Memory(r) => {
            let _ = convert::app_id(&r.app_id);
            if let Some(b) = &r.expected_task_ids {
                let _ = bitmap::decode(b);
            }
        }
        Request::Sorted(r) => {
            let _ = convert::app_id(&r.app_id);
        }
    }
}

fn read_range_checks(partition: i32, per_range: i32, partition_num: i32) {
    if let Ok(range) = PartitionRange::for_read(partition, per_range, partition_num) {
        assert!(
            range.contains(partition),
            "{range} does not hold {partition}"
        );
        assert!(0 <= range.start && range.start <= range.end);
    }
}

#[test]
fn netty_header() {
    fuzz(
        "netty_header",
        10000,
        (
            random_bytes(14),
            prop_oneof![Just(usize::MAX), 0usize..(1 << 20)],
        ),
        |(raw, limit)| {
            match Header::parse(&raw, limit) {
                Ok(h) => {
                    prop_assert!(raw.len() >= HEADER_LEN);
                    prop_assert!(h.payload_len() <= limit);
                    prop_assert_eq!(
                        h.msg_len as i32,
                        i32::from_be_bytes(raw[0..4].try_into().unwrap())
                    );
                    prop_assert_eq!(
                        h.body_len as i32,
                        i32::from_be_bytes(raw[5..9].try_into().unwrap())
                    );
                }
                Err(FrameError::Eof { .. }) => prop_assert!(raw.len() < HEADER_LEN),
                Err(_) => {}
            }
            Ok(())
        },
    );
}

#[test]
fn netty_request_random() {
    fuzz(
        "netty_request_random",
        10000,
        (any::<i8>(), random_bytes(200)),
        |(t, msg)| {
            let len = msg.len();
            let msg = Bytes::from(msg);
            if let Ok(req) = bounded("Request::decode", len, || Request::decode(t, msg))? {
                prop_assert!(Request::is_request_type(t));
                server_side_checks(&req);
            }
            Ok(())
        },
    );
}

#[test]
fn netty_request_round_trip() {
    fuzz("netty_request_round_trip", 3000, request(), |req| {
        let frame = req.encode();
        if let Request::Send(send) = &req {
            // The client's vectored encoder must produce the same frame.
            prop_assert_eq!(&send_frame(send)[..], &frame[..]);
        }
        let (t, msg, body) = split_frame(&frame, usize::MAX).expect("own frame splits");
        prop_assert!(body.is_empty(), "requests have no body");
        let decoded = Request::decode(t, msg).expect("own frame decodes");
        prop_assert_eq!(decoded, req);
        Ok(())
    });
}

#[test]
fn netty_request_mutated() {
    fuzz(
        "netty_request_mutated",
        6000,
        (
            request(),
            mutations(),
            prop_oneof![Just(usize::MAX), 0usize..512],
        ),
        |(req, muts, limit)| {
            let mut frame = req.encode().to_vec();
            // The message alone, mutated: reaches fields the header would otherwise refuse.
            let mut msg = frame[HEADER_LEN..].to_vec();
            apply(&mut msg, &muts);
            let len = msg.len();
            let t = frame[4] as i8;
            let msg = Bytes::from(msg);
            if let Ok(r) = bounded("Request::decode", len, || Request::decode(t, msg))? {
                server_side_checks(&r);
            }
            // The whole frame, mutated, read as the server reads it.
            apply(&mut frame, &muts);
            if frame.len() >= HEADER_LEN {
                if let Ok((t, msg, _)) = split_frame(&frame, limit) {
                    if Request::is_request_type(t) {
                        let len = msg.len();
                        if let Ok(r) = bounded("Request::decode", len, || Request::decode(t, msg))?
                        {
                            server_side_checks(&r);
                        }
                    }
                }
            }
            Ok(())
        },
    );
}

#[test]
fn netty_response_random() {
    fuzz(
        "netty_response_random",
        10000,
        (any::<i8>(), random_bytes(200), random_bytes(40)),
        |(t, msg, body)| {
            let len = msg.len() + body.len();
            let (msg, body) = (Bytes::from(msg), Bytes::from(body));
            let _ = bounded("Response::decode", len, || Response::decode(t, msg, body))?;
            Ok(())
        },
    );
}

#[test]
fn netty_response_round_trip_and_mutated() {
    fuzz(
        "netty_response",
        6000,
        (response(), mutations()),
        |(resp, muts)| {
            let frame = resp.encode();
            let (t, msg, body) = split_frame(&frame, usize::MAX).expect("own frame splits");
            prop_assert_eq!(&body, &resp.body());
            let decoded =
                Response::decode(t, msg.clone(), body.clone()).expect("own frame decodes");
            prop_assert_eq!(&decoded, &resp);

            let mut m = msg.to_vec();
            apply(&mut m, &muts);
            let len = m.len() + body.len();
            let m = Bytes::from(m);
            let _ = bounded("Response::decode", len, || Response::decode(t, m, body))?;

            let mut frame = frame.to_vec();
            apply(&mut frame, &muts);
            if frame.len() >= HEADER_LEN {
                if let Ok((t, msg, body)) = split_frame(&frame, usize::MAX) {
                    let len = msg.len() + body.len();
                    let _ = bounded("Response::decode", len, || Response::decode(t, msg, body))?;
                }
            }
            Ok(())
        },
    );
}

// ---------------------------------------------------------------------------------------------
// 2. Bitmaps (Java-legacy Roaring64NavigableMap)
// ---------------------------------------------------------------------------------------------

/// Id sets covering sparse (array), dense (bitmap) and run-shaped containers across buckets.
fn id_set() -> impl Strategy<Value = RoaringTreemap> {
    let sparse = prop::collection::vec(any::<u64>(), 0..40);
    let small = prop::collection::vec(0u64..(1 << 34), 0..40);
    let dense = prop::option::of((any::<u32>(), 4097u64..5000)).prop_map(|d| match d {
        Some((high, n)) => (0..n)
            .map(|i| (u64::from(high) << 32) | (i * 13 % 65_536))
            .collect(),
        None => Vec::new(),
    });
    let range = prop::option::of((0u64..(1 << 36), 1u64..70_000));
    (sparse, small, dense, range).prop_map(|(a, b, c, r)| {
        let mut map: RoaringTreemap = a.into_iter().chain(b).chain(c).collect();
        if let Some((start, n)) = r {
            map.insert_range(start..start + n);
        }
        map
    })
}

fn decode_bitmap(bytes: &[u8]) -> Result<(), TestCaseError> {
    if let Ok(map) = bounded("bitmap::decode", bytes.len(), || bitmap::decode(bytes))? {
        // Whatever decodes must survive our own encoder unchanged.
        let again = bitmap::decode(&bitmap::encode(&map)).expect("own encoding decodes");
        prop_assert_eq!(again, map);
    }
    Ok(())
}

#[test]
fn bitmap_random() {
    fuzz("bitmap_random", 8000, random_bytes(300), |bytes| {
        decode_bitmap(&bytes)
    });
}

#[test]
fn bitmap_round_trip_and_mutated() {
    fuzz(
        "bitmap_mutated",
        2000,
        (id_set(), mutations()),
        |(map, muts)| {
            let bytes = bitmap::encode(&map).to_vec();
            prop_assert_eq!(&bitmap::decode(&bytes).expect("own encoding decodes"), &map);
            let mut bytes = bytes;
            apply(&mut bytes, &muts);
            decode_bitmap(&bytes)
        },
    );
}

/// A bucket whose container count claims far more containers than the bytes can hold.
#[test]
fn bitmap_hostile_counts() {
    fuzz(
        "bitmap_hostile_counts",
        5000,
        (any::<i32>(), any::<u32>(), any::<u16>(), random_bytes(64)),
        |(buckets, containers, run_count, tail)| {
            for cookie in [12346u32, 12347 | (u32::from(run_count) << 16)] {
                let mut b = vec![0u8];
                b.extend_from_slice(&buckets.to_be_bytes());
                b.extend_from_slice(&7u32.to_be_bytes());
                b.extend_from_slice(&cookie.to_le_bytes());
                if cookie == 12346 {
                    b.extend_from_slice(&containers.to_le_bytes());
                }
                b.extend_from_slice(&tail);
                decode_bitmap(&b)?;
            }
            Ok(())
        },
    );
}

// ---------------------------------------------------------------------------------------------
// 3. Index records and the start-up scan of data/index files
// ---------------------------------------------------------------------------------------------

fn index_entry() -> impl Strategy<Value = IndexEntry> {
    (
        any::<i64>(),
        any::<i32>(),
        any::<i32>(),
        any::<i64>(),
        any::<i64>(),
        any::<i64>(),
    )
        .prop_map(
            |(offset, length, uncompress_length, crc, block_id, task_attempt_id)| IndexEntry {
                offset,
                length,
                uncompress_length,
                crc,
                block_id,
                task_attempt_id,
            },
        )
}

#[test]
fn index_records() {
    fuzz(
        "index_records",
        6000,
        (
            prop::collection::vec(index_entry(), 0..6),
            random_bytes(120),
            any::<u64>(),
            0usize..40,
        ),
        |(entries, random, by, tail)| {
            // Round trip, with a torn tail ignored.
            let mut buf = Vec::new();
            for e in &entries {
                e.encode(&mut buf);
            }
            buf.extend(std::iter::repeat_n(0xa5u8, tail));
            prop_assert_eq!(IndexEntry::decode_all(&buf), entries.clone());

            let decoded = bounded("IndexEntry::decode_all", random.len(), || {
                IndexEntry::decode_all(&random)
            })?;
            prop_assert_eq!(decoded.len(), random.len() / IndexEntry::SIZE);

            // Shifting touches the offset of whole records only.
            let mut shifted = buf.clone();
            shift_offsets(&mut shifted, by);
            prop_assert_eq!(
                &shifted[entries.len() * IndexEntry::SIZE..],
                &buf[entries.len() * IndexEntry::SIZE..]
            );
            for (before, after) in entries.iter().zip(IndexEntry::decode_all(&shifted)) {
                prop_assert_eq!(
                    IndexEntry {
                        offset: before.offset,
                        ..after
                    },
                    *before
                );
                let by = i64::try_from(by).unwrap_or(i64::MAX);
                prop_assert_eq!(after.offset, before.offset.saturating_add(by));
            }
            Ok(())
        },
    );
}

const PREFIX: &str = "10.0.0.7-19999";

/// What one file pair of a partition looks like on disk after a crash.
#[derive(Clone, Debug)]
struct PartFiles {
    /// Block payload lengths, written contiguously.
    blocks: Vec<u8>,
    /// Edits of the index file (a crash tears it; bit rot flips it).
    index_edits: Vec<Mutation>,
    /// The data file is cut to this fraction of its length (a torn data write).
    data_cut: Option<Index>,
    /// Bytes appended to the data file after the last block (written but never indexed).
    data_extra: u8,
    /// The data file is missing altogether.
    no_data: bool,
    /// Part numbers skipped before this one (a part lost with its disk).
    seq_gap: u8,
}

fn part_files() -> impl Strategy<Value = PartFiles> {
    (
        prop::collection::vec(0u8..48, 0..6),
        prop::collection::vec(mutation(), 0..3),
        prop::option::weighted(0.3, any::<Index>()),
        prop_oneof![3 => Just(0u8), 1 => any::<u8>()],
        prop::bool::weighted(0.1),
        prop_oneof![4 => Just(0u8), 1 => 1..3u8],
    )
        .prop_map(
            |(blocks, index_edits, data_cut, data_extra, no_data, seq_gap)| PartFiles {
                blocks,
                index_edits,
                data_cut,
                data_extra,
                no_data,
                seq_gap,
            },
        )
}

/// A partition of up to three parts, plus files that are not ours: one in a directory that is
/// not a partition, one next to the parts with a name that only looks like a part's.
#[derive(Clone, Debug)]
struct ScanCase {
    parts: Vec<PartFiles>,
    noise_dir: Vec<String>,
    noise_file: (String, Vec<u8>),
    stray: Option<(&'static str, Vec<u8>)>,
}

fn scan_case() -> impl Strategy<Value = ScanCase> {
    (
        prop::collection::vec(part_files(), 1..4),
        prop::collection::vec("[a-zA-Z0-9._-]{1,10}", 1..4),
        ("[a-zA-Z0-9._-]{1,20}", random_bytes(90)),
        prop::option::of((
            prop::sample::select(vec![
                "10.0.0.7-19999.0.index",
                "10.0.0.7-19999.01.index",
                "10.0.0.7-19999.4294967296.index",
                "10.0.0.7-19999..index",
                "10.0.0.7-19999.1.index.tmp",
                "10.0.0.7-19999.-1.index",
                "10.0.0.7-1999.index",
                "10.0.0.7-19999.index.index",
            ]),
            random_bytes(90),
        )),
    )
        .prop_map(|(parts, noise_dir, noise_file, stray)| ScanCase {
            parts,
            noise_dir,
            noise_file,
            stray,
        })
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("tokio runtime")
    });
    &RT
}

fn tier(root: &Path) -> std::sync::Arc<LocalFileTier> {
    LocalFileTier::new(LocalFileOptions {
        data_paths: vec![root.to_path_buf()],
        file_prefix: PREFIX.to_owned(),
        high_watermark: 1.0,
        low_watermark: 1.0,
        capacity: None,
        capacity_ratio: 0.9,
        whole_disk_watermark: false,
        init_max_failed_paths: 0,
        min_writable_disks: 0,
        max_concurrency_per_disk: 1,
        sync_on_write: false,
        direct_io: true,
        write_timeout: Duration::from_secs(60),
    })
    .expect("tier over a temp dir")
}

fn part_paths(dir: &Path, seq: usize) -> (PathBuf, PathBuf) {
    let stem = if seq == 0 {
        PREFIX.to_owned()
    } else {
        format!("{PREFIX}.{seq}")
    };
    (
        dir.join(format!("{stem}.data")),
        dir.join(format!("{stem}.index")),
    )
}

/// The records a reader may be given for one part, straight from the format's rules (DATA-FORMATS
/// §3.3): whole records, contiguous from offset 0, each ending inside the data file.
fn adoptable(index: &[u8], data_len: u64) -> Vec<IndexEntry> {
    let mut end = 0i64;
    let mut out = Vec::new();
    for e in IndexEntry::decode_all(index) {
        if e.length < 0 || e.offset != end || (end + i64::from(e.length)) as u64 > data_len {
            break;
        }
        end += i64::from(e.length);
        out.push(e);
    }
    out
}

#[test]
fn fs_localfile_scan() {
    fuzz("fs_localfile_scan", 300, scan_case(), |case| {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("disk0");
        let range_dir = root.join("app_1").join("0").join("0-0");
        std::fs::create_dir_all(&range_dir).unwrap();
        let mut written = 0usize;
        // (part number, data as written, records a reader may get) per part.
        let mut expected: Vec<(usize, Vec<u8>, Vec<IndexEntry>)> = Vec::new();
        let mut next_seq = 0;
        for p in &case.parts {
            let seq = next_seq + usize::from(p.seq_gap);
            next_seq = seq + 1;
            let blocks: Vec<Block> = p
                .blocks
                .iter()
                .enumerate()
                .map(|(i, &len)| Block {
                    block_id: i as i64,
                    task_attempt_id: seq as i64,
                    uncompress_length: i32::from(len) * 2,
                    crc: i as i64 * 31,
                    data: Bytes::from(vec![(seq * 16 + i) as u8; len as usize]),
                })
                .collect();
            let mut data: Vec<u8> = blocks.iter().flat_map(|b| b.data.iter().copied()).collect();
            data.extend(std::iter::repeat_n(0xeeu8, p.data_extra as usize));
            if let Some(cut) = p.data_cut {
                data.truncate(cut.index(data.len() + 1));
            }
            let mut index = encode_blocks(&blocks, 0).to_vec();
            apply(&mut index, &p.index_edits);
            let (data_path, index_path) = part_paths(&range_dir, seq);
            if !p.no_data {
                std::fs::write(&data_path, &data).unwrap();
            } else {
                data.clear();
            }
            std::fs::write(&index_path, &index).unwrap();
            written += data.len() + index.len();
            let records = adoptable(&index, data.len() as u64);
            expected.push((seq, data, records));
        }
        if let Some((name, bytes)) = &case.stray {
            std::fs::write(range_dir.join(name), bytes).unwrap();
            written += bytes.len();
        }
        let noise = case.noise_dir.iter().fold(root.clone(), |d, n| d.join(n));
        if std::fs::create_dir_all(&noise).is_ok() {
            let _ = std::fs::write(noise.join(&case.noise_file.0), &case.noise_file.1);
            written += case.noise_file.1.len();
        }

        let t = tier(&root);
        let report = bounded("LocalFileTier::recover", written, || t.recover(&|_| true))?;
        let key = PartitionKey::new(
            AppId::parse("app_1").unwrap(),
            0,
            PartitionRange::new(0, 0).unwrap(),
        );
        let read = runtime()
            .block_on(t.read_index(&key))
            .expect("index of an adopted partition");

        // Exactly the adoptable records, with offsets continuing across parts.
        let mut want = BytesMut::new();
        let mut base = 0u64;
        for (_, _, records) in &expected {
            for e in records {
                IndexEntry {
                    offset: e.offset + base as i64,
                    ..*e
                }
                .encode(&mut want);
            }
            base += records.iter().map(|e| e.length as u64).sum::<u64>();
        }
        prop_assert_eq!(&read.index[..], &want[..], "adopted index");
        prop_assert_eq!(read.data_len, if want.is_empty() { 0 } else { base });
        prop_assert_eq!(report.blocks as usize, want.len() / IndexEntry::SIZE);
        prop_assert_eq!(report.bytes, base);

        // Every adopted record reads back the bytes that were written for it, and the files were
        // cut to what was adopted.
        let mut base = 0u64;
        for (seq, data, records) in &expected {
            for e in records {
                let got = runtime()
                    .block_on(t.read_data(&key, Span::at(base + e.offset as u64, e.length as u64)))
                    .expect("adopted record reads");
                let at = e.offset as usize;
                prop_assert_eq!(&got[..], &data[at..at + e.length as usize]);
            }
            let adopted: u64 = records.iter().map(|e| e.length as u64).sum();
            let (data_path, index_path) = part_paths(&range_dir, *seq);
            prop_assert_eq!(
                std::fs::metadata(&index_path).unwrap().len(),
                (records.len() * IndexEntry::SIZE) as u64
            );
            if let Ok(m) = std::fs::metadata(&data_path) {
                prop_assert_eq!(m.len(), adopted);
            }
            base += adopted;
        }
        drop(t);

        // A second start finds nothing left to repair.
        let again = tier(&root).recover(&|_| true);
        prop_assert_eq!(again.repaired, 0);
        prop_assert_eq!(again.blocks, report.blocks);
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------------
// 4. The recovery journal
// ---------------------------------------------------------------------------------------------

const SERVER_ID: &str = "10.0.0.1-19999";

/// A portable-format treemap as the journal stores it: valid, mutated, or random bytes.
fn stored_treemap() -> impl Strategy<Value = String> {
    use base64::Engine;
    prop_oneof![
        2 => (id_set(), prop::collection::vec(mutation(), 0..3)).prop_map(|(map, muts)| {
            let mut raw = Vec::new();
            map.serialize_into(&mut raw).unwrap();
            apply(&mut raw, &muts);
            raw
        }),
        1 => random_bytes(40),
    ]
    .prop_map(|raw| base64::engine::general_purpose::STANDARD.encode(raw))
}

fn journal_app() -> impl Strategy<Value = String> {
    prop_oneof![8 => prop::sample::select(vec!["a".to_owned(), "b".to_owned()]), 1 => ".{0,6}"]
}

fn record() -> BoxedStrategy<Record> {
    let shuffle = || prop_oneof![6 => 0..2i32, 1 => 2..3i32, 1 => any::<i32>()];
    prop_oneof![
        1 => (any::<u64>(), ".{0,8}").prop_map(|(gen, server_id)| Record::Header { gen, server_id }),
        1 => Just(Record::SnapshotEnd),
        4 => (
            journal_app(),
            shuffle(),
            prop::collection::vec(any::<(i32, i32)>(), 0..4),
            any::<bool>(),
            ".{0,6}",
            prop::option::of(("[a-z:/]{0,12}", prop::collection::vec((".{0,4}", ".{0,4}"), 0..3))),
            any::<u64>(),
        )
            .prop_map(|(app, shuffle, ranges, local_order, user, remote, at_ms)| Record::Register {
                app,
                shuffle,
                ranges,
                local_order,
                user,
                remote,
                at_ms
            }),
        3 => (
            journal_app(),
            shuffle(),
            any::<i32>(),
            prop::collection::vec((any::<i32>(), prop::collection::vec(any::<i64>(), 0..6)), 0..3),
            prop::collection::vec((any::<i32>(), any::<i64>(), any::<i64>()), 0..3),
            any::<u64>(),
        )
            .prop_map(|(app, shuffle, bitmap_num, parts, records, at_ms)| Record::Report {
                app,
                shuffle,
                bitmap_num,
                parts,
                records,
                at_ms
            }),
        2 => (
            journal_app(),
            shuffle(),
            any::<i32>(),
            prop::collection::vec((any::<i32>(), stored_treemap()), 0..3),
            prop::collection::vec((any::<i32>(), prop::collection::vec((any::<i64>(), any::<i64>()), 0..3)), 0..3),
        )
            .prop_map(|(app, shuffle, bitmap_num, partitions, records)| Record::Ids {
                app,
                shuffle,
                bitmap_num,
                partitions,
                records
            }),
        1 => (journal_app(), shuffle(), any::<i32>()).prop_map(|(app, shuffle, count)| Record::Commit { app, shuffle, count }),
        1 => (journal_app(), shuffle()).prop_map(|(app, shuffle)| Record::DropShuffle { app, shuffle }),
        1 => journal_app().prop_map(|app| Record::DropApp { app }),
        1 => prop::collection::vec((journal_app(), any::<u64>()), 0..3).prop_map(|apps| Record::Seen { apps }),
    ]
    .boxed()
}

/// Replaces one number in a JSON text with an extreme one.
fn extreme_number(json: &str, at: Index, with: &str) -> String {
    let starts: Vec<usize> = json
        .char_indices()
        .filter(|&(i, c)| {
            c.is_ascii_digit() && (i == 0 || !json.as_bytes()[i - 1].is_ascii_digit())
        })
        .map(|(i, _)| i)
        .collect();
    if starts.is_empty() {
        return json.to_owned();
    }
    let start = starts[at.index(starts.len())];
    let end = json[start..]
        .find(|c: char| !c.is_ascii_digit())
        .map_or(json.len(), |n| start + n);
    format!("{}{with}{}", &json[..start], &json[end..])
}

/// One line of a journal file (without its newline).
#[derive(Clone, Debug)]
enum Line {
    Valid(Record),
    /// Bytes edited after the CRC was computed (bit rot, a torn write).
    Damaged(Record, Vec<Mutation>),
    /// JSON edited and the CRC recomputed: reaches the JSON decoder and the replay.
    Rewritten(Record, Vec<Mutation>),
    /// A number replaced by an extreme one, CRC recomputed.
    BigNumber(Record, Index, &'static str),
    /// Any JSON value with a good CRC.
    OtherJson(String),
    Random(Vec<u8>),
}

fn with_crc(json: &[u8]) -> Vec<u8> {
    let mut line = format!("{:08x} ", crc32fast::hash(json)).into_bytes();
    line.extend_from_slice(json);
    line
}

fn json_of(r: &Record) -> Vec<u8> {
    let line = r.to_line();
    line[9..line.len() - 1].to_vec()
}

impl Line {
    fn bytes(&self) -> Vec<u8> {
        let bytes = match self {
            Line::Valid(r) => {
                let line = r.to_line();
                line[..line.len() - 1].to_vec()
            }
            Line::Damaged(r, muts) => {
                let line = r.to_line();
                let mut b = line[..line.len() - 1].to_vec();
                apply(&mut b, muts);
                b
            }
            Line::Rewritten(r, muts) => {
                let mut json = json_of(r);
                apply(&mut json, muts);
                with_crc(&one_line(json))
            }
            Line::BigNumber(r, at, with) => {
                let json = String::from_utf8(json_of(r)).unwrap();
                with_crc(extreme_number(&json, *at, with).as_bytes())
            }
            Line::OtherJson(json) => with_crc(&one_line(json.clone().into_bytes())),
            Line::Random(b) => b.clone(),
        };
        one_line(bytes)
    }
}

/// A newline inside a line would split it in two: the file format cannot carry one.
fn one_line(bytes: Vec<u8>) -> Vec<u8> {
    bytes
        .into_iter()
        .map(|b| if b == b'\n' { b' ' } else { b })
        .collect()
}

/// A journal line; `valid` weighs whole, correct lines against the 7 parts of damaged ones.
fn line(valid: u32) -> BoxedStrategy<Line> {
    let big = prop::sample::select(vec![
        "18446744073709551616",
        "9223372036854775808",
        "4294967296",
        "2147483648",
        "1e400",
        "-1",
        "0.5",
        "00",
    ]);
    let json = prop_oneof![
        concat!(
            r#"\{"t":"(header|snapshot_end|register|report|ids|commit|drop_shuffle|drop_app|seen)""#,
            r#"(,"(gen|server_id|app|shuffle|ranges|local_order|user|remote|at_ms|bitmap_num|parts|partitions|count|apps)":"#,
            r#"(-?\d{1,20}|"[a-z]{0,4}"|\[(\[-?\d{1,3},("[a-z]{0,3}"|\[\d{0,3}\])\])?\]|null|true)){0,4}\}"#
        ),
        r#"\[[0-9,]{0,10}\]"#,
        ".{0,20}",
    ];
    prop_oneof![
        valid => record().prop_map(Line::Valid),
        1 => (record(), mutations()).prop_map(|(r, m)| Line::Damaged(r, m)),
        2 => (record(), mutations()).prop_map(|(r, m)| Line::Rewritten(r, m)),
        2 => (record(), any::<Index>(), big).prop_map(|(r, i, w)| Line::BigNumber(r, i, w)),
        1 => json.prop_map(Line::OtherJson),
        1 => random_bytes(30).prop_map(Line::Random),
    ]
    .boxed()
}

#[test]
fn journal_lines() {
    fuzz("journal_lines", 4000, (record(), line(8)), |(rec, line)| {
        let text = rec.to_line();
        prop_assert_eq!(text.last(), Some(&b'\n'));
        prop_assert_eq!(Record::from_line(&text[..text.len() - 1]), Some(rec));
        let bytes = line.bytes();
        let _ = bounded("Record::from_line", bytes.len(), || {
            Record::from_line(&bytes)
        })?;
        Ok(())
    });
}

/// How the first line of a generation looks.
#[derive(Clone, Debug)]
enum FirstLine {
    Good,
    OtherServer,
    OtherGen,
    Line(Line),
}

#[derive(Clone, Debug)]
struct JournalCase {
    first: FirstLine,
    /// The generation's body; `None` stands for the snapshot-end marker.
    body: Vec<Option<Line>>,
    final_newline: bool,
    /// An older, complete generation next to it (what to fall back to).
    older: Vec<Record>,
}

/// A registration of a shuffle the other records are likely to name.
fn registration() -> impl Strategy<Value = Record> {
    (
        prop::sample::select(vec!["a", "b"]),
        0..2i32,
        prop::collection::vec((0..4i32, 0..4i32), 0..3),
        any::<bool>(),
    )
        .prop_map(|(app, shuffle, ranges, local_order)| Record::Register {
            app: app.to_owned(),
            shuffle,
            ranges,
            local_order,
            user: "u".to_owned(),
            remote: None,
            at_ms: 1,
        })
}

fn journal_case() -> impl Strategy<Value = JournalCase> {
    (
        prop_oneof![
            6 => Just(FirstLine::Good),
            1 => Just(FirstLine::OtherServer),
            1 => Just(FirstLine::OtherGen),
            1 => line(8).prop_map(FirstLine::Line),
        ],
        // A snapshot of registrations, usually closed, then whatever came after it.
        prop::collection::vec(registration(), 1..5),
        prop::bool::weighted(0.75),
        prop::collection::vec(
            prop_oneof![1 => Just(None), 8 => line(40).prop_map(Some)],
            0..12,
        ),
        any::<bool>(),
        prop::collection::vec(record(), 0..4),
    )
        .prop_map(
            |(first, snapshot, snapshot_end, tail, final_newline, older)| JournalCase {
                first,
                body: snapshot
                    .into_iter()
                    .map(|r| Some(Line::Valid(r)))
                    .chain(snapshot_end.then_some(None))
                    .chain(tail)
                    .collect(),
                final_newline,
                older,
            },
        )
}

/// What a journal generation replays to, by the rules of `recovery/journal.rs`: a header of this
/// server and generation, then records up to the first line that fails its CRC or JSON, and a
/// snapshot-end marker among them (else the generation is not used).
fn replay(bytes: &[u8], gen: u64) -> Option<(RecoveredState, usize, bool)> {
    let mut lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    if lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    match Record::from_line(lines.first()?) {
        Some(Record::Header { gen: g, server_id }) if g == gen && server_id == SERVER_ID => {}
        _ => return None,
    }
    let (mut state, mut records, mut complete, mut torn) =
        (RecoveredState::default(), 0, false, false);
    for line in &lines[1..] {
        match Record::from_line(line) {
            Some(Record::SnapshotEnd) => complete = true,
            Some(r) => {
                state.apply(r);
                records += 1;
            }
            None => {
                torn = true;
                break;
            }
        }
    }
    complete.then_some((state, records, torn))
}

fn file_of(lines: impl IntoIterator<Item = Vec<u8>>, final_newline: bool) -> Vec<u8> {
    let mut out = lines.into_iter().collect::<Vec<_>>().join(&b'\n');
    if final_newline {
        out.push(b'\n');
    }
    out
}

#[test]
fn fs_journal_load() {
    fuzz("fs_journal_load", 600, journal_case(), |case| {
        let dir = tempfile::tempdir().unwrap();
        let header = |gen: u64, id: &str| {
            let l = Record::Header {
                gen,
                server_id: id.to_owned(),
            }
            .to_line();
            l[..l.len() - 1].to_vec()
        };
        let older = file_of(
            std::iter::once(header(1, SERVER_ID))
                .chain(case.older.iter().map(|r| Line::Valid(r.clone()).bytes()))
                .chain(std::iter::once(Line::Valid(Record::SnapshotEnd).bytes())),
            true,
        );
        let first = match &case.first {
            FirstLine::Good => header(2, SERVER_ID),
            FirstLine::OtherServer => header(2, "10.0.0.2-19999"),
            FirstLine::OtherGen => header(3, SERVER_ID),
            FirstLine::Line(l) => l.bytes(),
        };
        let newer = file_of(
            std::iter::once(first).chain(case.body.iter().map(|l| match l {
                Some(l) => l.bytes(),
                None => Line::Valid(Record::SnapshotEnd).bytes(),
            })),
            case.final_newline,
        );
        std::fs::write(dir.path().join("journal-0000000000000001.log"), &older).unwrap();
        std::fs::write(dir.path().join("journal-0000000000000002.log"), &newer).unwrap();

        let dirs = vec![dir.path().to_path_buf()];
        let loaded = bounded("load_journal", older.len() + newer.len(), || {
            load_journal(&dirs, SERVER_ID)
        })?;
        let (want_gen, (want_state, want_records, want_torn)) = match replay(&newer, 2) {
            Some(r) => (2, r),
            None => (
                1,
                replay(&older, 1).expect("the older generation is complete"),
            ),
        };
        prop_assert_eq!(loaded.gen, want_gen);
        prop_assert_eq!(loaded.records, want_records);
        prop_assert_eq!(loaded.torn_tail, want_torn);
        prop_assert_eq!(&loaded.state, &want_state);

        // The snapshot written from a replayed state replays to the same state (apps left
        // without a shuffle are not carried over).
        let mut again = RecoveredState::default();
        for r in loaded.state.to_records() {
            let line = r.to_line();
            again.apply(Record::from_line(&line[..line.len() - 1]).expect("own line parses"));
        }
        let mut want = loaded.state.clone();
        want.apps.retain(|_, a| !a.shuffles.is_empty());
        prop_assert_eq!(again, want);
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------------
// 5. Config
// ---------------------------------------------------------------------------------------------

const EXAMPLE_CONFIG: &str = include_str!("../config.toml.example");

/// A line-level edit of a TOML document.
#[derive(Clone, Debug)]
enum TomlEdit {
    DropLine(Index),
    DuplicateLine(Index),
    /// Replace the value of a `key = value` line.
    Value(Index, String),
    /// Insert a `key = value` line with a key taken from another line.
    MoveKey(Index, Index),
    Bytes(Vec<Mutation>),
}

fn toml_value() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "-1",
            "0",
            "1e309",
            "nan",
            "-inf",
            "9223372036854775808",
            "18446744073709551616",
            "\"18446744073709551616\"",
            "\"1Z\"",
            "\"\"",
            "\"-5s\"",
            "\"1.5.5G\"",
            "\"99999999999E\"",
            "\"0.0000000000000000000001K\"",
            "\"18446744073709551615E\"",
            "\"9999999999999999999h\"",
            "[]",
            "{}",
            "true",
            "\"\\u0000\"",
            "[\"\", \"/\"]",
            "{ a = 1 }",
            "1979-05-27T07:32:00Z",
            "\"0.0.0.0:99999\"",
            "[1, \"a\"]",
            "-0.0",
            "1.0000001",
        ])
        .prop_map(str::to_owned),
        any::<i64>().prop_map(|v| v.to_string()),
        any::<f64>().prop_map(|v| format!("{v:?}")),
        "\"[ -~]{0,12}\"",
        "\"[0-9]{1,25}(\\.[0-9]{0,25})?[KMGTPEB]?\"",
        "\"[0-9]{1,22}(ms|s|m|h|d|ns)\"",
    ]
}

fn toml_edit() -> impl Strategy<Value = TomlEdit> {
    prop_oneof![
        1 => any::<Index>().prop_map(TomlEdit::DropLine),
        1 => any::<Index>().prop_map(TomlEdit::DuplicateLine),
        5 => (any::<Index>(), toml_value()).prop_map(|(i, v)| TomlEdit::Value(i, v)),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| TomlEdit::MoveKey(a, b)),
        1 => mutations().prop_map(TomlEdit::Bytes),
    ]
}

fn edit_toml(text: &str, edits: &[TomlEdit]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let assignment = |lines: &[String]| -> Vec<usize> {
        (0..lines.len())
            .filter(|&i| !lines[i].trim_start().starts_with('#') && lines[i].contains('='))
            .collect()
    };
    for e in edits {
        match e {
            TomlEdit::DropLine(i) if !lines.is_empty() => {
                lines.remove(i.index(lines.len()));
            }
            TomlEdit::DuplicateLine(i) if !lines.is_empty() => {
                let at = i.index(lines.len());
                lines.insert(at, lines[at].clone());
            }
            TomlEdit::Value(i, value) => {
                let candidates = assignment(&lines);
                if !candidates.is_empty() {
                    let at = candidates[i.index(candidates.len())];
                    let key = lines[at].split('=').next().unwrap_or("").to_owned();
                    lines[at] = format!("{key}= {value}");
                }
            }
            TomlEdit::MoveKey(from, to) if !lines.is_empty() => {
                let candidates = assignment(&lines);
                if !candidates.is_empty() {
                    let line = lines[candidates[from.index(candidates.len())]].clone();
                    lines.insert(to.index(lines.len() + 1), line);
                }
            }
            TomlEdit::Bytes(muts) => {
                let mut bytes = lines.join("\n").into_bytes();
                apply(&mut bytes, muts);
                lines = String::from_utf8_lossy(&bytes)
                    .lines()
                    .map(str::to_owned)
                    .collect();
            }
            _ => {}
        }
    }
    lines.join("\n")
}

fn check_config(text: &str) -> Result<(), TestCaseError> {
    match bounded("Config::from_toml_str", text.len(), || {
        Config::from_toml_str(text)
    })? {
        Ok(config) => {
            // Whatever was accepted is written back and read again unchanged.
            let again = toml::to_string(&config).expect("a config serializes");
            prop_assert_eq!(
                Config::from_toml_str(&again),
                Ok(config),
                "round trip of {}",
                again
            );
        }
        Err(e) => {
            prop_assert!(!e.key.trim().is_empty(), "an error without a key: {e:?}");
            prop_assert!(
                !e.reason.trim().is_empty(),
                "an error without a reason: {e:?}"
            );
        }
    }
    Ok(())
}

#[test]
fn config_toml() {
    let default_text = toml::to_string(&Config::default()).expect("default config serializes");
    assert_eq!(Config::from_toml_str(&default_text), Ok(Config::default()));
    assert!(
        Config::from_toml_str(EXAMPLE_CONFIG).is_ok(),
        "the example config loads"
    );
    let base = prop_oneof![Just(default_text), Just(EXAMPLE_CONFIG.to_owned())];
    fuzz(
        "config_toml",
        2000,
        prop_oneof![
            6 => (base, prop::collection::vec(toml_edit(), 1..4)).prop_map(|(text, edits)| edit_toml(&text, &edits)),
            1 => ".{0,120}",
            1 => "([a-z_]{1,12}( = [^\n]{0,12})?\n|\\[[a-z_.]{0,16}\\]\n){0,6}",
        ],
        |text| check_config(&text),
    );
}

// ---------------------------------------------------------------------------------------------
// 6. gRPC request messages
// ---------------------------------------------------------------------------------------------

/// One protobuf field, encoded by hand so that the stream can lie about lengths and wire types.
#[derive(Clone, Debug)]
enum PbField {
    Varint(u32, u64),
    Fixed64(u32, u64),
    Fixed32(u32, u32),
    Bytes(u32, Vec<u8>),
    Message(u32, Vec<PbField>),
    /// A length prefix that promises more (or other) than follows.
    LyingLength(u32, u64, Vec<u8>),
    Packed(u32, Vec<u64>),
    Raw(Vec<u8>),
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_key(out: &mut Vec<u8>, field: u32, wire: u8) {
    put_varint(out, (u64::from(field) << 3) | u64::from(wire));
}

impl PbField {
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            PbField::Varint(f, v) => {
                put_key(out, *f, 0);
                put_varint(out, *v);
            }
            PbField::Fixed64(f, v) => {
                put_key(out, *f, 1);
                out.extend_from_slice(&v.to_le_bytes());
            }
            PbField::Fixed32(f, v) => {
                put_key(out, *f, 5);
                out.extend_from_slice(&v.to_le_bytes());
            }
            PbField::Bytes(f, b) => {
                put_key(out, *f, 2);
                put_varint(out, b.len() as u64);
                out.extend_from_slice(b);
            }
            PbField::Message(f, fields) => {
                let inner = encode_fields(fields);
                put_key(out, *f, 2);
                put_varint(out, inner.len() as u64);
                out.extend_from_slice(&inner);
            }
            PbField::LyingLength(f, len, b) => {
                put_key(out, *f, 2);
                put_varint(out, *len);
                out.extend_from_slice(b);
            }
            PbField::Packed(f, values) => {
                let mut inner = Vec::new();
                for v in values {
                    put_varint(&mut inner, *v);
                }
                put_key(out, *f, 2);
                put_varint(out, inner.len() as u64);
                out.extend_from_slice(&inner);
            }
            PbField::Raw(b) => out.extend_from_slice(b),
        }
    }
}

fn encode_fields(fields: &[PbField]) -> Vec<u8> {
    let mut out = Vec::new();
    for f in fields {
        f.encode(&mut out);
    }
    out
}

fn pb_fields() -> impl Strategy<Value = Vec<PbField>> {
    let field_no =
        || prop_oneof![20 => 1u32..=10, 1 => Just(0u32), 1 => Just((1 << 29) - 1), 1 => 11u32..100];
    let varint = || {
        prop_oneof![
            any::<u64>(),
            0u64..300,
            prop::sample::select(vec![
                u64::MAX,
                i64::MAX as u64,
                (-1i64) as u64,
                u32::MAX as u64,
                i32::MAX as u64,
                1 << 31
            ])
        ]
    };
    let leaf = prop_oneof![
        4 => (field_no(), varint()).prop_map(|(f, v)| PbField::Varint(f, v)),
        1 => (field_no(), any::<u64>()).prop_map(|(f, v)| PbField::Fixed64(f, v)),
        1 => (field_no(), any::<u32>()).prop_map(|(f, v)| PbField::Fixed32(f, v)),
        4 => (field_no(), prop_oneof![random_bytes(24), "[a-zA-Z0-9_-]{0,16}".prop_map(String::into_bytes), bitmap_bytes()])
            .prop_map(|(f, b)| PbField::Bytes(f, b)),
        1 => (field_no(), prop::sample::select(vec![u64::MAX, i64::MAX as u64, u32::MAX as u64, i32::MAX as u64, 1 << 32, 5]), random_bytes(8))
            .prop_map(|(f, l, b)| PbField::LyingLength(f, l, b)),
        2 => (field_no(), prop::collection::vec(varint(), 0..6)).prop_map(|(f, v)| PbField::Packed(f, v)),
        1 => random_bytes(6).prop_map(PbField::Raw),
    ];
    let fields = leaf.prop_recursive(3, 48, 6, move |inner| {
        prop_oneof![
            3 => inner.clone(),
            2 => (1u32..=10, prop::collection::vec(inner, 0..6)).prop_map(|(f, v)| PbField::Message(f, v)),
        ]
    });
    prop::collection::vec(fields, 0..10)
}

/// Decodes `bytes` as `M` (within the allocation bound), runs the server's checks on what
/// decodes, and checks that a decoded message survives its own encoding.
fn check_message<M>(bytes: &[u8], checks: fn(&M)) -> Result<(), TestCaseError>
where
    M: prost::Message + Default + PartialEq + Debug,
{
    if let Ok(m) = bounded(std::any::type_name::<M>(), bytes.len(), || M::decode(bytes))? {
        checks(&m);
        let again = M::decode(&m.encode_to_vec()[..]).expect("own encoding decodes");
        prop_assert_eq!(again, m);
    }
    Ok(())
}

/// A message of type `M` with as many of `fields` as it accepts: each field is merged alone and
/// kept when it decodes, so every message type gets valid encodings with many fields set.
fn valid_message<M>(fields: &[PbField]) -> M
where
    M: prost::Message + Default + Clone,
{
    let mut m = M::default();
    for f in fields {
        let mut one = Vec::new();
        f.encode(&mut one);
        let mut next = m.clone();
        if next.merge(&one[..]).is_ok() {
            m = next;
        }
    }
    m
}

fn no_checks<M>(_: &M) {}

fn app_checks(app_id: &str) {
    if let Ok(app) = convert::app_id(app_id) {
        assert_eq!(app.as_str(), app_id);
        assert!(
            !app_id.is_empty() && !app_id.contains(['/', '\\', '\0']) && !app_id.starts_with('.')
        );
    }
}

fn layout_checks(layout: Option<&proto::BlockIdLayout>, ids: &[i64]) {
    if let Ok(l) = convert::layout(layout) {
        for &id in ids {
            let id = id & i64::MAX;
            let p = l.partition_of(id);
            let t = l.task_attempt_of(id);
            assert!(p >= 0 && t >= 0);
            let seq = id >> (l.partition_bits + l.task_attempt_bits);
            assert_eq!(l.block_id(seq, p, t), id, "{l:?}");
        }
    }
}

/// Every ShuffleServer (and internal) request type, with what the handler checks first.
type Target = (
    &'static str,
    fn(&[u8]) -> Result<(), TestCaseError>,
    fn(&[PbField]) -> Vec<u8>,
);

macro_rules! message_target {
    ($ty:ty, $checks:expr) => {
        (
            stringify!($ty),
            (|b: &[u8]| check_message::<$ty>(b, $checks)) as fn(&[u8]) -> Result<(), TestCaseError>,
            (|f: &[PbField]| prost::Message::encode_to_vec(&valid_message::<$ty>(f)))
                as fn(&[PbField]) -> Vec<u8>,
        )
    };
}

fn grpc_targets() -> Vec<Target> {
    vec![
        message_target!(proto::ShuffleRegisterRequest, |m| {
            app_checks(&m.app_id);
            if let Ok(ranges) = convert::ranges(&m.partition_ranges) {
                for r in ranges {
                    assert!(0 <= r.start && r.start <= r.end);
                    assert!(!r.dir_name().contains('/'));
                }
            }
        }),
        message_target!(proto::ShuffleUnregisterRequest, |m| app_checks(&m.app_id)),
        message_target!(proto::ShuffleUnregisterByAppIdRequest, |m| app_checks(
            &m.app_id
        )),
        message_target!(proto::SendShuffleDataRequest, |m| {
            app_checks(&m.app_id);
            if let Ok(parts) = convert::blocks(convert::grpc_parts(m.shuffle_data.clone())) {
                for (p, blocks) in parts {
                    assert!(p >= 0);
                    assert!(blocks.iter().all(|b| b.block_id >= 0));
                }
            }
        }),
        message_target!(proto::GetLocalShuffleIndexRequest, |m| {
            app_checks(&m.app_id);
            read_range_checks(m.partition_id, m.partition_num_per_range, m.partition_num);
        }),
        message_target!(proto::GetLocalShuffleDataRequest, |m| {
            app_checks(&m.app_id);
            read_range_checks(m.partition_id, m.partition_num_per_range, m.partition_num);
        }),
        message_target!(proto::GetMemoryShuffleDataRequest, |m| {
            app_checks(&m.app_id);
            if let Some(b) = &m.serialized_expected_task_ids_bitmap {
                let _ = bitmap::decode(b);
            }
        }),
        message_target!(proto::ShuffleCommitRequest, |m| app_checks(&m.app_id)),
        message_target!(proto::ReportShuffleResultRequest, |m| {
            app_checks(&m.app_id);
            for p in &m.partition_to_block_ids {
                let _ = convert::partition(p.partition_id);
                layout_checks(None, &p.block_ids);
            }
        }),
        message_target!(proto::GetShuffleResultRequest, |m| {
            app_checks(&m.app_id);
            layout_checks(
                m.block_id_layout.as_ref(),
                &[i64::MAX, 0, 6_291_463, i64::from(m.partition_id)],
            );
        }),
        message_target!(proto::GetShuffleResultForMultiPartRequest, |m| {
            app_checks(&m.app_id);
            let ids: Vec<i64> = m.partitions.iter().map(|&p| i64::from(p) << 21).collect();
            layout_checks(m.block_id_layout.as_ref(), &ids);
        }),
        message_target!(proto::FinishShuffleRequest, |m| app_checks(&m.app_id)),
        message_target!(proto::RequireBufferRequest, |m| {
            if !m.app_id.is_empty() {
                app_checks(&m.app_id);
            }
            for &p in &m.partition_ids {
                let _ = convert::partition(p);
            }
        }),
        message_target!(proto::AppHeartBeatRequest, |m| app_checks(&m.app_id)),
        message_target!(proto::StartSortMergeRequest, |m| {
            app_checks(&m.app_id);
            let _ = bitmap::decode(&m.unique_blocks_bitmap);
        }),
        message_target!(proto::GetSortedShuffleDataRequest, |m| app_checks(
            &m.app_id
        )),
        message_target!(proto::DecommissionRequest, no_checks),
        message_target!(proto::CancelDecommissionRequest, no_checks),
        // The embedded coordinator's requests arrive on the same port.
        message_target!(proto::ShuffleServerHeartBeatRequest, no_checks),
        message_target!(proto::GetShuffleServerRequest, no_checks),
        message_target!(proto::ReportShuffleClientOpRequest, no_checks),
        message_target!(proto::ApplicationInfoRequest, no_checks),
        message_target!(proto::AccessClusterRequest, no_checks),
        message_target!(proto::FetchClientConfRequest, no_checks),
        message_target!(proto::FetchRemoteStorageRequest, no_checks),
    ]
}

#[test]
fn grpc_requests_random() {
    let targets = grpc_targets();
    fuzz(
        "grpc_requests_random",
        2000,
        prop_oneof![3 => pb_fields().prop_map(|f| encode_fields(&f)), 1 => random_bytes(64)],
        |bytes| {
            for (_, check, _) in &targets {
                check(&bytes)?;
            }
            Ok(())
        },
    );
}

#[test]
fn grpc_requests_mutated() {
    let targets = grpc_targets();
    fuzz(
        "grpc_requests_mutated",
        2000,
        (pb_fields(), mutations()),
        |(fields, muts)| {
            for (_, check, valid) in &targets {
                let mut bytes = valid(&fields);
                check(&bytes)?;
                apply(&mut bytes, &muts);
                check(&bytes)?;
            }
            Ok(())
        },
    );
}

// ---------------------------------------------------------------------------------------------
// Regressions: minimal inputs of the crashes these targets found
// ---------------------------------------------------------------------------------------------

#[test]
fn grpc_target_list_covers_every_shuffle_server_request() {
    let names: Vec<&str> = grpc_targets().iter().map(|(n, _, _)| *n).collect();
    for want in [
        "ShuffleRegisterRequest",
        "ShuffleUnregisterRequest",
        "ShuffleUnregisterByAppIdRequest",
        "SendShuffleDataRequest",
        "GetLocalShuffleIndexRequest",
        "GetLocalShuffleDataRequest",
        "GetMemoryShuffleDataRequest",
        "ShuffleCommitRequest",
        "ReportShuffleResultRequest",
        "GetShuffleResultRequest",
        "GetShuffleResultForMultiPartRequest",
        "FinishShuffleRequest",
        "RequireBufferRequest",
        "AppHeartBeatRequest",
        "StartSortMergeRequest",
        "GetSortedShuffleDataRequest",
    ] {
        assert!(
            names.iter().any(|n| n.ends_with(want)),
            "{want} is not fuzzed"
        );
    }
}

/// A quoted key holding only a vertical tab (invalid in a basic string) was reported as that
/// key: an error naming an invisible key.
#[test]
fn regression_config_blank_quoted_key_names_the_line() {
    let err = Config::from_toml_str("\"\u{b}\"=").unwrap_err();
    assert!(!err.key.trim().is_empty(), "{err:?}");
}

/// `[]` is a syntax error whose recovered table has one entry with an empty key: the error
/// named that empty key, i.e. no key at all.
#[test]
fn regression_config_empty_table_header_names_a_key() {
    let err = Config::from_toml_str("[]\n").unwrap_err();
    assert_eq!(err.key, "<document>", "{err:?}");
}

/// A damaged index record's offset plus the data length of the earlier parts overflowed
/// (a panic in debug builds, a wrapped offset in release).
#[test]
fn regression_shift_offsets_saturates() {
    let record = |offset| {
        let mut rec = Vec::new();
        IndexEntry {
            offset,
            length: 0,
            uncompress_length: 0,
            crc: 0,
            block_id: 0,
            task_attempt_id: 0,
        }
        .encode(&mut rec);
        rec
    };
    let mut rec = record(-3_077_086_571_650_193_714);
    shift_offsets(&mut rec, 9_223_372_036_854_775_808);
    assert_eq!(
        IndexEntry::decode_all(&rec)[0].offset,
        i64::MAX - 3_077_086_571_650_193_714
    );
    let mut rec = record(i64::MAX);
    shift_offsets(&mut rec, 1);
    assert_eq!(IndexEntry::decode_all(&rec)[0].offset, i64::MAX);
}

/// `Header::parse` read past the end of a slice shorter than a header (its callers never pass
/// one, but it is public and reads untrusted bytes).
#[test]
fn regression_short_header_is_eof() {
    for len in 0..HEADER_LEN {
        let raw = vec![0u8; len];
        let got = Header::parse(&raw, usize::MAX);
        assert!(
            matches!(got, Err(FrameError::Eof { got, want: HEADER_LEN }) if got == len),
            "{got:?}"
        );
    }
}

/// The allocation bound must catch a decoder that trusts a declared length.
#[test]
fn allocation_bound_catches_a_trusting_decoder() {
    let input = [0x7f, 0xff, 0xff, 0xff];
    let trusting = || Vec::<u8>::with_capacity(u32::from_be_bytes(input) as usize / 256);
    assert!(bounded("trusting", input.len(), trusting).is_err());
    let careful = || Vec::<u8>::with_capacity(input.len());
    assert!(bounded("careful", input.len(), careful).is_ok());
}
