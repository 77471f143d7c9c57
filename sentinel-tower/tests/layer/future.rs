//! The response future is a named type that is `Send` when the inner service's future is,
//! so the guarded service fits hyper and axum, which spawn it.

use std::convert::Infallible;
use std::future::{ready, Future, Ready};
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use http::{Request, Response, StatusCode};
use sentinel_core::flow::FlowRule;
use sentinel_tower::{BlockAsError, ResponseFuture, SentinelLayer};
use tower::{service_fn, Layer, Service};

use crate::support::{answer, call, engine_with, get};

fn is_send<T: Send + 'static>(_: &T) {}

#[tokio::test]
async fn the_response_future_is_send_in_every_state() {
    let (sentinel, _clock) = engine_with(vec![FlowRule::qps("GET:/order", 1.0)]);
    let (handler, _) = answer(StatusCode::OK);
    let mut service = SentinelLayer::new(sentinel).layer(handler);

    let passed = call(&mut service, get("/order", &[])).await;
    is_send(&passed);
    assert!(format!("{passed:?}").contains("running"), "{passed:?}");
    let blocked = call(&mut service, get("/order", &[])).await;
    is_send(&blocked);
    assert!(format!("{blocked:?}").contains("blocked"), "{blocked:?}");
    assert!(passed.await.is_ok());
    assert!(blocked.await.is_err());
}

#[test]
fn the_response_future_can_be_named() {
    type Handler =
        tower::util::ServiceFn<fn(Request<()>) -> Ready<Result<Response<()>, Infallible>>>;
    fn handle(_request: Request<()>) -> Ready<Result<Response<()>, Infallible>> {
        ready(Ok(Response::new(())))
    }
    let (sentinel, _clock) = engine_with(vec![]);
    let handler: Handler = service_fn(handle as fn(_) -> _);
    let mut service = SentinelLayer::new(sentinel).layer(handler);
    // No runtime needed: every rule is checked in `call`, and nothing here waits.
    let future: ResponseFuture<Handler, (), BlockAsError> = service.call(get("/order", &[]));
    let response = ready_at_once(future).expect("passes");
    assert_eq!(response.status(), StatusCode::OK);
}

/// Polls a future that is ready at once.
fn ready_at_once<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    match future.as_mut().poll(&mut cx) {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("the future was not ready"),
    }
}
