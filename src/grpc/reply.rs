//! `reply`: turns a handler's `Result` into a gRPC response message carrying Uniffle's
//! `status` and `retMsg` (see `protocol::outcome`).

use tonic::Response;

use crate::error::Result;
use crate::proto::{self, StatusCode};
use crate::protocol::outcome::outcome;

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

/// Builds the response with the status and message of [`outcome`]. Never a gRPC error:
/// clients only understand status codes.
pub fn reply<R: Reply>(
    method: &'static str,
    app_id: &str,
    result: Result<R>,
) -> std::result::Result<Response<R>, tonic::Status> {
    let (status, message) = outcome(method, app_id, &result);
    let mut body = result.unwrap_or_default();
    body.set_status(status, message);
    Ok(Response::new(body))
}
