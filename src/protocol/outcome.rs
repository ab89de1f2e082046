//! How a handler's result becomes Uniffle's `status` and `retMsg`, for both planes: the
//! status code comes from the one error type, and each failure is logged once at a level
//! that fits what the client should do about it.

use crate::error::{Error, Result};
use crate::proto::StatusCode;

/// The `status` and `retMsg` of `result`: `SUCCESS`/"OK", or the error's status code and
/// message (logged here). Never a transport error: clients only understand status codes.
pub fn outcome<T>(method: &'static str, app_id: &str, result: &Result<T>) -> (StatusCode, String) {
    match result {
        Ok(_) => (StatusCode::Success, "OK".to_owned()),
        Err(e) => {
            log(method, app_id, e);
            (e.status(), e.to_string())
        }
    }
}

fn log(method: &'static str, app_id: &str, e: &Error) {
    let status = e.status().as_str_name();
    match e {
        // Back-pressure is the normal state of a busy server.
        Error::NoBuffer { .. }
        | Error::NoBufferForHugePartition { .. }
        // Logged once per app when the store refused it (`store::admission`) or it reached its
        // quota (`store::quota`); every request it fails after that would repeat the same line.
        | Error::StorageRefused { .. }
        | Error::Misconfigured { .. }
        | Error::QuotaExceeded { .. } => {
            tracing::debug!(method, app_id, status, error = %e, "request refused")
        }
        Error::AppNotFound { .. }
        | Error::AppStateMissing { .. }
        | Error::NotRegistered { .. }
        | Error::TicketNotFound { .. }
        | Error::NotSupported { .. } => {
            tracing::info!(method, app_id, status, error = %e, "request refused")
        }
        Error::BadRequest { .. }
        | Error::LimitExceeded { .. }
        | Error::InvalidState { .. }
        | Error::HugePartitionHardLimit { .. }
        | Error::Internal { .. } => {
            tracing::warn!(method, app_id, status, error = %e, "request failed")
        }
        Error::Io { .. } | Error::TierFailed { .. } | Error::Startup(_) => {
            tracing::error!(method, app_id, status, error = %e, "request failed")
        }
    }
}
