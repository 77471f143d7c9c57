//! Thread-owned stripes: a window is split into stripes, and each thread writes only its
//! own. This module leases the stripe indexes ([`my_stripe`]), which node statistics
//! (`hot` and `spread`) use too, and holds the generic striped window of circuit breakers.
//!
//! A locked atomic add costs about 10 ns on the machines this was measured on, and an entry
//! and its exit make four updates. Up to [`OWNED_STRIPES`] live threads each lease a stripe
//! that no other thread writes, so their updates are plain loads and stores. Further threads
//! share one more stripe with locked adds. Readers sum the stripes that have ever been
//! written. With several threads on one resource, writers no longer bounce one cache line
//! between cores.
//!
//! A stripe is allocated when a thread first writes it: a window that one thread uses holds
//! one stripe, not nine.

#[cfg(test)]
use std::sync::atomic::AtomicI64;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use super::window::{Bucket, Event, Window};

/// Stripes that a thread can own.
pub(crate) const OWNED_STRIPES: usize = 8;
/// The stripe shared, with locked adds, by threads that own none.
const SHARED_STRIPE: usize = OWNED_STRIPES;
/// Owned stripes plus the shared one.
pub(crate) const STRIPES: usize = OWNED_STRIPES + 1;

/// Owned stripes in use, one bit each.
static LEASED: AtomicU64 = AtomicU64::new(0);

/// A thread's stripe, given back when the thread exits.
struct Lease(usize);

impl Lease {
    fn acquire() -> Self {
        Lease(take_stripe(&LEASED))
    }
}

/// Takes a free owned stripe from the `leased` bitmask, or the shared one when none is free.
fn take_stripe(leased: &AtomicU64) -> usize {
    let all = (1u64 << OWNED_STRIPES) - 1;
    let mut taken = leased.load(Ordering::Relaxed);
    loop {
        let free = !taken & all;
        if free == 0 {
            return SHARED_STRIPE;
        }
        let bit = free.trailing_zeros() as usize;
        match leased.compare_exchange_weak(
            taken,
            taken | (1 << bit),
            Ordering::AcqRel,
            Ordering::Relaxed,
        ) {
            Ok(_) => return bit,
            Err(now) => taken = now,
        }
    }
}

/// Gives `stripe` back to the `leased` bitmask (the shared stripe is nobody's).
fn give_back(leased: &AtomicU64, stripe: usize) {
    if stripe < OWNED_STRIPES {
        leased.fetch_and(!(1u64 << stripe), Ordering::AcqRel);
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        // From now on this thread (in its remaining destructors) shares.
        let _ = STRIPE.try_with(|s| s.set(SHARED_STRIPE as u8));
        give_back(&LEASED, self.0);
    }
}

/// `STRIPE` before the thread's first use.
const NO_STRIPE: u8 = u8::MAX;

thread_local! {
    /// The thread's lease, given back by its destructor when the thread exits.
    static LEASE: Lease = Lease::acquire();
    /// The leased stripe, readable without the lazy-initialisation check of `LEASE`.
    static STRIPE: std::cell::Cell<u8> = const { std::cell::Cell::new(NO_STRIPE) };
}

/// This thread's stripe, and whether the thread owns it.
#[inline(always)]
pub(crate) fn my_stripe() -> (usize, bool) {
    let stripe = match STRIPE.try_with(std::cell::Cell::get) {
        Ok(NO_STRIPE) => lease_stripe(),
        Ok(stripe) => usize::from(stripe),
        Err(_) => SHARED_STRIPE,
    };
    (stripe, stripe < OWNED_STRIPES)
}

/// Takes the thread's lease on first use.
#[cold]
#[inline(never)]
fn lease_stripe() -> usize {
    // During thread teardown the lease may be gone: use the shared stripe.
    let stripe = LEASE.try_with(|lease| lease.0).unwrap_or(SHARED_STRIPE);
    let _ = STRIPE.try_with(|s| s.set(stripe as u8));
    stripe
}

/// The stripes of `stripes` whose bit is set in `bits` and that are made (a bit may be
/// seen a moment before its stripe: that stripe is skipped).
#[inline(always)]
pub(crate) fn made<T>(stripes: &[OnceLock<Box<T>>], mut bits: u64) -> impl Iterator<Item = &T> {
    std::iter::from_fn(move || loop {
        if bits == 0 {
            return None;
        }
        let i = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        if let Some(stripe) = stripes.get(i).and_then(OnceLock::get) {
            return Some(&**stripe);
        }
    })
}

/// One thread's part of a [`StripedWindow`]: its window, and a concurrency gauge on a cache
/// line of its own (the window's fields are read by every reader; the gauge is written by
/// the owner on every call).
#[derive(Debug)]
pub(crate) struct Stripe<const BUCKET_MS: u64> {
    window: Window<BUCKET_MS>,
    /// Only the tests still count concurrency here: node statistics use `hot`'s stripes.
    #[cfg(test)]
    gauge: Gauge,
}

#[cfg(test)]
#[repr(align(64))]
#[derive(Debug, Default)]
struct Gauge(AtomicI64);

#[cfg(test)]
impl<const BUCKET_MS: u64> Stripe<BUCKET_MS> {
    /// Adds `delta` to the stripe's concurrency, with a plain store when `owned`.
    #[inline(always)]
    pub(crate) fn add_concurrency(&self, owned: bool, delta: i64) {
        let gauge = &self.gauge.0;
        if owned {
            gauge.store(
                gauge.load(Ordering::Relaxed).wrapping_add(delta),
                Ordering::Relaxed,
            );
        } else {
            gauge.fetch_add(delta, Ordering::Relaxed);
        }
    }
}

/// A window split into per-thread stripes (`BUCKET_MS` as in [`Window`]), each allocated
/// on its first write.
#[derive(Debug)]
pub(crate) struct StripedWindow<const BUCKET_MS: u64 = 0> {
    stripes: [OnceLock<Box<Stripe<BUCKET_MS>>>; STRIPES],
    /// Stripes ever written, one bit each: readers skip the others.
    active: AtomicU64,
    buckets: u32,
    retained: u32,
    interval_ms: u64,
}

impl<const BUCKET_MS: u64> StripedWindow<BUCKET_MS> {
    pub(crate) fn new(buckets: usize, interval_ms: u64, retained: usize) -> Self {
        // The shape every stripe will have (as `Window::with_retention` makes it).
        let (buckets, bucket_ms) = Window::<BUCKET_MS>::shape(buckets, interval_ms);
        Self {
            stripes: Default::default(),
            active: AtomicU64::new(0),
            buckets: u32::try_from(buckets).unwrap_or(u32::MAX),
            retained: u32::try_from(retained).unwrap_or(u32::MAX),
            interval_ms: bucket_ms * buckets as u64,
        }
    }

    /// The stripe `stripe`, allocated (and marked active) on first use.
    #[inline(always)]
    pub(crate) fn stripe(&self, stripe: usize) -> &Stripe<BUCKET_MS> {
        self.stripes[stripe].get_or_init(
            #[cold]
            || {
                let window = Window::with_retention(
                    self.buckets as usize,
                    self.interval_ms,
                    self.retained as usize,
                );
                let made = Box::new(Stripe {
                    window,
                    #[cfg(test)]
                    gauge: Gauge::default(),
                });
                // Readers may see the bit a moment before the stripe: they skip it.
                self.active.fetch_or(1 << stripe, Ordering::Relaxed);
                made
            },
        )
    }

    /// The stripes that have been written.
    #[inline(always)]
    fn active_stripes(&self) -> impl Iterator<Item = &Stripe<BUCKET_MS>> {
        made(&self.stripes, self.active.load(Ordering::Relaxed))
    }

    /// The windows of the stripes that have been written.
    #[inline(always)]
    fn active(&self) -> impl Iterator<Item = &Window<BUCKET_MS>> {
        self.active_stripes().map(|s| &s.window)
    }

    /// The bucket of `stripe` for `now`, handing a finished round to `retire`; and the
    /// stripe.
    #[inline(always)]
    pub(crate) fn current_with(
        &self,
        stripe: usize,
        now: u64,
        retire: impl FnOnce(u64, &Bucket),
    ) -> (&Bucket, &Stripe<BUCKET_MS>) {
        let stripe = self.stripe(stripe);
        (stripe.window.current_with(now, retire, |_, _| {}), stripe)
    }

    #[cfg(test)]
    /// The sum of every stripe's concurrency gauge.
    pub(crate) fn concurrency(&self) -> i64 {
        self.active_stripes()
            .map(|s| s.gauge.0.load(Ordering::Relaxed))
            .sum()
    }

    #[cfg(test)]
    /// The heap bytes of the stripes allocated so far.
    pub(crate) fn heap_bytes(&self) -> usize {
        let per_stripe = std::mem::size_of::<Stripe<BUCKET_MS>>()
            + self.retained.max(self.buckets) as usize * std::mem::size_of::<Bucket>();
        self.active.load(Ordering::Relaxed).count_ones() as usize * per_stripe
    }

    pub(crate) fn interval_ms(&self) -> u64 {
        self.interval_ms
    }

    #[cfg(test)]
    pub(crate) fn bucket_ms(&self) -> u64 {
        self.interval_ms / u64::from(self.buckets)
    }

    #[inline(always)]
    pub(crate) fn sum(&self, now: u64, event: Event) -> u64 {
        let mut windows = self.active();
        let Some(first) = windows.next() else {
            return 0;
        };
        let round = first.round_of(now);
        let mut total = first.sum_at(round, event);
        for window in windows {
            total += window.sum_at(round, event);
        }
        total
    }

    #[cfg(test)]
    pub(crate) fn sum_range(&self, from: u64, to: u64, event: Event) -> u64 {
        self.active().map(|w| w.sum_range(from, to, event)).sum()
    }

    #[cfg(test)]
    /// The largest per-round total of `event` among the rounds inside the interval.
    pub(crate) fn max_round(&self, now: u64, event: Event) -> u64 {
        let width = self.bucket_ms();
        let current = now - now % width;
        let rounds = self.interval_ms() / width;
        (0..rounds)
            .filter_map(|i| current.checked_sub(i * width))
            .map(|start| self.sum_range(start, start + 1, event))
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_are_distinct_shared_past_eight_and_given_back() {
        // A private bitmask: the process-wide pool is shared with every other test's threads.
        let leased = AtomicU64::new(0);
        let stripes: Vec<usize> = (0..OWNED_STRIPES).map(|_| take_stripe(&leased)).collect();
        assert_eq!(stripes, (0..OWNED_STRIPES).collect::<Vec<_>>());
        assert_eq!(take_stripe(&leased), SHARED_STRIPE, "none left: share");
        give_back(&leased, 5);
        give_back(&leased, SHARED_STRIPE);
        assert_eq!(
            take_stripe(&leased),
            5,
            "a given-back stripe is leased again"
        );
        assert_eq!(take_stripe(&leased), SHARED_STRIPE);
    }

    #[test]
    fn a_thread_uses_one_stripe_throughout() {
        let first = my_stripe();
        assert_eq!(my_stripe(), first);
        let other = std::thread::spawn(|| (my_stripe(), my_stripe()))
            .join()
            .unwrap_or((first, first));
        assert_eq!(other.0, other.1);
    }

    #[test]
    fn sums_cover_every_written_stripe() {
        let w: StripedWindow = StripedWindow::new(2, 1000, 4);
        assert_eq!(w.heap_bytes(), 0, "no stripe before a write");
        w.current_with(0, 100, |_, _| {}).0.add(Event::Pass, 2);
        w.current_with(3, 100, |_, _| {}).0.add(Event::Pass, 5);
        w.current_with(SHARED_STRIPE, 600, |_, _| {})
            .0
            .add(Event::Pass, 1);
        w.stripe(3).add_concurrency(true, 2);
        w.stripe(SHARED_STRIPE).add_concurrency(false, -1);
        assert_eq!(w.concurrency(), 1);
        assert_eq!(w.active_stripes().count(), 3, "three stripes allocated");
        assert_eq!(w.sum(700, Event::Pass), 8);
        assert_eq!(w.sum_range(0, 500, Event::Pass), 7);
        assert_eq!(w.max_round(700, Event::Pass), 7);
        assert_eq!(w.sum(1600, Event::Pass), 0);
    }
}
