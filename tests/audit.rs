//! The RPC audit log against a real server: Java's line layout field by field, the exclude
//! list, independence from `RUST_LOG`, both planes, and the flush at shutdown.

mod common;

use std::path::Path;

use common::{make_block, register, send, start};
use spillway::netty::client::NettyClient;
use spillway::netty::messages::{IndexRequest, Request};
use spillway::proto;

/// The file's lines, each split into its tab-separated fields.
fn lines(path: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| l.split('\t').map(str::to_owned).collect())
        .collect()
}

/// The line of `cmd`; panics when there is none.
fn line_of<'a>(lines: &'a [Vec<String>], cmd: &str) -> &'a [String] {
    let tag = format!("cmd={cmd}");
    lines
        .iter()
        .find(|l| l[0].ends_with(&tag))
        .unwrap_or_else(|| panic!("no {cmd} line in {lines:?}"))
}

#[tokio::test]
async fn rpc_audit_lines_match_javas_layout_and_are_flushed_at_shutdown() {
    let dir = tempfile::TempDir::new().unwrap();
    let path = dir.path().join("logs/shuffle_server_rpc_audit.log");
    let audit_path = path.clone();
    let mut s = start(1, move |c| {
        c.audit.rpc_log = true;
        c.audit.rpc_log_path = audit_path;
        // The default exclude list, plus one command of our own.
        c.audit.rpc_exclude = vec!["appHeartbeat".into(), "finishShuffle".into()];
    })
    .await;
    let app = "app_audit_1";
    register(&mut s.client, app, 3, 0..2, false).await;
    send(
        &mut s.client,
        app,
        3,
        vec![
            (0, vec![make_block(1, 0, 7, 100)]),
            (1, vec![make_block(2, 1, 7, 50)]),
        ],
    )
    .await;
    let hb = s
        .client
        .app_heartbeat(proto::AppHeartBeatRequest { app_id: app.into() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(hb.status, 0);
    common::finish(&mut s.client, app, 3).await;
    let missing = s
        .client
        .get_shuffle_result(proto::GetShuffleResultRequest {
            app_id: "no_such_app".into(),
            shuffle_id: 9,
            partition_id: 4,
            block_id_layout: Some(proto::BlockIdLayout {
                sequence_no_bits: 20,
                partition_id_bits: 22,
                task_attempt_id_bits: 21,
            }),
        })
        .await
        .unwrap()
        .into_inner();
    assert_ne!(missing.status, 0);
    let netty = s.running.netty_addr.expect("the Netty plane is on");
    let mut conn = NettyClient::connect(netty).await.unwrap();
    conn.call(&Request::Index(IndexRequest {
        request_id: 42,
        app_id: app.into(),
        shuffle_id: 3,
        partition_id: 1,
        partition_num_per_range: 1,
        partition_num: 2,
    }))
    .await
    .unwrap();
    let client_addr = |l: &[String]| l[2].clone();

    // Nothing is asked of the writer before shutdown: the lines must be there after it.
    s.running.shutdown().await;
    let lines = lines(&path);

    for l in &lines {
        assert!(l[0].starts_with('['), "{l:?}");
        let stamp = &l[0][1..24];
        // [yyyy-MM-dd HH:mm:ss.SSS]
        assert_eq!(l[0].as_bytes()[24], b']', "{l:?}");
        assert_eq!(&l[0][25..26], " ", "{l:?}");
        assert!(
            stamp.chars().enumerate().all(|(i, c)| match i {
                4 | 7 => c == '-',
                10 => c == ' ',
                13 | 16 => c == ':',
                19 => c == '.',
                _ => c.is_ascii_digit(),
            }),
            "{stamp}"
        );
        assert!(l[1].starts_with("statusCode="), "{l:?}");
        assert!(l[2].starts_with("from=/127.0.0.1:"), "{l:?}");
        let micros = l[3]
            .strip_prefix("executionTimeUs=")
            .expect("executionTimeUs");
        micros.parse::<u64>().expect("a number of microseconds");
        assert!(l[4].starts_with("appId="), "{l:?}");
        assert!(l[5].starts_with("shuffleId="), "{l:?}");
    }
    let cmds: Vec<&str> = lines
        .iter()
        .map(|l| l[0].split_once("cmd=").unwrap().1)
        .collect();
    assert!(
        !cmds.contains(&"appHeartbeat"),
        "excluded by default: {cmds:?}"
    );
    assert!(
        !cmds.contains(&"finishShuffle"),
        "excluded by config: {cmds:?}"
    );

    let reg = line_of(&lines, "registerShuffle");
    assert_eq!(reg[1], "statusCode=SUCCESS");
    assert_eq!(
        reg[4..],
        [
            "appId=app_audit_1",
            "shuffleId=3",
            "args{remoteStoragePath=, user=test}"
        ]
    );
    let req = line_of(&lines, "requireBuffer");
    assert_eq!(req[1], "statusCode=SUCCESS");
    assert_eq!(req[4..6], ["appId=app_audit_1", "shuffleId=3"]);
    assert_eq!(
        req[6],
        "args{requireSize=214, partitionIdsSize=2, partitionIds=[0~1]}"
    );
    assert!(req[7].starts_with("return{requireBufferId="), "{req:?}");
    let id = req[7]["return{requireBufferId=".len()..req[7].len() - 1]
        .parse::<i64>()
        .unwrap();
    assert!(id >= 1);
    let snd = line_of(&lines, "sendShuffleData");
    assert_eq!(snd[1], "statusCode=SUCCESS");
    assert_eq!(
        snd[6],
        format!(
            "args{{requireBufferId={id}, timestamp=0, stageAttemptNumber=0, shuffleDataSize=2}}"
        )
    );
    assert_eq!(snd.len(), 7, "no return part: {snd:?}");
    let res = line_of(&lines, "getShuffleResult");
    assert_eq!(res[1], "statusCode=NO_REGISTER");
    assert_eq!(res[4..6], ["appId=no_such_app", "shuffleId=9"]);
    assert_eq!(
        res[6],
        "args{partitionId=4, blockIdLayout=blockIdLayout[seq: 20 bits, part: 22 bits, task: 21 bits]}"
    );
    let idx = line_of(&lines, "getLocalShuffleIndex");
    assert_eq!(
        idx[6],
        "args{requestId=42, partitionId=1, partitionNumPerRange=1, partitionNum=2}"
    );
    // Netty's own connection, not the gRPC one.
    assert_ne!(client_addr(idx), client_addr(reg));
    assert!(idx[1].starts_with("statusCode="), "{idx:?}");
}

#[tokio::test]
async fn rpc_audit_ignores_rust_log_and_can_be_switched_off() {
    // A RUST_LOG-style filter that silences everything must not silence the audit file.
    let _quiet = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("off"))
            .finish(),
    );
    let dir = tempfile::TempDir::new().unwrap();
    let on = dir.path().join("on.log");
    let off = dir.path().join("off.log");
    for (path, enabled) in [(&on, true), (&off, false)] {
        let p = path.clone();
        let mut s = start(1, move |c| {
            c.audit.rpc_log = enabled;
            c.audit.rpc_log_path = p;
            c.audit.rpc_exclude = Vec::new();
        })
        .await;
        let hb = s
            .client
            .app_heartbeat(proto::AppHeartBeatRequest {
                app_id: "app_quiet".into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_ne!(hb.status, 0, "unknown app");
        s.running.shutdown().await;
    }
    let lines = lines(&on);
    assert_eq!(lines.len(), 1, "{lines:?}");
    let l = &lines[0];
    assert!(l[0].ends_with("] cmd=appHeartbeat"), "{l:?}");
    assert_eq!(l[1], "statusCode=NO_REGISTER");
    // appHeartbeat sets no shuffle id: Java's default -1.
    assert_eq!(l[4..], ["appId=app_quiet", "shuffleId=-1"]);
    assert!(!off.exists(), "rpc_log = false writes nothing");
}
