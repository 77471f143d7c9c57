//! Guards inside guards: an inner guard's block answer is not an error of the outer
//! resource by default, on either side; and a queued call reaches the service after its
//! wait.

use std::time::{Duration, Instant};

use sentinel_core::circuit_breaker::DegradeRule;
use sentinel_core::flow::{ControlBehavior, FlowRule};
use sentinel_core::Sentinel;
use sentinel_tonic::{ResourceKey, SentinelGrpcLayer};
use tonic::body::Body;
use tonic::{Code, Status};
use tower::{service_fn, Layer, ServiceExt};

use crate::support::{client, engine, say, serve, SAY};

/// An outer engine with an error-count breaker (one error opens it) on resource "outer".
fn outer_engine() -> Sentinel {
    let (sentinel, _clock) = engine();
    sentinel
        .degrade_rules()
        .load_rules(vec![
            DegradeRule::error_count("outer", 0.0, 10).min_request_amount(1)
        ])
        .expect("valid rules");
    sentinel
}

/// An inner engine that blocks every call of `SAY` (answered `UNAVAILABLE`, a counted code).
fn blocking_inner() -> Sentinel {
    let (sentinel, _clock) = engine();
    sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps(SAY, 0.0)])
        .expect("valid rules");
    sentinel
}

fn outer_key(
) -> sentinel_tonic::ResourceKeyFn<impl Fn(&http::Request<Body>) -> &'static str + Clone> {
    ResourceKey::from_fn(|_: &http::Request<Body>| "outer")
}

fn unavailable(_: &sentinel_core::BlockError) -> Status {
    Status::unavailable("inner guard")
}

async fn errors_of_outer(count_block_answers: bool, client_side: bool) -> f64 {
    let outer = outer_engine();
    let (outer_layer, inner_layer) = if client_side {
        (
            SentinelGrpcLayer::client(outer.clone()),
            SentinelGrpcLayer::client(blocking_inner()),
        )
    } else {
        (
            SentinelGrpcLayer::server(outer.clone()),
            SentinelGrpcLayer::server(blocking_inner()),
        )
    };
    let never_reached = service_fn(|_: http::Request<Body>| async {
        Err::<http::Response<Body>, Status>(Status::internal("the inner guard blocks first"))
    });
    let service = outer_layer
        .resource_key(outer_key())
        .count_block_answers(count_block_answers)
        .layer(inner_layer.on_block(unavailable).layer(never_reached));
    for _ in 0..2 {
        let request = http::Request::post(SAY).body(Body::empty()).expect("valid");
        let outcome = service.clone().oneshot(request).await;
        let code = match outcome {
            Ok(response) => tonic::Status::from_header_map(response.headers()).map(|s| s.code()),
            Err(error) => error.downcast_ref::<Status>().map(Status::code),
        };
        assert_eq!(code, Some(Code::Unavailable));
    }
    outer.resource_stats("outer").expect("entered").error_qps
}

#[tokio::test]
async fn an_inner_servers_block_answers_are_not_errors_of_the_outer_resource() {
    assert_eq!(errors_of_outer(false, false).await, 0.0);
    assert_eq!(
        errors_of_outer(true, false).await,
        1.0,
        "counted, the first opens the breaker"
    );
}

#[tokio::test]
async fn an_inner_clients_blocks_are_not_errors_of_the_outer_resource() {
    assert_eq!(errors_of_outer(false, true).await, 0.0);
    assert_eq!(
        errors_of_outer(true, true).await,
        1.0,
        "counted, the first opens the breaker"
    );
}

#[tokio::test]
async fn a_call_a_rate_limiter_queues_reaches_the_server_after_its_wait() {
    // A real clock: the fake one advances itself instead of queueing.
    let sentinel = Sentinel::new();
    sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps(SAY, 10.0)
            .control_behavior(ControlBehavior::RateLimiter)
            .max_queueing_time_ms(5_000)])
        .expect("valid rules");
    let server = serve(Some(SentinelGrpcLayer::server(sentinel.clone()))).await;
    let client = client(server.addr, None).await;

    let started = Instant::now();
    let (mut a, mut b, mut c) = (client.clone(), client.clone(), client);
    let calls = tokio::join!(
        say(&mut a, Code::Ok),
        say(&mut b, Code::Ok),
        say(&mut c, Code::Ok)
    );
    for call in [calls.0, calls.1, calls.2] {
        assert!(call.is_ok(), "queued, not blocked: {call:?}");
    }
    // Spaced 100 ms apart: the third waited at least 200 ms (a lower bound only).
    assert!(
        started.elapsed() >= Duration::from_millis(190),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(server.echo.calls(), 3);
    assert_eq!(
        sentinel.resource_stats(SAY).expect("entered").block_qps,
        0.0
    );
}
