//! Where shuffle data goes: the storage type, the local paths, and when and how buffers spill (huge partitions included).

use std::path::PathBuf;
use std::time::Duration;

use super::mapper::Mapper;
use super::values::java_list;
use crate::config::ConfigError;
use crate::config::{ByteSize, StoreType};

impl Mapper {
    pub(super) fn map_storage(&mut self) -> Result<(), ConfigError> {
        let names = StoreType::ALL.map(|(n, _)| n);
        if let Some((e, i)) = self.choice("rss.storage.type", &names)? {
            self.config.store_type = StoreType::ALL[i].1;
            self.set_origin("store_type", &e);
        }
        if let Some((e, interval)) =
            self.positive_duration("rss.server.leak.shuffledata.check.interval", 1)?
        {
            self.config.localfile_store.leak_check_interval = interval;
            self.set_origin("localfile_store.leak_check_interval", &e);
        }
        if let Some(e) = self.take("rss.storage.basePath") {
            self.config.localfile_store.data_paths =
                java_list(&e.value).into_iter().map(PathBuf::from).collect();
            self.set_origin("localfile_store.data_paths", &e);
        }
        Ok(())
    }

    pub(super) fn map_spilling(&mut self) -> Result<(), ConfigError> {
        if let Some((e, size)) = self.positive_size("rss.server.single.buffer.flush.threshold")? {
            self.config.hybrid_store.memory_single_buffer_max_spill_size = size;
            self.set_origin("hybrid_store.memory_single_buffer_max_spill_size", &e);
        }
        if let Some((e, on)) = self.boolean("rss.server.single.buffer.flush.enabled")? {
            self.config.hybrid_store.memory_single_buffer_spill = on;
            self.set_origin("hybrid_store.memory_single_buffer_spill", &e);
        }
        if let Some((e, n)) = self.positive_count("rss.server.flush.localfile.threadPool.size")? {
            self.config.hybrid_store.spill_concurrency = n;
            self.set_origin("hybrid_store.spill_concurrency", &e);
        }
        if let Some((e, ms)) =
            self.duration_ms("rss.server.storage.flushOperationTimeoutSec", 1000)?
        {
            if ms > 0 {
                let timeout = Duration::from_millis(ms as u64);
                self.config.localfile_store.write_timeout = timeout;
                self.config.hdfs_store.write_timeout = timeout;
                self.set_origin("localfile_store.write_timeout", &e);
                self.set_origin("hdfs_store.write_timeout", &e);
            }
        }
        if let Some((e, size)) = self.positive_size("rss.server.huge-partition.size.threshold")? {
            self.config.hybrid_store.huge_partition_size_threshold = size;
            self.set_origin("hybrid_store.huge_partition_size_threshold", &e);
        }
        if let Some((e, ratio)) = self.ratio("rss.server.huge-partition.memory.limit.ratio")? {
            self.config.hybrid_store.huge_partition_memory_limit_ratio = ratio;
            self.set_origin("hybrid_store.huge_partition_memory_limit_ratio", &e);
        }
        if let Some((e, size)) = self.positive_size("rss.server.huge-partition.size.hard.limit")? {
            // Java's default, Long.MAX_VALUE, is its way of saying "no limit".
            self.config.hybrid_store.huge_partition_hard_limit =
                (size.as_u64() != i64::MAX as u64).then_some(size);
            self.set_origin("hybrid_store.huge_partition_hard_limit", &e);
        }
        if let Some((e, v)) = self.size("rss.server.huge-partition.split.limit")? {
            // Java compares `used > limit`, has no validator, and defaults to Long.MAX_VALUE
            // (never). Its integration tests set -1 to split everything; 0 does the same for
            // every partition a client can list, since each carries at least one block.
            self.config.hybrid_store.huge_partition_split_limit =
                (v != i64::MAX).then_some(ByteSize(v.max(0) as u64));
            self.set_origin("hybrid_store.huge_partition_split_limit", &e);
        }
        Ok(())
    }
}
