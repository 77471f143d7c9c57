//! The layer: how requests are named and entered, built once and shared by its services.

use std::fmt;
use std::sync::Arc;

use http::{HeaderName, StatusCode};
use sentinel_core::{BlockError, Sentinel};
use tower::Layer;

use crate::block::{BlockAsError, BlockAsResponse};
use crate::error_if::{ErrorIf, Statuses};
use crate::param::{push_arg, ParamSource};
use crate::resource::ResourceKey;
use crate::respond::BlockResponses;
use crate::service::{Config, SentinelService};

/// Guards every request of the services it wraps with a [`Sentinel`] engine: the request
/// enters a resource named by its key (by default `METHOD:/path`), and a blocked request
/// never reaches the inner service.
///
/// The services share the engine, so every clone of a service and every service this layer
/// made counts against the same limits.
///
/// ```
/// use http::{HeaderName, StatusCode};
/// use sentinel_tower::{ResourceKey, SentinelLayer};
///
/// let layer = SentinelLayer::new(sentinel_core::Sentinel::new())
///     .resource_key(ResourceKey::path())
///     .origin_header(HeaderName::from_static("x-caller"))
///     .error_if(|status| status.is_server_error() || status == StatusCode::REQUEST_TIMEOUT);
/// # let _ = layer;
/// ```
#[derive(Clone)]
pub struct SentinelLayer<K = ResourceKey, H = BlockAsError> {
    config: Config<K, H>,
}

impl SentinelLayer {
    /// A layer entering requests into `sentinel`: resources named `METHOD:/path`, no origin,
    /// a `5xx` response counted as an error, and a blocked request failing with
    /// [`SentinelError::Blocked`](crate::SentinelError::Blocked).
    pub fn new(sentinel: Sentinel) -> Self {
        Self {
            config: Config {
                sentinel,
                resource_key: ResourceKey::method_and_path(),
                block_handler: BlockAsError,
                origin_header: None,
                error_if: ErrorIf::new(),
                args: Vec::new(),
            },
        }
    }
}

impl<K, H> SentinelLayer<K, H> {
    /// How a request names its resource: a [`ResourceKey`] or a closure
    /// ([`ResourceKey::from_fn`]).
    pub fn resource_key<K2>(self, resource_key: K2) -> SentinelLayer<K2, H> {
        SentinelLayer {
            config: self
                .config
                .rebuild(|_, block_handler| (resource_key, block_handler)),
        }
    }

    /// Reads the caller's name (Sentinel's origin, which `limitApp` and authority rules
    /// match) from this header. A request without it, or with a value that is not visible
    /// ASCII, has no origin.
    pub fn origin_header(mut self, header: HeaderName) -> Self {
        self.config.origin_header = Some(header);
        self
    }

    /// Adds an argument to every request's entry, for hot-parameter (param-flow) rules: the
    /// first call gives `paramIdx` 0, the next 1, up to four. The request is still one call of
    /// its route's resource: a param rule on that resource limits it per value.
    ///
    /// ```
    /// use http::HeaderName;
    /// use sentinel_core::param_flow::ParamFlowRule;
    /// use sentinel_tower::{ParamSource, SentinelLayer};
    ///
    /// let sentinel = sentinel_core::Sentinel::new();
    /// // At most 5 requests a second per user on GET:/order.
    /// sentinel
    ///     .param_flow_rules()
    ///     .load_rules(vec![ParamFlowRule::qps("GET:/order", 0, 5.0)])
    ///     .expect("valid rules");
    /// let layer = SentinelLayer::new(sentinel)
    ///     .arg(ParamSource::header(HeaderName::from_static("x-user-id")));
    /// # let _ = layer;
    /// ```
    ///
    /// A fifth argument is ignored, with a warning.
    pub fn arg(mut self, source: ParamSource) -> Self {
        push_arg(&mut self.config.args, source);
        self
    }

    /// Which response statuses count as errors for the circuit breakers (by default
    /// `5xx`). An `Err` from the inner service always counts.
    pub fn error_if<F>(mut self, is_error: F) -> Self
    where
        F: Fn(StatusCode) -> bool + Send + Sync + 'static,
    {
        self.config.error_if.statuses = Statuses::Custom(Arc::new(is_error));
        self
    }

    /// Whether a response that answers a call an inner guard blocked counts as an error of
    /// this layer's resource too (off by default).
    ///
    /// A guard inside this one (a `route_layer` under a router-wide layer, a handler that
    /// answers with [`Blocked`](crate::Blocked)) answers a blocked call with a `503` when its
    /// breaker is open or system protection refuses it. Counted by the outer resource, those
    /// `503`s would trip its breaker too, so that one open breaker deep inside closes the
    /// whole route. Every block answer made by this crate carries a
    /// [`BlockAnswer`](crate::BlockAnswer) in its response extensions, and by default the
    /// outer layer does not count a response that carries one. An answer you build yourself
    /// is left out the same way once you insert a [`BlockAnswer`](crate::BlockAnswer) in it.
    ///
    /// An `Err` of the inner service always counts: an inner guard that answers blocks with
    /// [`SentinelError::Blocked`](crate::SentinelError::Blocked) is seen as failing.
    pub fn count_block_answers(mut self, count: bool) -> Self {
        self.config.error_if.count_block_answers = count;
        self
    }

    /// Answers a blocked request with `f`'s response instead of an error. The service then
    /// has the inner service's error type.
    ///
    /// ```
    /// use http::{Response, StatusCode};
    /// use sentinel_core::RuleFamily;
    /// use sentinel_tower::SentinelLayer;
    ///
    /// let layer = SentinelLayer::new(sentinel_core::Sentinel::new()).on_block(|blocked| {
    ///     let status = match blocked.family() {
    ///         RuleFamily::Degrade | RuleFamily::System => StatusCode::SERVICE_UNAVAILABLE,
    ///         _ => StatusCode::TOO_MANY_REQUESTS,
    ///     };
    ///     let mut response = Response::new(String::from("busy, retry later"));
    ///     *response.status_mut() = status;
    ///     response
    /// });
    /// # let _ = layer;
    /// ```
    pub fn on_block<F, Res>(self, f: F) -> SentinelLayer<K, BlockAsResponse<F>>
    where
        F: Fn(&BlockError) -> Res,
    {
        SentinelLayer {
            config: self
                .config
                .rebuild(|resource_key, _| (resource_key, BlockAsResponse::new(f))),
        }
    }
}

impl<K, H> SentinelLayer<K, H> {
    /// Answers a blocked request with a ready-made response: a status per family, a
    /// `Retry-After` header and a plain body (see [`BlockResponses`]). The service then has
    /// the inner service's error type, as with [`on_block`](Self::on_block).
    pub fn respond_with(self, responses: BlockResponses) -> SentinelLayer<K, BlockResponses> {
        SentinelLayer {
            config: self
                .config
                .rebuild(|resource_key, _| (resource_key, responses)),
        }
    }
}

impl<S, K: Clone, H: Clone> Layer<S> for SentinelLayer<K, H> {
    type Service = SentinelService<S, K, H>;

    fn layer(&self, inner: S) -> Self::Service {
        SentinelService::new(inner, Arc::new(self.config.clone()))
    }
}

impl<K: fmt::Debug, H: fmt::Debug> fmt::Debug for SentinelLayer<K, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SentinelLayer")
            .field("config", &self.config)
            .finish()
    }
}
