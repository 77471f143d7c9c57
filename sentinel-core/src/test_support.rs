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
/// for a moment (a spin, or now and then a thread yield); returns the most calls inside at once, and how many passed.
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
                        // Stay inside a while: every eighth call gives its time slice away
                        // so the other threads try to enter meanwhile; the others spin. A
                        // yield on every call took two minutes with both cores busy (each
                        // yield then waits out another process's time slice).
                        if admitted.fetch_add(1, Ordering::Relaxed) % 8 == 0 {
                            std::thread::yield_now();
                        } else {
                            for _ in 0..64 {
                                std::hint::spin_loop();
                            }
                        }
                        inside.fetch_sub(1, Ordering::SeqCst);
                        drop(entry);
                    }
                }
            });
        }
    });
    (most.into_inner(), admitted.into_inner())
}

/// Runs `f` on a thread that owns its stripe, so that it takes quotas: other tests'
/// threads may hold every owned stripe for a moment, so this waits (10 s at most) for one.
pub(crate) fn on_owned_stripe<T: Send>(f: impl Fn() -> T + Sync) -> T {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let ran =
            std::thread::scope(
                |s| match s.spawn(|| crate::stat::my_stripe().1.then(&f)).join() {
                    Ok(ran) => ran,
                    Err(panic) => std::panic::resume_unwind(panic),
                },
            );
        if let Some(value) = ran {
            return value;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no owned stripe came free in 10 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}
