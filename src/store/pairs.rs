//! A partition on a remote tier as the server sees it: this server's data/index pairs, read
//! with the client's rules, shown as one logical file (rebased index, ranged reads). Clients
//! read the pairs themselves; this view serves the conformance suites and checks. Shared by
//! the HDFS and object-store tiers, which differ only in how they list and fetch.

use bytes::{Bytes, BytesMut};

use crate::error::{Error, Result};
use crate::store::index::IndexEntry;
use crate::store::IndexRead;

/// True for a file of this server: the client keeps names that start with the server id; the
/// `_` keeps `…-1999` from claiming `…-19990`'s files.
pub fn is_own(name: &str, prefix: &str) -> bool {
    name.strip_prefix(prefix)
        .is_some_and(|rest| rest.starts_with('_'))
}

/// One pair as a reader sees it.
pub struct Pair<L> {
    /// Where the data is (a path, an object key).
    pub data: L,
    /// Usable records, offsets as written (from 0 in this pair).
    pub records: Vec<IndexEntry>,
    /// Bytes of the data covered by `records`.
    pub extent: u64,
}

impl<L> Pair<L> {
    /// The records a client would use of a raw index whose data is `data_len` long: whole
    /// records only, up to the first one that is not contiguous or ends past the data.
    pub fn read(data: L, raw_index: &[u8], data_len: u64) -> Pair<L> {
        let mut extent = 0u64;
        let mut records = Vec::new();
        for e in IndexEntry::decode_all(raw_index) {
            let Ok(len) = u64::try_from(e.length) else {
                break;
            };
            if e.offset != extent as i64 || extent + len > data_len {
                break;
            }
            extent += len;
            records.push(e);
        }
        Pair {
            data,
            records,
            extent,
        }
    }
}

/// The pairs of one partition, in write order, as one logical file.
pub struct Pairs<L> {
    /// In write order.
    pub pairs: Vec<Pair<L>>,
}

impl<L> Pairs<L> {
    /// Total bytes of the logical file.
    pub fn len(&self) -> u64 {
        self.pairs.iter().map(|p| p.extent).sum()
    }

    /// True when no pair has a usable record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The records of all pairs, rebased onto the logical file.
    pub fn index(&self) -> IndexRead {
        let mut buf = BytesMut::new();
        let mut base = 0u64;
        for p in &self.pairs {
            for r in &p.records {
                IndexEntry {
                    offset: r.offset + base as i64,
                    ..*r
                }
                .encode(&mut buf);
            }
            base += p.extent;
        }
        if buf.is_empty() {
            return IndexRead::default();
        }
        IndexRead {
            index: buf.freeze(),
            data_len: base,
            storage_ids: vec![0],
        }
    }

    /// Exactly `[offset, offset + len)` of the logical file, each pair's part fetched by
    /// `fetch(data, start, len)`; past the end is an error, never a short answer.
    pub async fn read<F, Fut>(&self, offset: u64, len: u64, tier: &str, fetch: F) -> Result<Bytes>
    where
        L: Clone,
        F: Fn(L, u64, u64) -> Fut,
        Fut: std::future::Future<Output = Result<Bytes>>,
    {
        let total = self.len();
        match offset.checked_add(len) {
            Some(end) if end <= total => {}
            _ => {
                return Err(Error::bad_request(format!(
                    "read of {len} bytes at {offset} is past the end of the {tier} data ({total} bytes)"
                )))
            }
        }
        if len == 0 {
            return Ok(Bytes::new());
        }
        let mut out = BytesMut::with_capacity(len as usize);
        let (mut pos, end) = (offset, offset + len);
        let mut base = 0u64;
        for p in &self.pairs {
            let (lo, hi) = (base, base + p.extent);
            base = hi;
            if pos >= hi || pos >= end {
                continue;
            }
            let take = hi.min(end) - pos;
            let bytes = fetch(p.data.clone(), pos - lo, take).await?;
            out.extend_from_slice(&bytes);
            pos += take;
        }
        Ok(out.freeze())
    }
}

impl<L> Default for Pairs<L> {
    fn default() -> Self {
        Pairs { pairs: Vec::new() }
    }
}
