//! A [tower] layer that guards every HTTP request with [Sentinel](sentinel_core): flow
//! control, circuit breaking, system protection and origin (authority) rules, applied per
//! resource, with the resource named from the request.
//!
//! ```
//! use std::convert::Infallible;
//!
//! use http::{Request, Response, StatusCode};
//! use sentinel_core::{flow::FlowRule, Sentinel};
//! use sentinel_tower::{SentinelError, SentinelLayer};
//! use tower::{service_fn, Layer, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let sentinel = Sentinel::new();
//! sentinel
//!     .flow_rules()
//!     .load_rules(vec![FlowRule::qps("GET:/order", 1.0)])
//!     .expect("valid rules");
//!
//! let handler = service_fn(|_request: Request<String>| async {
//!     Ok::<_, Infallible>(Response::new(String::from("order 42")))
//! });
//! let service = SentinelLayer::new(sentinel).layer(handler);
//!
//! let request = || Request::get("/order").body(String::new()).expect("a valid request");
//! let first = service.clone().oneshot(request()).await;
//! assert_eq!(first.expect("passes").status(), StatusCode::OK);
//!
//! // The second request in the same second is over the limit of 1 per second.
//! match service.oneshot(request()).await {
//!     Err(SentinelError::Blocked(blocked)) => assert_eq!(blocked.resource(), "GET:/order"),
//!     other => panic!("expected a block, got {other:?}"),
//! }
//! # }
//! ```
//!
//! # What the layer does
//!
//! - **Resource**: each request enters a resource named by its [`ResourceKey`]:
//!   `METHOD:/path` by default (`GET:/order`, as Sentinel's web adapters name them), the
//!   path alone, or a closure ([`ResourceKey::from_fn`]).
//! - **Origin**: [`SentinelLayer::origin_header`] names the header that carries the caller's
//!   name, for `limitApp` and authority rules. Requests enter as inbound calls, so system
//!   rules apply.
//! - **Blocked requests** never reach the inner service. By default they fail with
//!   [`SentinelError::Blocked`], for the application to map to `429` or `503`; with
//!   [`SentinelLayer::on_block`] they get a response instead, and the service keeps the inner
//!   service's error type; [`SentinelLayer::respond_with`] gives them a ready-made one
//!   ([`BlockResponses`]: 429, 503 or 403 by family, `Retry-After`, a plain body). [`poll_ready`](tower::Service::poll_ready) never back-pressures.
//! - **Outcome**: every rule is checked when the service is called, without waiting; a
//!   request that passes is counted then and handed to the inner service, and its entry
//!   lives until the response is ready, so response times and errors feed the circuit
//!   breakers. An `Err` from the inner service counts as an error, and so does a `5xx`
//!   status ([`SentinelLayer::error_if`] changes which statuses do). A response future
//!   dropped before it completes (the client went away) exits its entry as an error.
//! - **Queueing**: a request that a rate-limiter rule holds waits in its response future on
//!   a tokio timer (the futures must run in a tokio runtime with time enabled when such rules
//!   are loaded), and reaches the inner service when its wait is over; no thread is blocked.
//!   A request dropped while it waits never started: it counts nothing, and the inner
//!   service never sees it.
//! - **Cost**: the response future is a named type, [`ResponseFuture`], that holds the
//!   inner service's future in place (no allocation); the check is sentinel-core's
//!   [`try_enter_owned`](sentinel_core::EntryBuilder::try_enter_owned), whose entry outlives
//!   `call`; and the resource name lives only while the check runs: the path key borrows the
//!   request's path, the `METHOD:/path` name is built in a stack buffer (one allocation past
//!   128 bytes). A request that passes allocates nothing in the layer; a blocked one
//!   answered with a response allocates its [`BlockAnswer`] mark (the response's extension
//!   map); a queued one allocates its waiting state and timer. Measured in-process with one QPS rule
//!   (`cargo bench -p sentinel-tower --bench layer`), a request costs 88-107 ns over the bare
//!   service on a 2 vCPU VM, about two thirds of it sentinel-core's check and exit by name.
//!   The inner service must be `Clone` (see [`SentinelService`]).
//! - **Nested guards**: every block answer the layer makes carries a [`BlockAnswer`] in its
//!   response extensions, and a layer does not count a response that carries one as an
//!   error of its own resource (a `503` of an inner guard's open breaker would otherwise trip
//!   the breaker of the route around it); [`SentinelLayer::count_block_answers`] changes
//!   that.
//! - **Shared state**: every clone of a service, and every service made by the layer, counts
//!   against the same engine and so the same limits.
//!
//! # axum
//!
//! With this crate's `axum` feature, `ResourceKey::method_and_route()` names resources by
//! the route axum matched, so that `/order/42` and `/order/43` are one resource
//! (`GET:/order/{id}`), built without allocating. Answer blocked requests with a response,
//! which keeps the router's infallible error type that `Router::layer` and
//! `Router::route_layer` need:
//!
//! ```text
//! use axum::{http::StatusCode, response::IntoResponse};
//! use sentinel_tower::{ResourceKey, SentinelLayer};
//!
//! let layer = SentinelLayer::new(sentinel.clone())
//!     .resource_key(ResourceKey::method_and_route())
//!     .on_block(|_blocked| StatusCode::TOO_MANY_REQUESTS.into_response());
//! let app = axum::Router::new()
//!     .route("/order/{id}", axum::routing::get(order))
//!     .route_layer(layer); // the routes only; `layer` would guard the fallback (404s) too
//! ```
//!
//! Inside a handler, `Blocked` (a newtype of [`BlockError`](sentinel_core::BlockError), with
//! the `axum` feature) answers a block in one line: a handler returning
//! `Result<_, Blocked>` writes `sentinel.entry("report").enter()?`, and a blocked call gets
//! [`BlockResponses`]' answer (Rust's orphan rule forbids `IntoResponse for BlockError` in
//! this crate: the trait is axum's, the type sentinel-core's).
//!
//! Without the feature, [`ResourceKey::from_fn`] can read axum's `MatchedPath` request
//! extension the same way (allocating the name).
//!
//! # Settings
//!
//! | on [`SentinelLayer`] | default | what |
//! | --- | --- | --- |
//! | [`resource_key`](SentinelLayer::resource_key) | [`ResourceKey::method_and_path`] | how a request names its resource |
//! | [`origin_header`](SentinelLayer::origin_header) | none | the header naming the caller, for `limitApp` and authority rules |
//! | [`arg`](SentinelLayer::arg) | none | a hot-parameter argument ([`ParamSource`]: header, query, path segment, peer IP); a request without it passes unchecked unless the source says [`or`](ParamSource::or), [`or_value`](ParamSource::or_value) or [`or_block`](ParamSource::or_block) |
//! | [`error_if`](SentinelLayer::error_if) | `5xx` | which responses count as errors for the breakers |
//! | [`count_block_answers`](SentinelLayer::count_block_answers) | off | whether an inner guard's block answer counts as an error here |
//! | [`on_block`](SentinelLayer::on_block), [`respond_with`](SentinelLayer::respond_with) | [`SentinelError::Blocked`] | what a blocked request gets |
//!
//! # Observing it
//!
//! The layer adds no state of its own: what it admits, blocks and times is the engine's, read
//! with `Sentinel::resource_stats`, the `metrics` facade (feature `metrics` of
//! `sentinel-core`) or the dashboard transport, per resource name.
//!
//! # More
//!
//! [docs/tower.md](https://github.com/sentinel-rs/sentinel-rs/blob/main/docs/tower.md) (recipes: axum, origins, hot parameters, responses) and
//! [docs/guarding.md](https://github.com/sentinel-rs/sentinel-rs/blob/main/docs/guarding.md) (each rule family, exactly).
#![cfg_attr(docsrs, feature(doc_cfg))]

mod block;
#[cfg(feature = "axum")]
mod blocked;
mod error;
mod error_if;
mod future;
mod in_flight;
mod layer;
mod param;
mod queued;
mod resource;
mod respond;
mod service;

pub use block::{BlockAnswer, BlockAsError, BlockAsResponse, BlockHandler};
#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
pub use blocked::Blocked;
pub use error::SentinelError;
pub use future::ResponseFuture;
pub use in_flight::InFlight;
pub use layer::SentinelLayer;
pub use param::{
    push_arg, try_enter_request, try_enter_with_args, HttpRequest, ParamRequest, ParamSource,
    ParamSourceOf, RequestHead, MAX_ARGS,
};
pub use queued::QueuedRequest;
pub use resource::{ExtractResource, ResourceKey, ResourceKeyFn};
pub use respond::BlockResponses;
pub use service::SentinelService;
