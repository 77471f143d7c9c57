//! The per-value state of one param-flow rule: a bounded, lock-free table of slots, and the
//! slot's state, which the three checks of `slot.rs` keep (token bucket, uniform spacing,
//! concurrency).
//!
//! # The table
//!
//! A value is tracked by its 63-bit fingerprint (see `ParamValue::fingerprint`). The table
//! has 1.5 slots per value of the rule's capacity, in buckets of [`WAYS`] slots; each slot
//! holds a fingerprint (its tag), the value's state in one atomic word, and when it was last
//! used. A fingerprint may live in either of two buckets (two-choice hashing): a new value
//! goes to the one with fewer live values, so that as many values as the capacity all find
//! a slot. Nothing is allocated after the table is made, so memory is fixed whatever the
//! number of distinct values (see [`ValueTable::bytes`]).
//!
//! # First calls
//!
//! Inserting a value is serialized per bucket by a one-byte flag held for a few dozen
//! instructions: the slot is claimed (its tag marked busy), its state reset, and only then
//! the fingerprint published. Two callers racing on the first call of a value so find one
//! slot and one fresh state, and exactly one of them takes the value's first token. A lookup
//! of a tracked value never waits.
//!
//! # Which value a new one replaces
//!
//! 1. An empty slot, or a slot whose value was unused long enough that its state is that of a
//!    fresh value (a full bucket, a spacing in the past, no call in flight): reusing it
//!    changes no decision.
//! 2. Otherwise (more values are live than the table holds), the live value seen least
//!    often, by a small count-min sketch of how often each value was seen (the TinyLFU
//!    idea), least recently used among equals. A flood of one-time values so replaces its
//!    own kind, never a value that keeps coming back: that one has been seen more often than
//!    any one-time value. The sketch halves every `durationInSec` (at least a second, at most
//!    a minute), so old popularity fades. A new value is always taken in, as in Sentinel's
//!    LRU map, so its first calls are counted; a value that returns rarely, under a flood,
//!    may be replaced between its calls until it has been seen a few times (its next call
//!    then finds a fresh state).
//! 3. Thread grade: a slot with calls in flight is never replaced (its count would be lost).
//!    When every slot a new value may take has calls in flight, the new value is **blocked**:
//!    no value passes unchecked because the table is full.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::sketch::Sketch;

/// Slots per bucket: eight tags fill one cache line.
pub(crate) const WAYS: usize = 8;
/// The tag of a slot being filled: lookups miss it, other inserters skip it. Fingerprints
/// never have their top bit set, so none equals it.
const BUSY: u64 = u64::MAX;
/// A slot's `used` word: the last use in milliseconds + 1 in the low bits, the value's hits
/// in the slot (distinct milliseconds it was used in, halved with the sketch) above.
const HITS_SHIFT: u32 = 44;
const USED_MASK: u64 = (1 << HITS_SHIFT) - 1;
const HITS_MAX: u64 = (1 << (64 - HITS_SHIFT)) - 1;

/// The last use of a `used` word (milliseconds + 1, 0 for never).
#[inline]
fn last_use(word: u64) -> u64 {
    word & USED_MASK
}

/// The hits of a `used` word.
#[inline]
fn hits(word: u64) -> u64 {
    word >> HITS_SHIFT
}

/// A `used` word: last used at `now_ms`, with `hits`.
#[inline]
fn used_word(now_ms: u64, hits: u64) -> u64 {
    (now_ms.saturating_add(1) & USED_MASK) | hits.min(HITS_MAX) << HITS_SHIFT
}

/// When a slot's state is that of a fresh value, so that reusing it changes no decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reuse {
    /// After this many milliseconds unused (a token bucket refilled, a spacing past).
    IdleFor(u64),
    /// Thread grade: when no call is in flight. A slot with calls in flight is pinned.
    WhenIdle,
}

/// Where a value's state lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// In this slot.
    Slot(usize),
    /// Nowhere: thread grade, every slot the value may take has calls in flight.
    Untracked,
}

#[repr(align(64))]
#[derive(Debug, Default)]
struct Tags([AtomicU64; WAYS]);

/// The bounded per-value table of one rule.
#[derive(Debug)]
pub(crate) struct ValueTable {
    tags: Box<[Tags]>,
    states: Box<[AtomicU64]>,
    /// Each slot's last use, in milliseconds + 1, and its value's hits (see [`used_word`]).
    used: Box<[AtomicU64]>,
    /// Per bucket: a value whose first bucket this is is being inserted.
    inserting: Box<[AtomicBool]>,
    sketch: Sketch,
    buckets: u64,
    reuse: Reuse,
}

impl ValueTable {
    /// A table for `capacity` values.
    pub(crate) fn new(capacity: usize, reuse: Reuse, halve_every_ms: u64) -> Self {
        let slots = capacity.max(1).saturating_mul(3).div_ceil(2);
        let buckets = slots.div_ceil(WAYS).max(1);
        let slots = buckets * WAYS;
        let sketch = match reuse {
            // Thread grade never compares popularity: a busy slot stays, an idle one goes.
            Reuse::WhenIdle => Sketch::new(0, halve_every_ms),
            Reuse::IdleFor(_) => Sketch::new(slots, halve_every_ms),
        };
        Self {
            tags: (0..buckets).map(|_| Tags::default()).collect(),
            states: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            used: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            inserting: (0..buckets).map(|_| AtomicBool::new(false)).collect(),
            sketch,
            buckets: buckets as u64,
            reuse,
        }
    }

    /// How many values the table holds at most.
    #[cfg(test)]
    pub(crate) fn slots(&self) -> usize {
        self.states.len()
    }

    /// The heap bytes of the table.
    pub(crate) fn bytes(&self) -> usize {
        self.tags.len() * std::mem::size_of::<Tags>()
            + self.states.len() * 2 * 8
            + self.inserting.len()
            + self.sketch.bytes()
    }

    /// The state word of slot `slot`.
    #[inline]
    pub(crate) fn state(&self, slot: usize) -> &AtomicU64 {
        &self.states[slot]
    }

    /// A fingerprint's first bucket.
    #[inline]
    fn first_bucket(&self, fingerprint: u64) -> usize {
        // A fingerprint's top bit is clear: shifted out, so that every bucket is used.
        self.pick(fingerprint << 1)
    }

    /// A fingerprint's second bucket.
    #[inline]
    fn second_bucket(&self, fingerprint: u64) -> usize {
        self.pick(fingerprint.rotate_left(32))
    }

    #[inline]
    fn pick(&self, hash: u64) -> usize {
        ((u128::from(hash) * u128::from(self.buckets)) >> 64) as usize
    }

    /// The way of `bucket` holding `fingerprint`.
    #[inline]
    fn find_in(&self, bucket: usize, fingerprint: u64) -> Option<usize> {
        self.tags[bucket]
            .0
            .iter()
            .position(|tag| tag.load(Ordering::Acquire) == fingerprint)
            .map(|way| bucket * WAYS + way)
    }

    /// The slot of `fingerprint`, taken (replacing another value) if the value is new.
    #[inline]
    pub(crate) fn slot(&self, fingerprint: u64, now_ms: u64) -> Place {
        let first = self.first_bucket(fingerprint);
        if let Some(slot) = self.find_in(first, fingerprint) {
            self.touch(slot, fingerprint, now_ms);
            return Place::Slot(slot);
        }
        let second = self.second_bucket(fingerprint);
        if let Some(slot) = self.find_in(second, fingerprint) {
            self.touch(slot, fingerprint, now_ms);
            return Place::Slot(slot);
        }
        self.insert(fingerprint, first, second, now_ms)
    }

    /// Records a use of `slot`: at most one write (one hit, one count in the sketch) per slot
    /// and millisecond. A plain load and store: a lost update only undercounts a hit.
    #[inline]
    fn touch(&self, slot: usize, fingerprint: u64, now_ms: u64) {
        let used = &self.used[slot];
        let word = used.load(Ordering::Relaxed);
        if last_use(word) != last_use(used_word(now_ms, 0)) {
            used.store(used_word(now_ms, hits(word) + 1), Ordering::Relaxed);
            if self.sketch.record(fingerprint, now_ms) {
                self.halve_hits();
            }
        }
    }

    /// Halves every slot's hits, with the sketch: old popularity fades.
    #[cold]
    fn halve_hits(&self) {
        for used in self.used.iter() {
            let word = used.load(Ordering::Relaxed);
            if hits(word) > 1 {
                used.store(
                    last_use(word) | (hits(word) >> 1) << HITS_SHIFT,
                    Ordering::Relaxed,
                );
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn insert(&self, fingerprint: u64, first: usize, second: usize, now_ms: u64) -> Place {
        if self.sketch.record(fingerprint, now_ms) {
            self.halve_hits();
        }
        // Every insertion of this value goes through its first bucket's flag, so two first
        // calls of one value never take two slots.
        let _flag = InsertFlag::hold(&self.inserting[first]);
        if let Some(slot) = self
            .find_in(first, fingerprint)
            .or_else(|| self.find_in(second, fingerprint))
        {
            return Place::Slot(slot);
        }
        // Values whose other bucket is one of these insert under other flags: a claim can
        // fail, and then a new victim is chosen.
        for _ in 0..2 * WAYS {
            let Some((slot, old)) = self.victim(first, second, now_ms) else {
                return Place::Untracked;
            };
            let tag = &self.tags[slot / WAYS].0[slot % WAYS];
            if tag
                .compare_exchange(old, BUSY, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                if let Reuse::IdleFor(_) = self.reuse {
                    // The replaced value's bucket or spacing is not the new value's. (A
                    // thread-grade slot is taken only idle, and keeps the count of a call
                    // that raced in: its exit gives it back.)
                    self.states[slot].store(0, Ordering::Release);
                }
                self.used[slot].store(used_word(now_ms, 1), Ordering::Relaxed);
                // Published last: whoever finds the fingerprint finds the fresh state.
                tag.store(fingerprint, Ordering::Release);
                return Place::Slot(slot);
            }
        }
        Place::Untracked
    }

    /// Whether `slot` holds the state of a fresh value.
    fn reusable(&self, slot: usize, now_ms: u64) -> bool {
        match self.reuse {
            Reuse::WhenIdle => self.states[slot].load(Ordering::Acquire) == 0,
            Reuse::IdleFor(idle_ms) => {
                let used = last_use(self.used[slot].load(Ordering::Relaxed));
                now_ms.saturating_add(1).saturating_sub(used) > idle_ms
            }
        }
    }

    /// The slot a new value takes and the tag it replaces: a free one (empty, or reusable)
    /// in the bucket with fewer live values, least recently used first; else the live value
    /// seen least often (never, at thread grade: `None`).
    fn victim(&self, first: usize, second: usize, now_ms: u64) -> Option<(usize, u64)> {
        let buckets: &[usize] = if first == second {
            &[first]
        } else {
            &[first, second]
        };
        // (live values in the bucket, last use, slot, tag): the smallest is taken.
        let mut free: Option<(usize, u64, usize, u64)> = None;
        // ((hits in its slot, seen lately, last use), slot, tag): the smallest is taken.
        let mut rarest: Option<((u64, u64, u64), usize, u64)> = None;
        for &bucket in buckets {
            let mut live = 0;
            let mut best: Option<(u64, usize, u64)> = None;
            for (way, tag) in self.tags[bucket].0.iter().enumerate() {
                let slot = bucket * WAYS + way;
                let tag = tag.load(Ordering::Acquire);
                if tag == BUSY {
                    live += 1;
                } else if tag == 0 || self.reusable(slot, now_ms) {
                    let used = if tag == 0 {
                        0
                    } else {
                        last_use(self.used[slot].load(Ordering::Relaxed))
                    };
                    if best.is_none_or(|(u, _, _)| used < u) {
                        best = Some((used, slot, tag));
                    }
                } else {
                    live += 1;
                    if self.reuse != Reuse::WhenIdle {
                        let word = self.used[slot].load(Ordering::Relaxed);
                        let key = (hits(word), self.sketch.estimate(tag), last_use(word));
                        if rarest.is_none_or(|(k, _, _)| key < k) {
                            rarest = Some((key, slot, tag));
                        }
                    }
                }
            }
            if let Some((used, slot, tag)) = best {
                if free.is_none_or(|(l, u, _, _)| (live, used) < (l, u)) {
                    free = Some((live, used, slot, tag));
                }
            }
        }
        if let Some((_, _, slot, tag)) = free {
            return Some((slot, tag));
        }
        rarest.map(|(_, slot, tag)| (slot, tag))
    }
}

/// Holds a bucket's insertion flag; spins (then yields) while another insertion holds it.
struct InsertFlag<'a>(&'a AtomicBool);

impl<'a> InsertFlag<'a> {
    fn hold(flag: &'a AtomicBool) -> Self {
        let mut spins = 0u32;
        while flag
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            if spins < 64 {
                std::hint::spin_loop();
                spins += 1;
            } else {
                // The holder was descheduled mid-insertion: let it run.
                std::thread::yield_now();
            }
        }
        Self(flag)
    }
}

impl Drop for InsertFlag<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::param_flow::slot::{release, reserve};

    fn slot(table: &ValueTable, fingerprint: u64, now_ms: u64) -> usize {
        match table.slot(fingerprint, now_ms) {
            Place::Slot(slot) => slot,
            Place::Untracked => panic!("value {fingerprint} untracked"),
        }
    }

    /// Spread fingerprints, as `ParamValue::fingerprint` gives (top bit clear, never 0).
    fn fp(i: u64) -> u64 {
        (i.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 1).max(1)
    }

    #[test]
    fn a_value_keeps_its_slot_and_the_table_never_grows() {
        let table = ValueTable::new(64, Reuse::IdleFor(1000), 1000);
        assert_eq!(table.slots(), 96);
        let bytes = table.bytes();
        let a = slot(&table, fp(11), 0);
        assert_eq!(slot(&table, fp(11), 1), a);
        for i in 1..100_000u64 {
            let _ = table.slot(fp(i * 7919), 2 + i);
        }
        assert_eq!(table.bytes(), bytes);
    }

    #[test]
    fn a_value_idle_past_its_reuse_time_is_replaced_first() {
        // One bucket (8 slots): fill it, then a ninth value takes the idle one.
        let table = ValueTable::new(4, Reuse::IdleFor(100), 1000);
        assert_eq!(table.slots(), 8);
        for i in 0..8 {
            slot(&table, fp(i), 0);
        }
        for i in 1..8 {
            slot(&table, fp(i), 150);
        }
        let taken = slot(&table, fp(99), 150);
        assert_eq!(taken, slot(&table, fp(99), 151));
        assert!(
            (1..8).all(|i| matches!(table.slot(fp(i), 152), Place::Slot(s) if s != taken)),
            "only the idle value was replaced"
        );
    }

    #[test]
    fn a_live_full_table_replaces_the_value_seen_least_often() {
        let table = ValueTable::new(4, Reuse::IdleFor(10_000), 60_000);
        assert_eq!(table.slots(), 8);
        for i in 0..7 {
            for ms in 0..3 {
                slot(&table, fp(i), ms);
            }
        }
        let once = slot(&table, fp(7), 3);
        // Newcomers take the place of the one-time value, then of each other.
        assert_eq!(slot(&table, fp(100), 10), once);
        assert_eq!(slot(&table, fp(101), 11), once);
        for i in 0..7 {
            assert_ne!(
                slot(&table, fp(i), 12),
                once,
                "value {i} was seen more often"
            );
        }
    }

    /// Issue #48 part 3: under a flood the sketch's 4-bit counters saturate, so every
    /// newcomer looks as popular as a value that calls every millisecond, and the least
    /// recently used of equals went: the value calling after each millisecond's flood was
    /// the oldest, and was replaced (each of its calls then a fresh first call). Its hits in
    /// its slot (one per millisecond it calls in) now come before the sketch.
    #[test]
    fn a_flood_never_replaces_a_value_that_calls_every_millisecond() {
        // One bucket of 8 slots; more one-time values a millisecond than it holds.
        let table = ValueTable::new(4, Reuse::IdleFor(10_000), 1_000);
        assert_eq!(table.slots(), 8);
        let hot = fp(1);
        let home = slot(&table, hot, 0);
        let mut cold = 1_000;
        for ms in 1..200 {
            for _ in 0..12 {
                cold += 1;
                slot(&table, fp(cold), ms);
            }
            let word = table.used[home].load(Ordering::Relaxed);
            assert_eq!(
                table.slot(hot, ms),
                Place::Slot(home),
                "replaced at {ms} ms (hits {}, used {})",
                hits(word),
                last_use(word)
            );
        }
    }

    #[test]
    fn busy_thread_slots_are_pinned_and_a_full_table_refuses() {
        let table = ValueTable::new(4, Reuse::WhenIdle, 1000);
        for i in 0..8 {
            let s = slot(&table, fp(i), 0);
            assert!(reserve(table.state(s), 1, 1));
        }
        assert_eq!(table.slot(fp(99), 1), Place::Untracked);
        let first = slot(&table, fp(0), 1);
        release(table.state(first));
        assert_eq!(table.slot(fp(99), 2), Place::Slot(first));
    }
}
