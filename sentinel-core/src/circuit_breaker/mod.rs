//! Circuit breaking (Sentinel's degrade rules): slow-call ratio, error ratio and error count
//! over a sliding statistic window, with `minRequestAmount`, and the
//! CLOSED -> OPEN -> HALF_OPEN -> CLOSED cycle with exactly one probe in HALF_OPEN.
//!
//! Errors are recorded through the entry ([`Entry::set_error`](crate::Entry::set_error)).
//! The breakers a call passed receive its completion when the entry exits, even if the rules
//! were reloaded meanwhile.

mod breaker;
mod manager;
mod rule;
mod state;

pub(crate) use breaker::{Admission, CircuitBreaker, Transitions};
pub(crate) use manager::DegradeTable;
pub(crate) use rule::DegradeRuleWire;
pub use rule::{DegradeGrade, DegradeRule};
pub use state::BreakerState;

#[cfg(test)]
mod tests;
