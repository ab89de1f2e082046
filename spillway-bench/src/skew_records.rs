//! `spillway-bench skew-records`: changes one record count a server holds for a running app, so
//! that a reader with the client's integrity validation on must fail with "Inconsistent number
//! of records". The Spark harness's integrity cell runs it while its job is paused between two
//! reads of one shuffle: the first read proves the counts the server answered match, the second
//! proves the client really checks them.
//!
//! It speaks the protocol as a client does: `getShuffleResultForMultiPart` for the counts and
//! block ids, then `reportShuffleResult` of the same task attempt with the count changed and
//! one of that attempt's block ids in that partition again (a server keeps a count only beside
//! a block id of the same report; the id is already held, so the block ids do not change).

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{bail, Context};
use spillway::ids::BlockIdLayout;
use spillway::proto;
use spillway::proto::shuffle_server_client::ShuffleServerClient;
use spillway::proto::StatusCode;

/// What to change.
#[derive(clap::Args, Debug)]
pub struct SkewOptions {
    /// The server's gRPC address.
    #[arg(long)]
    pub grpc: SocketAddr,
    /// The app id; without it, the one app of those the coordinator at `--coordinator-http`
    /// lists whose shuffle has record counts on this server.
    #[arg(long)]
    pub app: Option<String>,
    /// A coordinator's HTTP base URL (its `/api/app/appInfos` names the app).
    #[arg(long)]
    pub coordinator_http: Option<String>,
    /// The shuffle id.
    #[arg(long, default_value_t = 0)]
    pub shuffle: i32,
    /// How many partitions the shuffle has (all of them are asked for).
    #[arg(long)]
    pub partitions: i32,
    /// What to add to the first count found.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub add: i64,
}

/// Changes the first count the server answers; returns a line saying which.
pub async fn run(opts: &SkewOptions) -> anyhow::Result<String> {
    let channel = crate::client::channel(opts.grpc).await?;
    let mut grpc = ShuffleServerClient::new(channel);
    let apps = match (&opts.app, &opts.coordinator_http) {
        (Some(app), _) => vec![app.clone()],
        (None, Some(url)) => listed_apps(url).await?,
        (None, None) => bail!("give --app or --coordinator-http"),
    };
    // The coordinator also lists apps that never wrote here (a readiness probe's): the app is
    // the one whose shuffle has counts on this server.
    let mut with_counts = Vec::new();
    for app in &apps {
        if let Ok(held) = held(&mut grpc, app, opts).await {
            if !held.counts.is_empty() {
                with_counts.push((app.clone(), held));
            }
        }
    }
    let (app, before) = match with_counts.len() {
        1 => with_counts.remove(0),
        n => bail!(
            "{n} of the apps {apps:?} have record counts for shuffle {} on {}, not one: give \
             --app",
            opts.shuffle,
            opts.grpc
        ),
    };
    let (partition, task, records) = before.counts[0];
    let layout = BlockIdLayout::DEFAULT;
    let Some(block_id) = before
        .block_ids
        .iter()
        .copied()
        .find(|&id| layout.partition_of(id) == partition && layout.task_attempt_of(id) == task)
    else {
        bail!(
            "{app}: no block id of task attempt {task} in partition {partition} among the {} \
             the server holds",
            before.block_ids.len()
        );
    };
    let changed = records + opts.add;
    let r = grpc
        .report_shuffle_result(proto::ReportShuffleResultRequest {
            app_id: app.clone(),
            shuffle_id: opts.shuffle,
            task_attempt_id: task,
            bitmap_num: 1,
            partition_to_block_ids: vec![proto::PartitionToBlockIds {
                partition_id: partition,
                block_ids: vec![block_id],
            }],
            partition_stats: vec![proto::PartitionStats {
                partition_id: partition,
                task_attempt_id_to_records: vec![proto::TaskAttemptIdToRecords {
                    task_attempt_id: task,
                    record_number: changed,
                }],
            }],
        })
        .await?
        .into_inner();
    if r.status != StatusCode::Success as i32 {
        bail!("reportShuffleResult: status {} {}", r.status, r.ret_msg);
    }
    let after = held(&mut grpc, &app, opts).await?;
    if !after.counts.contains(&(partition, task, changed)) {
        bail!(
            "the server still answers {:?} after the report",
            after.counts
        );
    }
    if after.block_ids != before.block_ids {
        bail!("the report changed the block ids the server holds");
    }
    Ok(format!(
        "{app} shuffle {} partition {partition} task attempt {task}: {records} -> {changed} \
         records ({} counts held)",
        opts.shuffle,
        before.counts.len()
    ))
}

/// What the server answers for the shuffle's partitions.
struct Held {
    /// Every `(partition, task attempt, records)`.
    counts: Vec<(i32, i64, i64)>,
    /// Every block id, in order.
    block_ids: Vec<i64>,
}

async fn held(
    grpc: &mut ShuffleServerClient<tonic::transport::Channel>,
    app: &str,
    opts: &SkewOptions,
) -> anyhow::Result<Held> {
    let r = grpc
        .get_shuffle_result_for_multi_part(proto::GetShuffleResultForMultiPartRequest {
            app_id: app.to_owned(),
            shuffle_id: opts.shuffle,
            partitions: (0..opts.partitions).collect(),
            // The client's default layout (18 sequence, 24 partition, 21 task attempt bits).
            block_id_layout: Some(proto::BlockIdLayout {
                sequence_no_bits: 18,
                partition_id_bits: 24,
                task_attempt_id_bits: 21,
            }),
        })
        .await?
        .into_inner();
    if r.status != StatusCode::Success as i32 {
        bail!(
            "getShuffleResultForMultiPart: status {} {}",
            r.status,
            r.ret_msg
        );
    }
    let counts = r
        .partition_stats
        .iter()
        .flat_map(|p| {
            p.task_attempt_id_to_records
                .iter()
                .map(move |t| (p.partition_id, t.task_attempt_id, t.record_number))
        })
        .collect();
    let block_ids = spillway::codec::bitmap::decode(&r.serialized_bitmap)
        .context("the answer's block-id bitmap")?
        .iter()
        .map(|id| id as i64)
        .collect();
    Ok(Held { counts, block_ids })
}

/// The app ids the coordinator lists.
async fn listed_apps(url: &str) -> anyhow::Result<Vec<String>> {
    let body: serde_json::Value = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()?
        .get(format!("{}/api/app/appInfos", url.trim_end_matches('/')))
        .send()
        .await
        .with_context(|| format!("GET {url}/api/app/appInfos"))?
        .bytes()
        .await
        .map(|b| serde_json::from_slice(&b))??;
    Ok(body["data"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x["appId"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default())
}
