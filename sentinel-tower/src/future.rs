//! The response future: enters the request, calls the inner service, and exits the entry
//! with the outcome.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use sentinel_core::Entry;
use tower::Service;

use crate::block::BlockHandler;
use crate::resource::ExtractResource;
use crate::service::Config;

/// The response future of a [`SentinelService`](crate::SentinelService).
///
/// It holds the request's entry from its first poll until the response is ready; dropped
/// before that, it exits the entry as an error (the client went away).
pub struct ResponseFuture<T, E> {
    // One allocation per request: the entry borrows the resource name, which borrows the
    // request, across the rate limiter's wait.
    inner: Pin<Box<dyn Future<Output = Result<T, E>> + Send>>,
}

impl<T, E> ResponseFuture<T, E> {
    pub(crate) fn new(inner: Pin<Box<dyn Future<Output = Result<T, E>> + Send>>) -> Self {
        Self { inner }
    }
}

impl<T, E> Future for ResponseFuture<T, E> {
    type Output = Result<T, E>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.inner.as_mut().poll(cx)
    }
}

impl<T, E> fmt::Debug for ResponseFuture<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

/// Enters `request`, then calls `inner` with it and exits with the outcome.
pub(crate) async fn guarded<S, K, H, ReqBody, ResBody>(
    config: Arc<Config<K, H>>,
    mut inner: S,
    request: Request<ReqBody>,
) -> Result<Response<ResBody>, H::Error>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    K: ExtractResource<ReqBody>,
    H: BlockHandler<Response<ResBody>, S::Error>,
{
    let entered = {
        let resource = config.resource_key.resource(&request);
        let origin = config.origin(&request);
        config
            .sentinel
            .entry(&resource)
            .origin(origin)
            .inbound()
            .enter_async()
            .await
            .map(Entry::into_owned)
    };
    let entry = match entered {
        Ok(entry) => entry,
        Err(blocked) => {
            tracing::debug!(
                resource = blocked.resource(),
                family = %blocked.family(),
                "request blocked"
            );
            return config.block_handler.blocked(blocked);
        }
    };
    let mut in_flight = InFlight(Some(entry));
    let result = inner.call(request).await;
    let failed = match &result {
        Ok(response) => (config.error_if)(response.status()),
        Err(_) => true,
    };
    in_flight.exit(failed);
    result.map_err(H::inner_error)
}

/// An entry whose request is being served. Dropped before [`exit`](Self::exit) (the
/// response future was dropped, or the inner service panicked), it exits as an error, as
/// sentinel-core's `EntryBuilder::run` does.
struct InFlight(Option<Entry<'static>>);

impl InFlight {
    #[inline]
    fn exit(&mut self, failed: bool) {
        if let Some(mut entry) = self.0.take() {
            if failed {
                entry.set_error();
            }
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(entry) = self.0.as_mut() {
            entry.set_error();
        }
    }
}
