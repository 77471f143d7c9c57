//! What a blocked request gets: an error (the default) or a response.

use std::fmt;

use sentinel_core::BlockError;

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
