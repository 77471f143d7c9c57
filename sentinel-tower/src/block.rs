//! What a blocked request gets: an error (the default) or a response.

use std::fmt;

use sentinel_core::{BlockError, RuleFamily};

use crate::error::SentinelError;

/// What a [`SentinelService`](crate::SentinelService) returns for a request a rule blocked,
/// and which error type the service has (Sentinel's block handler).
///
/// Implemented by [`BlockAsError`] (the default) and [`BlockAsResponse`] (set with
/// [`SentinelLayer::on_block`](crate::SentinelLayer::on_block)).
pub trait BlockHandler<Res, E> {
    /// The guarded service's error type.
    type Error;

    /// The result of a blocked request.
    fn blocked(&self, error: BlockError) -> Result<Res, Self::Error>;

    /// Wraps an error of the inner service.
    fn inner_error(error: E) -> Self::Error;
}

/// Blocked requests fail with [`SentinelError::Blocked`]; the inner service's errors are
/// wrapped in [`SentinelError::Inner`]. The default.
#[derive(Debug, Clone, Copy, Default)]
pub struct BlockAsError;

impl<Res, E> BlockHandler<Res, E> for BlockAsError {
    type Error = SentinelError<E>;

    fn blocked(&self, error: BlockError) -> Result<Res, SentinelError<E>> {
        Err(SentinelError::Blocked(error))
    }

    fn inner_error(error: E) -> SentinelError<E> {
        SentinelError::Inner(error)
    }
}

/// Blocked requests get the closure's response; the service keeps the inner service's error
/// type (so it fits where an infallible service is expected, as axum's `Router::layer`
/// does). Made by [`SentinelLayer::on_block`](crate::SentinelLayer::on_block).
#[derive(Clone, Copy)]
pub struct BlockAsResponse<F> {
    f: F,
}

impl<F> BlockAsResponse<F> {
    pub(crate) fn new(f: F) -> Self {
        Self { f }
    }
}

impl<F> fmt::Debug for BlockAsResponse<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockAsResponse")
            .field("f", &std::any::type_name::<F>())
            .finish()
    }
}

impl<F, Res, E> BlockHandler<Res, E> for BlockAsResponse<F>
where
    F: Fn(&BlockError) -> Res,
{
    type Error = E;

    fn blocked(&self, error: BlockError) -> Result<Res, E> {
        Ok((self.f)(&error))
    }

    fn inner_error(error: E) -> E {
        error
    }
}

/// Marks a response that answers a blocked call: the layer puts it in the response
/// extensions of every block answer it makes ([`SentinelLayer::on_block`](crate::SentinelLayer::on_block),
/// [`SentinelLayer::respond_with`](crate::SentinelLayer::respond_with), and `Blocked` with
/// the `axum` feature), so that a guard around this one does not count the answer (a `503`
/// of an open breaker) as an error of its own resource (see
/// [`SentinelLayer::count_block_answers`](crate::SentinelLayer::count_block_answers)).
///
/// Insert one in a block answer you build yourself to have it left out the same way:
///
/// ```
/// use http::{Response, StatusCode};
/// use sentinel_core::RuleFamily;
/// use sentinel_tower::BlockAnswer;
///
/// let mut response = Response::new(String::from("busy"));
/// *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
/// response.extensions_mut().insert(BlockAnswer::new(RuleFamily::Degrade));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockAnswer {
    family: RuleFamily,
}

impl BlockAnswer {
    /// A mark for an answer to a call blocked by a rule of `family`.
    pub fn new(family: RuleFamily) -> Self {
        Self { family }
    }

    /// The family of the rule that blocked the call.
    pub fn family(&self) -> RuleFamily {
        self.family
    }

    /// Marks `response` as the answer to a call a rule of `family` blocked.
    pub(crate) fn mark<B>(
        family: RuleFamily,
        mut response: http::Response<B>,
    ) -> http::Response<B> {
        response.extensions_mut().insert(Self::new(family));
        response
    }
}
