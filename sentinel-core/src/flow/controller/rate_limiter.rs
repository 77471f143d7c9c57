//! The rate limiter (leaky bucket): calls are spaced `1/count` seconds apart and queue for at
//! most `maxQueueingTimeMs`, as in Sentinel's `ThrottlingController`.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use super::Decision;
use crate::clock::Clock;

const NANOS_PER_SEC: f64 = 1_000_000_000.0;
const NANOS_PER_MS: i64 = 1_000_000;

/// "No call has passed yet": the first call always passes, however early the clock is.
const IDLE: i64 = i64::MIN;

/// Sentinel's `ThrottlingController`.
///
/// Differences from Java, on purpose:
/// - Spacing is always computed in nanoseconds, so it is exact at any count. Sentinel before
///   1.8.7 rounded it to whole milliseconds up to 1000/s (700/s then admitted 1000); 1.8.7+
///   uses nanoseconds only when `1000 % round(count) != 0` or `count > 1000`, which gives the
///   same spacing as here.
/// - The limiter starts idle: the first call passes. Java starts from a last pass at -1 ms,
///   which only works because its clock counts from 1970; this engine's clock counts from
///   process start.
/// - Time arithmetic saturates, so a huge batch or a tiny count blocks instead of
///   overflowing.
#[derive(Debug)]
pub(crate) struct RateLimiter {
    count: f64,
    schedule: Schedule,
}

impl RateLimiter {
    pub(crate) fn new(count: f64, max_queueing_time_ms: u32) -> Self {
        Self {
            count,
            schedule: Schedule::new(max_queueing_time_ms),
        }
    }

    // Out of line: the reject controller's loop stays small.
    #[inline(never)]
    pub(crate) fn check(&self, acquire: u32, clock: &dyn Clock) -> Decision {
        if acquire == 0 {
            return Decision::Pass;
        }
        if self.count <= 0.0 {
            return Decision::Block;
        }
        self.schedule
            .schedule(clock.now_nanos(), cost_nanos(acquire, self.count))
    }
}

/// The spacing of `acquire` permits at `per_second`, in nanoseconds (saturating).
pub(crate) fn cost_nanos(acquire: u32, per_second: f64) -> i64 {
    // A float-to-integer cast saturates (and NaN is 0, which a positive rate never gives).
    (NANOS_PER_SEC * f64::from(acquire) / per_second).round() as i64
}

/// The leaky bucket's schedule: when the last call was scheduled to pass, in nanoseconds.
/// Shared by the rate limiter and warm-up + rate limiter.
#[derive(Debug)]
pub(crate) struct Schedule {
    max_queueing: i64,
    latest_passed: AtomicI64,
}

impl Schedule {
    pub(crate) fn new(max_queueing_time_ms: u32) -> Self {
        Self {
            max_queueing: i64::from(max_queueing_time_ms) * NANOS_PER_MS,
            latest_passed: AtomicI64::new(IDLE),
        }
    }

    /// Reserves the next slot `cost` nanoseconds after the last one: pass now when the bucket
    /// is idle, wait for the slot when it is within the queueing time, block otherwise.
    pub(crate) fn schedule(&self, now_nanos: u64, cost: i64) -> Decision {
        let now = i64::try_from(now_nanos).unwrap_or(i64::MAX);
        let mut latest = self.latest_passed.load(Ordering::Acquire);
        loop {
            let expected = latest.saturating_add(cost);
            let (slot, wait) = if expected <= now {
                (now, 0)
            } else {
                (expected, expected.saturating_sub(now))
            };
            if wait > self.max_queueing {
                return Decision::Block;
            }
            match self.latest_passed.compare_exchange_weak(
                latest,
                slot,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) if wait == 0 => return Decision::Pass,
                Ok(_) => return Decision::Wait(Duration::from_nanos(wait.unsigned_abs())),
                Err(actual) => latest = actual,
            }
        }
    }
}
