//! Circuit breaking (Sentinel's degrade rules): slow-call ratio, error ratio and error count
//! over a sliding statistic window, with `minRequestAmount`, and the
//! CLOSED -> OPEN -> HALF_OPEN -> CLOSED cycle with exactly one probe in HALF_OPEN.
//!
//! In HALF_OPEN exactly one probe runs. A probe that has not completed one `timeWindow` after
//! it started is presumed lost, and the next call becomes a new probe: so a probe that is
//! merely slow (its RT longer than `timeWindow`) lets a second one start. The first
//! completion then decides the state. A probe that a later check blocks returns its breaker
//! to OPEN with the retry still due, as in Sentinel.
//!
//! A slow-call breaker counts a call as slow when its RT exceeds `count` rounded to whole
//! milliseconds (Sentinel's `Math.round(count)`).
//!
//! Errors are recorded through the entry ([`Entry::set_error`](crate::Entry::set_error)).
//! The breakers a call passed receive its completion when the entry exits, even if the rules
//! were reloaded meanwhile.

mod breaker;
mod golang;
mod manager;
mod rule;
mod state;

pub(crate) use breaker::{Admission, CircuitBreaker, Transition, Transitions};
pub(crate) use golang::{into_go_breaker_rule, GoBreakerRuleWire};
pub(crate) use manager::DegradeTable;
pub(crate) use rule::DegradeRuleWire;
pub use rule::{DegradeGrade, DegradeRule};
pub use state::BreakerState;

#[cfg(test)]
mod tests;
