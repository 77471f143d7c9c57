//! A request a rate-limiter rule queued: it waits for its slot on a tokio timer, then starts
//! and reaches the service.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use sentinel_core::{Entry, Queued};
use tokio::time::{Instant, Sleep};
use tower::Service;

/// A request that a rate-limiter rule gave a slot later ([`Admission::Queued`](sentinel_core::Admission::Queued)),
/// with the ready service that serves it then: what the layer's response future holds while
/// the request waits, for adapters built on this crate (sentinel-tonic).
///
/// Poll [`poll_wait`](Self::poll_wait) until it is ready, inside a tokio runtime with its
/// time driver, then [`start`](Self::start) the request. Dropped before, the request never
/// started and counts nothing; the service never sees it.
pub struct QueuedRequest<S, R> {
    service: S,
    request: R,
    queued: Queued<'static>,
    deadline: Instant,
    sleep: Option<Pin<Box<Sleep>>>,
}

impl<S, R> QueuedRequest<S, R> {
    /// `request`, to be served by the ready `service` once `queued`'s wait is over (counted
    /// from now).
    pub fn new(service: S, request: R, queued: Queued<'static>) -> Self {
        // The timer is armed on the first poll, inside the runtime.
        let deadline = Instant::now() + queued.wait();
        Self {
            service,
            request,
            queued,
            deadline,
            sleep: None,
        }
    }

    /// Ready when the slot's time has come.
    pub fn poll_wait(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let deadline = self.deadline;
        self.sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)))
            .as_mut()
            .poll(cx)
    }

    /// The wait is over: the request starts (it is counted now) and reaches the service.
    /// `guard` takes the live entry first, so that a panic in the service's `call` finds it
    /// held by the guard.
    pub fn start<G>(self, guard: impl FnOnce(Entry<'static>) -> G) -> (G, S::Future)
    where
        S: Service<R>,
    {
        let Self {
            mut service,
            request,
            queued,
            ..
        } = self;
        let guard = guard(queued.start());
        (guard, service.call(request))
    }
}

impl<S, R> fmt::Debug for QueuedRequest<S, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueuedRequest")
            .field("queued", &self.queued)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}
