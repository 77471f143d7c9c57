//! Which responses count as errors for the circuit breakers.

use std::sync::Arc;

use http::StatusCode;

/// Which response statuses count as errors: `5xx` (the default, nothing to share per
/// request), or the layer's `error_if` predicate.
#[derive(Clone)]
pub(crate) enum ErrorIf {
    ServerError,
    Custom(Arc<dyn Fn(StatusCode) -> bool + Send + Sync>),
}

impl ErrorIf {
    #[inline]
    pub(crate) fn matches(&self, status: StatusCode) -> bool {
        match self {
            ErrorIf::ServerError => status.is_server_error(),
            ErrorIf::Custom(is_error) => is_error(status),
        }
    }
}
