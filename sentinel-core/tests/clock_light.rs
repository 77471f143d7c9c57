//! The system clock under light load (about 200 reads a second): reads are direct, so the
//! upkeep thread stays parked and spends no CPU. Alone in its own test binary, so that no
//! other test reads the clock meanwhile.

use std::time::{Duration, Instant};

use sentinel_core::{Clock, SystemClock};

mod clock_cpu;
use clock_cpu::upkeep_cpu_ns;

#[test]
fn light_load_reads_directly_and_the_upkeep_thread_stays_parked() {
    let clock = SystemClock::new();
    let mut last = clock.now_ms();
    let before = upkeep_cpu_ns();
    let start = Instant::now();
    let mut reads = 0u32;
    // About 200 reads a second for two seconds (sleeps pace the reads; nothing waits on
    // another thread).
    while start.elapsed() < Duration::from_secs(2) {
        let now = clock.now_ms();
        assert!(now >= last, "the clock went back from {last} to {now}");
        // Direct reads are the precise time, not a tick's.
        let precise = clock.now_nanos() / 1_000_000;
        assert!(
            now + 1 >= precise,
            "read {now} ms, the precise clock says {precise} ms"
        );
        last = now;
        reads += 1;
        std::thread::sleep(Duration::from_millis(5));
    }
    let used = upkeep_cpu_ns() - before;
    assert!(reads >= 100, "only {reads} reads in {:?}", start.elapsed());
    // Ticking every millisecond costs this VM 18-27 us a tick, 36-54 ms in two seconds.
    assert!(
        used <= 2_000_000,
        "the upkeep thread used {used} ns of CPU in {:?} under {reads} reads",
        start.elapsed()
    );
}
