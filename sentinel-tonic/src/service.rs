//! The service: enters each call before the inner service sees it, and hands its entry to
//! the response.

use std::fmt;
use std::mem;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{HeaderName, Request, Response};
use sentinel_core::{Admission, BlockError, EntryType, Sentinel};
use sentinel_tower::{try_enter_request, BlockAnswer, ExtractResource, ParamSource};
use tonic::Status;
use tower::{BoxError, Service};

use crate::body::{CallGuard, GuardedBody};
use crate::future::{Answer, Counting, ResponseFuture};
use crate::status::block_status;

/// A closure that makes the status of a blocked call.
pub(crate) type OnBlock = Arc<dyn Fn(&BlockError) -> Status + Send + Sync>;

/// Which end of a call the layer guards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Server,
    Client,
}

/// What a layer's services share: the engine and how calls are entered and answered.
#[derive(Clone)]
pub(crate) struct Config<K> {
    pub(crate) sentinel: Sentinel,
    pub(crate) resource_key: K,
    pub(crate) side: Side,
    pub(crate) origin_header: Option<HeaderName>,
    pub(crate) args: Vec<ParamSource>,
    pub(crate) counting: Counting,
    pub(crate) on_block: Option<OnBlock>,
}

impl<K> Config<K> {
    fn origin<'r, B>(&self, request: &'r Request<B>) -> &'r str {
        self.origin_header
            .as_ref()
            .and_then(|name| request.headers().get(name))
            .and_then(|value| value.to_str().ok())
            .unwrap_or("")
    }

    /// A blocked call's answer: the status in a response head on the server (marked, so
    /// that a guard around this one does not count it), an error on the client.
    #[cold]
    fn answer(&self, blocked: BlockError) -> Answer {
        let mut status = match &self.on_block {
            Some(on_block) => on_block(&blocked),
            None => block_status(&blocked),
        };
        match self.side {
            Side::Server => {
                let family = blocked.family();
                let mut response = status.into_http::<()>();
                response.extensions_mut().insert(BlockAnswer::new(family));
                Answer::Response(response)
            }
            Side::Client => {
                status.set_source(Arc::new(blocked));
                Answer::Error(Box::new(status))
            }
        }
    }
}

impl<K: fmt::Debug> fmt::Debug for Config<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("sentinel", &self.sentinel)
            .field("resource_key", &self.resource_key)
            .field("side", &self.side)
            .field("origin_header", &self.origin_header)
            .field("args", &self.args)
            .field("counting", &self.counting)
            .field("on_block", &self.on_block.is_some())
            .finish()
    }
}

/// A gRPC service (a tonic server's routes) or channel guarded by Sentinel; made by
/// [`SentinelGrpcLayer`](crate::SentinelGrpcLayer).
///
/// Each call enters its resource when the service is called, and every rule is checked then,
/// without waiting:
/// - blocked, it never reaches the inner service: on a server it gets a response carrying
///   the block's status (`RESOURCE_EXHAUSTED`, `UNAVAILABLE` or `PERMISSION_DENIED`, see
///   [`block_status`]); on a client it fails with that [`Status`] (boxed in the
///   [`BoxError`], which tonic's generated clients turn back into the `Status`), without a
///   round trip;
/// - held by a rate-limiter rule, it waits in its response future on a tokio timer;
/// - passed, it is counted and handed to the inner service at once, and its entry lives
///   until the response stream ends ([`GuardedBody`]).
///
/// Clones share the engine, and so every limit. The inner service must be `Clone` (tonic's
/// routes and channels are).
pub struct SentinelGrpcService<S, K> {
    inner: S,
    config: Arc<Config<K>>,
}

impl<S, K> SentinelGrpcService<S, K> {
    pub(crate) fn new(inner: S, config: Arc<Config<K>>) -> Self {
        Self { inner, config }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, without the guard.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: Clone, K> Clone for SentinelGrpcService<S, K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            config: Arc::clone(&self.config),
        }
    }
}

impl<S: fmt::Debug, K: fmt::Debug> fmt::Debug for SentinelGrpcService<S, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SentinelGrpcService")
            .field("inner", &self.inner)
            .field("config", &self.config)
            .finish()
    }
}

impl<S, K, ReqBody, ResBody> Service<Request<ReqBody>> for SentinelGrpcService<S, K>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    S::Error: Into<BoxError>,
    K: ExtractResource<ReqBody>,
{
    type Response = Response<GuardedBody<ResBody>>;
    type Error = BoxError;
    type Future = ResponseFuture<S, ReqBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let config = &*self.config;
        let entry_type = match config.side {
            Side::Server => EntryType::Inbound,
            Side::Client => EntryType::Outbound,
        };
        let admission = config.resource_key.with_resource(&request, |resource| {
            let entry = config
                .sentinel
                .entry(resource)
                .origin(config.origin(&request))
                .entry_type(entry_type);
            try_enter_request(entry, resource, &config.args, &request)
        });
        let counting = config.counting;
        match admission {
            Ok(Admission::Now(entry)) => {
                // Made first, so that a panic in the inner service's `call` ends the call.
                let call = CallGuard::new(entry, counting.codes);
                let future = self.inner.call(request);
                ResponseFuture::running(future, call, counting)
            }
            Ok(Admission::Queued(queued)) => {
                // The ready service serves this call once its wait is over; a clone takes
                // its place and waits for the next poll_ready.
                let clone = self.inner.clone();
                let ready = mem::replace(&mut self.inner, clone);
                ResponseFuture::queued(ready, request, queued, counting)
            }
            Err(blocked) => {
                tracing::debug!(
                    resource = blocked.resource(),
                    family = %blocked.family(),
                    "gRPC call blocked"
                );
                ResponseFuture::blocked(config.answer(blocked), counting)
            }
        }
    }
}
