//! The error of a guarded service: the request was blocked, or the inner service failed.

use sentinel_core::BlockError;

/// The error of a [`SentinelService`](crate::SentinelService) that rejects blocked requests
/// with an error (the default, [`BlockAsError`](crate::BlockAsError)).
///
/// Map [`Blocked`](Self::Blocked) to `429 Too Many Requests` (a flow or param-flow rule) or
/// `503 Service Unavailable` (an open circuit breaker, system protection); see
/// [`BlockError::family`].
///
/// ```
/// use http::StatusCode;
/// use sentinel_core::RuleFamily;
/// use sentinel_tower::SentinelError;
///
/// fn status<E>(error: &SentinelError<E>) -> StatusCode {
///     match error.blocked().map(|blocked| blocked.family()) {
///         Some(RuleFamily::Flow | RuleFamily::ParamFlow) => StatusCode::TOO_MANY_REQUESTS,
///         Some(_) => StatusCode::SERVICE_UNAVAILABLE,
///         None => StatusCode::INTERNAL_SERVER_ERROR,
///     }
/// }
/// # let _ = status::<std::convert::Infallible>;
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SentinelError<E> {
    /// A rule blocked the request; the inner service never saw it.
    #[error("request blocked: {0}")]
    Blocked(#[from] BlockError),
    /// The inner service failed. The call counted as an error for the circuit breakers.
    #[error(transparent)]
    Inner(E),
}

impl<E> SentinelError<E> {
    /// Why the request was blocked, if it was.
    pub fn blocked(&self) -> Option<&BlockError> {
        match self {
            SentinelError::Blocked(error) => Some(error),
            SentinelError::Inner(_) => None,
        }
    }

    /// The inner service's error, if it failed.
    pub fn into_inner(self) -> Option<E> {
        match self {
            SentinelError::Blocked(_) => None,
            SentinelError::Inner(error) => Some(error),
        }
    }
}
