//! A node's folded passes ([`Fold`]): the counter of one round that several threads add to
//! with atomic adds, and the per-stripe quotas taken from it. The check that counts into it
//! is `fold` (`StatNode::try_pass`); the stripe table (`others`) holds it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::hot::{full_round, tag, HotStripe, Retired, LOW, PASS_CAP};

/// What every folded call reads, on a cache line of its own: written once per round, and
/// when the limit changes.
#[repr(C, align(64))]
#[derive(Debug, Default)]
pub(super) struct Newest {
    /// The newest round a [`Fold`] restarted a bucket for, plus one (0: none yet).
    pub(super) round: AtomicU64,
    /// The limit the threads' quotas were taken under.
    pub(super) limit: AtomicU64,
    /// Whether a quota may be out: set by a thread that keeps one, cleared by a sweep (so
    /// a refused call, or a check outside the fast path, reads one word while none is).
    pub(super) out: AtomicBool,
}

/// A node's folded passes: rounds' heads as in a stripe (the stripe's other counters stay
/// zero), counted into with atomic adds. Even and odd rounds count in two stripes, so that
/// the previous round's head, which every add reads, is not on the line the adds contend
/// for (the line could move to another core between the add and that read).
#[derive(Debug, Default)]
pub(crate) struct Fold {
    pub(super) newest: Newest,
    even: HotStripe,
    odd: HotStripe,
}

impl Fold {
    /// The stripe that counts `round`.
    #[inline(always)]
    pub(super) fn of(&self, round: u64) -> &HotStripe {
        if round.is_multiple_of(2) {
            &self.even
        } else {
            &self.odd
        }
    }

    /// Both stripes, for readers.
    pub(super) fn stripes(&self) -> [&HotStripe; 2] {
        [&self.even, &self.odd]
    }
}

impl HotStripe {
    /// Adds `n` passes to the head of `round`'s bucket with one atomic add, whatever round
    /// it holds; returns the head before the add. For a bucket several threads count into
    /// ([`Fold`](Fold)), made to hold `round` first ([`Self::restart`]).
    #[inline(always)]
    pub(super) fn add_to_head(&self, round: u64, n: u64) -> u64 {
        self.bucket(round).head.fetch_add(n, Ordering::AcqRel)
    }

    /// Takes back `n` passes [`add_to_head`](Self::add_to_head) added to a head that was
    /// `before`, if the bucket still holds that round (a restart since has retired them).
    #[cold]
    pub(super) fn take_back(&self, round: u64, before: u64, n: u64) {
        let _ = self
            .bucket(round)
            .head
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                (w >> 32 == before >> 32 && w & LOW >= n).then(|| w - n)
            });
    }

    /// Makes the bucket of `round` hold `round` (restarting an older round, retired to
    /// `retire`), for a stripe several threads write.
    #[cold]
    pub(super) fn restart(&self, round: u64, retire: impl FnOnce(Retired)) {
        let _ = self.current(round, false, retire);
    }

    /// The passes of `round` in a head that was `before` an add of `n` to the bucket of
    /// `round`, with the add.
    #[inline(always)]
    pub(super) fn passes_after(before: u64, round: u64, n: u64) -> u64 {
        let held = before ^ tag(round);
        // A bucket holding another round (a newer one: the clock went back) counts it too.
        if held <= PASS_CAP {
            held + n
        } else {
            (before & LOW) + n
        }
    }

    /// The passes of `round` alone.
    #[inline(always)]
    pub(super) fn passes_of(&self, round: u64) -> u64 {
        let held = self.bucket(round).head.load(Ordering::Acquire) ^ tag(round);
        if held <= PASS_CAP {
            held
        } else {
            0
        }
    }

    /// Uses `n` passes of the stripe's quota, if it holds that many for `round`.
    #[inline(always)]
    pub(super) fn use_quota(&self, round: u64, n: u64) -> bool {
        let word = self.quota.load(Ordering::Relaxed);
        let held = word ^ tag(round);
        held >= n
            && held <= LOW
            && self
                .quota
                .compare_exchange(word, word - n, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    /// The stripe's unused quota: its round (the one nearest `near`) and its passes.
    pub(super) fn quota_at(&self, near: u64) -> Option<(u64, u64)> {
        let word = self.quota.load(Ordering::Relaxed);
        let passes = word & LOW;
        if passes == 0 {
            return None;
        }
        full_round(word, near).map(|round| (round, passes))
    }
}

impl Fold {
    /// Takes back from its round's count the passes of a quota `word` (its round the one
    /// nearest `near`) that its thread no longer holds. Returns the passes.
    pub(super) fn give_back(&self, word: u64, near: u64) -> u64 {
        let passes = word & LOW;
        if passes != 0 {
            if let Some(round) = full_round(word, near) {
                self.of(round).take_back(round, tag(round), passes);
            }
        }
        passes
    }
}
