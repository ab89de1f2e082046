//! App and server lifecycle through the real gRPC services: unregister, heartbeat-driven
//! expiry, and decommission via `ShuffleServerInternal` ending with the server stopping itself.

mod common;

use std::time::Duration;

use common::*;
use spillway::proto;
use spillway::proto::shuffle_server_internal_client::ShuffleServerInternalClient;
use spillway::proto::StatusCode;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unregister_shuffle_purges_only_that_shuffle() {
    let mut s = start(2, |_| {}).await;
    register(&mut s.client, "app", 0, 0..2, false).await;
    register(&mut s.client, "app", 1, 0..2, false).await;
    let _gone = write_shuffle(&mut s.client, "app", 0, 1, 2, 2, 100).await;
    let kept = write_shuffle(&mut s.client, "app", 1, 1, 2, 2, 100).await;
    for shuffle in [0, 1] {
        s.client
            .finish_shuffle(proto::FinishShuffleRequest {
                app_id: "app".into(),
                shuffle_id: shuffle,
            })
            .await
            .unwrap();
    }
    let r = s
        .client
        .unregister_shuffle(proto::ShuffleUnregisterRequest {
            app_id: "app".into(),
            shuffle_id: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::Success);
    for d in &s.disks {
        assert!(!d.path().join("app/0").exists());
    }
    verify_shuffle(&mut s.client, "app", 1, &kept).await;
    assert!(expected_ids(&mut s.client, "app", 0, 0).await.is_empty());
    s.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apps_expire_without_heartbeats_and_live_with_them() {
    let mut s = start(1, |c| {
        c.app.app_heartbeat_timeout = Duration::from_millis(300);
        c.app.expiry_check_interval = Duration::from_millis(50);
    })
    .await;
    register(&mut s.client, "beating", 0, 0..1, false).await;
    register(&mut s.client, "silent", 0, 0..1, false).await;
    send(
        &mut s.client,
        "silent",
        0,
        vec![(0, vec![make_block(0, 0, 0, 1000)])],
    )
    .await;
    let registry = s.running.registry().clone();
    let mut client = s.client.clone();
    let beat = tokio::spawn(async move {
        for _ in 0..40 {
            let r = client
                .app_heartbeat(proto::AppHeartBeatRequest {
                    app_id: "beating".into(),
                })
                .await
                .unwrap()
                .into_inner();
            assert_eq!(status_of(r.status), StatusCode::Success);
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    });
    eventually("silent app purged", || registry.app_count() == 1).await;
    assert_eq!(registry.store().memory().budget().snapshot().used, 0);
    beat.await.unwrap();
    assert!(registry
        .verify(&spillway::ids::AppId::parse("beating").unwrap())
        .is_ok());
    s.running.shutdown().await;
}

/// A decommissioning or decommissioned server refuses a new app with INVALID_REQUEST.
async fn assert_new_apps_refused(client: &mut Client) {
    let r = client
        .register_shuffle(proto::ShuffleRegisterRequest {
            app_id: "newcomer".into(),
            partition_ranges: vec![proto::ShufflePartitionRange { start: 0, end: 0 }],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::InvalidRequest);
}

/// The `ShuffleServerInternal` service (decommission) on the server's gRPC port.
async fn internal_client(s: &TestServer) -> ShuffleServerInternalClient<tonic::transport::Channel> {
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", s.running.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    ShuffleServerInternalClient::new(channel)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decommission_finishes_live_apps_then_stops_the_server() {
    let mut s = start(1, |c| {
        c.app.expiry_check_interval = Duration::from_millis(50)
    })
    .await;
    register(&mut s.client, "live", 0, 0..1, false).await;
    let mut internal = internal_client(&s).await;
    let r = internal
        .decommission(proto::DecommissionRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::Success);

    // No new apps; the live one keeps working.
    assert_new_apps_refused(&mut s.client).await;
    let expected = write_shuffle(&mut s.client, "live", 0, 1, 1, 2, 100).await;
    verify_shuffle(&mut s.client, "live", 0, &expected).await;

    // Cancel and decommission again: both idempotent-friendly.
    let r = internal
        .cancel_decommission(proto::CancelDecommissionRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::Success);
    assert_eq!(
        s.running.registry().status().get(),
        proto::ServerStatus::Active
    );
    internal
        .decommission(proto::DecommissionRequest {})
        .await
        .unwrap();

    s.client
        .unregister_shuffle_by_app_id(proto::ShuffleUnregisterByAppIdRequest {
            app_id: "live".into(),
        })
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(60), s.running.stopped_by_itself())
        .await
        .expect("a decommissioned server with no apps stops");
    assert_eq!(
        s.running.registry().status().get(),
        proto::ServerStatus::Decommissioned
    );
    let report = s.running.shutdown().await;
    assert_eq!(report.bytes_left_in_memory, 0);
}

/// Java's `rss.server.decommission.shutdown = false`: decommissioned, the server stays up and
/// serving, and cancelling makes it ACTIVE again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decommissioned_server_stays_up_when_told_to() {
    let mut s = start(1, |c| {
        c.app.expiry_check_interval = Duration::from_millis(50);
        c.shutdown.after_decommission = false;
    })
    .await;
    let mut internal = internal_client(&s).await;
    internal
        .decommission(proto::DecommissionRequest {})
        .await
        .unwrap();
    let registry = s.running.registry().clone();
    eventually("decommissioned with no apps", || {
        registry.status().get() == proto::ServerStatus::Decommissioned
    })
    .await;
    // Still up: it answers, and refuses new apps as a decommissioned server does.
    assert_new_apps_refused(&mut s.client).await;
    // Several watcher rounds later it has still not stopped itself.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!s.running.has_stopped_by_itself());
    internal
        .cancel_decommission(proto::CancelDecommissionRequest {})
        .await
        .unwrap();
    assert_eq!(registry.status().get(), proto::ServerStatus::Active);
    register(&mut s.client, "after", 0, 0..1, false).await;
    let expected = write_shuffle(&mut s.client, "after", 0, 1, 1, 2, 100).await;
    verify_shuffle(&mut s.client, "after", 0, &expected).await;
    s.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_few_healthy_disks_make_the_server_unhealthy_and_new_partitions_avoid_the_bad_disk() {
    let mut s = start(2, |c| {
        // Java's storage checker: every data path must be healthy (100 %).
        c.health.enabled = true;
        c.health.min_healthy_disks_ratio = 1.0;
        c.health.check_interval = Duration::from_millis(50);
        // The temp dirs sit on the host's disk, whose fullness is not under test here.
        c.health.disk_max_usage = 1.0;
        c.health.disk_recovery_usage = 1.0;
        c.localfile_store.disk_health_check_interval = Duration::from_millis(50);
    })
    .await;
    // Break disk 0: its data path becomes a regular file, so probes and writes fail. The
    // directory is renamed away first, not removed: the server's health probe writes into it
    // every 50 ms, and a removal racing with a probe file fails with "directory not empty".
    let bad = s.disks[0].path().to_path_buf();
    let moved = bad.with_extension("moved-away");
    std::fs::rename(&bad, &moved).unwrap();
    std::fs::write(&bad, b"not a directory").unwrap();
    let _ = std::fs::remove_dir_all(&moved);
    let registry = s.running.registry().clone();
    eventually("status UNHEALTHY", || {
        registry.status().get() == proto::ServerStatus::Unhealthy
    })
    .await;
    let reports = s.running.local_tier().expect("local tier").disk_reports();
    assert!(reports
        .iter()
        .any(|r| r.path == bad && r.status == spillway::store::localfile::DiskStatus::Unhealthy));

    // Health is a signal for coordinators; the good disk still takes new partitions, and the
    // broken one gets none.
    register(&mut s.client, "app", 0, 0..4, false).await;
    let expected = write_shuffle(&mut s.client, "app", 0, 1, 4, 2, 100).await;
    let r = s
        .client
        .finish_shuffle(proto::FinishShuffleRequest {
            app_id: "app".into(),
            shuffle_id: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::Success, "{}", r.ret_msg);
    for p in 0..4 {
        assert!(s.disks[1].path().join(format!("app/0/{p}-{p}")).is_dir());
    }
    let (_, files) = verify_shuffle(&mut s.client, "app", 0, &expected).await;
    assert_eq!(files, 8);

    // Repair the disk: the server becomes ACTIVE again.
    std::fs::remove_file(&bad).unwrap();
    std::fs::create_dir(&bad).unwrap();
    eventually("status ACTIVE", || {
        registry.status().get() == proto::ServerStatus::Active
    })
    .await;
    std::fs::remove_dir_all(&bad).ok();
    std::fs::create_dir(&bad).ok();
    s.running.shutdown().await;
}

/// Java's `rss.server.localstorage.initialize.max.fail.number`: a data path that cannot be
/// created stops start-up (default 0) with the key named, or is left out when allowed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_path_that_cannot_be_created_is_skipped_only_when_allowed() {
    let good = tempfile::TempDir::new().unwrap();
    let dir = tempfile::TempDir::new().unwrap();
    let blocker = dir.path().join("a-file");
    std::fs::write(&blocker, b"x").unwrap();
    let bad = blocker.join("data");
    let config = |max_failed: usize| {
        let mut c = test_config(std::slice::from_ref(&good));
        c.localfile_store.data_paths.push(bad.clone());
        c.localfile_store.init_max_failed_paths = max_failed;
        c.validate().unwrap();
        c
    };
    let err = spillway::server::start(config(0))
        .await
        .err()
        .expect("the default allows no failed path");
    let msg = err.to_string();
    assert!(msg.contains("init_max_failed_paths"), "{msg}");
    assert!(msg.contains(&bad.display().to_string()), "{msg}");

    let running = spillway::server::start(config(1))
        .await
        .expect("one failure allowed");
    let reports = running.local_tier().expect("local tier").disk_reports();
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].path, good.path());
    let mut client = connect(running.grpc_addr).await;
    register(&mut client, "skip_app", 0, 0..2, false).await;
    let expected = write_shuffle(&mut client, "skip_app", 0, 1, 2, 2, 100).await;
    finish(&mut client, "skip_app", 0).await;
    let (_, files) = verify_shuffle(&mut client, "skip_app", 0, &expected).await;
    assert_eq!(files, 4, "both partitions on the one path left");
    running.shutdown().await;
}

/// Java's leak check (`rss.server.leak.shuffledata.check.interval`): directories of apps the
/// server does not know are deleted from the data paths; live apps, the recovery journal's
/// hidden directory and `lost+found` are left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaked_app_directories_are_swept_and_live_ones_kept() {
    let mut s = start(2, |c| {
        c.localfile_store.leak_check_interval = Duration::from_millis(100);
    })
    .await;
    let leaked = s.disks[0].path().join("application_1_0001/0/0-0");
    std::fs::create_dir_all(&leaked).unwrap();
    std::fs::write(leaked.join("10.0.0.9-19999.data"), b"left by a crash").unwrap();
    let lost_found = s.disks[1].path().join("lost+found");
    std::fs::create_dir_all(&lost_found).unwrap();
    let hidden = s.disks[1].path().join(".not-an-app");
    std::fs::create_dir_all(&hidden).unwrap();

    register(&mut s.client, "live", 0, 0..2, false).await;
    let expected = write_shuffle(&mut s.client, "live", 0, 1, 2, 4, 1000).await;
    s.client
        .finish_shuffle(proto::FinishShuffleRequest {
            app_id: "live".into(),
            shuffle_id: 0,
        })
        .await
        .unwrap();

    let app_dir = s.disks[0].path().join("application_1_0001");
    eventually("the leaked app's directory is deleted", || {
        !app_dir.exists()
    })
    .await;
    // Several sweeps later: the live app, lost+found and the hidden directory are still there.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(lost_found.exists() && hidden.exists());
    verify_shuffle(&mut s.client, "live", 0, &expected).await;
    assert!(
        s.disks.iter().any(|d| d.path().join("live").exists()),
        "the live app's spilled files stay"
    );
    s.running.shutdown().await;
}
