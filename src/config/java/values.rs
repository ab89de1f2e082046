//! The value syntax, as the Java server's `ConfigUtils` converts strings.

use super::syntax::java_trim;

/// `Long.parseLong`: an optional sign and ASCII digits, nothing else.
pub(super) fn java_long(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// A Java `long` option's value: with any byte-unit letter in it, a size string (digits and a
/// unit, no sign, no fraction); otherwise `Long.parseLong`.
pub(crate) fn java_size(s: &str) -> Result<i64, String> {
    const HINT: &str = "expected a byte count or digits with b, k, kb, m, mb, g, gb, t, tb, p or \
                        pb, e.g. 40g";
    let lower = s.to_ascii_lowercase();
    if !lower.contains(['b', 'k', 'm', 'g', 't', 'p']) {
        return java_long(s).ok_or_else(|| format!("{s:?} is not a size ({HINT})"));
    }
    let digits_end = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (number, suffix) = lower.split_at(digits_end);
    if number.is_empty() || !suffix.chars().all(|c| c.is_ascii_lowercase()) {
        let reason = if suffix.starts_with('.') {
            "fractions are not supported"
        } else {
            HINT
        };
        return Err(format!("{s:?} is not a size ({reason})"));
    }
    let unit: i64 = match suffix {
        "" | "b" => 1,
        "k" | "kb" => 1 << 10,
        "m" | "mb" => 1 << 20,
        "g" | "gb" => 1 << 30,
        "t" | "tb" => 1 << 40,
        "p" | "pb" => 1 << 50,
        _ => return Err(format!("{s:?} is not a size (unknown unit; {HINT})")),
    };
    number
        .parse::<i64>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .ok_or_else(|| format!("{s:?} is too large"))
}

/// A duration in `unit_ms` milliseconds per plain number (1 for `ms` keys, 1000 for seconds
/// keys), possibly negative; see the module docs for the suffixes.
pub(super) fn java_duration(s: &str, unit_ms: i64) -> Result<i64, String> {
    if let Some(n) = java_long(s) {
        return n
            .checked_mul(unit_ms)
            .ok_or_else(|| format!("{s:?} is too large"));
    }
    let unit_name = if unit_ms == 1 {
        "milliseconds"
    } else {
        "seconds"
    };
    let lower = s.to_ascii_lowercase();
    let number_end = lower
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || (i == 0 && c == '-')))
        .map_or(lower.len(), |(i, _)| i);
    let (number, suffix) = lower.split_at(number_end);
    let per: Option<(i64, i64)> = match suffix {
        "us" => Some((1, 1000)),
        "ms" => Some((1, 1)),
        "s" => Some((1000, 1)),
        "min" => Some((60_000, 1)),
        "h" => Some((3_600_000, 1)),
        "d" => Some((86_400_000, 1)),
        _ => None,
    };
    match (java_long(number), per) {
        (Some(n), Some((mul, div))) => n
            .checked_mul(mul)
            .map(|v| v / div)
            .ok_or_else(|| format!("{s:?} is too large")),
        _ => match java_size(s) {
            Ok(v) => Err(format!(
                "{s:?}: the Java server reads this as {v} {unit_name} (a byte size); write \
                 {unit_name}, or a number with ms, s, min, h or d"
            )),
            Err(_) => Err(format!(
                "{s:?} is not a duration (expected {unit_name}, or a number with ms, s, min, h \
                 or d)"
            )),
        },
    }
}

/// `Double.parseDouble` for the finite values a config can mean (a `d`/`f` suffix allowed).
pub(crate) fn java_double(s: &str) -> Option<f64> {
    let t = s.trim();
    let t = t.strip_suffix(['d', 'D', 'f', 'F']).unwrap_or(t);
    if !t
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
    {
        return None;
    }
    t.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// A comma-separated list, items trimmed and empty items dropped.
pub(super) fn java_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(java_trim)
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect()
}
