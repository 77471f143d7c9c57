//! An axum router guarded by the layer with `ResourceKey::method_and_route`: every id of a
//! route is one resource, named by the route; blocks answered from a handler (`Blocked`),
//! nested guards, and requests without a param-flow key.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderName, Request, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use sentinel_core::circuit_breaker::{BreakerState, DegradeRule};
use sentinel_core::flow::FlowRule;
use sentinel_core::param_flow::ParamFlowRule;
use sentinel_core::{FakeClock, RuleFamily, Sentinel};
use sentinel_tower::{
    BlockAnswer, BlockResponses, Blocked, ParamSource, ResourceKey, SentinelLayer,
};
use tower::ServiceExt;

async fn status(app: &Router, uri: &str) -> StatusCode {
    let request = Request::get(uri).body(Body::empty()).expect("a request");
    app.clone()
        .oneshot(request)
        .await
        .map(|response| response.status())
        .unwrap_or_else(|never| match never {})
}

#[tokio::test]
async fn every_id_of_a_route_is_one_resource() {
    let clock = FakeClock::new();
    let sentinel = Sentinel::builder().clock(clock.clone()).build();
    sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps("GET:/order/{id}", 2.0)])
        .expect("valid rules");
    let layer = SentinelLayer::new(sentinel.clone())
        .resource_key(ResourceKey::method_and_route())
        .on_block(|_blocked| StatusCode::TOO_MANY_REQUESTS.into_response());
    let app = Router::new()
        .route("/order/{id}", get(|| async { "order" }))
        .route_layer(layer);

    assert_eq!(status(&app, "/order/1").await, StatusCode::OK);
    assert_eq!(status(&app, "/order/2").await, StatusCode::OK);
    assert_eq!(
        status(&app, "/order/3").await,
        StatusCode::TOO_MANY_REQUESTS,
        "a third id in the same second is over the route's limit"
    );
    let stats = sentinel.resource_stats("GET:/order/{id}").expect("entered");
    assert_eq!((stats.pass_qps, stats.block_qps), (2.0, 1.0));
    assert!(sentinel.resource_stats("GET:/order/1").is_none());
    // An unknown path never reaches the route layer.
    assert_eq!(status(&app, "/nowhere").await, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn without_a_matched_route_the_path_names_the_resource() {
    let sentinel = Sentinel::new();
    // `layer` wraps each route, and the fallback too: a request no route matched passes
    // the layer without a matched route.
    let app = Router::new()
        .route("/order/{id}", get(|| async { "order" }))
        .layer(
            SentinelLayer::new(sentinel.clone())
                .resource_key(ResourceKey::method_and_route())
                .on_block(|_blocked| StatusCode::TOO_MANY_REQUESTS.into_response()),
        );
    assert_eq!(status(&app, "/order/7").await, StatusCode::OK);
    assert!(sentinel.resource_stats("GET:/order/{id}").is_some());
    assert_eq!(status(&app, "/nowhere").await, StatusCode::NOT_FOUND);
    assert!(sentinel.resource_stats("GET:/nowhere").is_some());
}

/// tokio-rs/axum#2634: a limit on a router must hold across the per-connection clones of
/// the service that `axum::serve` makes. 1 500 concurrent requests, one connection each,
/// against 5 a second, on a clock that stands still: exactly 5 pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_holds_across_axum_serves_per_connection_clones() {
    let clock = FakeClock::new();
    let sentinel = Sentinel::builder().clock(clock).build();
    sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps("GET:/", 5.0)])
        .expect("valid rules");
    let app = Router::new().route("/", get(|| async { "ok" })).layer(
        SentinelLayer::new(sentinel.clone())
            .on_block(|_blocked| StatusCode::TOO_MANY_REQUESTS.into_response()),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let url = format!("http://{}/", listener.local_addr().expect("bound"));
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let client = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(0)
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .expect("a client");
    let requests: Vec<_> = (0..1_500)
        .map(|_| {
            let (client, url) = (client.clone(), url.clone());
            tokio::spawn(async move { client.get(url).send().await.map(|r| r.status()) })
        })
        .collect();
    let (mut ok, mut limited, mut failed) = (0, 0, Vec::new());
    for request in requests {
        match request.await.expect("the task ran") {
            Ok(status) if status == reqwest::StatusCode::OK => ok += 1,
            Ok(status) if status == reqwest::StatusCode::TOO_MANY_REQUESTS => limited += 1,
            // A loaded machine may refuse a connection of the burst: it never passed.
            other => failed.push(format!("{other:?}")),
        }
    }
    server.abort();
    assert_eq!(ok, 5, "{limited} limited, failed: {failed:?}");
    assert!(
        limited >= 1_000,
        "the burst reached the layer: {limited} limited, {failed:?}"
    );
}

async fn send(app: &Router, request: Request<Body>) -> axum::response::Response {
    app.clone()
        .oneshot(request)
        .await
        .unwrap_or_else(|never| match never {})
}

fn get_as(uri: &str, user: Option<&str>) -> Request<Body> {
    let mut request = Request::get(uri);
    if let Some(user) = user {
        request = request.header("x-user-id", user);
    }
    request.body(Body::empty()).expect("a request")
}

/// `Blocked` answers a block inside a handler in one line (`?`), with the ready-made
/// response and its mark.
#[tokio::test]
async fn blocked_answers_a_block_inside_a_handler_with_one_question_mark() {
    async fn report(State(sentinel): State<Sentinel>) -> Result<&'static str, Blocked> {
        let _entry = sentinel.entry("report.render").enter()?;
        Ok("the report")
    }
    let sentinel = Sentinel::builder().clock(FakeClock::new()).build();
    sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps("report.render", 1.0)])
        .expect("valid rules");
    let app = Router::new()
        .route("/report", get(report))
        .with_state(sentinel.clone());

    assert_eq!(
        send(&app, get_as("/report", None)).await.status(),
        StatusCode::OK
    );
    let blocked = send(&app, get_as("/report", None)).await;
    assert_eq!(blocked.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(blocked.headers()[RETRY_AFTER], "1");
    assert_eq!(
        blocked.extensions().get::<BlockAnswer>(),
        Some(&BlockAnswer::new(RuleFamily::Flow))
    );
}

/// A route whose handler fails its first two calls, guarded by an inner layer (resource
/// `inner.pay`, its breaker opening after 2 errors) inside the route's layer (`GET:/pay`,
/// its breaker opening after 4 errors); both answer blocks with `BlockResponses`.
fn nested_guards(sentinel: &Sentinel, count_block_answers: bool) -> (Router, Arc<AtomicUsize>) {
    sentinel
        .degrade_rules()
        .load_rules(vec![
            DegradeRule::error_count("inner.pay", 1.0, 60).min_request_amount(1),
            DegradeRule::error_count("GET:/pay", 3.0, 60).min_request_amount(1),
        ])
        .expect("valid rules");
    let calls = Arc::new(AtomicUsize::new(0));
    let handler = {
        let calls = Arc::clone(&calls);
        move || async move {
            match calls.fetch_add(1, Ordering::SeqCst) {
                0 | 1 => StatusCode::INTERNAL_SERVER_ERROR,
                _ => StatusCode::OK,
            }
        }
    };
    let inner = SentinelLayer::new(sentinel.clone())
        .resource_key(ResourceKey::from_fn(|_: &Request<Body>| "inner.pay"))
        .respond_with(BlockResponses::new());
    let outer = SentinelLayer::new(sentinel.clone())
        .resource_key(ResourceKey::method_and_route())
        .count_block_answers(count_block_answers)
        .respond_with(BlockResponses::new());
    let app = Router::new()
        .route("/pay", get(handler).layer(inner))
        .route_layer(outer);
    (app, calls)
}

fn breaker_state(sentinel: &Sentinel, resource: &str) -> BreakerState {
    sentinel
        .circuit_breakers()
        .into_iter()
        .find(|(rule, _)| rule.resource == resource)
        .map(|(_, state)| state)
        .expect("a breaker for the resource")
}

#[tokio::test]
async fn an_inner_breakers_503s_do_not_trip_the_routes_breaker() {
    let sentinel = Sentinel::builder().clock(FakeClock::new()).build();
    let (app, calls) = nested_guards(&sentinel, false);
    let mut statuses = Vec::new();
    for _ in 0..8 {
        statuses.push(send(&app, get_as("/pay", None)).await.status().as_u16());
    }
    assert_eq!(statuses, [500, 500, 503, 503, 503, 503, 503, 503]);
    assert_eq!(breaker_state(&sentinel, "inner.pay"), BreakerState::Open);
    assert_eq!(
        breaker_state(&sentinel, "GET:/pay"),
        BreakerState::Closed,
        "the inner breaker's answers are not errors of the route"
    );
    let route = sentinel.resource_stats("GET:/pay").expect("entered");
    assert_eq!((route.pass_qps, route.error_qps), (8.0, 2.0));
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "the handler saw only the first two"
    );
}

#[tokio::test]
async fn counted_block_answers_trip_the_routes_breaker() {
    let sentinel = Sentinel::builder().clock(FakeClock::new()).build();
    let (app, _calls) = nested_guards(&sentinel, true);
    for _ in 0..8 {
        send(&app, get_as("/pay", None)).await;
    }
    assert_eq!(breaker_state(&sentinel, "GET:/pay"), BreakerState::Open);
    let route = sentinel.resource_stats("GET:/pay").expect("entered");
    // 2 handler errors and 2 inner blocks open it (more than 3); the next 4 are its own.
    assert_eq!((route.pass_qps, route.block_qps), (4.0, 4.0));
}

/// An axum route limited to 1 call a second per user (argument 0), the user read by `source`.
fn per_user(sentinel: &Sentinel, source: ParamSource) -> (Router, Arc<AtomicUsize>) {
    sentinel
        .param_flow_rules()
        .load_rules(vec![ParamFlowRule::qps("GET:/order/{id}", 0, 1.0)])
        .expect("valid rules");
    let calls = Arc::new(AtomicUsize::new(0));
    let handler = {
        let calls = Arc::clone(&calls);
        move || async move {
            calls.fetch_add(1, Ordering::SeqCst);
            "order"
        }
    };
    let layer = SentinelLayer::new(sentinel.clone())
        .resource_key(ResourceKey::method_and_route())
        .arg(source)
        .respond_with(BlockResponses::new());
    let app = Router::new()
        .route("/order/{id}", get(handler))
        .route_layer(layer);
    (app, calls)
}

fn user_header() -> ParamSource {
    ParamSource::header(HeaderName::from_static("x-user-id"))
}

async fn statuses(app: &Router, requests: Vec<Request<Body>>) -> Vec<u16> {
    let mut statuses = Vec::new();
    for request in requests {
        statuses.push(send(app, request).await.status().as_u16());
    }
    statuses
}

#[tokio::test]
async fn a_request_without_the_key_passes_unchecked_by_default() {
    let sentinel = Sentinel::builder().clock(FakeClock::new()).build();
    let (app, _) = per_user(&sentinel, user_header());
    let requests = vec![
        get_as("/order/1", None),
        get_as("/order/1", None),
        get_as("/order/1", None),
        get_as("/order/1", Some("alice")),
        get_as("/order/1", Some("alice")),
    ];
    assert_eq!(statuses(&app, requests).await, [200, 200, 200, 200, 429]);
}

#[tokio::test]
async fn or_block_refuses_a_request_without_the_key() {
    let sentinel = Sentinel::builder().clock(FakeClock::new()).build();
    let (app, calls) = per_user(&sentinel, user_header().or_block());
    let refused = send(&app, get_as("/order/1", None)).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(
        refused.headers().get(RETRY_AFTER).is_none(),
        "waiting does not help"
    );
    assert_eq!(
        refused.extensions().get::<BlockAnswer>(),
        Some(&BlockAnswer::new(RuleFamily::ParamFlow))
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0, "the handler never saw it");
    assert!(
        sentinel.resource_stats("GET:/order/{id}").is_none(),
        "it never entered"
    );
    let requests = vec![get_as("/order/1", Some("alice")), get_as("/order/1", None)];
    assert_eq!(statuses(&app, requests).await, [200, 429]);
}

#[tokio::test]
async fn or_value_gives_requests_without_the_key_one_shared_limit() {
    let sentinel = Sentinel::builder().clock(FakeClock::new()).build();
    let (app, _) = per_user(&sentinel, user_header().or_value("anonymous"));
    let requests = vec![
        get_as("/order/1", None),
        get_as("/order/2", None),
        get_as("/order/1", Some("alice")),
        get_as("/order/1", Some("anonymous")),
    ];
    assert_eq!(statuses(&app, requests).await, [200, 429, 200, 429]);
}

#[tokio::test]
async fn or_falls_back_to_another_source_then_to_a_block() {
    let sentinel = Sentinel::builder().clock(FakeClock::new()).build();
    let source = user_header().or(ParamSource::query("user")).or_block();
    let (app, _) = per_user(&sentinel, source);
    let requests = vec![
        get_as("/order/1?user=bob", None),
        get_as("/order/1", Some("bob")),
        get_as("/order/1?user=carol", None),
        get_as("/order/1", None),
    ];
    assert_eq!(statuses(&app, requests).await, [200, 429, 200, 429]);
}
