//! Helpers for the crate's unit tests: an engine on a fake clock, and load generators.

use crate::{Clock, FakeClock, Sentinel};

/// An engine on `clock`.
pub(crate) fn engine(clock: &FakeClock) -> Sentinel {
    Sentinel::builder().clock(clock.clone()).build()
}

/// Enters `n` times at the current time, returning how many passed (entries exit at once).
pub(crate) fn burst(s: &Sentinel, resource: &str, n: usize) -> usize {
    (0..n).filter(|_| s.entry(resource).enter().is_ok()).count()
}

/// Offers `offered` calls a second to `resource`, evenly spread, for `seconds`; returns the
/// passes of each second.
pub(crate) fn run_load(
    s: &Sentinel,
    clock: &FakeClock,
    resource: &str,
    seconds: usize,
    offered: usize,
) -> Vec<usize> {
    let step = 1000 / offered as u64;
    (0..seconds)
        .map(|_| {
            let start = clock.now_ms();
            let mut passed = 0;
            for i in 0..offered as u64 {
                clock.set_ms(start + i * step);
                if s.entry(resource).enter().is_ok() {
                    passed += 1;
                }
            }
            clock.set_ms(start + 1000);
            passed
        })
        .collect()
}

/// Runs 16 threads that each try `calls` entries with `enter`, holding each one that passes
/// over a thread yield; returns the most calls inside at once, and how many passed.
pub(crate) fn most_inside<E>(calls: usize, enter: impl Fn() -> Option<E> + Sync) -> (usize, usize) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let (inside, most, admitted) = (
        AtomicUsize::new(0),
        AtomicUsize::new(0),
        AtomicUsize::new(0),
    );
    std::thread::scope(|scope| {
        for _ in 0..16 {
            scope.spawn(|| {
                for _ in 0..calls {
                    if let Some(entry) = enter() {
                        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        admitted.fetch_add(1, Ordering::Relaxed);
                        std::thread::yield_now();
                        inside.fetch_sub(1, Ordering::SeqCst);
                        drop(entry);
                    }
                }
            });
        }
    });
    (most.into_inner(), admitted.into_inner())
}
