//! A response future dropped before it completes (the client went away) still exits its
//! entry, as an error.

use std::convert::Infallible;
use std::pin::pin;
use std::sync::atomic::Ordering;

use http::{Request, Response, StatusCode};
use sentinel_core::flow::FlowRule;
use sentinel_tower::{SentinelError, SentinelLayer};
use tower::{service_fn, Layer};

use crate::support::{answer, call, engine_with, get, poll_once};

#[tokio::test]
async fn a_dropped_response_future_exits_its_entry_as_an_error() {
    let (sentinel, _clock) = engine_with(vec![FlowRule::thread("GET:/report", 1.0)]);
    // A handler that never answers.
    let stuck = service_fn(|_request: Request<()>| async {
        std::future::pending::<()>().await;
        Ok::<_, Infallible>(Response::new(()))
    });
    let mut service = SentinelLayer::new(sentinel.clone()).layer(stuck);

    {
        let mut response = pin!(call(&mut service, get("/report", &[])).await);
        let first_poll = poll_once(response.as_mut()).await;
        assert!(first_poll.is_pending(), "the handler is still working");
        let stats = sentinel.resource_stats("GET:/report").expect("entered");
        assert_eq!(stats.concurrency, 1);
        // The client goes away: the future is dropped here.
    }

    let stats = sentinel.resource_stats("GET:/report").expect("entered");
    assert_eq!(stats.concurrency, 0, "the entry exited");
    assert_eq!(stats.success_qps, 1.0, "and completed");
    assert_eq!(stats.error_qps, 1.0, "as an error");

    // The place the concurrency rule held is free again.
    let mut response = pin!(call(&mut service, get("/report", &[])).await);
    let second_poll = poll_once(response.as_mut()).await;
    assert!(second_poll.is_pending(), "passed, not blocked");
}

#[tokio::test]
async fn a_passed_request_is_counted_when_the_service_is_called() {
    let (sentinel, _clock) = engine_with(vec![FlowRule::thread("GET:/report", 1.0)]);
    let (handler, seen) = answer(StatusCode::OK);
    let mut service = SentinelLayer::new(sentinel.clone()).layer(handler);

    // Called, never polled: the request holds the only place already.
    let first = call(&mut service, get("/report", &[])).await;
    assert_eq!(
        seen.load(Ordering::SeqCst),
        1,
        "handed to the handler in call"
    );
    let stats = sentinel.resource_stats("GET:/report").expect("entered");
    assert_eq!(stats.concurrency, 1);
    let second = call(&mut service, get("/report", &[])).await.await;
    assert!(
        matches!(second, Err(SentinelError::Blocked(_))),
        "{second:?}"
    );

    // Dropped unpolled, it exits as an error, as any response future dropped too early.
    drop(first);
    let stats = sentinel.resource_stats("GET:/report").expect("entered");
    assert_eq!((stats.concurrency, stats.error_qps), (0, 1.0));
}

/// A service whose `call` panics: `poll_ready` is always ready.
#[derive(Clone)]
struct PanicsInCall;

impl tower::Service<Request<()>> for PanicsInCall {
    type Response = Response<()>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Response<()>, Infallible>>;

    fn poll_ready(
        &mut self,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, _request: Request<()>) -> Self::Future {
        panic!("the inner service failed in call");
    }
}

#[tokio::test]
async fn a_panic_in_the_inner_call_exits_its_entry_as_an_error() {
    let (sentinel, _clock) = engine_with(vec![FlowRule::thread("GET:/report", 1.0)]);
    let mut service = SentinelLayer::new(sentinel.clone()).layer(PanicsInCall);
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        tower::Service::call(&mut service, get("/report", &[]))
    }));
    assert!(panicked.is_err(), "the inner call panicked");
    let stats = sentinel.resource_stats("GET:/report").expect("entered");
    assert_eq!(stats.concurrency, 0, "the entry exited");
    assert_eq!(stats.error_qps, 1.0, "as an error");
}
