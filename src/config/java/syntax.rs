//! The properties syntax, as `java.util.Properties.load` reads it.

use crate::config::ConfigError;

/// One entry of a properties file, escapes resolved and the value trimmed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Property {
    /// The key as written (escapes resolved).
    pub key: String,
    /// The value, trimmed as the Java server trims it.
    pub value: String,
    /// 1-based line the entry starts on.
    pub line: usize,
}

/// Whether `text` is a Java properties file by content: an `rss.*` key and no TOML table
/// header.
pub(super) fn looks_like_properties(text: &str) -> bool {
    let mut rss_key = false;
    for (_, line) in logical_lines(text) {
        if line.starts_with('[') {
            return false;
        }
        let (key, _) = split_key_value(&line);
        rss_key |= key.get(..4).is_some_and(|p| p.eq_ignore_ascii_case("rss."));
    }
    rss_key
}

/// Parses a properties file as `java.util.Properties.load` does; values are trimmed as the
/// Java server trims them. Fails only on a malformed `\uXXXX` escape.
pub fn parse_properties(text: &str) -> Result<Vec<Property>, ConfigError> {
    let mut out = Vec::new();
    for (line, logical) in logical_lines(text) {
        let (raw_key, raw_value) = split_key_value(&logical);
        let key =
            unescape(raw_key).map_err(|reason| ConfigError::new(format!("line {line}"), reason))?;
        let value = unescape(raw_value).map_err(|reason| {
            ConfigError::new(
                if key.is_empty() {
                    format!("line {line}")
                } else {
                    key.clone()
                },
                reason,
            )
        })?;
        out.push(Property {
            key,
            value: java_trim(&value).to_owned(),
            line,
        });
    }
    Ok(out)
}

/// Java's `String.trim`: every char up to U+0020 counts as blank.
pub(super) fn java_trim(s: &str) -> &str {
    s.trim_matches(|c: char| c <= ' ')
}

/// The blanks `Properties.load` skips and separates with.
fn is_java_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\x0c')
}

/// Lines ended by `\n`, `\r\n` or `\r`, as `Properties.load` splits them.
fn natural_lines(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut lines = Vec::new();
    let (mut start, mut i) = (0, 0);
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => {
                lines.push(&text[start..i]);
                i += 1;
                start = i;
            }
            b'\r' => {
                lines.push(&text[start..i]);
                i += if bytes.get(i + 1) == Some(&b'\n') {
                    2
                } else {
                    1
                };
                start = i;
            }
            _ => i += 1,
        }
    }
    if start < bytes.len() {
        lines.push(&text[start..]);
    }
    lines
}

/// Non-empty logical lines with the 1-based line each starts on: comments and blank lines
/// dropped, continuations joined (a comment line never continues).
pub(super) fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut buf = String::new();
    let mut start_line = 0;
    let mut continuing = false;
    for (index, natural) in natural_lines(text).into_iter().enumerate() {
        let stripped = natural.trim_start_matches(is_java_blank);
        if !continuing {
            if stripped.is_empty() || stripped.starts_with(['#', '!']) {
                continue;
            }
            start_line = index + 1;
        }
        let backslashes = stripped.bytes().rev().take_while(|&b| b == b'\\').count();
        if backslashes % 2 == 1 {
            buf.push_str(&stripped[..stripped.len() - 1]);
            continuing = true;
        } else {
            buf.push_str(stripped);
            continuing = false;
            if !buf.is_empty() {
                out.push((start_line, std::mem::take(&mut buf)));
            }
        }
    }
    if continuing && !buf.is_empty() {
        out.push((start_line, buf));
    }
    out
}

/// Splits a logical line into its raw (still escaped) key and value: the key ends at the first
/// unescaped `=`, `:` or blank; blanks and one `=`/`:` after it are skipped.
fn split_key_value(line: &str) -> (&str, &str) {
    // Separators are ASCII, and no byte of a multi-byte UTF-8 char is ASCII, so byte offsets of
    // separators are char boundaries.
    let bytes = line.as_bytes();
    let (mut key_end, mut value_start) = (bytes.len(), bytes.len());
    let mut has_separator = false;
    let mut escaped = false;
    for (i, &b) in bytes.iter().enumerate() {
        if !escaped && (b == b'=' || b == b':') {
            (key_end, value_start, has_separator) = (i, i + 1, true);
            break;
        }
        if !escaped && is_java_blank(char::from(b)) {
            (key_end, value_start) = (i, i + 1);
            break;
        }
        escaped = b == b'\\' && !escaped;
    }
    while let Some(&b) = bytes.get(value_start) {
        if is_java_blank(char::from(b)) {
            value_start += 1;
        } else if !has_separator && (b == b'=' || b == b':') {
            has_separator = true;
            value_start += 1;
        } else {
            break;
        }
    }
    (&line[..key_end], &line[value_start..])
}

/// Resolves `Properties` escapes. A lone surrogate from `\uXXXX` becomes U+FFFD, since a Rust
/// string cannot hold one.
fn unescape(raw: &str) -> Result<String, String> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            None => {}
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\x0c'),
            Some('u') => {
                let unit = hex4(&mut chars)?;
                if (0xD800..0xDC00).contains(&unit) {
                    let mut ahead = chars.clone();
                    let low = match (ahead.next(), ahead.next()) {
                        (Some('\\'), Some('u')) => hex4(&mut ahead).ok(),
                        _ => None,
                    };
                    match low.filter(|l| (0xDC00..0xE000).contains(l)) {
                        Some(low) => {
                            let code = 0x10000
                                + ((u32::from(unit) - 0xD800) << 10)
                                + (u32::from(low) - 0xDC00);
                            out.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
                            chars = ahead;
                        }
                        None => out.push('\u{FFFD}'),
                    }
                } else {
                    out.push(char::from_u32(u32::from(unit)).unwrap_or('\u{FFFD}'));
                }
            }
            Some(other) => out.push(other),
        }
    }
    Ok(out)
}

/// The four hex digits of a `\uXXXX` escape.
fn hex4(chars: &mut std::str::Chars<'_>) -> Result<u16, String> {
    let digits: String = chars.by_ref().take(4).collect();
    if digits.len() == 4 && digits.chars().all(|c| c.is_ascii_hexdigit()) {
        u16::from_str_radix(&digits, 16).map_err(|e| e.to_string())
    } else {
        Err(format!("malformed \\uxxxx escape: \\u{digits}"))
    }
}
