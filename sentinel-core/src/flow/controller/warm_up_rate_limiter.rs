//! Warm-up + rate limiter: the rate limiter's spacing, with the interval taken from the
//! warm-up bucket, as Sentinel's `WarmUpRateLimiterController` (spaced in nanoseconds, as
//! the rate limiter is).

use super::rate_limiter::{cost_nanos, Schedule};
use super::warm_up::{WarmUpState, COLD_FACTOR};
use super::Decision;
use crate::clock::Clock;
use crate::stat::StatNode;

/// Sentinel's `WarmUpRateLimiterController`.
#[derive(Debug)]
pub(crate) struct WarmUpRateLimiter {
    state: WarmUpState,
    schedule: Schedule,
}

impl WarmUpRateLimiter {
    pub(crate) fn new(count: f64, warm_up_period_sec: u32, max_queueing_time_ms: u32) -> Self {
        Self {
            state: WarmUpState::new(count, warm_up_period_sec, COLD_FACTOR),
            schedule: Schedule::new(max_queueing_time_ms),
        }
    }

    // Out of line: the reject controller's loop stays small.
    #[inline(never)]
    pub(crate) fn check(
        &self,
        node: &StatNode,
        acquire: u32,
        now_ms: u64,
        clock: &dyn Clock,
    ) -> Decision {
        if self.state.count <= 0.0 {
            return Decision::Block;
        }
        self.state
            .sync_token(now_ms, node.previous_pass_qps(now_ms));
        let qps = self.state.allowed_qps();
        self.schedule
            .schedule(clock.now_nanos(), cost_nanos(acquire, qps))
    }
}
