//! Statuses, errors and response times reach the circuit breakers.

use std::convert::Infallible;
use std::io;

use http::{Request, Response, StatusCode};
use sentinel_core::circuit_breaker::{BreakerState, DegradeRule};
use sentinel_core::{RuleFamily, Sentinel};
use sentinel_tower::{SentinelError, SentinelLayer};
use tower::{service_fn, Layer, Service};

use crate::support::{answer, engine, get, send};

/// Sends five requests that must pass, then one more; returns how the last one ended.
async fn trip<S>(service: S, path: &str) -> Result<S::Response, S::Error>
where
    S: Service<Request<()>> + Clone,
{
    for _ in 0..5 {
        let _ = send(service.clone(), get(path, &[])).await;
    }
    send(service, get(path, &[])).await
}

fn breaker_state(sentinel: &Sentinel, resource: &str) -> BreakerState {
    let breakers = sentinel.circuit_breakers();
    let (_, state) = breakers
        .iter()
        .find(|(rule, _)| rule.resource == resource)
        .expect("a breaker for the resource");
    *state
}

fn blocked_by_breaker<R: std::fmt::Debug, E: std::fmt::Debug>(result: Result<R, SentinelError<E>>) {
    match result {
        Err(SentinelError::Blocked(error)) => assert_eq!(error.family(), RuleFamily::Degrade),
        other => panic!("expected a circuit-breaker block, got {other:?}"),
    }
}

#[tokio::test]
async fn server_errors_trip_an_error_ratio_breaker() {
    let (sentinel, _clock) = engine();
    sentinel
        .degrade_rules()
        .load_rules(vec![
            DegradeRule::error_ratio("GET:/pay", 0.5, 10).min_request_amount(5)
        ])
        .expect("valid rules");
    let (handler, _) = answer(StatusCode::INTERNAL_SERVER_ERROR);
    let service = SentinelLayer::new(sentinel.clone()).layer(handler);

    blocked_by_breaker(trip(service, "/pay").await);
    assert_eq!(breaker_state(&sentinel, "GET:/pay"), BreakerState::Open);
    let stats = sentinel.resource_stats("GET:/pay").expect("entered");
    assert_eq!(stats.error_qps, 5.0);
}

#[tokio::test]
async fn inner_errors_trip_an_error_count_breaker() {
    let (sentinel, _clock) = engine();
    sentinel
        .degrade_rules()
        .load_rules(vec![
            DegradeRule::error_count("GET:/pay", 3.0, 10).min_request_amount(5)
        ])
        .expect("valid rules");
    let failing = service_fn(|_request: Request<()>| async {
        Err::<Response<()>, _>(io::Error::other("database down"))
    });
    let service = SentinelLayer::new(sentinel.clone()).layer(failing);

    let first = send(service.clone(), get("/pay", &[])).await;
    match first {
        Err(SentinelError::Inner(error)) => assert_eq!(error.to_string(), "database down"),
        other => panic!("expected the inner error, got {other:?}"),
    }
    blocked_by_breaker(trip(service, "/pay").await);
    assert_eq!(breaker_state(&sentinel, "GET:/pay"), BreakerState::Open);
}

#[tokio::test]
async fn error_if_decides_which_statuses_count() {
    let (sentinel, _clock) = engine();
    sentinel
        .degrade_rules()
        .load_rules(vec![
            DegradeRule::error_ratio("GET:/pay", 0.5, 10).min_request_amount(5),
            DegradeRule::error_ratio("GET:/refund", 0.5, 10).min_request_amount(5),
        ])
        .expect("valid rules");

    // 503 is the upstream's own load shedding here, not a failure of this resource...
    let (unavailable, _) = answer(StatusCode::SERVICE_UNAVAILABLE);
    let service = SentinelLayer::new(sentinel.clone())
        .error_if(|status| status.is_server_error() && status != StatusCode::SERVICE_UNAVAILABLE)
        .layer(unavailable);
    let last = trip(service, "/pay")
        .await
        .expect("not counted: never blocked");
    assert_eq!(last.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(breaker_state(&sentinel, "GET:/pay"), BreakerState::Closed);

    // ...while a 404 may be one.
    let (not_found, _) = answer(StatusCode::NOT_FOUND);
    let service = SentinelLayer::new(sentinel.clone())
        .error_if(|status| status == StatusCode::NOT_FOUND)
        .layer(not_found);
    blocked_by_breaker(trip(service, "/refund").await);
}

#[tokio::test]
async fn a_slow_handler_trips_a_slow_call_breaker() {
    let (sentinel, clock) = engine();
    sentinel
        .degrade_rules()
        .load_rules(vec![
            DegradeRule::slow_ratio("GET:/search", 100.0, 0.5, 10).min_request_amount(5)
        ])
        .expect("valid rules");
    // Each request takes 150 ms on the engine's clock.
    let slow = service_fn(move |_request: Request<()>| {
        let clock = clock.clone();
        async move {
            clock.advance_ms(150);
            Ok::<_, Infallible>(Response::new(()))
        }
    });
    let service = SentinelLayer::new(sentinel.clone()).layer(slow);

    blocked_by_breaker(trip(service, "/search").await);
    assert_eq!(breaker_state(&sentinel, "GET:/search"), BreakerState::Open);
    let stats = sentinel.resource_stats("GET:/search").expect("entered");
    assert_eq!(stats.error_qps, 0.0, "slow, not failed");
}
