//! Time, injected: a real clock for production and a fake one that tests advance.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The time source of a [`Sentinel`](crate::Sentinel) instance.
///
/// Statistics windows, controllers and circuit breakers read time only through this trait,
/// so tests drive them deterministically with a [`FakeClock`].
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// Milliseconds since an arbitrary, fixed origin. Monotonic. May be cached with about
    /// one millisecond of resolution: this is what the hot path reads.
    fn now_ms(&self) -> u64;

    /// Nanoseconds since the same origin, precise. The rate limiter reads it when it needs
    /// sub-millisecond spacing.
    fn now_nanos(&self) -> u64;

    /// Called when a controller makes a caller queue for `wait`. A real clock returns
    /// `false` and the caller sleeps; a fake clock advances itself and returns `true`.
    fn wait_virtually(&self, wait: Duration) -> bool {
        let _ = wait;
        false
    }
}

/// The production clock: monotonic, on a TSC-based clock from `quanta`.
///
/// `now_ms` reads a process-wide millisecond counter that a background thread refreshes
/// every millisecond (one atomic load, as Sentinel's own `TimeUtil` does). The thread is
/// started once per process, on first use. All `SystemClock`s share one origin: the first
/// one's creation.
///
/// A process at rest pays nothing for it: after 100 ms without a read the thread parks, and
/// the next read (which finds it parked) reads the precise clock, refreshes the counter and
/// wakes the thread. A read costs one more load of a flag on the counter's cache line, and
/// the first read of each millisecond one store.
#[derive(Clone)]
pub struct SystemClock {
    timebase: &'static Timebase,
}

/// The origin every `SystemClock` measures from, and whether the upkeep thread runs.
struct Timebase {
    clock: quanta::Clock,
    origin: quanta::Instant,
    upkeep: Option<std::thread::Thread>,
}

impl Timebase {
    fn elapsed_ms(&self) -> u64 {
        let elapsed = self.clock.now().saturating_duration_since(self.origin);
        u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
    }
}

/// The upkeep thread's counter and its two flags, on one cache line.
#[repr(align(64))]
struct Recent {
    /// Milliseconds since the timebase origin, as of the upkeep thread's last tick.
    ms: AtomicU64,
    /// A reader read the counter since the thread's last tick.
    read: AtomicBool,
    /// The thread is parked (or about to park): the counter is not moving.
    parked: AtomicBool,
}

static TIMEBASE: OnceLock<Timebase> = OnceLock::new();
static RECENT: Recent = Recent {
    ms: AtomicU64::new(0),
    read: AtomicBool::new(false),
    parked: AtomicBool::new(false),
};
/// Ticks without a read after which the upkeep thread parks.
const IDLE_TICKS: u32 = 100;

impl fmt::Debug for SystemClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SystemClock").finish_non_exhaustive()
    }
}

/// The upkeep thread: refreshes the counter every millisecond while it is read, and parks
/// when it is not.
fn upkeep(ticker: Timebase) {
    let mut idle = 0u32;
    loop {
        RECENT.ms.fetch_max(ticker.elapsed_ms(), Ordering::Release);
        if RECENT.read.swap(false, Ordering::AcqRel) {
            idle = 0;
        } else {
            idle += 1;
        }
        if idle >= IDLE_TICKS {
            RECENT.parked.store(true, Ordering::SeqCst);
            // A reader that marked a read before seeing `parked` would not wake this
            // thread: look again after publishing it (each side sees the other's store).
            if RECENT.read.load(Ordering::SeqCst) {
                RECENT.parked.store(false, Ordering::SeqCst);
            } else {
                while RECENT.parked.load(Ordering::SeqCst) {
                    std::thread::park();
                }
            }
            idle = 0;
            continue;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

impl SystemClock {
    /// Returns the process's clock, starting its upkeep thread on first use.
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

    /// The first read since the upkeep thread's last tick: marks it, and if the thread is
    /// parked, reads the precise clock and wakes the thread.
    #[cold]
    #[inline(never)]
    fn first_read(&self, thread: &std::thread::Thread) -> u64 {
        RECENT.read.store(true, Ordering::SeqCst);
        if !RECENT.parked.load(Ordering::SeqCst) {
            return RECENT.ms.load(Ordering::Acquire);
        }
        let now = self.timebase.elapsed_ms();
        RECENT.ms.fetch_max(now, Ordering::AcqRel);
        if RECENT.parked.swap(false, Ordering::SeqCst) {
            thread.unpark();
        }
        now
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
        match &self.timebase.upkeep {
            Some(thread) => {
                if RECENT.read.load(Ordering::Relaxed) {
                    RECENT.ms.load(Ordering::Acquire)
                } else {
                    self.first_read(thread)
                }
            }
            None => self.timebase.elapsed_ms(),
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

/// The engine's clock: the system clock without dynamic dispatch, or an injected one.
#[derive(Debug)]
pub(crate) enum EngineClock {
    System(SystemClock),
    Injected(Arc<dyn Clock>),
}

impl EngineClock {
    #[inline]
    pub(crate) fn now_ms(&self) -> u64 {
        match self {
            EngineClock::System(clock) => clock.now_ms(),
            EngineClock::Injected(clock) => clock.now_ms(),
        }
    }

    #[inline]
    pub(crate) fn as_dyn(&self) -> &dyn Clock {
        match self {
            EngineClock::System(clock) => clock,
            EngineClock::Injected(clock) => &**clock,
        }
    }
}

/// A clock that only moves when a test says so. Clones share the same time.
///
/// A wait that a controller imposes (the rate limiter's queueing) advances the clock instead
/// of sleeping, so queueing tests run instantly and exactly.
#[derive(Debug, Clone, Default)]
pub struct FakeClock {
    nanos: Arc<AtomicU64>,
}

impl FakeClock {
    /// A fake clock at time zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// A fake clock at `ms` milliseconds.
    pub fn at_ms(ms: u64) -> Self {
        let clock = Self::new();
        clock.set_ms(ms);
        clock
    }

    /// Moves time forward.
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.nanos.fetch_add(by, Ordering::SeqCst);
    }

    /// Moves time forward by `ms` milliseconds.
    pub fn advance_ms(&self, ms: u64) {
        self.advance(Duration::from_millis(ms));
    }

    /// Sets the time, in milliseconds.
    pub fn set_ms(&self, ms: u64) {
        self.set_nanos(ms.saturating_mul(1_000_000));
    }

    /// Sets the time, in nanoseconds.
    pub fn set_nanos(&self, nanos: u64) {
        self.nanos.store(nanos, Ordering::SeqCst);
    }
}

impl Clock for FakeClock {
    fn now_ms(&self) -> u64 {
        self.nanos.load(Ordering::SeqCst) / 1_000_000
    }

    fn now_nanos(&self) -> u64 {
        self.nanos.load(Ordering::SeqCst)
    }

    fn wait_virtually(&self, wait: Duration) -> bool {
        self.advance(wait);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_clock_advances_and_shares_time() {
        let clock = FakeClock::at_ms(1_000);
        let other = clock.clone();
        clock.advance_ms(250);
        assert_eq!(other.now_ms(), 1_250);
        assert_eq!(other.now_nanos(), 1_250_000_000);
        assert!(other.wait_virtually(Duration::from_millis(5)));
        assert_eq!(clock.now_ms(), 1_255);
    }

    #[test]
    fn system_clock_is_monotonic() {
        let clock = SystemClock::new();
        let a = clock.now_nanos();
        std::thread::sleep(Duration::from_millis(3));
        let b = clock.now_nanos();
        assert!(b > a);
        assert!(clock.now_ms() <= b / 1_000_000 + 1);
        // The cached milliseconds follow the precise clock within a few ticks.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while clock.now_ms() < b / 1_000_000 {
            assert!(
                std::time::Instant::now() < deadline,
                "the upkeep thread does not tick"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
