//! An app's object-store location and how to reach it, from Hadoop's s3a keys.
//!
//! The keys arrive as Java operators write them: in the app's `RemoteStorageInfo` conf (the
//! coordinator's `rss.coordinator.remote.storage.cluster.conf`, or the client's own), over the
//! server's `hdfs_store.hadoop_conf`. They are mapped onto `object_store`'s S3 builder; what
//! the crate cannot do is refused at registration with the key named, never ignored.

use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::{ClientOptions, RetryConfig};

use crate::error::{Error, Result};

/// The tier name used in errors, metrics and logs.
pub(crate) const TIER: &str = "s3";

/// Schemes served by the object-store tier (Hadoop's s3a, and the older names that map to it).
pub const SCHEMES: [&str; 3] = ["s3a", "s3", "s3n"];

/// Whether `path` is an object-store path (`s3a://bucket/…` and the older schemes).
pub fn is_object_path(path: &str) -> bool {
    path.split_once("://")
        .is_some_and(|(scheme, _)| SCHEMES.contains(&scheme))
}

/// `s3a://bucket/some/root` parsed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ObjectRoot {
    /// The bucket.
    pub bucket: String,
    /// Key prefix of the root inside the bucket, without leading or trailing `/` (`""`: the
    /// bucket itself).
    pub root: String,
}

impl ObjectRoot {
    /// Parses `remoteStorage.path`.
    pub fn parse(path: &str) -> Result<ObjectRoot> {
        let bad = |why: &str| Error::TierFailed {
            tier: TIER,
            reason: format!("remote storage path {path:?}: {why}"),
        };
        let Some((scheme, rest)) = path.split_once("://") else {
            return Err(bad("expected s3a://bucket/path"));
        };
        if !SCHEMES.contains(&scheme) {
            return Err(bad("not an s3a://, s3:// or s3n:// path"));
        }
        let (bucket, root) = rest.split_once('/').unwrap_or((rest, ""));
        // S3 bucket names: 3-63 of lowercase letters, digits, '-' and '.'.
        let bucket_ok = (3..=63).contains(&bucket.len())
            && bucket
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
        if !bucket_ok {
            return Err(bad(
                "the bucket must be 3-63 lowercase letters, digits, '-' or '.'",
            ));
        }
        let root = root.trim_matches('/').to_owned();
        if root
            .split('/')
            .any(|c| c.is_empty() && !root.is_empty() || c == "." || c == "..")
        {
            return Err(bad("must not contain empty, . or .. components"));
        }
        Ok(ObjectRoot {
            bucket: bucket.to_owned(),
            root,
        })
    }

    /// The key prefix for `rest` under the root (`root/rest`, or `rest` at the bucket's top).
    pub fn key(&self, rest: &str) -> String {
        if self.root.is_empty() {
            rest.to_owned()
        } else {
            format!("{}/{rest}", self.root)
        }
    }
}

/// How credentials are found, from `fs.s3a.aws.credentials.provider` and the key items.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Credentials {
    /// `fs.s3a.access.key` + `fs.s3a.secret.key` (+ `fs.s3a.session.token`).
    Keys,
    /// No signing (public buckets).
    Anonymous,
    /// The AWS default chain: environment, the shared credentials file's profile
    /// ([`profile_keys`]), web identity (IRSA), container and instance metadata.
    Chain,
}

/// The s3a settings of one store, with the secrets kept out of `Debug`.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct S3Settings {
    endpoint: Option<String>,
    path_style: bool,
    ssl: bool,
    region: Option<String>,
    access_key: Option<String>,
    secret_key: Option<String>,
    session_token: Option<String>,
    anonymous: bool,
    /// `fs.s3a.retry.limit` (Hadoop's default 7).
    retry_limit: usize,
    /// `fs.s3a.retry.interval` in ms (Hadoop's default 500 ms).
    retry_interval_ms: u64,
    /// `fs.s3a.multipart.size` (Hadoop's default 64M).
    pub part_size: u64,
    /// `fs.s3a.multipart.threshold` (Hadoop's default 128M).
    pub multipart_threshold: u64,
    /// `fs.s3a.connection.timeout` in ms (Hadoop's default 200 s).
    request_timeout_ms: u64,
}

impl std::fmt::Debug for S3Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Settings")
            .field("endpoint", &self.endpoint)
            .field("path_style", &self.path_style)
            .field("region", &self.region)
            .field("keys", &self.access_key.as_ref().map(|_| "<set>"))
            .field("anonymous", &self.anonymous)
            .finish_non_exhaustive()
    }
}

/// Providers named in `fs.s3a.aws.credentials.provider` that this tier has, by the Java class
/// names (SDK v1 and v2, and Hadoop's own).
fn provider(class: &str) -> Option<Credentials> {
    let simple = class.rsplit('.').next().unwrap_or(class);
    match simple {
        "SimpleAWSCredentialsProvider"
        | "TemporaryAWSCredentialsProvider"
        | "StaticCredentialsProvider" => Some(Credentials::Keys),
        "AnonymousAWSCredentialsProvider" | "AnonymousCredentialsProvider" => {
            Some(Credentials::Anonymous)
        }
        "EnvironmentVariableCredentialsProvider"
        | "WebIdentityTokenCredentialsProvider"
        | "WebIdentityTokenFileCredentialsProvider"
        | "InstanceProfileCredentialsProvider"
        | "IAMInstanceCredentialsProvider"
        | "ContainerCredentialsProvider"
        | "EC2ContainerCredentialsProviderWrapper"
        | "ProfileCredentialsProvider"
        | "DefaultAWSCredentialsProviderChain"
        | "DefaultCredentialsProvider" => Some(Credentials::Chain),
        _ => None,
    }
}

fn parse_size(key: &str, v: &str) -> Result<u64> {
    v.parse::<crate::config::ByteSize>()
        .map(|b| b.as_u64())
        .or_else(|_| v.trim().parse::<u64>())
        .map_err(|_| bad_key(key, &format!("{v:?} is not a size")))
}

/// Hadoop's time values: a number of ms, or with a unit (`500ms`, `30s`, `2m`).
fn parse_ms(key: &str, v: &str) -> Result<u64> {
    let v = v.trim();
    let (num, unit) = v.split_at(v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len()));
    let n: u64 = num
        .parse()
        .map_err(|_| bad_key(key, &format!("{v:?} is not a duration")))?;
    let ms = match unit.trim() {
        "" | "ms" => n,
        "s" => n * 1000,
        "m" => n * 60_000,
        "h" => n * 3_600_000,
        _ => return Err(bad_key(key, &format!("{v:?}: unknown unit"))),
    };
    Ok(ms)
}

fn bad_key(key: &str, why: &str) -> Error {
    Error::TierFailed {
        tier: TIER,
        reason: format!("{key}: {why}"),
    }
}

fn parse_bool(key: &str, v: &str) -> Result<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(bad_key(key, &format!("{v:?} is not true or false"))),
    }
}

impl S3Settings {
    /// The settings from conf items, later items overriding earlier ones (the server's first,
    /// then the app's). Per-bucket keys (`fs.s3a.bucket.<bucket>.<key>`) override the plain
    /// key for that bucket, as in s3a.
    pub fn from_conf(bucket: &str, items: &[(String, String)]) -> Result<S3Settings> {
        let mut s = S3Settings {
            endpoint: None,
            path_style: false,
            ssl: true,
            region: None,
            access_key: None,
            secret_key: None,
            session_token: None,
            anonymous: false,
            retry_limit: 7,
            retry_interval_ms: 500,
            part_size: 64 << 20,
            multipart_threshold: 128 << 20,
            request_timeout_ms: 200_000,
        };
        let per_bucket = format!("fs.s3a.bucket.{bucket}.");
        let mut effective: Vec<(String, &str)> = Vec::new();
        for (k, v) in items {
            if let Some(rest) = k.strip_prefix("fs.s3a.") {
                if !rest.starts_with("bucket.") {
                    effective.push((rest.to_owned(), v.as_str()));
                }
            }
        }
        // Bucket-specific values last, so they win.
        for (k, v) in items {
            if let Some(rest) = k.strip_prefix(&per_bucket) {
                effective.push((rest.to_owned(), v.as_str()));
            }
        }
        let mut providers: Option<String> = None;
        for (k, v) in effective {
            let key = format!("fs.s3a.{k}");
            match k.as_str() {
                "endpoint" => s.endpoint = Some(v.trim().to_owned()).filter(|e| !e.is_empty()),
                "path.style.access" => s.path_style = parse_bool(&key, v)?,
                "connection.ssl.enabled" => s.ssl = parse_bool(&key, v)?,
                "endpoint.region" | "region" => {
                    s.region = Some(v.trim().to_owned()).filter(|r| !r.is_empty())
                }
                "access.key" => s.access_key = Some(v.to_owned()).filter(|x| !x.is_empty()),
                "secret.key" => s.secret_key = Some(v.to_owned()).filter(|x| !x.is_empty()),
                "session.token" => s.session_token = Some(v.to_owned()).filter(|x| !x.is_empty()),
                "aws.credentials.provider" => providers = Some(v.to_owned()),
                "retry.limit" => {
                    s.retry_limit = v
                        .trim()
                        .parse()
                        .map_err(|_| bad_key(&key, &format!("{v:?} is not a count")))?
                }
                "retry.interval" => s.retry_interval_ms = parse_ms(&key, v)?,
                "multipart.size" => s.part_size = parse_size(&key, v)?,
                "multipart.threshold" => s.multipart_threshold = parse_size(&key, v)?,
                "connection.timeout" => s.request_timeout_ms = parse_ms(&key, v)?,
                _ => {}
            }
        }
        // S3's smallest part is 5 MiB (but the last).
        s.part_size = s.part_size.max(5 << 20);
        let creds = match providers
            .as_deref()
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            None if s.access_key.is_some() || s.secret_key.is_some() => Credentials::Keys,
            None => Credentials::Chain,
            Some(list) => {
                // The first provider this tier has, as s3a tries its list in order.
                let mut found = None;
                let mut unknown = Vec::new();
                for class in list.split(',').map(str::trim).filter(|c| !c.is_empty()) {
                    match provider(class) {
                        Some(c) if found.is_none() => found = Some(c),
                        Some(_) => {}
                        None => unknown.push(class),
                    }
                }
                match found {
                    Some(c) => c,
                    None => {
                        return Err(bad_key(
                            "fs.s3a.aws.credentials.provider",
                            &format!(
                                "none of {unknown:?} is a provider Spillway has (simple/temporary keys, anonymous, environment, web identity, container, instance profile, the default chain)"
                            ),
                        ))
                    }
                }
            }
        };
        match creds {
            Credentials::Keys => {
                if s.access_key.is_none() || s.secret_key.is_none() {
                    return Err(bad_key(
                        "fs.s3a.access.key",
                        "static credentials need both fs.s3a.access.key and fs.s3a.secret.key",
                    ));
                }
            }
            Credentials::Anonymous => s.anonymous = true,
            Credentials::Chain => {
                s.access_key = None;
                s.secret_key = None;
                s.session_token = None;
            }
        }
        Ok(s)
    }

    /// The `object_store` builder for `bucket` with these settings. Without keys the builder
    /// starts from the environment, so the AWS default chain applies.
    pub fn builder(&self, bucket: &str) -> Result<AmazonS3Builder> {
        let mut b = if self.access_key.is_some() || self.anonymous {
            AmazonS3Builder::new()
        } else {
            let b = AmazonS3Builder::from_env();
            // The chain's second link, after the environment: `object_store` resolves the
            // environment, web identity, container and instance metadata, not profiles.
            match profile_keys(&|k| std::env::var(k).ok()) {
                Some(keys) => {
                    let b = b
                        .with_access_key_id(keys.access_key)
                        .with_secret_access_key(keys.secret_key);
                    match keys.session_token {
                        Some(t) => b.with_token(t),
                        None => b,
                    }
                }
                None => b,
            }
        };
        b = b.with_bucket_name(bucket);
        let mut http = false;
        if let Some(region) = &self.region {
            b = b.with_region(region);
        } else if self.endpoint.is_none() {
            // s3a's default when nothing names one (it then follows redirects to the bucket's
            // region; object_store needs it set).
            b = b.with_config(AmazonS3ConfigKey::Region, "us-east-1");
        }
        if let Some(endpoint) = &self.endpoint {
            let with_scheme = if endpoint.contains("://") {
                endpoint.clone()
            } else if self.ssl {
                format!("https://{endpoint}")
            } else {
                format!("http://{endpoint}")
            };
            let url = if self.path_style {
                with_scheme
            } else {
                // Virtual-hosted style against a custom endpoint: the bucket is a host name
                // under it, as s3a addresses it.
                let (scheme, host) = with_scheme.split_once("://").unwrap_or(("https", ""));
                format!("{scheme}://{bucket}.{host}")
            };
            http = url.starts_with("http://");
            b = b
                .with_virtual_hosted_style_request(!self.path_style)
                .with_endpoint(url);
        } else {
            b = b.with_virtual_hosted_style_request(!self.path_style);
        }
        if let (Some(key), Some(secret)) = (&self.access_key, &self.secret_key) {
            b = b.with_access_key_id(key).with_secret_access_key(secret);
            if let Some(token) = &self.session_token {
                b = b.with_token(token);
            }
        }
        if self.anonymous {
            b = b.with_skip_signature(true);
        }
        // Over TLS the payload goes unhashed (`UNSIGNED-PAYLOAD`, as the AWS SDKs send over
        // HTTPS): TLS already protects the bytes, and SigV4's SHA-256 of every payload byte
        // was most of the object tier's CPU beyond HDFS's. The headers stay signed. Over plain
        // HTTP the signature is the only protection of the payload, so it stays hashed.
        b = b.with_unsigned_payload(!http);
        let retry = RetryConfig {
            max_retries: self.retry_limit,
            retry_timeout: Duration::from_millis(
                self.retry_interval_ms
                    .saturating_mul(1 << self.retry_limit.min(10)),
            )
            .max(Duration::from_secs(30)),
            backoff: object_store::BackoffConfig {
                init_backoff: Duration::from_millis(self.retry_interval_ms.max(1)),
                max_backoff: Duration::from_secs(15),
                base: 2.0,
            },
        };
        // One `ClientOptions` for everything: setting them replaces the builder's, `allow_http`
        // included.
        Ok(b.with_retry(retry).with_client_options(
            ClientOptions::new()
                .with_timeout(Duration::from_millis(self.request_timeout_ms))
                .with_allow_http(http),
        ))
    }
}

/// Static keys of a profile in the AWS shared credentials file.
struct ProfileKeys {
    access_key: String,
    secret_key: String,
    session_token: Option<String>,
}

/// The profile link of the AWS default chain: the keys of profile `AWS_PROFILE` (else
/// `default`) in `AWS_SHARED_CREDENTIALS_FILE` (else `~/.aws/credentials`), when the
/// environment has no keys of its own (the environment comes first in the chain). Profiles
/// that assume a role or run a process are not read; the chain goes on without them.
fn profile_keys(env: &dyn Fn(&str) -> Option<String>) -> Option<ProfileKeys> {
    if env("AWS_ACCESS_KEY_ID").is_some_and(|k| !k.is_empty()) {
        return None;
    }
    let file = env("AWS_SHARED_CREDENTIALS_FILE")
        .filter(|f| !f.is_empty())
        .or_else(|| env("HOME").map(|h| format!("{h}/.aws/credentials")))?;
    let profile = env("AWS_PROFILE")
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "default".to_owned());
    let text = std::fs::read_to_string(&file).ok()?;
    let mut in_profile = false;
    let (mut access_key, mut secret_key, mut session_token) = (None, None, None);
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || line.starts_with(';') || line.is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            in_profile = name.trim() == profile;
            continue;
        }
        if !in_profile {
            continue;
        }
        if let Some((k, v)) = line.split_once('=') {
            let v = v.trim().to_owned();
            match k.trim() {
                "aws_access_key_id" => access_key = Some(v),
                "aws_secret_access_key" => secret_key = Some(v),
                "aws_session_token" => session_token = Some(v),
                _ => {}
            }
        }
    }
    Some(ProfileKeys {
        access_key: access_key?,
        secret_key: secret_key?,
        session_token,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn parses_object_paths() {
        let r = ObjectRoot::parse("s3a://shuffle-bucket/rss/prod/").unwrap();
        assert_eq!(
            (r.bucket.as_str(), r.root.as_str()),
            ("shuffle-bucket", "rss/prod")
        );
        assert_eq!(r.key("app/0"), "rss/prod/app/0");
        let r = ObjectRoot::parse("s3://b12").unwrap();
        assert_eq!(
            (r.bucket.as_str(), r.root.as_str(), r.key("x").as_str()),
            ("b12", "", "x")
        );
        for bad in [
            "s3a://",
            "s3a://B/x",
            "s3a://b/../x",
            "hdfs://nn/x",
            "s3a://bb/a//b",
            "/rss",
        ] {
            assert!(ObjectRoot::parse(bad).is_err(), "{bad}");
        }
        assert!(is_object_path("s3n://bucket/x") && !is_object_path("hdfs://nn/x"));
    }

    #[test]
    fn s3a_keys_map_with_bucket_overrides_and_hidden_secrets() {
        let s = S3Settings::from_conf(
            "b1",
            &kv(&[
                ("fs.s3a.endpoint", "127.0.0.1:9000"),
                ("fs.s3a.path.style.access", "true"),
                ("fs.s3a.connection.ssl.enabled", "false"),
                ("fs.s3a.access.key", "AK"),
                ("fs.s3a.secret.key", "very-secret"),
                ("fs.s3a.bucket.b1.endpoint.region", "eu-west-1"),
                ("fs.s3a.bucket.other.endpoint.region", "ap-south-1"),
                ("fs.s3a.multipart.size", "8M"),
                ("fs.s3a.retry.interval", "2s"),
            ]),
        )
        .unwrap();
        assert_eq!(s.region.as_deref(), Some("eu-west-1"));
        assert_eq!(s.part_size, 8 << 20);
        assert_eq!(s.retry_interval_ms, 2000);
        assert!(!format!("{s:?}").contains("very-secret"));
        assert!(s.builder("b1").is_ok());
    }

    #[test]
    fn the_chain_reads_a_profile_unless_the_environment_has_keys() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("credentials");
        std::fs::write(
            &file,
            "[default]\naws_access_key_id = AKD\naws_secret_access_key = SKD\n\n# ops\n[ops]\naws_access_key_id=AKO\naws_secret_access_key=SKO\naws_session_token=TO\n",
        )
        .unwrap();
        let path = file.display().to_string();
        let env = |vars: Vec<(&'static str, String)>| {
            move |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone())
        };
        let keys = profile_keys(&env(vec![("AWS_SHARED_CREDENTIALS_FILE", path.clone())])).unwrap();
        assert_eq!(
            (keys.access_key.as_str(), keys.session_token),
            ("AKD", None)
        );
        let keys = profile_keys(&env(vec![
            ("AWS_SHARED_CREDENTIALS_FILE", path.clone()),
            ("AWS_PROFILE", "ops".into()),
        ]))
        .unwrap();
        assert_eq!(
            (keys.access_key.as_str(), keys.secret_key.as_str()),
            ("AKO", "SKO")
        );
        assert_eq!(keys.session_token.as_deref(), Some("TO"));
        assert!(profile_keys(&env(vec![
            ("AWS_SHARED_CREDENTIALS_FILE", path.clone()),
            ("AWS_ACCESS_KEY_ID", "FROMENV".into()),
        ]))
        .is_none());
        assert!(profile_keys(&env(vec![
            ("AWS_SHARED_CREDENTIALS_FILE", path),
            ("AWS_PROFILE", "missing".into()),
        ]))
        .is_none());
    }

    #[test]
    fn providers_pick_the_credentials_or_name_the_key() {
        let chain = S3Settings::from_conf("b1", &[]).unwrap();
        assert!(chain.access_key.is_none() && !chain.anonymous);
        let anon = S3Settings::from_conf(
            "b1",
            &kv(&[(
                "fs.s3a.aws.credentials.provider",
                "org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider",
            )]),
        )
        .unwrap();
        assert!(anon.anonymous);
        let e = S3Settings::from_conf(
            "b1",
            &kv(&[("fs.s3a.aws.credentials.provider", "com.example.Vault")]),
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("fs.s3a.aws.credentials.provider"),
            "{e}"
        );
        let e = S3Settings::from_conf("b1", &kv(&[("fs.s3a.access.key", "AK")])).unwrap_err();
        assert!(e.to_string().contains("fs.s3a.secret.key"), "{e}");
        let e =
            S3Settings::from_conf("b1", &kv(&[("fs.s3a.path.style.access", "yes")])).unwrap_err();
        assert!(e.to_string().contains("fs.s3a.path.style.access"), "{e}");
    }
}
