//! Time, injected: a real clock for production and a fake one that tests advance.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

mod system;
pub use system::SystemClock;

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
