//! Adaptive concurrency limits for Sentinel: a limit on calls in flight that follows the
//! dependency's measured latency instead of a number tuned by hand.
//!
//! An [`AdaptiveRule`] (Sentinel-style JSON, its own rule family `adaptive`) picks an
//! algorithm ([`Algorithm::Gradient`], [`Algorithm::Vegas`] or [`Algorithm::Aimd`]), its
//! bounds, the latency percentile it reads and the update window. An [`AdaptiveLimiter`]
//! enforces it: the hot path is an exact bulkhead reservation on one atomic word, exits
//! record their latency into a lock-free histogram, and [`AdaptiveLimiter::tick`] recomputes
//! the limit once per window from those samples. The minimum RTT is re-measured by jittered
//! probes that never lower the limit below 3 and never reject more than 1 % of the calls.
//!
//! This crate does not depend on `sentinel-core`; the engine wires it in as a rule family.
//!
//! ```
//! use std::time::Duration;
//! use sentinel_adaptive::{AdaptiveLimiter, AdaptiveRule, Outcome};
//!
//! let rule: AdaptiveRule = serde_json::from_str(r#"{"resource": "db", "maxLimit": 64}"#)?;
//! let limiter = AdaptiveLimiter::builder(rule).replica_seed(7).build(0)?;
//! if let Some(permit) = limiter.try_acquire() {
//!     // ... call the dependency, measure its latency ...
//!     permit.release(Duration::from_millis(10), Outcome::Success);
//! }
//! limiter.tick(100); // from a timer: closes the window and recomputes the limit
//! assert_eq!(limiter.in_flight(), 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod algorithm;
mod histogram;
mod limiter;
mod probe;
mod rule;

pub use limiter::{
    AdaptiveLimiter, AdaptiveLimiterBuilder, Learned, LimiterStatus, Outcome, OwnedPermit, Permit,
    ProbeState,
};
pub use rule::{AdaptiveRule, AdaptiveRuleError, Algorithm, MAX_LIMIT};
