//! A sliding window of time buckets with atomic counters, in the style of Sentinel's
//! `LeapArray`.
//!
//! The window of `interval_ms` is split into `buckets` buckets of equal length. The bucket for
//! a time is found by index arithmetic; a bucket left over from an older round is reset by
//! the first writer that sees it (a compare-and-swap on its start time). Readers sum only the
//! buckets that are still inside the interval. Nothing locks and nothing allocates after
//! construction.
//!
//! As in Sentinel, the reset is not atomic with concurrent adds: an add that races with the
//! reset of its own bucket can be lost. The window is a statistic, not a ledger.

use std::sync::atomic::{AtomicU64, Ordering};

use strength_reduce::StrengthReducedU64;

/// Marks a bucket that has never been used.
const EMPTY: u64 = u64::MAX;

/// The events one bucket counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    Pass,
    Block,
    Success,
    Error,
    Rt,
    /// Prioritized calls that borrowed a slot of a future bucket (Sentinel's occupied pass).
    OccupiedPass,
}

/// Completed calls and their RT sum share one counter, so a completion is one atomic add:
/// the count in the high bits, the RT sum (ms) in the low `RT_BITS` bits. A bucket holds up
/// to 2^24 (16.7 M) completions and 2^40 ms of summed RT.
const RT_BITS: u32 = 40;
const RT_MASK: u64 = (1 << RT_BITS) - 1;
/// The longest RT one call adds to the sum (the rest is cut off): about 49 days.
const RT_CAP: u64 = u32::MAX as u64;
/// The most completions one add records (a larger batch is cut off rather than spill).
const COUNT_CAP: u64 = (1 << (64 - RT_BITS)) - 1;

/// The value `n` of `event` adds to its counter slot.
#[inline]
fn encode(event: Event, n: u64) -> u64 {
    match event {
        Event::Success => n.min(COUNT_CAP) << RT_BITS,
        Event::Rt => n.min(RT_CAP),
        _ => n,
    }
}

#[cfg(test)]
/// One add of `n` completions taking `rt` ms in all.
#[inline]
fn encode_completions(n: u64, rt: u64) -> u64 {
    (n.min(COUNT_CAP) << RT_BITS) | rt.min(RT_CAP)
}

/// Counter slots: pass, block, success+RT, error, occupied pass.
const SLOTS: usize = 5;
const SUCCESS_RT: usize = 2;

impl Event {
    /// Every event, in the order the minute window and a retired round list them.
    pub(crate) const ALL: [Event; 6] = [
        Event::Pass,
        Event::Block,
        Event::Success,
        Event::Error,
        Event::Rt,
        Event::OccupiedPass,
    ];

    #[inline]
    fn slot(self) -> usize {
        match self {
            Event::Pass => 0,
            Event::Block => 1,
            Event::Success | Event::Rt => SUCCESS_RT,
            Event::Error => 3,
            Event::OccupiedPass => 4,
        }
    }
}

/// One bucket: start time, five counters and (for the tests, which still check it) the
/// minimum RT, on its own cache line. Node statistics use `hot`'s buckets; this generic
/// window counts circuit breakers' calls and prioritized calls' borrowed passes.
#[repr(align(64))]
#[derive(Debug)]
pub(crate) struct Bucket {
    start: AtomicU64,
    counters: [AtomicU64; SLOTS],
    #[cfg(test)]
    min_rt: AtomicU64,
}

impl Bucket {
    fn new() -> Self {
        Self {
            start: AtomicU64::new(EMPTY),
            counters: Default::default(),
            #[cfg(test)]
            min_rt: AtomicU64::new(u64::MAX),
        }
    }

    #[inline]
    pub(crate) fn add(&self, event: Event, n: u64) {
        self.counters[event.slot()].fetch_add(encode(event, n), Ordering::Relaxed);
    }

    #[cfg(test)]
    /// `n` completions that took `rt` ms in all: one atomic add.
    pub(crate) fn add_completions(&self, n: u64, rt: u64) {
        self.counters[SUCCESS_RT].fetch_add(encode_completions(n, rt), Ordering::Relaxed);
    }

    /// Like [`add`](Self::add), by the only thread that writes this bucket when `owned`: a
    /// plain load and store instead of a locked add.
    #[inline]
    pub(crate) fn add_by(&self, event: Event, n: u64, owned: bool) {
        if owned {
            let n = match event {
                Event::Success => n << RT_BITS,
                Event::Rt => n.min(RT_CAP),
                _ => n,
            };
            let counter = &self.counters[event.slot()];
            counter.store(
                counter.load(Ordering::Relaxed).wrapping_add(n),
                Ordering::Relaxed,
            );
        } else {
            self.add(event, n);
        }
    }

    #[inline(always)]
    pub(crate) fn get(&self, event: Event) -> u64 {
        let v = self.counters[event.slot()].load(Ordering::Relaxed);
        match event {
            Event::Success => v >> RT_BITS,
            Event::Rt => v & RT_MASK,
            _ => v,
        }
    }

    #[cfg(test)]
    pub(crate) fn record_rt(&self, rt: u64) {
        // Most calls are not the fastest: a plain load avoids a locked instruction.
        if rt < self.min_rt.load(Ordering::Relaxed) {
            self.min_rt.fetch_min(rt, Ordering::Relaxed);
        }
    }

    pub(crate) fn reset(&self) {
        for counter in &self.counters {
            counter.store(0, Ordering::Relaxed);
        }
        #[cfg(test)]
        self.min_rt.store(u64::MAX, Ordering::Relaxed);
    }
}

/// A sliding window of buckets: sums cover `interval_ms`; the array may retain more rounds
/// than the interval (`retained` buckets), so the previous interval stays readable.
///
/// `BUCKET_MS` fixes the bucket length at compile time, so finding a bucket is a
/// multiplication rather than a division; `0` (the default) takes it from the constructor.
#[derive(Debug)]
pub(crate) struct Window<const BUCKET_MS: u64 = 0> {
    buckets: Box<[Bucket]>,
    bucket_ms: u64,
    /// Buckets inside the interval.
    per_interval: u64,
    /// `bucket_ms` and the bucket count as divisors: a hardware division costs about as
    /// much as the rest of an update.
    per_bucket: StrengthReducedU64,
    per_array: StrengthReducedU64,
    /// `len - 1` when the bucket count is a power of two: indexing is then a mask.
    mask: Option<u64>,
}

impl<const BUCKET_MS: u64> Window<BUCKET_MS> {
    #[cfg(test)]
    /// `buckets` buckets over `interval_ms`, retaining exactly the interval.
    pub(crate) fn new(buckets: usize, interval_ms: u64) -> Self {
        Self::with_retention(buckets, interval_ms, buckets)
    }

    /// `buckets` buckets over `interval_ms`, keeping the last `retained` buckets. With a
    /// fixed `BUCKET_MS`, that length wins over `interval_ms / buckets`.
    pub(crate) fn with_retention(buckets: usize, interval_ms: u64, retained: usize) -> Self {
        let (buckets, bucket_ms) = Self::shape(buckets, interval_ms);
        let len = retained.max(buckets);
        Self {
            buckets: (0..len).map(|_| Bucket::new()).collect(),
            bucket_ms,
            per_interval: buckets as u64,
            per_bucket: StrengthReducedU64::new(bucket_ms),
            per_array: StrengthReducedU64::new(len as u64),
            mask: len.is_power_of_two().then_some(len as u64 - 1),
        }
    }

    /// The number of buckets (at least one) and their length for `buckets` over
    /// `interval_ms`: a fixed `BUCKET_MS` wins, else the interval is split (at least 1 ms).
    pub(crate) fn shape(buckets: usize, interval_ms: u64) -> (usize, u64) {
        let buckets = buckets.max(1);
        let bucket_ms = if BUCKET_MS > 0 {
            BUCKET_MS
        } else {
            (interval_ms / buckets as u64).max(1)
        };
        (buckets, bucket_ms)
    }

    /// The round (bucket-length period since the clock's origin) of time `t`.
    #[inline(always)]
    pub(crate) fn round_of(&self, t: u64) -> u64 {
        // With a fixed length this folds to a multiplication; `0` divides at run time.
        t.checked_div(BUCKET_MS)
            .unwrap_or_else(|| t / self.per_bucket)
    }

    /// The bucket of `round`, and the start time that round has.
    #[inline(always)]
    fn slot(&self, round: u64) -> (&Bucket, u64) {
        let index = match self.mask {
            Some(mask) => round & mask,
            None => round % self.per_array,
        } as usize;
        (&self.buckets[index], round * self.bucket_ms)
    }

    /// The bucket for `now`, reset first if it still holds an older round.
    #[inline]
    pub(crate) fn current(&self, now: u64) -> &Bucket {
        self.current_with(now, |_, _| {}, |_, _| {})
    }

    /// Like [`current`](Self::current); the thread that resets an old round first hands it
    /// (its start and counters) to `retire`, then the fresh bucket (its new start) to `seed`.
    #[inline(always)]
    pub(crate) fn current_with(
        &self,
        now: u64,
        retire: impl FnOnce(u64, &Bucket),
        seed: impl FnOnce(u64, &Bucket),
    ) -> &Bucket {
        let (bucket, start) = self.slot(self.round_of(now));
        let seen = bucket.start.load(Ordering::Acquire);
        if seen != start && (seen == EMPTY || seen < start) {
            self.renew(bucket, seen, start, retire, seed);
        }
        // A bucket newer than `now` means the clock went back: count into it anyway.
        bucket
    }

    /// Starts a new round in `bucket`, which holds the older round `seen`.
    #[cold]
    #[inline(never)]
    fn renew(
        &self,
        bucket: &Bucket,
        seen: u64,
        start: u64,
        retire: impl FnOnce(u64, &Bucket),
        seed: impl FnOnce(u64, &Bucket),
    ) {
        // Exactly one thread wins the reset of an old round.
        if bucket
            .start
            .compare_exchange(seen, start, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            if seen != EMPTY {
                retire(seen, bucket);
            }
            bucket.reset();
            seed(start, bucket);
        }
    }

    #[cfg(test)]
    /// The bucket for a past time `t` if it holds that round or an older one (reset first),
    /// `None` if it already holds a newer round.
    pub(crate) fn bucket_at(&self, t: u64) -> Option<&Bucket> {
        let (bucket, start) = self.slot(self.round_of(t));
        let seen = bucket.start.load(Ordering::Acquire);
        if seen != EMPTY && seen > start {
            return None;
        }
        Some(self.current(t))
    }

    /// Sum of one event over every retained bucket whose round starts in `[from, to)`.
    pub(crate) fn sum_range(&self, from: u64, to: u64, event: Event) -> u64 {
        self.buckets
            .iter()
            .filter(|b| {
                let start = b.start.load(Ordering::Acquire);
                start != EMPTY && start >= from && start < to
            })
            .map(|b| b.get(event))
            .sum()
    }

    /// The buckets inside the interval that ends in round `round`: the ones still holding
    /// `round`, `round - 1`, ... (a bucket holding an older round, or a newer one after the
    /// clock went back, is not inside).
    #[inline(always)]
    fn live(&self, round: u64) -> impl Iterator<Item = &Bucket> {
        (0..self.per_interval)
            .filter_map(move |back| round.checked_sub(back))
            .filter_map(move |r| {
                let (bucket, start) = self.slot(r);
                (bucket.start.load(Ordering::Acquire) == start).then_some(bucket)
            })
    }

    /// Sum of one event over the buckets inside the interval ending in `round`.
    #[inline(always)]
    pub(crate) fn sum_at(&self, round: u64, event: Event) -> u64 {
        let mut total = 0;
        for bucket in self.live(round) {
            total += bucket.get(event);
        }
        total
    }

    #[cfg(test)]
    /// Sum of one event over the buckets still inside the interval.
    #[inline]
    pub(crate) fn sum(&self, now: u64, event: Event) -> u64 {
        self.sum_at(self.round_of(now), event)
    }

    #[cfg(test)]
    /// The smallest RT seen inside the interval ending in `round`, if any call completed.
    pub(crate) fn min_rt_at(&self, round: u64) -> Option<u64> {
        self.live(round)
            .map(|b| b.min_rt.load(Ordering::Relaxed))
            .filter(|rt| *rt != u64::MAX)
            .min()
    }

    #[cfg(test)]
    /// The smallest RT seen inside the interval, if any call completed.
    pub(crate) fn min_rt(&self, now: u64) -> Option<u64> {
        self.min_rt_at(self.round_of(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn counts_slide_out_after_the_interval() {
        let w: Window = Window::new(2, 1000);
        w.current(100).add(Event::Pass, 3);
        w.current(600).add(Event::Pass, 4);
        assert_eq!(w.sum(999, Event::Pass), 7);
        // At 1000 the first bucket [0,500) is out, [500,1000) is in.
        assert_eq!(w.sum(1000, Event::Pass), 4);
        assert_eq!(w.sum(1500, Event::Pass), 0);
        // The first bucket is reused for [1000, 1500).
        w.current(1200).add(Event::Pass, 1);
        assert_eq!(w.sum(1200, Event::Pass), 5);
        assert_eq!(w.sum_range(1000, 1500, Event::Pass), 1);
    }

    #[test]
    fn min_rt_inside_the_interval() {
        let w: Window = Window::new(10, 1000);
        w.current(0).record_rt(30);
        w.current(150).record_rt(10);
        w.current(150).add(Event::Success, 5);
        w.current(350).add(Event::Success, 2);
        assert_eq!(w.min_rt(400), Some(10));
        assert_eq!(w.min_rt(5000), None);
    }

    #[test]
    fn completions_and_rt_share_one_counter() {
        let w: Window = Window::new(2, 1000);
        let b = w.current(0);
        b.add_completions(3, 250);
        b.add(Event::Success, 2);
        b.add(Event::Rt, 50);
        assert_eq!((b.get(Event::Success), b.get(Event::Rt)), (5, 300));
        // A huge RT is capped and cannot spill into the completion count.
        b.add_completions(1, u64::MAX);
        assert_eq!(b.get(Event::Success), 6);
        assert_eq!(b.get(Event::Rt), 300 + u64::from(u32::MAX));
        assert_eq!(w.sum(10, Event::Success), 6);
    }

    #[test]
    fn retained_rounds_and_roll_up() {
        let w: Window = Window::with_retention(2, 1000, 4);
        let retired = std::cell::Cell::new(0);
        w.current(0).add(Event::Pass, 1);
        w.current(500).add(Event::Pass, 2);
        w.current(1000).add(Event::Pass, 3);
        // The previous second is still readable.
        assert_eq!(w.sum(1200, Event::Pass), 5);
        assert_eq!(w.sum_range(0, 1000, Event::Pass), 3);
        // Reusing the first bucket hands its round over before the reset.
        w.current_with(
            2000,
            |start, b| {
                assert_eq!(start, 0);
                retired.set(b.get(Event::Pass));
            },
            |start, b| b.add(Event::Pass, start),
        );
        assert_eq!(
            w.sum_range(2000, 2001, Event::Pass),
            2000,
            "seeded after the reset"
        );
        assert_eq!(retired.get(), 1);
        assert!(
            w.bucket_at(0).is_none(),
            "the bucket now holds a newer round"
        );
    }

    proptest! {
        /// Whatever the sequence of times, the sum never includes counts older than the
        /// interval, and always includes the current bucket.
        #[test]
        fn sum_matches_a_naive_model(steps in proptest::collection::vec((0u64..400, 1u64..5), 1..200)) {
            let w: Window = Window::new(2, 1000);
            let mut now = 5_000u64;
            let mut log: Vec<(u64, u64)> = Vec::new();
            for (dt, n) in steps {
                now += dt;
                w.current(now).add(Event::Pass, n);
                log.push((now, n));
                let start_of_current = now - now % 500;
                let oldest = start_of_current.saturating_sub(500);
                let expected: u64 = log.iter().filter(|(t, _)| *t >= oldest).map(|(_, n)| n).sum();
                prop_assert_eq!(w.sum(now, Event::Pass), expected);
            }
        }
    }
}
