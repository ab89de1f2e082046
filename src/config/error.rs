//! `ConfigError`, and mapping toml/serde errors back to the dotted key an operator must fix.

use toml::de::{DeTable, DeValue};

/// Key reported for errors that cannot be tied to one key (TOML syntax errors).
const DOCUMENT_KEY: &str = "<document>";

/// A configuration problem, naming the full dotted key to fix (`hybrid_store.memory_spill_low_watermark`).
///
/// Startup fails with this; it is never sent to a client. For a file that cannot be read the key
/// is where the path came from (`--config` or `WORKER_CONFIG_PATH`); for TOML syntax errors
/// that cannot be tied to a key it is `<document>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("config key `{key}`: {reason}")]
pub struct ConfigError {
    /// Full dotted key, e.g. `memory_store.capacity`.
    pub key: String,
    /// What is wrong and, where useful, what is expected.
    pub reason: String,
}

impl ConfigError {
    pub(super) fn new(key: impl Into<String>, reason: impl Into<String>) -> Self {
        ConfigError {
            key: key.into(),
            reason: reason.into(),
        }
    }
}

/// Turns a toml/serde error into a [`ConfigError`] naming the dotted key at fault.
///
/// toml reports a byte span: the key for unknown keys, the value for type and value errors. The
/// document is re-parsed into spanned tables (recovering from syntax errors where it can) and
/// the innermost key whose key or value span holds the error start is the one reported.
pub(super) fn error_with_key(input: &str, err: &toml::de::Error) -> ConfigError {
    let message = err.message().trim().to_string();
    let Some(span) = err.span() else {
        return ConfigError::new(DOCUMENT_KEY, message);
    };
    let (root, _syntax_errors) = DeTable::parse_recoverable(input);
    let mut path = Vec::new();
    // Recovery from a syntax error can invent an entry with an empty key (`[]`), and a quoted
    // key may be blank (`"\u{b}" =`): neither names anything an operator could see, so the
    // line, quotes included, is the better pointer.
    if key_path_at(root.get_ref(), span.start, &mut path)
        && path.iter().any(|k| !k.trim().is_empty())
    {
        return ConfigError::new(path.join("."), message);
    }
    // Syntax errors (duplicate keys, unquoted strings) may leave no spanned entry: fall back to
    // the key written on the offending line.
    let (line, column) = line_column(input, span.start);
    ConfigError::new(
        key_on_line(input, line).unwrap_or_else(|| DOCUMENT_KEY.to_string()),
        format!("line {line}, column {column}: {message}"),
    )
}

/// The dotted key written on 1-based `line` (`section.key` for `key = …`, `section` for a
/// `[section]` header), from the text alone; `None` if the line holds neither.
fn key_on_line(input: &str, line: usize) -> Option<String> {
    let mut section = String::new();
    for (index, text) in input.lines().enumerate() {
        let text = text.trim();
        let header = text.starts_with('[').then(|| {
            text.trim_start_matches('[')
                .split(']')
                .next()
                .unwrap_or_default()
                .trim()
                .to_string()
        });
        if index + 1 == line {
            if let Some(header) = header {
                return (!header.is_empty()).then_some(header);
            }
            let key = text.split_once('=')?.0.trim();
            if key.is_empty() || key.starts_with('#') {
                return None;
            }
            return Some(if section.is_empty() {
                key.to_string()
            } else {
                format!("{section}.{key}")
            });
        }
        if let Some(header) = header {
            section = header;
        }
    }
    None
}

/// Pushes onto `path` the keys leading to the innermost entry whose key or value span contains
/// `pos`; returns whether one was found (on false, `path` is unchanged).
fn key_path_at(table: &DeTable<'_>, pos: usize, path: &mut Vec<String>) -> bool {
    for (key, value) in table.iter() {
        path.push(key.get_ref().to_string());
        if let DeValue::Table(inner) = value.get_ref() {
            if key_path_at(inner, pos, path) {
                return true;
            }
        }
        if key.span().contains(&pos) || value.span().contains(&pos) {
            return true;
        }
        path.pop();
    }
    false
}

/// 1-based line and column (in chars) of byte offset `pos`.
fn line_column(input: &str, pos: usize) -> (usize, usize) {
    let before = input.get(..pos).unwrap_or(input);
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit('\n')
        .next()
        .map_or(0, |last| last.chars().count())
        + 1;
    (line, column)
}
