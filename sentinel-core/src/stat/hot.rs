//! The second-level window of one stripe of a [`StatNode`](super::StatNode), in a fixed
//! shape: four 500 ms buckets, each tagged with the round it holds; the four heads (tag and
//! passes) share a cache line, apart from the other counters.
//!
//! A bucket's first word holds the round's tag (the low 32 bits of the round number) and the
//! round's passes, so starting a round and counting its first pass is one store, and a
//! reader checks that a bucket holds the round it wants with one compare. The shape is
//! fixed at compile time: finding a bucket is a multiplication and a mask.
//!
//! The owner of a stripe writes with plain loads and stores (but for its quota of folded
//! passes, see `fold`, a compare-and-swap word other threads may take back). A stripe that
//! several threads share (threads past the owned stripes) is written with compare-and-swap
//! loops, and the fold's (`fold`) heads with atomic adds. As in
//! Sentinel, restarting a shared bucket for a new round is not atomic with concurrent adds
//! to its other counters: such an add can be lost or counted in the round being retired.
//! Passes are never lost (they live in the word the restart swaps).
//!
//! Caps, per stripe and per 500 ms round (the generic [`Window`](super::window::Window)
//! counts to 2^64): passes, blocks, errors and occupied passes saturate at 2^32 - 2
//! (passes) or 2^32 - 1; completions and their RT sum share one word as in `Window` (2^24
//! completions, 2^40 ms of RT, one call's RT cut at 2^32 - 1 ms); the minimum RT is cut at
//! 2^32 - 2 ms. Rounds are told apart by their tags: a window reads correctly as long as the
//! rounds it compares are less than 2^31 rounds (34 years) apart, and the clock's round
//! numbers are below 2^64 / 500.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use super::window::Event;

/// Length of a round.
pub(crate) const ROUND_MS: u64 = 500;
/// Buckets per stripe: the current second and the one before (a power of two).
const LEN: usize = 4;
/// A bucket never written. Its pass field (`u32::MAX`) is above [`PASS_CAP`], so it never
/// matches a round's tag.
const EMPTY: u64 = u64::MAX;
/// The low 32 bits of a word.
pub(super) const LOW: u64 = u32::MAX as u64;
/// The most passes a bucket counts.
pub(super) const PASS_CAP: u64 = LOW - 1;
/// Completions and their RT sum share `done`, as in the generic window: the count in the
/// high bits, the RT sum (ms) in the low `RT_BITS` bits.
const RT_BITS: u32 = 40;
const RT_MASK: u64 = (1 << RT_BITS) - 1;
/// The longest RT one call adds to the sum.
const RT_CAP: u64 = u32::MAX as u64;
/// The most completions one add records.
const COUNT_CAP: u64 = (1 << (64 - RT_BITS)) - 1;
/// The largest minimum RT a bucket records (stored as `min_rt + 1`, 0 for none).
const MIN_RT_CAP: u64 = LOW - 1;

/// The round of time `t`.
#[inline(always)]
pub(crate) fn round_of(t: u64) -> u64 {
    t / ROUND_MS
}

/// `round`'s tag in the high half of a word.
#[inline(always)]
pub(super) fn tag(round: u64) -> u64 {
    round << 32
}

/// The full round of a bucket tagged `head`'s tag, taking the round nearest to `near`.
#[inline]
pub(super) fn full_round(head: u64, near: u64) -> Option<u64> {
    let diff = ((head >> 32) as u32).wrapping_sub(near as u32) as i32;
    near.checked_add_signed(i64::from(diff))
}

/// The rounds' heads, on a cache line of their own: a QPS check on another thread reads
/// only them, so the exit's writes (to the bodies) do not move the line it reads.
#[repr(C, align(64))]
#[derive(Debug)]
struct Heads([AtomicU64; LEN]);

/// A round's counters besides its head: 24 bytes.
#[repr(C)]
#[derive(Debug)]
struct Body {
    /// Completions (high 24 bits) and their RT sum in ms (low 40 bits).
    done: AtomicU64,
    /// Blocks (low 32 bits) and errors (high 32 bits).
    rare: AtomicU64,
    /// Occupied passes (low 32 bits) and the minimum RT + 1 (high 32 bits, 0 for none).
    more: AtomicU64,
}

impl Body {
    const fn new() -> Self {
        Self {
            done: AtomicU64::new(0),
            rare: AtomicU64::new(0),
            more: AtomicU64::new(0),
        }
    }
}

/// One round of one stripe: its head and its body.
#[derive(Debug, Clone, Copy)]
pub(super) struct Bucket<'a> {
    /// The round's tag (high 32 bits) and its passes (low 32 bits); [`EMPTY`] if unused.
    pub(super) head: &'a AtomicU64,
    done: &'a AtomicU64,
    rare: &'a AtomicU64,
    more: &'a AtomicU64,
}

impl Bucket<'_> {
    /// The count of `event` in this bucket whose head is `head`.
    #[inline(always)]
    fn get(&self, head: u64, event: Event) -> u64 {
        match event {
            Event::Pass => head & LOW,
            Event::Block => self.rare.load(Ordering::Relaxed) & LOW,
            Event::Error => self.rare.load(Ordering::Relaxed) >> 32,
            Event::Success => self.done.load(Ordering::Relaxed) >> RT_BITS,
            Event::Rt => self.done.load(Ordering::Relaxed) & RT_MASK,
            Event::OccupiedPass => self.more.load(Ordering::Relaxed) & LOW,
        }
    }

    /// The bucket's counts in the order the minute window takes them.
    fn counts(head: u64, done: u64, rare: u64, more: u64) -> [u64; 6] {
        [
            head & LOW,
            rare & LOW,
            done >> RT_BITS,
            rare >> 32,
            done & RT_MASK,
            more & LOW,
        ]
    }
}

/// Adds `v` to `word` by a plain load and store when `owned`, else atomically with `f`.
#[inline(always)]
fn update(word: &AtomicU64, owned: bool, f: impl Fn(u64) -> u64) {
    if owned {
        word.store(f(word.load(Ordering::Relaxed)), Ordering::Relaxed);
    } else {
        let _ = word.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| Some(f(w)));
    }
}

/// `w` with `n` added to its low 32 bits, saturating at `cap`.
#[inline(always)]
fn add_low(w: u64, n: u64, cap: u64) -> u64 {
    w + n.min(cap.saturating_sub(w & LOW))
}

/// `w` with `n` added to its high 32 bits, saturating.
#[inline(always)]
fn add_high(w: u64, n: u64) -> u64 {
    w + (n.min(LOW - (w >> 32)) << 32)
}

/// A finished round handed over when its bucket is reused: its start (ms) and its counts
/// (pass, block, success, error, RT sum, occupied pass).
pub(crate) type Retired = (u64, [u64; 6]);

/// Four round-tagged buckets and a concurrency gauge: one stripe of a node's second window.
#[repr(C, align(64))]
#[derive(Debug)]
pub(crate) struct HotStripe {
    heads: Heads,
    bodies: [Body; LEN],
    gauge: AtomicI64,
    /// Passes this stripe's owner took ahead from the node's fold and has not used yet
    /// (`fold`): the round's tag (high 32 bits) and the passes (low 32 bits). On the last
    /// line, which the owner writes on every call; other threads only take a quota back.
    pub(super) quota: AtomicU64,
}

impl Default for HotStripe {
    fn default() -> Self {
        Self::new()
    }
}

impl HotStripe {
    pub(crate) const fn new() -> Self {
        Self {
            heads: Heads([const { AtomicU64::new(EMPTY) }; LEN]),
            bodies: [Body::new(), Body::new(), Body::new(), Body::new()],
            gauge: AtomicI64::new(0),
            quota: AtomicU64::new(0),
        }
    }

    #[inline(always)]
    pub(super) fn bucket(&self, round: u64) -> Bucket<'_> {
        self.at((round as usize) & (LEN - 1))
    }

    #[inline(always)]
    fn at(&self, i: usize) -> Bucket<'_> {
        let body = &self.bodies[i];
        Bucket {
            head: &self.heads.0[i],
            done: &body.done,
            rare: &body.rare,
            more: &body.more,
        }
    }

    /// Counts `n` passes in `round`. `retire` gets the round a reused bucket held.
    #[inline(always)]
    pub(crate) fn pass(&self, round: u64, n: u64, owned: bool, retire: impl FnOnce(Retired)) {
        let bucket = self.bucket(round);
        if owned {
            let head = bucket.head.load(Ordering::Relaxed);
            // The passes if `bucket` holds `round`, something above the cap if not.
            let held = head ^ tag(round);
            if let Some(sum) = held.checked_add(n) {
                if sum <= PASS_CAP {
                    bucket.head.store(head + n, Ordering::Relaxed);
                    return;
                }
            }
        }
        self.renew(round, n, owned, retire);
    }

    /// The bucket of `round` for counting something other than a pass: restarted first if
    /// it holds an older round.
    #[inline(always)]
    pub(super) fn current(
        &self,
        round: u64,
        owned: bool,
        retire: impl FnOnce(Retired),
    ) -> Bucket<'_> {
        let bucket = self.bucket(round);
        if bucket.head.load(Ordering::Acquire) ^ tag(round) > PASS_CAP {
            self.renew(round, 0, owned, retire);
        }
        bucket
    }

    /// Counts `n` passes into the bucket of `round`, which does not simply hold `round` with
    /// room: it is saturated, unused, holds an older round (restart it) or a newer one (the
    /// clock went back: count into it anyway, as the generic window does).
    #[cold]
    #[inline(never)]
    fn renew(&self, round: u64, n: u64, owned: bool, retire: impl FnOnce(Retired)) {
        let bucket = self.bucket(round);
        let mut head = bucket.head.load(Ordering::Acquire);
        loop {
            let newer =
                head != EMPTY && ((head >> 32) as u32).wrapping_sub(round as u32) as i32 >= 0;
            if newer {
                let next = add_low(head, n, PASS_CAP);
                if owned {
                    bucket.head.store(next, Ordering::Relaxed);
                    return;
                }
                match bucket.head.compare_exchange_weak(
                    head,
                    next,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => return,
                    Err(seen) => {
                        head = seen;
                        continue;
                    }
                }
            }
            let start = tag(round) | n.min(PASS_CAP);
            let (done, rare, more) = if owned {
                // Zero the other counters before the new tag is visible: a reader that sees
                // the tag (acquire) sees the zeros.
                let old = (
                    bucket.done.load(Ordering::Relaxed),
                    bucket.rare.load(Ordering::Relaxed),
                    bucket.more.load(Ordering::Relaxed),
                );
                bucket.done.store(0, Ordering::Relaxed);
                bucket.rare.store(0, Ordering::Relaxed);
                bucket.more.store(0, Ordering::Relaxed);
                bucket.head.store(start, Ordering::Release);
                old
            } else {
                // Exactly one thread wins the restart of an old round.
                if let Err(seen) = bucket.head.compare_exchange_weak(
                    head,
                    start,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    head = seen;
                    continue;
                }
                (
                    bucket.done.swap(0, Ordering::AcqRel),
                    bucket.rare.swap(0, Ordering::AcqRel),
                    bucket.more.swap(0, Ordering::AcqRel),
                )
            };
            if head != EMPTY {
                if let Some(old_round) = full_round(head, round) {
                    retire((old_round * ROUND_MS, Bucket::counts(head, done, rare, more)));
                }
            }
            return;
        }
    }

    /// Counts `n` blocks in `round`.
    #[inline]
    pub(crate) fn block(&self, round: u64, n: u64, owned: bool, retire: impl FnOnce(Retired)) {
        let bucket = self.current(round, owned, retire);
        update(bucket.rare, owned, |w| add_low(w, n, LOW));
    }

    /// Counts `n` occupied passes in `round`.
    #[inline]
    pub(crate) fn occupied(&self, round: u64, n: u64, owned: bool, retire: impl FnOnce(Retired)) {
        let bucket = self.current(round, owned, retire);
        update(bucket.more, owned, |w| add_low(w, n, LOW));
    }

    /// Counts `n` completions in `round` that took `rt` ms (added to the RT sum once, as
    /// the generic window's `add_completions` does) and records `rt` as a minimum RT.
    #[inline(always)]
    pub(crate) fn complete(
        &self,
        round: u64,
        n: u64,
        rt: u64,
        error: bool,
        owned: bool,
        retire: impl FnOnce(Retired),
    ) {
        let bucket = self.current(round, owned, retire);
        let v = (n.min(COUNT_CAP) << RT_BITS) | rt.min(RT_CAP);
        let min = (rt.min(MIN_RT_CAP) + 1) << 32;
        if owned {
            let done = bucket.done;
            done.store(
                done.load(Ordering::Relaxed).wrapping_add(v),
                Ordering::Relaxed,
            );
            let more = bucket.more.load(Ordering::Relaxed);
            let seen = more & !LOW;
            if seen == 0 || min < seen {
                bucket.more.store((more & LOW) | min, Ordering::Relaxed);
            }
        } else {
            bucket.done.fetch_add(v, Ordering::Relaxed);
            let seen = bucket.more.load(Ordering::Relaxed) & !LOW;
            if seen == 0 || min < seen {
                let _ = bucket
                    .more
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| {
                        let seen = w & !LOW;
                        (seen == 0 || min < seen).then_some((w & LOW) | min)
                    });
            }
        }
        if error {
            update(bucket.rare, owned, |w| add_high(w, n));
        }
    }

    /// Adds `delta` to the stripe's concurrency.
    #[inline(always)]
    pub(crate) fn add_concurrency(&self, owned: bool, delta: i64) {
        if owned {
            self.gauge.store(
                self.gauge.load(Ordering::Relaxed).wrapping_add(delta),
                Ordering::Relaxed,
            );
        } else {
            self.gauge.fetch_add(delta, Ordering::Relaxed);
        }
    }

    pub(crate) fn concurrency(&self) -> i64 {
        self.gauge.load(Ordering::Relaxed)
    }

    /// Passes in the second ending in `round`: `round` and the round before.
    #[inline(always)]
    pub(crate) fn passes_at(&self, round: u64) -> u64 {
        let mut total = 0;
        for r in [round, round.wrapping_sub(1)] {
            let held = self.bucket(r).head.load(Ordering::Acquire) ^ tag(r);
            if held <= PASS_CAP {
                total += held;
            }
        }
        total
    }

    /// The buckets holding the rounds of the second ending in `round`, with their heads.
    #[inline]
    fn live(&self, round: u64) -> impl Iterator<Item = (Bucket<'_>, u64)> {
        [Some(round), round.checked_sub(1)]
            .into_iter()
            .flatten()
            .filter_map(move |r| {
                let bucket = self.bucket(r);
                let head = bucket.head.load(Ordering::Acquire);
                (head ^ tag(r) <= PASS_CAP).then_some((bucket, head))
            })
    }

    /// Sum of `event` over the second ending in `round`.
    pub(crate) fn sum_at(&self, round: u64, event: Event) -> u64 {
        if event == Event::Pass {
            return self.passes_at(round);
        }
        self.live(round).map(|(b, head)| b.get(head, event)).sum()
    }

    /// The smallest RT in the second ending in `round`, if any call completed.
    pub(crate) fn min_rt_at(&self, round: u64) -> Option<u64> {
        self.live(round)
            .map(|(b, _)| b.more.load(Ordering::Relaxed) >> 32)
            .filter(|m| *m != 0)
            .min()
            .map(|m| m - 1)
    }

    /// The written buckets and their full rounds (the ones nearest `near`).
    fn written(&self, near: u64) -> impl Iterator<Item = (Bucket<'_>, u64, u64)> {
        (0..LEN).map(|i| self.at(i)).filter_map(move |b| {
            let head = b.head.load(Ordering::Acquire);
            if head == EMPTY {
                return None;
            }
            full_round(head, near).map(|round| (b, head, round))
        })
    }

    /// Sum of `event` over the buckets whose round starts in `[from, to)`.
    pub(crate) fn sum_range(&self, from: u64, to: u64, event: Event) -> u64 {
        self.written(round_of(from))
            .filter(|(_, _, round)| {
                let start = round * ROUND_MS;
                start >= from && start < to
            })
            .map(|(b, head, _)| b.get(head, event))
            .sum()
    }

    /// The end of the newest round written, reading tags as the rounds nearest `near`.
    pub(crate) fn newest_end(&self, near: u64) -> Option<u64> {
        self.written(round_of(near))
            .map(|(_, _, round)| (round + 1) * ROUND_MS)
            .max()
    }
}

#[cfg(test)]
mod tests;
