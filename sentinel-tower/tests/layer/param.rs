//! Request values as param-flow arguments: a limit per user, per query value, per path
//! parameter and per client address, on the route's own resource.

use std::net::SocketAddr;

use http::{HeaderName, StatusCode};
use sentinel_core::param_flow::ParamFlowRule;
use sentinel_tower::{ParamSource, SentinelLayer};
use tower::Layer;

use crate::support::{answer, engine, get, send};

/// Sends `request` `n` times; how many reached the handler.
async fn passes<S>(service: &S, n: usize, request: impl Fn() -> http::Request<()>) -> usize
where
    S: tower::Service<http::Request<()>, Response = http::Response<()>> + Clone,
    S::Error: std::fmt::Debug,
{
    let mut passed = 0;
    for _ in 0..n {
        if send(service.clone(), request()).await.is_ok() {
            passed += 1;
        }
    }
    passed
}

#[tokio::test]
async fn a_header_limits_each_user_on_the_route_resource() {
    let (sentinel, _clock) = engine();
    sentinel
        .param_flow_rules()
        .load_rules(vec![ParamFlowRule::qps("GET:/order", 0, 5.0)])
        .expect("valid rules");
    let (handler, seen) = answer(StatusCode::OK);
    let service = SentinelLayer::new(sentinel.clone())
        .arg(ParamSource::header(HeaderName::from_static("x-user-id")))
        .layer(handler);
    let as_user = |user: &'static str| move || get("/order", &[("x-user-id", user)]);
    assert_eq!(passes(&service, 10, as_user("alice")).await, 5);
    assert_eq!(
        passes(&service, 3, as_user("bob")).await,
        3,
        "bob has his own limit"
    );
    assert_eq!(
        passes(&service, 8, || get("/order", &[])).await,
        8,
        "a request without the header is not checked"
    );
    assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 16);
    // One request is one call of the route's resource.
    let stats = sentinel.resource_stats("GET:/order").expect("entered");
    assert_eq!((stats.pass_qps, stats.block_qps), (16.0, 5.0));
}

#[tokio::test]
async fn query_path_and_custom_values_are_arguments_in_order() {
    let (sentinel, _clock) = engine();
    sentinel
        .param_flow_rules()
        .load_rules(vec![
            ParamFlowRule::qps("GET:/users/7/orders", 0, 1.0),
            ParamFlowRule::qps("GET:/users/7/orders", 1, 2.0),
            ParamFlowRule::qps("GET:/users/7/orders", 2, 3.0),
        ])
        .expect("valid rules");
    let (handler, _) = answer(StatusCode::OK);
    let service = SentinelLayer::new(sentinel)
        .arg(ParamSource::query("coupon"))
        .arg(ParamSource::path_segment(1))
        .arg(ParamSource::from_fn(|head| {
            head.headers
                .get("x-tenant")
                .and_then(|v| v.to_str().ok())
                .map(str::to_uppercase)
        }));
    let service = service.layer(handler);
    // The coupon (argument 0, decoded: "a b" and "a+b" are one value) once a second.
    let coupon = |q: &'static str| move || get(q, &[]);
    assert_eq!(
        passes(&service, 1, coupon("/users/7/orders?coupon=a+b")).await,
        1
    );
    assert_eq!(
        passes(&service, 1, coupon("/users/7/orders?coupon=a%20b")).await,
        0,
        "the same coupon, decoded"
    );
    // The path's user id (argument 1, "7") twice a second: one left.
    assert_eq!(passes(&service, 3, coupon("/users/7/orders")).await, 1);
}

#[tokio::test]
async fn the_peer_address_limits_each_client() {
    let (sentinel, _clock) = engine();
    sentinel
        .param_flow_rules()
        .load_rules(vec![ParamFlowRule::qps("GET:/", 0, 2.0)])
        .expect("valid rules");
    let (handler, _) = answer(StatusCode::OK);
    let service = SentinelLayer::new(sentinel)
        .arg(ParamSource::peer_ip())
        .layer(handler);
    let from = |addr: &'static str| {
        move || {
            let mut request = get("/", &[]);
            let addr: SocketAddr = addr.parse().expect("an address");
            request.extensions_mut().insert(addr);
            request
        }
    };
    assert_eq!(passes(&service, 5, from("10.0.0.1:4000")).await, 2);
    assert_eq!(
        passes(&service, 5, from("10.0.0.1:4001")).await,
        0,
        "the same client on another port"
    );
    assert_eq!(passes(&service, 5, from("[::1]:4000")).await, 2);
}

#[tokio::test]
async fn a_value_read_as_an_integer_matches_long_items() {
    let (sentinel, _clock) = engine();
    sentinel
        .param_flow_rules()
        .load_rules(vec![ParamFlowRule::qps("GET:/order", 0, 1.0)
            .item(sentinel_core::param_flow::ParamFlowItem::long(42, 3))])
        .expect("valid rules");
    let (handler, _) = answer(StatusCode::OK);
    let layer = SentinelLayer::new(sentinel.clone());
    let as_text = layer
        .clone()
        .arg(ParamSource::header(HeaderName::from_static("x-user-id")))
        .layer(handler.clone());
    let user = |id: &'static str| move || get("/order", &[("x-user-id", id)]);
    assert_eq!(
        passes(&as_text, 5, user("42")).await,
        1,
        "text never matches a long item"
    );
    let as_int = layer
        .arg(ParamSource::header(HeaderName::from_static("x-user-id")).as_int())
        .layer(handler);
    assert_eq!(passes(&as_int, 5, user(" 42")).await, 3, "the item's count");
    assert_eq!(
        passes(&as_int, 5, user("alice")).await,
        1,
        "not an integer: text"
    );
}
