//! `Blocked`: a blocked call answered from an axum handler in one line.

use axum::response::{IntoResponse, Response};
use sentinel_core::BlockError;

use crate::block::BlockAnswer;
use crate::respond::BlockResponses;

/// A [`BlockError`] as an axum response: what a handler that guards part of its work
/// returns when a rule blocks it. `?` converts a `BlockError` into it.
///
/// The response is [`BlockResponses::new`]'s: 429 (flow, param-flow), 503 (circuit breaker,
/// system protection) or 403 (authority), `Retry-After` where the wait is known, a plain body
/// that names no rule, and a [`BlockAnswer`] in its extensions, so that a layer around the
/// handler does not count it as an error of the route.
///
/// `impl IntoResponse for BlockError` is what one would write, but Rust's orphan rule forbids
/// it here: the trait is axum's and the type is sentinel-core's, so only one of those two
/// crates could implement it, and sentinel-core does not depend on axum. This newtype is the
/// one-line equivalent.
///
/// ```
/// use axum::{extract::State, routing::get, Router};
/// use sentinel_core::Sentinel;
/// use sentinel_tower::Blocked;
///
/// async fn report(State(sentinel): State<Sentinel>) -> Result<String, Blocked> {
///     let _entry = sentinel.entry("report.render").enter()?;
///     Ok(String::from("the report"))
/// }
///
/// let app: Router = Router::new()
///     .route("/report", get(report))
///     .with_state(Sentinel::new());
/// # let _ = app;
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[error(transparent)]
pub struct Blocked(pub BlockError);

impl From<BlockError> for Blocked {
    fn from(error: BlockError) -> Self {
        Self(error)
    }
}

impl IntoResponse for Blocked {
    fn into_response(self) -> Response {
        let response = BlockResponses::new().response(&self.0);
        BlockAnswer::mark(self.0.family(), response)
    }
}
