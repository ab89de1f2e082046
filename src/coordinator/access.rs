//! `accessCluster` admission, as the Java 0.10 coordinator's `AccessManager` runs its checkers
//! (`access/checker/AccessClusterLoadChecker.java`, `AccessQuotaChecker.java`,
//! `AccessCandidatesChecker.java`, `QuotaManager.java`): the checkers run in the configured
//! order, the first denial is the answer (ACCESS_DENIED with the checker's message), and a
//! client that passes gets `SUCCESS`.
//!
//! Denial texts copy Java's wording, since operators grep client logs for them.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use tokio::time::Instant;

use crate::proto::ServerStatus;

use super::registry::ServerNode;
pub use crate::config::coordinator::AccessCheckerKind;

/// The extra property a client sets to the shuffle-server count it will ask for.
pub const REQUIRED_SHUFFLE_NODES_NUM: &str = "access_info_required_shuffle_nodes_num";

/// Settings of the checkers, from `[coordinator]`.
#[derive(Debug, Clone, PartialEq)]
pub struct AccessOptions {
    /// Checkers in the order they run; empty admits everyone.
    pub checkers: Vec<AccessCheckerKind>,
    /// A server counts as available with at least this percentage of its memory free.
    pub memory_percentage: f64,
    /// Available servers needed; `None`: the client's requested count, else
    /// `shuffle_nodes_max`.
    pub server_num_threshold: Option<usize>,
    /// Apps per user when the quota file does not name the user; negative: no limit.
    pub default_app_num: i64,
}

/// What a client sent to `accessCluster`.
#[derive(Debug, Clone, Copy)]
pub struct AccessRequest<'a> {
    /// `accessId` (Spark sends the queue or app name).
    pub access_id: &'a str,
    /// Tags the client's servers must carry.
    pub tags: &'a [String],
    /// `extraProperties`.
    pub properties: &'a HashMap<String, String>,
    /// The submitting user; empty from old clients.
    pub user: &'a str,
}

impl AccessRequest<'_> {
    /// Java's `AccessInfo.toString()`, which the denial messages embed. Set and map orders
    /// follow Java's hash order there; here they are sorted.
    pub fn describe(&self) -> String {
        let mut tags: Vec<&str> = self.tags.iter().map(String::as_str).collect();
        tags.sort_unstable();
        tags.dedup();
        let props: BTreeMap<&String, &String> = self.properties.iter().collect();
        let props: Vec<String> = props.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!(
            "AccessInfo{{accessId='{}', user= {}, tags=[{}], extraProperties={{{}}}}}",
            self.access_id,
            self.user,
            tags.join(", "),
            props.join(", ")
        )
    }
}

/// `AccessClusterLoadChecker.check`: `servers` are the live, not excluded servers.
pub fn check_cluster_load(
    servers: &[ServerNode],
    req: &AccessRequest<'_>,
    options: &AccessOptions,
    shuffle_nodes_max: usize,
) -> Result<(), String> {
    let listed: Vec<&ServerNode> = servers
        .iter()
        .filter(|s| s.status == ServerStatus::Active && s.has_tags(req.tags))
        .collect();
    let available = listed
        .iter()
        .filter(|s| has_free_memory(s, options.memory_percentage))
        .count();
    let needed = match options.server_num_threshold {
        Some(threshold) => threshold,
        None => req
            .properties
            .get(REQUIRED_SHUFFLE_NODES_NUM)
            .and_then(|n| n.trim().parse::<i64>().ok())
            .filter(|n| *n > 0)
            .map_or(shuffle_nodes_max, |n| {
                usize::try_from(n).unwrap_or(usize::MAX)
            }),
    };
    if available >= needed {
        return Ok(());
    }
    Err(format!(
        "Denied by AccessClusterLoadChecker accessInfo[{}], total {} nodes, {} available nodes, \
         memory percent threshold {}, available num threshold {}.",
        req.describe(),
        listed.len(),
        available,
        java_double(options.memory_percentage),
        options
            .server_num_threshold
            .map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX)),
    ))
}

/// Java's test `available / (total / 100) >= threshold` in doubles: a server reporting no
/// memory at all divides 0 by 0, and Java's `Double.compare` ranks that NaN above every
/// threshold, so such a server passes; so it does here.
fn has_free_memory(server: &ServerNode, threshold: f64) -> bool {
    let available = server.available_memory as f64;
    let total = (server.available_memory as f64) + (server.used_memory as f64);
    let percent = available / (total / 100.0);
    percent.is_nan() || percent >= threshold
}

/// A double as Java's `String.valueOf` prints it when it is integral (`15.0`, not `15`).
fn java_double(v: f64) -> String {
    if v.fract() == 0.0 && v.is_finite() {
        format!("{v:.1}")
    } else {
        v.to_string()
    }
}

/// Apps per user for the quota checker (`QuotaManager`). An admitted client holds a slot
/// under its access uuid until it registers an app whose id ends in `_<uuid>`, which then takes
/// the slot; slots not refreshed within the app timeout expire, as Java's status check drops
/// them, so a client that was admitted but never started does not hold a slot forever.
#[derive(Debug)]
pub(super) struct Quotas {
    timeout: Duration,
    /// user → (app id or access uuid → last seen).
    apps: HashMap<String, HashMap<String, Instant>>,
    /// Per-user limits from the quota file.
    file: HashMap<String, i64>,
}

impl Quotas {
    pub(super) fn new(timeout: Duration) -> Self {
        Quotas {
            timeout,
            apps: HashMap::new(),
            file: HashMap::new(),
        }
    }

    /// Replaces the per-user limits (a quota file reload). Java merges a reload into what it
    /// had, so a user removed from the file keeps the old limit until a restart; here the
    /// user falls back to the default, which is what the operator asked for.
    pub(super) fn set_limits(&mut self, limits: HashMap<String, i64>) {
        self.file = limits;
    }

    /// `AccessQuotaChecker.check`: denies when the user is at their limit, else records
    /// `uuid` as one of the user's apps. Old clients send no user and are never limited.
    pub(super) fn check(
        &mut self,
        user: &str,
        uuid: &str,
        default_app_num: i64,
        now: Instant,
    ) -> Result<(), String> {
        if user.is_empty() {
            return Ok(());
        }
        self.expire(now);
        let limit = self.file.get(user).copied().unwrap_or(default_app_num);
        let apps = self.apps.entry(user.to_owned()).or_default();
        let current = apps.len();
        if limit >= 0 && i64::try_from(current).unwrap_or(i64::MAX) >= limit {
            return Err(format!(
                "Denied by AccessQuotaChecker => User: {user}, current app num is: {current}, \
                 default app num is: {limit}. We will reject this app[uuid={uuid}]."
            ));
        }
        apps.insert(uuid.to_owned(), now);
        Ok(())
    }

    /// `registerApplicationInfo`: the app takes the slot of the access uuid its id ends with.
    pub(super) fn register(&mut self, app_id: &str, user: &str, now: Instant) {
        let apps = self.apps.entry(user.to_owned()).or_default();
        if let Some((_, uuid)) = app_id.rsplit_once('_') {
            apps.remove(uuid);
        }
        apps.insert(app_id.to_owned(), now);
    }

    /// `appHeartbeat`: refreshes the app if a user holds it.
    pub(super) fn touch(&mut self, app_id: &str, now: Instant) {
        for apps in self.apps.values_mut() {
            if let Some(seen) = apps.get_mut(app_id) {
                *seen = now;
                return;
            }
        }
    }

    /// Apps (and pending uuids) per user, for tests and operators.
    pub(super) fn counts(&mut self, now: Instant) -> HashMap<String, usize> {
        self.expire(now);
        self.apps
            .iter()
            .map(|(user, apps)| (user.clone(), apps.len()))
            .collect()
    }

    pub(super) fn expire(&mut self, now: Instant) {
        let timeout = self.timeout;
        for apps in self.apps.values_mut() {
            apps.retain(|_, seen| now.saturating_duration_since(*seen) <= timeout);
        }
        self.apps.retain(|_, apps| !apps.is_empty());
    }
}

/// `AccessCandidatesChecker.check`: the trimmed access id must be a listed candidate.
pub fn check_candidates(
    candidates: &HashSet<String>,
    req: &AccessRequest<'_>,
) -> Result<(), String> {
    if candidates.contains(req.access_id.trim()) {
        return Ok(());
    }
    Err(format!(
        "Denied by AccessCandidatesChecker, accessInfo[{}].",
        req.describe()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(id: &str, available: i64, used: i64, status: ServerStatus) -> ServerNode {
        ServerNode {
            status,
            used_memory: used,
            ..ServerNode::testing(id, available, &["ss_v5"])
        }
    }

    fn options(threshold: Option<usize>) -> AccessOptions {
        AccessOptions {
            checkers: vec![AccessCheckerKind::ClusterLoad],
            memory_percentage: 15.0,
            server_num_threshold: threshold,
            default_app_num: -1,
        }
    }

    #[test]
    fn cluster_load_counts_active_servers_with_free_memory() {
        let servers = vec![
            server("a", 20, 80, ServerStatus::Active),
            server("b", 10, 90, ServerStatus::Active),
            server("c", 50, 50, ServerStatus::Unhealthy),
            server("d", 0, 0, ServerStatus::Active),
        ];
        let props = HashMap::new();
        let tags = vec!["ss_v5".to_string()];
        let req = AccessRequest {
            access_id: "q",
            tags: &tags,
            properties: &props,
            user: "alice",
        };
        // a (20 %) and d (no memory reported) are available; b is below 15 %; c is not ACTIVE.
        assert!(check_cluster_load(&servers, &req, &options(Some(2)), 9).is_ok());
        let err = check_cluster_load(&servers, &req, &options(Some(3)), 9).unwrap_err();
        assert_eq!(
            err,
            "Denied by AccessClusterLoadChecker accessInfo[AccessInfo{accessId='q', user= alice, \
             tags=[ss_v5], extraProperties={}}], total 3 nodes, 2 available nodes, memory \
             percent threshold 15.0, available num threshold 3."
        );
        // No threshold: the client's count, else shuffle_nodes_max.
        assert!(check_cluster_load(&servers, &req, &options(None), 2).is_ok());
        assert!(check_cluster_load(&servers, &req, &options(None), 3).is_err());
        let props = HashMap::from([(REQUIRED_SHUFFLE_NODES_NUM.to_string(), "1".to_string())]);
        let req = AccessRequest {
            properties: &props,
            ..req
        };
        assert!(check_cluster_load(&servers, &req, &options(None), 9).is_ok());
    }

    #[test]
    fn quota_holds_a_slot_per_admission_until_the_app_registers_or_expires() {
        let t0 = Instant::now();
        let mut q = Quotas::new(Duration::from_secs(60));
        q.set_limits(HashMap::from([("bob".into(), 0)]));
        assert!(q.check("alice", "u1", 2, t0).is_ok());
        assert!(q.check("alice", "u2", 2, t0).is_ok());
        let err = q.check("alice", "u3", 2, t0).unwrap_err();
        assert_eq!(
            err,
            "Denied by AccessQuotaChecker => User: alice, current app num is: 2, default app \
             num is: 2. We will reject this app[uuid=u3]."
        );
        assert!(
            q.check("bob", "u4", 2, t0).is_err(),
            "the file's limit wins"
        );
        assert!(
            q.check("", "u5", 0, t0).is_ok(),
            "old clients are not limited"
        );
        assert!(
            q.check("carol", "u6", -1, t0).is_ok(),
            "negative: unlimited"
        );

        // The app takes its uuid's slot: still 2.
        q.register("spark-app_u1", "alice", t0);
        assert_eq!(q.counts(t0)["alice"], 2);
        // u2 never registers and expires; the app stays alive through heartbeats.
        let later = t0 + Duration::from_secs(61);
        q.touch("spark-app_u1", t0 + Duration::from_secs(30));
        assert_eq!(q.counts(later)["alice"], 1);
        assert!(q.check("alice", "u7", 2, later).is_ok());
    }

    #[test]
    fn candidates_match_the_trimmed_access_id() {
        let candidates = HashSet::from(["queue_a".to_string()]);
        let props = HashMap::new();
        let req = AccessRequest {
            access_id: " queue_a ",
            tags: &[],
            properties: &props,
            user: "",
        };
        assert!(check_candidates(&candidates, &req).is_ok());
        let req = AccessRequest {
            access_id: "queue_b",
            ..req
        };
        assert_eq!(
            check_candidates(&candidates, &req).unwrap_err(),
            "Denied by AccessCandidatesChecker, accessInfo[AccessInfo{accessId='queue_b', \
             user= , tags=[], extraProperties={}}]."
        );
    }
}
