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
