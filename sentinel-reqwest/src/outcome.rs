//! Which call outcomes count as errors for the circuit breakers.

use std::fmt;
use std::sync::Arc;

use reqwest::{Response, StatusCode};

use crate::error::SentinelError;

/// How a call that was sent ended: what [`SentinelMiddleware::error_if`](crate::SentinelMiddleware::error_if)
/// looks at.
#[derive(Debug, Clone, Copy)]
pub enum Outcome<'a> {
    /// The upstream answered (the status and headers are in; the body may still be on its way).
    Response(&'a Response),
    /// The call failed: a timeout, a refused or reset connection, or a middleware after this
    /// one failed it.
    Failed(&'a reqwest_middleware::Error),
}

impl Outcome<'_> {
    /// The response's status, if the upstream answered.
    pub fn status(&self) -> Option<StatusCode> {
        match self {
            Outcome::Response(response) => Some(response.status()),
            Outcome::Failed(_) => None,
        }
    }

    /// Whether the call timed out.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Outcome::Failed(error) if error.is_timeout())
    }

    /// Whether the connection to the upstream could not be made.
    pub fn is_connect(&self) -> bool {
        matches!(self, Outcome::Failed(error) if error.is_connect())
    }

    /// Whether a Sentinel middleware after this one held the call back (its own rules
    /// blocked it, or a `Retry-After` hold).
    pub fn is_inner_block(&self) -> bool {
        matches!(self, Outcome::Failed(error) if SentinelError::of(error).is_some())
    }

    /// The default: a `5xx` response or any failure counts.
    pub fn is_server_error_or_failure(&self) -> bool {
        match self {
            Outcome::Response(response) => response.status().is_server_error(),
            Outcome::Failed(_) => true,
        }
    }
}

type OutcomeFn = dyn Fn(&Outcome<'_>) -> bool + Send + Sync;

/// The middleware's choice of errors: the default or a closure, and whether an inner
/// middleware's block counts.
#[derive(Clone)]
pub(crate) struct ErrorIf {
    picks: Option<Arc<OutcomeFn>>,
    pub(crate) count_inner_blocks: bool,
}

impl ErrorIf {
    pub(crate) fn new() -> Self {
        Self {
            picks: None,
            count_inner_blocks: false,
        }
    }

    pub(crate) fn picks(&mut self, f: Arc<OutcomeFn>) {
        self.picks = Some(f);
    }

    pub(crate) fn matches(&self, outcome: &Outcome<'_>) -> bool {
        let picked = match &self.picks {
            None => outcome.is_server_error_or_failure(),
            Some(f) => f(outcome),
        };
        picked && (self.count_inner_blocks || !outcome.is_inner_block())
    }
}

impl fmt::Debug for ErrorIf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ErrorIf")
            .field("custom", &self.picks.is_some())
            .field("count_inner_blocks", &self.count_inner_blocks)
            .finish()
    }
}
