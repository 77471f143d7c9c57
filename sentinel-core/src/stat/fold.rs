//! Passes of a resource that several threads count, folded into one counter per round, so
//! that the QPS check of the fast path reads and writes one contended cache line per call.
//!
//! With thread-owned stripes, a check on one thread reads the heads the other threads write
//! on every pass: each call then moves two cache lines between cores (it reads the others'
//! heads and takes its own back for writing). Once a second thread counts into a node, the
//! fast path's passes go here instead, with one atomic add that is also the check: add,
//! read the window's sum, and take the passes back if it is over the limit. Every count
//! stays exact; the other counters (and passes the full checks count) stay in the stripes,
//! and readers sum both.
//!
//! The add comes before the check, so racing calls never admit more than the limit
//! (Sentinel's check-then-add may); a call that is taken back may make a racing call of a
//! smaller batch see the window full for that moment. With a batch of one, a call is only
//! taken back when the window is already full, so no call that fits is ever refused.
//!
//! Caps: calls of a batch above [`FOLD_MAX_BATCH`], or checked against a limit above
//! [`FOLD_MAX_LIMIT`], take the stripes' check-then-add instead. With these caps a bucket's
//! 32-bit pass count holds the limit plus one batch of each of 32 767 threads caught between
//! an add and its take-back.

use std::sync::atomic::{AtomicU64, Ordering};

use super::hot::{round_of, tag, HotStripe, Retired, LOW, PASS_CAP};
use super::node::{StatNode, SECOND_INTERVAL_MS};

/// The largest batch the fold counts.
pub(crate) const FOLD_MAX_BATCH: u64 = 1 << 16;
/// The largest limit the fold checks.
pub(crate) const FOLD_MAX_LIMIT: u64 = 1 << 31;

/// The newest round a [`Fold`] restarted a bucket for, plus one (0: none yet): read by every
/// add, written once per round, on a cache line of its own.
#[repr(C, align(64))]
#[derive(Debug, Default)]
struct Newest(AtomicU64);

/// A node's folded passes: rounds' heads as in a stripe (the stripe's other counters stay
/// zero), counted into with atomic adds. Even and odd rounds count in two stripes, so that
/// the previous round's head, which every add reads, is not on the line the adds contend
/// for (the line could move to another core between the add and that read).
#[derive(Debug, Default)]
pub(crate) struct Fold {
    newest: Newest,
    even: HotStripe,
    odd: HotStripe,
}

impl Fold {
    /// The stripe that counts `round`.
    #[inline(always)]
    fn of(&self, round: u64) -> &HotStripe {
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

/// What the fast path's QPS check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Trial {
    /// The call's passes would go over the limit: nothing was counted.
    Over,
    /// Within the limit; the passes are not counted yet.
    Fits,
    /// Within the limit, and the passes are counted (folded): the caller only raises the
    /// concurrency ([`on_pass_folded`](StatNode::on_pass_folded)).
    Counted,
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
}

impl StatNode {
    /// The fast path's check of `n` passes at `now` against `limit` passes in the window.
    /// On one thread it only reads (the caller counts with [`on_pass`](Self::on_pass)); once
    /// several threads count into the node, it folds the passes in as it checks.
    #[inline(always)]
    pub(crate) fn try_pass(&self, now: u64, n: u64, limit: u64) -> Trial {
        if let Some(others) = self.others.get() {
            if n <= FOLD_MAX_BATCH && limit <= FOLD_MAX_LIMIT {
                return self.fold_pass(others.fold(), now, n, limit);
            }
        }
        if self.passes(now) + n <= limit {
            Trial::Fits
        } else {
            Trial::Over
        }
    }

    #[inline(always)]
    fn fold_pass(&self, fold: &Fold, now: u64, n: u64, limit: u64) -> Trial {
        let round = round_of(now);
        if fold.newest.0.load(Ordering::Acquire) != round + 1 {
            self.start_round(fold, round, now);
        }
        let (mine, previous) = (fold.of(round), fold.of(round.wrapping_sub(1)));
        let before = mine.add_to_head(round, n);
        // The previous round's head and the stripes' heads change only when a round starts
        // (the fast path counts here): they stay in every reader's cache.
        let folded =
            HotStripe::passes_after(before, round, n) + previous.passes_of(round.wrapping_sub(1));
        let from = now.saturating_sub(SECOND_INTERVAL_MS - 1);
        let total = folded + self.stripes_passes(round) + self.borrowed_in(from, now + 1);
        if total <= limit {
            return Trial::Counted;
        }
        mine.take_back(round, before, n);
        Trial::Over
    }

    /// The first add of `round` (on this thread): restarts its bucket if it holds an older
    /// round, then publishes the round.
    #[cold]
    #[inline(never)]
    fn start_round(&self, fold: &Fold, round: u64, now: u64) {
        fold.of(round).restart(round, self.retire(now));
        fold.newest.0.fetch_max(round + 1, Ordering::AcqRel);
    }
}

#[cfg(test)]
impl StatNode {
    /// Makes the node's stripe table, as a second thread's first write does, so that its
    /// fast-path passes fold from now on (whatever stripes the test threads lease).
    pub(crate) fn share(&self) {
        let owner = usize::from(self.owner.load(Ordering::Relaxed));
        self.claim_stripe(if owner == 0 { 1 } else { 0 });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node with two passes and a stripe table (as when a second thread writes).
    fn shared_node(now: u64) -> StatNode {
        let node = StatNode::new();
        node.on_pass(now, 2);
        node.share();
        assert!(node.others.get().is_some());
        node
    }

    #[test]
    fn folded_passes_are_checked_and_counted_exactly() {
        let node = shared_node(10_000);
        for _ in 0..3 {
            assert_eq!(node.try_pass(10_100, 1, 5), Trial::Counted);
            node.on_pass_folded();
        }
        assert_eq!(node.try_pass(10_200, 1, 5), Trial::Over);
        assert_eq!(node.passes(10_200), 5);
        assert_eq!(node.pass_qps(10_200), 5.0);
        assert_eq!(node.concurrency(), 1 + 3);
        // Past the caps, the stripes' check: it counts nothing.
        assert_eq!(node.try_pass(10_200, 1, FOLD_MAX_LIMIT + 1), Trial::Fits);
        assert_eq!(
            node.try_pass(10_200, FOLD_MAX_BATCH + 1, u32::MAX.into()),
            Trial::Fits
        );
        assert_eq!(node.passes(10_200), 5);
    }

    #[test]
    fn a_batch_that_does_not_fit_is_taken_back() {
        let node = shared_node(10_000);
        assert_eq!(node.try_pass(10_000, 4, 5), Trial::Over);
        assert_eq!(node.passes(10_000), 2);
        assert_eq!(node.try_pass(10_000, 3, 5), Trial::Counted);
        assert_eq!(node.passes(10_000), 5);
    }

    #[test]
    fn the_window_slides_over_folded_rounds_and_the_minute_keeps_them() {
        let node = shared_node(10_000);
        assert_eq!(node.try_pass(10_000, 3, 100), Trial::Counted);
        // The next round: the previous one is still in the second.
        assert_eq!(node.try_pass(10_600, 4, 100), Trial::Counted);
        assert_eq!(node.passes(10_600), 2 + 3 + 4);
        // A second later the first round has left the window.
        assert_eq!(node.try_pass(11_100, 1, 100), Trial::Counted);
        assert_eq!(node.passes(11_100), 4 + 1);
        // Four rounds on, the first round's bucket restarts: its passes move to the minute.
        assert_eq!(node.try_pass(12_000, 1, 100), Trial::Counted);
        let (pass, ..) = node.minute_totals(12_000);
        assert_eq!(pass, 2 + 3 + 4 + 1 + 1);
    }

    #[test]
    fn racing_threads_admit_exactly_the_limit() {
        let node = shared_node(10_000);
        let counted: u64 = std::thread::scope(|s| {
            let workers: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        (0..1_000)
                            .filter(|_| node.try_pass(10_000, 1, 1_000) == Trial::Counted)
                            .count() as u64
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap_or(0)).sum()
        });
        assert_eq!(counted, 1_000 - 2);
        assert_eq!(node.passes(10_000), 1_000);
    }
}
