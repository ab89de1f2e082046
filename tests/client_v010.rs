//! What 0.10 clients send that the published 0.9 clients (used by the Spark harness) never do:
//! registerShuffle `properties` (the whole SparkConf) and `mergeContext`, per-partition require
//! sizes, `stageAttemptNumber`, read hints (`storageId`, `nextReadSegments`), `storageIds` in the
//! index answer, and `fetchClientConfV2` on the coordinator.

mod common;

use std::collections::HashMap;

use common::*;
use spillway::proto;
use spillway::proto::coordinator_server_client::CoordinatorServerClient;
use spillway::proto::StatusCode;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_010_client_round_trip() {
    let mut s = start(2, |c| {
        c.coordinator.enabled = true;
        c.coordinator.register_self = false;
        c.coordinator
            .client_conf
            .insert("rss.storage.type".into(), "MEMORY_LOCALFILE".into());
    })
    .await;
    let app = "spark-010_1716900000123";

    // The whole SparkConf travels in `properties`; only `.rss.` keys are kept.
    let properties: HashMap<String, String> = [
        ("spark.rss.storage.type", "MEMORY_LOCALFILE"),
        ("spark.app.name", "demo"),
        ("spark.executor.memory", "4g"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let r = s
        .client
        .register_shuffle(proto::ShuffleRegisterRequest {
            app_id: app.into(),
            shuffle_id: 0,
            partition_ranges: vec![
                proto::ShufflePartitionRange { start: 0, end: 0 },
                proto::ShufflePartitionRange { start: 1, end: 1 },
            ],
            user: "alice".into(),
            shuffle_data_distribution: proto::DataDistribution::Normal as i32,
            max_concurrency_per_partition_to_write: 4,
            merge_context: Some(proto::MergeContext {
                key_class: "java.lang.String".into(),
                ..Default::default()
            }),
            properties,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::Success, "{}", r.ret_msg);
    let registered = s
        .running
        .registry()
        .verify(&spillway::ids::AppId::parse(app).unwrap())
        .unwrap();
    let kept = registered.properties();
    assert_eq!(
        kept.get("spark.rss.storage.type").map(String::as_str),
        Some("MEMORY_LOCALFILE")
    );
    assert!(!kept.contains_key("spark.app.name"));
    assert_eq!(registered.user(), "alice");

    // requireBuffer with partitionRequireSizes, then a send with stageAttemptNumber.
    let blocks: Vec<_> = (0..3).map(|seq| make_block(seq, 1, 4, 500)).collect();
    let size: i32 = blocks.iter().map(|b| b.length + 32).sum();
    let t = s
        .client
        .require_buffer(proto::RequireBufferRequest {
            require_size: size,
            app_id: app.into(),
            shuffle_id: 0,
            partition_ids: vec![1],
            partition_require_sizes: vec![size],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(t.status), StatusCode::Success, "{}", t.ret_msg);
    assert!(t.need_split_partition_ids.is_empty());
    let r = s
        .client
        .send_shuffle_data(proto::SendShuffleDataRequest {
            app_id: app.into(),
            shuffle_id: 0,
            require_buffer_id: t.require_buffer_id,
            shuffle_data: vec![proto::ShuffleData {
                partition_id: 1,
                block: blocks.clone(),
            }],
            timestamp: 1,
            stage_attempt_number: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::Success, "{}", r.ret_msg);
    s.client
        .finish_shuffle(proto::FinishShuffleRequest {
            app_id: app.into(),
            shuffle_id: 0,
        })
        .await
        .unwrap();

    // The index names the disk it came from; the data read carries 0.10's hints.
    let idx = s
        .client
        .get_local_shuffle_index(proto::GetLocalShuffleIndexRequest {
            app_id: app.into(),
            shuffle_id: 0,
            partition_id: 1,
            partition_num_per_range: 1,
            partition_num: 2,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(idx.status), StatusCode::Success);
    assert_eq!(idx.storage_ids.len(), 1);
    assert_eq!(idx.index_data.len(), 3 * 40);
    let d = s
        .client
        .get_local_shuffle_data(proto::GetLocalShuffleDataRequest {
            app_id: app.into(),
            shuffle_id: 0,
            partition_id: 1,
            partition_num_per_range: 1,
            partition_num: 2,
            offset: 0,
            length: 1500,
            timestamp: 1,
            storage_id: idx.storage_ids[0],
            next_read_segments: vec![proto::ReadSegment {
                offset: 1500,
                length: 1000,
            }],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(d.status), StatusCode::Success, "{}", d.ret_msg);
    let want: Vec<u8> = blocks.iter().flat_map(|b| b.data.to_vec()).collect();
    assert_eq!(d.data.to_vec(), want);

    // fetchClientConfV2 (0.10) answers the configured client conf.
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", s.running.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let conf = CoordinatorServerClient::new(channel)
        .fetch_client_conf_v2(proto::FetchClientConfRequest {
            user: "alice".into(),
            properties: HashMap::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(conf.status), StatusCode::Success);
    assert!(conf
        .client_conf
        .iter()
        .any(|i| i.key == "rss.storage.type" && i.value == "MEMORY_LOCALFILE"));
    s.running.shutdown().await;
}
