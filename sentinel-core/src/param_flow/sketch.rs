//! How often values were seen, for choosing which value a new one replaces in a full
//! value table (`values.rs`): a count-min sketch that forgets with time.

use std::sync::atomic::{AtomicU64, Ordering};

/// Rows of the count-min sketch.
const ROWS: usize = 4;
/// Odd multipliers that give each row its own index of a fingerprint.
const ROW_SEEDS: [u64; ROWS] = [
    0x9E37_79B9_7F4A_7C15,
    0xC2B2_AE3D_27D4_EB4F,
    0x1656_67B1_9E37_79F9,
    0xD6E8_FEB8_6659_FD93,
];
/// A 4-bit counter's largest value.
const COUNTER_MAX: u64 = 15;

/// How often values were seen: a count-min sketch of 4-bit counters (four rows, one counter
/// per slot of the table in each, rounded up to a power of two), incremented conservatively
/// and halved every `halve_every_ms`. Updates are plain loads and stores: a lost update
/// under a race only undercounts an estimate.
#[derive(Debug)]
pub(super) struct Sketch {
    words: Box<[AtomicU64]>,
    /// Counters per row, minus one (a power of two minus one).
    row_mask: usize,
    halve_every_ms: u64,
    next_halving: AtomicU64,
}

impl Sketch {
    /// The sketch's size in bytes.
    pub(super) fn bytes(&self) -> usize {
        self.words.len() * 8
    }

    pub(super) fn new(counters: usize, halve_every_ms: u64) -> Self {
        let per_row = if counters == 0 {
            0
        } else {
            counters.next_power_of_two().max(16)
        };
        Self {
            words: (0..ROWS * per_row / 16)
                .map(|_| AtomicU64::new(0))
                .collect(),
            row_mask: per_row.saturating_sub(1),
            halve_every_ms: halve_every_ms.max(1),
            next_halving: AtomicU64::new(halve_every_ms.max(1)),
        }
    }

    /// The word and bit shift of `fingerprint`'s counter in `row`.
    #[inline]
    fn counter(&self, row: usize, fingerprint: u64) -> (usize, u32) {
        let index = (fingerprint.wrapping_mul(ROW_SEEDS[row]) >> 32) as usize & self.row_mask;
        let per_row = self.row_mask + 1;
        ((row * per_row + index) / 16, (index % 16) as u32 * 4)
    }

    /// How often `fingerprint` was seen lately (0 to 15).
    pub(super) fn estimate(&self, fingerprint: u64) -> u64 {
        if self.words.is_empty() {
            return 0;
        }
        (0..ROWS)
            .map(|row| {
                let (word, shift) = self.counter(row, fingerprint);
                self.words[word].load(Ordering::Relaxed) >> shift & COUNTER_MAX
            })
            .min()
            .unwrap_or(0)
    }

    /// Counts one sighting of `fingerprint`: the counters at the row minimum go up by one.
    /// Returns whether the sketch was halved first (its period began).
    #[inline(never)]
    pub(super) fn record(&self, fingerprint: u64, now_ms: u64) -> bool {
        if self.words.is_empty() {
            return false;
        }
        let halved = self.age(now_ms);
        let mut at = [(0usize, 0u32, 0u64); ROWS];
        for (row, slot) in at.iter_mut().enumerate() {
            let (word, shift) = self.counter(row, fingerprint);
            let value = self.words[word].load(Ordering::Relaxed) >> shift & COUNTER_MAX;
            *slot = (word, shift, value);
        }
        let min = at.iter().map(|&(_, _, v)| v).min().unwrap_or(COUNTER_MAX);
        if min >= COUNTER_MAX {
            return halved;
        }
        for &(word, shift, value) in &at {
            if value == min {
                let cell = &self.words[word];
                let current = cell.load(Ordering::Relaxed);
                if current >> shift & COUNTER_MAX < COUNTER_MAX {
                    cell.store(current + (1 << shift), Ordering::Relaxed);
                }
            }
        }
        halved
    }

    /// Halves every counter once per `halve_every_ms`; whether it did now.
    fn age(&self, now_ms: u64) -> bool {
        let due = self.next_halving.load(Ordering::Relaxed);
        if now_ms < due
            || self
                .next_halving
                .compare_exchange(
                    due,
                    now_ms.saturating_add(self.halve_every_ms),
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_err()
        {
            return false;
        }
        for cell in self.words.iter() {
            let halved = (cell.load(Ordering::Relaxed) >> 1) & 0x7777_7777_7777_7777;
            cell.store(halved, Ordering::Relaxed);
        }
        true
    }
}
