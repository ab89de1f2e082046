//! `[quota]`: what one app, and all apps of one user together, may hold on this server's file
//! tiers. See `store::quota` for what happens at a quota, and docs/operating.md ("Quotas") for
//! why the defaults are what they are.

use serde::{Deserialize, Serialize};

use super::bytesize::ByteSize;

/// `[quota]`. Every key is reconfigurable (the config file or `confOps/update`): the next
/// `requireBuffer` uses the new value.
///
/// The Java server has no such quota (only the coordinator's apps-per-user count); the
/// server.conf spellings are Spillway's, in Java's style (`rss.server.quota.*`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct QuotaConfig {
    /// Share of the local disks' capacity (the sum of every data path's
    /// `disk_capacity`/`disk_capacity_ratio` share at start-up) one app may hold, in (0, 1];
    /// 1 is no share limit. Default: `0.5`: one runaway app cannot take the disks from every
    /// other app, and a single large job still has half the server.
    /// (`rss.server.quota.app.localfile.ratio`)
    pub app_local_disk_share: f64,
    /// Bytes one app may hold on the local disks; with the share, the smaller applies.
    /// Default: none. (`rss.server.quota.app.localfile.size`)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app_local_disk_bytes: Option<ByteSize>,
    /// Share of the local disks' capacity all apps of one user may hold together, in (0, 1].
    /// Default: `0.8`: one user's apps leave a fifth of the disks to everyone else.
    /// (`rss.server.quota.user.localfile.ratio`)
    pub user_local_disk_share: f64,
    /// Bytes all apps of one user may hold on the local disks. Default: none.
    /// (`rss.server.quota.user.localfile.size`)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_local_disk_bytes: Option<ByteSize>,
    /// Bytes one app may hold on the remote tier (HDFS or object storage). Default: none (the
    /// remote store is the app's own path, usually with quotas of its own).
    /// (`rss.server.quota.app.remote.size`)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app_remote_bytes: Option<ByteSize>,
    /// Bytes all apps of one user may hold on the remote tier. Default: none.
    /// (`rss.server.quota.user.remote.size`)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_remote_bytes: Option<ByteSize>,
    /// What one app may hold of the write memory while memory is past its high watermark and
    /// another app waits for it: `"fair"` (the capacity divided by the apps holding or waiting
    /// for memory, never below an eighth of it), or a share in (0, 1]; `1` never refuses for a
    /// share. An app over it then gets `NO_BUFFER` (retried by the client) while apps under it
    /// take the rest, so one heavy writer does not make small apps wait behind its spills. Below the high watermark any
    /// app takes what is free, and an app alone may fill the memory. Default: `"fair"`.
    /// (`rss.server.quota.app.memory.ratio`)
    pub app_memory_share: MemoryShare,
}

/// `quota.app_memory_share`: `"fair"` or a share of the capacity in (0, 1].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum MemoryShare {
    /// The capacity divided by the apps holding or waiting for memory.
    #[default]
    Fair,
    /// This share of the capacity.
    Of(f64),
}

impl MemoryShare {
    /// The fixed share, `None` for a fair one (what the write budget takes).
    pub fn ratio(self) -> Option<f64> {
        match self {
            MemoryShare::Fair => None,
            MemoryShare::Of(x) => Some(x),
        }
    }
}

impl std::fmt::Display for MemoryShare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MemoryShare::Fair => f.write_str("fair"),
            MemoryShare::Of(x) => write!(f, "{x}"),
        }
    }
}

impl std::str::FromStr for MemoryShare {
    type Err = String;

    fn from_str(v: &str) -> Result<Self, String> {
        let v = v.trim();
        if v.eq_ignore_ascii_case("fair") {
            return Ok(MemoryShare::Fair);
        }
        match v.parse::<f64>() {
            Ok(x) if x > 0.0 && x <= 1.0 => Ok(MemoryShare::Of(x)),
            _ => Err(format!("{v:?} is neither \"fair\" nor a share in (0, 1]")),
        }
    }
}

impl Serialize for MemoryShare {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            MemoryShare::Fair => s.serialize_str("fair"),
            MemoryShare::Of(x) => s.serialize_f64(*x),
        }
    }
}

impl<'de> Deserialize<'de> for MemoryShare {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Word(String),
            Number(f64),
        }
        match Raw::deserialize(d)? {
            Raw::Word(w) => w.parse().map_err(serde::de::Error::custom),
            Raw::Number(x) => x.to_string().parse().map_err(serde::de::Error::custom),
        }
    }
}

impl Default for QuotaConfig {
    fn default() -> Self {
        QuotaConfig {
            app_local_disk_share: 0.5,
            app_local_disk_bytes: None,
            user_local_disk_share: 0.8,
            user_local_disk_bytes: None,
            app_remote_bytes: None,
            user_remote_bytes: None,
            app_memory_share: MemoryShare::Fair,
        }
    }
}
