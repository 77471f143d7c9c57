//! Sentinel flow control and circuit breaking for gRPC with [tonic]: a server layer and a
//! client layer that name resources by gRPC method (`/package.Service/Method`).
//!
//! ```
//! use std::convert::Infallible;
//!
//! use sentinel_core::{flow::FlowRule, Sentinel};
//! use sentinel_tonic::SentinelGrpcLayer;
//! use tonic::{body::Body, Code, Status};
//! use tower::{service_fn, Layer, Service, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower::BoxError> {
//! let sentinel = Sentinel::new();
//! sentinel
//!     .flow_rules()
//!     .load_rules(vec![FlowRule::qps("/shop.Orders/Get", 1.0)])?;
//!
//! // Stands for a tonic `Channel`: a server that answers every call with OK.
//! let channel = service_fn(|_call: http::Request<Body>| async {
//!     Ok::<_, Infallible>(Status::ok("").into_http::<Body>())
//! });
//! let mut client = SentinelGrpcLayer::client(sentinel).layer(channel);
//! let call = || http::Request::post("/shop.Orders/Get").body(Body::empty());
//!
//! let first = client.ready().await?.call(call()?).await?;
//! assert_eq!(first.headers()["grpc-status"], "0");
//!
//! // The second call in the second is over the limit: it fails here, without a round trip,
//! // with the status a tonic client returns, and the retry delay in its metadata.
//! let blocked = client.ready().await?.call(call()?).await.unwrap_err();
//! let status = blocked.downcast::<Status>().expect("a block is a Status");
//! assert_eq!(status.code(), Code::ResourceExhausted);
//! assert_eq!(status.metadata().get("grpc-retry-pushback-ms").expect("a wait"), "1000");
//! # Ok(())
//! # }
//! ```
//!
//! On a server, `tonic::transport::Server::builder().layer(SentinelGrpcLayer::server(sentinel))`
//! guards every method of every service; `examples/grpc.rs` runs a server and a client on
//! loopback, both guarded.
//!
//! # What the layers do
//!
//! - **Resource**: a call enters the resource named by its method's path,
//!   `/package.Service/Method` (as Sentinel's Java gRPC adapter names it), on the server
//!   as an inbound call (system rules apply), on the client as an outbound one. Any of
//!   sentinel-tower's [`ResourceKey`]s can name it otherwise.
//! - **Origin and arguments**: [`SentinelGrpcLayer::origin_metadata`] reads the caller's name
//!   from a metadata key, for `limitApp` and authority rules; [`SentinelGrpcLayer::arg`]
//!   reads param-flow arguments from metadata ([`ParamSource::header`]).
//! - **Blocked calls** never reach the inner service. The status says why: `RESOURCE_EXHAUSTED`
//!   for flow and param-flow rules, `UNAVAILABLE` for an open circuit breaker and system
//!   protection, `PERMISSION_DENIED` for an authority rule ([`block_status`];
//!   [`SentinelGrpcLayer::on_block`] makes another). Where the block says how long to wait
//!   (1 s for a QPS limit, the time left until an open breaker admits a probe, ...), the
//!   status carries it in milliseconds under `grpc-retry-pushback-ms`
//!   ([`RETRY_PUSHBACK_KEY`]): gRPC's own retry-pushback key (gRFC A6), which gRPC clients
//!   with a retry policy obey, and any client can read. A server answers with the status
//!   in the response head (a trailers-only response); a client fails with the [`Status`](tonic::Status)
//!   (its source is the [`BlockError`](sentinel_core::BlockError)), which a tonic client
//!   returns as it is.
//! - **Outcome**: a call's entry lives until its response stream ends, so that a stream is
//!   one entry for its whole life: a server-streaming call held open counts against a
//!   concurrency (thread-grade) rule until its trailers pass, and its response time is the
//!   stream's. The call's `grpc-status` (from the response head or the trailers) decides
//!   whether it was an error for the circuit breakers: by default `UNKNOWN`,
//!   `DEADLINE_EXCEEDED`, `INTERNAL`, `UNAVAILABLE` and `DATA_LOSS` are
//!   ([`ErrorCodes::server_errors`]; [`SentinelGrpcLayer::error_codes`] picks others);
//!   a transport error (a connection refused, a stream that fails) always is. A call
//!   the client cancels (the response stream or future dropped before its end) ends as
//!   `CANCELLED`, not an error by default.
//! - **Queueing**: a call a rate-limiter rule holds waits in its response future on a tokio
//!   timer, then reaches the inner service; dropped while it waits, it counts nothing.
//! - **Nested guards**: a block answer of a guard inside this one (a server answer marked
//!   with sentinel-tower's [`BlockAnswer`](sentinel_tower::BlockAnswer), a client `Status`
//!   whose source is a `BlockError`) is not counted as an error here
//!   ([`SentinelGrpcLayer::count_block_answers`]).
//! - **Shared state**: every clone of a service, and every service the layer made, counts
//!   against the same engine and so the same limits.
//!
//! # Why a crate of its own
//!
//! sentinel-tower's HTTP layer exits a request's entry when the response head is ready and
//! judges it by the HTTP status; a gRPC call's status often comes in the trailers, at the
//! end of the body, and a stream lives as long as its body. So this crate holds the entry
//! in the response body ([`GuardedBody`]) and reads `grpc-status`, and builds on the tower
//! layer's parts for the rest: resource keys, param-flow arguments and their check
//! (`sentinel_tower::try_enter_request`), the queued request, block-answer marks and the
//! retry waits.
//!
//! # More
//!
//! [docs/grpc.md](https://github.com/sentinel-rs/sentinel-rs/blob/main/docs/grpc.md)
//! (settings, the status table, the measured overhead).
#![cfg_attr(docsrs, feature(doc_cfg))]

mod body;
mod future;
mod layer;
mod service;
mod status;

pub use body::GuardedBody;
pub use future::ResponseFuture;
pub use layer::SentinelGrpcLayer;
pub use sentinel_tower::{ParamSource, ResourceKey, ResourceKeyFn};
pub use service::SentinelGrpcService;
pub use status::{block_status, ErrorCodes, RETRY_PUSHBACK_KEY};
