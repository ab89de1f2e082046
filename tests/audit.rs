//! The audit logs against a real server. RPC log: Java's line layout field by field, the
//! exclude list, independence from `RUST_LOG`, both planes (the Netty `sendShuffleData` with
//! its ticket fields), and the flush at shutdown. Storage log: the `w|…` line of every spill and
//! the `d|…` lines of shuffle and app purges, field by field.

mod common;

use std::path::Path;

use common::{make_block, register, send, start, status_of};
use spillway::netty::client::{send_message_len, NettyClient};
use spillway::netty::messages::{IndexRequest, Request, Response, SendBlock, SendRequest};
use spillway::proto::{self, StatusCode};

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

/// A Netty `sendShuffleData` of `blocks` under `ticket`.
fn netty_send_request(
    app: &str,
    shuffle: i32,
    ticket: i64,
    blocks: &[(i32, Vec<proto::ShuffleBlock>)],
) -> SendRequest {
    SendRequest {
        request_id: 7,
        app_id: app.into(),
        shuffle_id: shuffle,
        require_buffer_id: ticket,
        partitions: blocks
            .iter()
            .map(|(p, bs)| {
                let blocks = bs
                    .iter()
                    .map(|b| SendBlock {
                        partition_id: *p,
                        block_id: b.block_id,
                        length: b.length,
                        shuffle_id: shuffle,
                        crc: b.crc,
                        task_attempt_id: b.task_attempt_id,
                        data: b.data.clone(),
                        replicas: vec![],
                        uncompress_length: b.uncompress_length,
                        free_memory: 0,
                    })
                    .collect();
                (*p, blocks)
            })
            .collect(),
        timestamp: 1_700_000_000_000,
    }
}

#[tokio::test]
async fn netty_send_is_audited_with_the_ticket_it_took() {
    let dir = tempfile::TempDir::new().unwrap();
    let path = dir.path().join("rpc.log");
    let p = path.clone();
    let mut s = start(1, move |c| {
        c.audit.rpc_log = true;
        c.audit.rpc_log_path = p;
    })
    .await;
    let app = "app_audit_netty";
    register(&mut s.client, app, 2, 0..2, false).await;
    let blocks = vec![
        (0, vec![make_block(1, 0, 3, 100)]),
        (1, vec![make_block(2, 1, 3, 40)]),
    ];
    let mut req = netty_send_request(app, 2, 0, &blocks);
    let msg_len = send_message_len(&req) as i32;
    // As the 0.10 Netty client: Σ(length + 32) plus the encoded message.
    let require_size = 132 + 72 + msg_len;
    let r = s
        .client
        .require_buffer(proto::RequireBufferRequest {
            require_size,
            app_id: app.into(),
            shuffle_id: 2,
            partition_ids: vec![0, 1],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::Success, "{}", r.ret_msg);
    req.require_buffer_id = r.require_buffer_id;
    let netty = s.running.netty_addr.expect("the Netty plane is on");
    let mut conn = NettyClient::connect(netty).await.unwrap();
    let status = |resp: Response| match resp {
        Response::Rpc(head) => status_of(head.status),
        other => panic!("send answered with {other:?}"),
    };
    let sent = conn.call(&Request::Send(req.clone())).await.unwrap();
    assert_eq!(status(sent), StatusCode::Success);
    // The same ticket again: it was taken, so nothing is pre-allocated any more.
    let again = conn.call(&Request::Send(req)).await.unwrap();
    let again = status(again);
    assert_eq!(again, StatusCode::InternalError, "the ticket was taken");
    s.running.shutdown().await;

    let lines = lines(&path);
    let sends: Vec<&Vec<String>> = lines
        .iter()
        .filter(|l| l[0].ends_with("cmd=sendShuffleData"))
        .collect();
    assert_eq!(sends.len(), 2, "{lines:?}");
    let (first, second) = (sends[0], sends[1]);
    assert_eq!(first[1], "statusCode=SUCCESS");
    assert!(first[2].starts_with("from=/127.0.0.1:"), "{first:?}");
    assert_eq!(first[4..6], [format!("appId={app}"), "shuffleId=2".into()]);
    assert_eq!(
        first[6],
        format!(
            "args{{requireBufferId={}, requireSize={require_size}, isPreAllocated=true, \
             requireBlocksSize={}, stageAttemptNumber=0, partitionCount=2}}",
            r.require_buffer_id,
            require_size - msg_len
        )
    );
    assert_eq!(first.len(), 7, "no return part: {first:?}");
    assert_eq!(second[1], format!("statusCode={}", again.as_str_name()));
    assert_eq!(
        second[6],
        format!(
            "args{{requireBufferId={}, requireSize=0, isPreAllocated=false, \
             requireBlocksSize=0, stageAttemptNumber=0, partitionCount=2}}",
            r.require_buffer_id
        )
    );
}

/// The storage log's lines, split on `|`.
fn storage_lines(path: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| l.split('|').map(str::to_owned).collect())
        .collect()
}

/// `yyyy-MM-dd HH:mm:ss`.
fn is_seconds_stamp(s: &str) -> bool {
    s.len() == 19
        && s.chars().enumerate().all(|(i, c)| match i {
            4 | 7 => c == '-',
            10 => c == ' ',
            13 | 16 => c == ':',
            _ => c.is_ascii_digit(),
        })
}

#[tokio::test]
async fn storage_audit_logs_every_spill_and_purge_as_java_does() {
    let dir = tempfile::TempDir::new().unwrap();
    let path = dir.path().join("logs/shuffle_server_storage_audit.log");
    let p = path.clone();
    let mut s = start(2, move |c| {
        c.audit.storage_log = true;
        c.audit.storage_log_path = p;
    })
    .await;
    let disks: Vec<String> = s
        .disks
        .iter()
        .map(|d| d.path().to_string_lossy().into_owned())
        .collect();
    let app = "app_storage_audit";
    register(&mut s.client, app, 5, 0..2, false).await;
    send(
        &mut s.client,
        app,
        5,
        vec![
            (0, vec![make_block(1, 0, 9, 100), make_block(2, 0, 9, 20)]),
            (1, vec![make_block(3, 1, 9, 50)]),
        ],
    )
    .await;
    // finishShuffle spills both partitions and answers once they are durable.
    common::finish(&mut s.client, app, 5).await;
    let unreg = s
        .client
        .unregister_shuffle(proto::ShuffleUnregisterRequest {
            app_id: app.into(),
            shuffle_id: 5,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(unreg.status), StatusCode::Success);
    let gone = s
        .client
        .unregister_shuffle_by_app_id(proto::ShuffleUnregisterByAppIdRequest { app_id: app.into() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(gone.status), StatusCode::Success);
    // The app's files go in the background; shutdown waits for that, then flushes the log.
    s.running.shutdown().await;

    let lines = storage_lines(&path);
    let writes: Vec<&Vec<String>> = lines.iter().filter(|l| l[0] == "w").collect();
    assert_eq!(writes.len(), 2, "one line per spilled partition: {lines:?}");
    for (range, size) in [("0_0", 2 * 32 + 120), ("1_1", 32 + 50)] {
        let w = writes
            .iter()
            .find(|l| l[3] == range)
            .unwrap_or_else(|| panic!("no write of range {range}: {lines:?}"));
        assert_eq!(w.len(), 10, "{w:?}");
        assert_eq!(w[1..3], [app.to_owned(), "5".into()]);
        assert_eq!(w[4], "local");
        assert!(disks.contains(&w[5]), "a data path: {w:?}");
        assert_eq!(w[6], size.to_string(), "Σ(length + 32): {w:?}");
        assert!(is_seconds_stamp(&w[7]) && is_seconds_stamp(&w[8]), "{w:?}");
        assert!(w[7] <= w[8], "{w:?}");
        w[9].parse::<u64>().expect("milliseconds");
    }
    // Every write comes before the purges.
    let first_delete = lines.iter().position(|l| l[0] == "d").expect("deletes");
    assert!(
        lines[..first_delete].iter().all(|l| l[0] == "w"),
        "{lines:?}"
    );

    let deletes: Vec<&Vec<String>> = lines.iter().filter(|l| l[0] == "d").collect();
    let mut shuffle_purge: Vec<&str> = deletes
        .iter()
        .filter(|l| l.len() == 5)
        .map(|l| {
            assert_eq!(
                l[1..4],
                [app.to_owned(), "5".into(), "local".into()],
                "{l:?}"
            );
            l[4].as_str()
        })
        .collect();
    let mut app_purge: Vec<&str> = deletes
        .iter()
        .filter(|l| l.len() == 4)
        .map(|l| {
            assert_eq!(l[1..3], [app.to_owned(), "local".into()], "{l:?}");
            l[3].as_str()
        })
        .collect();
    assert_eq!(deletes.len(), 4, "one line per disk and purge: {lines:?}");
    shuffle_purge.sort();
    app_purge.sort();
    let mut expected: Vec<&str> = disks.iter().map(String::as_str).collect();
    expected.sort();
    assert_eq!(shuffle_purge, expected);
    assert_eq!(app_purge, expected);
}

#[tokio::test]
async fn storage_audit_is_off_by_default() {
    let dir = tempfile::TempDir::new().unwrap();
    let path = dir.path().join("storage.log");
    let p = path.clone();
    let mut s = start(1, move |c| {
        assert!(!c.audit.storage_log, "Java's default is off");
        c.audit.storage_log_path = p;
    })
    .await;
    let app = "app_storage_quiet";
    register(&mut s.client, app, 1, 0..1, false).await;
    send(
        &mut s.client,
        app,
        1,
        vec![(0, vec![make_block(1, 0, 1, 10)])],
    )
    .await;
    common::finish(&mut s.client, app, 1).await;
    s.running.shutdown().await;
    assert!(!path.exists(), "storage_log = false writes nothing");
}
