//! A call's entry lives until its response body ends: the body that holds it, and the guard
//! that exits it with the call's gRPC status.

use std::pin::Pin;
use std::task::{ready, Context, Poll};

use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use sentinel_core::Entry;
use sentinel_tower::InFlight;
use tonic::Code;

use crate::status::{grpc_status, ErrorCodes};

/// A call in flight: its entry, and which codes count as errors when it ends.
///
/// Dropped before [`finish`](Self::finish) (the response future or body was dropped: the
/// client cancelled the call, or went away), the call ends as `CANCELLED`, an error only if
/// the set says so; dropped by a panic, it is an error.
pub(crate) struct CallGuard {
    call: InFlight<'static>,
    codes: ErrorCodes,
}

impl CallGuard {
    #[inline]
    pub(crate) fn new(entry: Entry<'static>, codes: ErrorCodes) -> Self {
        Self {
            call: InFlight::new(entry),
            codes,
        }
    }

    /// Exits the entry with the call's status `code`.
    #[inline]
    pub(crate) fn finish_with(&mut self, code: Code) {
        let failed = self.codes.contains(code);
        self.finish(failed);
    }

    /// Exits the entry, as an error if `failed`.
    #[inline]
    pub(crate) fn finish(&mut self, failed: bool) {
        self.call.exit(failed);
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        if !self.call.is_exited() {
            if std::thread::panicking() {
                // The inner service panicked: an error whatever the set says.
                self.finish(true);
            } else {
                self.finish_with(Code::Cancelled);
            }
        }
    }
}

pin_project! {
    /// The response body of a guarded call: the inner service's body, holding the call's
    /// entry until the trailers carrying the call's `grpc-status` pass (or the body ends or
    /// fails), so that a stream is one entry for its whole life: it counts as in flight for
    /// concurrency rules until then, and its response time is the stream's. Dropped before
    /// its end (the client cancelled), the call ends as `CANCELLED`.
    ///
    /// A call whose status came in the response head (a unary error, a block answer) has
    /// already exited: its body holds no entry.
    pub struct GuardedBody<B> {
        #[pin]
        inner: Option<B>,
        call: Option<CallGuard>,
    }
}

impl<B> GuardedBody<B> {
    /// `body`, holding `call` until it ends.
    #[inline]
    pub(crate) fn new(body: B, call: Option<CallGuard>) -> Self {
        Self {
            inner: Some(body),
            call,
        }
    }

    /// An empty body: the answer to a blocked call.
    pub(crate) fn empty() -> Self {
        Self {
            inner: None,
            call: None,
        }
    }
}

impl<B: Body> Body for GuardedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        let Some(inner) = this.inner.as_pin_mut() else {
            return Poll::Ready(None);
        };
        let frame = ready!(inner.poll_frame(cx));
        if let Some(call) = this.call {
            match &frame {
                Some(Ok(frame)) => {
                    if let Some(trailers) = frame.trailers_ref() {
                        // A response without a status is a protocol error.
                        call.finish_with(grpc_status(trailers).unwrap_or(Code::Internal));
                    }
                }
                Some(Err(_)) => call.finish(true),
                // The body ended without trailers: no status, a protocol error.
                None => call.finish_with(Code::Internal),
            }
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        // While the entry is held, the end must be polled to be seen.
        let held = self
            .call
            .as_ref()
            .is_some_and(|call| !call.call.is_exited());
        !held && self.inner.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.inner
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Body::size_hint)
    }
}

impl<B> std::fmt::Debug for GuardedBody<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardedBody")
            .field(
                "in_flight",
                &self
                    .call
                    .as_ref()
                    .is_some_and(|call| !call.call.is_exited()),
            )
            .finish_non_exhaustive()
    }
}
