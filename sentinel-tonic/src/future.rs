//! The response future: the call was entered in `call`, so the future answers a blocked
//! call at once, waits out a rate limiter's queue before it calls the inner service, or
//! awaits the response head and hands the call's entry to the response body.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use http::{Request, Response};
use pin_project_lite::pin_project;
use sentinel_core::{BlockError, Queued};
use sentinel_tower::{BlockAnswer, QueuedRequest};
use tonic::Status;
use tower::{BoxError, Service};

use crate::body::{CallGuard, GuardedBody};
use crate::status::{code_of_http, grpc_status, ErrorCodes};

/// How a finished call is counted; copied into every response future.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Counting {
    pub(crate) codes: ErrorCodes,
    pub(crate) count_block_answers: bool,
}

impl Counting {
    /// The guard a response body holds after `response`'s head: none when the head carries
    /// the call's status (a unary error, a block answer, a proxy's HTTP error), which ends
    /// the call now.
    #[inline]
    fn after_head<B>(&self, response: &Response<B>, call: Option<CallGuard>) -> Option<CallGuard> {
        let status = response.status();
        let code = match grpc_status(response.headers()) {
            Some(code) => code,
            None if status == http::StatusCode::OK => return call,
            None => code_of_http(status),
        };
        if let Some(mut call) = call {
            let inner_block = response.extensions().get::<BlockAnswer>().is_some();
            call.finish(self.codes.contains(code) && (self.count_block_answers || !inner_block));
        }
        None
    }

    /// Whether an error of the inner service counts: always, unless it is a block answer of
    /// a client guard inside this one (a `Status` whose source is a `BlockError`) and such
    /// answers are left out.
    fn counts_error(&self, error: &BoxError) -> bool {
        self.count_block_answers || !is_block_answer(error)
    }
}

/// Whether `error` is a client guard's answer to a blocked call.
fn is_block_answer(error: &BoxError) -> bool {
    error
        .downcast_ref::<Status>()
        .and_then(std::error::Error::source)
        .is_some_and(|source| source.is::<BlockError>())
}

/// What a blocked call gets: a response head carrying the status (server), or the status
/// as an error (client).
pub(crate) enum Answer {
    Response(Response<()>),
    Error(BoxError),
}

pin_project! {
    /// The response future of a [`SentinelGrpcService`](crate::SentinelGrpcService)
    /// wrapping `S`.
    ///
    /// The call was checked when the service was called. A passed call's entry goes with
    /// the response into its [`GuardedBody`], which exits it when the stream ends; dropped
    /// before the response head, the future ends the call as `CANCELLED`. A call a
    /// rate-limiter rule queues waits in this future on a tokio timer and reaches the inner
    /// service when its wait is over; dropped before, it never started and counts nothing.
    pub struct ResponseFuture<S, ReqBody>
    where
        S: Service<Request<ReqBody>>,
    {
        #[pin]
        state: State<S::Future, S, ReqBody>,
        counting: Counting,
    }
}

pin_project! {
    #[project = StateProj]
    #[project_replace = StateOwned]
    enum State<F, S, ReqBody> {
        Blocked { answer: Option<Answer> },
        // Boxed: a rare state should not make every response future larger.
        Queued { waiting: Box<QueuedRequest<S, Request<ReqBody>>> },
        Running {
            #[pin]
            future: F,
            call: Option<CallGuard>,
        },
        Done,
    }
}

impl<S, ReqBody> ResponseFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>>,
{
    pub(crate) fn blocked(answer: Answer, counting: Counting) -> Self {
        Self {
            state: State::Blocked {
                answer: Some(answer),
            },
            counting,
        }
    }

    #[inline]
    pub(crate) fn running(future: S::Future, call: CallGuard, counting: Counting) -> Self {
        Self {
            state: State::Running {
                future,
                call: Some(call),
            },
            counting,
        }
    }

    pub(crate) fn queued(
        service: S,
        request: Request<ReqBody>,
        queued: Queued<'static>,
        counting: Counting,
    ) -> Self {
        Self {
            state: State::Queued {
                waiting: Box::new(QueuedRequest::new(service, request, queued)),
            },
            counting,
        }
    }
}

impl<S, ReqBody, ResBody> Future for ResponseFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    S::Error: Into<BoxError>,
{
    type Output = Result<Response<GuardedBody<ResBody>>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let counting = *this.counting;
        let mut state = this.state;
        loop {
            match state.as_mut().project() {
                StateProj::Running { future, call } => {
                    let output = ready!(future.poll(cx));
                    let mut call = call.take();
                    let result = match output {
                        Ok(response) => {
                            let held = counting.after_head(&response, call);
                            Ok(response.map(|body| GuardedBody::new(body, held)))
                        }
                        Err(error) => {
                            let error: BoxError = error.into();
                            if let Some(call) = call.as_mut() {
                                call.finish(counting.counts_error(&error));
                            }
                            Err(error)
                        }
                    };
                    state.set(State::Done);
                    return Poll::Ready(result);
                }
                StateProj::Queued { waiting } => {
                    ready!(waiting.poll_wait(cx));
                    let StateOwned::Queued { waiting } =
                        state.as_mut().project_replace(State::Done)
                    else {
                        unreachable!("the state was just seen queued");
                    };
                    // The entry is held first, so that a panic in the inner service's `call`
                    // ends the call.
                    let (call, future) =
                        waiting.start(|entry| Some(CallGuard::new(entry, counting.codes)));
                    state.set(State::Running { future, call });
                }
                StateProj::Blocked { answer } => {
                    let answer = answer
                        .take()
                        .expect("`ResponseFuture` polled after completion");
                    state.set(State::Done);
                    return Poll::Ready(match answer {
                        Answer::Response(response) => Ok(response.map(|()| GuardedBody::empty())),
                        Answer::Error(error) => Err(error),
                    });
                }
                StateProj::Done => panic!("`ResponseFuture` polled after completion"),
            }
        }
    }
}

impl<S, ReqBody> fmt::Debug for ResponseFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>>,
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
