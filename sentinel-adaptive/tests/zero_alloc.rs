//! Acquire + release (and the window's tick) allocate nothing, shown with a counting
//! global allocator.
#![allow(unsafe_code)] // a GlobalAlloc impl is unsafe by definition

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use sentinel_adaptive::{AdaptiveLimiter, AdaptiveRule, Learned, Outcome};

struct CountingAllocator;

thread_local! {
    // Only the test thread's allocations count: the test harness's own thread allocates on
    // its own schedule (a clean-clone run under cargo-nextest counted one of those).
    static ON: Cell<bool> = const { Cell::new(false) };
}
static COUNT: AtomicUsize = AtomicUsize::new(0);

fn counting() -> bool {
    ON.try_with(Cell::get).unwrap_or(false)
}

// SAFETY: every call goes to the system allocator unchanged; allocations are only counted.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if counting() {
            COUNT.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

#[test]
fn acquire_release_and_tick_allocate_nothing() {
    let limiter = AdaptiveLimiter::builder(AdaptiveRule::new("r"))
        .replica_seed(1)
        .learned(Learned {
            limit: 100.0,
            min_rtt: Duration::from_millis(10),
        })
        .build(0);
    let Ok(limiter) = limiter else {
        panic!("build")
    };
    ON.with(|on| on.set(true));
    let mut admitted = 0u32;
    for i in 0..100_000u64 {
        if let Some(p) = limiter.try_acquire() {
            admitted += 1;
            let outcome = if i % 7 == 0 {
                Outcome::Dropped
            } else {
                Outcome::Success
            };
            p.release(Duration::from_micros(9_000 + i % 3_000), outcome);
        }
        limiter.tick(i); // 100 s of windows, probes included
    }
    ON.with(|on| on.set(false));
    assert_eq!(admitted, 100_000);
    assert_eq!(
        COUNT.load(Ordering::SeqCst),
        0,
        "allocations on the hot path"
    );
}
