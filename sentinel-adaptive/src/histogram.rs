//! A lock-free latency histogram for one window: log-linear buckets of atomic counters in
//! microseconds (1 µs buckets below 32 µs, then 16 buckets per power of two, so a bucket is
//! at most 6.25 % wide). An exit records with one relaxed `fetch_add`; the window's owner
//! drains it into a plain [`Counts`] off the hot path.

use std::sync::atomic::{AtomicU64, Ordering};

const LINEAR: usize = 32;
const SUB_BITS: u32 = 4;
const SUB: usize = 1 << SUB_BITS;
/// Latencies are capped at 2^40 µs (about 12 days).
const MAX_EXP: u32 = 40;
pub(crate) const BUCKETS: usize = LINEAR + (MAX_EXP as usize - 4) * SUB;

fn index(micros: u64) -> usize {
    let v = micros.min((1 << (MAX_EXP + 1)) - 1);
    if v < LINEAR as u64 {
        return v as usize;
    }
    let exp = 63 - v.leading_zeros(); // >= 5
    let mantissa = ((v >> (exp - SUB_BITS)) as usize) & (SUB - 1);
    LINEAR + (exp as usize - 5) * SUB + mantissa
}

/// The `[low, high)` bounds of bucket `i` in microseconds.
fn bounds(i: usize) -> (f64, f64) {
    if i < LINEAR {
        return (i as f64, i as f64 + 1.0);
    }
    let exp = ((i - LINEAR) / SUB) as u32 + 5;
    let mantissa = ((i - LINEAR) % SUB) as u64;
    let width = 1u64 << (exp - SUB_BITS);
    let low = (SUB as u64 + mantissa) * width;
    (low as f64, (low + width) as f64)
}

pub(crate) struct AtomicHistogram {
    buckets: Box<[AtomicU64]>,
}

impl AtomicHistogram {
    pub(crate) fn new() -> Self {
        AtomicHistogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    #[inline]
    pub(crate) fn record(&self, micros: u64) {
        if let Some(bucket) = self.buckets.get(index(micros)) {
            bucket.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Moves every count into `into` (added to what it holds) and zeroes this histogram. A
    /// sample recorded during the drain lands in this window or the next, never in both.
    pub(crate) fn drain_into(&self, into: &mut Counts) {
        for (bucket, slot) in self.buckets.iter().zip(into.counts.iter_mut()) {
            if bucket.load(Ordering::Relaxed) != 0 {
                *slot += bucket.swap(0, Ordering::Relaxed);
            }
        }
    }
}

/// A drained histogram, owned by the window's owner.
pub(crate) struct Counts {
    counts: Box<[u64]>,
}

impl Counts {
    pub(crate) fn new() -> Self {
        Counts {
            counts: vec![0; BUCKETS].into_boxed_slice(),
        }
    }

    pub(crate) fn clear(&mut self) {
        self.counts.iter_mut().for_each(|c| *c = 0);
    }

    pub(crate) fn add(&mut self, other: &Counts) {
        for (slot, c) in self.counts.iter_mut().zip(other.counts.iter()) {
            *slot += c;
        }
    }

    pub(crate) fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The sum of the latencies, each taken at its bucket's middle, in microseconds.
    pub(crate) fn sum_micros(&self) -> f64 {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, c)| **c != 0)
            .map(|(i, c)| {
                let (low, high) = bounds(i);
                *c as f64 * (low + high) / 2.0
            })
            .sum()
    }

    /// The `p`-th percentile (0 < p < 100) in microseconds, interpolated inside its bucket;
    /// `None` when empty.
    pub(crate) fn percentile(&self, p: f64) -> Option<f64> {
        let total = self.total();
        if total == 0 {
            return None;
        }
        let rank = ((p / 100.0) * total as f64).ceil().clamp(1.0, total as f64);
        let mut below = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            if c == 0 {
                continue;
            }
            if (below + c) as f64 >= rank {
                let (low, high) = bounds(i);
                let within = (rank - below as f64 - 0.5) / c as f64;
                return Some(low + (high - low) * within.clamp(0.0, 1.0));
            }
            below += c;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_in_order_and_are_at_most_one_sixteenth_wide() {
        let mut last = 0;
        for v in (0..5_000u64).chain([1 << 20, 10_000_000, 1 << 40, u64::MAX]) {
            let i = index(v);
            assert!(i < BUCKETS, "{v} -> {i}");
            assert!(i >= last, "{v}");
            last = i;
            let (low, high) = bounds(i);
            if v < 1 << 41 {
                assert!(
                    low <= v as f64 && (v as f64) < high,
                    "{v} in [{low}, {high})"
                );
            }
            if v >= LINEAR as u64 {
                assert!((high - low) / low <= 1.0 / 16.0 + 1e-9);
            }
        }
    }

    #[test]
    fn percentiles_are_within_a_bucket_and_draining_empties() {
        let h = AtomicHistogram::new();
        for ms in 1..=100u64 {
            h.record(ms * 1_000);
        }
        let mut counts = Counts::new();
        h.drain_into(&mut counts);
        assert_eq!(counts.total(), 100);
        for (p, want) in [(50.0, 50_000.0), (90.0, 90_000.0), (1.0, 1_000.0)] {
            let got = counts.percentile(p).unwrap_or_default();
            assert!((got - want).abs() / want < 0.07, "p{p}: {got}");
        }
        let mean = counts.sum_micros() / 100.0;
        assert!((mean - 50_500.0).abs() / 50_500.0 < 0.07, "{mean}");
        let mut again = Counts::new();
        h.drain_into(&mut again);
        assert_eq!(again.total(), 0);
        assert_eq!(again.percentile(50.0), None);
        counts.clear();
        assert_eq!(counts.total(), 0);
    }
}
