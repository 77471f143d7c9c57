//! The response future: the request was entered in `call`, so the future answers a blocked
//! request at once, waits out a rate limiter's queue before it calls the inner service, or
//! awaits the inner service and exits the entry with the outcome.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use http::{Request, Response};
use pin_project_lite::pin_project;
use sentinel_core::Queued;
use tower::Service;

use crate::block::BlockHandler;
use crate::error_if::ErrorIf;
use crate::in_flight::InFlight;
use crate::queued::QueuedRequest;

pin_project! {
    /// The response future of a [`SentinelService`](crate::SentinelService) wrapping `S`.
    ///
    /// The request was checked when the service was called. A passed request holds its
    /// entry until the response is ready; dropped before that, the future exits the entry as
    /// an error (the client went away). A request a rate-limiter rule queues waits in this
    /// future, on a tokio timer, and reaches the inner service when its wait is over;
    /// dropped before, it never started and counts nothing.
    ///
    /// The inner service's future is held in place, not boxed: the layer allocates nothing
    /// per passed request. So the response future is `Unpin` when the inner service's
    /// future is; pin it (`Box::pin`, `std::pin::pin!`) to poll it by hand otherwise.
    pub struct ResponseFuture<S, ReqBody, H>
    where
        S: Service<Request<ReqBody>>,
        H: BlockHandler<S::Response, S::Error>,
    {
        #[pin]
        state: StateOf<S, ReqBody, H::Error>,
        handler: PhantomData<fn() -> H>,
    }
}

/// The state of a response future of `S`, whose block handler fails with `E`.
type StateOf<S, ReqBody, E> = State<
    <S as Service<Request<ReqBody>>>::Future,
    S,
    ReqBody,
    Result<<S as Service<Request<ReqBody>>>::Response, E>,
>;

pin_project! {
    /// Where a request is: `F` is the inner service's future, `T` the block handler's
    /// answer.
    #[project = StateProj]
    #[project_replace = StateOwned]
    enum State<F, S, ReqBody, T> {
        // The request was blocked: the block handler's answer.
        Blocked { answer: Option<T> },
        // The request waits for its rate-limiter slot; the inner service has not seen it.
        // Boxed: a rare state should not make every response future larger.
        Queued {
            waiting: Box<QueuedRequest<S, Request<ReqBody>>>,
            error_if: ErrorIf,
        },
        // The inner service is serving the request.
        Running {
            #[pin]
            future: F,
            in_flight: InFlight<'static>,
            error_if: ErrorIf,
        },
        // The response was returned (or a queued request is starting).
        Done,
    }
}

impl<S, ReqBody, H> ResponseFuture<S, ReqBody, H>
where
    S: Service<Request<ReqBody>>,
    H: BlockHandler<S::Response, S::Error>,
{
    #[inline]
    fn new(state: StateOf<S, ReqBody, H::Error>) -> Self {
        Self {
            state,
            handler: PhantomData,
        }
    }

    /// A blocked request's answer, ready at once.
    #[inline]
    pub(crate) fn blocked(answer: Result<S::Response, H::Error>) -> Self {
        Self::new(State::Blocked {
            answer: Some(answer),
        })
    }

    /// A passed request, being served by `future`.
    #[inline]
    pub(crate) fn running(
        future: S::Future,
        in_flight: InFlight<'static>,
        error_if: ErrorIf,
    ) -> Self {
        Self::new(State::Running {
            future,
            in_flight,
            error_if,
        })
    }

    /// A queued request, served by `service` when its wait is over.
    pub(crate) fn queued(
        service: S,
        request: Request<ReqBody>,
        queued: Queued<'static>,
        error_if: ErrorIf,
    ) -> Self {
        Self::new(State::Queued {
            waiting: Box::new(QueuedRequest::new(service, request, queued)),
            error_if,
        })
    }
}

impl<S, ReqBody, ResBody, H> Future for ResponseFuture<S, ReqBody, H>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    H: BlockHandler<Response<ResBody>, S::Error>,
{
    type Output = Result<Response<ResBody>, H::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Running {
                    future,
                    in_flight,
                    error_if,
                } => {
                    let result = ready!(future.poll(cx));
                    let failed = match &result {
                        Ok(response) => error_if.matches(response),
                        Err(_) => true,
                    };
                    in_flight.exit(failed);
                    state.set(State::Done);
                    return Poll::Ready(result.map_err(H::inner_error));
                }
                StateProj::Queued { waiting, .. } => {
                    ready!(waiting.poll_wait(cx));
                    let StateOwned::Queued { waiting, error_if } =
                        state.as_mut().project_replace(State::Done)
                    else {
                        unreachable!("the state was just seen queued");
                    };
                    // The entry is held first, so that a panic in the inner service's `call`
                    // exits it as an error.
                    let (in_flight, future) = waiting.start(InFlight::new);
                    state.set(State::Running {
                        future,
                        in_flight,
                        error_if,
                    });
                }
                StateProj::Blocked { answer } => {
                    let answer = answer
                        .take()
                        .expect("`ResponseFuture` polled after completion");
                    state.set(State::Done);
                    return Poll::Ready(answer);
                }
                StateProj::Done => panic!("`ResponseFuture` polled after completion"),
            }
        }
    }
}

impl<S, ReqBody, H> fmt::Debug for ResponseFuture<S, ReqBody, H>
where
    S: Service<Request<ReqBody>>,
    H: BlockHandler<S::Response, S::Error>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Blocked { .. } => "blocked",
            State::Queued { .. } => "queued",
            State::Running { .. } => "running",
            State::Done => "done",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish_non_exhaustive()
    }
}
