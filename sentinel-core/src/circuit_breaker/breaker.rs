//! One circuit breaker: a state machine over a sliding statistic window.
//!
//! CLOSED -> OPEN when, within the stat interval, at least `minRequestAmount` calls completed
//! and the slow ratio, error ratio or error count is over the threshold (Sentinel 1.8's
//! comparison: a slow ratio equal to a threshold of 1.0 trips).
//! OPEN -> HALF_OPEN on the first request after the retry timeout; that request is the one
//! probe, chosen by a compare-and-swap, and every concurrent caller is blocked.
//! HALF_OPEN -> CLOSED when the probe completes fast and without error; -> OPEN otherwise, or
//! when a later check blocks the probe. As in Sentinel, the completion that decides is the
//! first one to arrive in HALF_OPEN: normally the probe's, but a call admitted before the
//! breaker opened and still running counts too.
//!
//! A probe that never completes (an entry leaked with `mem::forget`) would leave the breaker
//! HALF_OPEN forever in Sentinel. Here, once a further `timeWindow` has passed in HALF_OPEN,
//! the next request becomes a new probe.
//!
//! The window (one bucket of `statIntervalMs`, as in Sentinel) is split into thread-owned
//! stripes like the resource statistics, so a completion is a plain store. Closing the
//! breaker empties the window, as Sentinel resets its bucket: here by moving the window's
//! time ahead, so that no thread ever writes another thread's stripe.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use super::rule::{DegradeGrade, DegradeRule};
use super::state::BreakerState;
use crate::stat::{my_stripe, Event, StripedWindow};

/// Where a breaker reports its state changes: the engine's event bus.
pub(crate) trait Transitions {
    /// A breaker changed state.
    fn changed(&self, change: Transition<'_>);
}

/// One state change of the breaker of `rule`.
#[derive(Clone, Copy)]
pub(crate) struct Transition<'r> {
    pub(crate) rule: &'r DegradeRule,
    pub(crate) from: BreakerState,
    pub(crate) to: BreakerState,
    /// What tripped it, if a threshold did.
    pub(crate) value: Option<f64>,
}

/// What `try_pass` decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Closed: pass.
    Pass,
    /// This call is the half-open probe.
    Probe,
    /// Blocked.
    Block,
}

/// A circuit breaker compiled from one [`DegradeRule`].
#[derive(Debug)]
pub(crate) struct CircuitBreaker {
    pub(crate) rule: Arc<DegradeRule>,
    state: AtomicU8,
    next_retry_ms: AtomicU64,
    half_open_since_ms: AtomicU64,
    recovery_ms: u64,
    /// A slow-call breaker's limit: Sentinel's `Math.round(count)`; a call is slow above it.
    max_allowed_rt_ms: f64,
    /// `Pass` counts completed calls, `Error` counts slow or failed ones. One bucket per
    /// stripe, so a completion is a plain store by the thread that owns the stripe.
    window: StripedWindow,
    /// Added to the clock for the window. Closing the breaker clears the window by moving
    /// this ahead by two intervals: every bucket then holds an old round, so readers skip it
    /// and its owner resets it on its next write. No thread writes another's stripe.
    shift_ms: AtomicU64,
    /// The end of the window round (in window time) of the latest slow or failed call.
    /// While it is behind the current round the window holds no bad call, so a good
    /// completion need not read the window.
    bad_until: AtomicU64,
}

impl CircuitBreaker {
    pub(crate) fn new(rule: Arc<DegradeRule>) -> Self {
        Self {
            recovery_ms: u64::from(rule.time_window) * 1000,
            max_allowed_rt_ms: rule.count.round(),
            window: StripedWindow::new(1, u64::from(rule.stat_interval_ms.max(1)), 1),
            shift_ms: AtomicU64::new(0),
            bad_until: AtomicU64::new(0),
            rule,
            state: AtomicU8::new(BreakerState::Closed as u8),
            next_retry_ms: AtomicU64::new(0),
            half_open_since_ms: AtomicU64::new(0),
        }
    }

    pub(crate) fn state(&self) -> BreakerState {
        BreakerState::from_u8(self.state.load(Ordering::Acquire))
    }

    /// How long until an open breaker admits a probe, at `now`; `None` unless it is open
    /// with its retry still ahead.
    pub(crate) fn retry_in(&self, now: u64) -> Option<std::time::Duration> {
        if self.state() != BreakerState::Open {
            return None;
        }
        let at = self.next_retry_ms.load(Ordering::Acquire);
        (at > now).then(|| std::time::Duration::from_millis(at - now))
    }

    fn transition(&self, from: BreakerState, to: BreakerState) -> bool {
        self.state
            .compare_exchange(from as u8, to as u8, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    fn emit(
        &self,
        events: &impl Transitions,
        from: BreakerState,
        to: BreakerState,
        value: Option<f64>,
    ) {
        events.changed(Transition {
            rule: &self.rule,
            from,
            to,
            value,
        });
    }

    /// Decides whether a call may pass.
    #[inline(always)]
    pub(crate) fn try_pass(&self, now: u64, events: &impl Transitions) -> Admission {
        if self.state.load(Ordering::Acquire) == BreakerState::Closed as u8 {
            return Admission::Pass;
        }
        self.try_pass_not_closed(now, events)
    }

    /// `try_pass` when OPEN or HALF_OPEN.
    #[cold]
    #[inline(never)]
    fn try_pass_not_closed(&self, now: u64, events: &impl Transitions) -> Admission {
        match self.state() {
            BreakerState::Closed => Admission::Pass,
            BreakerState::Open => {
                if now >= self.next_retry_ms.load(Ordering::Acquire) {
                    self.half_open_since_ms.store(now, Ordering::Release);
                    if self.transition(BreakerState::Open, BreakerState::HalfOpen) {
                        self.emit(events, BreakerState::Open, BreakerState::HalfOpen, None);
                        return Admission::Probe;
                    }
                }
                Admission::Block
            }
            BreakerState::HalfOpen => {
                // A probe that has not completed within a further retry timeout is presumed
                // lost: exactly one caller (the CAS winner) becomes the next probe.
                let since = self.half_open_since_ms.load(Ordering::Acquire);
                if now >= since.saturating_add(self.recovery_ms)
                    && self
                        .half_open_since_ms
                        .compare_exchange(since, now, Ordering::AcqRel, Ordering::Acquire)
                        .is_ok()
                {
                    Admission::Probe
                } else {
                    Admission::Block
                }
            }
        }
    }

    /// A probe this breaker admitted was blocked by a later check: back to OPEN, with the
    /// retry still due (as Sentinel's `whenTerminate` hook does), so the next call probes.
    pub(crate) fn abort_probe(&self, now: u64, events: &impl Transitions) {
        let _ = now;
        if self.transition(BreakerState::HalfOpen, BreakerState::Open) {
            self.emit(events, BreakerState::HalfOpen, BreakerState::Open, None);
        }
    }

    /// [`abort_probe`](Self::abort_probe) for the probe admitted at `admitted_ms`: a
    /// breaker whose probe was admitted at another time (another call's) is left alone.
    pub(crate) fn abort_probe_admitted_at(&self, admitted_ms: u64, events: &impl Transitions) {
        if self.state() == BreakerState::HalfOpen
            && self.half_open_since_ms.load(Ordering::Acquire) == admitted_ms
        {
            self.abort_probe(admitted_ms, events);
        }
    }

    fn open_from(&self, from: BreakerState, now: u64, value: f64, events: &impl Transitions) {
        self.next_retry_ms
            .store(now + self.recovery_ms, Ordering::Release);
        if self.transition(from, BreakerState::Open) {
            self.emit(events, from, BreakerState::Open, Some(value));
        }
    }

    /// The window's time for `now`.
    #[inline]
    fn window_time(&self, now: u64) -> u64 {
        now.saturating_add(self.shift_ms.load(Ordering::Acquire))
    }

    /// Empties the window (on HALF_OPEN -> CLOSED).
    fn clear_window(&self) {
        let step = self.window.interval_ms().saturating_mul(2);
        // `fetch_update` never fails with a closure that always returns `Some`.
        let _ = self
            .shift_ms
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |shift| {
                Some(shift.saturating_add(step))
            });
    }

    /// A call that passed this breaker completed.
    #[inline(always)]
    pub(crate) fn on_complete(&self, now: u64, rt_ms: u64, error: bool, events: &impl Transitions) {
        let bad = match self.rule.grade {
            DegradeGrade::SlowRequestRatio => rt_ms as f64 > self.max_allowed_rt_ms,
            DegradeGrade::ErrorRatio | DegradeGrade::ErrorCount => error,
        };
        let t = self.window_time(now);
        let (stripe, owned) = my_stripe();
        let (bucket, _) = self.window.current_with(stripe, t, |_, _| {});
        bucket.add_by(Event::Pass, 1, owned);
        if bad {
            bucket.add_by(Event::Error, 1, owned);
            self.mark_bad(t);
        }
        if self.state.load(Ordering::Acquire) != BreakerState::Closed as u8 {
            self.complete_not_closed(bad, now, events);
        } else if self
            .bad_until
            .load(Ordering::Acquire)
            .saturating_add(self.window.interval_ms())
            > t
        {
            // Only a window holding a bad call can be over a threshold (they are >= 0). The
            // slack of one round covers a bad call counted into a bucket that had already
            // moved on to the next round (a racing writer on the shared stripe).
            self.check_closed(now, events);
        }
    }

    /// Notes that the window round of `t` holds a bad call.
    fn mark_bad(&self, t: u64) {
        let interval = self.window.interval_ms();
        let round_end = (t - t % interval).saturating_add(interval);
        self.bad_until.fetch_max(round_end, Ordering::AcqRel);
    }

    /// `on_complete` in OPEN (nothing to do) or HALF_OPEN (the probe decides).
    #[cold]
    #[inline(never)]
    fn complete_not_closed(&self, bad: bool, now: u64, events: &impl Transitions) {
        if self.state() != BreakerState::HalfOpen {
            return;
        }
        if bad {
            self.open_from(BreakerState::HalfOpen, now, 1.0, events);
        } else {
            // Empty the window before CLOSED is visible: a completion that sees CLOSED then
            // reads the window at its new time, never the round that opened the breaker.
            self.clear_window();
            if self.transition(BreakerState::HalfOpen, BreakerState::Closed) {
                self.emit(events, BreakerState::HalfOpen, BreakerState::Closed, None);
            }
        }
    }

    /// In CLOSED, with a bad call in the current round: opens when the window is over the
    /// threshold.
    #[inline(never)]
    fn check_closed(&self, now: u64, events: &impl Transitions) {
        // Read after the state: a breaker that just closed has emptied its window by then.
        let t = self.window_time(now);
        let bad_count = self.window.sum(t, Event::Error);
        if bad_count == 0 {
            return;
        }
        let total = self.window.sum(t, Event::Pass);
        if total < u64::from(self.rule.min_request_amount) {
            return;
        }
        let bad_count = bad_count as f64;
        let (value, trips) = match self.rule.grade {
            DegradeGrade::SlowRequestRatio => {
                let ratio = bad_count / total as f64;
                let threshold = self.rule.slow_ratio_threshold;
                (
                    ratio,
                    ratio > threshold || (ratio == threshold && threshold == 1.0),
                )
            }
            DegradeGrade::ErrorRatio => {
                let ratio = bad_count / total as f64;
                (ratio, ratio > self.rule.count)
            }
            DegradeGrade::ErrorCount => (bad_count, bad_count > self.rule.count),
        };
        if trips {
            self.open_from(BreakerState::Closed, now, value, events);
        }
    }
}
