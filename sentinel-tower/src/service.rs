//! The service: enters each request before the inner service sees it, and keeps the entry
//! until the response is ready.

use std::fmt;
use std::mem;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{HeaderName, Request, Response};
use sentinel_core::{Admission, Sentinel};
use tower::Service;

use crate::block::{BlockAnswer, BlockAsError, BlockHandler};
use crate::error_if::ErrorIf;
use crate::future::ResponseFuture;
use crate::in_flight::InFlight;
use crate::param::{try_enter_request, ParamSource};
use crate::resource::{ExtractResource, ResourceKey};

/// What a layer's services share: the engine and how requests are entered.
#[derive(Clone)]
pub(crate) struct Config<K, H> {
    pub(crate) sentinel: Sentinel,
    pub(crate) resource_key: K,
    pub(crate) block_handler: H,
    pub(crate) origin_header: Option<HeaderName>,
    pub(crate) error_if: ErrorIf,
    /// Where each param-flow argument comes from (at most `MAX_ARGS`).
    pub(crate) args: Vec<ParamSource>,
}

impl<K, H> Config<K, H> {
    /// The same configuration with another resource key or block handler.
    pub(crate) fn rebuild<K2, H2>(self, replace: impl FnOnce(K, H) -> (K2, H2)) -> Config<K2, H2> {
        let (resource_key, block_handler) = replace(self.resource_key, self.block_handler);
        Config {
            sentinel: self.sentinel,
            resource_key,
            block_handler,
            origin_header: self.origin_header,
            error_if: self.error_if,
            args: self.args,
        }
    }

    /// The caller's name from the origin header; empty (no origin) without one.
    pub(crate) fn origin<'r, B>(&self, request: &'r Request<B>) -> &'r str {
        self.origin_header
            .as_ref()
            .and_then(|name| request.headers().get(name))
            .and_then(|value| value.to_str().ok())
            .unwrap_or("")
    }
}

impl<K: fmt::Debug, H: fmt::Debug> fmt::Debug for Config<K, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("sentinel", &self.sentinel)
            .field("resource_key", &self.resource_key)
            .field("block_handler", &self.block_handler)
            .field("origin_header", &self.origin_header)
            .finish_non_exhaustive()
    }
}

/// A service guarded by Sentinel; made by [`SentinelLayer`](crate::SentinelLayer).
///
/// Each request enters its resource (inbound, with its origin) when the service is called;
/// every rule is checked then, without waiting:
/// - blocked, it never reaches the inner service, and the block handler answers it (by
///   default an error, [`SentinelError::Blocked`](crate::SentinelError::Blocked));
/// - held by a rate-limiter rule, it waits in its response future on a tokio timer, so the
///   future must run inside a tokio runtime with its time driver when such rules are loaded;
///   the inner service is called when the wait is over (dropped while it waits, the request
///   never started, counts nothing, and never reaches the inner service);
/// - passed, it is counted and handed to the inner service at once, and its entry exits
///   when the response is ready: an `Err`, or a status the layer's `error_if` picks (`5xx`
///   by default), counts as an error. A response future dropped before it completes (the
///   client went away), even before its first poll, exits its entry as an error too.
///
/// [`poll_ready`](Service::poll_ready) only asks the inner service: blocking is decided per
/// request, never by back-pressure. Clones share the engine, and so every limit: no limiter
/// state is held per clone.
///
/// The inner service must be `Clone`: a queued request is handed to the inner service only
/// after its wait, so the ready inner service moves into its response future and a clone
/// takes its place (wrap a service that is not `Clone` in `tower::buffer::Buffer`). A
/// request that passes at once is served by the ready service itself, with no clone.
pub struct SentinelService<S, K = ResourceKey, H = BlockAsError> {
    inner: S,
    config: Arc<Config<K, H>>,
}

impl<S, K, H> SentinelService<S, K, H> {
    pub(crate) fn new(inner: S, config: Arc<Config<K, H>>) -> Self {
        Self { inner, config }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner service, without the guard.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: Clone, K, H> Clone for SentinelService<S, K, H> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            config: Arc::clone(&self.config),
        }
    }
}

impl<S: fmt::Debug, K: fmt::Debug, H: fmt::Debug> fmt::Debug for SentinelService<S, K, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SentinelService")
            .field("inner", &self.inner)
            .field("config", &self.config)
            .finish()
    }
}

impl<S, K, H, ReqBody, ResBody> Service<Request<ReqBody>> for SentinelService<S, K, H>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    K: ExtractResource<ReqBody>,
    H: BlockHandler<Response<ResBody>, S::Error>,
{
    type Response = Response<ResBody>;
    type Error = H::Error;
    type Future = ResponseFuture<S, ReqBody, H>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(H::inner_error)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let config = &*self.config;
        // Every rule is checked now, without waiting; the name and the arguments are needed
        // only meanwhile.
        let admission = config.resource_key.with_resource(&request, |resource| {
            let entry = config
                .sentinel
                .entry(resource)
                .origin(config.origin(&request))
                .inbound();
            try_enter_request(entry, resource, &config.args, &request)
        });
        match admission {
            Ok(Admission::Now(entry)) => {
                // Made first, so that a panic in the inner service's `call` exits the entry
                // as an error.
                let in_flight = InFlight::new(entry);
                let future = self.inner.call(request);
                ResponseFuture::running(future, in_flight, config.error_if.clone())
            }
            Ok(Admission::Queued(queued)) => {
                // The ready service answers this request once its wait is over; a clone
                // takes its place and waits for the next poll_ready.
                let clone = self.inner.clone();
                let ready = mem::replace(&mut self.inner, clone);
                ResponseFuture::queued(ready, request, queued, config.error_if.clone())
            }
            Err(blocked) => {
                tracing::debug!(
                    resource = blocked.resource(),
                    family = %blocked.family(),
                    "request blocked"
                );
                let family = blocked.family();
                let answer = config.block_handler.blocked(blocked);
                ResponseFuture::blocked(answer.map(|response| BlockAnswer::mark(family, response)))
            }
        }
    }
}
