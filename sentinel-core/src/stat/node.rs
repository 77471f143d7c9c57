//! Statistics for one node: a resource, a (resource, origin) pair, a (context, resource)
//! pair, or the global inbound node.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::OnceLock;

use super::hot::{round_of, HotStripe, Retired};
use super::minute::MinuteWindow;
use super::others::{Others, NO_OWNER};
use super::window::{Event, Window};
use super::{NodeStats, SecondStats};

/// Buckets in the second-level window.
pub(crate) const SECOND_BUCKETS: usize = 2;
/// Length of the second-level window.
pub(crate) const SECOND_INTERVAL_MS: u64 = 1000;
/// Length of a second-level bucket.
const SECOND_BUCKET_MS: u64 = SECOND_INTERVAL_MS / SECOND_BUCKETS as u64;
const _: () = assert!(SECOND_BUCKET_MS == super::hot::ROUND_MS);
/// Length of the minute-level window.
pub(crate) const MINUTE_INTERVAL_MS: u64 = 60_000;

/// Sliding-window counters plus the current concurrency.
///
/// Calls are counted once, in the second-level window, which retains four 500 ms buckets
/// (two seconds) so the previous whole second stays readable. When a bucket is reused for a
/// new round, the thread that resets it first adds the finished round into the minute-level
/// window (60 x 1 s). Minute numbers are the rolled-up rounds plus the live buckets. The
/// second-level window and the concurrency gauge are split into thread-owned stripes
/// (see `stripe` and `spread`), so the hot path writes without locked instructions. Once a
/// second thread writes, the fast path's QPS check folds its passes into one shared
/// counter per round instead, a quota of them at a time (see `fold`; using a quota is a
/// compare-and-swap on the thread's own stripe): readers sum the stripes and the fold.
///
/// Memory is allocated as it is needed: the first stripe is inline (a node one thread
/// writes allocates nothing for its second-level window), the other stripes when a second
/// thread writes, the minute window when the first round rolls up, the borrowed window on
/// the first borrow.
///
/// Layout: the fields every thread reads sit on the first cache line, the inline stripe
/// (which its owner writes on every call) on the three after it.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct StatNode {
    /// The stripe index that owns [`first`](Self::first); [`NO_OWNER`] until one writes.
    pub(super) owner: AtomicU8,
    /// Whether any call ever borrowed: until then the hot path skips `borrowed`.
    has_borrowed: AtomicBool,
    /// The stripes of the other stripe indexes, made when a second one writes.
    pub(super) others: OnceLock<Box<Others>>,
    minute: OnceLock<Box<MinuteWindow>>,
    /// Passes that prioritized calls borrowed from future buckets, keyed by the future
    /// bucket's start. They count as passes once their bucket has started.
    borrowed: OnceLock<Box<Window<SECOND_BUCKET_MS>>>,
    /// Calls in flight that a concurrency (thread-grade) rule admitted by reserving a place
    /// here: the exact part of that check (see [`reserve`](Self::reserve)).
    reserved: AtomicU64,
    /// The stripe of the owner's stripe index, inline.
    pub(super) first: HotStripe,
}

/// Longest a prioritized call may wait for a slot in a future bucket (Sentinel's
/// `OccupyTimeoutProperty`, 500 ms).
pub(crate) const OCCUPY_TIMEOUT_MS: u64 = 500;

/// Buckets the borrowed window retains: the current second and the previous one.
const SECOND_RETAINED: usize = 2 * SECOND_BUCKETS;

impl Default for StatNode {
    fn default() -> Self {
        Self::new()
    }
}

impl StatNode {
    pub(crate) fn new() -> Self {
        Self {
            owner: AtomicU8::new(NO_OWNER),
            has_borrowed: AtomicBool::new(false),
            others: OnceLock::new(),
            minute: OnceLock::new(),
            borrowed: OnceLock::new(),
            reserved: AtomicU64::new(0),
            first: HotStripe::new(),
        }
    }

    /// Adds a finished round of the second-level window into the minute window, if it is
    /// still inside the minute ending at `now`.
    #[inline(always)]
    pub(super) fn retire(&self, now: u64) -> impl FnOnce(Retired) + '_ {
        move |(start, counts)| {
            if now.saturating_sub(start) < MINUTE_INTERVAL_MS {
                self.minute().absorb(start, &counts);
            }
        }
    }

    /// When the node was last written: the end of its newest round. `None` if never. `now`
    /// only disambiguates the rounds' 32-bit tags (see `hot`).
    pub(crate) fn last_written(&self, now: u64) -> Option<u64> {
        self.newest_end(now)
    }

    /// The minute window, made on the first roll-up.
    fn minute(&self) -> &MinuteWindow {
        self.minute.get_or_init(|| Box::new(MinuteWindow::new()))
    }

    /// The borrowed window, made on the first borrow. Four rounds: a borrow reaches one
    /// round ahead while the round before the current one is still in the window, so the two
    /// must not share a slot.
    fn borrowed(&self) -> &Window<SECOND_BUCKET_MS> {
        self.borrowed.get_or_init(|| {
            Box::new(Window::with_retention(
                SECOND_BUCKETS,
                SECOND_INTERVAL_MS,
                SECOND_RETAINED,
            ))
        })
    }

    /// A call passed every check: count it and raise the concurrency.
    #[inline(always)]
    pub(crate) fn on_pass(&self, now: u64, n: u64) {
        let (stripe, owned) = self.my_hot_stripe();
        stripe.pass(round_of(now), n, owned, self.retire(now));
        stripe.add_concurrency(owned, 1);
    }

    /// A call whose passes [`try_pass`](Self::try_pass) folded in: only the concurrency
    /// rises.
    #[inline(always)]
    pub(crate) fn on_pass_folded(&self) {
        let (stripe, owned) = self.my_hot_stripe();
        stripe.add_concurrency(owned, 1);
    }

    /// A prioritized call passed on a borrowed future slot: its pass is already counted in
    /// that future bucket, so only the concurrency rises.
    #[inline]
    pub(crate) fn on_pass_borrowed(&self) {
        let (stripe, owned) = self.my_hot_stripe();
        stripe.add_concurrency(owned, 1);
    }

    #[cfg(test)]
    /// The heap bytes this node's statistics hold now.
    pub(crate) fn heap_bytes(&self) -> usize {
        let minute = self.minute.get().map_or(0, |_| MinuteWindow::HEAP_BYTES);
        let borrowed = self.borrowed.get().map_or(0, |_| {
            std::mem::size_of::<Window<SECOND_BUCKET_MS>>()
                + SECOND_RETAINED * std::mem::size_of::<super::window::Bucket>()
        });
        self.stripes_heap_bytes() + minute + borrowed
    }

    /// Sentinel's `tryOccupyNext`: how long a prioritized call must wait until a bucket
    /// slides out and frees room under `threshold` (per second), counting what is already
    /// borrowed. `None` if that is [`OCCUPY_TIMEOUT_MS`] or more.
    pub(crate) fn try_occupy_next(&self, now: u64, acquire: u32, threshold: f64) -> Option<u64> {
        let max = threshold * SECOND_INTERVAL_MS as f64 / 1000.0;
        let borrowed = self.borrowed_after(now) as f64;
        if borrowed >= max {
            return None;
        }
        let window = SECOND_BUCKET_MS;
        let mut earliest = (now - now % window + window).checked_sub(SECOND_INTERVAL_MS)?;
        let mut pass = self.passes(now) as f64;
        let mut index = 0;
        while earliest < now {
            let wait = index * window + window - now % window;
            if wait >= OCCUPY_TIMEOUT_MS {
                break;
            }
            let leaving = self.passes_in(earliest, earliest + 1) as f64;
            if pass + borrowed + f64::from(acquire) - leaving <= max {
                return Some(wait);
            }
            earliest += window;
            pass -= leaving;
            index += 1;
        }
        None
    }

    /// Borrows `n` passes from the bucket that covers `future`, and counts them as occupied
    /// now.
    pub(crate) fn borrow_future(&self, now: u64, future: u64, n: u64) {
        self.has_borrowed.store(true, Ordering::Release);
        self.borrowed().current(future).add(Event::Pass, n);
        let (stripe, owned) = self.my_hot_stripe();
        stripe.occupied(round_of(now), n, owned, self.retire(now));
    }

    /// Borrowed passes of rounds starting in `[from, to)`.
    #[inline(always)]
    pub(super) fn borrowed_in(&self, from: u64, to: u64) -> u64 {
        if self.has_borrowed.load(Ordering::Acquire) {
            self.borrowed
                .get()
                .map_or(0, |b| b.sum_range(from, to, Event::Pass))
        } else {
            0
        }
    }

    /// Passes in the window ending at `now`, including passes borrowed from rounds that have
    /// started.
    #[inline(always)]
    pub(crate) fn passes(&self, now: u64) -> u64 {
        let from = now.saturating_sub(SECOND_INTERVAL_MS - 1);
        self.second_passes(round_of(now)) + self.borrowed_in(from, now + 1)
    }

    /// Passes in rounds starting in `[from, to)`, borrowed ones included.
    fn passes_in(&self, from: u64, to: u64) -> u64 {
        self.second_range(from, to, Event::Pass) + self.borrowed_in(from, to)
    }

    /// Passes borrowed from buckets that have not started yet.
    fn borrowed_after(&self, now: u64) -> u64 {
        self.borrowed
            .get()
            .map_or(0, |b| b.sum_range(now + 1, u64::MAX, Event::Pass))
    }

    #[inline]
    pub(crate) fn on_block(&self, now: u64, n: u64) {
        let (stripe, owned) = self.my_hot_stripe();
        stripe.block(round_of(now), n, owned, self.retire(now));
    }

    /// A passed call completed: record success and RT, lower the concurrency.
    #[inline(always)]
    pub(crate) fn on_complete(&self, now: u64, rt: u64, n: u64, error: bool) {
        let (stripe, owned) = self.my_hot_stripe();
        stripe.complete(round_of(now), n, rt, error, owned, self.retire(now));
        stripe.add_concurrency(owned, -1);
    }

    /// Calls in flight: the sum of the stripes (a call may enter on one thread and exit on
    /// another).
    #[inline]
    pub(crate) fn concurrency(&self) -> i64 {
        self.stripes_concurrency()
    }

    /// Reserves `n` places for a call a concurrency rule is checking; returns the places held
    /// with it. The reservation is one atomic add, so racing callers each see the others:
    /// a limit of N never admits more than N reserved calls at once.
    pub(crate) fn reserve(&self, n: u64) -> u64 {
        self.reserved
            .fetch_add(n, Ordering::AcqRel)
            .saturating_add(n)
    }

    /// Places reserved now, by every call in flight.
    pub(crate) fn reserved(&self) -> u64 {
        self.reserved.load(Ordering::Acquire)
    }

    /// Gives back `n` places (the call exited, or another check blocked it).
    pub(crate) fn release(&self, n: u64) {
        self.reserved.fetch_sub(n, Ordering::AcqRel);
    }

    #[inline]
    fn per_second(&self, now: u64, event: Event) -> f64 {
        self.second_sum(now, event) as f64 * 1000.0 / SECOND_INTERVAL_MS as f64
    }

    /// Passes per second, as a check reads them (the second-level window is one second
    /// long): the threads' unused quotas are taken back first (see `fold`).
    #[inline(always)]
    pub(crate) fn pass_qps(&self, now: u64) -> f64 {
        const _: () = assert!(SECOND_INTERVAL_MS == 1000);
        self.take_quotas_back(now);
        self.passes(now) as f64
    }

    /// [`pass_qps`](Self::pass_qps) without the passes threads took ahead and have not used
    /// (see `fold`): the calls that passed, for the published numbers.
    fn passed_qps(&self, now: u64) -> f64 {
        let start = round_of(now).saturating_sub(1) * SECOND_BUCKET_MS;
        self.passes(now)
            .saturating_sub(self.unused_quota(start, now + 1)) as f64
    }

    pub(crate) fn block_qps(&self, now: u64) -> f64 {
        self.per_second(now, Event::Block)
    }

    pub(crate) fn occupied_pass_qps(&self, now: u64) -> f64 {
        self.per_second(now, Event::OccupiedPass)
    }

    pub(crate) fn success_qps(&self, now: u64) -> f64 {
        self.per_second(now, Event::Success)
    }

    pub(crate) fn error_qps(&self, now: u64) -> f64 {
        self.per_second(now, Event::Error)
    }

    /// Passes in the previous whole second (Sentinel's `previousPassQps`, used by warm-up).
    #[inline]
    pub(crate) fn previous_pass_qps(&self, now: u64) -> f64 {
        let this_second = now - now % 1000;
        let Some(previous) = this_second.checked_sub(1000) else {
            return 0.0;
        };
        self.passes_in(previous, this_second) as f64
    }

    /// Average RT of the calls completed in the second window, in ms.
    pub(crate) fn avg_rt(&self, now: u64) -> f64 {
        let success = self.second_sum(now, Event::Success);
        if success == 0 {
            return 0.0;
        }
        self.second_sum(now, Event::Rt) as f64 / success as f64
    }

    /// Minimum RT in the second window; `None` when nothing completed.
    pub(crate) fn min_rt(&self, now: u64) -> Option<u64> {
        self.second_min_rt(now)
    }

    /// Highest success rate of any bucket in the second window, scaled to per second.
    pub(crate) fn max_success_qps(&self, now: u64) -> f64 {
        self.second_max_round(now, Event::Success) as f64 * 1000.0 / SECOND_BUCKET_MS as f64
    }

    /// [`max_success_qps`](Self::max_success_qps) of one success in a bucket: Sentinel's
    /// floor for it.
    pub(crate) fn min_success_qps(&self) -> f64 {
        1000.0 / SECOND_BUCKET_MS as f64
    }

    /// Totals over the last minute: rolled-up rounds plus the live buckets.
    pub(crate) fn minute_totals(&self, now: u64) -> (u64, u64, u64, u64) {
        let from = now.saturating_sub(MINUTE_INTERVAL_MS - 1);
        let total = |event| {
            let rolled = self.minute.get().map_or(0, |m| m.sum(now, event));
            rolled
                + self
                    .second_range(from, now + 1, event)
                    .saturating_sub(self.quota_in(from, now + 1, event))
        };
        (
            total(Event::Pass),
            total(Event::Block),
            total(Event::Success),
            total(Event::Error),
        )
    }

    /// Counts of one event in the last complete wall-clock second.
    fn last_second(&self, now: u64, event: Event) -> u64 {
        let this_second = now - now % 1000;
        this_second
            .checked_sub(1000)
            .map_or(0, |previous| match event {
                Event::Pass => self
                    .passes_in(previous, this_second)
                    .saturating_sub(self.unused_quota(previous, this_second)),
                _ => self.second_range(previous, this_second, event),
            })
    }

    /// The counts of the second starting at `second` (a multiple of 1000): the rounds
    /// rolled up into the minute window plus those still in the second-level window. Exact
    /// for any second of the last minute that has ended.
    pub(crate) fn second_counts(&self, second: u64) -> SecondStats {
        let end = second + 1000;
        let count = |event| {
            let rolled = self.minute.get().map_or(0, |m| m.at(second, event));
            rolled
                + self
                    .second_range(second, end, event)
                    .saturating_sub(self.quota_in(second, end, event))
        };
        SecondStats {
            second_ms: second,
            pass: count(Event::Pass) + self.borrowed_in(second, end),
            block: count(Event::Block),
            success: count(Event::Success),
            error: count(Event::Error),
            rt_sum_ms: count(Event::Rt),
            occupied_pass: count(Event::OccupiedPass),
        }
    }

    /// The unused quotas (see `fold`) in the counts of `event` over rounds starting in
    /// `[from, to)`: none unless `event` is a pass.
    fn quota_in(&self, from: u64, to: u64, event: Event) -> u64 {
        match event {
            Event::Pass => self.unused_quota(from, to),
            _ => 0,
        }
    }

    /// A public copy of the current numbers.
    pub(crate) fn snapshot(&self, now: u64) -> NodeStats {
        let (pass_minute, block_minute, success_minute, error_minute) = self.minute_totals(now);
        NodeStats {
            pass_last_second: self.last_second(now, Event::Pass),
            block_last_second: self.last_second(now, Event::Block),
            success_last_second: self.last_second(now, Event::Success),
            error_last_second: self.last_second(now, Event::Error),
            pass_qps: self.passed_qps(now),
            block_qps: self.block_qps(now),
            occupied_pass_qps: self.occupied_pass_qps(now),
            success_qps: self.success_qps(now),
            error_qps: self.error_qps(now),
            avg_rt_ms: self.avg_rt(now),
            min_rt_ms: self.min_rt(now),
            concurrency: self.concurrency().max(0) as u64,
            pass_minute,
            block_minute,
            success_minute,
            error_minute,
        }
    }
}

#[cfg(test)]
mod tests;
