//! The HDFS tier: its concurrency, the Hadoop conf items and Kerberos.

use std::path::PathBuf;

use super::mapper::{Entry, Mapper};
use crate::config::ConfigError;
use crate::config::HdfsWriteAs;

impl Mapper {
    /// How much HDFS writing may run at once, and which shuffles go to HDFS at all.
    pub(super) fn map_hdfs_writes(&mut self) -> Result<(), ConfigError> {
        self.map(
            "rss.server.flush.hadoop.threadPool.size",
            Self::positive_count,
            "hdfs_store.max_concurrency",
            |c, v| c.hdfs_store.max_concurrency = v,
        )?;
        // The old name is read only when the new one is absent, as Java's fallback keys are.
        let per_partition = match self
            .positive_count("rss.server.max.concurrency.of.per-partition.write")?
        {
            Some(found) => {
                self.ignore_key(
                    "rss.server.max.concurrency.of.single.partition.writer",
                    "old name of rss.server.max.concurrency.of.per-partition.write, which is set",
                );
                Some(found)
            }
            None => self.positive_count("rss.server.max.concurrency.of.single.partition.writer")?,
        };
        self.map(
            "rss.server.max.concurrency.limit.of.per-partition.write",
            Self::positive_count,
            "hdfs_store.partition_write_max_concurrency_limit",
            |c, v| c.hdfs_store.partition_write_max_concurrency_limit = v,
        )?;
        if let Some((e, n)) = per_partition {
            self.config.hdfs_store.partition_write_max_concurrency = n;
            self.set_origin("hdfs_store.partition_write_max_concurrency", &e);
        }
        self.map(
            "rss.server.flush.cold.storage.threshold.size",
            Self::positive_size,
            "hdfs_store.cold_storage_threshold_size",
            |c, v| c.hdfs_store.cold_storage_threshold_size = v,
        )
    }

    /// `rss.server.hadoop.<item>` → `hdfs_store.hadoop_conf[<item>]`, as the Java server builds
    /// its Hadoop conf from them.
    pub(super) fn map_hadoop_items(&mut self) {
        const PREFIX: &str = "rss.server.hadoop.";
        let keys: Vec<String> = self
            .props
            .iter()
            .map(|(p, _)| p.key.clone())
            .filter(|k| k.len() > PREFIX.len() && k.to_ascii_lowercase().starts_with(PREFIX))
            .collect();
        for key in keys {
            if let Some(e) = self.take(&key) {
                self.config
                    .hdfs_store
                    .hadoop_conf
                    .insert(e.key[PREFIX.len()..].to_owned(), e.value.clone());
                self.set_origin("hdfs_store.hadoop_conf", &e);
            }
        }
    }

    pub(super) fn map_kerberos(&mut self) -> Result<(), ConfigError> {
        const PRINCIPAL: &str = "rss.security.hadoop.kerberos.principal";
        const KEYTAB: &str = "rss.security.hadoop.kerberos.keytab.file";
        let enabled = self
            .boolean("rss.security.hadoop.kerberos.enable")?
            .is_some_and(|(_, v)| v);
        if enabled {
            let required = |e: Option<Entry>, key: &str| {
                e.ok_or_else(|| {
                    ConfigError::new(
                        key,
                        "is required with rss.security.hadoop.kerberos.enable = true",
                    )
                })
            };
            let principal = required(self.string(PRINCIPAL), PRINCIPAL)?;
            let keytab = required(self.string(KEYTAB), KEYTAB)?;
            self.config.hdfs_store.kerberos_principal = Some(principal.value.clone());
            self.config.hdfs_store.kerberos_keytab = Some(PathBuf::from(&keytab.value));
            self.set_origin("hdfs_store.kerberos_principal", &principal);
            self.set_origin("hdfs_store.kerberos_keytab", &keytab);
        } else {
            for key in [PRINCIPAL, KEYTAB] {
                self.ignore_key(key, "rss.security.hadoop.kerberos.enable is not true");
            }
        }
        self.map_hadoop_items();
        self.map(
            "rss.security.hadoop.kerberos.proxy.user.enable",
            Self::boolean,
            "hdfs_store.write_as",
            |c, proxy| {
                c.hdfs_store.write_as = if proxy {
                    HdfsWriteAs::Auto
                } else {
                    HdfsWriteAs::Server
                }
            },
        )
    }
}
