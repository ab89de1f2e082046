//! The integrity records no Uniffle server keeps (the server half of apache/uniffle#2673):
//! the record counts post-0.10 map tasks report per partition (`reportShuffleResult`
//! `partitionStats`, field 6) are kept and answered in `getShuffleResultForMultiPart`
//! (`partitionStats`, field 4) for the requested partitions, through the real gRPC interface,
//! and a restart keeps them as it keeps block ids.

mod common;

use std::collections::BTreeMap;

use common::*;
use spillway::proto;
use spillway::proto::StatusCode;
use spillway::server;

const APP: &str = "app_integrity";

/// A report as the master client sends it: block ids and, per partition, this attempt's
/// record count.
fn report_request(
    task: i64,
    ids: &[(i32, Vec<i64>)],
    records: &[(i32, i64)],
) -> proto::ReportShuffleResultRequest {
    proto::ReportShuffleResultRequest {
        app_id: APP.into(),
        shuffle_id: 0,
        task_attempt_id: task,
        bitmap_num: 1,
        partition_to_block_ids: ids
            .iter()
            .map(|(p, ids)| proto::PartitionToBlockIds {
                partition_id: *p,
                block_ids: ids.clone(),
            })
            .collect(),
        partition_stats: records
            .iter()
            .map(|(p, n)| proto::PartitionStats {
                partition_id: *p,
                task_attempt_id_to_records: vec![proto::TaskAttemptIdToRecords {
                    task_attempt_id: task,
                    record_number: *n,
                }],
            })
            .collect(),
    }
}

async fn report_with_records(
    client: &mut Client,
    req: proto::ReportShuffleResultRequest,
) -> proto::ReportShuffleResultResponse {
    client
        .report_shuffle_result(req)
        .await
        .unwrap()
        .into_inner()
}

/// partition → task attempt → records, as the reader builds its map from the answer.
async fn stats(client: &mut Client, partitions: &[i32]) -> BTreeMap<i32, BTreeMap<i64, i64>> {
    let r = client
        .get_shuffle_result_for_multi_part(proto::GetShuffleResultForMultiPartRequest {
            app_id: APP.into(),
            shuffle_id: 0,
            partitions: partitions.to_vec(),
            block_id_layout: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::Success, "{}", r.ret_msg);
    // The counts travel beside the block ids: the bitmap holds ids of the requested partitions
    // only, and every partition with counts has ids in it.
    let ids = spillway::codec::bitmap::decode(&r.serialized_bitmap).expect("the bitmap decodes");
    let with_ids: std::collections::BTreeSet<i32> = ids
        .iter()
        .map(|id| LAYOUT.partition_of(id as i64))
        .collect();
    assert!(
        with_ids.iter().all(|p| partitions.contains(p)),
        "block ids of partitions {with_ids:?} answered for {partitions:?}"
    );
    for s in &r.partition_stats {
        assert!(
            with_ids.contains(&s.partition_id),
            "counts for partition {} without its block ids ({with_ids:?})",
            s.partition_id
        );
    }
    r.partition_stats
        .into_iter()
        .map(|s| {
            (
                s.partition_id,
                s.task_attempt_id_to_records
                    .into_iter()
                    .map(|t| (t.task_attempt_id, t.record_number))
                    .collect(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_counts_are_kept_answered_per_partition_and_survive_a_restart() {
    let disks: Vec<tempfile::TempDir> = (0..1).map(|_| tempfile::TempDir::new().unwrap()).collect();
    let mut config = test_config(&disks);
    // The journal belongs to a server id, which the ports make: fixed, so the restarted
    // server is the same server.
    let [grpc, netty] = common::free_ports();
    config.grpc_port = grpc;
    config.netty_port = i32::from(netty);
    let running = server::start(config.clone()).await.expect("server starts");
    let mut c = connect(running.grpc_addr).await;
    register(&mut c, APP, 0, 0..4, false).await;
    let id = |seq: i64, p: i32, task: i64| LAYOUT.block_id(seq, p, task);

    // Task 7 wrote partitions 0 and 1; it also counts records for partition 3, where it
    // reported no block: nothing a reader could check, so not kept.
    let r = report_with_records(
        &mut c,
        report_request(
            7,
            &[(0, vec![id(0, 0, 7)]), (1, vec![id(0, 1, 7)])],
            &[(0, 10), (1, 5), (3, 2)],
        ),
    )
    .await;
    assert_eq!(status_of(r.status), StatusCode::Success, "{}", r.ret_msg);
    let r = report_with_records(
        &mut c,
        report_request(9, &[(0, vec![id(0, 0, 9)])], &[(0, 4)]),
    )
    .await;
    assert_eq!(status_of(r.status), StatusCode::Success, "{}", r.ret_msg);
    // A second report of the same attempt (a replica, a retried report) replaces its count.
    let r = report_with_records(
        &mut c,
        report_request(7, &[(0, vec![id(0, 0, 7)])], &[(0, 11)]),
    )
    .await;
    assert_eq!(status_of(r.status), StatusCode::Success, "{}", r.ret_msg);
    // A 0.10 client's report carries no counts and changes none.
    report(
        &mut c,
        APP,
        0,
        11,
        &BTreeMap::from([(2, vec![id(0, 2, 11)])]),
    )
    .await;

    // Counts for another attempt than the reporting one, or for a partition this report
    // carries no block id for (though earlier reports did), are not kept: every kept count
    // stands beside a block id of its own report, so no report can plant counts.
    let mut req = report_request(13, &[(2, vec![id(0, 2, 13)])], &[(1, 8)]);
    req.partition_stats.push(proto::PartitionStats {
        partition_id: 2,
        task_attempt_id_to_records: vec![proto::TaskAttemptIdToRecords {
            task_attempt_id: 7,
            record_number: 99,
        }],
    });
    let r = report_with_records(&mut c, req).await;
    assert_eq!(status_of(r.status), StatusCode::Success, "{}", r.ret_msg);

    let want: BTreeMap<i32, BTreeMap<i64, i64>> = BTreeMap::from([
        (0, BTreeMap::from([(7, 11), (9, 4)])),
        (1, BTreeMap::from([(7, 5)])),
    ]);
    assert_eq!(stats(&mut c, &[0, 1, 2, 3]).await, want);
    // Only the requested partitions, as their block ids.
    assert_eq!(
        stats(&mut c, &[1]).await,
        BTreeMap::from([(1, BTreeMap::from([(7, 5)]))])
    );
    assert!(
        stats(&mut c, &[2]).await.is_empty(),
        "no counts for partition 2"
    );

    // A count that is not one is refused as a whole: nothing of the report is kept.
    let r = report_with_records(
        &mut c,
        report_request(12, &[(1, vec![id(1, 1, 12)])], &[(1, -3)]),
    )
    .await;
    assert_eq!(
        status_of(r.status),
        StatusCode::InvalidRequest,
        "{}",
        r.ret_msg
    );
    assert!(r.ret_msg.contains("partitionStats"), "{}", r.ret_msg);
    assert_eq!(stats(&mut c, &[0, 1, 2, 3]).await, want);

    // A restart recovers them from the journal, as block ids.
    running.shutdown().await;
    let running = server::start(config).await.expect("server restarts");
    let mut c = connect(running.grpc_addr).await;
    assert_eq!(stats(&mut c, &[0, 1, 2, 3]).await, want);
    running.shutdown().await;
}

/// Connects once the server at `port` answers (60 s at most).
async fn connect_when_up(port: u16) -> Client {
    let addr: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if let Ok(ch) = tonic::transport::Channel::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
        {
            let mut c = proto::shuffle_server_client::ShuffleServerClient::new(ch);
            if c.app_heartbeat(proto::AppHeartBeatRequest {
                app_id: "probe".into(),
            })
            .await
            .is_ok()
            {
                return c;
            }
        }
        assert!(std::time::Instant::now() < deadline, "no server on {addr}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// An upgrade in place (`--takeover`, the binary as operators run it): the old process spills,
/// journals and exits; the new one answers the same record counts, as it answers block ids.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_counts_survive_a_takeover() {
    let dir = tempfile::TempDir::new().unwrap();
    let [grpc, netty] = common::free_ports();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "grpc_port = {grpc}\nnetty_port = {netty}\nbind_ip = \"127.0.0.1\"\n\
             [localfile_store]\ndata_paths = [\"{}\"]\n[metrics]\nhttp_port = 0\n",
            dir.path().join("d1").display()
        ),
    )
    .unwrap();
    let spawn = |takeover: bool| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_spillway"));
        cmd.arg("--config").arg(&config);
        if takeover {
            cmd.arg("--takeover");
        }
        KillOnDrop(
            cmd.env("WORKER_IP", "127.0.0.1")
                .env("RUST_LOG", "warn")
                .stdout(std::process::Stdio::null())
                .spawn()
                .expect("the spillway binary starts"),
        )
    };
    let mut old = spawn(false);
    let mut c = connect_when_up(grpc).await;
    register(&mut c, APP, 0, 0..2, false).await;
    let id = |p: i32, task: i64| LAYOUT.block_id(0, p, task);
    for (task, parts) in [(3, vec![(0, 7), (1, 2)]), (4, vec![(0, 5)])] {
        let ids: Vec<(i32, Vec<i64>)> = parts
            .iter()
            .map(|(p, _)| (*p, vec![id(*p, task)]))
            .collect();
        let r = report_with_records(&mut c, report_request(task, &ids, &parts)).await;
        assert_eq!(status_of(r.status), StatusCode::Success, "{}", r.ret_msg);
    }
    let want: BTreeMap<i32, BTreeMap<i64, i64>> = BTreeMap::from([
        (0, BTreeMap::from([(3, 7), (4, 5)])),
        (1, BTreeMap::from([(3, 2)])),
    ]);
    assert_eq!(stats(&mut c, &[0, 1]).await, want);
    drop(c);

    let _new = spawn(true);
    let exit = old.0.wait().expect("the old server exits");
    assert_eq!(
        exit.code(),
        Some(0),
        "the old server handed over and exited cleanly"
    );
    let mut c = connect_when_up(grpc).await;
    assert_eq!(stats(&mut c, &[0, 1]).await, want);
}
