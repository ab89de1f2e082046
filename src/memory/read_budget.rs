//! `ReadBudget`: caps the memory that read responses may hold at once, so a burst of
//! reducers gets `NO_BUFFER` (and backs off) instead of growing the heap.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;

use crate::error::{Error, Result};

/// Cheap-to-clone handle on the read-memory cap.
#[derive(Clone)]
pub struct ReadBudget {
    inner: Arc<Inner>,
}

struct Inner {
    capacity: u64,
    used: AtomicU64,
    /// `used`, split by what the memory is held for (permits tagged with [`ReadUse`]).
    by_use: [AtomicU64; 3],
}

/// What read memory is held for: Java's `read_local_data_file_buffer_size`,
/// `read_local_index_file_buffer_size` and `read_memory_data_buffer_size` gauges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadUse {
    /// A `getLocalShuffleData` response.
    DataFile = 0,
    /// A `getLocalShuffleIndex` response.
    IndexFile = 1,
    /// A `getMemoryShuffleData` response.
    Memory = 2,
}

impl ReadBudget {
    /// A cap of `capacity` bytes.
    pub fn new(capacity: u64) -> Self {
        ReadBudget {
            inner: Arc::new(Inner {
                capacity,
                used: AtomicU64::new(0),
                by_use: Default::default(),
            }),
        }
    }

    /// Takes `len` bytes of read memory; like Java, a read that would reach or pass the cap
    /// fails with `NO_BUFFER`.
    pub fn try_acquire(&self, len: u64) -> Result<ReadPermit> {
        let cap = self.inner.capacity;
        self.inner
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                let next = used.checked_add(len)?;
                (next < cap || (used == 0 && len >= cap)).then_some(next)
            })
            .map_err(|used| Error::NoBuffer {
                reason: format!("read memory is full: {used} of {cap} bytes in use, asked {len}"),
            })?;
        Ok(ReadPermit {
            budget: self.clone(),
            bytes: len,
            used_for: None,
        })
    }

    /// Bytes currently held by permits tagged `use_`.
    pub fn used_for(&self, use_: ReadUse) -> u64 {
        self.inner.by_use[use_ as usize].load(Ordering::Acquire)
    }

    /// Bytes currently held by reads.
    pub fn used(&self) -> u64 {
        self.inner.used.load(Ordering::Acquire)
    }

    /// Configured cap.
    pub fn capacity(&self) -> u64 {
        self.inner.capacity
    }
}

/// Read memory held while a response is built; dropping it gives the bytes back.
#[must_use = "dropping a permit releases it at once"]
pub struct ReadPermit {
    budget: ReadBudget,
    bytes: u64,
    used_for: Option<ReadUse>,
}

impl std::fmt::Debug for ReadPermit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadPermit")
            .field("bytes", &self.bytes)
            .finish()
    }
}

impl ReadPermit {
    /// Counts the permit's bytes under `use_` too, until it is released.
    pub fn tagged(mut self, use_: ReadUse) -> Self {
        if let Some(old) = self.used_for.replace(use_) {
            self.budget.inner.by_use[old as usize].fetch_sub(self.bytes, Ordering::AcqRel);
        }
        self.budget.inner.by_use[use_ as usize].fetch_add(self.bytes, Ordering::AcqRel);
        self
    }

    /// Ties the permit to the response payload: the read memory stays held until the last
    /// clone of the returned `Bytes` is dropped (after the transport encoded the response),
    /// not merely until the handler returns.
    pub fn attach(self, data: Bytes) -> Bytes {
        if data.is_empty() {
            return data;
        }
        Bytes::from_owner(Held {
            data,
            _permit: self,
        })
    }
}

/// A payload that keeps its read permit alive.
struct Held {
    data: Bytes,
    _permit: ReadPermit,
}

impl AsRef<[u8]> for Held {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

impl Drop for ReadPermit {
    fn drop(&mut self) {
        self.budget
            .inner
            .used
            .fetch_sub(self.bytes, Ordering::AcqRel);
        if let Some(use_) = self.used_for {
            self.budget.inner.by_use[use_ as usize].fetch_sub(self.bytes, Ordering::AcqRel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_is_enforced_and_released() {
        let b = ReadBudget::new(100);
        let p = b.try_acquire(60).unwrap();
        assert_eq!(
            b.try_acquire(40).err().map(|e| e.status()),
            Some(crate::proto::StatusCode::NoBuffer)
        );
        drop(p);
        assert_eq!(b.used(), 0);
        // A single read larger than the cap still goes through when nothing else runs,
        // otherwise a client with a big read buffer could never make progress.
        let big = b.try_acquire(500).unwrap();
        assert!(b.try_acquire(1).is_err());
        drop(big);
    }

    #[test]
    fn attached_permits_live_as_long_as_the_payload() {
        let b = ReadBudget::new(100);
        let data = b
            .try_acquire(60)
            .unwrap()
            .attach(Bytes::from_static(b"abc"));
        assert_eq!(b.used(), 60);
        let clone = data.slice(1..);
        drop(data);
        assert_eq!(b.used(), 60);
        assert_eq!(&clone[..], b"bc");
        drop(clone);
        assert_eq!(b.used(), 0);
    }

    #[test]
    fn tagged_permits_count_under_their_use_until_released() {
        let b = ReadBudget::new(100);
        let index = b.try_acquire(10).unwrap().tagged(ReadUse::IndexFile);
        let data = b
            .try_acquire(30)
            .unwrap()
            .tagged(ReadUse::DataFile)
            .attach(Bytes::from_static(b"x"));
        assert_eq!(b.used_for(ReadUse::IndexFile), 10);
        assert_eq!(b.used_for(ReadUse::DataFile), 30);
        assert_eq!(b.used_for(ReadUse::Memory), 0);
        drop(index);
        drop(data);
        assert_eq!(b.used_for(ReadUse::IndexFile), 0);
        assert_eq!(b.used_for(ReadUse::DataFile), 0);
        assert_eq!(b.used(), 0);
    }
}
