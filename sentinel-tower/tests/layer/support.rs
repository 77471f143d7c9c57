//! Engines on a fake clock, requests and handlers.

use std::convert::Infallible;
use std::fmt::Debug;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;

use http::{Request, Response, StatusCode};
use sentinel_core::flow::FlowRule;
use sentinel_core::{FakeClock, Sentinel};
use tower::{service_fn, Service, ServiceExt};

/// An engine on a fake clock, at a time aligned to every statistic window.
pub(crate) fn engine() -> (Sentinel, FakeClock) {
    let clock = FakeClock::at_ms(1_000_000);
    let sentinel = Sentinel::builder().clock(clock.clone()).build();
    (sentinel, clock)
}

/// An [`engine`] with `rules` loaded.
pub(crate) fn engine_with(rules: Vec<FlowRule>) -> (Sentinel, FakeClock) {
    let (sentinel, clock) = engine();
    sentinel
        .flow_rules()
        .load_rules(rules)
        .expect("valid rules");
    (sentinel, clock)
}

/// `GET path`, with `headers`.
pub(crate) fn get(path: &str, headers: &[(&'static str, &str)]) -> Request<()> {
    let mut builder = Request::get(path);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder.body(()).expect("a valid request")
}

/// A handler answering every request with `status`, and counting the requests it saw.
pub(crate) fn answer(
    status: StatusCode,
) -> (
    impl Service<Request<()>, Response = Response<()>, Error = Infallible, Future: Send>
        + Clone
        + Send
        + 'static,
    Arc<AtomicUsize>,
) {
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&seen);
    let handler = service_fn(move |_request: Request<()>| {
        counter.fetch_add(1, Ordering::SeqCst);
        async move {
            let mut response = Response::new(());
            *response.status_mut() = status;
            Ok::<_, Infallible>(response)
        }
    });
    (handler, seen)
}

/// Waits for `service` to be ready and calls it, without polling the response future.
pub(crate) async fn call<S>(service: &mut S, request: Request<()>) -> S::Future
where
    S: Service<Request<()>>,
    S::Error: Debug,
{
    service.ready().await.expect("ready").call(request)
}

/// Polls `future` once.
pub(crate) async fn poll_once<F: Future>(mut future: Pin<&mut F>) -> Poll<F::Output> {
    poll_fn(|cx| Poll::Ready(future.as_mut().poll(cx))).await
}

/// Sends `request` through `service`: ready, then call.
pub(crate) async fn send<S>(mut service: S, request: Request<()>) -> Result<S::Response, S::Error>
where
    S: Service<Request<()>>,
{
    service.ready().await?.call(request).await
}
