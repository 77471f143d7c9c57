//! The minute-level window: 60 one-second buckets of the counts `NodeStats` reports over a
//! minute, and the RT sum and occupied passes of each second for the per-second series
//! (`Sentinel::resource_seconds`). It is off the hot path (finished second-level rounds are
//! added into it), so it is stored compactly: six 32-bit counters and a start per bucket,
//! 32 bytes, no padding.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::window::Event;

/// Buckets, one per second.
const BUCKETS: usize = 60;
/// Length of a bucket.
const BUCKET_MS: u64 = 1000;
/// Marks a bucket that has never been used.
const EMPTY: u64 = u64::MAX;

/// The events the minute window counts, in the order of its counters.
const EVENTS: [Event; 6] = Event::ALL;

#[derive(Debug)]
struct MinuteBucket {
    start: AtomicU64,
    /// Pass, block, success, error, RT sum (ms) and occupied pass, each saturating at
    /// `u32::MAX` a second.
    counts: [AtomicU32; 6],
}

/// Sixty one-second buckets of pass, block, success and error counts.
#[derive(Debug)]
pub(crate) struct MinuteWindow {
    buckets: Box<[MinuteBucket]>,
}

impl MinuteWindow {
    pub(crate) fn new() -> Self {
        Self {
            buckets: (0..BUCKETS)
                .map(|_| MinuteBucket {
                    start: AtomicU64::new(EMPTY),
                    counts: Default::default(),
                })
                .collect(),
        }
    }

    #[cfg(test)]
    /// The heap bytes of a minute window.
    pub(crate) const HEAP_BYTES: usize = BUCKETS * std::mem::size_of::<MinuteBucket>();

    /// Adds a finished second-level round that started at `start` into its second: its
    /// counts of pass, block, success, error, RT sum and occupied pass.
    pub(crate) fn absorb(&self, start: u64, finished: &[u64; 6]) {
        let second = start - start % BUCKET_MS;
        let bucket = &self.buckets[((second / BUCKET_MS) % BUCKETS as u64) as usize];
        let seen = bucket.start.load(Ordering::Acquire);
        if seen != second {
            if seen != EMPTY && seen > second {
                // The bucket already holds a newer second: this round is too old to count.
                return;
            }
            if bucket
                .start
                .compare_exchange(seen, second, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                for count in &bucket.counts {
                    count.store(0, Ordering::Relaxed);
                }
            } else if bucket.start.load(Ordering::Acquire) != second {
                return;
            }
        }
        for (count, n) in bucket.counts.iter().zip(finished) {
            let n = u32::try_from(*n).unwrap_or(u32::MAX);
            if n != 0 {
                let _ = count.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
                    Some(c.saturating_add(n))
                });
            }
        }
    }

    /// The rolled-up count of `event` in the second starting at `second` (a multiple of
    /// 1000); 0 if the window no longer (or never) held that second.
    pub(crate) fn at(&self, second: u64, event: Event) -> u64 {
        let Some(slot) = EVENTS.iter().position(|e| *e == event) else {
            return 0;
        };
        let bucket = &self.buckets[((second / BUCKET_MS) % BUCKETS as u64) as usize];
        if bucket.start.load(Ordering::Acquire) != second {
            return 0;
        }
        u64::from(bucket.counts[slot].load(Ordering::Relaxed))
    }

    /// Sum of `event` over the seconds of the minute ending at `now`.
    pub(crate) fn sum(&self, now: u64, event: Event) -> u64 {
        let Some(slot) = EVENTS.iter().position(|e| *e == event) else {
            return 0;
        };
        let newest = now - now % BUCKET_MS;
        let oldest = newest.saturating_sub((BUCKETS as u64 - 1) * BUCKET_MS);
        self.buckets
            .iter()
            .filter(|b| {
                let start = b.start.load(Ordering::Acquire);
                start != EMPTY && start >= oldest && start <= newest
            })
            .map(|b| u64::from(b.counts[slot].load(Ordering::Relaxed)))
            .sum()
    }
}
