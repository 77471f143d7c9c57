//! Time, injected: a real clock for production and a fake one that tests advance.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
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

/// The production clock: a monotonic TSC-based clock from `quanta`.
///
/// `now_ms` reads a recent time that a background upkeep thread refreshes every millisecond
/// (about 1 ns per read, as Sentinel's own `TimeUtil` does). The upkeep thread is started
/// once per process, on first use.
#[derive(Clone)]
pub struct SystemClock {
    clock: quanta::Clock,
    origin: quanta::Instant,
}

impl fmt::Debug for SystemClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SystemClock").finish_non_exhaustive()
    }
}

static UPKEEP: OnceLock<Option<quanta::Handle>> = OnceLock::new();

impl SystemClock {
    /// Creates a clock whose origin is now.
    pub fn new() -> Self {
        UPKEEP.get_or_init(|| match quanta::Upkeep::new(Duration::from_millis(1)).start() {
            Ok(handle) => Some(handle),
            Err(error) => {
                tracing::warn!(%error, "cannot start the clock upkeep thread; reading the precise clock instead");
                None
            }
        });
        let clock = quanta::Clock::new();
        let origin = clock.now();
        Self { clock, origin }
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
        let now = if matches!(UPKEEP.get(), Some(Some(_))) {
            self.clock.recent()
        } else {
            self.clock.now()
        };
        // `recent` may lag `origin` by less than a tick right after start.
        now.saturating_duration_since(self.origin).as_millis() as u64
    }

    #[inline]
    fn now_nanos(&self) -> u64 {
        self.clock
            .now()
            .saturating_duration_since(self.origin)
            .as_nanos() as u64
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
        self.nanos.fetch_add(by.as_nanos() as u64, Ordering::SeqCst);
    }

    /// Moves time forward by `ms` milliseconds.
    pub fn advance_ms(&self, ms: u64) {
        self.advance(Duration::from_millis(ms));
    }

    /// Sets the time, in milliseconds.
    pub fn set_ms(&self, ms: u64) {
        self.nanos.store(ms * 1_000_000, Ordering::SeqCst);
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
    }
}
