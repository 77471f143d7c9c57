//! The production clock, [`SystemClock`]: the precise clock read directly under light load,
//! a millisecond counter kept by a ticking thread under heavy load (Sentinel 1.8's
//! `TimeUtil` IDLE / RUNNING states).

use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use super::Clock;

/// The production clock: monotonic, on a TSC-based clock from `quanta`. All `SystemClock`s
/// share one origin (the first one's creation) and one mode.
///
/// It has two modes, switched by the read rate of the whole process:
///
/// * **Direct** (at start, and under light load): `now_ms` reads the precise clock (about
///   10 ns here) and counts the read in a thread-local batch; the upkeep thread is parked
///   and costs nothing.
/// * **Ticking** (above 2 000 reads per millisecond, counted over 10 ms windows): a background thread refreshes a process-wide millisecond counter every
///   millisecond, and `now_ms` is one atomic load and a compare (as Sentinel's own
///   `TimeUtil` in its RUNNING state).
///
/// The threshold is where the two cost the same: one tick costs the upkeep thread 18-27 us
/// of CPU on the machine this was measured on (a 1 ms sleep and its wake-up), a direct read
/// about 10 ns more than a counter read, so ticking pays off above about 2 000 reads per
/// millisecond (1 000 entries + exits). Once a second the ticking thread measures the rate
/// (the readers read directly and count for 10 ms); below half the threshold it goes back
/// to direct reads and parks, so a process at rest, or under light or medium load, has
/// no thread waking every millisecond.
///
/// Whatever the mode, `now_ms` never returns less than a value it returned before (a direct
/// read is published into the counter before it is returned), and never more than the
/// precise clock. If the upkeep thread cannot start, every read is direct.
#[derive(Clone)]
pub struct SystemClock {
    timebase: &'static Timebase,
}

/// Reads per millisecond above which the clock ticks (see [`SystemClock`]).
const TICK_ABOVE_PER_MS: u64 = 2_000;
/// Reads per millisecond below which a ticking clock goes back to direct reads: half the
/// threshold above, so a rate near it does not flip the mode every second.
const DIRECT_BELOW_PER_MS: u64 = TICK_ABOVE_PER_MS / 2;

/// Set in [`WORD`] while readers read the precise clock.
const DIRECT: u64 = 1 << 63;
/// The window over which direct readers count their rate.
const WINDOW_MS: u64 = 10;
/// Reads a thread counts before adding them to the shared counts.
const BATCH: u32 = 32;
/// Ticks between two measurements of the rate while ticking.
const PROBE_EVERY_TICKS: u32 = 1_000;
/// How long a measurement reads directly.
const PROBE_MS: u64 = 10;
const LOW: u64 = u32::MAX as u64;

/// The origin every `SystemClock` measures from, and the upkeep thread if it runs.
struct Timebase {
    clock: quanta::Clock,
    origin: quanta::Instant,
    upkeep: Option<std::thread::Thread>,
}

impl Timebase {
    fn elapsed_ms(&self) -> u64 {
        let elapsed = self.clock.now().saturating_duration_since(self.origin);
        u64::try_from(elapsed.as_millis()).unwrap_or(DIRECT - 1)
    }
}

/// The milliseconds since the origin (the low 63 bits) and the [`DIRECT`] flag: the only
/// word a ticking read loads, on a cache line of its own.
#[repr(align(64))]
struct Word(AtomicU64);

/// What direct readers count, on another cache line.
#[repr(align(64))]
struct Counts {
    /// The current window (high 32 bits) and the reads counted in it (low 32 bits).
    window: AtomicU64,
    /// Every read counted since the start.
    total: AtomicU64,
    /// A reader saw the rate over the threshold: the upkeep thread should tick.
    tick_wanted: AtomicBool,
}

static TIMEBASE: OnceLock<Timebase> = OnceLock::new();
static WORD: Word = Word(AtomicU64::new(DIRECT));
static COUNTS: Counts = Counts {
    window: AtomicU64::new(0),
    total: AtomicU64::new(0),
    tick_wanted: AtomicBool::new(false),
};

thread_local! {
    /// Direct reads this thread has not added to [`COUNTS`] yet.
    static PENDING: Cell<u32> = const { Cell::new(0) };
}

/// Raises the milliseconds in `word` to `now`, keeping its mode; the milliseconds after.
fn publish(word: &AtomicU64, now: u64) -> u64 {
    let mut seen = word.load(Ordering::Acquire);
    loop {
        if seen & !DIRECT >= now {
            return seen & !DIRECT;
        }
        match word.compare_exchange_weak(
            seen,
            (seen & DIRECT) | now,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => return now,
            Err(current) => seen = current,
        }
    }
}

/// Switches `word` to ticking at `now` (never below what it held).
fn start_ticking(word: &AtomicU64, now: u64) {
    let mut seen = word.load(Ordering::Acquire);
    while let Err(current) = word.compare_exchange_weak(
        seen,
        (seen & !DIRECT).max(now),
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        seen = current;
    }
}

/// Adds `n` reads at `now` to `counts`; `true` when the window's rate is over the
/// threshold.
fn count_reads(counts: &Counts, now: u64, n: u64) -> bool {
    counts.total.fetch_add(n, Ordering::Relaxed);
    let window = (now / WINDOW_MS) & LOW;
    let mut seen = counts.window.load(Ordering::Relaxed);
    loop {
        let next = if seen >> 32 == window {
            seen + n.min(LOW - (seen & LOW))
        } else {
            (window << 32) | n.min(LOW)
        };
        match counts
            .window
            .compare_exchange_weak(seen, next, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => return next & LOW >= TICK_ABOVE_PER_MS * WINDOW_MS,
            Err(current) => seen = current,
        }
    }
}

impl fmt::Debug for SystemClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SystemClock").finish_non_exhaustive()
    }
}

/// The upkeep thread: parked while reads are direct; ticking every millisecond while the
/// rate is high, measuring the rate once a second.
fn upkeep(ticker: Timebase) {
    loop {
        while !COUNTS.tick_wanted.load(Ordering::Acquire) {
            std::thread::park();
        }
        loop {
            COUNTS.tick_wanted.store(false, Ordering::Release);
            start_ticking(&WORD.0, ticker.elapsed_ms());
            for _ in 0..PROBE_EVERY_TICKS {
                std::thread::sleep(Duration::from_millis(1));
                WORD.0.fetch_max(ticker.elapsed_ms(), Ordering::AcqRel);
            }
            // Measure the rate: read directly for a while, and count.
            let before = COUNTS.total.load(Ordering::Acquire);
            WORD.0.fetch_or(DIRECT, Ordering::AcqRel);
            std::thread::sleep(Duration::from_millis(PROBE_MS));
            let reads = COUNTS.total.load(Ordering::Acquire).saturating_sub(before);
            let busy = reads >= DIRECT_BELOW_PER_MS * PROBE_MS;
            if !busy && !COUNTS.tick_wanted.load(Ordering::Acquire) {
                break;
            }
        }
    }
}

impl SystemClock {
    /// Returns the process's clock, starting its (parked) upkeep thread on first use.
    pub fn new() -> Self {
        let timebase = TIMEBASE.get_or_init(|| {
            let clock = quanta::Clock::new();
            let origin = clock.now();
            let ticker = Timebase {
                clock: clock.clone(),
                origin,
                upkeep: None,
            };
            let started = std::thread::Builder::new()
                .name("sentinel-clock".into())
                .spawn(move || upkeep(ticker));
            if let Err(error) = &started {
                tracing::warn!(%error, "cannot start the clock upkeep thread; reading the precise clock instead");
            }
            Timebase {
                clock,
                origin,
                upkeep: started.ok().map(|handle| handle.thread().clone()),
            }
        });
        Self { timebase }
    }

    /// A read in direct mode: the precise clock, published into the counter (so no later
    /// read returns less), and counted.
    #[cold]
    #[inline(never)]
    fn direct_ms(&self) -> u64 {
        let now = publish(&WORD.0, self.timebase.elapsed_ms());
        let batch = PENDING
            .try_with(|pending| {
                let n = pending.get() + 1;
                pending.set(if n >= BATCH { 0 } else { n });
                n >= BATCH
            })
            .unwrap_or(false);
        if batch && count_reads(&COUNTS, now, u64::from(BATCH)) {
            self.want_ticking();
        }
        now
    }

    /// Asks the upkeep thread to tick (once per request).
    fn want_ticking(&self) {
        if !COUNTS.tick_wanted.swap(true, Ordering::AcqRel) {
            if let Some(thread) = &self.timebase.upkeep {
                thread.unpark();
            }
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    #[inline]
    fn now_ms(&self) -> u64 {
        let word = WORD.0.load(Ordering::Acquire);
        if word & DIRECT == 0 {
            word
        } else {
            self.direct_ms()
        }
    }

    #[inline]
    fn now_nanos(&self) -> u64 {
        let elapsed = self
            .timebase
            .clock
            .now()
            .saturating_duration_since(self.timebase.origin);
        u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_switches_never_move_the_counter_back() {
        let word = AtomicU64::new(DIRECT);
        // Direct reads publish their time; an older one does not lower it.
        assert_eq!(publish(&word, 10), 10);
        assert_eq!(publish(&word, 7), 10);
        assert_eq!(word.load(Ordering::Relaxed), DIRECT | 10);
        // Ticking starts at the later of the published time and the thread's.
        start_ticking(&word, 9);
        assert_eq!(word.load(Ordering::Relaxed), 10);
        // A direct read that raced the switch still lands in the counter.
        assert_eq!(publish(&word, 12), 12);
        assert_eq!(word.load(Ordering::Relaxed), 12);
        // A tick never lowers it; measuring keeps the time and sets the flag.
        word.fetch_max(11, Ordering::AcqRel);
        word.fetch_or(DIRECT, Ordering::AcqRel);
        assert_eq!(word.load(Ordering::Relaxed), DIRECT | 12);
        // In direct mode a tick changes nothing.
        word.fetch_max(20, Ordering::AcqRel);
        assert_eq!(word.load(Ordering::Relaxed), DIRECT | 12);
    }

    #[test]
    fn the_rate_is_counted_per_window() {
        let counts = Counts {
            window: AtomicU64::new(0),
            total: AtomicU64::new(0),
            tick_wanted: AtomicBool::new(false),
        };
        let limit = TICK_ABOVE_PER_MS * WINDOW_MS;
        let batch = u64::from(BATCH);
        let mut n = 0;
        while n + batch < limit {
            assert!(!count_reads(&counts, 1_000, batch));
            n += batch;
        }
        // A new window starts from zero.
        assert!(!count_reads(&counts, 1_000 + WINDOW_MS, batch));
        assert!(count_reads(&counts, 1_000 + WINDOW_MS, limit));
        assert_eq!(counts.total.load(Ordering::Relaxed), n + batch + limit);
    }
}
