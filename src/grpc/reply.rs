//! `reply`: turns a handler's `Result` into a Uniffle response with `status` and `retMsg`,
//! logging each failure once at a level that fits what the client should do about it.

use tonic::Response;

use crate::error::{Error, Result};
use crate::proto::{self, StatusCode};

/// A response message with Uniffle's `status` / `retMsg` pair.
pub trait Reply: Default {
    /// Sets status and message.
    fn set_status(&mut self, status: StatusCode, message: String);

    /// The `status` field (for the audit line).
    fn status(&self) -> i32;
}

macro_rules! impl_reply {
    ($($t:ident),* $(,)?) => {
        $(impl Reply for proto::$t {
            fn set_status(&mut self, status: StatusCode, message: String) {
                self.status = status as i32;
                self.ret_msg = message;
            }

            fn status(&self) -> i32 {
                self.status
            }
        })*
    };
}

impl_reply!(
    ShuffleRegisterResponse,
    ShuffleUnregisterResponse,
    ShuffleUnregisterByAppIdResponse,
    SendShuffleDataResponse,
    GetLocalShuffleIndexResponse,
    GetLocalShuffleDataResponse,
    GetMemoryShuffleDataResponse,
    ShuffleCommitResponse,
    ReportShuffleResultResponse,
    GetShuffleResultResponse,
    GetShuffleResultForMultiPartResponse,
    FinishShuffleResponse,
    RequireBufferResponse,
    AppHeartBeatResponse,
    StartSortMergeResponse,
    GetSortedShuffleDataResponse,
    DecommissionResponse,
    CancelDecommissionResponse,
);

/// Builds the response: `SUCCESS`/"OK", or the error's status code and message. Never a gRPC
/// error: clients only understand status codes.
pub fn reply<R: Reply>(
    method: &'static str,
    app_id: &str,
    result: Result<R>,
) -> std::result::Result<Response<R>, tonic::Status> {
    let body = match result {
        Ok(mut body) => {
            body.set_status(StatusCode::Success, "OK".into());
            body
        }
        Err(e) => {
            log(method, app_id, &e);
            let mut body = R::default();
            body.set_status(e.status(), e.to_string());
            body
        }
    };
    Ok(Response::new(body))
}

pub(crate) fn log(method: &'static str, app_id: &str, e: &Error) {
    let status = e.status().as_str_name();
    match e {
        // Back-pressure is the normal state of a busy server.
        Error::NoBuffer { .. } | Error::NoBufferForHugePartition { .. } => {
            tracing::debug!(method, app_id, status, error = %e, "request refused")
        }
        // Logged once per app when the store refused it (`store::refusal`); every request it
        // fails after that would repeat the same line.
        Error::StorageRefused { .. } | Error::Misconfigured { .. } => {
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
