//! `ByteSize`: a byte count that config files may spell as `"10G"`, `"1.5G"` or a plain integer.

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Binary unit suffixes, largest first, for [`ByteSize`]'s `Display`.
const UNITS: [(char, u64); 6] = [
    ('E', 1 << 60),
    ('P', 1 << 50),
    ('T', 1 << 40),
    ('G', 1 << 30),
    ('M', 1 << 20),
    ('K', 1 << 10),
];

/// A number of bytes, parsed from operator-friendly strings.
///
/// Why a type and not a `String`: sizes are checked once at startup, so a typo such as `"10Q"`
/// fails the config load instead of the first spill.
///
/// Accepted forms (case-insensitive, surrounding spaces ignored):
/// - a TOML integer: that many bytes (`1024`);
/// - a string with an optional fraction and an optional unit: `"1024"`, `"100B"`, `"512K"`,
///   `"256M"`, `"10G"`, `"1.5G"`, `"2T"`, `"1P"`, `"1E"`. Units are always binary (K = 1024), and
///   the long spellings `"10GB"` and `"10GiB"` mean the same as `"10G"`. A fractional result is
///   rounded down to whole bytes.
///
/// Negative values and values over `u64::MAX` are rejected.
///
/// `Display` (and `Serialize`) writes the largest unit that divides the value exactly (`"10G"`,
/// `"1536M"`), or bytes (`"1025B"`), so the text parses back to the same value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ByteSize(pub u64);

impl ByteSize {
    /// One kibibyte (1024 bytes).
    pub const KIB: u64 = 1 << 10;
    /// One mebibyte.
    pub const MIB: u64 = 1 << 20;
    /// One gibibyte.
    pub const GIB: u64 = 1 << 30;

    /// The number of bytes.
    pub fn as_u64(self) -> u64 {
        self.0
    }
}

impl From<u64> for ByteSize {
    fn from(bytes: u64) -> Self {
        ByteSize(bytes)
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            return f.write_str("0B");
        }
        for (suffix, unit) in UNITS {
            if self.0.is_multiple_of(unit) {
                return write!(f, "{}{}", self.0 / unit, suffix);
            }
        }
        write!(f, "{}B", self.0)
    }
}

/// Why a size string was rejected; the config loader wraps it with the key name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid size {input:?}: {reason} (expected e.g. \"10G\", \"256M\", \"1.5G\" or a byte count)"
)]
pub struct ParseByteSizeError {
    /// The text as given.
    pub input: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl FromStr for ByteSize {
    type Err = ParseByteSizeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let fail = |reason| ParseByteSizeError {
            input: s.to_string(),
            reason,
        };
        let text = s.trim();
        if text.starts_with('-') {
            return Err(fail("sizes cannot be negative"));
        }
        let number_end = text
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(text.len());
        let (number, suffix) = text.split_at(number_end);
        let unit = unit_multiplier(suffix.trim()).ok_or_else(|| fail("unknown unit"))?;

        let (whole, fraction) = match number.split_once('.') {
            Some((w, f)) => (w, f),
            None => (number, ""),
        };
        if whole.is_empty() && fraction.is_empty() {
            return Err(fail("missing number"));
        }
        if fraction.contains('.') {
            return Err(fail("more than one decimal point"));
        }
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| fail("number too large"))?
        };
        let unit = u128::from(unit);
        let mut bytes = whole.checked_mul(unit).ok_or_else(|| fail("too large"))?;
        if !fraction.is_empty() {
            // Exact arithmetic: fraction digits × unit / 10^digits, rounded down. More than 19
            // fraction digits cannot change the result for units up to 2^60.
            let digits = &fraction[..fraction.len().min(19)];
            let numerator: u128 = digits.parse().map_err(|_| fail("bad fraction"))?;
            let denominator = 10u128.pow(digits.len() as u32);
            bytes += numerator * unit / denominator;
        }
        u64::try_from(bytes)
            .map(ByteSize)
            .map_err(|_| fail("too large (over 16E)"))
    }
}

/// The multiplier for a unit suffix, or `None` if the suffix is not a known unit.
fn unit_multiplier(suffix: &str) -> Option<u64> {
    let upper = suffix.to_ascii_uppercase();
    let stem = upper
        .strip_suffix("IB")
        .or_else(|| upper.strip_suffix('B'))
        .unwrap_or(&upper);
    // "B" alone strips to "", meaning bytes; "IB" alone is not a unit.
    if upper == "IB" {
        return None;
    }
    match stem {
        "" => Some(1),
        "K" => Some(1 << 10),
        "M" => Some(1 << 20),
        "G" => Some(1 << 30),
        "T" => Some(1 << 40),
        "P" => Some(1 << 50),
        "E" => Some(1 << 60),
        _ => None,
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ByteSizeVisitor)
    }
}

struct ByteSizeVisitor;

impl Visitor<'_> for ByteSizeVisitor {
    type Value = ByteSize;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a byte count or a size string such as \"10G\"")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<ByteSize, E> {
        Ok(ByteSize(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<ByteSize, E> {
        u64::try_from(v)
            .map(ByteSize)
            .map_err(|_| E::custom(format!("invalid size {v}: sizes cannot be negative")))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<ByteSize, E> {
        v.parse().map_err(E::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_accepted_forms() {
        let cases: &[(&str, u64)] = &[
            ("0", 0),
            ("1024", 1024),
            ("100B", 100),
            ("100b", 100),
            ("512K", 512 * ByteSize::KIB),
            ("512k", 512 * ByteSize::KIB),
            ("512KB", 512 * ByteSize::KIB),
            ("256M", 256 * ByteSize::MIB),
            ("10G", 10 * ByteSize::GIB),
            ("10GB", 10 * ByteSize::GIB),
            ("10GiB", 10 * ByteSize::GIB),
            ("10gib", 10 * ByteSize::GIB),
            (" 10G ", 10 * ByteSize::GIB),
            ("10 G", 10 * ByteSize::GIB),
            ("1.5G", 3 * ByteSize::GIB / 2),
            ("0.5K", 512),
            (".5K", 512),
            ("1.", 1),
            ("1.3K", 1331), // 1331.2 rounded down
            ("2T", 2 << 40),
            ("1P", 1 << 50),
            ("15E", 15 << 60),
            ("18446744073709551615", u64::MAX),
        ];
        for &(text, bytes) in cases {
            assert_eq!(text.parse::<ByteSize>(), Ok(ByteSize(bytes)), "{text}");
        }
    }

    #[test]
    fn rejects_bad_forms() {
        for text in [
            "",
            "G",
            "-1",
            "-1G",
            "10Q",
            "10 GG",
            "1.2.3G",
            "16E",
            "1iB",
            "ten",
            "10G5",
            "18446744073709551616",
        ] {
            assert!(text.parse::<ByteSize>().is_err(), "{text:?} should fail");
        }
    }

    #[test]
    fn displays_largest_exact_unit() {
        let cases: &[(u64, &str)] = &[
            (0, "0B"),
            (1, "1B"),
            (1025, "1025B"),
            (1024, "1K"),
            (1536 * ByteSize::MIB, "1536M"),
            (10 * ByteSize::GIB, "10G"),
            (256 * ByteSize::MIB, "256M"),
            (20 << 40, "20T"),
            (u64::MAX, "18446744073709551615B"),
        ];
        for &(bytes, text) in cases {
            assert_eq!(ByteSize(bytes).to_string(), text);
            assert_eq!(text.parse::<ByteSize>(), Ok(ByteSize(bytes)), "{text}");
        }
    }

    proptest::proptest! {
        #[test]
        fn display_round_trips(bytes: u64) {
            proptest::prop_assert_eq!(ByteSize(bytes).to_string().parse::<ByteSize>(), Ok(ByteSize(bytes)));
        }
    }
}
