//! Reconnect backoff: exponential, jittered, capped.

use std::time::Duration;

use rand::Rng;

/// Exponential backoff with jitter, capped.
#[derive(Debug)]
pub(super) struct Backoff {
    initial: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    pub(super) fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max,
            next: initial,
        }
    }

    /// The next delay: the current step scaled by a random factor in [0.5, 1].
    pub(super) fn next_delay(&mut self) -> Duration {
        let base = self.next;
        self.next = self.next.saturating_mul(2).min(self.max);
        base.mul_f64(rand::rng().random_range(0.5..=1.0))
    }

    pub(super) fn reset(&mut self) {
        self.next = self.initial;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_and_caps() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        let delays: Vec<Duration> = (0..8).map(|_| b.next_delay()).collect();
        let steps = [100u64, 200, 400, 800, 1000, 1000, 1000, 1000];
        for (delay, step) in delays.iter().zip(steps) {
            let step = Duration::from_millis(step);
            assert!(
                *delay <= step && *delay >= step / 2,
                "{delay:?} vs {step:?}"
            );
        }
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(100));
        // Jittered: the same step gives different delays.
        let firsts: std::collections::BTreeSet<Duration> = (0..20)
            .map(|_| {
                b.reset();
                b.next_delay()
            })
            .collect();
        assert!(firsts.len() > 1, "no jitter: {firsts:?}");
    }
}
