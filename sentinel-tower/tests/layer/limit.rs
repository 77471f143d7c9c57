//! Clones of a service, and services of one layer, share one engine and so one limit.

use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response, StatusCode};
use sentinel_core::flow::FlowRule;
use sentinel_core::RuleFamily;
use sentinel_tower::{SentinelError, SentinelLayer};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::timeout;
use tower::{service_fn, Layer};

use crate::support::{answer, engine_with, get, send};

#[tokio::test]
async fn concurrent_clones_share_one_qps_limit() {
    let (sentinel, _clock) = engine_with(vec![FlowRule::qps("GET:/order", 5.0)]);
    let (handler, seen) = answer(StatusCode::OK);
    let service = SentinelLayer::new(sentinel.clone()).layer(handler);
    let clones = [service.clone(), service];

    // Ten requests in flight at once, alternating between the two clones.
    let mut requests = JoinSet::new();
    for i in 0..10 {
        requests.spawn(send(clones[i % 2].clone(), get("/order", &[])));
    }
    let (mut passed, mut blocked) = (0, 0);
    while let Some(result) = requests.join_next().await {
        match result.expect("the request task finished") {
            Ok(response) => {
                assert_eq!(response.status(), StatusCode::OK);
                passed += 1;
            }
            Err(SentinelError::Blocked(error)) => {
                assert_eq!(error.family(), RuleFamily::Flow);
                blocked += 1;
            }
            Err(other) => panic!("unexpected error: {other}"),
        }
    }
    assert_eq!((passed, blocked), (5, 5));
    assert_eq!(seen.load(Ordering::SeqCst), 5);
    let stats = sentinel.resource_stats("GET:/order").expect("entered");
    assert_eq!(stats.pass_qps, 5.0);
    assert_eq!(stats.block_qps, 5.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_of_one_layer_share_a_concurrency_limit_across_threads() {
    let (sentinel, _clock) = engine_with(vec![FlowRule::thread("GET:/slow", 2.0)]);
    // Handlers that hold their request until a permit is added for it.
    let release = Arc::new(Semaphore::new(0));
    let handler = {
        let release = Arc::clone(&release);
        service_fn(move |_request: Request<()>| {
            let release = Arc::clone(&release);
            async move {
                release.acquire().await.expect("never closed").forget();
                Ok::<_, Infallible>(Response::new(()))
            }
        })
    };
    let layer = SentinelLayer::new(sentinel.clone());
    let services = [layer.layer(handler.clone()), layer.layer(handler)];

    let mut requests = JoinSet::new();
    for i in 0..6 {
        requests.spawn(send(services[i % 2].clone(), get("/slow", &[])));
    }
    // The four over the limit are answered at once, while two are inside.
    for _ in 0..4 {
        let result = timeout(Duration::from_secs(10), requests.join_next())
            .await
            .expect("blocked requests are answered without waiting")
            .expect("a request is left")
            .expect("the request task finished");
        assert!(
            matches!(result, Err(SentinelError::Blocked(_))),
            "{result:?}"
        );
    }
    let stats = sentinel.resource_stats("GET:/slow").expect("entered");
    assert_eq!(stats.concurrency, 2);

    release.add_permits(2);
    while let Some(result) = timeout(Duration::from_secs(10), requests.join_next())
        .await
        .expect("released requests finish")
    {
        result.expect("the request task finished").expect("passed");
    }
    let stats = sentinel.resource_stats("GET:/slow").expect("entered");
    assert_eq!(stats.concurrency, 0);
}
