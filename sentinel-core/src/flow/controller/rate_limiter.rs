//! The rate limiter (leaky bucket): calls are spaced `1/count` seconds apart and queue for at
//! most `maxQueueingTimeMs`, as in Sentinel's `ThrottlingController`.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use super::Decision;
use crate::clock::Clock;

/// Above this many calls per second the spacing is computed in nanoseconds, because a
/// millisecond cost would round to zero (Sentinel 1.8's `useNanoSeconds`).
const NANOS_ABOVE_COUNT: f64 = 1000.0;

/// Sentinel's `ThrottlingController`.
#[derive(Debug)]
pub(crate) struct RateLimiter {
    count: f64,
    max_queueing: i64,
    nanos: bool,
    /// When the last call was scheduled to pass, in ms or ns (per `nanos`).
    latest_passed: AtomicI64,
}

impl RateLimiter {
    pub(crate) fn new(count: f64, max_queueing_time_ms: u32) -> Self {
        let nanos = count > NANOS_ABOVE_COUNT;
        let unit = if nanos { 1_000_000 } else { 1 };
        Self {
            count,
            max_queueing: i64::from(max_queueing_time_ms) * unit,
            nanos,
            latest_passed: AtomicI64::new(-1),
        }
    }

    // Out of line: the reject controller's loop stays small.
    #[inline(never)]
    pub(crate) fn check(&self, acquire: u32, now_ms: u64, clock: &dyn Clock) -> Decision {
        if acquire == 0 {
            return Decision::Pass;
        }
        if self.count <= 0.0 {
            return Decision::Block;
        }
        let (now, unit_per_sec) = if self.nanos {
            (clock.now_nanos() as i64, 1_000_000_000.0)
        } else {
            (now_ms as i64, 1000.0)
        };
        let cost = (unit_per_sec * f64::from(acquire) / self.count).round() as i64;
        self.schedule(now, cost)
    }

    /// Reserves the next slot `cost` after the last one; shared with warm-up + rate limiter.
    pub(crate) fn schedule(&self, now: i64, cost: i64) -> Decision {
        let latest = self.latest_passed.load(Ordering::Acquire);
        if latest + cost <= now {
            // The bucket is idle: pass now, unless another caller just took this slot.
            if self
                .latest_passed
                .compare_exchange(latest, now, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return Decision::Pass;
            }
        }
        let wait = cost + self.latest_passed.load(Ordering::Acquire) - now;
        if wait > self.max_queueing {
            return Decision::Block;
        }
        let old = self.latest_passed.fetch_add(cost, Ordering::AcqRel) + cost;
        let wait = old - now;
        if wait > self.max_queueing {
            self.latest_passed.fetch_sub(cost, Ordering::AcqRel);
            return Decision::Block;
        }
        if wait <= 0 {
            return Decision::Pass;
        }
        let wait = wait as u64;
        Decision::Wait(if self.nanos {
            Duration::from_nanos(wait)
        } else {
            Duration::from_millis(wait)
        })
    }
}

/// A rate limiter fed a cost per call, for warm-up + rate limiter.
#[derive(Debug)]
pub(crate) struct Schedule {
    inner: RateLimiter,
}

impl Schedule {
    pub(crate) fn new(max_queueing_time_ms: u32) -> Self {
        Self {
            inner: RateLimiter {
                count: 1.0,
                max_queueing: i64::from(max_queueing_time_ms),
                nanos: false,
                latest_passed: AtomicI64::new(-1),
            },
        }
    }

    pub(crate) fn schedule_ms(&self, now_ms: u64, cost_ms: i64) -> Decision {
        self.inner.schedule(now_ms as i64, cost_ms)
    }
}
