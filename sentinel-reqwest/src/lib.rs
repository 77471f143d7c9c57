//! Sentinel flow control and circuit breaking for outbound HTTP calls, as a
//! [`reqwest-middleware`](reqwest_middleware) middleware: a resource per upstream host (or
//! host and route template), a blocked call failing at once without a network round trip,
//! and every outcome (a `5xx`, a timeout, a refused connection) feeding the circuit
//! breakers.
//!
//! ```no_run
//! use reqwest_middleware::ClientBuilder;
//! use sentinel_core::{circuit_breaker::DegradeRule, Sentinel};
//! use sentinel_reqwest::{Route, SentinelError, SentinelMiddleware};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let sentinel = Sentinel::new();
//! // Open for 10 s when more than half of the calls to the users service fail (at least 5
//! // calls a second).
//! sentinel
//!     .degrade_rules()
//!     .load_rules(vec![
//!         DegradeRule::error_ratio("http://users.internal:8080", 0.5, 10).min_request_amount(5),
//!     ])
//!     .expect("valid rules");
//!
//! let http = reqwest::Client::builder()
//!     .timeout(std::time::Duration::from_secs(2)) // a timeout counts as an error
//!     .build()
//!     .expect("a client");
//! let client = ClientBuilder::new(http)
//!     .with(SentinelMiddleware::new(sentinel))
//!     .build();
//!
//! match client.get("http://users.internal:8080/users/42").send().await {
//!     Ok(response) => println!("{}", response.status()),
//!     // The breaker is open: no request was sent.
//!     Err(error) if SentinelError::of(&error).is_some() => println!("users is down: {error}"),
//!     Err(error) => println!("the call failed: {error}"),
//! }
//! // One resource for every id of a route: `http://users.internal:8080/users/{id}`.
//! let _ = client
//!     .get("http://users.internal:8080/users/43")
//!     .with_extension(Route::new("/users/{id}"))
//!     .send()
//!     .await;
//! # }
//! ```
//!
//! # What the middleware does
//!
//! - **Resource**: each call enters an outbound resource named by its [`ResourceName`]:
//!   `scheme://host:port` by default, `METHOD:scheme://host:port` (Spring Cloud Alibaba's
//!   `@SentinelRestTemplate` host resource) or a closure; a [`Route`] extension on the
//!   request appends the caller's route template (`/users/{id}`), so that every id of a
//!   route is one resource. Outbound entries have no origin and system rules do not apply.
//! - **Blocked calls** fail with [`SentinelError::Blocked`] (carrying the [`BlockError`](sentinel_core::BlockError)) inside
//!   `reqwest_middleware::Error::Middleware`, found with [`SentinelError::of`]; the request
//!   is never sent.
//! - **Outcome**: the entry lives until the response head arrives (the response time is the
//!   time to the status and headers; the body is the caller's). A `5xx` response and every
//!   failure (timeout, refused or reset connection, an error of a later middleware) count as
//!   errors ([`SentinelMiddleware::error_if`] chooses otherwise); a call whose future is
//!   dropped before the response (a `tokio::time::timeout` around it) counts as an error.
//!   A call that a Sentinel middleware after this one held back is not an error here
//!   ([`SentinelMiddleware::count_inner_blocks`]).
//! - **Queueing**: a call a rate-limiter rule queues waits on tokio's timer, then goes out.
//! - **`Retry-After`** (off by default, [`SentinelMiddleware::retry_after`]): a 429 or 503
//!   with `Retry-After` holds the resource back for that long (at most 60 s by default);
//!   held calls fail with [`SentinelError::RetryAfter`] without being sent. Off by default so
//!   that only the loaded rules decide which calls go out; an upstream that sends the header
//!   is asking for it, and one line turns it on.
//!
//! # Settings
//!
//! | on [`SentinelMiddleware`] | default | what |
//! | --- | --- | --- |
//! | [`resource_name`](SentinelMiddleware::resource_name) | [`ResourceName::host`] | how a call names its resource ([`Route`] per call) |
//! | [`error_if`](SentinelMiddleware::error_if) | `5xx` and every failure | which [`Outcome`]s count as errors for the breakers |
//! | [`count_inner_blocks`](SentinelMiddleware::count_inner_blocks) | off | whether a later Sentinel middleware's block counts as an error here |
//! | [`retry_after`](SentinelMiddleware::retry_after) | off | follow the upstream's `Retry-After` on 429/503 ([`RetryAfter`]) |
//!
//! # More
//!
//! [docs/reqwest.md](https://github.com/sentinel-rs/sentinel-rs/blob/main/docs/reqwest.md)
//! (recipes, the measured cost per call) and
//! [docs/guarding.md](https://github.com/sentinel-rs/sentinel-rs/blob/main/docs/guarding.md)
//! (each rule family, exactly).
#![cfg_attr(docsrs, feature(doc_cfg))]

mod error;
mod middleware;
mod outcome;
mod resource;
mod retry_after;

pub use error::SentinelError;
pub use middleware::SentinelMiddleware;
pub use outcome::Outcome;
pub use resource::{ResourceName, Route};
pub use retry_after::RetryAfter;
