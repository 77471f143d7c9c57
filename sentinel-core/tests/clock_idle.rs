//! The system clock's upkeep thread at rest: it parks when nobody reads the clock, so an idle
//! process pays nothing for it, and the first read after a rest is still exact. Alone in its
//! own test binary, so that no other test reads the clock meanwhile.

use std::time::{Duration, Instant};

use sentinel_core::{Clock, SystemClock};

/// This process's CPU time (user + system), from /proc/self/stat, in clock ticks.
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // The fields after the command name (which may hold spaces) start after its `)`.
    let rest = &stat[stat.rfind(')').expect("a command name") + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime")
}

#[test]
fn an_idle_clock_costs_no_cpu_and_wakes_exact() {
    let clock = SystemClock::new();
    let _ = clock.now_ms();
    // Let the upkeep thread see 100 ticks without a read, and park.
    std::thread::sleep(Duration::from_millis(500));
    let (before, start) = (cpu_ticks(), Instant::now());
    std::thread::sleep(Duration::from_secs(3));
    let used = cpu_ticks() - before;
    // Ticking every millisecond costs 1.5-9% of a core (45-270 ms in 3 s, 5-27 ticks of
    // 10 ms); parked, nothing but this test's own reads of /proc.
    assert!(
        used <= 2,
        "{used} ticks of CPU in {:?} at rest",
        start.elapsed()
    );
    // The first read after the rest is the precise time, not the last tick's.
    let precise = clock.now_nanos() / 1_000_000;
    let cached = clock.now_ms();
    assert!(
        cached + 1 >= precise,
        "read {cached} ms after a rest, the precise clock says {precise} ms"
    );
    // And the thread ticks again: the counter follows the precise clock.
    let deadline = Instant::now() + Duration::from_secs(5);
    let target = clock.now_nanos() / 1_000_000 + 20;
    while clock.now_ms() < target {
        assert!(Instant::now() < deadline, "the upkeep thread did not wake");
        std::thread::sleep(Duration::from_millis(1));
    }
}
