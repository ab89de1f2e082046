//! Java-legacy `Roaring64NavigableMap` bytes ⇄ [`RoaringTreemap`] (DATA-FORMATS §6).
//!
//! Every 64-bit bitmap a Uniffle client exchanges with a shuffle server (block ids, expected
//! task ids, unique-block sets) uses this format, not roaring-rs's own `RoaringTreemap`
//! portable format: a 1-byte `signedLongs` flag, a big-endian bucket count, then per bucket a
//! big-endian high key followed by a standard 32-bit RoaringBitmap. The 32-bit bodies are
//! delegated to roaring-rs, which writes and reads that standard format.

use std::collections::BTreeMap;

use bytes::{BufMut, Bytes};
use roaring::{RoaringBitmap, RoaringTreemap};

use crate::error::{Error, Result};

/// Cookie of a 32-bit bitmap without run containers (little-endian `12346`).
const COOKIE_NO_RUNS: u32 = 12346;
/// Low half of the cookie of a 32-bit bitmap with run containers (`12347`).
const COOKIE_RUNS: u16 = 12347;
/// Most containers a 32-bit bitmap can have (one per 16-bit key).
const MAX_CONTAINERS: usize = 1 << 16;
/// Smallest possible bucket: 4-byte high key plus an empty run-free bitmap (cookie + count).
const MIN_BUCKET_BYTES: usize = 4 + 8;
/// Size of the `signedLongs` flag plus the bucket count.
const HEADER_BYTES: usize = 1 + 4;

/// Serializes `map` exactly as Java's `Roaring64NavigableMap.serialize` (legacy mode) does.
///
/// Buckets come out in unsigned ascending order of their high key, `signedLongs` is `false`,
/// and empty buckets are skipped, so the bytes equal what the Java server would send for the
/// same set. Run containers are never emitted, whatever the in-memory representation is:
/// roaring-rs creates them on its own (`insert_range`, full containers, decoding a run-encoded
/// input), while Java writers in Uniffle never run-optimize, and byte-identical output is the
/// easiest compatibility argument. An empty map is `00 00 00 00 00`.
pub fn encode(map: &RoaringTreemap) -> Bytes {
    let buckets: Vec<(u32, &RoaringBitmap)> =
        map.bitmaps().filter(|(_, b)| !b.is_empty()).collect();
    let body: usize = buckets.iter().map(|(_, b)| 4 + b.serialized_size()).sum();
    let mut out = Vec::with_capacity(HEADER_BYTES + body);
    out.put_u8(0);
    // Java reads this as an int. More than i32::MAX non-empty buckets would take well over
    // 32 GiB of ids, far beyond any shuffle, so the cast cannot wrap in practice.
    out.put_u32(buckets.len() as u32);
    for (high, bitmap) in buckets {
        out.put_u32(high);
        write_bitmap_without_runs(bitmap, &mut out);
    }
    Bytes::from(out)
}

/// Appends the standard 32-bit serialization of `bitmap` with every run container expanded
/// to an array or bitmap container, as a Java writer that never run-optimizes would.
fn write_bitmap_without_runs(bitmap: &RoaringBitmap, out: &mut Vec<u8>) {
    let start = out.len();
    serialize_into_vec(bitmap, out);
    // The low half of the first (little-endian) cookie word says whether runs were written;
    // only then pay for a copy of this one bucket.
    if out[start..start + 2] == COOKIE_RUNS.to_le_bytes() {
        out.truncate(start);
        let mut plain = bitmap.clone();
        plain.remove_run_compression();
        serialize_into_vec(&plain, out);
    }
}

fn serialize_into_vec(bitmap: &RoaringBitmap, out: &mut Vec<u8>) {
    bitmap
        .serialize_into(&mut *out)
        .expect("io::Write for Vec<u8> never fails");
}

/// Parses Java-legacy `Roaring64NavigableMap` bytes from a client.
///
/// Accepts everything a Java reader accepts from a well-behaved writer: zero bytes (Uniffle's
/// "empty"), any non-zero `signedLongs` flag (it only affects Java's iteration order), buckets
/// in any order, and run containers. Rejects, as [`Error::BadRequest`] naming the problem:
/// truncation, a negative or impossible bucket count, a repeated high key, a malformed 32-bit
/// bitmap, and bytes left over after the last bucket (a sign the client sent another format).
/// Declared sizes are checked against the bytes actually present before anything is
/// allocated, so a few hostile bytes cannot make the server reserve gigabytes.
pub fn decode(bytes: &[u8]) -> Result<RoaringTreemap> {
    if bytes.is_empty() {
        return Ok(RoaringTreemap::new());
    }
    if bytes.len() < HEADER_BYTES {
        return Err(bad(format!(
            "{} bytes is too short for the 5-byte header",
            bytes.len()
        )));
    }
    let declared = i32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]);
    let mut rest = &bytes[HEADER_BYTES..];
    let count = usize::try_from(declared)
        .map_err(|_| bad(format!("bucket count {declared} is negative")))?;
    if count > rest.len() / MIN_BUCKET_BYTES {
        return Err(bad(format!(
            "bucket count {count} needs at least {} bytes but only {} follow the header",
            count.saturating_mul(MIN_BUCKET_BYTES),
            rest.len()
        )));
    }

    let mut buckets = BTreeMap::new();
    for index in 0..count {
        let Some((high, body)) = rest.split_first_chunk::<4>() else {
            return Err(bad(format!("bucket {index}: truncated high key")));
        };
        let high = u32::from_be_bytes(*high);
        rest = body;
        check_bitmap_header(rest).map_err(|why| bad(format!("bucket {index}: {why}")))?;
        // `Read for &[u8]` advances the slice, so `rest` ends up just past this bitmap.
        let bitmap = RoaringBitmap::deserialize_from(&mut rest)
            .map_err(|e| bad(format!("bucket {index} (high key {high}): {e}")))?;
        if buckets.insert(high, bitmap).is_some() {
            return Err(bad(format!("high key {high} appears twice")));
        }
    }
    if !rest.is_empty() {
        return Err(bad(format!(
            "{} bytes left over after the last bucket",
            rest.len()
        )));
    }
    Ok(RoaringTreemap::from_bitmaps(
        buckets.into_iter().filter(|(_, b)| !b.is_empty()),
    ))
}

/// Checks that the cookie, container count and fixed-size header of a 32-bit bitmap fit in
/// `bytes`, so the container count cannot drive an allocation larger than the input.
fn check_bitmap_header(bytes: &[u8]) -> std::result::Result<(), String> {
    let Some((cookie, rest)) = bytes.split_first_chunk::<4>() else {
        return Err("truncated bitmap cookie".into());
    };
    let cookie = u32::from_le_bytes(*cookie);
    let (containers, header) = if cookie == COOKIE_NO_RUNS {
        let Some((count, _)) = rest.split_first_chunk::<4>() else {
            return Err("truncated container count".into());
        };
        let count = u32::from_le_bytes(*count) as usize;
        if count > MAX_CONTAINERS {
            return Err(format!(
                "{count} containers exceeds the maximum {MAX_CONTAINERS}"
            ));
        }
        // cookie, count, then key/cardinality and offset per container
        (count, 8 + 8 * count)
    } else if cookie as u16 == COOKIE_RUNS {
        let count = (cookie >> 16) as usize + 1;
        let offsets = if count >= 4 { 4 * count } else { 0 };
        // cookie, run-marker bitset, key/cardinality per container, offsets when n ≥ 4
        (count, 4 + count.div_ceil(8) + 4 * count + offsets)
    } else {
        return Err(format!("unknown bitmap cookie {cookie:#010x}"));
    };
    if header > bytes.len() {
        return Err(format!(
            "{containers} containers need a {header}-byte header but only {} bytes remain",
            bytes.len()
        ));
    }
    Ok(())
}

fn bad(why: String) -> Error {
    Error::bad_request(format!("malformed Roaring64NavigableMap: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// DATA-FORMATS §6.3, bytes produced by Java RoaringBitmap 0.9.15.
    const EXAMPLE_A: &str = "00 00000002 \
        00000000 3a300000 01000000 0000 0200 10000000 0100 0200 0300 \
        00000001 3a300000 01000000 0000 0000 10000000 0500";
    const EXAMPLE_B: &str = "00 00000002 \
        00000000 3a300000 01000000 6000 0000 10000000 0700 \
        00002000 3a300000 01000000 6000 0000 10000000 0700";
    const EXAMPLE_C: &str = "00 00000001 00000000 \
        3a300000 04000000 \
        00000000 01000000 02000000 03000000 \
        28000000 2a000000 2c000000 2e000000 \
        0100 0100 0100 0100";
    const EXAMPLE_D: &str = "00 00000001 00000000 3b300000 01 0000 0900 0100 0000 0900";
    const EXAMPLE_E: &str = "00 00000000";

    fn unhex(s: &str) -> Vec<u8> {
        hex::decode(s.replace(' ', "")).expect("test hex is valid")
    }

    fn examples() -> Vec<(&'static str, Vec<u64>)> {
        vec![
            (EXAMPLE_A, vec![1, 2, 3, (1 << 32) + 5]),
            (EXAMPLE_B, vec![6_291_463, 35_184_378_380_295]),
            (EXAMPLE_C, vec![1, 65_537, 131_073, 196_609]),
            (EXAMPLE_D, (0..10).collect()),
            (EXAMPLE_E, vec![]),
        ]
    }

    #[test]
    fn java_examples_decode() {
        for (hex, values) in examples() {
            let map = decode(&unhex(hex)).expect(hex);
            assert_eq!(map.iter().collect::<Vec<_>>(), values, "{hex}");
        }
    }

    #[test]
    fn java_examples_encode_byte_for_byte() {
        for (hex, values) in examples() {
            if hex == EXAMPLE_D {
                continue; // Java only writes runs after runOptimize, which Uniffle never calls
            }
            let map: RoaringTreemap = values.into_iter().collect();
            assert_eq!(hex::encode(encode(&map)), hex.replace(' ', ""), "{hex}");
        }
    }

    #[test]
    fn run_containers_are_written_as_java_would() {
        // Decoding D and building with insert_range both give roaring-rs run containers.
        let from_d = decode(&unhex(EXAMPLE_D)).expect("D decodes");
        let mut ranged = RoaringTreemap::new();
        ranged.insert_range(0..10);
        for map in [&from_d, &ranged] {
            let (_, body) = map.bitmaps().next().expect("one bucket");
            let mut raw = Vec::new();
            serialize_into_vec(body, &mut raw);
            assert_eq!(
                &raw[..2],
                &COOKIE_RUNS.to_le_bytes(),
                "roaring-rs would write runs"
            );
        }
        let plain: RoaringTreemap = (0..10).collect();
        let want = encode(&plain);
        assert_eq!(&want[9..11], &[0x3a, 0x30], "plain form has no runs");
        assert_eq!(encode(&from_d), want);
        assert_eq!(encode(&ranged), want);

        // A full container (roaring-rs keeps it as one run) becomes an 8 KiB bitmap container.
        let mut full = RoaringTreemap::new();
        full.insert_range(0..(1 << 16));
        let bytes = encode(&full);
        assert_eq!(&bytes[9..13], &COOKIE_NO_RUNS.to_le_bytes());
        assert_eq!(bytes.len(), 9 + 8 + 8 + 8192);
        assert_eq!(decode(&bytes).expect("round trip"), full);
    }

    #[test]
    fn empty_inputs() {
        assert!(decode(&[]).expect("zero bytes").is_empty());
        assert_eq!(&encode(&RoaringTreemap::new())[..], &[0, 0, 0, 0, 0]);
    }

    #[test]
    fn lenient_where_java_is() {
        // signedLongs = true and buckets in descending order (a signed-order writer).
        let mut bytes = unhex(EXAMPLE_A);
        bytes[0] = 1;
        // high 0: 4 + 16 header + 3 values = 26 bytes; high 1 is the rest
        let first = bytes[5..31].to_vec();
        let second = bytes[31..].to_vec();
        let reordered = [&bytes[..5], &second[..], &first[..]].concat();
        let map = decode(&reordered).expect("any bucket order");
        assert_eq!(map.iter().collect::<Vec<_>>(), vec![1, 2, 3, (1 << 32) + 5]);
    }

    #[test]
    fn malformed_inputs_are_bad_requests() {
        let a = unhex(EXAMPLE_A);
        let mut cases: Vec<(&str, Vec<u8>)> = vec![
            ("header", vec![0, 0, 0]),
            ("negative", unhex("00 ffffffff")),
            (
                "huge count",
                unhex("00 7fffffff 00000000 3a300000 00000000"),
            ),
            ("left over", [&a[..], &[0]].concat()),
            ("cookie", unhex("00 00000001 00000000 deadbeef 00000000")),
            (
                "huge containers",
                unhex("00 00000001 00000000 3a300000 ffffffff"),
            ),
            (
                "repeated",
                unhex("00 00000002 00000000 3a300000 00000000 00000000 3a300000 00000000"),
            ),
        ];
        for cut in 1..a.len() {
            cases.push(("truncated", a[..cut].to_vec()));
        }
        for (what, bytes) in cases {
            let err = decode(&bytes).expect_err(what);
            assert!(matches!(err, Error::BadRequest { .. }), "{what}: {err}");
            assert!(
                err.to_string().contains("Roaring64NavigableMap"),
                "{what}: {err}"
            );
        }
    }

    /// Sets mixing low and high buckets, sparse (array) and dense (bitmap, > 4096 per key)
    /// containers.
    fn id_sets() -> impl Strategy<Value = Vec<u64>> {
        let sparse = prop::collection::vec(any::<u64>(), 0..200);
        let small = prop::collection::vec(0u64..(1 << 34), 0..200);
        let dense = (any::<u64>(), 4097usize..6000).prop_map(|(base, n)| {
            (0..n as u64)
                .map(|i| (base & !0xffff) | (i * 7 % 65536))
                .collect()
        });
        (sparse, small, dense).prop_map(|(a, b, c): (Vec<u64>, Vec<u64>, Vec<u64>)| {
            a.into_iter().chain(b).chain(c).collect()
        })
    }

    proptest! {
        #[test]
        fn round_trips(ids in id_sets()) {
            let map: RoaringTreemap = ids.iter().copied().collect();
            let bytes = encode(&map);
            prop_assert_eq!(decode(&bytes).expect("own output decodes"), map);
        }

        #[test]
        fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode(&bytes);
        }

        #[test]
        fn mutated_encodings_never_panic(
            ids in prop::collection::vec(0u64..(1 << 40), 0..300),
            flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
            cut in any::<prop::sample::Index>(),
        ) {
            let map: RoaringTreemap = ids.into_iter().collect();
            let mut bytes = encode(&map).to_vec();
            for (at, value) in flips {
                let i = at.index(bytes.len());
                bytes[i] = value;
            }
            let _ = decode(&bytes);
            let _ = decode(&bytes[..cut.index(bytes.len() + 1)]);
        }
    }
}
