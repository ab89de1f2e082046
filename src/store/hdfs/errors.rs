//! HDFS failures as the tier answers them: hdfs-native's error kept typed, with what was done
//! and to which path, until the tier's answer is made from it: [`Error::StorageRefused`] for
//! an answer no retry changes, the retryable [`Error::TierFailed`] for the rest.

use hdfs_native::HdfsError;

use super::client::TIER;
use crate::error::Error;

/// A failed HDFS call.
pub(super) struct Failure {
    /// The call (`create`, `hsync`, …).
    pub what: &'static str,
    /// The path it was made on.
    pub path: String,
    /// hdfs-native's error.
    pub error: HdfsError,
}

impl Failure {
    pub fn new(what: &'static str, path: &str, error: HdfsError) -> Self {
        Failure {
            what,
            path: path.to_owned(),
            error,
        }
    }

    /// The NameNode closed the connection under the call (hdfs-native reports an aborted
    /// connection): how it answers a proxy user it does not let impersonate, among other
    /// things, so the tier asks why before it answers.
    pub fn connection_dropped(&self) -> bool {
        matches!(&self.error, HdfsError::IOError(io)
            if io.kind() == std::io::ErrorKind::ConnectionAborted)
    }

    /// The tier's answer: an answer no retry changes (see [`final_answer`]) is an
    /// [`Error::StorageRefused`] (the caller that knows the app's registered path puts it in);
    /// anything else is the retryable `TierFailed`.
    pub fn into_error(self) -> Error {
        let Failure { what, path, error } = self;
        match final_answer(&error) {
            Some((answer, fix)) => Error::StorageRefused {
                answer: format!("{what} {path}: {answer}"),
                path,
                fix,
            },
            None => Error::TierFailed {
                tier: TIER,
                reason: format!("{what} {path}: {error}"),
            },
        }
    }
}

/// The NameNode's answer and the setting to correct when `e` will not pass by retrying:
/// permissions, impersonation refused, a path that cannot be a directory, a host or
/// nameservice that does not resolve. Safe mode, connection failures, timeouts and
/// DataNode trouble pass, and stay retried.
fn final_answer(e: &HdfsError) -> Option<(String, String)> {
    match e {
        HdfsError::RPCError(class, msg) | HdfsError::FatalRPCError(class, msg) => {
            let short = class.rsplit('.').next().unwrap_or(class);
            let fix = match short {
                "AccessControlException" => {
                    "grant the HDFS user the server writes as (the app's user when it \
                     impersonates, else its own) write access to the remote storage path, or \
                     register a path it may write"
                }
                "AuthorizationException" => {
                    "let the server's principal impersonate the app's user \
                     (hadoop.proxyuser.<server user>.hosts/.groups on the NameNode)"
                }
                "ParentNotDirectoryException" | "InvalidPathException" => {
                    "correct the remote storage path (spark.rss.remote.storage.path or the \
                     coordinator's rss.coordinator.remote.storage.path)"
                }
                _ => return None,
            };
            let first_line = msg.lines().next().unwrap_or(msg);
            Some((format!("{short}: {first_line}"), fix.to_owned()))
        }
        // EAI_NONAME only: "Temporary failure in name resolution" is a DNS outage, which
        // passes.
        HdfsError::IOError(io)
            if io.to_string().contains("failed to lookup address")
                && io.to_string().contains("not known") =>
        {
            Some((
                format!("the NameNode's host does not resolve ({io})"),
                "name a host that resolves, or define the nameservice (dfs.nameservices, \
             dfs.ha.namenodes.<ns>, dfs.namenode.rpc-address.<ns>.<nn>) in hdfs-site.xml \
             under HADOOP_CONF_DIR or in the app's remote storage conf"
                    .to_owned(),
            ))
        }
        HdfsError::InvalidPath(_) | HdfsError::UrlParseError(_) => {
            Some((e.to_string(), "correct the remote storage path".to_owned()))
        }
        _ => None,
    }
}
