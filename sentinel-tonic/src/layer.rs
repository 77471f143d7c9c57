//! The layer: a server or client guard, configured once and shared by its services.

use std::fmt;
use std::sync::Arc;

use http::HeaderName;
use sentinel_core::{BlockError, Sentinel};
use sentinel_tower::{push_arg, ParamSource, ResourceKey};
use tonic::Status;
use tower::Layer;

use crate::future::Counting;
use crate::service::{Config, SentinelGrpcService, Side};
use crate::status::ErrorCodes;

/// Guards every gRPC call of the services it wraps with a [`Sentinel`] engine: a call
/// enters the resource named by its method's path, `/package.Service/Method`.
///
/// [`server`](Self::server) guards a tonic server (`Server::builder().layer(..)`): calls
/// enter inbound (system rules apply), and a blocked call is answered with its status.
/// [`client`](Self::client) guards a channel (`ServiceBuilder::new().layer(..).service(channel)`):
/// calls enter outbound, and a blocked call fails with its status without leaving the
/// process.
///
/// ```
/// use http::HeaderName;
/// use sentinel_tonic::{ErrorCodes, SentinelGrpcLayer};
/// use tonic::Code;
///
/// let sentinel = sentinel_core::Sentinel::new();
/// let server = SentinelGrpcLayer::server(sentinel.clone())
///     .origin_metadata(HeaderName::from_static("x-caller"))
///     .error_codes(ErrorCodes::server_errors().with(Code::ResourceExhausted));
/// let client = SentinelGrpcLayer::client(sentinel);
/// # let _ = (server, client);
/// ```
#[derive(Clone)]
pub struct SentinelGrpcLayer<K = ResourceKey> {
    config: Config<K>,
}

impl SentinelGrpcLayer {
    /// A layer for a tonic server: calls enter inbound, named by their method's path, with
    /// no origin; a blocked call is answered with [`block_status`](crate::block_status); the
    /// codes of [`ErrorCodes::server_errors`] count as errors.
    pub fn server(sentinel: Sentinel) -> Self {
        Self::new(sentinel, Side::Server)
    }

    /// A layer for a client channel: calls enter outbound, named by their method's path; a
    /// blocked call fails at once with [`block_status`](crate::block_status) (its
    /// [`source`](std::error::Error::source) is the [`BlockError`]); the codes of
    /// [`ErrorCodes::server_errors`] and every transport error count as errors.
    pub fn client(sentinel: Sentinel) -> Self {
        Self::new(sentinel, Side::Client)
    }

    fn new(sentinel: Sentinel, side: Side) -> Self {
        Self {
            config: Config {
                sentinel,
                resource_key: ResourceKey::path(),
                side,
                origin_header: None,
                args: Vec::new(),
                counting: Counting {
                    codes: ErrorCodes::server_errors(),
                    count_block_answers: false,
                },
                on_block: None,
            },
        }
    }
}

impl<K> SentinelGrpcLayer<K> {
    /// How a call names its resource: any of sentinel-tower's keys, e.g.
    /// [`ResourceKey::from_fn`] to put a prefix on client resources
    /// (`format!("client:{}", request.uri().path())`) when one engine guards both ends of
    /// the same method.
    pub fn resource_key<K2>(self, resource_key: K2) -> SentinelGrpcLayer<K2> {
        let Config {
            sentinel,
            side,
            origin_header,
            args,
            counting,
            on_block,
            ..
        } = self.config;
        SentinelGrpcLayer {
            config: Config {
                sentinel,
                resource_key,
                side,
                origin_header,
                args,
                counting,
                on_block,
            },
        }
    }

    /// Reads the caller's name (Sentinel's origin, which `limitApp` and authority rules
    /// match) from this ASCII metadata key. A call without it has no origin.
    pub fn origin_metadata(mut self, key: HeaderName) -> Self {
        self.config.origin_header = Some(key);
        self
    }

    /// Adds a hot-parameter (param-flow) argument to every call's entry (the first gives
    /// `paramIdx` 0, up to four), as sentinel-tower's `SentinelLayer::arg` does: metadata is
    /// read with [`ParamSource::header`], and a call without the value passes unchecked
    /// unless the source says otherwise. Message fields are not read (they are decoded in
    /// the handler: guard them there).
    pub fn arg(mut self, source: ParamSource) -> Self {
        push_arg(&mut self.config.args, source);
        self
    }

    /// Which status codes count as errors for the circuit breakers (by default
    /// [`ErrorCodes::server_errors`]). A transport error (the inner service's `Err`, a
    /// response stream that fails) always counts.
    pub fn error_codes(mut self, codes: ErrorCodes) -> Self {
        self.config.counting.codes = codes;
        self
    }

    /// Whether a block answer of a guard inside this one counts as an error here (off by
    /// default): the `UNAVAILABLE` of an inner guard's open breaker would otherwise trip the
    /// breaker of the method around it. A server block answer is recognised by
    /// sentinel-tower's [`BlockAnswer`](sentinel_tower::BlockAnswer) in the response
    /// extensions, a client one by its `Status`'s source, a [`BlockError`].
    pub fn count_block_answers(mut self, count: bool) -> Self {
        self.config.counting.count_block_answers = count;
        self
    }

    /// Makes the status of a blocked call with `f` instead of
    /// [`block_status`](crate::block_status) (start from it to keep its retry pushback).
    pub fn on_block<F>(mut self, f: F) -> Self
    where
        F: Fn(&BlockError) -> Status + Send + Sync + 'static,
    {
        self.config.on_block = Some(Arc::new(f));
        self
    }
}

impl<S, K: Clone> Layer<S> for SentinelGrpcLayer<K> {
    type Service = SentinelGrpcService<S, K>;

    fn layer(&self, inner: S) -> Self::Service {
        SentinelGrpcService::new(inner, Arc::new(self.config.clone()))
    }
}

impl<K: fmt::Debug> fmt::Debug for SentinelGrpcLayer<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SentinelGrpcLayer")
            .field("config", &self.config)
            .finish()
    }
}
