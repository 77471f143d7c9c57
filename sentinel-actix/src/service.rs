//! The service: enters each request before the inner service sees it, and keeps the entry
//! until the response is ready.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use actix_web::body::EitherBody;
use actix_web::dev::{Service, ServiceRequest, ServiceResponse};
use pin_project_lite::pin_project;
use sentinel_core::{Admission, BlockError};
use sentinel_tower::{try_enter_with_args, InFlight};

use crate::middleware::{Config, ErrorIf};

/// The service of a [`SentinelMiddleware`](crate::SentinelMiddleware) wrapping `S`.
pub struct SentinelService<S> {
    inner: Rc<S>,
    config: Arc<Config>,
}

impl<S> SentinelService<S> {
    pub(crate) fn new(inner: S, config: Arc<Config>) -> Self {
        Self {
            inner: Rc::new(inner),
            config,
        }
    }
}

impl<S> std::fmt::Debug for SentinelService<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentinelService").finish_non_exhaustive()
    }
}

/// Enters `request`: every rule is checked now, without waiting.
fn admit(config: &Config, request: &ServiceRequest) -> Result<Admission<'static>, BlockError> {
    let resource = config.resource_key.resource(request);
    let origin = config
        .origin_header
        .as_ref()
        .and_then(|name| request.headers().get(name))
        .and_then(|value| value.to_str().ok())
        .unwrap_or("");
    let entry = config.sentinel.entry(&resource).origin(origin).inbound();
    try_enter_with_args(entry, &resource, &config.args, request)
}

impl<S, B> Service<ServiceRequest> for SentinelService<S>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = actix_web::Error> + 'static,
    B: 'static,
{
    type Response = ServiceResponse<EitherBody<B>>;
    type Error = actix_web::Error;
    type Future = ResponseFuture<S::Future, B>;

    actix_web::dev::forward_ready!(inner);

    fn call(&self, request: ServiceRequest) -> Self::Future {
        let config = &*self.config;
        match admit(config, &request) {
            Ok(Admission::Now(entry)) => {
                // Made first, so that a panic in the inner service's `call` exits the entry
                // as an error.
                let in_flight = InFlight::new(entry);
                ResponseFuture::running(self.inner.call(request), in_flight, config)
            }
            Ok(Admission::Queued(queued)) => {
                let inner = Rc::clone(&self.inner);
                let error_if = config.error_if.clone();
                ResponseFuture::queued(Box::pin(async move {
                    tokio::time::sleep(queued.wait()).await;
                    let mut in_flight = InFlight::new(queued.start());
                    let result = inner.call(request).await;
                    in_flight.exit(failed(&error_if, &result));
                    result.map(ServiceResponse::map_into_left_body)
                }))
            }
            Err(blocked) => {
                tracing::debug!(
                    resource = blocked.resource(),
                    family = %blocked.family(),
                    "request blocked"
                );
                let answer = config.answer.answer(&blocked);
                ResponseFuture::blocked(request.into_response(answer).map_into_right_body())
            }
        }
    }
}

fn failed<B>(error_if: &ErrorIf, result: &Result<ServiceResponse<B>, actix_web::Error>) -> bool {
    match result {
        Ok(response) => error_if.matches(response),
        Err(_) => true,
    }
}

/// A queued request's whole course: its wait, then the inner service.
type QueuedFuture<B> =
    Pin<Box<dyn Future<Output = Result<ServiceResponse<EitherBody<B>>, actix_web::Error>>>>;

pin_project! {
    /// The response future of a [`SentinelService`] whose inner service's future is `F`
    /// and body `B`: a blocked request's answer, a passed request's inner future (held in
    /// place, not boxed) with its entry, or a queued request waiting for its slot (boxed).
    ///
    /// A passed request's entry exits when the response is ready: as an error if its
    /// status counts as one, or if the future is dropped before (the client went away).
    pub struct ResponseFuture<F, B> {
        #[pin]
        state: State<F, B>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, B> {
        Blocked { answer: Option<ServiceResponse<EitherBody<B>>> },
        Running { #[pin] future: F, in_flight: InFlight<'static>, error_if: ErrorIf },
        Queued { future: QueuedFuture<B> },
    }
}

impl<F, B> ResponseFuture<F, B> {
    fn blocked(answer: ServiceResponse<EitherBody<B>>) -> Self {
        Self {
            state: State::Blocked {
                answer: Some(answer),
            },
        }
    }

    fn running(future: F, in_flight: InFlight<'static>, config: &Config) -> Self {
        Self {
            state: State::Running {
                future,
                in_flight,
                error_if: config.error_if.clone(),
            },
        }
    }

    fn queued(future: QueuedFuture<B>) -> Self {
        Self {
            state: State::Queued { future },
        }
    }
}

impl<F, B> Future for ResponseFuture<F, B>
where
    F: Future<Output = Result<ServiceResponse<B>, actix_web::Error>>,
{
    type Output = Result<ServiceResponse<EitherBody<B>>, actix_web::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Running {
                future,
                in_flight,
                error_if,
            } => {
                let result = ready!(future.poll(cx));
                in_flight.exit(failed(error_if, &result));
                Poll::Ready(result.map(ServiceResponse::map_into_left_body))
            }
            StateProj::Queued { future } => future.as_mut().poll(cx),
            StateProj::Blocked { answer } => match answer.take() {
                Some(answer) => Poll::Ready(Ok(answer)),
                None => Poll::Ready(Err(actix_web::error::ErrorInternalServerError(
                    "a blocked request's answer was polled twice",
                ))),
            },
        }
    }
}

impl<F, B> std::fmt::Debug for ResponseFuture<F, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &self.state {
            State::Blocked { .. } => "blocked",
            State::Running { .. } => "running",
            State::Queued { .. } => "queued",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish_non_exhaustive()
    }
}
