//! The memory the buffers may use, sized as the Java server sizes it from its heap.

use super::mapper::Mapper;
use crate::config::ByteSize;
use crate::config::ConfigError;

impl Mapper {
    pub(super) fn map_memory(&mut self, memory: Option<u64>) -> Result<(), ConfigError> {
        if let Some(size) = self.capacity(
            "rss.server.buffer.capacity",
            "rss.server.buffer.capacity.ratio",
            0.6,
            memory,
            "memory_store.capacity",
        )? {
            self.config.memory_store.capacity = size;
        }
        if let Some(size) = self.capacity(
            "rss.server.read.buffer.capacity",
            "rss.server.read.buffer.capacity.ratio",
            0.2,
            memory,
            "memory_store.read_capacity",
        )? {
            self.config.memory_store.read_capacity = size;
        }
        // The Java server's watermarks apply when the file has none: they are part of how the
        // operator sized the buffers.
        let high = self.percentage("rss.server.memory.shuffle.highWaterMark.percentage")?;
        let low = self.percentage("rss.server.memory.shuffle.lowWaterMark.percentage")?;
        self.config.hybrid_store.memory_spill_high_watermark = high.as_ref().map_or(0.75, |h| h.1);
        self.config.hybrid_store.memory_spill_low_watermark = low.as_ref().map_or(0.25, |l| l.1);
        if let Some((e, _)) = &high {
            self.set_origin("hybrid_store.memory_spill_high_watermark", e);
        }
        if let Some((e, _)) = &low {
            self.set_origin("hybrid_store.memory_spill_low_watermark", e);
        }
        Ok(())
    }

    /// A capacity as Java sizes it: the size key when it is >= 0, else the ratio (the file's or
    /// Java's default) of `memory`. `None` keeps Spillway's default (memory unknown).
    pub(super) fn capacity(
        &mut self,
        size_key: &str,
        ratio_key: &str,
        default_ratio: f64,
        memory: Option<u64>,
        spillway: &'static str,
    ) -> Result<Option<ByteSize>, ConfigError> {
        let size = self.size(size_key)?;
        let ratio = self.ratio(ratio_key)?;
        if let Some((e, bytes)) = &size {
            if *bytes == 0 {
                return Err(e.error(format!("0 must be above 0 (-1 sizes it from {ratio_key})")));
            }
            if *bytes > 0 {
                self.set_origin(spillway, e);
                return Ok(Some(ByteSize(*bytes as u64)));
            }
        }
        let Some(memory) = memory else {
            return Ok(None);
        };
        let fraction = ratio.as_ref().map_or(default_ratio, |r| r.1);
        if let Some(e) = ratio.as_ref().map(|r| &r.0).or(size.as_ref().map(|s| &s.0)) {
            self.set_origin(spillway, e);
        }
        // Whole MiB: the exact product would only print as an unreadable byte count.
        let bytes = ((memory as f64) * fraction) as u64;
        Ok(Some(ByteSize(bytes / ByteSize::MIB * ByteSize::MIB)))
    }
}
