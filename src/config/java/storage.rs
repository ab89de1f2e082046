//! Where shuffle data goes: the storage type, the local paths, and when and how buffers spill (huge partitions included).

use std::path::PathBuf;
use std::time::Duration;

use super::mapper::Mapper;
use crate::config::ConfigError;
use crate::config::{ByteSize, StoreType};

impl Mapper {
    pub(super) fn map_storage(&mut self) -> Result<(), ConfigError> {
        self.map(
            "rss.storage.type",
            |m, k| m.one_of(k, &StoreType::ALL),
            "store_type",
            |c, v| c.store_type = v,
        )?;
        self.map(
            "rss.server.leak.shuffledata.check.interval",
            Self::positive_millis,
            "localfile_store.leak_check_interval",
            |c, v| c.localfile_store.leak_check_interval = v,
        )?;
        self.map(
            "rss.storage.basePath",
            Self::list,
            "localfile_store.data_paths",
            |c, v| c.localfile_store.data_paths = v.into_iter().map(PathBuf::from).collect(),
        )
    }

    pub(super) fn map_spilling(&mut self) -> Result<(), ConfigError> {
        self.map(
            "rss.server.single.buffer.flush.threshold",
            Self::positive_size,
            "hybrid_store.memory_single_buffer_max_spill_size",
            |c, v| c.hybrid_store.memory_single_buffer_max_spill_size = v,
        )?;
        self.map(
            "rss.server.single.buffer.flush.enabled",
            Self::boolean,
            "hybrid_store.memory_single_buffer_spill",
            |c, v| c.hybrid_store.memory_single_buffer_spill = v,
        )?;
        self.map(
            "rss.server.flush.localfile.threadPool.size",
            Self::positive_count,
            "hybrid_store.spill_concurrency",
            |c, v| c.hybrid_store.spill_concurrency = v,
        )?;
        // 0 or less keeps Spillway's timeouts.
        self.map_to_each(
            "rss.server.storage.flushOperationTimeoutSec",
            |m, k| Ok(m.duration_ms(k, 1000)?.filter(|(_, ms)| *ms > 0)),
            &["localfile_store.write_timeout", "hdfs_store.write_timeout"],
            |c, ms| {
                let timeout = Duration::from_millis(ms as u64);
                c.localfile_store.write_timeout = timeout;
                c.hdfs_store.write_timeout = timeout;
            },
        )?;
        self.map(
            "rss.server.huge-partition.size.threshold",
            Self::positive_size,
            "hybrid_store.huge_partition_size_threshold",
            |c, v| c.hybrid_store.huge_partition_size_threshold = v,
        )?;
        self.map(
            "rss.server.huge-partition.memory.limit.ratio",
            Self::ratio,
            "hybrid_store.huge_partition_memory_limit_ratio",
            |c, v| c.hybrid_store.huge_partition_memory_limit_ratio = v,
        )?;
        // Java's default, Long.MAX_VALUE, is its way of saying "no limit".
        self.map(
            "rss.server.huge-partition.size.hard.limit",
            Self::positive_size,
            "hybrid_store.huge_partition_hard_limit",
            |c, size| {
                c.hybrid_store.huge_partition_hard_limit =
                    (size.as_u64() != i64::MAX as u64).then_some(size)
            },
        )?;
        // Java compares `used > limit`, has no validator, and defaults to Long.MAX_VALUE
        // (never). Its integration tests set -1 to split everything; 0 does the same for
        // every partition a client can list, since each carries at least one block.
        self.map(
            "rss.server.huge-partition.split.limit",
            Self::size,
            "hybrid_store.huge_partition_split_limit",
            |c, v| {
                c.hybrid_store.huge_partition_split_limit =
                    (v != i64::MAX).then_some(ByteSize(v.max(0) as u64))
            },
        )
    }
}
