//! Sentinel flow control and circuit breaking as [actix-web](actix_web) middleware, with
//! the options of `sentinel-tower`'s layer: a resource per matched route pattern
//! (`GET:/order/{id}`), the caller's name from a header, param-flow keys from the request,
//! block answers with `Retry-After`, and responses feeding the circuit breakers.
//!
//! ```
//! use actix_web::http::header::HeaderName;
//! use actix_web::{test, web, App, HttpResponse};
//! use sentinel_actix::{ParamSource, SentinelMiddleware};
//! use sentinel_core::{flow::FlowRule, Sentinel};
//!
//! # actix_rt::System::new().block_on(async {
//! let sentinel = Sentinel::new();
//! sentinel
//!     .flow_rules()
//!     .load_rules(vec![FlowRule::qps("GET:/order/{id}", 1.0)])
//!     .expect("valid rules");
//! let middleware = SentinelMiddleware::new(sentinel)
//!     .origin_header(HeaderName::from_static("x-caller"))
//!     .arg(ParamSource::header(HeaderName::from_static("x-user-id")));
//! // With `HttpServer::new(move || App::new().wrap(middleware.clone())...)` the same way.
//! let app = test::init_service(
//!     App::new()
//!         .wrap(middleware)
//!         .route("/order/{id}", web::get().to(|| async { HttpResponse::Ok().body("order") })),
//! )
//! .await;
//!
//! let first = test::call_service(&app, test::TestRequest::get().uri("/order/1").to_request()).await;
//! assert_eq!(first.status(), 200);
//! // Another id of the same route, in the same second: over the route's limit of 1.
//! let second = test::call_service(&app, test::TestRequest::get().uri("/order/2").to_request()).await;
//! assert_eq!(second.status(), 429);
//! assert_eq!(second.headers().get("retry-after").map(|v| v.as_bytes()), Some(&b"1"[..]));
//! # });
//! ```
//!
//! # What the middleware does
//!
//! - **Resource**: each request enters an inbound resource named by its [`ResourceKey`]:
//!   `METHOD:/pattern` of the route actix-web matched by default, so `/order/42` and
//!   `/order/43` are one resource; a request no route matched is named by its path.
//! - **Origin**: [`SentinelMiddleware::origin_header`] names the header carrying the caller's
//!   name, for `limitApp` and authority rules.
//! - **Hot parameters**: [`SentinelMiddleware::arg`] feeds request values to param-flow
//!   rules on the request's own resource ([`ParamSource`]: header, query, path segment, peer
//!   IP, a closure); a request without the value passes unchecked unless the source says
//!   `or`, `or_value` or `or_block`.
//! - **Blocked requests** never reach the handler: they get [`BlockResponses`]' answer (429
//!   flow and param-flow, 503 circuit breaker and system, 403 authority; `Retry-After` where
//!   the wait is known: an open breaker's time to its probe, 1 s for a QPS rule), the same as
//!   `sentinel-tower`'s; [`SentinelMiddleware::respond_with`] changes the statuses and
//!   [`SentinelMiddleware::on_block`] makes the answer yours.
//! - **Outcome**: the entry lives until the response is ready; a `5xx` (a handler's error
//!   counts by the status of its error response) counts as an error for the breakers
//!   ([`SentinelMiddleware::error_if`]), and so does a response future dropped before it
//!   completes. A block answer of an inner guard (a response carrying a [`BlockAnswer`]) does
//!   not count ([`SentinelMiddleware::count_block_answers`]).
//! - **Queueing**: a request that a rate-limiter rule queues waits on tokio's timer (actix-rt
//!   runs on tokio), without blocking the worker.
//!
//! # Settings
//!
//! | on [`SentinelMiddleware`] | default | what |
//! | --- | --- | --- |
//! | [`resource_key`](SentinelMiddleware::resource_key) | [`ResourceKey::method_and_route`] | how a request names its resource |
//! | [`origin_header`](SentinelMiddleware::origin_header) | none | the header naming the caller |
//! | [`arg`](SentinelMiddleware::arg) | none | a hot-parameter argument ([`ParamSource`]) |
//! | [`error_if`](SentinelMiddleware::error_if) | `5xx` | which statuses count as errors for the breakers |
//! | [`count_block_answers`](SentinelMiddleware::count_block_answers) | off | whether an inner guard's block answer counts as an error here |
//! | [`respond_with`](SentinelMiddleware::respond_with), [`on_block`](SentinelMiddleware::on_block) | [`BlockResponses::new`] | what a blocked request gets |
//!
//! # More
//!
//! [docs/actix.md](https://github.com/sentinel-rs/sentinel-rs/blob/main/docs/actix.md) (the
//! measured cost per request) and
//! [docs/guarding.md](https://github.com/sentinel-rs/sentinel-rs/blob/main/docs/guarding.md)
//! (each rule family, exactly).
#![cfg_attr(docsrs, feature(doc_cfg))]

mod answer;
mod middleware;
mod param;
mod resource;
mod service;

pub use middleware::SentinelMiddleware;
pub use param::{ActixRequest, ParamSource};
pub use resource::ResourceKey;
pub use sentinel_tower::{BlockAnswer, BlockResponses, ParamSourceOf};
pub use service::{ResponseFuture, SentinelService};
