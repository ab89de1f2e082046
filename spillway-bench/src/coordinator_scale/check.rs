//! Whether a `getShuffleAssignments` answer is correct for the simulated cluster: every
//! partition covered once, in order, by `dataReplica` distinct servers; every server one the
//! simulation runs, heartbeating, ACTIVE, carrying the required tags and not faulty; as many
//! distinct servers as the coordinator's rule promises (`shuffle.nodes.max`, capped by the
//! eligible servers, all on distinct hosts here).

use std::collections::{BTreeSet, HashMap, HashSet};

use spillway::proto::{self, StatusCode};

/// What the checker knows of one simulated server.
#[derive(Debug, Clone)]
pub struct Known {
    /// Address clients would connect to.
    pub ip: String,
    /// gRPC port.
    pub port: i32,
    /// Tags it sends.
    pub tags: Vec<String>,
    /// Whether its heartbeat says ACTIVE (others must never be assigned).
    pub active: bool,
}

impl Known {
    fn eligible(&self, require: &[String]) -> bool {
        self.active && require.iter().all(|t| self.tags.contains(t))
    }
}

/// Checks `resp` against `req`; Ok carries the distinct servers used.
pub fn check(
    req: &proto::GetShuffleServerRequest,
    resp: &proto::GetShuffleAssignmentsResponse,
    known: &HashMap<String, Known>,
    nodes_max: usize,
) -> Result<BTreeSet<String>, String> {
    if resp.status != StatusCode::Success as i32 {
        return Err(format!(
            "status {} ({})",
            resp.status,
            if resp.ret_msg.is_empty() {
                "no message"
            } else {
                &resp.ret_msg
            }
        ));
    }
    let faulty: HashSet<&str> = req.faulty_server_ids.iter().map(String::as_str).collect();
    let mut next = 0;
    let mut used: BTreeSet<&str> = BTreeSet::new();
    for range in &resp.assignments {
        if range.start_partition != next || range.end_partition < range.start_partition {
            return Err(format!(
                "range {}-{} where partition {next} was due",
                range.start_partition, range.end_partition
            ));
        }
        next = range.end_partition + 1;
        let distinct = range
            .server
            .iter()
            .enumerate()
            .all(|(k, s)| range.server[..k].iter().all(|o| o.id != s.id));
        if range.server.len() != req.data_replica as usize || !distinct {
            return Err(format!(
                "range {}-{} has {} server(s) (distinct: {distinct}); dataReplica is {}",
                range.start_partition,
                range.end_partition,
                range.server.len(),
                req.data_replica
            ));
        }
        for s in &range.server {
            if used.contains(s.id.as_str()) {
                continue; // checked at its first range
            }
            let k = known
                .get(&s.id)
                .ok_or_else(|| format!("server {} is not one of the cluster's", s.id))?;
            if k.ip != s.ip || k.port != s.port {
                return Err(format!("server {} answered as {}:{}", s.id, s.ip, s.port));
            }
            if !k.eligible(&req.require_tags) {
                return Err(format!(
                    "server {} is not ACTIVE or lacks tags {:?}",
                    s.id, req.require_tags
                ));
            }
            if faulty.contains(s.id.as_str()) {
                return Err(format!("server {} is in faultyServerIds", s.id));
            }
            used.insert(s.id.as_str());
        }
    }
    if next != req.partition_num {
        return Err(format!(
            "ranges end at partition {next}, the shuffle has {}",
            req.partition_num
        ));
    }
    let max_wanted = match usize::try_from(req.assignment_shuffle_server_number) {
        Ok(n) if n > 0 && n < nodes_max => n,
        _ => nodes_max,
    }
    .max(req.data_replica as usize)
    .min(req.partition_num.max(0) as usize);
    if used.len() == max_wanted {
        // Every server used is eligible, so there were at least this many.
        return Ok(used.into_iter().map(str::to_owned).collect());
    }
    let eligible = known
        .iter()
        .filter(|(id, k)| k.eligible(&req.require_tags) && !faulty.contains(id.as_str()))
        .count();
    let wanted = match usize::try_from(req.assignment_shuffle_server_number) {
        Ok(n) if n > 0 && n < nodes_max => n,
        _ => nodes_max,
    }
    .max(req.data_replica as usize)
    .min(eligible);
    if req.partition_num > 0 && used.len() != wanted.min(req.partition_num as usize) {
        return Err(format!(
            "{} distinct servers for {} eligible; {wanted} expected",
            used.len(),
            eligible
        ));
    }
    Ok(used.into_iter().map(str::to_owned).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known() -> HashMap<String, Known> {
        (0..4)
            .map(|i| {
                (
                    format!("s{i}"),
                    Known {
                        ip: format!("127.10.0.{i}"),
                        port: 19999,
                        tags: vec!["ss_v5".into(), "GRPC".into()],
                        active: i != 3,
                    },
                )
            })
            .collect()
    }

    fn server(i: usize) -> proto::ShuffleServerId {
        proto::ShuffleServerId {
            id: format!("s{i}"),
            ip: format!("127.10.0.{i}"),
            port: 19999,
            ..Default::default()
        }
    }

    fn answer(ranges: &[(i32, i32, usize)]) -> proto::GetShuffleAssignmentsResponse {
        proto::GetShuffleAssignmentsResponse {
            status: StatusCode::Success as i32,
            assignments: ranges
                .iter()
                .map(|(a, b, s)| proto::PartitionRangeAssignment {
                    start_partition: *a,
                    end_partition: *b,
                    server: vec![server(*s)],
                })
                .collect(),
            ret_msg: String::new(),
        }
    }

    fn request() -> proto::GetShuffleServerRequest {
        proto::GetShuffleServerRequest {
            partition_num: 3,
            partition_num_per_range: 1,
            data_replica: 1,
            require_tags: vec!["ss_v5".into(), "GRPC".into()],
            assignment_shuffle_server_number: -1,
            ..Default::default()
        }
    }

    #[test]
    fn a_correct_answer_passes_and_each_fault_is_caught() {
        let k = known();
        let req = request();
        let good = answer(&[(0, 0, 0), (1, 1, 1), (2, 2, 2)]);
        assert_eq!(check(&req, &good, &k, 9).unwrap().len(), 3);
        // Too few distinct servers for three eligible.
        assert!(check(&req, &answer(&[(0, 1, 0), (2, 2, 1)]), &k, 9).is_err());
        // An UNHEALTHY server, a gap, a missing tail, an unknown server.
        assert!(check(&req, &answer(&[(0, 0, 0), (1, 1, 1), (2, 2, 3)]), &k, 9).is_err());
        assert!(check(&req, &answer(&[(0, 0, 0), (2, 2, 1)]), &k, 9).is_err());
        assert!(check(&req, &answer(&[(0, 0, 0), (1, 1, 1)]), &k, 9).is_err());
        let mut unknown = good.clone();
        unknown.assignments[0].server[0].id = "elsewhere".into();
        assert!(check(&req, &unknown, &k, 9).is_err());
        // A faulty server, and an error status.
        let mut faulty = req.clone();
        faulty.faulty_server_ids = vec!["s2".into()];
        assert!(check(&faulty, &good, &k, 9).is_err());
        let mut error = good;
        error.status = StatusCode::InternalError as i32;
        assert!(check(&req, &error, &k, 9).is_err());
    }
}
