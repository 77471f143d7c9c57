//! Warm-up (cold start): a token bucket that lets QPS rise from `count / coldFactor` to
//! `count` over the warm-up period, as in Guava's `SmoothWarmingUp` and Sentinel's
//! `WarmUpController`.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use super::{next_up, Decision};
use crate::stat::StatNode;

/// Sentinel's cold factor.
pub(crate) const COLD_FACTOR: u32 = 3;

/// The shared warm-up state: stored tokens and the last refill second.
#[derive(Debug)]
pub(crate) struct WarmUpState {
    pub(crate) count: f64,
    cold_factor: u32,
    pub(crate) warning_token: i64,
    max_token: i64,
    pub(crate) slope: f64,
    pub(crate) stored_tokens: AtomicI64,
    last_filled_ms: AtomicU64,
}

impl WarmUpState {
    pub(crate) fn new(count: f64, warm_up_period_sec: u32, cold_factor: u32) -> Self {
        let cold_factor = cold_factor.max(2);
        let period = f64::from(warm_up_period_sec);
        let warning_token = (period * count) as i64 / i64::from(cold_factor - 1);
        // Float-to-integer casts saturate, and so does the sum: a huge count cannot overflow.
        let max_token = warning_token
            .saturating_add((2.0 * period * count / (1.0 + f64::from(cold_factor))) as i64);
        let slope = (f64::from(cold_factor) - 1.0) / count / (max_token - warning_token) as f64;
        Self {
            count,
            cold_factor,
            warning_token,
            max_token,
            slope,
            // A new controller starts cold, with a full bucket, as Sentinel's does (its first
            // refill runs from time 0).
            stored_tokens: AtomicI64::new(max_token),
            last_filled_ms: AtomicU64::new(0),
        }
    }

    /// Refills and drains the bucket once per second, using the previous second's passes.
    pub(crate) fn sync_token(&self, now_ms: u64, previous_qps: f64) {
        let current = now_ms - now_ms % 1000;
        let old_last = self.last_filled_ms.load(Ordering::Acquire);
        if current <= old_last {
            return;
        }
        let old_value = self.stored_tokens.load(Ordering::Acquire);
        let new_value = self.cool_down_tokens(current, old_last, old_value, previous_qps);
        if self
            .stored_tokens
            .compare_exchange(old_value, new_value, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            let rest = self
                .stored_tokens
                .fetch_sub(previous_qps as i64, Ordering::AcqRel)
                - previous_qps as i64;
            if rest < 0 {
                self.stored_tokens.store(0, Ordering::Release);
            }
            self.last_filled_ms.store(current, Ordering::Release);
        }
    }

    fn cool_down_tokens(&self, current: u64, last: u64, old_value: i64, previous_qps: f64) -> i64 {
        let refill = ((current - last) as f64 * self.count / 1000.0) as i64;
        // Below the warning line the bucket always refills; above it, only while traffic is
        // under the cold rate (count / coldFactor).
        let cold_traffic =
            previous_qps < ((self.count as i64) / i64::from(self.cold_factor)) as f64;
        let refills =
            old_value < self.warning_token || (old_value > self.warning_token && cold_traffic);
        let new_value = if refills {
            old_value.saturating_add(refill)
        } else {
            old_value
        };
        new_value.min(self.max_token)
    }

    /// The QPS the bucket allows now.
    pub(crate) fn allowed_qps(&self) -> f64 {
        let rest = self.stored_tokens.load(Ordering::Acquire);
        if rest >= self.warning_token {
            let above = (rest - self.warning_token) as f64;
            next_up(1.0 / (above * self.slope + 1.0 / self.count))
        } else {
            self.count
        }
    }
}

/// Sentinel's `WarmUpController`.
#[derive(Debug)]
pub(crate) struct WarmUp {
    state: WarmUpState,
}

impl WarmUp {
    pub(crate) fn new(count: f64, warm_up_period_sec: u32, cold_factor: u32) -> Self {
        Self {
            state: WarmUpState::new(count, warm_up_period_sec, cold_factor),
        }
    }

    // Out of line: the reject controller's loop stays small.
    #[inline(never)]
    pub(crate) fn check(&self, node: &StatNode, acquire: u32, now_ms: u64) -> Decision {
        if self.state.count <= 0.0 {
            return Decision::Block;
        }
        let pass_qps = node.pass_qps(now_ms);
        self.state
            .sync_token(now_ms, node.previous_pass_qps(now_ms));
        if pass_qps + acquire as f64 <= self.state.allowed_qps() {
            Decision::Pass
        } else {
            Decision::Block
        }
    }

    #[cfg(test)]
    pub(crate) fn stored_tokens(&self) -> i64 {
        self.state.stored_tokens.load(Ordering::Relaxed)
    }
}
