//! Resource names and origins come from the request.

use http::StatusCode;
use sentinel_core::flow::FlowRule;
use sentinel_tower::{ResourceKey, SentinelLayer};
use tower::Layer;

use crate::support::{answer, engine, get, send};

#[tokio::test]
async fn a_closure_names_the_resource() {
    let (sentinel, _clock) = engine();
    let (handler, _) = answer(StatusCode::OK);
    // Every order id is one resource.
    let service = SentinelLayer::new(sentinel.clone())
        .resource_key(ResourceKey::from_fn(
            |request: &http::Request<()>| match request.uri().path().strip_prefix("/order/") {
                Some(_) => format!("{}:/order/{{id}}", request.method()),
                None => format!("{}:{}", request.method(), request.uri().path()),
            },
        ))
        .layer(handler);

    for path in ["/order/1", "/order/2", "/order/3?expand=items", "/cart"] {
        send(service.clone(), get(path, &[]))
            .await
            .expect("no rules");
    }
    let mut resources = sentinel.resources();
    resources.sort();
    assert_eq!(resources, ["GET:/cart", "GET:/order/{id}"]);
    let orders = sentinel.resource_stats("GET:/order/{id}").expect("entered");
    assert_eq!(orders.pass_qps, 3.0);
}

#[tokio::test]
async fn the_path_key_leaves_the_method_out() {
    let (sentinel, _clock) = engine();
    let (handler, _) = answer(StatusCode::OK);
    let service = SentinelLayer::new(sentinel.clone())
        .resource_key(ResourceKey::path())
        .layer(handler);
    send(service, get("/cart?page=2", &[]))
        .await
        .expect("no rules");
    assert_eq!(sentinel.resources(), ["/cart"]);
}

#[tokio::test]
async fn the_origin_comes_from_the_configured_header() {
    let (sentinel, _clock) = engine();
    // One request per second for the caller "batch"; others are not limited.
    sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps("GET:/order", 1.0).limit_app("batch")])
        .expect("valid rules");
    let (handler, _) = answer(StatusCode::OK);
    let service = SentinelLayer::new(sentinel.clone())
        .origin_header(http::HeaderName::from_static("x-caller"))
        .layer(handler);

    let batch = [("x-caller", "batch")];
    let web = [("x-caller", "web")];
    send(service.clone(), get("/order", &batch))
        .await
        .expect("first of batch");
    let second = send(service.clone(), get("/order", &batch)).await;
    assert!(second.is_err(), "batch is over its limit");
    for _ in 0..3 {
        send(service.clone(), get("/order", &web))
            .await
            .expect("web is not limited");
        send(service.clone(), get("/order", &[]))
            .await
            .expect("no origin, not limited");
    }
    let batch_stats = sentinel.origin_stats("GET:/order", "batch").expect("seen");
    assert_eq!((batch_stats.pass_qps, batch_stats.block_qps), (1.0, 1.0));
    let web_stats = sentinel.origin_stats("GET:/order", "web").expect("seen");
    assert_eq!(web_stats.pass_qps, 3.0);
}
