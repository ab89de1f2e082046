//! Walking a file's properties onto a [`Config`], with typed getters that parse values as the
//! Java server does and remember which Java key set which Spillway key.

use std::collections::HashMap;
use std::time::Duration;

use super::keys::{self, JavaKey, Treatment};
use super::syntax::Property;
use super::values::{java_double, java_duration, java_list, java_long, java_size};
use crate::config::{ByteSize, Config, ConfigError};

/// A Java server config mapped onto Spillway's.
#[derive(Debug, Clone, PartialEq)]
pub struct JavaConfig {
    /// The mapped config, validated (without the env overlay).
    pub config: Config,
    /// Keys set but not used, each once in file order, each followed by the reason in
    /// parentheses.
    pub ignored: Vec<String>,
}

/// A property of the file, taken for mapping.
pub(super) struct Entry {
    /// The key as written in the file, for messages.
    pub(super) key: String,
    pub(super) value: String,
    /// Where the key first appears among the file's keys, to list ignored keys in file order.
    pub(super) position: usize,
}

impl Entry {
    pub(super) fn error(&self, reason: impl Into<String>) -> ConfigError {
        ConfigError::new(self.key.clone(), reason)
    }
}

/// Walks the file's properties onto a [`Config`], remembering which Java key set which
/// Spillway key (so validation errors can name the key the operator wrote) and which keys were
/// never used.
pub(super) struct Mapper {
    /// Last occurrence of each key (matched case-insensitively), in order of first occurrence.
    pub(super) props: Vec<(Property, bool)>,
    pub(super) index: HashMap<String, usize>,
    pub(super) config: Config,
    /// Spillway dotted key → the Java key it came from.
    pub(super) origins: HashMap<&'static str, String>,
    /// Ignored keys with their position among the file's keys.
    pub(super) ignored: Vec<(usize, String)>,
    /// The file is a Java coordinator's `coordinator.conf`: unused keys are looked up in the
    /// coordinator's key table.
    pub(super) coordinator_conf: bool,
    /// Every key the mapping asked for, present or not: what the key table's test compares
    /// with the table's mapped rows.
    #[cfg(test)]
    pub(super) asked: Vec<String>,
}

impl Mapper {
    pub(super) fn new(properties: Vec<Property>) -> Self {
        let mut props: Vec<(Property, bool)> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        for p in properties {
            let lower = p.key.to_ascii_lowercase();
            match index.get(&lower) {
                Some(&i) => props[i].0 = p,
                None => {
                    index.insert(lower, props.len());
                    props.push((p, false));
                }
            }
        }
        Mapper {
            props,
            index,
            config: Config::default(),
            origins: HashMap::new(),
            ignored: Vec::new(),
            coordinator_conf: false,
            #[cfg(test)]
            asked: Vec::new(),
        }
    }

    /// Takes `key` (any case) for mapping; it will not be reported as ignored.
    pub(super) fn take(&mut self, key: &str) -> Option<Entry> {
        #[cfg(test)]
        self.asked.push(key.to_owned());
        let &i = self.index.get(&key.to_ascii_lowercase())?;
        let (p, used) = &mut self.props[i];
        *used = true;
        Some(Entry {
            key: p.key.clone(),
            value: p.value.clone(),
            position: i,
        })
    }

    /// Reports `entry` as ignored, with why.
    pub(super) fn ignore(&mut self, entry: &Entry, reason: &str) {
        self.ignored
            .push((entry.position, format!("{} ({reason})", entry.key)));
    }

    /// Takes `key` and reports it as ignored with `reason`, if present.
    pub(super) fn ignore_key(&mut self, key: &str, reason: &str) {
        if let Some(e) = self.take(key) {
            self.ignore(&e, reason);
        }
    }

    pub(super) fn set_origin(&mut self, spillway: &'static str, entry: &Entry) {
        self.origins.insert(spillway, entry.key.clone());
    }

    /// Maps one Java key onto one Spillway key: `parse` reads and checks the value (one of the
    /// typed getters below), `set` stores it, and the Java key is remembered as `spillway`'s
    /// origin so that a validation error names the key the operator wrote. An absent key
    /// changes nothing. Keys that decide from other keys are mapped by hand.
    pub(super) fn map<T>(
        &mut self,
        key: &str,
        parse: impl FnOnce(&mut Self, &str) -> Result<Option<(Entry, T)>, ConfigError>,
        spillway: &'static str,
        set: impl FnOnce(&mut Config, T),
    ) -> Result<(), ConfigError> {
        self.map_to_each(key, parse, &[spillway], set)
    }

    /// [`Self::map`] for a Java key that sets several Spillway keys (`set` sets them all), each
    /// remembering the Java key as its origin.
    pub(super) fn map_to_each<T>(
        &mut self,
        key: &str,
        parse: impl FnOnce(&mut Self, &str) -> Result<Option<(Entry, T)>, ConfigError>,
        spillway: &[&'static str],
        set: impl FnOnce(&mut Config, T),
    ) -> Result<(), ConfigError> {
        if let Some((e, v)) = parse(self, key)? {
            set(&mut self.config, v);
            for s in spillway {
                self.set_origin(s, &e);
            }
        }
        Ok(())
    }

    pub(super) fn string(&mut self, key: &str) -> Option<Entry> {
        self.take(key).filter(|e| !e.value.is_empty())
    }

    /// A non-empty value as written ([`Self::string`] in the shape [`Self::map`] takes).
    pub(super) fn text(&mut self, key: &str) -> Result<Option<(Entry, String)>, ConfigError> {
        Ok(self.string(key).map(|e| {
            let v = e.value.clone();
            (e, v)
        }))
    }

    /// A comma-separated list, split as [`java_list`] splits it (an empty value is an empty
    /// list).
    pub(super) fn list(&mut self, key: &str) -> Result<Option<(Entry, Vec<String>)>, ConfigError> {
        Ok(self.take(key).map(|e| {
            let v = java_list(&e.value);
            (e, v)
        }))
    }

    pub(super) fn int(
        &mut self,
        key: &str,
        range: std::ops::RangeInclusive<i64>,
    ) -> Result<Option<(Entry, i64)>, ConfigError> {
        let Some(e) = self.take(key) else {
            return Ok(None);
        };
        let v = java_long(&e.value)
            .filter(|v| i32::try_from(*v).is_ok())
            .ok_or_else(|| e.error(format!("{:?} is not an integer", e.value)))?;
        if !range.contains(&v) {
            return Err(e.error(format!(
                "{v} is out of range ({}..={})",
                range.start(),
                range.end()
            )));
        }
        Ok(Some((e, v)))
    }

    pub(super) fn positive_count(
        &mut self,
        key: &str,
    ) -> Result<Option<(Entry, usize)>, ConfigError> {
        Ok(self
            .int(key, 1..=i64::from(i32::MAX))?
            .map(|(e, v)| (e, v as usize)))
    }

    /// A count in `0..=i32::MAX` (0 allowed, unlike [`Self::positive_count`]).
    pub(super) fn count(&mut self, key: &str) -> Result<Option<(Entry, usize)>, ConfigError> {
        Ok(self
            .int(key, 0..=i64::from(i32::MAX))?
            .map(|(e, v)| (e, v as usize)))
    }

    pub(super) fn port(&mut self, key: &str) -> Result<Option<(Entry, u16)>, ConfigError> {
        Ok(self.int(key, 0..=65535)?.map(|(e, v)| (e, v as u16)))
    }

    /// A size, possibly negative (`-1` means "unset" for some keys).
    pub(super) fn size(&mut self, key: &str) -> Result<Option<(Entry, i64)>, ConfigError> {
        let Some(e) = self.take(key) else {
            return Ok(None);
        };
        let v = java_size(&e.value).map_err(|r| e.error(r))?;
        Ok(Some((e, v)))
    }

    pub(super) fn positive_size(
        &mut self,
        key: &str,
    ) -> Result<Option<(Entry, ByteSize)>, ConfigError> {
        let Some((e, v)) = self.size(key)? else {
            return Ok(None);
        };
        if v <= 0 {
            return Err(e.error(format!("{v} must be above 0")));
        }
        Ok(Some((e, ByteSize(v as u64))))
    }

    /// A duration in milliseconds (`unit_ms` = 1) or seconds (1000), possibly ≤ 0.
    pub(super) fn duration_ms(
        &mut self,
        key: &str,
        unit_ms: i64,
    ) -> Result<Option<(Entry, i64)>, ConfigError> {
        let Some(e) = self.take(key) else {
            return Ok(None);
        };
        let v = java_duration(&e.value, unit_ms).map_err(|r| e.error(r))?;
        Ok(Some((e, v)))
    }

    pub(super) fn positive_duration(
        &mut self,
        key: &str,
        unit_ms: i64,
    ) -> Result<Option<(Entry, Duration)>, ConfigError> {
        let Some((e, ms)) = self.duration_ms(key, unit_ms)? else {
            return Ok(None);
        };
        if ms <= 0 {
            return Err(e.error(format!("{:?} must be above 0", e.value)));
        }
        Ok(Some((e, Duration::from_millis(ms as u64))))
    }

    /// A positive duration whose bare numbers are milliseconds.
    pub(super) fn positive_millis(
        &mut self,
        key: &str,
    ) -> Result<Option<(Entry, Duration)>, ConfigError> {
        self.positive_duration(key, 1)
    }

    /// A positive duration whose bare numbers are seconds (Java's `*.sec`/`*.seconds` keys).
    pub(super) fn positive_secs(
        &mut self,
        key: &str,
    ) -> Result<Option<(Entry, Duration)>, ConfigError> {
        self.positive_duration(key, 1000)
    }

    pub(super) fn double(&mut self, key: &str) -> Result<Option<(Entry, f64)>, ConfigError> {
        let Some(e) = self.take(key) else {
            return Ok(None);
        };
        let v = java_double(&e.value)
            .ok_or_else(|| e.error(format!("{:?} is not a number", e.value)))?;
        Ok(Some((e, v)))
    }

    /// A percentage in `0..=100` (Java's check), as a fraction.
    pub(super) fn percentage(&mut self, key: &str) -> Result<Option<(Entry, f64)>, ConfigError> {
        let Some((e, v)) = self.double(key)? else {
            return Ok(None);
        };
        if !(0.0..=100.0).contains(&v) {
            return Err(e.error(format!("{v} is not a percentage in 0..=100")));
        }
        Ok(Some((e, v / 100.0)))
    }

    /// A fraction in `(0, 1]`.
    pub(super) fn ratio(&mut self, key: &str) -> Result<Option<(Entry, f64)>, ConfigError> {
        let Some((e, v)) = self.double(key)? else {
            return Ok(None);
        };
        if !(v > 0.0 && v <= 1.0) {
            return Err(e.error(format!("{v} is not a ratio in (0, 1]")));
        }
        Ok(Some((e, v)))
    }

    pub(super) fn boolean(&mut self, key: &str) -> Result<Option<(Entry, bool)>, ConfigError> {
        let Some(e) = self.take(key) else {
            return Ok(None);
        };
        let v = if e.value.eq_ignore_ascii_case("true") {
            true
        } else if e.value.eq_ignore_ascii_case("false") {
            false
        } else {
            return Err(e.error(format!("{:?} is not true or false", e.value)));
        };
        Ok(Some((e, v)))
    }

    /// One of `names` (any case), as its index.
    pub(super) fn choice(
        &mut self,
        key: &str,
        names: &[&str],
    ) -> Result<Option<(Entry, usize)>, ConfigError> {
        let Some(e) = self.take(key) else {
            return Ok(None);
        };
        match names.iter().position(|n| n.eq_ignore_ascii_case(&e.value)) {
            Some(i) => Ok(Some((e, i))),
            None => Err(e.error(format!(
                "{:?} is not supported (expected {})",
                e.value,
                names.join(", ")
            ))),
        }
    }

    /// One of `options`' Java names (any case), as the value it stands for.
    pub(super) fn one_of<T: Copy>(
        &mut self,
        key: &str,
        options: &[(&str, T)],
    ) -> Result<Option<(Entry, T)>, ConfigError> {
        let names: Vec<&str> = options.iter().map(|(name, _)| *name).collect();
        Ok(self.choice(key, &names)?.map(|(e, i)| (e, options[i].1)))
    }

    /// A Java expiry: the timeout (milliseconds) sets the first of `spillway`, and the period
    /// Spillway sweeps at, [`half`] of it, the second; `fields` names both.
    pub(super) fn map_expiry(
        &mut self,
        key: &str,
        spillway: [&'static str; 2],
        fields: fn(&mut Config) -> (&mut Duration, &mut Duration),
    ) -> Result<(), ConfigError> {
        self.map_to_each(key, Self::positive_millis, &spillway, |c, timeout| {
            let (expiry, sweep) = fields(c);
            *expiry = timeout;
            *sweep = half(timeout);
        })
    }

    pub(super) fn map_all(&mut self, memory: Option<u64>) -> Result<(), ConfigError> {
        self.map_listeners()?;
        self.map_storage()?;
        self.map_coordination()?;
        self.map_audit()?;
        self.map_memory(memory)?;
        self.map_spilling()?;
        self.map_hdfs_writes()?;
        self.map_disks()?;
        self.map_push_gateway()?;
        self.map_top_n()?;
        self.map_kerberos()?;
        self.map_reload()?;
        self.map_quota()?;
        self.map(
            "rss.server.decommission.shutdown",
            Self::boolean,
            "shutdown.after_decommission",
            |c, v| c.shutdown.after_decommission = v,
        )
    }

    /// Lists the unused keys with the key table's reason, refuses what the table refuses, and
    /// validates with errors naming the Java key that set the offending value.
    pub(super) fn finish(mut self) -> Result<JavaConfig, ConfigError> {
        for (position, (p, used)) in self.props.iter().enumerate() {
            if *used {
                continue;
            }
            // A coordinator.conf's keys are the coordinator's, then the base keys it shares
            // with the server (its `rss.server.*` rows say nothing about a coordinator).
            let row = if self.coordinator_conf {
                super::coordinator_keys::lookup(&p.key).or_else(|| {
                    keys::lookup(&p.key)
                        .filter(|_| !p.key.to_ascii_lowercase().starts_with("rss.server."))
                })
            } else {
                keys::lookup(&p.key)
            };
            let listed = match row {
                Some(JavaKey {
                    treatment: Treatment::Refused(why),
                    java_default,
                    ..
                }) => {
                    if p.value.eq_ignore_ascii_case(java_default) {
                        continue;
                    }
                    return Err(ConfigError::new(
                        p.key.clone(),
                        format!(
                            "{:?} is refused: {why} (only Java's default {java_default} is \
                             accepted)",
                            p.value
                        ),
                    ));
                }
                Some(JavaKey {
                    treatment: Treatment::NotApplicable(why),
                    ..
                }) => format!("{} ({why})", p.key),
                // The mapper consults every mapped key; one left over was switched off by the
                // context, which `ignore` would have said, so this is only a safety net.
                Some(_) => format!("{} (not used in this configuration)", p.key),
                None if self.coordinator_conf => format!(
                    "{} (not a key of the Java coordinator 0.9.2 or 0.10)",
                    p.key
                ),
                None => format!(
                    "{} (not a key of the Java shuffle server 0.9.2 or 0.10)",
                    p.key
                ),
            };
            self.ignored.push((position, listed));
        }
        self.ignored.sort_by_key(|(position, _)| *position);
        self.config.java_properties = self
            .props
            .iter()
            .map(|(p, _)| (p.key.clone(), p.value.clone()))
            .collect();
        let origins = self.origins;
        self.config
            .validate()
            .map_err(|e| match origins.get(e.key.as_str()) {
                Some(java_key) => ConfigError::new(
                    java_key.clone(),
                    format!("{} (as Spillway's {})", e.reason, e.key),
                ),
                None => e,
            })?;
        Ok(JavaConfig {
            config: self.config,
            ignored: self.ignored.into_iter().map(|(_, listed)| listed).collect(),
        })
    }
}

/// Half of a Java expiry: the period Java sweeps at (never zero).
pub(super) fn half(d: Duration) -> Duration {
    (d / 2).max(Duration::from_millis(1))
}
