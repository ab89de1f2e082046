//! The dynamic client conf file in Java's three formats, chosen as Java 0.10's
//! `DynamicClientConfService` chooses its parsers with `rss.coordinator.dynamicClientConf.parser`
//! (`coordinator.dynamic_client_conf_parser`; read from `DynamicClientConfService`,
//! `ClientConfParser`, `LegacyClientConfParser`, `YamlClientConfParser` and `CoordinatorConf` in
//! apache/incubator-uniffle as the project's code search stores them, which carry no release
//! tag; the parser key arrived with the YAML format in 0.9.0, the default is `LEGACY`).
//!
//! - `LEGACY`: `key value` lines, the remote storage given by two of them.
//! - `YAML`: a mapping with `rssClientConf` (the items) and `remoteStorageInfos` (each remote
//!   path with its own Hadoop conf); each of these is either a YAML mapping or a Hadoop XML
//!   `<configuration>` string.
//! - `MIXED`: Java tries LEGACY and falls back to YAML when LEGACY throws. LEGACY never throws
//!   on content (it skips every line that is not two tokens), so Java's fallback never runs and
//!   MIXED reads every file as LEGACY does; a YAML file under MIXED gives items such as `k1:` =
//!   `v1`. Spillway keeps that, since a file that works under a Java MIXED coordinator must give
//!   clients the same items here.
//!
//! A file the chosen parser rejects (Java: "Unknown format of clientConf file") leaves the last
//! good conf in force.
//!
//! Scalars are typed as SnakeYAML (YAML 1.1) types them and rendered as Java's
//! `String.valueOf` renders the result, since that is what Java serves: `yes`/`on` become
//! `true`, `0x10` becomes `16`, `1.50` becomes `1.5`, an empty value `null`, a list `[a, b]`.
//! Two SnakeYAML types are left as written: timestamps (Java would serve `Date.toString()`, in
//! the coordinator's time zone) and integers beyond 128 bits. yaml-rust2 is the YAML crate:
//! maintained, pure Rust, and its event API keeps each scalar's style (plain or quoted) that
//! this typing needs; the serde-based crates (serde_yaml_ng, serde_norway) resolve scalars by
//! YAML 1.2 rules and drop the style.

use std::collections::{BTreeMap, HashMap};
use std::sync::LazyLock;

use regex::Regex;
use yaml_rust2::parser::{Event, EventReceiver, Parser, Tag};
use yaml_rust2::scanner::TScalarStyle;

use super::storage::RemoteStorage;
pub use crate::config::coordinator::ClientConfFormat;

/// One read of the dynamic client conf file.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct ClientConfFile {
    /// Items served by `fetchClientConf(V2)`.
    pub(super) items: BTreeMap<String, String>,
    /// LEGACY: `rss.coordinator.remote.storage.path`, if the file sets it.
    pub(super) remote_storage_path: Option<String>,
    /// LEGACY: `rss.coordinator.remote.storage.cluster.conf`, if the file sets it.
    pub(super) remote_storage_cluster_conf: Option<String>,
    /// YAML: `remoteStorageInfos`, each path with its own conf, in file order; `None` when the
    /// file names no path.
    pub(super) remote_storages: Option<Vec<RemoteStorage>>,
}

/// Java's key for the remote storage paths (also a `[coordinator]` setting).
pub const REMOTE_STORAGE_PATH_KEY: &str = "rss.coordinator.remote.storage.path";
/// Java's key for the per-cluster Hadoop conf items.
pub const REMOTE_STORAGE_CLUSTER_CONF_KEY: &str = "rss.coordinator.remote.storage.cluster.conf";

/// Reads `text` in `format`; Err says why the file was rejected.
pub(super) fn parse(format: ClientConfFormat, text: &str) -> Result<ClientConfFile, String> {
    match format {
        ClientConfFormat::Legacy | ClientConfFormat::Mixed => Ok(parse_legacy(text)),
        ClientConfFormat::Yaml => parse_yaml(text),
    }
}

/// LEGACY: one `key value` pair per line split on whitespace; lines without exactly two tokens
/// are skipped. The remote storage keys are taken out of the client items, as Java does.
pub(super) fn parse_legacy(text: &str) -> ClientConfFile {
    let mut conf = ClientConfFile::default();
    for line in text.lines() {
        let tokens: Vec<&str> = line.split_whitespace().collect();
        let [key, value] = tokens[..] else {
            continue;
        };
        match key {
            REMOTE_STORAGE_PATH_KEY => conf.remote_storage_path = Some(value.to_owned()),
            REMOTE_STORAGE_CLUSTER_CONF_KEY => {
                conf.remote_storage_cluster_conf = Some(value.to_owned())
            }
            _ => {
                conf.items.insert(key.to_owned(), value.to_owned());
            }
        }
    }
    conf
}

const RSS_CLIENT_CONF: &str = "rssClientConf";
const REMOTE_STORAGE_INFOS: &str = "remoteStorageInfos";

/// YAML, with Java's failures: the document must be one mapping; an absent or empty
/// `rssClientConf` means no items; `remoteStorageInfos`, when present, must map path strings to
/// conf, and each conf (and `rssClientConf`) must be a mapping or a Hadoop XML string.
pub(super) fn parse_yaml(text: &str) -> Result<ClientConfFile, String> {
    let document = load_yaml(text)?;
    let JValue::Map(top) = document else {
        return Err(format!(
            "the document is {}, not a mapping",
            document.kind()
        ));
    };
    let mut conf = ClientConfFile::default();
    match get(&top, RSS_CLIENT_CONF) {
        None | Some(JValue::Null) => {}
        Some(value) => {
            conf.items = kv_items(value).map_err(|e| format!("{RSS_CLIENT_CONF}: {e}"))?;
        }
    }
    match get(&top, REMOTE_STORAGE_INFOS) {
        None => {}
        Some(JValue::Map(paths)) => {
            let mut storages = Vec::new();
            for (path, value) in paths {
                let JValue::Str(path) = path else {
                    return Err(format!(
                        "{REMOTE_STORAGE_INFOS}: the path {} is not a string",
                        path.java_string()
                    ));
                };
                let conf =
                    kv_items(value).map_err(|e| format!("{REMOTE_STORAGE_INFOS}.{path}: {e}"))?;
                storages.push(RemoteStorage {
                    path: path.clone(),
                    conf,
                });
            }
            conf.remote_storages = (!storages.is_empty()).then_some(storages);
        }
        Some(other) => {
            return Err(format!(
                "{REMOTE_STORAGE_INFOS} is {}, not a mapping",
                other.kind()
            ))
        }
    }
    Ok(conf)
}

/// `parseKVItems`: a mapping's entries as Java strings, or a Hadoop XML configuration.
fn kv_items(value: &JValue) -> Result<BTreeMap<String, String>, String> {
    match value {
        JValue::Map(entries) => {
            let mut items = BTreeMap::new();
            for (k, v) in entries {
                let key = k.java_string();
                // Java collects with `Collectors.toMap`, which rejects two keys that render
                // alike (`1` and `"1"`).
                if items.insert(key.clone(), v.java_string()).is_some() {
                    return Err(format!("duplicate key {key:?}"));
                }
            }
            Ok(items)
        }
        JValue::Str(xml) => hadoop_xml(xml),
        other => Err(format!(
            "{} is neither `key: value` items nor a Hadoop XML configuration",
            other.kind()
        )),
    }
}

/// A Hadoop `<configuration>` as `Configuration(false)` loads it and its iterator lists it:
/// `<property>` elements with a `<name>` (trimmed) and a non-empty `<value>` (kept as
/// written, `${...}` unexpanded), or `name`/`value` attributes; the last definition wins.
/// Hadoop's deprecated-key aliases are not added. Malformed XML rejects the file, as Hadoop's
/// parse error does in Java.
fn hadoop_xml(text: &str) -> Result<BTreeMap<String, String>, String> {
    let doc = roxmltree::Document::parse(text.trim_start())
        .map_err(|e| format!("not a Hadoop XML configuration: {e}"))?;
    let mut items = BTreeMap::new();
    for property in doc.descendants().filter(|n| n.has_tag_name("property")) {
        let mut name = property.attribute("name").map(str::to_owned);
        let mut value = property.attribute("value").map(str::to_owned);
        for child in property.children().filter(|c| c.is_element()) {
            let text: String = child
                .descendants()
                .filter(|d| d.is_text())
                .filter_map(|d| d.text())
                .collect();
            if text.is_empty() {
                continue;
            }
            match child.tag_name().name() {
                "name" => name = Some(text.trim().to_owned()),
                "value" => value = Some(text),
                _ => {}
            }
        }
        if let (Some(name), Some(value)) = (name, value) {
            items.insert(name, value);
        }
    }
    Ok(items)
}

/// A YAML node typed as SnakeYAML types it.
#[derive(Debug, Clone, PartialEq)]
enum JValue {
    Null,
    Bool(bool),
    /// An integer in decimal, or a timestamp or oversized integer as written (module doc).
    Int(String),
    Float(f64),
    Str(String),
    List(Vec<JValue>),
    /// Entries in first-insertion order with the last value, as SnakeYAML's `LinkedHashMap`.
    Map(Vec<(JValue, JValue)>),
}

impl JValue {
    /// What Java's `String.valueOf` gives for the constructed object.
    fn java_string(&self) -> String {
        match self {
            JValue::Null => "null".into(),
            JValue::Bool(b) => b.to_string(),
            JValue::Int(s) | JValue::Str(s) => s.clone(),
            JValue::Float(f) => java_double(*f),
            JValue::List(items) => {
                let items: Vec<String> = items.iter().map(JValue::java_string).collect();
                format!("[{}]", items.join(", "))
            }
            JValue::Map(entries) => {
                let entries: Vec<String> = entries
                    .iter()
                    .map(|(k, v)| format!("{}={}", k.java_string(), v.java_string()))
                    .collect();
                format!("{{{}}}", entries.join(", "))
            }
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            JValue::Null => "empty",
            JValue::Bool(_) => "a boolean",
            JValue::Int(_) => "a number",
            JValue::Float(_) => "a number",
            JValue::Str(_) => "a string",
            JValue::List(_) => "a list",
            JValue::Map(_) => "a mapping",
        }
    }
}

/// `map.get(key)` for a string key.
fn get<'a>(map: &'a [(JValue, JValue)], key: &str) -> Option<&'a JValue> {
    map.iter()
        .find(|(k, _)| matches!(k, JValue::Str(s) if s == key))
        .map(|(_, v)| v)
}

/// Java's `Double.toString`: plain between 10^-3 and 10^7, else `d.dddE±n`; always a fraction
/// digit.
fn java_double(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let abs = f.abs();
    if abs == 0.0 || (1e-3..1e7).contains(&abs) {
        let plain = format!("{f}");
        return if plain.contains('.') {
            plain
        } else {
            format!("{plain}.0")
        };
    }
    let sci = format!("{f:e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    if mantissa.contains('.') {
        format!("{mantissa}E{exponent}")
    } else {
        format!("{mantissa}.0E{exponent}")
    }
}

/// SnakeYAML's implicit resolvers (YAML 1.1), tried in its order for a plain scalar.
static BOOL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$")
        .expect("valid regex")
});
static INT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$",
    )
    .expect("valid regex")
});
static FLOAT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?:[-+]?(?:\.[0-9]+|[0-9_]+(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
    )
    .expect("valid regex")
});
static NULL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(?:~|null|Null|NULL| )?$").expect("valid regex"));

/// Types a scalar: quoted and block scalars, and `!!str`, are strings; a plain one goes
/// through the resolvers.
fn resolve(text: String, style: TScalarStyle, tag: Option<&Tag>) -> JValue {
    let str_tag = tag.is_some_and(|t| t.handle == "tag:yaml.org,2002:" && t.suffix == "str");
    if style != TScalarStyle::Plain || str_tag {
        return JValue::Str(text);
    }
    if BOOL.is_match(&text) {
        return JValue::Bool(matches!(
            text.to_ascii_lowercase().as_str(),
            "yes" | "true" | "on"
        ));
    }
    if INT.is_match(&text) {
        return JValue::Int(java_int(&text).unwrap_or(text));
    }
    if FLOAT.is_match(&text) {
        return match java_float(&text) {
            Some(f) => JValue::Float(f),
            None => JValue::Str(text),
        };
    }
    if NULL.is_match(&text) {
        return JValue::Null;
    }
    JValue::Str(text)
}

/// SnakeYAML's integer construction: `_` dropped, then binary, hex, octal (leading 0),
/// base 60 (`1:30`) or decimal.
fn java_int(text: &str) -> Option<String> {
    let digits = text.replace('_', "");
    let (negative, digits) = match digits.strip_prefix('-') {
        Some(rest) => (true, rest.to_owned()),
        None => (false, digits.trim_start_matches('+').to_owned()),
    };
    let magnitude: i128 = if digits == "0" {
        0
    } else if let Some(bin) = digits.strip_prefix("0b") {
        i128::from_str_radix(bin, 2).ok()?
    } else if let Some(hex) = digits.strip_prefix("0x") {
        i128::from_str_radix(hex, 16).ok()?
    } else if digits.starts_with('0') {
        i128::from_str_radix(&digits, 8).ok()?
    } else if digits.contains(':') {
        let mut total: i128 = 0;
        for part in digits.split(':') {
            total = total
                .checked_mul(60)?
                .checked_add(part.parse::<i128>().ok()?)?;
        }
        total
    } else {
        digits.parse().ok()?
    };
    Some(if negative { -magnitude } else { magnitude }.to_string())
}

/// SnakeYAML's float construction: `_` dropped, then infinity, NaN, base 60 or a decimal.
fn java_float(text: &str) -> Option<f64> {
    let value = text.replace('_', "");
    let lower = value.to_ascii_lowercase();
    let (sign, body) = match lower.strip_prefix('-') {
        Some(rest) => (-1.0, rest),
        None => (1.0, lower.trim_start_matches('+')),
    };
    if body == ".inf" {
        return Some(sign * f64::INFINITY);
    }
    if body == ".nan" {
        return Some(f64::NAN);
    }
    if body.contains(':') {
        let mut total = 0.0;
        for part in body.split(':') {
            total = total * 60.0 + part.parse::<f64>().ok()?;
        }
        return Some(sign * total);
    }
    body.parse::<f64>().ok().map(|f| sign * f)
}

/// Builds the typed tree from yaml-rust2's events.
#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    anchors: HashMap<usize, JValue>,
    documents: Vec<JValue>,
}

enum Frame {
    List(usize, Vec<JValue>),
    /// Anchor, entries so far, and a key waiting for its value.
    Map(usize, Vec<(JValue, JValue)>, Option<JValue>),
}

impl Builder {
    fn push(&mut self, value: JValue, anchor: usize) {
        if anchor > 0 {
            self.anchors.insert(anchor, value.clone());
        }
        match self.stack.last_mut() {
            None => self.documents.push(value),
            Some(Frame::List(_, items)) => items.push(value),
            Some(Frame::Map(_, _, key @ None)) => *key = Some(value),
            Some(Frame::Map(_, entries, key @ Some(_))) => {
                let key = key.take().unwrap_or(JValue::Null);
                insert(entries, key, value);
            }
        }
    }
}

/// `LinkedHashMap.put`, plus SnakeYAML's merge key: `<<: *base` (or a list of them) adds the
/// entries the mapping does not set itself.
fn insert(entries: &mut Vec<(JValue, JValue)>, key: JValue, value: JValue) {
    if key == JValue::Str("<<".into()) {
        let merged = match value {
            JValue::Map(m) => m,
            JValue::List(maps) => maps
                .into_iter()
                .rev()
                .flat_map(|m| match m {
                    JValue::Map(m) => m,
                    _ => Vec::new(),
                })
                .collect(),
            other => {
                entries.push((JValue::Str("<<".into()), other));
                return;
            }
        };
        for (k, v) in merged {
            if !entries.iter().any(|(existing, _)| *existing == k) {
                entries.push((k, v));
            }
        }
        return;
    }
    match entries.iter_mut().find(|(existing, _)| *existing == key) {
        Some(entry) => entry.1 = value,
        None => entries.push((key, value)),
    }
}

impl EventReceiver for Builder {
    fn on_event(&mut self, event: Event) {
        match event {
            Event::Scalar(text, style, anchor, tag) => {
                let value = resolve(text, style, tag.as_ref());
                self.push(value, anchor);
            }
            Event::Alias(id) => {
                let value = self.anchors.get(&id).cloned().unwrap_or(JValue::Null);
                self.push(value, 0);
            }
            Event::SequenceStart(anchor, _) => self.stack.push(Frame::List(anchor, Vec::new())),
            Event::MappingStart(anchor, _) => self.stack.push(Frame::Map(anchor, Vec::new(), None)),
            Event::SequenceEnd | Event::MappingEnd => {
                let (anchor, value) = match self.stack.pop() {
                    Some(Frame::List(anchor, items)) => (anchor, JValue::List(items)),
                    Some(Frame::Map(anchor, entries, _)) => (anchor, JValue::Map(entries)),
                    None => return,
                };
                self.push(value, anchor);
            }
            _ => {}
        }
    }
}

/// SnakeYAML's `load`: exactly one document; none (an empty file) is Java's null.
fn load_yaml(text: &str) -> Result<JValue, String> {
    let mut builder = Builder::default();
    Parser::new_from_str(text)
        .load(&mut builder, true)
        .map_err(|e| format!("not YAML: {e}"))?;
    let mut documents = builder.documents.into_iter();
    match (documents.next(), documents.next()) {
        (None, _) => Ok(JValue::Null),
        (Some(doc), None) => Ok(doc),
        (Some(_), Some(_)) => Err("expected a single YAML document".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_takes_storage_keys_apart() {
        let conf = parse_legacy(
            "spark.rss.storage.type MEMORY_LOCALFILE_HDFS\n\
             rss.coordinator.remote.storage.path hdfs://ns1/rss,hdfs://ns2/rss\n\
             rss.coordinator.remote.storage.cluster.conf ns1,dfs.replication=2\n\
             three tokens here\n\
             \n  rss.writer.buffer.size\t4m  \n",
        );
        assert_eq!(
            conf.items,
            BTreeMap::from([
                (
                    "spark.rss.storage.type".into(),
                    "MEMORY_LOCALFILE_HDFS".into()
                ),
                ("rss.writer.buffer.size".into(), "4m".into()),
            ])
        );
        assert_eq!(
            conf.remote_storage_path.as_deref(),
            Some("hdfs://ns1/rss,hdfs://ns2/rss")
        );
        assert_eq!(
            conf.remote_storage_cluster_conf.as_deref(),
            Some("ns1,dfs.replication=2")
        );
        assert_eq!(conf.remote_storages, None);
    }

    /// Java's own test file (`dynamicClientConf.yaml`'s shape) and its typed scalars.
    #[test]
    fn yaml_items_and_storages_as_java_renders_them() {
        let conf = parse_yaml(
            "rssClientConf:\n\
             \x20 k1: v1\n\
             \x20 k2: v2\n\
             \x20 k3: true\n\
             \x20 k4: off\n\
             \x20 k5: 1\n\
             \x20 k6: 0x10\n\
             \x20 k7: 1.50\n\
             \x20 k8: '007'\n\
             \x20 k9:\n\
             \x20 k10: [a, 2]\n\
             \x20 k11: 1_000\n\
             \x20 k12: 3e8\n\
             \x20 k13: 1:30\n\
             remoteStorageInfos:\n\
             \x20 hdfs://a-ns01:\n\
             \x20   k1: v1,v2,v3\n\
             \x20 hdfs://x-ns01:\n\
             \x20   k1: v1\n",
        )
        .unwrap();
        let expected: BTreeMap<String, String> = [
            ("k1", "v1"),
            ("k2", "v2"),
            ("k3", "true"),
            ("k4", "false"),
            ("k5", "1"),
            ("k6", "16"),
            ("k7", "1.5"),
            ("k8", "007"),
            ("k9", "null"),
            ("k10", "[a, 2]"),
            ("k11", "1000"),
            ("k12", "3.0E8"),
            ("k13", "90"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(conf.items, expected);
        let storages = conf.remote_storages.unwrap();
        assert_eq!(storages.len(), 2);
        assert_eq!(storages[0].path, "hdfs://a-ns01");
        assert_eq!(storages[0].conf["k1"], "v1,v2,v3");
        assert_eq!(storages[1].path, "hdfs://x-ns01");
        assert_eq!(conf.remote_storage_path, None);
    }

    /// Java's XML form: a block string holding a Hadoop `<configuration>`.
    #[test]
    fn yaml_values_may_be_hadoop_xml() {
        let conf = parse_yaml(
            "rssClientConf: |+\n   \t<configuration>\n    <property>\n      <name> k1 </name>\n      \
             <value>v1</value>\n    </property>\n    <property name=\"k2\" value=\"v2\"/>\n    \
             <property><name>empty</name><value></value></property>\n    </configuration>\n\
             remoteStorageInfos:\n   hdfs://a-ns01: |+\n      <configuration><property><name>k1</name>\
             <value>v1</value></property></configuration>\n   hdfs://x-ns01:\n      k1: v1\n",
        )
        .unwrap();
        assert_eq!(
            conf.items,
            BTreeMap::from([("k1".into(), "v1".into()), ("k2".into(), "v2".into())])
        );
        let storages = conf.remote_storages.unwrap();
        assert_eq!(storages[0].conf["k1"], "v1");
        assert_eq!(storages[1].conf["k1"], "v1");
    }

    #[test]
    fn yaml_without_sections_has_no_items_and_no_storage() {
        for text in [
            "other: 1\n",
            "rssClientConf:\n",
            "rssClientConf: {}\nremoteStorageInfos: {}\n",
        ] {
            let conf = parse_yaml(text).unwrap();
            assert!(conf.items.is_empty(), "{text}");
            assert_eq!(conf.remote_storages, None, "{text}");
        }
    }

    #[test]
    fn yaml_merge_keys_and_anchors() {
        let conf = parse_yaml(
            "base: &base\n  a: 1\n  b: 2\nrssClientConf:\n  <<: *base\n  b: 3\n  c: *base\n",
        )
        .unwrap();
        assert_eq!(conf.items["a"], "1");
        assert_eq!(conf.items["b"], "3");
        assert_eq!(conf.items["c"], "{a=1, b=2}");
    }

    /// What Java's YAML parser throws on; the coordinator then keeps its last good conf.
    #[test]
    fn yaml_rejects_what_java_rejects() {
        for bad in [
            "",
            "just a string",
            "- a\n- b\n",
            "rssClientConf: [a, b]\n",
            "rssClientConf: 5\n",
            "rssClientConf: '<configuration><property>'\n",
            "rssClientConf:\n  1: a\n  '1': b\n",
            "remoteStorageInfos:\n",
            "remoteStorageInfos: [a]\n",
            "remoteStorageInfos:\n  hdfs://a:\n",
            "remoteStorageInfos:\n  1:\n    k: v\n",
            "rssClientConf:\n  k: [unclosed\n",
            "a: 1\n---\nb: 2\n",
        ] {
            assert!(parse_yaml(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    /// MIXED reads as LEGACY, YAML files included, because Java's LEGACY parser never fails.
    #[test]
    fn mixed_reads_every_file_as_legacy() {
        let yaml = "rssClientConf:\n  k1: v1\n";
        let mixed = parse(ClientConfFormat::Mixed, yaml).unwrap();
        assert_eq!(mixed, parse_legacy(yaml));
        assert_eq!(mixed.items, BTreeMap::from([("k1:".into(), "v1".into())]));
        let legacy = "k1 v1\nrss.coordinator.remote.storage.path hdfs://ns/rss\n";
        assert_eq!(
            parse(ClientConfFormat::Mixed, legacy).unwrap(),
            parse_legacy(legacy)
        );
        assert!(parse(ClientConfFormat::Yaml, legacy).is_err());
    }

    #[test]
    fn java_double_rendering() {
        for (f, s) in [
            (1.0, "1.0"),
            (1.5, "1.5"),
            (0.001, "0.001"),
            (1e7, "1.0E7"),
            (1.25e-4, "1.25E-4"),
            (-0.0, "-0.0"),
            (123456.0, "123456.0"),
        ] {
            assert_eq!(java_double(f), s);
        }
    }
}
