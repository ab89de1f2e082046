//! Which Hadoop conf items are secrets, so they never reach a log line, the audit log,
//! `--print-config` or the REST conf views. The patterns are Hadoop's own default
//! `hadoop.security.sensitive-config-keys` (core-default.xml), plus the s3a session token, so a
//! key an operator already knows is hidden in Hadoop is hidden here too.

use super::Config;

/// What a hidden value is shown as (Hadoop's `ConfigRedactor` shows `<redacted>`).
pub const MASK: &str = "<redacted>";

/// Whether a Hadoop conf key holds a secret.
pub fn is_sensitive_key(key: &str) -> bool {
    let k = key.trim().to_ascii_lowercase();
    // Also under a prefix that carries Hadoop items (`rss.server.hadoop.`, `spark.hadoop.`).
    let s3 = k.find("fs.s3").map(|i| &k[i..]);
    k.ends_with("secret")
        || k.ends_with("password")
        || k.ends_with("ssl.keystore.pass")
        || k.ends_with("credential")
        || s3.is_some_and(|s3| {
            s3.contains("secret.key")
                || s3.contains("secretkey")
                || s3.ends_with("encryption.key")
                || s3.ends_with("session.token")
        })
        || k.contains("fs.azure.account.key")
        || (k.contains("oauth")
            && (k.contains("secret") || k.contains("password") || k.contains("token")))
        || k == "hadoop.security.sensitive-config-keys"
}

/// `value`, or [`MASK`] when `key` holds a secret.
pub fn shown(key: &str, value: &str) -> String {
    if is_sensitive_key(key) {
        MASK.to_owned()
    } else {
        value.to_owned()
    }
}

/// A Java `rss.coordinator.remote.storage.cluster.conf` value (`host,k1=v1,k2=v2;host2,…`) with
/// the secrets among its items masked.
pub fn shown_cluster_conf(value: &str) -> String {
    value
        .split(';')
        .map(|entry| {
            entry
                .split(',')
                .map(|item| match item.split_once('=') {
                    Some((k, _)) if is_sensitive_key(k) => format!("{k}={MASK}"),
                    _ => item.to_owned(),
                })
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect::<Vec<_>>()
        .join(";")
}

impl Config {
    /// A copy to show: `--print-config` and the REST conf views print it. Secrets among the
    /// Hadoop conf items (the server's and the coordinator's per-cluster ones) and among the
    /// Java properties are masked.
    pub fn redacted(&self) -> Config {
        let mut c = self.clone();
        for (k, v) in c.hdfs_store.hadoop_conf.iter_mut() {
            *v = shown(k, v);
        }
        for conf in c.coordinator.remote_storage_cluster_conf.values_mut() {
            for (k, v) in conf.iter_mut() {
                *v = shown(k, v);
            }
        }
        for (k, v) in c.java_properties.iter_mut() {
            if k.eq_ignore_ascii_case("rss.coordinator.remote.storage.cluster.conf") {
                *v = shown_cluster_conf(v);
            } else {
                *v = shown(k, v);
            }
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hadoops_sensitive_keys_are_masked() {
        for k in [
            "fs.s3a.secret.key",
            "fs.s3a.bucket.b1.secret.key",
            "fs.s3a.session.token",
            "fs.s3a.server-side-encryption.key",
            "fs.s3a.encryption.key",
            "fs.azure.account.key.acct.blob.core.windows.net",
            "fs.adl.oauth2.refresh.token",
            "ssl.server.keystore.password",
            "rss.server.hadoop.fs.s3a.secret.key",
        ] {
            assert!(is_sensitive_key(k), "{k}");
        }
        for k in ["fs.s3a.access.key", "fs.s3a.endpoint", "dfs.replication"] {
            assert!(!is_sensitive_key(k), "{k}");
        }
        assert_eq!(
            shown_cluster_conf(
                "b1,fs.s3a.endpoint=e,fs.s3a.secret.key=S3CR3T;b2,fs.s3a.session.token=T"
            ),
            "b1,fs.s3a.endpoint=e,fs.s3a.secret.key=<redacted>;b2,fs.s3a.session.token=<redacted>"
        );
    }

    #[test]
    fn a_redacted_config_keeps_everything_but_the_secrets() {
        let mut c = Config::default();
        c.hdfs_store
            .hadoop_conf
            .insert("fs.s3a.secret.key".into(), "S3CR3T".into());
        c.hdfs_store
            .hadoop_conf
            .insert("fs.s3a.endpoint".into(), "http://minio:9000".into());
        c.coordinator.remote_storage_cluster_conf.insert(
            "bucket".into(),
            [("fs.s3a.secret.key".to_owned(), "S3CR3T".to_owned())].into(),
        );
        c.java_properties.push((
            "rss.coordinator.remote.storage.cluster.conf".into(),
            "bucket,fs.s3a.secret.key=S3CR3T".into(),
        ));
        c.java_properties.push((
            "rss.server.hadoop.fs.s3a.secret.key".into(),
            "S3CR3T".into(),
        ));
        let shown = toml::to_string(&c.redacted()).unwrap();
        assert!(!shown.contains("S3CR3T"), "{shown}");
        assert!(shown.contains("http://minio:9000"));
        let flat = crate::config::reload::flatten(&c.redacted());
        assert!(flat.iter().all(|(_, v)| !v.contains("S3CR3T")));
    }
}
