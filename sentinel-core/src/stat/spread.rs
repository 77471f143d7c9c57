//! The stripes of a [`StatNode`]'s second-level window: the first stripe index that writes
//! the node owns the stripe stored inline in the node; the other stripes, in a table made
//! when a second stripe index writes, exist only for nodes that several threads write.
//!
//! A node entered from one thread therefore holds its whole second-level window inline and
//! allocates nothing, and its readers sum one stripe. Stripe indexes are the thread leases
//! of [`my_stripe`] (see `stripe`): a thread writes its own stripe with plain stores.

use std::sync::atomic::Ordering;
use std::sync::OnceLock;

use super::hot::{round_of, HotStripe, ROUND_MS};
use super::node::StatNode;
use super::others::NO_OWNER;
use super::stripe::{my_stripe, STRIPES};
use super::window::Event;

impl StatNode {
    /// This thread's stripe of the node, and whether the thread owns it (writes it with
    /// plain stores).
    #[inline(always)]
    pub(super) fn my_hot_stripe(&self) -> (&HotStripe, bool) {
        let (stripe, owned) = my_stripe();
        if self.owner.load(Ordering::Relaxed) == stripe as u8 {
            return (&self.first, owned);
        }
        let made = self
            .others
            .get()
            .and_then(|others| others.stripes.get(stripe))
            .and_then(OnceLock::get);
        match made {
            Some(hot) => (hot, owned),
            None => (self.claim_stripe(stripe), owned),
        }
    }

    /// The first write of stripe index `stripe` to this node: it takes the inline stripe if
    /// nobody owns it yet, else its stripe in the table (made now, with the table).
    #[cold]
    #[inline(never)]
    pub(super) fn claim_stripe(&self, stripe: usize) -> &HotStripe {
        let index = u8::try_from(stripe).unwrap_or(NO_OWNER);
        match self
            .owner
            .compare_exchange(NO_OWNER, index, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => return &self.first,
            Err(owner) if owner == index => return &self.first,
            Err(_) => {}
        }
        let others = self.others.get_or_init(Box::default);
        let slot = stripe.min(STRIPES - 1);
        others.stripes[slot].get_or_init(|| {
            // Readers may see the bit a moment before the stripe: they skip it.
            others.active.fetch_or(1 << slot, Ordering::AcqRel);
            Box::new(HotStripe::new())
        })
    }

    /// Every stripe that may hold counts: the inline one and the made ones.
    fn stripes(&self) -> impl Iterator<Item = &HotStripe> {
        std::iter::once(&self.first).chain(self.others.get().into_iter().flat_map(|o| o.counted()))
    }

    /// Passes counted in the second ending in `round`, every stripe.
    #[inline(always)]
    pub(super) fn second_passes(&self, round: u64) -> u64 {
        let first = self.first.passes_at(round);
        match self.others.get() {
            None => first,
            Some(others) => first + others.counted().map(|s| s.passes_at(round)).sum::<u64>(),
        }
    }

    /// Passes the stripes (not the fold) counted in the second ending in `round`.
    #[inline(always)]
    pub(super) fn stripes_passes(&self, round: u64) -> u64 {
        let first = self.first.passes_at(round);
        match self.others.get() {
            None => first,
            Some(others) => first + others.made().map(|s| s.passes_at(round)).sum::<u64>(),
        }
    }

    /// Sum of `event` over the second ending at `now`, every stripe.
    pub(super) fn second_sum(&self, now: u64, event: Event) -> u64 {
        let round = round_of(now);
        self.stripes().map(|s| s.sum_at(round, event)).sum()
    }

    /// Sum of `event` over the rounds starting in `[from, to)` that the second-level window
    /// still holds.
    pub(super) fn second_range(&self, from: u64, to: u64, event: Event) -> u64 {
        self.stripes().map(|s| s.sum_range(from, to, event)).sum()
    }

    /// The smallest RT in the second ending at `now`.
    pub(super) fn second_min_rt(&self, now: u64) -> Option<u64> {
        let round = round_of(now);
        self.stripes().filter_map(|s| s.min_rt_at(round)).min()
    }

    /// The largest per-round total of `event` among the rounds of the second ending at
    /// `now`.
    pub(super) fn second_max_round(&self, now: u64, event: Event) -> u64 {
        let current = now - now % ROUND_MS;
        [Some(current), current.checked_sub(ROUND_MS)]
            .into_iter()
            .flatten()
            .map(|start| self.second_range(start, start + 1, event))
            .max()
            .unwrap_or(0)
    }

    /// The sum of every stripe's concurrency gauge.
    pub(super) fn stripes_concurrency(&self) -> i64 {
        self.stripes().map(HotStripe::concurrency).sum()
    }

    /// The end of the newest round any stripe was written in (tags read as the rounds
    /// nearest `now`).
    pub(super) fn newest_end(&self, now: u64) -> Option<u64> {
        self.stripes().filter_map(|s| s.newest_end(now)).max()
    }

    #[cfg(test)]
    /// The heap bytes of the stripe table and its stripes.
    pub(super) fn stripes_heap_bytes(&self) -> usize {
        self.others.get().map_or(0, |others| {
            std::mem::size_of::<super::others::Others>()
                + others.made().count() * std::mem::size_of::<HotStripe>()
                + others.fold_bytes()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_is_four_cache_lines_and_one_thread_allocates_nothing() {
        assert_eq!(std::mem::size_of::<HotStripe>(), 192);
        assert_eq!(std::mem::size_of::<StatNode>(), 256);
        let node = StatNode::new();
        node.on_pass(10_000, 1);
        node.on_block(10_000, 1);
        node.on_complete(10_001, 3, 1, false);
        assert!(
            node.others.get().is_none(),
            "one thread: the inline stripe only"
        );
        assert_eq!(node.newest_end(10_001), Some(10_500));
    }

    #[test]
    fn sums_cover_the_inline_stripe_and_the_table() {
        let node = StatNode::new();
        node.on_pass(10_000, 2);
        std::thread::scope(|s| {
            s.spawn(|| {
                node.on_pass(10_100, 3);
                node.on_complete(10_200, 7, 3, true);
            });
        });
        node.on_complete(10_300, 4, 2, false);
        if node.others.get().is_none() {
            // Both threads had the same (shared) stripe: more than eight test threads
            // held leases. The sums are the same either way.
            assert_eq!(node.owner.load(Ordering::Relaxed), STRIPES as u8 - 1);
        }
        assert_eq!(node.second_passes(round_of(10_400)), 5);
        assert_eq!(node.second_sum(10_400, Event::Success), 5);
        assert_eq!(node.second_sum(10_400, Event::Error), 3);
        assert_eq!(node.second_min_rt(10_400), Some(4));
        assert_eq!(node.second_range(10_000, 10_500, Event::Rt), 11);
        assert_eq!(node.second_max_round(10_600, Event::Pass), 5);
        assert_eq!(node.stripes_concurrency(), 0);
        assert_eq!(node.newest_end(10_400), Some(10_500));
    }
}
