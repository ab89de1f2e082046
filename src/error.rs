//! The crate's one error type, and the only place that knows Uniffle status codes.

use crate::ids::PartitionKey;
use crate::proto::StatusCode;

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while serving a request or running a side task.
///
/// Variants are named for what the client should do about them; each carries the context an
/// operator needs in the log line. [`Error::status`] maps every variant to the Uniffle status
/// code the Java server would send in the same situation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The app has no state here, or it expired: the client gives up on this server.
    #[error("app {app_id} is not registered (or expired) on this server")]
    AppNotFound {
        /// The app id the client sent.
        app_id: String,
    },
    /// `sendShuffleData` for an app with no state at all (0.10 `APP_NOT_FOUND`).
    #[error("app {app_id} has no state on this server")]
    AppStateMissing {
        /// The app id the client sent.
        app_id: String,
    },
    /// A partition or shuffle that was never registered (or was unregistered) here.
    #[error("{what} is not registered for app {app_id} shuffle {shuffle_id}")]
    NotRegistered {
        /// The app id.
        app_id: String,
        /// The shuffle id.
        shuffle_id: i32,
        /// What was missing, e.g. "partition 7".
        what: String,
    },
    /// Not enough write (or read) memory right now: the client backs off and retries.
    #[error("no buffer: {reason}")]
    NoBuffer {
        /// Why, with the numbers.
        reason: String,
    },
    /// A huge partition holds too much memory; the client backs off until it is spilled.
    #[error("no buffer for huge partition {partition}: {reason}")]
    NoBufferForHugePartition {
        /// The partition that is huge.
        partition: PartitionKey,
        /// Why, with the numbers.
        reason: String,
    },
    /// The partition would exceed the configured hard limit; the client must not retry.
    #[error("partition {partition} would exceed the huge-partition hard limit: {reason}")]
    HugePartitionHardLimit {
        /// The partition.
        partition: PartitionKey,
        /// Why, with the numbers.
        reason: String,
    },
    /// The `requireBufferId` is unknown, already used or expired: the client re-requires.
    #[error("can't find requireBufferId[{ticket_id}] for app {app_id} (unknown, used, or expired after rss.server.preAllocation.expired)")]
    TicketNotFound {
        /// The ticket id the client sent.
        ticket_id: i64,
        /// The app id the client sent.
        app_id: String,
    },
    /// The request is malformed: bad ids, lengths, ranges. The client's bug; not retryable.
    #[error("invalid request: {reason}")]
    BadRequest {
        /// What is wrong, naming the field.
        reason: String,
    },
    /// The request exceeds one of `[limits]` (counts, string lengths, response size). Not
    /// retryable as is; the limit's config key is in the message.
    #[error("request exceeds limits.{limit}: {reason}")]
    LimitExceeded {
        /// The `[limits]` key.
        limit: &'static str,
        /// The numbers.
        reason: String,
    },
    /// The request is well-formed but cannot be served in the server's current state.
    #[error("invalid state: {reason}")]
    InvalidState {
        /// What state blocks it.
        reason: String,
    },
    /// A feature this server does not offer (remote merge).
    #[error("not supported: {what}")]
    NotSupported {
        /// The feature.
        what: &'static str,
    },
    /// A request-level failure the client may retry (e.g. "No data in request").
    #[error("{reason}")]
    Internal {
        /// What happened.
        reason: String,
    },
    /// Local file I/O failed.
    #[error("i/o error on {path}: {source}")]
    Io {
        /// The file or directory.
        path: std::path::PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A storage tier cannot take writes (unhealthy or full disks, too few healthy disks).
    #[error("storage tier {tier} failed: {reason}")]
    TierFailed {
        /// Which tier.
        tier: &'static str,
        /// Why.
        reason: String,
    },
    /// The app's remote storage refused the server for a reason no retry changes (a wrong
    /// key, a missing bucket, a path the server's user may not write, a name service that
    /// does not resolve). Final: a store that answers this way will answer so to every retry,
    /// so the app fails at once with the cause instead of waiting in back-pressure.
    #[error("remote storage {path} refused the shuffle server: {answer}. Fix: {fix}")]
    StorageRefused {
        /// The path the app registered (no secret is ever part of it).
        path: String,
        /// The store's answer (its error code and message, never a credential).
        answer: String,
        /// The setting to correct, named by its key.
        fix: String,
    },
    /// The app's settings and the server's cannot work together, whatever is retried (a
    /// remote-only store type and no remote path). Logged once per app where it is found.
    #[error("{reason}")]
    Misconfigured {
        /// What does not fit, naming the setting to change.
        reason: String,
    },
    /// The app, or its user, holds its quota on this server's file tiers (`[quota]`). Final:
    /// the released clients fail the task at once with the reason, which names the app, the
    /// quota, the usage and the key to raise. Logged once per app and quota where it is found.
    #[error("{reason}")]
    QuotaExceeded {
        /// Who is over which quota, by how much, and the key to raise.
        reason: String,
    },
    /// Server start-up or shutdown failure (bind, config); never sent to a client.
    #[error("{0}")]
    Startup(String),
}

/// An id a request names that no server would accept is the client's mistake.
impl From<crate::ids::IdError> for Error {
    fn from(e: crate::ids::IdError) -> Self {
        Error::BadRequest { reason: e.0 }
    }
}

impl Error {
    /// The Uniffle status code a client expects for this error.
    pub fn status(&self) -> StatusCode {
        match self {
            Error::AppNotFound { .. } => StatusCode::NoRegister,
            Error::AppStateMissing { .. } => StatusCode::AppNotFound,
            Error::NotRegistered { .. } => StatusCode::NoRegister,
            Error::NoBuffer { .. } => StatusCode::NoBuffer,
            Error::NoBufferForHugePartition { .. } => StatusCode::NoBufferForHugePartition,
            Error::HugePartitionHardLimit { .. } => StatusCode::ExceedHugePartitionHardLimit,
            Error::TicketNotFound { .. } => StatusCode::InternalError,
            Error::BadRequest { .. } => StatusCode::InvalidRequest,
            Error::LimitExceeded { .. } => StatusCode::InvalidRequest,
            Error::InvalidState { .. } => StatusCode::InvalidRequest,
            Error::NotSupported { .. } => StatusCode::InternalError,
            Error::Internal { .. } => StatusCode::InternalError,
            Error::Io { .. } => StatusCode::InternalError,
            Error::TierFailed { .. } => StatusCode::InternalError,
            // The one code every released client treats as final on requireBuffer and
            // sendShuffleData (0.9 knows no other; INTERNAL_NOT_RETRY_ERROR is 0.10-only).
            Error::StorageRefused { .. } => StatusCode::NoRegister,
            Error::Misconfigured { .. } => StatusCode::InvalidRequest,
            // The same final code as a storage refusal, for the same reason.
            Error::QuotaExceeded { .. } => StatusCode::NoRegister,
            Error::Startup(_) => StatusCode::InternalError,
        }
    }

    /// True when the same operation may succeed later without any change by the caller
    /// (back-pressure and transient storage failures); the spiller retries only these.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::NoBuffer { .. }
                | Error::NoBufferForHugePartition { .. }
                | Error::Io { .. }
                | Error::TierFailed { .. }
        )
    }

    /// Shorthand for [`Error::BadRequest`].
    pub fn bad_request(reason: impl Into<String>) -> Self {
        Error::BadRequest {
            reason: reason.into(),
        }
    }

    /// Shorthand for [`Error::Io`].
    pub fn io(path: impl Into<std::path::PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}
