//! A response future dropped before it completes (the client went away) still exits its
//! entry, as an error.

use std::convert::Infallible;
use std::pin::pin;

use http::{Request, Response};
use sentinel_core::flow::FlowRule;
use sentinel_tower::SentinelLayer;
use tower::{service_fn, Layer};

use crate::support::{call, engine_with, get, poll_once};

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
