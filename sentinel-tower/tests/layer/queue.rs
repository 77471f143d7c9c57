//! A rate-limiter rule makes requests queue on tokio's timer, not by blocking the thread.

use std::convert::Infallible;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{Request, Response, StatusCode};
use sentinel_core::flow::{ControlBehavior, FlowRule};
use sentinel_core::Sentinel;
use sentinel_tower::{SentinelError, SentinelLayer};
use tokio::task::JoinSet;
use tower::{Layer, Service};

use crate::support::{answer, call, get, poll_once, send};

/// An engine on the system clock (the wait the rate limiter imposes is a real one) that
/// spaces `GET:/export` requests to `qps` a second, queueing them up to 5 s.
fn rate_limited(qps: f64) -> Sentinel {
    let sentinel = Sentinel::new();
    sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps("GET:/export", qps)
            .control_behavior(ControlBehavior::RateLimiter)
            .max_queueing_time_ms(5_000)])
        .expect("valid rules");
    sentinel
}

/// A service on [`rate_limited`] to 1 a second whose first request has passed, so the next
/// one queues; and how many requests its handler saw.
async fn one_passed() -> (
    Sentinel,
    impl Service<Request<()>, Response = Response<()>, Error = SentinelError<Infallible>> + Clone,
    Arc<AtomicUsize>,
) {
    let sentinel = rate_limited(1.0);
    let (handler, seen) = answer(StatusCode::OK);
    let service = SentinelLayer::new(sentinel.clone()).layer(handler);
    send(service.clone(), get("/export", &[]))
        .await
        .expect("the first passes at once");
    (sentinel, service, seen)
}

// Paused tokio time: a sleep ends as soon as the runtime is idle, and tokio's clock jumps
// by its length. A thread put to sleep instead would take the whole wait in real time,
// and move tokio's clock by nothing.
#[tokio::test(start_paused = true)]
async fn a_rate_limiter_queues_on_tokio_time() {
    let sentinel = rate_limited(2.0);
    let (handler, _) = answer(StatusCode::OK);
    let service = SentinelLayer::new(sentinel.clone()).layer(handler);

    let (wall, tokio_clock) = (Instant::now(), tokio::time::Instant::now());
    // Three requests at once, 500 ms apart by the rule: the last waits about a second.
    let mut requests = JoinSet::new();
    for _ in 0..3 {
        requests.spawn(send(service.clone(), get("/export", &[])));
    }
    while let Some(result) = requests.join_next().await {
        let response = result
            .expect("the request task finished")
            .expect("queued, then passed");
        assert_eq!(response.status(), StatusCode::OK);
    }
    let queued = tokio_clock.elapsed();
    assert!(
        queued >= Duration::from_millis(900),
        "queued on tokio's timer: {queued:?}"
    );
    let real = wall.elapsed();
    assert!(
        real < Duration::from_millis(900),
        "no thread slept the wait: {real:?}"
    );
    let stats = sentinel.resource_stats("GET:/export").expect("entered");
    assert_eq!((stats.block_qps, stats.concurrency), (0.0, 0));
}

#[tokio::test(start_paused = true)]
async fn a_request_dropped_while_it_queues_is_not_counted() {
    let (sentinel, mut service, seen) = one_passed().await;
    {
        let mut queued = pin!(call(&mut service, get("/export", &[])).await);
        let first_poll = poll_once(queued.as_mut()).await;
        assert!(first_poll.is_pending(), "the second waits for its slot");
        // The client goes away while it waits.
    }
    let stats = sentinel.resource_stats("GET:/export").expect("entered");
    assert_eq!(
        (
            stats.pass_qps,
            stats.block_qps,
            stats.error_qps,
            stats.concurrency
        ),
        (1.0, 0.0, 0.0, 0),
        "the dropped request never started"
    );
    assert_eq!(seen.load(Ordering::SeqCst), 1, "nor reached the handler");
}

#[tokio::test(start_paused = true)]
async fn a_queued_request_reaches_the_handler_when_its_wait_is_over() {
    let (sentinel, mut service, seen) = one_passed().await;
    let tokio_clock = tokio::time::Instant::now();
    let mut queued = pin!(call(&mut service, get("/export", &[])).await);
    assert!(poll_once(queued.as_mut()).await.is_pending());
    assert_eq!(
        seen.load(Ordering::SeqCst),
        1,
        "the handler waits for the slot"
    );
    let stats = sentinel.resource_stats("GET:/export").expect("entered");
    assert_eq!(
        (stats.pass_qps, stats.concurrency),
        (1.0, 0),
        "not counted while it waits"
    );

    let response = queued.await.expect("passed after its wait");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(seen.load(Ordering::SeqCst), 2);
    let waited = tokio_clock.elapsed();
    assert!(
        waited >= Duration::from_millis(900),
        "waited for the slot: {waited:?}"
    );
    let stats = sentinel.resource_stats("GET:/export").expect("entered");
    assert_eq!((stats.block_qps, stats.concurrency), (0.0, 0));
}
