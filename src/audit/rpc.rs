//! The RPC audit log: one line per audited request, in the layout of Uniffle's
//! `RpcAuditContext` + `ServerRpcAuditContext` behind log4j's `RPCAuditAppender`
//! (`[%d{yyyy-MM-dd HH:mm:ss.SSS}] %m%n`):
//!
//! ```text
//! [2025-09-01 12:00:00.123] cmd=requireBuffer<TAB>statusCode=SUCCESS<TAB>from=/10.0.0.7:51234<TAB>executionTimeUs=87<TAB>appId=app_1<TAB>shuffleId=0<TAB>args{requireSize=1024, partitionIdsSize=2, partitionIds=[0, 1]}<TAB>return{requireBufferId=5}
//! ```
//!
//! `args{…}` and `return{…}` appear only for the commands Java gives them, with Java's field
//! names and order (`ShuffleServerGrpcService`, `ShuffleServerNettyHandler`).
//!
//! The coordinator's log (`coordinator_rpc_audit.log`, Java's `COORDINATOR_RPC_AUDIT_LOG` behind
//! `CoordinatorRpcAuditContext`) shares the layout and this writer; its context adds only
//! `appId=`, so its lines carry no `shuffleId=` field (`getShuffleAssignments` puts the shuffle
//! id first in its `args{}` instead), and it never has a `return{}` part:
//!
//! ```text
//! [2025-09-01 12:00:00.123] cmd=registerApplicationInfo<TAB>statusCode=SUCCESS<TAB>from=/10.0.0.7:51234<TAB>executionTimeUs=41<TAB>appId=app_1<TAB>args{user=alice}
//! ```

use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Instant, SystemTime};

use prometheus::IntCounter;

use super::writer::{write_millis, Record, Sink};
use crate::config::AuditConfig;

/// The commands Java audits, by the name its line carries and its exclude list matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Command {
    /// `registerShuffle`
    RegisterShuffle,
    /// `unregisterShuffle`
    UnregisterShuffle,
    /// `unregisterShuffleByAppId`
    UnregisterShuffleByAppId,
    /// `sendShuffleData` (both planes)
    SendShuffleData,
    /// `commitShuffleTask`
    CommitShuffleTask,
    /// `finishShuffle`
    FinishShuffle,
    /// `requireBuffer`
    RequireBuffer,
    /// `appHeartbeat`
    AppHeartbeat,
    /// `reportShuffleResult`
    ReportShuffleResult,
    /// `getShuffleResult`
    GetShuffleResult,
    /// `getShuffleResultForMultiPart`
    GetShuffleResultForMultiPart,
    /// `getLocalShuffleData` (both planes)
    GetLocalShuffleData,
    /// `getLocalShuffleIndex` (both planes)
    GetLocalShuffleIndex,
    /// `getMemoryShuffleData` (both planes)
    GetMemoryShuffleData,
    /// `startSortMerge`
    StartSortMerge,
    /// `getSortedShuffleData` (gRPC only: Java's Netty handler does not audit it)
    GetSortedShuffleData,
    /// Coordinator: `getShuffleAssignments`
    GetShuffleAssignments,
    /// Coordinator: `heartbeat` (a shuffle server's)
    Heartbeat,
    /// Coordinator: `checkServiceAvailable`
    CheckServiceAvailable,
    /// Coordinator: `reportClientOperation`
    ReportClientOperation,
    /// Coordinator: `appHeartbeat` (the same name as the server's command, a line of the
    /// coordinator's layout)
    CoordinatorAppHeartbeat,
    /// Coordinator: `registerApplicationInfo`
    RegisterApplicationInfo,
    /// Coordinator: `accessCluster`
    AccessCluster,
    /// Coordinator: `fetchClientConf`
    FetchClientConf,
    /// Coordinator: `fetchClientConfV2`
    FetchClientConfV2,
    /// Coordinator: `fetchRemoteStorage`
    FetchRemoteStorage,
}

impl Command {
    /// Every command, for matching exclude-list names.
    pub const ALL: [Command; 26] = [
        Command::RegisterShuffle,
        Command::UnregisterShuffle,
        Command::UnregisterShuffleByAppId,
        Command::SendShuffleData,
        Command::CommitShuffleTask,
        Command::FinishShuffle,
        Command::RequireBuffer,
        Command::AppHeartbeat,
        Command::ReportShuffleResult,
        Command::GetShuffleResult,
        Command::GetShuffleResultForMultiPart,
        Command::GetLocalShuffleData,
        Command::GetLocalShuffleIndex,
        Command::GetMemoryShuffleData,
        Command::StartSortMerge,
        Command::GetSortedShuffleData,
        Command::GetShuffleAssignments,
        Command::Heartbeat,
        Command::CheckServiceAvailable,
        Command::ReportClientOperation,
        Command::CoordinatorAppHeartbeat,
        Command::RegisterApplicationInfo,
        Command::AccessCluster,
        Command::FetchClientConf,
        Command::FetchClientConfV2,
        Command::FetchRemoteStorage,
    ];

    /// The name Java logs (`cmd=`) and matches against the exclude list (case-sensitive, as
    /// Java's `List.contains`).
    pub fn name(self) -> &'static str {
        match self {
            Command::RegisterShuffle => "registerShuffle",
            Command::UnregisterShuffle => "unregisterShuffle",
            Command::UnregisterShuffleByAppId => "unregisterShuffleByAppId",
            Command::SendShuffleData => "sendShuffleData",
            Command::CommitShuffleTask => "commitShuffleTask",
            Command::FinishShuffle => "finishShuffle",
            Command::RequireBuffer => "requireBuffer",
            Command::AppHeartbeat => "appHeartbeat",
            Command::ReportShuffleResult => "reportShuffleResult",
            Command::GetShuffleResult => "getShuffleResult",
            Command::GetShuffleResultForMultiPart => "getShuffleResultForMultiPart",
            Command::GetLocalShuffleData => "getLocalShuffleData",
            Command::GetLocalShuffleIndex => "getLocalShuffleIndex",
            Command::GetMemoryShuffleData => "getMemoryShuffleData",
            Command::StartSortMerge => "startSortMerge",
            Command::GetSortedShuffleData => "getSortedShuffleData",
            Command::GetShuffleAssignments => "getShuffleAssignments",
            Command::Heartbeat => "heartbeat",
            Command::CheckServiceAvailable => "checkServiceAvailable",
            Command::ReportClientOperation => "reportClientOperation",
            Command::CoordinatorAppHeartbeat => "appHeartbeat",
            Command::RegisterApplicationInfo => "registerApplicationInfo",
            Command::AccessCluster => "accessCluster",
            Command::FetchClientConf => "fetchClientConf",
            Command::FetchClientConfV2 => "fetchClientConfV2",
            Command::FetchRemoteStorage => "fetchRemoteStorage",
        }
    }

    /// A command of the coordinator's log, whose lines have no `shuffleId=` field.
    pub fn is_coordinator(self) -> bool {
        self as u8 >= Command::GetShuffleAssignments as u8
    }

    fn bit(self) -> u32 {
        1 << (self as u8)
    }
}

/// A block-id layout as Java's `BlockIdLayout.toString` renders it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Sequence-number bits.
    pub seq: i32,
    /// Partition-id bits.
    pub part: i32,
    /// Task-attempt-id bits.
    pub task: i32,
}

/// The partition a local read (index or data) names, as its audit line shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadTarget {
    /// `requestId`: only on the Netty plane.
    pub request_id: Option<i64>,
    /// `partitionId`.
    pub partition_id: i32,
    /// `partitionNumPerRange`.
    pub per_range: i32,
    /// `partitionNum`.
    pub partition_num: i32,
}

/// The `args{…}` of one command, kept as the request's numbers so that rendering happens on
/// the writer thread.
#[derive(Debug, Clone, PartialEq)]
pub enum Args {
    /// No `args{}` part.
    None,
    /// registerShuffle.
    Register {
        /// `remoteStoragePath` (empty when none).
        remote_storage_path: String,
        /// `user`.
        user: String,
    },
    /// sendShuffleData over gRPC.
    Send {
        /// `requireBufferId`.
        require_buffer_id: i64,
        /// `timestamp` (client ms).
        timestamp: i64,
        /// `stageAttemptNumber`.
        stage_attempt_number: i32,
        /// `shuffleDataSize`: the number of partitions in the request.
        shuffle_data_size: usize,
    },
    /// sendShuffleData over Netty: Java's Netty handler logs the ticket it took instead of the
    /// client timestamp.
    SendNetty {
        /// `requireBufferId`.
        require_buffer_id: i64,
        /// `requireSize`: the ticket's reservation (0 when no ticket was taken).
        require_size: i32,
        /// `isPreAllocated`: whether the ticket was found.
        is_pre_allocated: bool,
        /// `requireBlocksSize`: `requireSize` less the frame's encoded length, floored at 0.
        require_blocks_size: i32,
        /// `stageAttemptNumber`: Java's Netty request has no such field on the wire (its
        /// encoder writes none and its decoder reads none), so Java always logs 0.
        stage_attempt_number: i32,
        /// `partitionCount`.
        partition_count: usize,
    },
    /// requireBuffer.
    RequireBuffer {
        /// `requireSize`.
        require_size: i32,
        /// The partition ids (`partitionIdsSize` and Java's segment rendering).
        partition_ids: Vec<i32>,
    },
    /// reportShuffleResult.
    Report {
        /// `taskAttemptId`.
        task_attempt_id: i64,
        /// `bitmapNum`.
        bitmap_num: i32,
        /// `partitionToBlockIdsSize`: partitions with at least one block id.
        partitions: usize,
    },
    /// getShuffleResult.
    Result {
        /// `partitionId`.
        partition_id: i32,
        /// `blockIdLayout`.
        layout: Layout,
    },
    /// getShuffleResultForMultiPart.
    ResultMulti {
        /// The partitions (`partitionsListSize`, `partitionIds`).
        partitions: Vec<i32>,
        /// `blockIdLayout`.
        layout: Layout,
    },
    /// getLocalShuffleData.
    LocalData {
        /// The partition read.
        target: ReadTarget,
        /// `offset`.
        offset: i64,
        /// `length`.
        length: i32,
        /// `storageId`.
        storage_id: i32,
    },
    /// getLocalShuffleIndex.
    LocalIndex(ReadTarget),
    /// getMemoryShuffleData; `request_id` only on the Netty plane.
    Memory {
        /// `requestId` (Netty).
        request_id: Option<i64>,
        /// `partitionId`.
        partition_id: i32,
        /// `blockId`: the last block id the client has.
        block_id: i64,
        /// `readBufferSize`.
        read_buffer_size: i32,
    },
    /// startSortMerge.
    SortMerge {
        /// `partitionId`.
        partition_id: i32,
    },
    /// getSortedShuffleData.
    Sorted {
        /// `partitionId`.
        partition_id: i32,
        /// `blockId`.
        block_id: i64,
    },
    /// Coordinator getShuffleAssignments.
    Assignment {
        /// `shuffleId`.
        shuffle_id: i32,
        /// `partitionNum`.
        partition_num: i32,
        /// `partitionNumPerRange`.
        per_range: i32,
        /// `replica`.
        replica: i32,
        /// `requiredTags`, as the request lists them (rendered in Java's `HashSet` order).
        tags: Vec<String>,
        /// `requiredShuffleServerNumber`.
        server_number: i32,
        /// `faultyServerIds`, as the request lists them (rendered in `HashSet` order).
        faulty: Vec<String>,
    },
    /// Coordinator heartbeat: `serverNode=` + the server's id.
    ServerNode(String),
    /// Coordinator registerApplicationInfo: `user=`.
    User(String),
    /// Coordinator reportClientOperation: `host:port->operation->server`.
    ClientOperation {
        /// The client's host.
        host: String,
        /// The client's port.
        port: i32,
        /// The operation.
        operation: String,
        /// The server (protobuf text format, as Java's message `toString`; empty when unset).
        server: Option<crate::proto::ShuffleServerId>,
    },
    /// Coordinator accessCluster: `accessInfo=AccessInfo{…}`.
    Access {
        /// `accessId`.
        access_id: String,
        /// `user`.
        user: String,
        /// `tags` (rendered in `HashSet` order).
        tags: Vec<String>,
        /// `extraProperties`, sorted by key (see [`write_args`]).
        properties: Vec<(String, String)>,
    },
}

/// The `return{…}` part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ret {
    /// No `return{}` part.
    None,
    /// `commitCount=`
    CommitCount(i32),
    /// `requireBufferId=`
    RequireBufferId(i64),
    /// `len=`
    Len(u64),
    /// gRPC memory read: `len=…, bufferSegmentSize=…`.
    MemoryGrpc {
        /// Bytes.
        len: u64,
        /// Segments.
        segments: usize,
    },
    /// Netty memory read: `len=…, bufferSegments=…` (Java's Netty handler names it so).
    MemoryNetty {
        /// Bytes.
        len: u64,
        /// Segments.
        segments: usize,
    },
}

/// One audited request.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcRecord {
    /// When the line is logged (the request's end).
    pub at: SystemTime,
    /// `cmd=`
    pub command: Command,
    /// `statusCode=`: a Uniffle status name.
    pub status: &'static str,
    /// `from=`: the peer, or Java's `null` when unknown.
    pub from: Option<SocketAddr>,
    /// `executionTimeUs=`
    pub micros: u64,
    /// `appId=`; `None` renders Java's default `N/A`.
    pub app_id: Option<String>,
    /// `shuffleId=`; Java's default is -1.
    pub shuffle_id: i32,
    /// `args{…}`
    pub args: Args,
    /// `return{…}`
    pub ret: Ret,
}

impl Record for RpcRecord {
    fn write_line(&self, out: &mut dyn Write) -> io::Result<()> {
        out.write_all(b"[")?;
        write_millis(out, self.at)?;
        write!(
            out,
            "] cmd={}\tstatusCode={}\tfrom=",
            self.command.name(),
            self.status
        )?;
        match self.from {
            Some(addr) => write_java_socket_addr(out, addr)?,
            None => out.write_all(b"null")?,
        }
        write!(
            out,
            "\texecutionTimeUs={}\tappId={}",
            self.micros,
            self.app_id.as_deref().unwrap_or("N/A"),
        )?;
        if !self.command.is_coordinator() {
            write!(out, "\tshuffleId={}", self.shuffle_id)?;
        }
        write_args(out, &self.args)?;
        write_ret(out, self.ret)
    }
}

fn write_layout(out: &mut dyn Write, l: Layout) -> io::Result<()> {
    write!(
        out,
        "blockIdLayout[seq: {} bits, part: {} bits, task: {} bits]",
        l.seq, l.part, l.task
    )
}

fn write_request_id(out: &mut dyn Write, id: Option<i64>) -> io::Result<()> {
    match id {
        Some(id) => write!(out, "requestId={id}, "),
        None => Ok(()),
    }
}

/// The start of a local read's args, the same for the index and the data.
fn write_target(out: &mut dyn Write, t: &ReadTarget) -> io::Result<()> {
    out.write_all(b"\targs{")?;
    write_request_id(out, t.request_id)?;
    write!(
        out,
        "partitionId={}, partitionNumPerRange={}, partitionNum={}",
        t.partition_id, t.per_range, t.partition_num
    )
}

fn write_args(out: &mut dyn Write, args: &Args) -> io::Result<()> {
    match args {
        Args::None => return Ok(()),
        Args::Register {
            remote_storage_path,
            user,
        } => write!(
            out,
            "\targs{{remoteStoragePath={remote_storage_path}, user={user}"
        )?,
        Args::Send {
            require_buffer_id,
            timestamp,
            stage_attempt_number,
            shuffle_data_size,
        } => write!(
            out,
            "\targs{{requireBufferId={require_buffer_id}, timestamp={timestamp}, \
             stageAttemptNumber={stage_attempt_number}, shuffleDataSize={shuffle_data_size}"
        )?,
        Args::SendNetty {
            require_buffer_id,
            require_size,
            is_pre_allocated,
            require_blocks_size,
            stage_attempt_number,
            partition_count,
        } => write!(
            out,
            "\targs{{requireBufferId={require_buffer_id}, requireSize={require_size}, \
             isPreAllocated={is_pre_allocated}, requireBlocksSize={require_blocks_size}, \
             stageAttemptNumber={stage_attempt_number}, partitionCount={partition_count}"
        )?,
        Args::RequireBuffer {
            require_size,
            partition_ids,
        } => {
            write!(
                out,
                "\targs{{requireSize={require_size}, partitionIdsSize={}, partitionIds=",
                partition_ids.len()
            )?;
            write_segments(out, partition_ids, 1, 10)?;
        }
        Args::Report {
            task_attempt_id,
            bitmap_num,
            partitions,
        } => write!(
            out,
            "\targs{{taskAttemptId={task_attempt_id}, bitmapNum={bitmap_num}, \
             partitionToBlockIdsSize={partitions}"
        )?,
        Args::Result {
            partition_id,
            layout,
        } => {
            write!(out, "\targs{{partitionId={partition_id}, blockIdLayout=")?;
            write_layout(out, *layout)?;
        }
        Args::ResultMulti { partitions, layout } => {
            write!(
                out,
                "\targs{{partitionsListSize={}, partitionIds=",
                partitions.len()
            )?;
            write_segments(out, partitions, 1, 10)?;
            out.write_all(b", blockIdLayout=")?;
            write_layout(out, *layout)?;
        }
        Args::LocalData {
            target,
            offset,
            length,
            storage_id,
        } => {
            write_target(out, target)?;
            write!(
                out,
                ", offset={offset}, length={length}, storageId={storage_id}"
            )?;
        }
        Args::LocalIndex(target) => write_target(out, target)?,
        Args::Memory {
            request_id,
            partition_id,
            block_id,
            read_buffer_size,
        } => {
            out.write_all(b"\targs{")?;
            write_request_id(out, *request_id)?;
            write!(
                out,
                "partitionId={partition_id}, blockId={block_id}, \
                 readBufferSize={read_buffer_size}"
            )?;
        }
        Args::SortMerge { partition_id } => write!(out, "\targs{{partitionId={partition_id}")?,
        Args::Sorted {
            partition_id,
            block_id,
        } => write!(
            out,
            "\targs{{partitionId={partition_id}, blockId={block_id}"
        )?,
        // The 0.10 proto has no stage fields (GRPC.md §6: they were dropped before 0.10.0), so
        // the line ends at faultyServerIds; the dev-0.10 snapshots appended stageId,
        // stageAttemptNumber and isReassign from those fields.
        Args::Assignment {
            shuffle_id,
            partition_num,
            per_range,
            replica,
            tags,
            server_number,
            faulty,
        } => {
            write!(
                out,
                "\targs{{shuffleId={shuffle_id}, partitionNum={partition_num}, \
                 partitionNumPerRange={per_range}, replica={replica}, requiredTags="
            )?;
            write_java_hash_set(out, tags)?;
            write!(
                out,
                ", requiredShuffleServerNumber={server_number}, faultyServerIds="
            )?;
            write_java_hash_set(out, faulty)?;
        }
        Args::ServerNode(id) => write!(out, "\targs{{serverNode={id}")?,
        Args::User(user) => write!(out, "\targs{{user={user}")?,
        Args::ClientOperation {
            host,
            port,
            operation,
            server,
        } => {
            write!(out, "\targs{{{host}:{port}->{operation}->")?;
            if let Some(server) = server {
                write_server_id_text(out, server)?;
            }
        }
        // Java prints the request's map, in wire order; prost keeps it in a `HashMap`, so the
        // pairs are sorted by key to keep the line stable.
        Args::Access {
            access_id,
            user,
            tags,
            properties,
        } => {
            write!(
                out,
                "\targs{{accessInfo=AccessInfo{{accessId='{access_id}', user= {user}, tags="
            )?;
            write_java_hash_set(out, tags)?;
            out.write_all(b", extraProperties={")?;
            for (i, (k, v)) in properties.iter().enumerate() {
                if i > 0 {
                    out.write_all(b", ")?;
                }
                write!(out, "{k}={v}")?;
            }
            out.write_all(b"}}")?;
        }
    }
    out.write_all(b"}")
}

/// Java's `String.hashCode`: over UTF-16 code units, wrapping.
fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// `new HashSet<>(list).toString()`, which Java's coordinator logs for tag and server-id
/// lists: duplicates dropped (the first kept), then the elements in the order a `HashMap`
/// iterates them: by bucket (`(h ^ h >>> 16) & (capacity - 1)`, capacity the power of two
/// `HashSet(Collection)` sizes for the list, never resized) and by insertion within a bucket.
pub fn write_java_hash_set(out: &mut dyn Write, items: &[String]) -> io::Result<()> {
    let mut unique: Vec<&str> = Vec::with_capacity(items.len());
    for item in items {
        if !unique.contains(&item.as_str()) {
            unique.push(item);
        }
    }
    // HashSet(Collection c): new HashMap(max((int) (c.size() / .75f) + 1, 16)), rounded up to a
    // power of two; the list's own size, duplicates included, sets it.
    let wanted = ((items.len() as f32 / 0.75) as usize + 1).max(16);
    let capacity = wanted.next_power_of_two();
    let bucket = |s: &str| {
        let h = java_string_hash(s) as u32;
        ((h ^ (h >> 16)) as usize) & (capacity - 1)
    };
    // A stable sort keeps insertion order within a bucket.
    unique.sort_by_key(|s| bucket(s));
    out.write_all(b"[")?;
    for (i, s) in unique.iter().enumerate() {
        if i > 0 {
            out.write_all(b", ")?;
        }
        out.write_all(s.as_bytes())?;
    }
    out.write_all(b"]")
}

/// A `ShuffleServerId` as protobuf-java's `toString` (text format) prints it: each non-default
/// field on its own line, strings quoted and escaped.
fn write_server_id_text(
    out: &mut dyn Write,
    server: &crate::proto::ShuffleServerId,
) -> io::Result<()> {
    for (name, value) in [("id", &server.id), ("ip", &server.ip)] {
        if !value.is_empty() {
            write!(out, "{name}: \"")?;
            write_text_format_escaped(out, value)?;
            out.write_all(b"\"\n")?;
        }
    }
    for (name, value) in [
        ("port", server.port),
        ("netty_port", server.netty_port),
        ("jetty_port", server.jetty_port),
    ] {
        if value != 0 {
            writeln!(out, "{name}: {value}")?;
        }
    }
    Ok(())
}

/// protobuf-java's `TextFormat.escapeBytes` over the string's UTF-8 bytes.
fn write_text_format_escaped(out: &mut dyn Write, s: &str) -> io::Result<()> {
    for &b in s.as_bytes() {
        match b {
            0x07 => out.write_all(b"\\a")?,
            0x08 => out.write_all(b"\\b")?,
            0x0c => out.write_all(b"\\f")?,
            b'\n' => out.write_all(b"\\n")?,
            b'\r' => out.write_all(b"\\r")?,
            b'\t' => out.write_all(b"\\t")?,
            0x0b => out.write_all(b"\\v")?,
            b'\\' => out.write_all(b"\\\\")?,
            b'\'' => out.write_all(b"\\'")?,
            b'"' => out.write_all(b"\\\"")?,
            0x20..=0x7e => out.write_all(&[b])?,
            _ => write!(out, "\\{:03o}", b)?,
        }
    }
    Ok(())
}

fn write_ret(out: &mut dyn Write, ret: Ret) -> io::Result<()> {
    match ret {
        Ret::None => Ok(()),
        Ret::CommitCount(n) => write!(out, "\treturn{{commitCount={n}}}"),
        Ret::RequireBufferId(id) => write!(out, "\treturn{{requireBufferId={id}}}"),
        Ret::Len(len) => write!(out, "\treturn{{len={len}}}"),
        Ret::MemoryGrpc { len, segments } => {
            write!(out, "\treturn{{len={len}, bufferSegmentSize={segments}}}")
        }
        Ret::MemoryNetty { len, segments } => {
            write!(out, "\treturn{{len={len}, bufferSegments={segments}}}")
        }
    }
}

/// Java's `OutputUtils.listToSegment(numbers, threshold, limit)`: up to `threshold` numbers
/// as a list (`[1, 2]`), else runs of consecutive numbers (`0, [2~5], 9`), at most `limit`
/// runs, the rest summarised as `...N more ranges...`.
pub fn write_segments(
    out: &mut dyn Write,
    numbers: &[i32],
    threshold: usize,
    limit: u64,
) -> io::Result<()> {
    let Some((&first, rest)) = numbers.split_first() else {
        return out.write_all(b"[]");
    };
    if threshold < 1 || numbers.len() <= threshold {
        out.write_all(b"[")?;
        for (i, n) in numbers.iter().enumerate() {
            if i > 0 {
                out.write_all(b", ")?;
            }
            write!(out, "{n}")?;
        }
        return out.write_all(b"]");
    }
    let mut written = false;
    let mut range = |out: &mut dyn Write, start: i32, end: i32| -> io::Result<()> {
        if written {
            out.write_all(b", ")?;
        }
        written = true;
        match start == end {
            true => write!(out, "{start}"),
            false => write!(out, "[{start}~{end}]"),
        }
    };
    let (mut start, mut end, mut prev) = (first, first, first);
    let mut ranges: u64 = 0;
    for &n in rest {
        // Java compares `get(i) == get(i - 1) + 1` in int arithmetic, which wraps.
        if n == prev.wrapping_add(1) {
            end = n;
        } else {
            if ranges < limit {
                range(out, start, end)?;
            }
            ranges += 1;
            start = n;
            end = n;
        }
        prev = n;
    }
    ranges += 1;
    if ranges < limit {
        range(out, start, end)
    } else {
        write!(out, "...{} more ranges...", ranges - limit)
    }
}

/// `InetSocketAddress.toString()` of an accepted socket: `/` + the literal address + `:port`.
/// Java prints IPv6 addresses with all eight groups and no `::` compression (`0:0:0:0:0:0:0:1`).
pub fn write_java_socket_addr(out: &mut dyn Write, addr: SocketAddr) -> io::Result<()> {
    match addr.ip() {
        IpAddr::V4(ip) => write!(out, "/{ip}:{}", addr.port()),
        IpAddr::V6(ip) => {
            out.write_all(b"/")?;
            for (i, seg) in ip.segments().iter().enumerate() {
                if i > 0 {
                    out.write_all(b":")?;
                }
                write!(out, "{seg:x}")?;
            }
            write!(out, ":{}", addr.port())
        }
    }
}

/// The RPC audit log as the handlers see it. Its switch and exclude list can change at runtime
/// (`rss.server.rpc.audit.log.enabled` / `.excludeList` are reconfigurable in Java), so both
/// live in one atomic that every request reads once; the file is opened at start when the log
/// is on, else by the first change that turns it on.
#[derive(Clone, Default)]
pub struct RpcAudit {
    /// `None`: a log that can never record (tests, and servers built without an audit config).
    inner: Option<Arc<Shared>>,
}

struct Shared {
    /// [`ON`] plus one bit per excluded command ([`Command::bit`]).
    filter: AtomicU32,
    sink: OnceLock<Sink<RpcRecord>>,
    /// Where a sink not yet open opens, and what it counts drops in; `None` for a log made
    /// from an open sink.
    opener: Option<(PathBuf, IntCounter)>,
}

/// The filter bit that turns the log on; the command bits sit below it.
const ON: u32 = 1 << 31;

fn exclude_bits(exclude: &[String]) -> u32 {
    Command::ALL
        .iter()
        .filter(|c| exclude.iter().any(|e| e == c.name()))
        .fold(0, |bits, c| bits | c.bit())
}

impl RpcAudit {
    /// A log that records nothing.
    pub fn off() -> Self {
        RpcAudit { inner: None }
    }

    /// A log writing to `sink`, skipping the commands named in `exclude` (names that are no
    /// command never match, as in Java).
    pub fn new(sink: Sink<RpcRecord>, exclude: &[String]) -> Self {
        let shared = Shared {
            filter: AtomicU32::new(ON | exclude_bits(exclude)),
            sink: OnceLock::from(sink),
            opener: None,
        };
        RpcAudit {
            inner: Some(Arc::new(shared)),
        }
    }

    /// The log `config` describes: its file opened now when it is on, else left closed until
    /// a reconfiguration turns it on. `dropped` counts lines lost to a full queue.
    pub fn open(config: &AuditConfig, dropped: IntCounter) -> io::Result<Self> {
        let shared = Arc::new(Shared {
            filter: AtomicU32::new(exclude_bits(&config.rpc_exclude)),
            sink: OnceLock::new(),
            opener: Some((config.rpc_log_path.clone(), dropped)),
        });
        let audit = RpcAudit {
            inner: Some(shared),
        };
        audit.reconfigure(config)?;
        Ok(audit)
    }

    /// The coordinator's log (`audit.coordinator_rpc_log*`): its file opened now when it is
    /// on, else a log that records nothing. Its switch and list take effect at start only.
    pub fn open_coordinator(config: &AuditConfig, dropped: IntCounter) -> io::Result<Self> {
        if !config.coordinator_rpc_log {
            return Ok(RpcAudit::off());
        }
        let sink = Sink::open(&config.coordinator_rpc_log_path, "audit-coord-rpc", dropped)?;
        Ok(RpcAudit::new(sink, &config.coordinator_rpc_exclude))
    }

    /// Applies a new switch and exclude list; turning the log on opens its file first, and a
    /// file that cannot be opened leaves the log as it was. Takes effect from the next request.
    pub fn reconfigure(&self, config: &AuditConfig) -> io::Result<()> {
        let Some(inner) = &self.inner else {
            return Ok(());
        };
        if config.rpc_log && inner.sink.get().is_none() {
            let Some((path, dropped)) = &inner.opener else {
                return Err(io::Error::other("this audit log has no file to open"));
            };
            let sink = Sink::open(path, "audit-rpc", dropped.clone())?;
            // Two changes racing to open: the loser's sink is dropped, which ends its writer.
            let _ = inner.sink.set(sink);
        }
        let on = if config.rpc_log { ON } else { 0 };
        inner
            .filter
            .store(on | exclude_bits(&config.rpc_exclude), Ordering::Relaxed);
        Ok(())
    }

    /// Starts auditing one request, or `None` when the log is off or `command` is excluded;
    /// nothing is allocated before that check (Java creates a logger-less context then).
    pub fn begin(&self, command: Command, from: Option<SocketAddr>) -> Option<Entry> {
        let inner = self.inner.as_ref()?;
        let filter = inner.filter.load(Ordering::Relaxed);
        if filter & ON == 0 || filter & command.bit() != 0 {
            return None;
        }
        Some(Entry {
            sink: inner.sink.get()?.clone(),
            started: Instant::now(),
            command,
            from,
            app_id: None,
            shuffle_id: -1,
            args: Args::None,
            ret: Ret::None,
        })
    }

    /// Flushes and stops the writer (shutdown).
    pub async fn close(&self) {
        if let Some(sink) = self.inner.as_ref().and_then(|i| i.sink.get()) {
            sink.close().await;
        }
    }
}

/// One request being audited (Java's `ServerRpcAuditContext`); [`Entry::finish`] queues it.
pub struct Entry {
    sink: Sink<RpcRecord>,
    started: Instant,
    command: Command,
    from: Option<SocketAddr>,
    app_id: Option<String>,
    shuffle_id: i32,
    args: Args,
    ret: Ret,
}

impl Entry {
    /// `appId=`
    pub fn app(&mut self, app_id: &str) -> &mut Self {
        self.app_id = Some(app_id.to_owned());
        self
    }

    /// `shuffleId=`
    pub fn shuffle(&mut self, shuffle_id: i32) -> &mut Self {
        self.shuffle_id = shuffle_id;
        self
    }

    /// `args{…}`
    pub fn args(&mut self, args: Args) -> &mut Self {
        self.args = args;
        self
    }

    /// `return{…}`
    pub fn ret(&mut self, ret: Ret) -> &mut Self {
        self.ret = ret;
        self
    }

    /// Queues the line with the answer's `status`; the execution time ends here.
    pub fn finish(self, status: &'static str) {
        let record = RpcRecord {
            at: SystemTime::now(),
            command: self.command,
            status,
            from: self.from,
            micros: self.started.elapsed().as_micros() as u64,
            app_id: self.app_id,
            shuffle_id: self.shuffle_id,
            args: self.args,
            ret: self.ret,
        };
        self.sink.send(record);
    }
}

/// The status name of a response's `status` field (`UNKNOWN` for a value outside the enum, as
/// Java renders a null status).
pub fn status_name(status: i32) -> &'static str {
    crate::proto::StatusCode::try_from(status).map_or("UNKNOWN", |s| s.as_str_name())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segments(numbers: &[i32]) -> String {
        let mut out = Vec::new();
        write_segments(&mut out, numbers, 1, 10).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn segments_follow_java_list_to_segment() {
        assert_eq!(segments(&[]), "[]");
        assert_eq!(segments(&[7]), "[7]");
        assert_eq!(segments(&[0, 1, 2, 5, 7, 8]), "[0~2], 5, [7~8]");
        assert_eq!(segments(&[3, 1]), "3, 1");
        // Eleven runs: ten written, the rest summarised right after them (no separator).
        let sparse: Vec<i32> = (0..11).map(|i| i * 2).collect();
        assert_eq!(
            segments(&sparse),
            "0, 2, 4, 6, 8, 10, 12, 14, 16, 18...1 more ranges..."
        );
        let nine: Vec<i32> = (0..9).map(|i| i * 2).collect();
        assert_eq!(segments(&nine), "0, 2, 4, 6, 8, 10, 12, 14, 16");
    }

    #[test]
    fn socket_addresses_print_as_java_inet_socket_address() {
        let mut out = Vec::new();
        write_java_socket_addr(&mut out, "10.1.2.3:4567".parse().unwrap()).unwrap();
        out.push(b' ');
        write_java_socket_addr(&mut out, "[::1]:80".parse().unwrap()).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "/10.1.2.3:4567 /0:0:0:0:0:0:0:1:80"
        );
    }

    #[test]
    fn a_record_renders_javas_fields_in_order() {
        let record = RpcRecord {
            at: SystemTime::now(),
            command: Command::GetMemoryShuffleData,
            status: "SUCCESS",
            from: None,
            micros: 87,
            app_id: None,
            shuffle_id: -1,
            args: Args::Memory {
                request_id: Some(9),
                partition_id: 2,
                block_id: -1,
                read_buffer_size: 1024,
            },
            ret: Ret::MemoryNetty {
                len: 10,
                segments: 1,
            },
        };
        let mut out = Vec::new();
        record.write_line(&mut out).unwrap();
        let line = String::from_utf8(out).unwrap();
        let (stamp, rest) = line.split_once("] ").unwrap();
        assert_eq!(stamp.len(), "[2025-09-01 12:00:00.123".len());
        assert_eq!(
            rest,
            "cmd=getMemoryShuffleData\tstatusCode=SUCCESS\tfrom=null\texecutionTimeUs=87\t\
             appId=N/A\tshuffleId=-1\targs{requestId=9, partitionId=2, blockId=-1, \
             readBufferSize=1024}\treturn{len=10, bufferSegments=1}"
        );
    }

    fn hash_set(items: &[&str]) -> String {
        let items: Vec<String> = items.iter().map(|s| s.to_string()).collect();
        let mut out = Vec::new();
        write_java_hash_set(&mut out, &items).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// Orders Java prints: the 0.10 coordinator's own audit lines show `[ss_v5, GRPC]` and
    /// `[GRPC_NETTY, ss_v5]` (apache/uniffle#1979, #2014), whatever order the client sent.
    #[test]
    fn hash_sets_print_in_java_hash_map_order() {
        assert_eq!(hash_set(&["GRPC", "ss_v5"]), "[ss_v5, GRPC]");
        assert_eq!(hash_set(&["ss_v5", "GRPC_NETTY"]), "[GRPC_NETTY, ss_v5]");
        assert_eq!(hash_set(&["b", "a", "b"]), "[a, b]");
        assert_eq!(hash_set(&[]), "[]");
    }

    #[test]
    fn coordinator_records_have_no_shuffle_id_field() {
        let record = RpcRecord {
            at: SystemTime::now(),
            command: Command::ReportClientOperation,
            status: "SUCCESS",
            from: Some("10.0.0.7:51234".parse().unwrap()),
            micros: 5,
            app_id: None,
            shuffle_id: -1,
            args: Args::ClientOperation {
                host: "h".into(),
                port: 7,
                operation: "op".into(),
                server: Some(crate::proto::ShuffleServerId {
                    id: "s\"1".into(),
                    ip: String::new(),
                    port: 19999,
                    netty_port: 0,
                    jetty_port: 0,
                }),
            },
            ret: Ret::None,
        };
        let mut out = Vec::new();
        record.write_line(&mut out).unwrap();
        let line = String::from_utf8(out).unwrap();
        assert_eq!(
            line.split_once("] ").unwrap().1,
            "cmd=reportClientOperation\tstatusCode=SUCCESS\tfrom=/10.0.0.7:51234\t\
             executionTimeUs=5\tappId=N/A\targs{h:7->op->id: \"s\\\"1\"\nport: 19999\n}"
        );
        assert!(Command::FetchRemoteStorage.is_coordinator());
        assert!(!Command::GetSortedShuffleData.is_coordinator());
    }

    #[test]
    fn excluded_commands_are_not_started() {
        let dir = tempfile::TempDir::new().unwrap();
        let sink = Sink::open(
            &dir.path().join("a.log"),
            "audit-test",
            prometheus::IntCounter::new("d", "d").unwrap(),
        )
        .unwrap();
        let audit = RpcAudit::new(sink, &["appHeartbeat".into(), "noSuchCommand".into()]);
        assert!(audit.begin(Command::AppHeartbeat, None).is_none());
        assert!(audit.begin(Command::RequireBuffer, None).is_some());
        assert!(RpcAudit::off()
            .begin(Command::RequireBuffer, None)
            .is_none());
    }
}
