//! The middleware: how requests are named, entered and answered, built once and shared by
//! the services it makes (one per worker and per wrapped scope).

use std::fmt;
use std::sync::Arc;

use actix_web::dev::{ServiceRequest, ServiceResponse, Transform};
use actix_web::http::header::HeaderName;
use actix_web::http::StatusCode;
use actix_web::{body::EitherBody, HttpResponse};
use sentinel_core::{BlockError, Sentinel};
use sentinel_tower::{push_arg, BlockResponses};

use crate::answer::BlockAnswerer;
use crate::param::ParamSource;
use crate::resource::ResourceKey;
use crate::service::SentinelService;

/// actix-web middleware that guards every request with a [`Sentinel`] engine: the request
/// enters a resource named by its [`ResourceKey`] (by default `METHOD:/route pattern`), a
/// blocked request never reaches the handler and gets a block answer (429, 503 or 403 with
/// `Retry-After`, see [`BlockResponses`]), and the response feeds the circuit breakers.
///
/// Cheap to clone: clones share the settings, and every service made by the middleware
/// counts against the same engine.
#[derive(Clone)]
pub struct SentinelMiddleware {
    config: Arc<Config>,
}

/// What the middleware's services share.
pub(crate) struct Config {
    pub(crate) sentinel: Sentinel,
    pub(crate) resource_key: ResourceKey,
    pub(crate) origin_header: Option<HeaderName>,
    pub(crate) args: Vec<ParamSource>,
    pub(crate) error_if: ErrorIf,
    pub(crate) answer: BlockAnswerer,
}

/// Which responses count as errors.
#[derive(Clone)]
pub(crate) struct ErrorIf {
    statuses: Option<Arc<dyn Fn(StatusCode) -> bool + Send + Sync>>,
    pub(crate) count_block_answers: bool,
}

impl ErrorIf {
    #[inline]
    pub(crate) fn matches<B>(&self, response: &ServiceResponse<B>) -> bool {
        let status = response.status();
        let picked = match &self.statuses {
            None => status.is_server_error(),
            Some(is_error) => is_error(status),
        };
        picked
            && (self.count_block_answers
                || response
                    .response()
                    .extensions()
                    .get::<sentinel_tower::BlockAnswer>()
                    .is_none())
    }
}

impl SentinelMiddleware {
    /// A middleware entering requests into `sentinel`: resources named `METHOD:/route`,
    /// no origin, a `5xx` counted as an error, blocks answered by [`BlockResponses::new`].
    pub fn new(sentinel: Sentinel) -> Self {
        Self {
            config: Arc::new(Config {
                sentinel,
                resource_key: ResourceKey::method_and_route(),
                origin_header: None,
                args: Vec::new(),
                error_if: ErrorIf {
                    statuses: None,
                    count_block_answers: false,
                },
                answer: BlockAnswerer::Responses(BlockResponses::new()),
            }),
        }
    }

    fn config(&mut self) -> &mut Config {
        // Settings are made before the middleware is cloned into the server's workers; a
        // shared one is copied.
        Arc::make_mut(&mut self.config)
    }

    /// How a request names its resource.
    pub fn resource_key(mut self, key: ResourceKey) -> Self {
        self.config().resource_key = key;
        self
    }

    /// Reads the caller's name (Sentinel's origin, which `limitApp` and authority rules
    /// match) from this header. A request without it, or with a value that is not visible
    /// ASCII, has no origin.
    pub fn origin_header(mut self, header: HeaderName) -> Self {
        self.config().origin_header = Some(header);
        self
    }

    /// Adds an argument to every request's entry, for hot-parameter rules on the request's
    /// own resource: the first call gives `paramIdx` 0, up to four (a fifth is ignored,
    /// with a warning).
    pub fn arg(mut self, source: ParamSource) -> Self {
        push_arg(&mut self.config().args, source);
        self
    }

    /// Which response statuses count as errors for the circuit breakers (by default
    /// `5xx`; a handler's error counts by the status of its error response).
    pub fn error_if<F>(mut self, is_error: F) -> Self
    where
        F: Fn(StatusCode) -> bool + Send + Sync + 'static,
    {
        self.config().error_if.statuses = Some(Arc::new(is_error));
        self
    }

    /// Whether a block answer made by an inner guard (another `SentinelMiddleware` on a
    /// scope or resource inside this one; any response carrying a
    /// [`BlockAnswer`](sentinel_tower::BlockAnswer) in its extensions) counts as an error of
    /// this middleware's resource (off by default: one open breaker deep inside would
    /// otherwise close the whole route around it).
    pub fn count_block_answers(mut self, count: bool) -> Self {
        self.config().error_if.count_block_answers = count;
        self
    }

    /// Answers blocks with these ready-made responses (status per family, `Retry-After`).
    pub fn respond_with(mut self, responses: BlockResponses) -> Self {
        self.config().answer = BlockAnswerer::Responses(responses);
        self
    }

    /// Answers blocks with `f`'s response. The middleware marks it with a
    /// [`BlockAnswer`](sentinel_tower::BlockAnswer), as its own answers.
    ///
    /// ```
    /// use actix_web::HttpResponse;
    /// use sentinel_actix::SentinelMiddleware;
    ///
    /// let middleware = SentinelMiddleware::new(sentinel_core::Sentinel::new())
    ///     .on_block(|blocked| HttpResponse::TooManyRequests().body(blocked.family().to_string()));
    /// # let _ = middleware;
    /// ```
    pub fn on_block<F>(mut self, f: F) -> Self
    where
        F: Fn(&BlockError) -> HttpResponse + Send + Sync + 'static,
    {
        self.config().answer = BlockAnswerer::Custom(Arc::new(f));
        self
    }
}

impl Clone for Config {
    fn clone(&self) -> Self {
        Self {
            sentinel: self.sentinel.clone(),
            resource_key: self.resource_key.clone(),
            origin_header: self.origin_header.clone(),
            args: self.args.clone(),
            error_if: self.error_if.clone(),
            answer: self.answer.clone(),
        }
    }
}

impl fmt::Debug for SentinelMiddleware {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let config = &*self.config;
        f.debug_struct("SentinelMiddleware")
            .field("sentinel", &config.sentinel)
            .field("resource_key", &config.resource_key)
            .field("origin_header", &config.origin_header)
            .field("args", &config.args)
            .field("count_block_answers", &config.error_if.count_block_answers)
            .finish_non_exhaustive()
    }
}

impl<S, B> Transform<S, ServiceRequest> for SentinelMiddleware
where
    S: actix_web::dev::Service<
            ServiceRequest,
            Response = ServiceResponse<B>,
            Error = actix_web::Error,
        > + 'static,
    B: 'static,
{
    type Response = ServiceResponse<EitherBody<B>>;
    type Error = actix_web::Error;
    type Transform = SentinelService<S>;
    type InitError = ();
    type Future = std::future::Ready<Result<Self::Transform, Self::InitError>>;

    fn new_transform(&self, service: S) -> Self::Future {
        std::future::ready(Ok(SentinelService::new(service, Arc::clone(&self.config))))
    }
}
