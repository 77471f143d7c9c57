//! The three checks that run on one value's slot, each on the slot's one atomic word of
//! state: the token bucket (QPS, reject), uniform spacing (QPS, rate limiter) and the
//! concurrency count (thread grade).

use std::sync::atomic::{AtomicU64, Ordering};

/// A token-bucket state: the refill time in its high bits, the tokens in its low ones.
const TOKEN_BITS: u32 = 24;
/// The most tokens a value holds: a higher count acts as this one.
pub(crate) const MAX_TOKENS: u64 = (1 << TOKEN_BITS) - 1;
/// Times are kept as milliseconds + 1 in 40 bits (0 marks a fresh slot): 34 years.
const TIME_MASK: u64 = (1 << 40) - 1;

/// Sentinel's `passDefaultLocalCheck`: `tokens` per `duration_ms`, at most `max` held
/// (`tokens + burstCount`). The bucket refills, in proportion to the time passed, once a
/// whole duration has passed since its last refill.
#[inline]
pub(crate) fn take_tokens(
    state: &AtomicU64,
    now_ms: u64,
    tokens: u64,
    max: u64,
    duration_ms: u64,
    acquire: u64,
) -> bool {
    if tokens == 0 || acquire > max {
        return false;
    }
    let now = (now_ms + 1) & TIME_MASK;
    let pack = |time: u64, rest: u64| time << TOKEN_BITS | rest;
    let mut seen = state.load(Ordering::Acquire);
    loop {
        let (time, rest) = (seen >> TOKEN_BITS, seen & MAX_TOKENS);
        let next = if time == 0 {
            // The value's first call: a full bucket.
            pack(now, max - acquire)
        } else {
            let passed = now.wrapping_sub(time) & TIME_MASK;
            if passed > duration_ms {
                let added = u128::from(passed) * u128::from(tokens) / u128::from(duration_ms);
                let total = u128::from(rest) + added;
                if total < u128::from(acquire) {
                    return false;
                }
                let left = if total > u128::from(max) {
                    max - acquire
                } else {
                    // total <= max here, so it fits.
                    u64::try_from(total).unwrap_or(max) - acquire
                };
                pack(now, left)
            } else if rest >= acquire {
                pack(time, rest - acquire)
            } else {
                return false;
            }
        };
        match state.compare_exchange_weak(seen, next, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return true,
            Err(current) => seen = current,
        }
    }
}

/// Sentinel's `passThrottleLocalCheck`, in nanoseconds: one call per `cost_ns`, queueing
/// less than `max_queue_ns`. The state is the time the last call was given, + 1 (0: the
/// value's first call). Returns how long the call waits, or `None` when it is rejected.
#[inline]
pub(crate) fn space_out(
    state: &AtomicU64,
    now_ns: u64,
    cost_ns: u64,
    max_queue_ns: u64,
) -> Option<u64> {
    let mut seen = state.load(Ordering::Acquire);
    loop {
        let (next, wait) = if seen == 0 {
            (now_ns, 0)
        } else {
            let expected = (seen - 1).saturating_add(cost_ns);
            if expected <= now_ns {
                (now_ns, 0)
            } else if expected - now_ns < max_queue_ns {
                (expected, expected - now_ns)
            } else {
                return None;
            }
        };
        let next = next.min(u64::MAX - 1) + 1;
        match state.compare_exchange_weak(seen, next, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Some(wait),
            Err(current) => seen = current,
        }
    }
}

/// The concurrency check, as Sentinel counts it: a call passes while the calls in flight
/// plus `acquire` stay within `limit`, and takes one place. The check and the place are one
/// atomic step, so the limit is exact.
#[inline]
pub(crate) fn reserve(state: &AtomicU64, limit: u64, acquire: u64) -> bool {
    state
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |in_flight| {
            (in_flight.saturating_add(acquire) <= limit).then_some(in_flight + 1)
        })
        .is_ok()
}

/// Gives back a place [`reserve`] took (never below zero).
#[inline]
pub(crate) fn release(state: &AtomicU64) {
    let _ = state.fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
        Some(v.saturating_sub(1))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserve_counts_one_place_per_call_and_checks_the_batch() {
        let s = AtomicU64::new(0);
        let admitted = (0..20).filter(|_| reserve(&s, 10, 5)).count();
        assert_eq!(admitted, 6, "in flight + 5 <= 10 while in flight <= 5");
        assert_eq!(s.load(Ordering::Relaxed), 6);
    }

    #[test]
    fn token_bucket_refills_after_a_whole_duration() {
        let s = AtomicU64::new(0);
        let take = |now| take_tokens(&s, now, 2, 3, 1000, 1);
        assert!(take(0) && take(1) && take(2), "count 2 + burst 1");
        assert!(!take(500));
        assert!(!take(1000), "a whole duration has not passed yet");
        assert!(take(1003) && take(1003) && !take(1003));
    }

    #[test]
    fn spacing_queues_within_the_limit() {
        const MS: u64 = 1_000_000;
        let s = AtomicU64::new(0);
        assert_eq!(space_out(&s, 0, 100 * MS, 250 * MS), Some(0));
        assert_eq!(space_out(&s, 10 * MS, 100 * MS, 250 * MS), Some(90 * MS));
        assert_eq!(space_out(&s, 10 * MS, 100 * MS, 250 * MS), Some(190 * MS));
        assert_eq!(space_out(&s, 10 * MS, 100 * MS, 250 * MS), None);
        assert_eq!(space_out(&s, 1000 * MS, 100 * MS, 0), Some(0));
        assert_eq!(space_out(&s, 1050 * MS, 100 * MS, 0), None);
        assert_eq!(space_out(&s, u64::MAX, u64::MAX, 0), Some(0), "saturates");
    }
}
