//! The assignment rule behind `getShuffleAssignments`: which live servers get which partition
//! ranges. A pure function of the servers, their current load and the request, so it is tested
//! without a network and gives the same answer for the same inputs.
//!
//! The rule is the Java 0.10 coordinator's `PARTITION_BALANCE` (PartitionBalanceAssignmentStrategy
//! with AbstractAssignmentStrategy's host and partition strategies), made deterministic:
//! 1. candidates are the live servers that are `ACTIVE`, not excluded (the caller filters),
//!    not in `faultyServerIds`, and carry every required tag;
//! 2. candidates are ranked by `availableMemory / (assignedPartitions + average)`, highest
//!    first, where `average = max(1, partitionNum × dataReplica / shuffle_nodes_max)` as in
//!    Java keeps an idle server from winning by memory alone; ties (which Java leaves to hash
//!    order) go to the less loaded server, then the lower id;
//! 3. servers wanted = the requested number when `0 < n < shuffle_nodes_max`, else
//!    `shuffle_nodes_max`, capped by the candidates. Java does not raise it to `dataReplica`
//!    and then hands a range the same server twice; Spillway raises it, so replicas are always
//!    distinct servers;
//! 4. the [`HostStrategy`] picks that many from the ranking: `PREFER_DIFF` (Java's default)
//!    takes one server per IP first and fills up with the rest in rank order, `MUST_DIFF`
//!    takes only one server per IP (possibly fewer), `NONE` takes the top ones;
//! 5. the [`PartitionStrategy`] lays the ranges on them: `ROUND` gives range `k` the
//!    `dataReplica` servers after those of range `k − 1`; `CONTINUOUS` (Java's default) cuts
//!    the ranges into groups of adjacent ranges sized from `estimateTaskConcurrency` (Java's
//!    `CoordinatorUtils.generateRangesGroup`), and group `i`'s replica `r` is server
//!    `(i + r) mod servers`, so a task's neighbouring partitions share a server.
//!
//! The caller adds the result to the app's load, so the next shuffle prefers other servers.

use std::borrow::Borrow;
use std::collections::{HashMap, HashSet};

use crate::proto::ServerStatus;

use super::registry::ServerNode;
pub use crate::config::coordinator::{HostStrategy, PartitionStrategy};

/// Most ranges one request may produce: the partitions the default block-id layout can address
/// (24 bits). Bounds the response a malformed request can make the coordinator build.
pub const MAX_RANGES: i64 = 1 << 24;

/// What `getShuffleAssignments` asks for, as sent (before any defaulting).
#[derive(Debug, Clone, Copy)]
pub struct AssignRequest<'a> {
    /// Partitions of the shuffle (`partitionNum`).
    pub partition_num: i32,
    /// Partitions per range (`partitionNumPerRange`; Spark always sends 1).
    pub partition_num_per_range: i32,
    /// Distinct servers per range (`dataReplica`).
    pub replica: i32,
    /// Servers to spread over (`assignmentShuffleServerNumber`); ≤ 0 means the default.
    pub server_number: i32,
    /// Tags every assigned server must carry (`requireTags`).
    pub require_tags: &'a [String],
    /// Servers the client has seen fail (`faultyServerIds`).
    pub faulty_server_ids: &'a [String],
    /// Tasks the client expects to run at once (`estimateTaskConcurrency`, 0.7+; 0 from older
    /// clients); sizes the `CONTINUOUS` groups.
    pub estimate_task_concurrency: i32,
}

/// The coordinator-wide part of the rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AssignPolicy {
    /// `coordinator.shuffle_server_number` (Java's `rss.coordinator.shuffle.nodes.max`): the
    /// most servers one shuffle gets, and the divisor of the balance average.
    pub shuffle_nodes_max: usize,
    /// See [`HostStrategy`].
    pub host: HostStrategy,
    /// See [`PartitionStrategy`].
    pub partition: PartitionStrategy,
}

/// Why no assignment could be made; answered as `INTERNAL_ERROR` with this text as `retMsg`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssignError {
    /// The numbers in the request make no sense.
    #[error("invalid assignment request: {0}")]
    Invalid(String),
    /// Fewer assignable servers than `dataReplica`. The text starts like the Java
    /// coordinator's, which operators and client logs already know.
    #[error(
        "There isn't enough shuffle servers: dataReplica is {needed} but {found} of {live} live \
         server(s) are ACTIVE, carry tags {require_tags:?} and are not in faultyServerIds{hint}"
    )]
    NotEnoughServers {
        /// `dataReplica`.
        needed: usize,
        /// Assignable servers.
        found: usize,
        /// Live servers of any status and tags.
        live: usize,
        /// The tags asked for.
        require_tags: Vec<String>,
        /// Why, when one tag alone rules the servers out (a client type the servers do not
        /// serve); empty otherwise.
        hint: String,
    },
    /// `MUST_DIFF` found fewer distinct hosts than `dataReplica`.
    #[error(
        "There isn't enough shuffle servers: dataReplica is {needed} but the assignable servers \
         are on {hosts} distinct host(s) and the host strategy is MUST_DIFF"
    )]
    NotEnoughHosts {
        /// `dataReplica`.
        needed: usize,
        /// Distinct IPs among the assignable servers.
        hosts: usize,
    },
}

/// The client type tag of the Netty data plane: a server heartbeats it only with a Netty port.
const NETTY_TAG: &str = "GRPC_NETTY";

/// When a `GRPC_NETTY` client finds too few servers and enough of them would do but for that
/// tag, the servers run without a Netty port: say so, with both ways out. Otherwise the
/// client's exception reads like a cluster that is too small, and a 0.10 client (whose
/// default type is `GRPC_NETTY`) retries it for about half an hour.
fn netty_hint<S: Borrow<ServerNode>>(
    live: &[S],
    req: &AssignRequest<'_>,
    faulty: &HashSet<&str>,
) -> String {
    if !req.require_tags.iter().any(|t| t == NETTY_TAG) {
        return String::new();
    }
    let others: Vec<String> = req
        .require_tags
        .iter()
        .filter(|t| *t != NETTY_TAG)
        .cloned()
        .collect();
    let without = live
        .iter()
        .map(Borrow::borrow)
        .filter(|s| {
            s.status == ServerStatus::Active
                && !faulty.contains(s.id.as_str())
                && s.has_tags(&others)
                && !s.tags.contains(NETTY_TAG)
        })
        .count();
    if without == 0 {
        return String::new();
    }
    format!(
        "; {without} server(s) would match but serve no Netty data plane (tag {NETTY_TAG}): \
         start them with a Netty port (netty_port; Java: rss.server.netty.port), or set \
         spark.rss.client.type=GRPC on the client"
    )
}

/// One partition range and its replicas, in replica order.
#[derive(Debug, Clone, PartialEq)]
pub struct RangeAssignment<'a> {
    /// First partition, inclusive.
    pub start: i32,
    /// Last partition, inclusive.
    pub end: i32,
    /// `dataReplica` distinct servers.
    pub servers: Vec<&'a ServerNode>,
}

/// Applies the module's rule. `live` are the servers heard from within the timeout and not
/// excluded (owned or shared: the coordinator passes the registry's `Arc`s); `load` is the
/// partitions already assigned per server id (missing = 0).
///
/// `partition_num == 0` is Ok with no ranges, whatever the servers.
pub fn assign<'a, S: Borrow<ServerNode>>(
    live: &'a [S],
    load: &HashMap<String, u64>,
    req: &AssignRequest<'_>,
    policy: &AssignPolicy,
) -> Result<Vec<RangeAssignment<'a>>, AssignError> {
    if req.partition_num < 0 {
        return Err(AssignError::Invalid(format!(
            "partitionNum is {}, expected 0 or more",
            req.partition_num
        )));
    }
    if req.partition_num_per_range < 1 {
        return Err(AssignError::Invalid(format!(
            "partitionNumPerRange is {}, expected 1 or more",
            req.partition_num_per_range
        )));
    }
    if req.replica < 1 {
        return Err(AssignError::Invalid(format!(
            "dataReplica is {}, expected 1 or more",
            req.replica
        )));
    }
    if req.partition_num == 0 {
        return Ok(Vec::new());
    }
    let partitions = i64::from(req.partition_num);
    let per_range = i64::from(req.partition_num_per_range);
    let range_count = (partitions + per_range - 1) / per_range;
    if range_count > MAX_RANGES {
        return Err(AssignError::Invalid(format!(
            "{range_count} partition ranges requested, at most {MAX_RANGES} are supported"
        )));
    }

    let faulty: HashSet<&str> = req.faulty_server_ids.iter().map(String::as_str).collect();
    let candidates: Vec<&ServerNode> = live
        .iter()
        .map(Borrow::borrow)
        .filter(|s| {
            s.status == ServerStatus::Active
                && !faulty.contains(s.id.as_str())
                && s.has_tags(req.require_tags)
        })
        .collect();
    // `replica >= 1` was checked above, so this also covers "no candidates".
    let replica = usize::try_from(req.replica).unwrap_or(usize::MAX);
    if candidates.len() < replica {
        return Err(AssignError::NotEnoughServers {
            needed: replica,
            found: candidates.len(),
            live: live.len(),
            require_tags: req.require_tags.to_vec(),
            hint: netty_hint(live, req, &faulty),
        });
    }

    let max = policy.shuffle_nodes_max.max(1);
    let wanted = match usize::try_from(req.server_number) {
        Ok(n) if n > 0 && n < max => n,
        _ => max,
    };
    let wanted = wanted.max(replica).min(candidates.len());

    let average = (partitions as u64 * replica as u64 / max as u64).max(1);
    // Each candidate's load and score are looked up once, not at every comparison of the sort.
    let mut ranked: Vec<(f64, u64, &ServerNode)> = candidates
        .into_iter()
        .map(|s| {
            let load = load.get(&s.id).copied().unwrap_or(0);
            let score = s.available_memory.max(0) as f64 / (load + average) as f64;
            (score, load, s)
        })
        .collect();
    // Ids are unique, so the order is total and an unstable sort gives one answer.
    ranked.sort_unstable_by(|a, b| {
        b.0.total_cmp(&a.0)
            .then_with(|| a.1.cmp(&b.1))
            .then_with(|| a.2.id.cmp(&b.2.id))
    });
    let candidates: Vec<&ServerNode> = ranked.into_iter().map(|(_, _, s)| s).collect();
    let chosen = pick_hosts(&candidates, wanted, policy.host);
    // MUST_DIFF may find fewer distinct IPs than replicas need.
    if chosen.len() < replica {
        return Err(AssignError::NotEnoughHosts {
            needed: replica,
            hosts: chosen.len(),
        });
    }
    let used = chosen.len();

    let range_of = |k: i64| {
        let start = k * per_range;
        let end = (start + per_range - 1).min(partitions - 1);
        // Both fit in i32: they lie in 0..partition_num.
        (start as i32, end as i32)
    };
    let mut ranges = Vec::with_capacity(range_count as usize);
    match policy.partition {
        PartitionStrategy::Round => {
            let mut next = 0usize;
            for k in 0..range_count {
                let (start, end) = range_of(k);
                let servers = (0..replica).map(|r| chosen[(next + r) % used]).collect();
                next = (next + replica) % used;
                ranges.push(RangeAssignment {
                    start,
                    end,
                    servers,
                });
            }
        }
        PartitionStrategy::Continuous => {
            let groups = range_groups(
                partitions,
                per_range,
                used as i64,
                req.estimate_task_concurrency,
            );
            let mut k = 0i64;
            for (group, size) in groups.into_iter().enumerate() {
                let servers: Vec<&ServerNode> =
                    (0..replica).map(|r| chosen[(group + r) % used]).collect();
                for _ in 0..size {
                    let (start, end) = range_of(k);
                    ranges.push(RangeAssignment {
                        start,
                        end,
                        servers: servers.clone(),
                    });
                    k += 1;
                }
            }
        }
    }
    Ok(ranges)
}

/// Takes `wanted` servers from `ranked` (best first) under `strategy`, keeping rank order.
fn pick_hosts<'a>(
    ranked: &[&'a ServerNode],
    wanted: usize,
    strategy: HostStrategy,
) -> Vec<&'a ServerNode> {
    if strategy == HostStrategy::None {
        return ranked.iter().take(wanted).copied().collect();
    }
    let mut ips: HashSet<&str> = HashSet::new();
    let mut chosen: Vec<&ServerNode> = Vec::with_capacity(wanted);
    for server in ranked {
        if chosen.len() >= wanted {
            break;
        }
        if ips.insert(server.ip.as_str()) {
            chosen.push(server);
        }
    }
    if strategy == HostStrategy::PreferDiff && chosen.len() < wanted {
        for server in ranked {
            if chosen.len() >= wanted {
                break;
            }
            if !chosen.iter().any(|c| c.id == server.id) {
                chosen.push(server);
            }
        }
    }
    chosen
}

/// Sizes of the groups of adjacent ranges that `CONTINUOUS` gives one server each, in order,
/// as Java's `CoordinatorUtils.generateRangesGroup` cuts them: with `c = min(partitions,
/// estimateTaskConcurrency)`, full rounds of `servers` groups of
/// `max(1, c / (servers × partitionNumPerRange))` ranges, then a last round spreading the
/// remainder as evenly as possible, larger groups first. So `c` concurrent tasks reading
/// neighbouring partitions mostly hit different servers.
pub fn range_groups(
    partitions: i64,
    per_range: i64,
    servers: i64,
    estimate_task_concurrency: i32,
) -> Vec<i64> {
    if partitions <= 0 || per_range <= 0 || servers <= 0 {
        return Vec::new();
    }
    let ranges = (partitions + per_range - 1) / per_range;
    let concurrency = partitions.min(i64::from(estimate_task_concurrency));
    let per_group = if concurrency > servers * per_range {
        concurrency / (servers * per_range)
    } else {
        1
    };
    let round_size = per_group * servers;
    let rounds = ranges / round_size;
    let remain = ranges % round_size;
    let last_per_group = remain / servers;
    let last_extra = remain % servers;
    let mut sizes = Vec::new();
    sizes.extend(std::iter::repeat_n(per_group, (rounds * servers) as usize));
    for g in 0..servers {
        let size = last_per_group + i64::from(g < last_extra);
        if size > 0 {
            sizes.push(size);
        }
    }
    sizes
}

/// Partitions each server received in `ranges` (a range of `n` partitions counts `n` for each of
/// its replicas): the load to add for the app.
pub fn partitions_per_server(ranges: &[RangeAssignment<'_>]) -> HashMap<String, u64> {
    let mut counts = HashMap::new();
    for range in ranges {
        let size = (i64::from(range.end) - i64::from(range.start) + 1) as u64;
        for server in &range.servers {
            *counts.entry(server.id.clone()).or_insert(0) += size;
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    fn server(id: &str, memory: i64, tags: &[&str]) -> ServerNode {
        ServerNode::testing(id, memory, tags)
    }

    fn three() -> Vec<ServerNode> {
        vec![
            server("a", 1000, &["ss_v5", "GRPC"]),
            server("b", 1000, &["ss_v5", "GRPC", "GRPC_NETTY"]),
            server("c", 1000, &["ss_v5", "GRPC_NETTY"]),
        ]
    }

    fn request(partition_num: i32, replica: i32) -> AssignRequest<'static> {
        AssignRequest {
            partition_num,
            partition_num_per_range: 1,
            replica,
            server_number: -1,
            require_tags: &[],
            faulty_server_ids: &[],
            estimate_task_concurrency: 0,
        }
    }

    /// Java's `ROUND` with no host rule: the plain round-robin the older tests describe.
    fn round(shuffle_nodes_max: usize) -> AssignPolicy {
        AssignPolicy {
            shuffle_nodes_max,
            host: HostStrategy::None,
            partition: PartitionStrategy::Round,
        }
    }

    fn ids(range: &RangeAssignment<'_>) -> Vec<String> {
        range.servers.iter().map(|s| s.id.clone()).collect()
    }

    /// Checks the shape every answer must have and returns the ids used.
    fn check_cover(
        ranges: &[RangeAssignment<'_>],
        req: &AssignRequest<'_>,
    ) -> BTreeMap<String, u64> {
        let mut expected_start = 0;
        for range in ranges {
            assert_eq!(range.start, expected_start, "ranges are contiguous");
            assert!(range.end >= range.start);
            assert!(range.end - range.start < req.partition_num_per_range);
            expected_start = range.end + 1;
            assert_eq!(range.servers.len(), req.replica as usize);
            let distinct: HashSet<&str> = range.servers.iter().map(|s| s.id.as_str()).collect();
            assert_eq!(distinct.len(), range.servers.len(), "replicas are distinct");
        }
        assert_eq!(
            expected_start, req.partition_num,
            "every partition is covered"
        );
        partitions_per_server(ranges).into_iter().collect()
    }

    #[test]
    fn spreads_single_partition_ranges_evenly() {
        let servers = three();
        let req = request(10, 1);
        let ranges = assign(&servers, &HashMap::new(), &req, &round(9)).unwrap();
        assert_eq!(ranges.len(), 10);
        let counts = check_cover(&ranges, &req);
        assert_eq!(counts.values().copied().collect::<Vec<_>>(), [4, 3, 3]);
        // Deterministic: equal servers are taken in id order.
        assert_eq!(ids(&ranges[0]), ["a"]);
        assert_eq!(ids(&ranges[1]), ["b"]);
        assert_eq!(ids(&ranges[3]), ["a"]);
    }

    #[test]
    fn replicas_are_distinct_and_every_partition_is_covered_per_replica() {
        let servers = three();
        let req = AssignRequest {
            partition_num: 7,
            partition_num_per_range: 3,
            ..request(7, 2)
        };
        let ranges = assign(&servers, &HashMap::new(), &req, &round(9)).unwrap();
        assert_eq!(
            ranges.iter().map(|r| (r.start, r.end)).collect::<Vec<_>>(),
            [(0, 2), (3, 5), (6, 6)]
        );
        let counts = check_cover(&ranges, &req);
        assert_eq!(
            counts.values().sum::<u64>(),
            14,
            "7 partitions × 2 replicas"
        );
    }

    #[test]
    fn required_tags_faulty_ids_and_status_filter_candidates() {
        let mut servers = three();
        let tags = ["GRPC".to_string()];
        let req = AssignRequest {
            require_tags: &tags,
            ..request(4, 1)
        };
        let ranges = assign(&servers, &HashMap::new(), &req, &round(9)).unwrap();
        let used: HashSet<String> = ranges.iter().flat_map(ids).collect();
        assert_eq!(used, HashSet::from(["a".into(), "b".into()]));

        let faulty = ["a".to_string()];
        let req = AssignRequest {
            faulty_server_ids: &faulty,
            ..req
        };
        let ranges = assign(&servers, &HashMap::new(), &req, &round(9)).unwrap();
        assert!(ranges.iter().all(|r| ids(r) == ["b"]));

        servers[1].status = ServerStatus::Decommissioning;
        let err = assign(&servers, &HashMap::new(), &req, &round(9)).unwrap_err();
        assert_eq!(
            err,
            AssignError::NotEnoughServers {
                needed: 1,
                found: 0,
                live: 3,
                require_tags: tags.to_vec(),
                hint: String::new(),
            }
        );
        assert!(err
            .to_string()
            .starts_with("There isn't enough shuffle servers"));
        for status in [
            ServerStatus::Unhealthy,
            ServerStatus::Decommissioned,
            ServerStatus::Lost,
            ServerStatus::Excluded,
        ] {
            servers[1].status = status;
            assert!(assign(&servers, &HashMap::new(), &req, &round(9)).is_err());
        }
    }

    #[test]
    fn server_number_is_requested_or_default_raised_to_replica_and_capped() {
        let servers = three();
        let used = |server_number: i32, replica: i32, default: usize| {
            let req = AssignRequest {
                server_number,
                ..request(30, replica)
            };
            let ranges = assign(&servers, &HashMap::new(), &req, &round(default)).unwrap();
            check_cover(&ranges, &req).len()
        };
        assert_eq!(used(2, 1, 9), 2);
        assert_eq!(used(1, 1, 9), 1);
        assert_eq!(used(99, 1, 9), 3, "capped by candidates");
        assert_eq!(used(-1, 1, 2), 2, "-1 takes the default");
        assert_eq!(used(0, 1, 1), 1, "0 takes the default");
        assert_eq!(used(-1, 1, 9999), 3);
        assert_eq!(used(1, 2, 9), 2, "raised to dataReplica");
    }

    #[test]
    fn prefers_memory_per_assigned_partition() {
        let servers = vec![
            server("a", 1000, &[]),
            server("b", 5000, &[]),
            server("c", 2000, &[]),
        ];
        let req = AssignRequest {
            server_number: 1,
            ..request(1, 1)
        };
        let pick = |load: &HashMap<String, u64>| {
            ids(&assign(&servers, load, &req, &round(9)).unwrap()[0])[0].clone()
        };
        assert_eq!(pick(&HashMap::new()), "b");
        // b: 5000/(4+1) = 1000 < c: 2000/(0+1).
        assert_eq!(pick(&HashMap::from([("b".into(), 4)])), "c");
        // Negative memory reports count as none.
        let servers = vec![server("a", -5, &[]), server("b", 0, &[])];
        let ranges = assign(&servers, &HashMap::from([("a".into(), 1)]), &req, &round(9)).unwrap();
        assert_eq!(ids(&ranges[0]), ["b"], "equal scores: the less loaded wins");
    }

    #[test]
    fn load_moves_the_next_shuffle_elsewhere() {
        let servers = three();
        let mut load = HashMap::new();
        let req = AssignRequest {
            server_number: 1,
            ..request(1, 1)
        };
        let mut picked = Vec::new();
        for _ in 0..3 {
            let ranges = assign(&servers, &load, &req, &round(9)).unwrap();
            picked.push(ids(&ranges[0])[0].clone());
            for (id, n) in partitions_per_server(&ranges) {
                *load.entry(id).or_insert(0) += n;
            }
        }
        picked.sort();
        assert_eq!(picked, ["a", "b", "c"]);
    }

    #[test]
    fn bad_requests_are_errors_and_zero_partitions_is_empty() {
        let servers = three();
        assert!(assign(&servers, &HashMap::new(), &request(0, 1), &round(9))
            .unwrap()
            .is_empty());
        assert!(
            assign::<ServerNode>(&[], &HashMap::new(), &request(0, 1), &round(9))
                .unwrap()
                .is_empty()
        );
        for req in [
            request(-1, 1),
            request(4, 0),
            request(4, -2),
            AssignRequest {
                partition_num_per_range: 0,
                ..request(4, 1)
            },
            request(i32::MAX, 1),
        ] {
            assert!(
                matches!(
                    assign(&servers, &HashMap::new(), &req, &round(9)),
                    Err(AssignError::Invalid(_))
                ),
                "{req:?}"
            );
        }
        assert!(matches!(
            assign(&servers, &HashMap::new(), &request(4, 4), &round(9)),
            Err(AssignError::NotEnoughServers {
                needed: 4,
                found: 3,
                ..
            })
        ));
        assert!(matches!(
            assign::<ServerNode>(&[], &HashMap::new(), &request(4, 1), &round(9)),
            Err(AssignError::NotEnoughServers { found: 0, .. })
        ));
        // Huge ranges need not be many.
        let req = AssignRequest {
            partition_num_per_range: i32::MAX,
            ..request(i32::MAX, 1)
        };
        let ranges = assign(&servers, &HashMap::new(), &req, &round(9)).unwrap();
        assert_eq!(ranges.len(), 1);
        assert_eq!((ranges[0].start, ranges[0].end), (0, i32::MAX - 1));
    }

    /// Java's own expectations for `CoordinatorUtils.generateRangesGroup`
    /// (CoordinatorUtilsTest.testGenerateRangesGroup).
    #[test]
    fn continuous_groups_match_java() {
        let twos_then_ones = |twos: usize, ones: usize| {
            let mut v = vec![2i64; twos];
            v.extend(std::iter::repeat_n(1, ones));
            v
        };
        assert_eq!(range_groups(52, 2, 5, 20), twos_then_ones(11, 4));
        assert_eq!(range_groups(48, 2, 5, 20), twos_then_ones(10, 4));
        assert_eq!(range_groups(96, 2, 5, 20), twos_then_ones(23, 2));
        let mut threes = vec![3i64; 15];
        threes.extend([1, 1, 1]);
        assert_eq!(range_groups(96, 2, 5, 30), threes);
        // 48 single partitions, 5 servers, 20 tasks: groups of 4, then 2, 2, 2, 1, 1.
        let mut fours = vec![4i64; 10];
        fours.extend([2, 2, 2, 1, 1]);
        assert_eq!(range_groups(48, 1, 5, 20), fours);
        // Old clients send 0: one range per group, i.e. round-robin.
        assert_eq!(range_groups(7, 1, 3, 0), vec![1; 7]);
        assert!(range_groups(0, 1, 3, 10).is_empty());
    }

    #[test]
    fn continuous_gives_each_server_adjacent_partitions() {
        let servers = three();
        let req = AssignRequest {
            estimate_task_concurrency: 6,
            ..request(6, 2)
        };
        let policy = AssignPolicy {
            partition: PartitionStrategy::Continuous,
            ..round(3)
        };
        let ranges = assign(&servers, &HashMap::new(), &req, &policy).unwrap();
        check_cover(&ranges, &req);
        let layout: Vec<Vec<String>> = ranges.iter().map(ids).collect();
        // 6 tasks on 3 servers: pairs of adjacent partitions; replica r is the next server.
        assert_eq!(
            layout,
            [
                ["a", "b"],
                ["a", "b"],
                ["b", "c"],
                ["b", "c"],
                ["c", "a"],
                ["c", "a"]
            ]
        );
    }

    #[test]
    fn host_strategies_spread_over_ips() {
        // Ranked by memory: a1, a2 (same host), b1, b2 (same host), c1.
        let on = |id: &str, ip: &str, memory: i64| ServerNode {
            ip: ip.into(),
            ..server(id, memory, &[])
        };
        let servers = vec![
            on("a1", "10.0.0.1", 900),
            on("a2", "10.0.0.1", 800),
            on("b1", "10.0.0.2", 700),
            on("b2", "10.0.0.2", 600),
            on("c1", "10.0.0.3", 500),
        ];
        let used = |host: HostStrategy, server_number: i32| {
            let req = AssignRequest {
                server_number,
                ..request(12, 1)
            };
            let policy = AssignPolicy { host, ..round(9) };
            let ranges = assign(&servers, &HashMap::new(), &req, &policy).unwrap();
            check_cover(&ranges, &req).into_keys().collect::<Vec<_>>()
        };
        assert_eq!(used(HostStrategy::None, 3), ["a1", "a2", "b1"]);
        assert_eq!(used(HostStrategy::PreferDiff, 3), ["a1", "b1", "c1"]);
        assert_eq!(
            used(HostStrategy::PreferDiff, 4),
            ["a1", "a2", "b1", "c1"],
            "fills with the best of the rest"
        );
        assert_eq!(used(HostStrategy::MustDiff, 4), ["a1", "b1", "c1"]);
        let req = AssignRequest {
            server_number: 4,
            ..request(4, 4)
        };
        let must = AssignPolicy {
            host: HostStrategy::MustDiff,
            ..round(9)
        };
        let err = assign(&servers, &HashMap::new(), &req, &must).unwrap_err();
        assert_eq!(
            err,
            AssignError::NotEnoughHosts {
                needed: 4,
                hosts: 3
            }
        );
        assert!(err
            .to_string()
            .starts_with("There isn't enough shuffle servers"));
    }

    #[test]
    fn server_number_at_or_above_the_max_takes_the_max() {
        let servers: Vec<ServerNode> = (0..6).map(|i| server(&format!("s{i}"), 100, &[])).collect();
        let used = |server_number: i32| {
            let req = AssignRequest {
                server_number,
                ..request(60, 1)
            };
            let ranges = assign(&servers, &HashMap::new(), &req, &round(4)).unwrap();
            check_cover(&ranges, &req).len()
        };
        assert_eq!(used(3), 3);
        assert_eq!(used(4), 4);
        assert_eq!(used(5), 4, "Java caps the request at shuffle.nodes.max");
        assert_eq!(used(-1), 4);
    }

    proptest! {
        #[test]
        fn every_answer_covers_each_partition_once_per_replica(
            memories in proptest::collection::vec(0i64..10_000, 1..8),
            partition_num in 1i32..200,
            per_range in 1i32..10,
            replica in 1i32..4,
            server_number in -1i32..10,
            estimate_task_concurrency in -1i32..300,
        ) {
            let servers: Vec<ServerNode> = memories
                .iter()
                .enumerate()
                .map(|(i, m)| server(&format!("s{i}"), *m, &[]))
                .collect();
            let req = AssignRequest {
                partition_num,
                partition_num_per_range: per_range,
                replica,
                server_number,
                require_tags: &[],
                faulty_server_ids: &[],
                estimate_task_concurrency,
            };
            for partition in [PartitionStrategy::Round, PartitionStrategy::Continuous] {
                let policy = AssignPolicy { partition, ..round(3) };
                match assign(&servers, &HashMap::new(), &req, &policy) {
                    Ok(ranges) => {
                        let counts = check_cover(&ranges, &req);
                        let total: u64 = counts.values().sum();
                        prop_assert_eq!(total, partition_num as u64 * replica as u64);
                    }
                    Err(AssignError::NotEnoughServers { .. }) => {
                        prop_assert!(servers.len() < replica as usize);
                    }
                    Err(e) => prop_assert!(false, "unexpected {e}"),
                }
            }
        }
    }
}
