//! The error of a call the middleware held back: a rule blocked it, or the upstream asked to
//! be left alone for a while.

use std::sync::Arc;
use std::time::Duration;

use sentinel_core::BlockError;

/// Why the middleware failed a call without sending it: no network round trip was made.
///
/// `reqwest-middleware` carries a middleware's error as an `anyhow` error inside
/// [`reqwest_middleware::Error::Middleware`]; [`SentinelError::of`] finds it there.
///
/// ```
/// use sentinel_reqwest::SentinelError;
///
/// fn describe(error: &reqwest_middleware::Error) -> String {
///     match SentinelError::of(error) {
///         Some(held) => match held.retry_in() {
///             Some(wait) => format!("{} is held back, retry in {wait:?}", held.resource()),
///             None => format!("{} is held back", held.resource()),
///         },
///         None => format!("the call failed: {error}"),
///     }
/// }
/// # let _ = describe;
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum SentinelError {
    /// A rule blocked the call (flow, circuit breaker, param-flow, authority).
    #[error("outbound call blocked: {0}")]
    Blocked(#[from] BlockError),
    /// The upstream answered an earlier call of this resource with a `Retry-After` (on a
    /// status the middleware's [`RetryAfter`](crate::RetryAfter) setting names), and that
    /// time has not passed yet.
    #[error("outbound call to {resource:?} held back for {retry_in:?} more: the upstream asked for it with Retry-After")]
    RetryAfter {
        /// The resource.
        resource: Arc<str>,
        /// How long until calls are sent again.
        retry_in: Duration,
    },
}

impl SentinelError {
    /// The middleware's error inside a `reqwest-middleware` error, if the call was held back
    /// by this crate's middleware.
    pub fn of(error: &reqwest_middleware::Error) -> Option<&SentinelError> {
        match error {
            reqwest_middleware::Error::Middleware(error) => error.downcast_ref(),
            reqwest_middleware::Error::Reqwest(_) => None,
        }
    }

    /// The rule's block, if a rule blocked the call.
    pub fn block_error(&self) -> Option<&BlockError> {
        match self {
            SentinelError::Blocked(blocked) => Some(blocked),
            SentinelError::RetryAfter { .. } => None,
        }
    }

    /// The resource of the call.
    pub fn resource(&self) -> &str {
        match self {
            SentinelError::Blocked(blocked) => blocked.resource(),
            SentinelError::RetryAfter { resource, .. } => resource,
        }
    }

    /// How long until a call may pass, where it is known: an open circuit breaker's time
    /// until its probe, or the rest of the upstream's `Retry-After`.
    pub fn retry_in(&self) -> Option<Duration> {
        match self {
            SentinelError::Blocked(BlockError::CircuitBreaker { retry_in, .. }) => *retry_in,
            SentinelError::Blocked(_) => None,
            SentinelError::RetryAfter { retry_in, .. } => Some(*retry_in),
        }
    }
}
