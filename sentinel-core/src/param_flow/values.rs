//! The per-value state of one param-flow rule: a bounded, lock-free table of slots, and the
//! three checks that run on a slot (token bucket, uniform spacing, concurrency).
//!
//! # The table
//!
//! A value is tracked by its 64-bit fingerprint (see `ParamValue::fingerprint`). The table is
//! set-associative: a fingerprint maps to one bucket of [`WAYS`] slots, and each slot holds a
//! fingerprint (its tag), the value's state in one atomic word, and when it was last used.
//! Nothing is ever allocated after the table is made, so memory is fixed at 24 bytes per slot
//! whatever the number of distinct values.
//!
//! # Eviction
//!
//! A new value takes an empty slot of its bucket, or else evicts one, in this order:
//! 1. a *probationary* slot (its value was seen in one millisecond only), least recently
//!    used first;
//! 2. a *protected* slot (seen in two or more distinct milliseconds), least recently used first.
//!
//! A flood of distinct values, each seen once, so evicts only its own kind: a value that keeps
//! coming back stays, with its state. A thread-grade slot with calls in flight is never
//! evicted; if every slot of a bucket has calls in flight, a new value passes unchecked.

use std::sync::atomic::{AtomicU64, Ordering};

/// Slots per bucket: eight tags fill one cache line.
pub(crate) const WAYS: usize = 8;
/// Bytes of one slot: its tag, its state and its use.
#[cfg(test)]
const SLOT_BYTES: usize = 24;
/// A token-bucket state: the refill time in its high bits, the tokens in its low ones.
const TOKEN_BITS: u32 = 24;
/// The most tokens a value holds: a higher count acts as this one.
pub(crate) const MAX_TOKENS: u64 = (1 << TOKEN_BITS) - 1;
/// Times are kept as milliseconds + 1 in 40 bits (0 marks a fresh slot): 34 years.
const TIME_MASK: u64 = (1 << 40) - 1;
/// A slot's use: its last millisecond + 1 above the low byte, its hit count in it.
const HIT_BITS: u32 = 8;
/// Hits that make a slot protected.
const PROTECTED_HITS: u64 = 2;

#[repr(align(64))]
#[derive(Debug, Default)]
struct Tags([AtomicU64; WAYS]);

/// The bounded per-value table of one rule.
#[derive(Debug)]
pub(crate) struct ValueTable {
    tags: Box<[Tags]>,
    states: Box<[AtomicU64]>,
    used: Box<[AtomicU64]>,
    mask: usize,
    /// Thread grade: a slot with calls in flight is pinned.
    pin_busy: bool,
}

impl ValueTable {
    /// A table of at least `capacity` slots (rounded up to a power-of-two number of buckets).
    pub(crate) fn new(capacity: usize, pin_busy: bool) -> Self {
        let buckets = capacity.div_ceil(WAYS).max(1).next_power_of_two();
        let slots = buckets * WAYS;
        Self {
            tags: (0..buckets).map(|_| Tags::default()).collect(),
            states: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            used: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            mask: buckets - 1,
            pin_busy,
        }
    }

    /// How many values the table holds at most.
    pub(crate) fn slots(&self) -> usize {
        self.states.len()
    }

    /// The heap bytes of the table.
    pub(crate) fn bytes(&self) -> usize {
        self.tags.len() * std::mem::size_of::<Tags>() + self.slots() * 2 * 8
    }

    /// The state word of slot `slot`.
    #[inline]
    pub(crate) fn state(&self, slot: usize) -> &AtomicU64 {
        &self.states[slot]
    }

    /// The slot of `fingerprint`, taken (evicting) if the value is new. `None` when every
    /// slot of its bucket is pinned.
    #[inline]
    pub(crate) fn slot(&self, fingerprint: u64, now_ms: u64) -> Option<usize> {
        let bucket = (fingerprint as usize) & self.mask;
        let tags = &self.tags[bucket].0;
        let base = bucket * WAYS;
        for (way, tag) in tags.iter().enumerate() {
            if tag.load(Ordering::Acquire) == fingerprint {
                self.touch(base + way, now_ms);
                return Some(base + way);
            }
        }
        self.insert(fingerprint, bucket, now_ms)
    }

    /// Counts a use of `slot`: at most one write per slot and millisecond.
    #[inline]
    fn touch(&self, slot: usize, now_ms: u64) {
        let used = &self.used[slot];
        let seen = used.load(Ordering::Relaxed);
        let stamp = (now_ms + 1) & TIME_MASK;
        if seen >> HIT_BITS != stamp {
            let hits = (seen & 0xff).saturating_add(1).min(0xff);
            used.store(stamp << HIT_BITS | hits, Ordering::Relaxed);
        }
    }

    #[cold]
    fn insert(&self, fingerprint: u64, bucket: usize, now_ms: u64) -> Option<usize> {
        let tags = &self.tags[bucket].0;
        let base = bucket * WAYS;
        for _ in 0..WAYS {
            let way = self.victim(tags, base)?;
            let old = tags[way].load(Ordering::Acquire);
            let slot = base + way;
            if tags[way]
                .compare_exchange(old, fingerprint, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                if !self.pin_busy {
                    // The evicted value's bucket or spacing is not the new value's. (A
                    // thread-grade slot is taken only idle, and keeps the count of a call
                    // that raced in: its exit gives it back.)
                    self.states[slot].store(0, Ordering::Release);
                }
                let stamp = (now_ms + 1) & TIME_MASK;
                self.used[slot].store(stamp << HIT_BITS | 1, Ordering::Relaxed);
                return Some(slot);
            }
            // Another thread took that slot; it may have inserted this very value.
            if let Some(way) = tags
                .iter()
                .position(|t| t.load(Ordering::Acquire) == fingerprint)
            {
                return Some(base + way);
            }
        }
        None
    }

    /// The way a new value takes: an empty one, else the least recently used probationary
    /// one, else the least recently used protected one. Pinned slots are never chosen.
    fn victim(&self, tags: &[AtomicU64; WAYS], base: usize) -> Option<usize> {
        let mut best: Option<(u64, usize)> = None;
        for (way, tag) in tags.iter().enumerate() {
            if tag.load(Ordering::Acquire) == 0 {
                return Some(way);
            }
            if self.pin_busy && self.states[base + way].load(Ordering::Acquire) != 0 {
                continue;
            }
            let used = self.used[base + way].load(Ordering::Relaxed);
            let protected = u64::from((used & 0xff) >= PROTECTED_HITS);
            let score = protected << 63 | (used >> HIT_BITS);
            if best.is_none_or(|(s, _)| score < s) {
                best = Some((score, way));
            }
        }
        best.map(|(_, way)| way)
    }
}

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

/// Sentinel's `passThrottleLocalCheck`: one call per `cost_ms`, queueing less than
/// `max_queue_ms`. Returns how long the call waits, or `None` when it is rejected.
#[inline]
pub(crate) fn space_out(
    state: &AtomicU64,
    now_ms: u64,
    cost_ms: u64,
    max_queue_ms: u64,
) -> Option<u64> {
    let mut seen = state.load(Ordering::Acquire);
    loop {
        let (next, wait) = if seen == 0 {
            (now_ms, 0)
        } else {
            let expected = (seen - 1).saturating_add(cost_ms);
            if expected <= now_ms {
                (now_ms, 0)
            } else if expected - now_ms < max_queue_ms {
                (expected, expected - now_ms)
            } else {
                return None;
            }
        };
        match state.compare_exchange_weak(seen, next + 1, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Some(wait),
            Err(current) => seen = current,
        }
    }
}

/// The concurrency check: reserves a place, exactly, or refuses.
#[inline]
pub(crate) fn reserve(state: &AtomicU64, limit: u64) -> bool {
    if state.fetch_add(1, Ordering::AcqRel) < limit {
        return true;
    }
    release(state);
    false
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
    fn a_value_keeps_its_slot_and_the_table_never_grows() {
        let table = ValueTable::new(64, false);
        assert_eq!(table.slots(), 64);
        let a = table.slot(11, 0);
        assert_eq!(table.slot(11, 1), a);
        for fp in 1..100_000u64 {
            assert!(table.slot(fp * 7919, 2).is_some());
        }
        assert_eq!(table.bytes(), 64 * SLOT_BYTES);
    }

    #[test]
    fn a_flood_of_one_time_values_does_not_evict_a_returning_one() {
        let table = ValueTable::new(8, false);
        let hot = 1u64 << 40 | 8; // bucket 0 of a one-bucket table
        let slot = table.slot(hot, 0);
        assert_eq!(
            table.slot(hot, 1),
            slot,
            "seen in two milliseconds: protected"
        );
        for fp in 2..10_000u64 {
            table.slot(fp << 8, 2 + fp);
            assert_eq!(table.slot(hot, 2 + fp), slot, "evicted by value {fp}");
        }
    }

    #[test]
    fn busy_thread_slots_are_pinned() {
        let table = ValueTable::new(8, true);
        for fp in 1..=8u64 {
            let slot = table.slot(fp, 0).unwrap_or(usize::MAX);
            assert!(reserve(table.state(slot), 1));
        }
        assert_eq!(table.slot(99, 1), None, "every slot has a call in flight");
        release(table.state(0));
        assert!(table.slot(99, 2).is_some());
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
        let s = AtomicU64::new(0);
        assert_eq!(space_out(&s, 0, 100, 250), Some(0));
        assert_eq!(space_out(&s, 10, 100, 250), Some(90));
        assert_eq!(space_out(&s, 10, 100, 250), Some(190));
        assert_eq!(space_out(&s, 10, 100, 250), None);
        assert_eq!(space_out(&s, 1000, 100, 0), Some(0));
        assert_eq!(space_out(&s, 1050, 100, 0), None);
    }
}
