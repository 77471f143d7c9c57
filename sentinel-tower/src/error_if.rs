//! Which responses count as errors for the circuit breakers.

use std::sync::Arc;

use http::{Response, StatusCode};

use crate::block::BlockAnswer;

/// Which responses count as errors: a status picked by `5xx` (the default, nothing to share
/// per request) or the layer's `error_if` predicate, unless the response answers a call an
/// inner guard blocked ([`BlockAnswer`]) and the layer leaves those out (the default).
#[derive(Clone)]
pub(crate) struct ErrorIf {
    pub(crate) statuses: Statuses,
    /// Whether a response marked [`BlockAnswer`] may count.
    pub(crate) count_block_answers: bool,
}

#[derive(Clone)]
pub(crate) enum Statuses {
    ServerError,
    Custom(Arc<dyn Fn(StatusCode) -> bool + Send + Sync>),
}

impl ErrorIf {
    /// `5xx` counts; block answers do not.
    pub(crate) fn new() -> Self {
        Self {
            statuses: Statuses::ServerError,
            count_block_answers: false,
        }
    }

    #[inline]
    pub(crate) fn matches<B>(&self, response: &Response<B>) -> bool {
        let status = response.status();
        let picked = match &self.statuses {
            Statuses::ServerError => status.is_server_error(),
            Statuses::Custom(is_error) => is_error(status),
        };
        // The extensions are read only for a status that would count: a map lookup, and no
        // lookup at all when the response has no extensions.
        picked && (self.count_block_answers || response.extensions().get::<BlockAnswer>().is_none())
    }
}
