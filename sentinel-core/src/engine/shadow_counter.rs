//! The would-block counter of one shadow rule: this second, the second before, and the
//! running total, all plain atomics (no lock, no allocation on the hot path).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::circuit_breaker::{BreakerState, CircuitBreaker};
use crate::events::{EventBus, SentinelEvent};
use crate::rules::RuleFamily;

/// Would-block counts and would-be breaker transitions of one shadow rule.
#[derive(Debug)]
pub(crate) struct ShadowCounter {
    pub(crate) family: RuleFamily,
    /// The rule's resource; `None` for a system rule (every inbound resource).
    pub(crate) resource: Option<Arc<str>>,
    /// The rule as a combined-document JSON object (what the stats and events name).
    pub(crate) rule: Arc<str>,
    /// `sentinel_shadow_block_total`'s `reason` (index into `block::REASONS`) and `kind`.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) reason: usize,
    pub(crate) kind: &'static str,
    /// The shadow breaker, for a degrade rule.
    pub(crate) breaker: Option<Arc<CircuitBreaker>>,
    /// The second (`now_ms / 1000`) `this` counts.
    second: AtomicU64,
    this: AtomicU64,
    /// The count of the second before `second` (0 if that second saw none).
    last: AtomicU64,
    total: AtomicU64,
    /// Would-be breaker transitions: to OPEN, to HALF_OPEN, to CLOSED.
    transitions: [AtomicU64; 3],
}

impl ShadowCounter {
    pub(crate) fn new(
        family: RuleFamily,
        resource: Option<Arc<str>>,
        rule: Arc<str>,
        (reason, kind): (usize, &'static str),
    ) -> Self {
        Self {
            family,
            resource,
            rule,
            reason,
            kind,
            breaker: None,
            second: AtomicU64::new(u64::MAX),
            this: AtomicU64::new(0),
            last: AtomicU64::new(0),
            total: AtomicU64::new(0),
            transitions: Default::default(),
        }
    }

    /// A counter that starts from `previous`'s counts (an equal rule across a reload).
    pub(crate) fn carry(&self, previous: &ShadowCounter) {
        for (to, from) in [
            (&self.second, &previous.second),
            (&self.this, &previous.this),
            (&self.last, &previous.last),
            (&self.total, &previous.total),
        ] {
            to.store(from.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        for (to, from) in self.transitions.iter().zip(&previous.transitions) {
            to.store(from.load(Ordering::Relaxed), Ordering::Relaxed);
        }
    }

    /// Counts `n` would-blocked calls at `now_ms`. The first would-block of a second emits
    /// one [`SentinelEvent::ShadowBlocked`] (so at most one event per rule per second).
    #[inline]
    pub(crate) fn record(&self, now_ms: u64, n: u64, resource: &str, events: &EventBus) {
        let second = now_ms / 1000;
        let seen = self.second.load(Ordering::Relaxed);
        if seen != second {
            self.roll(seen, second, now_ms, resource, events);
        }
        self.this.fetch_add(n, Ordering::Relaxed);
        self.total.fetch_add(n, Ordering::Relaxed);
    }

    /// A new second: the last one's count moves to `last`, and the event goes out. Racing
    /// threads may each see the old second; one wins the exchange, the others count on.
    #[cold]
    #[inline(never)]
    fn roll(&self, seen: u64, second: u64, now_ms: u64, resource: &str, events: &EventBus) {
        if self
            .second
            .compare_exchange(seen, second, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        let previous = self.this.swap(0, Ordering::Relaxed);
        let previous = if seen.wrapping_add(1) == second {
            previous
        } else {
            0
        };
        self.last.store(previous, Ordering::Relaxed);
        events.emit(SentinelEvent::ShadowBlocked {
            resource: resource.to_owned(),
            family: self.family,
            rule: self.rule.to_string(),
            at_ms: now_ms,
            previous_second: previous,
            total: self.total.load(Ordering::Relaxed),
        });
    }

    /// Would-blocks in the second of `now_ms`, and in the second before.
    pub(crate) fn per_second(&self, now_ms: u64) -> (u64, u64) {
        let second = now_ms / 1000;
        let seen = self.second.load(Ordering::Relaxed);
        let this = self.this.load(Ordering::Relaxed);
        if seen == second {
            (this, self.last.load(Ordering::Relaxed))
        } else if seen.wrapping_add(1) == second {
            (0, this)
        } else {
            (0, 0)
        }
    }

    /// Would-blocks since the rule was first loaded as a shadow rule.
    pub(crate) fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// Counts a would-be breaker transition to `to`.
    pub(crate) fn transition(&self, to: BreakerState) {
        let i = match to {
            BreakerState::Open => 0,
            BreakerState::HalfOpen => 1,
            BreakerState::Closed => 2,
        };
        self.transitions[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Would-be transitions to OPEN, HALF_OPEN and CLOSED.
    pub(crate) fn transitions(&self) -> [u64; 3] {
        let [a, b, c] = &self.transitions;
        [
            a.load(Ordering::Relaxed),
            b.load(Ordering::Relaxed),
            c.load(Ordering::Relaxed),
        ]
    }
}
