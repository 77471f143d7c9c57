//! The system clock under a burst of reads: above the threshold the upkeep thread ticks (and
//! reads are one atomic load); when the burst ends it measures the rate, goes back to direct
//! reads and parks. Alone in its own test binary, so that no other test reads the clock
//! meanwhile.

use std::time::{Duration, Instant};

use sentinel_core::{Clock, SystemClock};

mod clock_cpu;
use clock_cpu::upkeep_cpu_ns;

#[test]
fn a_burst_ticks_and_the_clock_parks_after_it() {
    let clock = SystemClock::new();
    let before = upkeep_cpu_ns();
    // A burst: reads as fast as one thread can for 300 ms (millions a second).
    let start = Instant::now();
    let mut last = clock.now_ms();
    let mut reads = 0u64;
    while start.elapsed() < Duration::from_millis(300) {
        for _ in 0..1_000 {
            let now = clock.now_ms();
            assert!(now >= last, "the clock went back from {last} to {now}");
            last = now;
        }
        reads += 1_000;
    }
    let precise = clock.now_nanos() / 1_000_000;
    assert!(
        last <= precise,
        "read {last} ms, ahead of the precise clock's {precise} ms"
    );
    let ticked = upkeep_cpu_ns() - before;
    assert!(
        ticked > 0,
        "the upkeep thread never ran during {reads} reads in 300 ms"
    );
    // After the burst, within a measurement period (about 1 s) and its probe, the thread
    // parks: its CPU time stops growing. Bounded wait: 5 s.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut previous = upkeep_cpu_ns();
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let now = upkeep_cpu_ns();
        if now - previous <= 500_000 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the upkeep thread still runs 5 s after the burst ({} ns in the last 500 ms)",
            now - previous
        );
        previous = now;
    }
    // Parked, the clock reads the precise time directly.
    let now = clock.now_ms();
    let precise = clock.now_nanos() / 1_000_000;
    assert!(
        now + 1 >= precise,
        "read {now} ms, the precise clock says {precise} ms"
    );
}
