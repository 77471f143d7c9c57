//! A blocked request never reaches the inner service and gets an error or the mapped
//! response.

use std::sync::atomic::Ordering;

use http::{Response, StatusCode};
use sentinel_core::flow::FlowRule;
use sentinel_core::RuleFamily;
use sentinel_tower::{SentinelError, SentinelLayer};
use tower::Layer;

use crate::support::{answer, engine_with, get, send};

#[tokio::test]
async fn a_blocked_request_fails_with_the_block_error() {
    let (sentinel, _clock) = engine_with(vec![FlowRule::qps("GET:/order", 1.0)]);
    let (handler, seen) = answer(StatusCode::OK);
    let service = SentinelLayer::new(sentinel).layer(handler);

    let first = send(service.clone(), get("/order", &[])).await;
    assert_eq!(first.expect("passes").status(), StatusCode::OK);
    let error = send(service, get("/order", &[]))
        .await
        .expect_err("over the limit");
    let blocked = error.blocked().expect("a block, not an inner error");
    assert_eq!(blocked.family(), RuleFamily::Flow);
    assert_eq!(blocked.resource(), "GET:/order");
    assert!(
        error.to_string().starts_with("request blocked: "),
        "{error}"
    );
    assert!(matches!(error, SentinelError::Blocked(_)));
    assert_eq!(
        seen.load(Ordering::SeqCst),
        1,
        "the inner service saw only the first"
    );
}

#[tokio::test]
async fn on_block_answers_with_the_mapped_status() {
    let (sentinel, _clock) = engine_with(vec![FlowRule::qps("GET:/order", 1.0)]);
    let (handler, seen) = answer(StatusCode::OK);
    let service = SentinelLayer::new(sentinel)
        .on_block(|blocked| {
            let status = match blocked.family() {
                RuleFamily::Flow => StatusCode::TOO_MANY_REQUESTS,
                _ => StatusCode::SERVICE_UNAVAILABLE,
            };
            let mut response = Response::new(());
            *response.status_mut() = status;
            response
        })
        .layer(handler);

    // The service keeps the handler's infallible error type.
    let statuses: Vec<StatusCode> = [
        send(service.clone(), get("/order", &[])).await,
        send(service, get("/order", &[])).await,
    ]
    .into_iter()
    .map(
        |result: Result<Response<()>, std::convert::Infallible>| match result {
            Ok(response) => response.status(),
        },
    )
    .collect();
    assert_eq!(statuses, [StatusCode::OK, StatusCode::TOO_MANY_REQUESTS]);
    assert_eq!(seen.load(Ordering::SeqCst), 1);
}

/// A handler answering `200 ok` with a `String` body.
fn text_handler() -> impl tower::Service<
    http::Request<()>,
    Response = Response<String>,
    Error = std::convert::Infallible,
    Future: Send,
> + Clone {
    tower::service_fn(|_request: http::Request<()>| async {
        Ok::<_, std::convert::Infallible>(Response::new(String::from("ok")))
    })
}

async fn blocked_response(sentinel: sentinel_core::Sentinel, path: &str) -> Response<String> {
    let service = SentinelLayer::new(sentinel)
        .respond_with(sentinel_tower::BlockResponses::new())
        .layer(text_handler());
    let mut last = None;
    for _ in 0..3 {
        let response: Result<Response<String>, std::convert::Infallible> =
            send(service.clone(), get(path, &[])).await;
        let Ok(response) = response;
        last = Some(response);
    }
    last.expect("three answers")
}

#[tokio::test]
async fn respond_with_gives_429_and_retry_after_for_a_qps_limit() {
    let (sentinel, _clock) = engine_with(vec![FlowRule::qps("GET:/order", 2.0)]);
    let response = blocked_response(sentinel, "/order").await;
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(response.headers()["retry-after"], "1");
    assert_eq!(response.body(), "too many requests, retry later\n");
    assert!(!response.body().contains("GET:/order"));
}

#[tokio::test]
async fn a_rate_limiter_under_one_call_a_second_asks_for_its_spacing() {
    use sentinel_core::flow::ControlBehavior;
    let rule = FlowRule::qps("GET:/slow", 0.25)
        .control_behavior(ControlBehavior::RateLimiter)
        .max_queueing_time_ms(1);
    let (sentinel, _clock) = engine_with(vec![rule]);
    let response = blocked_response(sentinel, "/slow").await;
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(response.headers()["retry-after"], "4");
}

#[tokio::test]
async fn an_open_breaker_answers_503_with_the_time_left_until_its_probe() {
    use sentinel_core::circuit_breaker::DegradeRule;
    let (sentinel, clock) = crate::support::engine();
    sentinel
        .degrade_rules()
        .load_rules(vec![
            DegradeRule::error_count("GET:/pay", 1.0, 7).min_request_amount(1)
        ])
        .expect("valid rule");
    let sentinel_handle = sentinel.clone();
    let failing = tower::service_fn(|_request: http::Request<()>| async {
        let mut response = Response::new(String::from("boom"));
        *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
        Ok::<_, std::convert::Infallible>(response)
    });
    let service = SentinelLayer::new(sentinel)
        .respond_with(sentinel_tower::BlockResponses::new())
        .layer(failing);
    let mut statuses = Vec::new();
    let mut retry_after = None;
    for _ in 0..4 {
        let answer: Result<Response<String>, std::convert::Infallible> =
            send(service.clone(), get("/pay", &[])).await;
        let Ok(response) = answer;
        statuses.push(response.status());
        if response.status() == StatusCode::SERVICE_UNAVAILABLE {
            retry_after = response.headers().get("retry-after").cloned();
            assert_eq!(
                response.body(),
                "service temporarily unavailable, retry later\n"
            );
        }
    }
    assert_eq!(statuses[0], StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(statuses[3], StatusCode::SERVICE_UNAVAILABLE, "{statuses:?}");
    assert_eq!(retry_after.expect("a Retry-After"), "7");
    // 4.5 s later the breaker is still open, with 2.5 s to go: rounded up, 3.
    clock.advance_ms(4_500);
    let blocked = sentinel_handle
        .entry("GET:/pay")
        .enter()
        .expect_err("still open");
    assert_eq!(
        sentinel_tower::BlockResponses::wait_of(&blocked),
        Some(std::time::Duration::from_millis(2_500))
    );
    let response: Response<String> = sentinel_tower::BlockResponses::new().response(&blocked);
    assert_eq!(response.headers()["retry-after"], "3");
}

#[tokio::test]
async fn statuses_are_chosen_per_family_and_concurrency_limits_send_no_retry_after() {
    let (sentinel, _clock) = engine_with(vec![FlowRule::thread("GET:/busy", 0.0)]);
    let service = SentinelLayer::new(sentinel)
        .respond_with(
            sentinel_tower::BlockResponses::new()
                .status(RuleFamily::Flow, StatusCode::SERVICE_UNAVAILABLE),
        )
        .layer(text_handler());
    let answer: Result<Response<String>, std::convert::Infallible> =
        send(service, get("/busy", &[])).await;
    let Ok(response) = answer;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(response.headers().get("retry-after").is_none());
}
