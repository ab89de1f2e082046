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
        }
    }
}
