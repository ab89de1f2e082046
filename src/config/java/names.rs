//! Java's names for Spillway's keys, over both key tables (the server's and the coordinator's):
//! `--print-config` writes them beside the effective config.

use super::coordinator_keys::COORDINATOR_KEYS;
use super::keys::{lookup, Treatment, KEYS};

/// The Java keys that set the Spillway key `spillway` (dotted, as `--print-config` and errors
/// name it).
pub fn java_names_of(spillway: &str) -> impl Iterator<Item = &'static str> + '_ {
    // The coordinator's own keys too (a coordinator.conf's), each named once: the keys both
    // read (`rss.rpc.server.port`) come from this table.
    let coordinator_only = COORDINATOR_KEYS.iter().filter(|k| lookup(k.key).is_none());
    KEYS.iter()
        .chain(coordinator_only)
        .filter_map(move |k| match k.treatment {
            Treatment::Mapped { to, .. } if to.contains(&spillway) => Some(k.key),
            _ => None,
        })
}

/// `toml` (Spillway's config as `--print-config` prints it) with each key that Java keys set
/// followed by a comment naming them, so the effective config reads in both namings.
pub fn with_java_names(toml: &str) -> String {
    let mut out = String::with_capacity(toml.len() * 2);
    let mut section = String::new();
    for line in toml.lines() {
        out.push_str(line);
        let trimmed = line.trim();
        if let Some(name) = trimmed.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            section = name.trim().to_owned();
        } else if let Some((key, _)) = trimmed.split_once('=') {
            let key = key.trim().trim_matches('"');
            let dotted = if section.is_empty() {
                key.to_owned()
            } else {
                format!("{section}.{key}")
            };
            // A member of a family (`[hdfs_store.hadoop_conf]` items) is named by its family.
            let names: Vec<String> = java_names_of(&dotted)
                .map(str::to_owned)
                .chain(
                    java_names_of(&section)
                        .filter_map(|family| family.strip_suffix('*'))
                        .map(|prefix| format!("{prefix}{key}")),
                )
                .collect();
            if !names.is_empty() {
                out.push_str("  # ");
                out.push_str(&names.join(", "));
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spillway_keys_are_named_by_the_java_keys_that_set_them() {
        assert!(java_names_of("grpc_port").any(|k| k == "rss.rpc.server.port"));
        let toml = "grpc_port = 19999\n";
        assert!(
            with_java_names(toml).contains("# rss.rpc.server.port"),
            "{}",
            with_java_names(toml)
        );
    }
}
