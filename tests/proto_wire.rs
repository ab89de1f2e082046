//! Pins the wire format of `proto/rss.proto` to Uniffle v0.10.0.
//!
//! Every expected byte string below was computed by hand from the field numbers in
//! `/work/shared/protocol/GRPC.md` and `COORDINATOR.md` (tag byte = `field << 3 | wire_type`,
//! wire type 0 = varint, 2 = length-delimited), so a renumbered field or a changed type in the
//! `.proto` fails here instead of silently breaking Java clients.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use prost::Message;
use spillway::proto::{
    storage_info, ApplicationInfo, DataDistribution, GetLocalShuffleDataRequest,
    GetLocalShuffleIndexResponse, GetMemoryShuffleDataRequest, GetShuffleResultRequest,
    GetShuffleServerRequest, MergeContext, ReadSegment, RequireBufferRequest,
    RequireBufferResponse, SendShuffleDataRequest, ServerStatus, ShuffleBlock, ShuffleData,
    ShuffleRegisterRequest, ShuffleServerHeartBeatRequest, ShuffleServerId, StatusCode,
    StorageInfo,
};

/// Encodes `msg` and compares against `expected`, printing both in hex on mismatch; then checks
/// that decoding the expected bytes gives the message back.
fn assert_wire<M: Message + Default + PartialEq + std::fmt::Debug>(msg: &M, expected: &[u8]) {
    let got = msg.encode_to_vec();
    assert_eq!(
        hex::encode(&got),
        hex::encode(expected),
        "encoding of {msg:?} differs"
    );
    let back = M::decode(expected).expect("expected bytes must decode");
    assert_eq!(&back, msg, "round trip");
}

// ---------------------------------------------------------------------------------------------
// ShuffleRegisterRequest: the 0.10 field-8 trap (GRPC.md §6)
// ---------------------------------------------------------------------------------------------

#[test]
fn register_request_merge_context_is_field_8_and_properties_field_9() {
    let msg = ShuffleRegisterRequest {
        merge_context: Some(MergeContext {
            key_class: "K".into(),
            merged_block_size: 1,
            ..Default::default()
        }),
        properties: HashMap::from([("a".to_string(), "b".to_string())]),
        ..Default::default()
    };
    assert_wire(
        &msg,
        &[
            // field 8, LEN 5: MergeContext { keyClass(1) = "K", mergedBlockSize(4) = 1 }
            0x42, 0x05, 0x0a, 0x01, b'K', 0x20, 0x01, //
            // field 9, LEN 6: map entry { key(1) = "a", value(2) = "b" }
            0x4a, 0x06, 0x0a, 0x01, b'a', 0x12, 0x01, b'b',
        ],
    );
}

#[test]
fn register_request_all_fields() {
    let msg = ShuffleRegisterRequest {
        app_id: "x".into(),
        shuffle_id: 3,
        partition_ranges: vec![spillway::proto::ShufflePartitionRange { start: 0, end: 2 }],
        remote_storage: Some(spillway::proto::RemoteStorage {
            path: "p".into(),
            remote_storage_conf: vec![spillway::proto::RemoteStorageConfItem {
                key: "k".into(),
                value: "v".into(),
            }],
        }),
        user: "u".into(),
        shuffle_data_distribution: DataDistribution::LocalOrder as i32,
        max_concurrency_per_partition_to_write: 7,
        merge_context: Some(MergeContext {
            key_class: "K".into(),
            value_class: "V".into(),
            comparator_class: "C".into(),
            merged_block_size: 9,
            merge_class_loader: "L".into(),
        }),
        properties: HashMap::new(),
    };
    assert_wire(
        &msg,
        &[
            0x0a, 0x01, b'x', // 1 appId
            0x10, 0x03, // 2 shuffleId
            0x1a, 0x02, 0x10, 0x02, // 3 partitionRanges: { start = 0 (omitted), end(2) = 2 }
            // 4 remoteStorage { path(1) = "p", remoteStorageConf(2) = { key "k", value "v" } }
            0x22, 0x0b, 0x0a, 0x01, b'p', 0x12, 0x06, 0x0a, 0x01, b'k', 0x12, 0x01, b'v', //
            0x2a, 0x01, b'u', // 5 user
            0x30, 0x01, // 6 shuffleDataDistribution = LOCAL_ORDER
            0x38, 0x07, // 7 maxConcurrencyPerPartitionToWrite
            // 8 mergeContext { keyClass 1, valueClass 2, comparatorClass 3, mergedBlockSize 4,
            //   mergeClassLoader 5 }
            0x42, 0x0e, 0x0a, 0x01, b'K', 0x12, 0x01, b'V', 0x1a, 0x01, b'C', 0x20, 0x09, 0x2a,
            0x01, b'L',
        ],
    );
}

#[test]
fn register_request_rejects_dev_snapshot_varint_at_field_8() {
    // Unreleased dev-0.10 clients sent `int32 stageAttemptNumber = 8` (a varint). Released 0.10
    // has a message there; prost must reject the wire-type mismatch rather than misread it.
    assert!(ShuffleRegisterRequest::decode(&[0x40u8, 0x01][..]).is_err());
    // Unknown post-0.10 field numbers are skipped silently.
    let decoded = ShuffleRegisterRequest::decode(&[0x10u8, 0x05, 0xf8, 0x06, 0x01][..])
        .expect("unknown field 111 is skipped");
    assert_eq!(decoded.shuffle_id, 5);
}

// ---------------------------------------------------------------------------------------------
// Write path
// ---------------------------------------------------------------------------------------------

#[test]
fn send_shuffle_data_request_fields() {
    let msg = SendShuffleDataRequest {
        app_id: "a".into(),
        shuffle_id: 1,
        require_buffer_id: 2,
        shuffle_data: vec![ShuffleData {
            partition_id: 2,
            block: vec![ShuffleBlock {
                block_id: 1,
                length: 3,
                uncompress_length: 4,
                crc: 5,
                data: Bytes::from_static(b"abc"),
                task_attempt_id: 6,
            }],
        }],
        timestamp: 5,
        stage_attempt_number: 2,
    };
    assert_wire(
        &msg,
        &[
            0x0a, 0x01, b'a', // 1 appId
            0x10, 0x01, // 2 shuffleId
            0x18, 0x02, // 3 requireBufferId
            // 4 shuffleData, LEN 19: { partitionId(1) = 2, block(2) LEN 15 }
            0x22, 0x13, 0x08, 0x02, 0x12, 0x0f, //
            // ShuffleBlock: blockId 1, length 2, uncompressLength 3, crc 4, data 5, taskAttemptId 6
            0x08, 0x01, 0x10, 0x03, 0x18, 0x04, 0x20, 0x05, 0x2a, 0x03, b'a', b'b', b'c', 0x30,
            0x06, //
            0x28, 0x05, // 5 timestamp
            0x30, 0x02, // 6 stageAttemptNumber
        ],
    );
}

#[test]
fn send_shuffle_data_stage_attempt_number_is_field_6() {
    let msg = SendShuffleDataRequest {
        stage_attempt_number: 2,
        ..Default::default()
    };
    assert_wire(&msg, &[0x30, 0x02]);
}

#[test]
fn require_buffer_request_partition_require_sizes_is_packed_field_5() {
    let msg = RequireBufferRequest {
        require_size: 100,
        app_id: String::new(),
        shuffle_id: 0,
        partition_ids: vec![1, 2],
        partition_require_sizes: vec![10, 300],
    };
    assert_wire(
        &msg,
        &[
            0x08, 0x64, // 1 requireSize = 100
            0x22, 0x02, 0x01, 0x02, // 4 partitionIds, packed
            0x2a, 0x03, 0x0a, 0xac, 0x02, // 5 partitionRequireSizes, packed: 10, 300
        ],
    );
    // 0.6 clients send only requireSize.
    let legacy = RequireBufferRequest::decode(&[0x08u8, 0x64][..]).expect("legacy request");
    assert_eq!(legacy.require_size, 100);
    assert!(legacy.app_id.is_empty() && legacy.partition_ids.is_empty());
}

#[test]
fn require_buffer_response_fields() {
    let msg = RequireBufferResponse {
        require_buffer_id: -1,
        status: StatusCode::NoBuffer as i32,
        ret_msg: "m".into(),
        need_split_partition_ids: vec![3],
    };
    assert_wire(
        &msg,
        &[
            // 1 requireBufferId = -1 (int64 varint, 10 bytes)
            0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, //
            0x10, 0x02, // 2 status = NO_BUFFER
            0x1a, 0x01, b'm', // 3 retMsg
            0x22, 0x01, 0x03, // 4 needSplitPartitionIds, packed
        ],
    );
}

// ---------------------------------------------------------------------------------------------
// Read path
// ---------------------------------------------------------------------------------------------

#[test]
fn local_shuffle_index_response_storage_ids_is_field_5() {
    let msg = GetLocalShuffleIndexResponse {
        index_data: Bytes::from_static(&[0x01]),
        status: StatusCode::NoBuffer as i32,
        ret_msg: String::new(),
        data_file_len: 300,
        storage_ids: vec![1, 2],
    };
    assert_wire(
        &msg,
        &[
            0x0a, 0x01, 0x01, // 1 indexData
            0x10, 0x02, // 2 status
            0x20, 0xac, 0x02, // 4 dataFileLen = 300
            0x2a, 0x02, 0x01, 0x02, // 5 storageIds, packed
        ],
    );
}

#[test]
fn local_shuffle_data_request_fields() {
    let msg = GetLocalShuffleDataRequest {
        app_id: "a".into(),
        shuffle_id: 1,
        partition_id: 2,
        partition_num_per_range: 1,
        partition_num: 4,
        offset: 40,
        length: 8,
        timestamp: 9,
        storage_id: -1,
        next_read_segments: vec![ReadSegment {
            offset: 1,
            length: 2,
        }],
    };
    assert_wire(
        &msg,
        &[
            0x0a, 0x01, b'a', // 1 appId
            0x10, 0x01, // 2 shuffleId
            0x18, 0x02, // 3 partitionId
            0x20, 0x01, // 4 partitionNumPerRange
            0x28, 0x04, // 5 partitionNum
            0x30, 0x28, // 6 offset
            0x38, 0x08, // 7 length
            0x40, 0x09, // 8 timestamp
            // 9 storageId = -1 (int32 varint is sign-extended to 10 bytes)
            0x48, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, //
            0x52, 0x04, 0x08, 0x01, 0x10, 0x02, // 10 nextReadSegments { offset 1, length 2 }
        ],
    );
}

#[test]
fn memory_shuffle_data_request_bitmap_presence_is_kept() {
    // Present but empty: field 7 is still on the wire (proto3 `optional`).
    let empty = GetMemoryShuffleDataRequest {
        serialized_expected_task_ids_bitmap: Some(Bytes::new()),
        ..Default::default()
    };
    assert_wire(&empty, &[0x3a, 0x00]);

    // Absent: nothing on the wire.
    let absent = GetMemoryShuffleDataRequest::default();
    assert_wire(&absent, &[]);
    assert_eq!(absent.serialized_expected_task_ids_bitmap, None);

    let full = GetMemoryShuffleDataRequest {
        app_id: "a".into(),
        shuffle_id: 1,
        partition_id: 2,
        last_block_id: -1,
        read_buffer_size: 3,
        timestamp: 4,
        serialized_expected_task_ids_bitmap: Some(Bytes::from_static(&[0x00, 0x01])),
    };
    assert_wire(
        &full,
        &[
            0x0a, 0x01, b'a', // 1 appId
            0x10, 0x01, // 2 shuffleId
            0x18, 0x02, // 3 partitionId
            // 4 lastBlockId = -1
            0x20, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, //
            0x28, 0x03, // 5 readBufferSize
            0x30, 0x04, // 6 timestamp
            0x3a, 0x02, 0x00, 0x01, // 7 serializedExpectedTaskIdsBitmap
        ],
    );
}

#[test]
fn get_shuffle_result_request_block_id_layout_is_field_4() {
    let msg = GetShuffleResultRequest {
        app_id: String::new(),
        shuffle_id: 0,
        partition_id: 1,
        block_id_layout: Some(spillway::proto::BlockIdLayout {
            sequence_no_bits: 18,
            partition_id_bits: 24,
            task_attempt_id_bits: 21,
        }),
    };
    assert_wire(
        &msg,
        &[
            0x18, 0x01, // 3 partitionId
            0x22, 0x06, 0x08, 0x12, 0x10, 0x18, 0x18, 0x15, // 4 blockIdLayout {18, 24, 21}
        ],
    );
}

// ---------------------------------------------------------------------------------------------
// Coordinator heartbeat
// ---------------------------------------------------------------------------------------------

#[test]
fn shuffle_server_id_ports() {
    let msg = ShuffleServerId {
        id: "i".into(),
        ip: "h".into(),
        port: 19999,
        netty_port: 17000,
        jetty_port: 19998,
    };
    assert_wire(
        &msg,
        &[
            0x0a, 0x01, b'i', // 1 id
            0x12, 0x01, b'h', // 2 ip
            0x18, 0x9f, 0x9c, 0x01, // 3 port = 19999
            0x20, 0xe8, 0x84, 0x01, // 4 netty_port = 17000
            0x28, 0x9e, 0x9c, 0x01, // 5 jetty_port = 19998
        ],
    );
    let disabled = ShuffleServerId {
        netty_port: -1,
        ..Default::default()
    };
    assert_wire(
        &disabled,
        &[
            0x20, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        ],
    );
}

#[test]
fn heartbeat_status_is_optional_field_8() {
    // ACTIVE (0) must still be sent: presence is what the coordinator looks at.
    let active = ShuffleServerHeartBeatRequest {
        status: Some(ServerStatus::Active as i32),
        ..Default::default()
    };
    assert_wire(&active, &[0x40, 0x00]);
    let decommissioning = ShuffleServerHeartBeatRequest {
        status: Some(ServerStatus::Decommissioning as i32),
        ..Default::default()
    };
    assert_wire(&decommissioning, &[0x40, 0x01]);
    assert_wire(&ShuffleServerHeartBeatRequest::default(), &[]);
}

#[test]
fn heartbeat_is_healthy_is_bool_value_field_7() {
    let msg = ShuffleServerHeartBeatRequest {
        is_healthy: Some(true),
        ..Default::default()
    };
    // google.protobuf.BoolValue { value(1) = true }
    assert_wire(&msg, &[0x3a, 0x02, 0x08, 0x01]);
}

#[test]
fn heartbeat_all_fields() {
    let msg = ShuffleServerHeartBeatRequest {
        server_id: Some(ShuffleServerId {
            id: "i".into(),
            ..Default::default()
        }),
        used_memory: 1,
        pre_allocated_memory: 2,
        available_memory: 3,
        event_num_in_flush: 4,
        tags: vec!["ss_v5".into()],
        is_healthy: None,
        status: Some(ServerStatus::Excluded as i32),
        storage_info: HashMap::from([(
            "/d".to_string(),
            StorageInfo {
                mount_point: String::new(),
                storage_media: storage_info::StorageMedia::Ssd as i32,
                capacity: 1,
                used_bytes: 0,
                writing_speed1_m: 0,
                writing_speed5_m: 0,
                writing_speed1_h: 0,
                num_of_writing_failures: 0,
                status: storage_info::StorageStatus::Normal as i32,
            },
        )]),
        version: Some("v".into()),
        git_commit_id: Some("g".into()),
        start_time_ms: Some(1),
        application_info: vec![ApplicationInfo {
            app_id: "a".into(),
            total_size: 2,
            ..Default::default()
        }],
        display_metrics: HashMap::from([("app".to_string(), "3".to_string())]),
    };
    assert_wire(
        &msg,
        &[
            0x0a, 0x03, 0x0a, 0x01, b'i', // 1 serverId { id = "i" }
            0x10, 0x01, // 2 usedMemory
            0x18, 0x02, // 3 preAllocatedMemory
            0x20, 0x03, // 4 availableMemory
            0x28, 0x04, // 5 eventNumInFlush
            0x32, 0x05, b's', b's', b'_', b'v', b'5', // 6 tags
            0x40, 0x05, // 8 status = EXCLUDED
            // 21 storageInfo (tag 21<<3|2 = 170 = 0xaa 0x01), entry LEN 12:
            //   key(1) = "/d", value(2) LEN 6 = { storageMedia(2) = SSD, capacity(3) = 1,
            //   status(9) = NORMAL }
            0xaa, 0x01, 0x0c, 0x0a, 0x02, b'/', b'd', 0x12, 0x06, 0x10, 0x02, 0x18, 0x01, 0x48,
            0x01, //
            0xb2, 0x01, 0x01, b'v', // 22 version
            0xba, 0x01, 0x01, b'g', // 23 gitCommitId
            0xc0, 0x01, 0x01, // 24 startTimeMs (varint)
            // 25 applicationInfo { appId(1) = "a", totalSize(8) = 2 }
            0xca, 0x01, 0x05, 0x0a, 0x01, b'a', 0x40, 0x02, //
            // 26 displayMetrics entry { key "app", value "3" }
            0xd2, 0x01, 0x08, 0x0a, 0x03, b'a', b'p', b'p', 0x12, 0x01, b'3',
        ],
    );
}

#[test]
fn heartbeat_optional_0_10_fields_keep_presence() {
    let msg = ShuffleServerHeartBeatRequest {
        version: Some(String::new()),
        git_commit_id: Some(String::new()),
        start_time_ms: Some(0),
        ..Default::default()
    };
    assert_wire(
        &msg,
        &[0xb2, 0x01, 0x00, 0xba, 0x01, 0x00, 0xc0, 0x01, 0x00],
    );
}

#[test]
fn get_shuffle_server_request_faulty_server_ids_is_field_12() {
    let msg = GetShuffleServerRequest {
        estimate_task_concurrency: 1,
        faulty_server_ids: vec!["s".into()],
        ..Default::default()
    };
    assert_wire(&msg, &[0x58, 0x01, 0x62, 0x01, b's']);
}

// ---------------------------------------------------------------------------------------------
// Enums
// ---------------------------------------------------------------------------------------------

#[test]
fn status_code_numbers() {
    let expected = [
        (StatusCode::Success, 0, "SUCCESS"),
        (StatusCode::DoubleRegister, 1, "DOUBLE_REGISTER"),
        (StatusCode::NoBuffer, 2, "NO_BUFFER"),
        (StatusCode::InvalidStorage, 3, "INVALID_STORAGE"),
        (StatusCode::NoRegister, 4, "NO_REGISTER"),
        (StatusCode::NoPartition, 5, "NO_PARTITION"),
        (StatusCode::InternalError, 6, "INTERNAL_ERROR"),
        (StatusCode::Timeout, 7, "TIMEOUT"),
        (StatusCode::AccessDenied, 8, "ACCESS_DENIED"),
        (StatusCode::InvalidRequest, 9, "INVALID_REQUEST"),
        (
            StatusCode::NoBufferForHugePartition,
            10,
            "NO_BUFFER_FOR_HUGE_PARTITION",
        ),
        (StatusCode::StageRetryIgnore, 11, "STAGE_RETRY_IGNORE"),
        (
            StatusCode::ExceedHugePartitionHardLimit,
            12,
            "EXCEED_HUGE_PARTITION_HARD_LIMIT",
        ),
        (StatusCode::AppNotFound, 13, "APP_NOT_FOUND"),
        (
            StatusCode::InternalNotRetryError,
            14,
            "INTERNAL_NOT_RETRY_ERROR",
        ),
    ];
    for (code, number, name) in expected {
        assert_eq!(code as i32, number, "{name}");
        assert_eq!(code.as_str_name(), name);
        assert_eq!(StatusCode::try_from(number), Ok(code));
    }
    // HARD_SPLIT_FROM_SERVER (15) is post-0.10 and must not exist.
    assert!(StatusCode::try_from(15).is_err());

    // Response status is field 1 on the common response shape.
    let resp = spillway::proto::SendShuffleDataResponse {
        status: StatusCode::InternalNotRetryError as i32,
        ret_msg: String::new(),
    };
    assert_wire(&resp, &[0x08, 0x0e]);
}

#[test]
fn other_enum_numbers() {
    assert_eq!(DataDistribution::Normal as i32, 0);
    assert_eq!(DataDistribution::LocalOrder as i32, 1);

    assert_eq!(ServerStatus::Active as i32, 0);
    assert_eq!(ServerStatus::Decommissioning as i32, 1);
    assert_eq!(ServerStatus::Decommissioned as i32, 2);
    assert_eq!(ServerStatus::Lost as i32, 3);
    assert_eq!(ServerStatus::Unhealthy as i32, 4);
    assert_eq!(ServerStatus::Excluded as i32, 5);
    assert!(ServerStatus::try_from(6).is_err());

    use storage_info::{StorageMedia, StorageStatus};
    assert_eq!(StorageMedia::StorageTypeUnknown as i32, 0);
    assert_eq!(StorageMedia::Hdd as i32, 1);
    assert_eq!(StorageMedia::Ssd as i32, 2);
    assert_eq!(StorageMedia::Hdfs as i32, 3);
    assert_eq!(StorageMedia::ObjectStore as i32, 4);
    assert_eq!(StorageStatus::Unknown as i32, 0);
    assert_eq!(StorageStatus::Normal as i32, 1);
    assert_eq!(StorageStatus::Unhealthy as i32, 2);
    assert_eq!(StorageStatus::Overused as i32, 3);
}

// ---------------------------------------------------------------------------------------------
// gRPC service and method names (they are the HTTP/2 paths)
// ---------------------------------------------------------------------------------------------

#[test]
fn service_names() {
    use spillway::proto::{
        coordinator_server_server, shuffle_server_internal_server, shuffle_server_server,
    };
    assert_eq!(
        shuffle_server_server::SERVICE_NAME,
        "rss.common.ShuffleServer"
    );
    assert_eq!(
        shuffle_server_internal_server::SERVICE_NAME,
        "rss.common.ShuffleServerInternal"
    );
    assert_eq!(
        coordinator_server_server::SERVICE_NAME,
        "rss.common.CoordinatorServer"
    );
}

/// A default request of whatever message type the called method expects.
fn req<T: Default>() -> tonic::Request<T> {
    tonic::Request::new(T::default())
}

/// An interceptor that records the `(service, method)` of every call and then fails it, so the
/// generated clients can be driven without any server.
fn recording_channel() -> (
    tonic::service::interceptor::InterceptedService<
        tonic::transport::Channel,
        impl tonic::service::Interceptor + Clone,
    >,
    Arc<Mutex<Vec<String>>>,
) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    let channel = tonic::transport::Endpoint::from_static("http://127.0.0.1:9").connect_lazy();
    let interceptor = move |req: tonic::Request<()>| {
        let method = req
            .extensions()
            .get::<tonic::GrpcMethod>()
            .expect("generated clients attach GrpcMethod");
        sink.lock()
            .unwrap()
            .push(format!("/{}/{}", method.service(), method.method()));
        Err(tonic::Status::cancelled("probe only"))
    };
    (
        tonic::service::interceptor::InterceptedService::new(channel, interceptor),
        seen,
    )
}

#[tokio::test]
async fn shuffle_server_method_paths() {
    use spillway::proto::shuffle_server_client::ShuffleServerClient;
    let (channel, seen) = recording_channel();
    let mut c = ShuffleServerClient::new(channel);
    assert!(c.register_shuffle(req()).await.is_err());
    assert!(c.unregister_shuffle(req()).await.is_err());
    assert!(c.unregister_shuffle_by_app_id(req()).await.is_err());
    assert!(c.send_shuffle_data(req()).await.is_err());
    assert!(c.get_local_shuffle_index(req()).await.is_err());
    assert!(c.get_local_shuffle_data(req()).await.is_err());
    assert!(c.get_memory_shuffle_data(req()).await.is_err());
    assert!(c.commit_shuffle_task(req()).await.is_err());
    assert!(c.report_shuffle_result(req()).await.is_err());
    assert!(c.get_shuffle_result(req()).await.is_err());
    assert!(c.get_shuffle_result_for_multi_part(req()).await.is_err());
    assert!(c.finish_shuffle(req()).await.is_err());
    assert!(c.require_buffer(req()).await.is_err());
    assert!(c.app_heartbeat(req()).await.is_err());
    assert!(c.start_sort_merge(req()).await.is_err());
    assert!(c.get_sorted_shuffle_data(req()).await.is_err());
    let expected: Vec<String> = [
        "registerShuffle",
        "unregisterShuffle",
        "unregisterShuffleByAppId",
        "sendShuffleData",
        "getLocalShuffleIndex",
        "getLocalShuffleData",
        "getMemoryShuffleData",
        "commitShuffleTask",
        "reportShuffleResult",
        "getShuffleResult",
        "getShuffleResultForMultiPart",
        "finishShuffle",
        "requireBuffer",
        "appHeartbeat",
        "startSortMerge",
        "getSortedShuffleData",
    ]
    .iter()
    .map(|m| format!("/rss.common.ShuffleServer/{m}"))
    .collect();
    assert_eq!(*seen.lock().unwrap(), expected);
}

#[tokio::test]
async fn shuffle_server_internal_method_paths() {
    use spillway::proto::shuffle_server_internal_client::ShuffleServerInternalClient;
    let (channel, seen) = recording_channel();
    let mut c = ShuffleServerInternalClient::new(channel);
    assert!(c.decommission(req()).await.is_err());
    assert!(c.cancel_decommission(req()).await.is_err());
    assert_eq!(
        *seen.lock().unwrap(),
        vec![
            "/rss.common.ShuffleServerInternal/decommission".to_string(),
            "/rss.common.ShuffleServerInternal/cancelDecommission".to_string(),
        ]
    );
}

#[tokio::test]
async fn coordinator_method_paths() {
    use spillway::proto::coordinator_server_client::CoordinatorServerClient;
    let (channel, seen) = recording_channel();
    let mut c = CoordinatorServerClient::new(channel);
    assert!(c.get_shuffle_server_list(()).await.is_err());
    assert!(c.get_shuffle_server_num(()).await.is_err());
    assert!(c.get_shuffle_assignments(req()).await.is_err());
    assert!(c.heartbeat(req()).await.is_err());
    assert!(c.get_shuffle_data_storage_info(()).await.is_err());
    assert!(c.check_service_available(()).await.is_err());
    assert!(c.app_heartbeat(req()).await.is_err());
    assert!(c.report_client_operation(req()).await.is_err());
    assert!(c.register_application_info(req()).await.is_err());
    assert!(c.access_cluster(req()).await.is_err());
    assert!(c.fetch_client_conf(()).await.is_err());
    assert!(c.fetch_client_conf_v2(req()).await.is_err());
    assert!(c.fetch_remote_storage(req()).await.is_err());
    let expected: Vec<String> = [
        "getShuffleServerList",
        "getShuffleServerNum",
        "getShuffleAssignments",
        "heartbeat",
        "getShuffleDataStorageInfo",
        "checkServiceAvailable",
        "appHeartbeat",
        "reportClientOperation",
        "registerApplicationInfo",
        "accessCluster",
        "fetchClientConf",
        "fetchClientConfV2",
        "fetchRemoteStorage",
    ]
    .iter()
    .map(|m| format!("/rss.common.CoordinatorServer/{m}"))
    .collect();
    assert_eq!(*seen.lock().unwrap(), expected);
}
