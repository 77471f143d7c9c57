//! Circuit-breaker states.

use std::fmt;

/// The state of a circuit breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum BreakerState {
    /// Calls pass; the breaker counts them.
    Closed = 0,
    /// Calls are blocked until the retry timeout (`timeWindow`) passes.
    Open = 1,
    /// One probe call was admitted; new calls are blocked. The next call that completes
    /// (normally the probe; as in Sentinel, also a call admitted before the breaker opened)
    /// closes the breaker if it was fast and without error, and reopens it otherwise.
    HalfOpen = 2,
}

impl BreakerState {
    pub(crate) fn from_u8(v: u8) -> Self {
        match v {
            0 => BreakerState::Closed,
            1 => BreakerState::Open,
            _ => BreakerState::HalfOpen,
        }
    }
}

impl fmt::Display for BreakerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BreakerState::Closed => "CLOSED",
            BreakerState::Open => "OPEN",
            BreakerState::HalfOpen => "HALF_OPEN",
        })
    }
}
