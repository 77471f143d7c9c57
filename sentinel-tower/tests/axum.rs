//! An axum router guarded by the layer with `ResourceKey::method_and_route`: every id of a
//! route is one resource, named by the route.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use sentinel_core::flow::FlowRule;
use sentinel_core::{FakeClock, Sentinel};
use sentinel_tower::{ResourceKey, SentinelLayer};
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
