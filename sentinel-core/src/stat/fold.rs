//! Passes of a resource that several threads count, folded into one counter per round, so
//! that the QPS check of the fast path touches no cache line another thread writes on most
//! calls.
//!
//! With thread-owned stripes, a check on one thread reads the heads the other threads write
//! on every pass: each call then moves two cache lines between cores (it reads the others'
//! heads and takes its own back for writing). Once a second thread counts into a node, the
//! fast path's passes go here instead, with one atomic add that is also the check: add,
//! read the window's sum, and take the passes back if it is over the limit. The other
//! counters (and passes the full checks count) stay in the stripes, and readers sum both.
//!
//! A thread that owns its stripe adds more than the call needs: up to [`QUOTA_MAX`] passes
//! ahead (and at most a sixty-fourth of the limit), kept as the stripe's quota for the
//! round and the limit. Its next calls use the quota with a compare-and-swap on its own
//! stripe, and only add to the shared counter when the quota runs out. Every check counts
//! quotas as passes taken, so the window never holds more passes than the limit. A call
//! the shared counter refuses takes back the other threads' unused quotas (the same words)
//! and tries again, for passes of its own only, up to three times in all. Quotas are handed
//! back by the first folded call of a new round, by a folded call under another limit (a
//! reload), and by any check outside the fast path (`pass_qps`: a prioritized call, a rule
//! other than one plain QPS rule), which then counts exactly the calls that passed. The
//! published numbers (`snapshot`, minute and per-second counts) leave out the quotas not
//! used.
//!
//! The add comes before the check, so racing calls never admit more than the limit
//! (Sentinel's check-then-add may). A call can be refused while the window has room for
//! a moment only: while a racing call's add is being taken back, or while a racing thread
//! holds a quota it took after this call's last sweep. With a batch of one and no quota (a
//! limit under 64), a call is only taken back when the window is already full, so no call
//! that fits is ever refused. Before its add, a call the quotas do not cover reads the
//! window: when it is already full and no quota is out, the call is refused without writing
//! the shared count, so that refusals under overload move no cache line between cores.
//!
//! Caps: calls of a batch above [`FOLD_MAX_BATCH`], or checked against a limit above
//! [`FOLD_MAX_LIMIT`], take the stripes' check-then-add instead. With these caps a bucket's
//! 32-bit pass count holds the limit plus one batch and quota of each of 32 736 threads
//! caught between an add and its take-back.

use std::sync::atomic::Ordering;

use super::folded::Fold;
use super::hot::{round_of, tag, HotStripe, LOW, ROUND_MS};
use super::node::{StatNode, SECOND_INTERVAL_MS};

/// The largest batch the fold counts.
pub(crate) const FOLD_MAX_BATCH: u64 = 1 << 16;
/// The largest limit the fold checks.
pub(crate) const FOLD_MAX_LIMIT: u64 = 1 << 31;
/// The most passes a thread takes ahead (its quota).
pub(crate) const QUOTA_MAX: u64 = 64;
/// A quota is at most the limit over `2^QUOTA_SHARE`: a limit under 64 takes none.
const QUOTA_SHARE: u32 = 6;
/// Adds a refused call tries (taking back the other threads' quotas between them).
const TRIES: usize = 3;

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
        // A new round, or a limit other than the one the quotas were taken under (a reload,
        // or a check outside the fast path took them back): hand every quota back first.
        if fold.newest.round.load(Ordering::Acquire) <= round
            || fold.newest.limit.load(Ordering::Acquire) != limit
        {
            self.start_round(fold, round, now, limit);
        }
        let mine = self.my_hot_stripe();
        if mine.1 && mine.0.use_quota(round, n) {
            return Trial::Counted;
        }
        self.fold_add(fold, mine, round, now, n, limit)
    }

    /// A fast-path call the thread's quota does not cover: it adds to the shared count
    /// (with a new quota if the thread owns its stripe); if that is refused, it takes back
    /// the other threads' quotas and tries again.
    #[cold]
    #[inline(never)]
    fn fold_add(
        &self,
        fold: &Fold,
        (stripe, owned): (&HotStripe, bool),
        round: u64,
        now: u64,
        n: u64,
        limit: u64,
    ) -> Trial {
        let mut quota = if owned {
            if stripe.quota.load(Ordering::Relaxed) & LOW != 0 {
                fold.give_back(stripe.quota.swap(0, Ordering::SeqCst), round);
            }
            (limit >> QUOTA_SHARE).min(QUOTA_MAX)
        } else {
            0
        };
        // The check before the add: a window already full, with no quota out that a sweep
        // could take back, refuses the call without writing the shared count (an add and its
        // take-back would move that line between the cores twice for a call that fails).
        if !fold.newest.out.load(Ordering::SeqCst)
            && self.window_passes(fold, round, now) + n > limit
        {
            return Trial::Over;
        }
        for tried in 1..=TRIES {
            let kept = self.grant(fold, round, now, n, quota, limit);
            if kept >= n {
                if kept > n {
                    // Sequentially consistent with `out` and the sweeps: a sweep that
                    // clears `out` before this thread reads it sees this quota.
                    stripe
                        .quota
                        .store(tag(round) | (kept - n), Ordering::SeqCst);
                    if !fold.newest.out.load(Ordering::SeqCst) {
                        fold.newest.out.store(true, Ordering::SeqCst);
                    }
                }
                return Trial::Counted;
            }
            if tried == TRIES || self.sweep_quotas(fold, round) == 0 {
                break;
            }
            // The window is nearly full: ask for this call's passes alone.
            quota = 0;
        }
        Trial::Over
    }

    /// The passes in the window ending at `now` (of `round`), as [`grant`](Self::grant) counts
    /// them, read without adding.
    fn window_passes(&self, fold: &Fold, round: u64, now: u64) -> u64 {
        let previous = round.wrapping_sub(1);
        let from = now.saturating_sub(SECOND_INTERVAL_MS - 1);
        fold.of(round).passes_of(round)
            + fold.of(previous).passes_of(previous)
            + self.stripes_passes(round)
            + self.borrowed_in(from, now + 1)
    }

    /// Adds `n` passes and `extra` more to `round`'s count, and keeps what the window has
    /// room for: all of them, `n` and part of `extra`, or none. Returns the passes kept.
    #[inline(always)]
    fn grant(&self, fold: &Fold, round: u64, now: u64, n: u64, extra: u64, limit: u64) -> u64 {
        let want = n + extra;
        let (mine, previous) = (fold.of(round), fold.of(round.wrapping_sub(1)));
        let before = mine.add_to_head(round, want);
        // The previous round's head and the stripes' heads change only when a round starts
        // (the fast path counts here): they stay in every reader's cache.
        let folded = HotStripe::passes_after(before, round, want)
            + previous.passes_of(round.wrapping_sub(1));
        let from = now.saturating_sub(SECOND_INTERVAL_MS - 1);
        let total = folded + self.stripes_passes(round) + self.borrowed_in(from, now + 1);
        let over = total.saturating_sub(limit);
        if over == 0 {
            return want;
        }
        let back = if over <= extra { over } else { want };
        mine.take_back(round, before, back);
        want - back
    }

    /// Takes every thread's unused quota back into the counts of its round. Returns the
    /// passes taken back.
    fn sweep_quotas(&self, fold: &Fold, near: u64) -> u64 {
        if !fold.newest.out.load(Ordering::SeqCst) {
            return 0;
        }
        fold.newest.out.store(false, Ordering::SeqCst);
        self.quota_stripes()
            .filter(|s| s.quota.load(Ordering::SeqCst) & LOW != 0)
            .map(|s| fold.give_back(s.quota.swap(0, Ordering::SeqCst), near))
            .sum()
    }

    /// The stripes that may hold a quota: the inline one and the made ones.
    fn quota_stripes(&self) -> impl Iterator<Item = &HotStripe> {
        std::iter::once(&self.first).chain(self.others.get().into_iter().flat_map(|o| o.made()))
    }

    /// Passes the threads' quotas hold unused, of rounds starting in `[from, to)`: counted
    /// (checks count them as taken), but not passed. Published numbers leave them out.
    pub(super) fn unused_quota(&self, from: u64, to: u64) -> u64 {
        if self.others.get().is_none() {
            return 0;
        }
        self.quota_stripes()
            .filter_map(|s| s.quota_at(round_of(from)))
            .filter(|(round, _)| (from..to).contains(&(round * ROUND_MS)))
            .map(|(_, passes)| passes)
            .sum()
    }

    /// A folded call in a round newer than the newest published, or under a limit other
    /// than the quotas': hands every quota back (of older rounds or another limit, but for
    /// one a racing thread took since), restarts the round's bucket if it holds an older
    /// round, then publishes the round and the limit.
    #[cold]
    #[inline(never)]
    fn start_round(&self, fold: &Fold, round: u64, now: u64, limit: u64) {
        self.sweep_quotas(fold, round);
        fold.of(round).restart(round, self.retire(now));
        fold.newest.round.fetch_max(round + 1, Ordering::AcqRel);
        fold.newest.limit.store(limit, Ordering::Release);
    }

    /// For a check outside the fast path, which counts every pass in the window: takes the
    /// threads' unused quotas back (the fast path's threads take new ones as they need
    /// them). Costs one read while no quota is out.
    #[inline]
    pub(crate) fn take_quotas_back(&self, now: u64) {
        let Some(fold) = self.others.get().and_then(|o| o.made_fold()) else {
            return;
        };
        self.sweep_quotas(fold, round_of(now));
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
mod tests;
