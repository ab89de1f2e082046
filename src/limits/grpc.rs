//! The gRPC plane's limits, applied below tonic: [`TrackedConn`] puts every accepted socket
//! in the plane's [`ConnectionTable`] (reporting traffic, closing on the table's word), and
//! [`RequestLimitLayer`] marks requests in flight on their connection, charges request bytes
//! to the receive budget as they arrive and fails a request whose body stalls.
//!
//! Why the budget fails fast here while the Netty plane waits for it: HTTP/2 multiplexes
//! requests over one flow-control window, so a request parked for budget would keep its
//! already-buffered bytes in that window and could stop a request on the same connection that
//! holds budget from receiving the rest of its body. Released clients send only what
//! `requireBuffer` reserved, so the gRPC budget is sized above the write capacity and a client
//! that keeps to the protocol never meets it (see `server.rs`).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};
use http_body_util::BodyExt;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::WaitForCancellationFutureOwned;
use tonic::body::Body;
use tonic::transport::server::{Connected, TcpConnectInfo};

use super::connections::{Lease, Slot};
use super::hits::LimitMetrics;

/// An admitted gRPC connection: reports traffic to its slot and reads as closed once the table
/// closes it (hyper then drops the connection).
pub struct TrackedConn<T> {
    inner: T,
    lease: Lease,
    closing: Pin<Box<WaitForCancellationFutureOwned>>,
}

impl<T> TrackedConn<T> {
    /// Wraps `inner`, admitted under `lease`.
    pub fn new(inner: T, lease: Lease) -> Self {
        let closing = Box::pin(lease.slot().closing().clone().cancelled_owned());
        TrackedConn {
            inner,
            lease,
            closing,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for TrackedConn<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if this.closing.as_mut().poll(cx).is_ready() {
            // End of stream: hyper closes the connection.
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        let out = Pin::new(&mut this.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.lease.slot().touch();
        }
        out
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for TrackedConn<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        touched_by(&this.lease, Pin::new(&mut this.inner).poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        touched_by(
            &this.lease,
            Pin::new(&mut this.inner).poll_write_vectored(cx, bufs),
        )
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// `out`, a write's result, having reported to `lease`'s slot a write that moved bytes (the
/// slot's idle clock counts traffic both ways).
fn touched_by(lease: &Lease, out: Poll<std::io::Result<usize>>) -> Poll<std::io::Result<usize>> {
    if matches!(out, Poll::Ready(Ok(n)) if n > 0) {
        lease.slot().touch();
    }
    out
}

/// What tonic puts in each request's extensions for a [`TrackedConn`]; the layer turns it back
/// into the usual [`TcpConnectInfo`] (so `Request::remote_addr` keeps working).
#[derive(Clone)]
pub struct TrackedInfo {
    tcp: TcpConnectInfo,
    slot: Arc<Slot>,
}

impl<T: Connected<ConnectInfo = TcpConnectInfo>> Connected for TrackedConn<T> {
    type ConnectInfo = TrackedInfo;

    fn connect_info(&self) -> TrackedInfo {
        TrackedInfo {
            tcp: self.inner.connect_info(),
            slot: Arc::clone(self.lease.slot()),
        }
    }
}

/// The shared state of [`RequestLimitLayer`].
struct Limits {
    budget: Arc<Semaphore>,
    budget_size: usize,
    stall_timeout: Duration,
    metrics: Arc<LimitMetrics>,
}

/// The tower layer applying the per-request limits (see the module doc).
#[derive(Clone)]
pub struct RequestLimitLayer(Arc<Limits>);

impl RequestLimitLayer {
    /// Requests may hold `budget` bytes in total and pause `stall_timeout` at most.
    pub fn new(budget: usize, stall_timeout: Duration, metrics: Arc<LimitMetrics>) -> Self {
        RequestLimitLayer(Arc::new(Limits {
            budget: Arc::new(Semaphore::new(budget)),
            budget_size: budget,
            stall_timeout,
            metrics,
        }))
    }

    /// Bytes of request bodies held now (tests, `/status`).
    pub fn held(&self) -> usize {
        self.0.budget_size - self.0.budget.available_permits()
    }
}

impl<S> tower_layer::Layer<S> for RequestLimitLayer {
    type Service = RequestLimitService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequestLimitService {
            inner,
            limits: Arc::clone(&self.0),
        }
    }
}

/// See [`RequestLimitLayer`].
#[derive(Clone)]
pub struct RequestLimitService<S> {
    inner: S,
    limits: Arc<Limits>,
}

type Held = Arc<Mutex<Option<OwnedSemaphorePermit>>>;

impl<S> tower_service::Service<http::Request<Body>> for RequestLimitService<S>
where
    S: tower_service::Service<http::Request<Body>, Response = http::Response<Body>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let (mut parts, body) = req.into_parts();
        let info = parts.extensions.remove::<TrackedInfo>();
        let peer = info.as_ref().and_then(|i| i.tcp.remote_addr);
        let busy = info.as_ref().map(|i| i.slot.busy());
        if let Some(info) = &info {
            parts.extensions.insert(info.tcp.clone());
        }
        // The budget is held until the handler has answered (by then the bytes belong to the
        // registry's accounting or are dropped) and the body is gone.
        let held: Held = Arc::new(Mutex::new(None));
        let body = Body::new(LimitedBody {
            inner: body,
            limits: Arc::clone(&self.limits),
            held: Arc::clone(&held),
            stall: None,
            peer,
            path: parts.uri.path().to_owned(),
            failed: false,
        });
        let fut = self.inner.call(http::Request::from_parts(parts, body));
        Box::pin(async move {
            let out = fut.await;
            drop(held);
            // The response body keeps the connection marked busy until it is sent, so an idle
            // sweep never cuts a response short; a reader that stops reading is cut off by the
            // stall rule instead.
            out.map(|resp| {
                let (parts, body) = resp.into_parts();
                let sending = info.map(|i| i.slot.sending());
                // The guards ride in the frame closure: they drop with the body.
                let guards = (busy, sending);
                let body = body.map_frame(move |frame| {
                    let _held = &guards;
                    frame
                });
                http::Response::from_parts(parts, Body::new(body))
            })
        })
    }
}

/// A request body charged to the receive budget frame by frame, failing when the budget is
/// exhausted or the peer pauses longer than the stall timeout.
struct LimitedBody {
    inner: Body,
    limits: Arc<Limits>,
    held: Held,
    stall: Option<Pin<Box<tokio::time::Sleep>>>,
    peer: Option<SocketAddr>,
    path: String,
    failed: bool,
}

impl LimitedBody {
    fn fail(&mut self, limit: &'static str, message: String) -> tonic::Status {
        self.failed = true;
        self.limits.metrics.count("grpc", limit, "refused");
        tracing::warn!(peer = ?self.peer, path = %self.path, limit, "{message}");
        tonic::Status::resource_exhausted(format!("limits.{limit}: {message}"))
    }
}

impl HttpBody for LimitedBody {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, tonic::Status>>> {
        let this = self.get_mut();
        if this.failed {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                this.stall = None;
                if let Some(data) = frame.data_ref() {
                    let n = data.len();
                    let permit = u32::try_from(n).ok().and_then(|n| {
                        Arc::clone(&this.limits.budget)
                            .try_acquire_many_owned(n)
                            .ok()
                    });
                    let Some(permit) = permit else {
                        let message = format!(
                            "receive budget exhausted: {} of {} bytes of requests are being received",
                            this.limits.budget_size - this.limits.budget.available_permits(),
                            this.limits.budget_size
                        );
                        return Poll::Ready(Some(Err(this.fail("receive_budget", message))));
                    };
                    let mut held = this.held.lock().unwrap_or_else(|p| p.into_inner());
                    match held.as_mut() {
                        Some(h) => h.merge(permit),
                        None => *held = Some(permit),
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Pending => {
                let timeout = this.limits.stall_timeout;
                let stall = this
                    .stall
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
                if stall.as_mut().poll(cx).is_ready() {
                    let message =
                        format!("request body stalled for {timeout:?}; the request is dropped");
                    return Poll::Ready(Some(Err(this.fail("stall_timeout", message))));
                }
                Poll::Pending
            }
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
