//! The minimum-RTT probe: when it runs (a jittered interval drawn from the replica's seed)
//! and the constants that keep it harmless.

use crate::rule::AdaptiveRule;

/// A probe never lowers the limit below this (nor raises it).
pub(crate) const PROBE_FLOOR: u32 = 3;
/// A measurement ends as soon as it has this many samples.
pub(crate) const MIN_PROBE_SAMPLES: u64 = 50;
/// A slow resource's probe measures for at most this many windows, and then uses what it
/// has if that is at least [`FEWEST_PROBE_SAMPLES`]; with fewer (an idle resource: nothing
/// to measure, nothing to change) it keeps the old minimum.
pub(crate) const MAX_MEASURING_WINDOWS: u32 = 10;
/// See [`MAX_MEASURING_WINDOWS`].
pub(crate) const FEWEST_PROBE_SAMPLES: u64 = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// No minimum RTT yet.
    Startup,
    Adapting,
    /// One window at the probe's limit; its samples are discarded.
    Draining,
    /// Measuring windows so far (beyond the first).
    Measuring {
        windows: u32,
    },
}

/// SplitMix64: a tiny, well-mixed generator; one per limiter, seeded per replica.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[-1, 1)`.
    fn next_signed_unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }
}

#[derive(Debug, Clone)]
pub(crate) struct ProbeSchedule {
    interval_ms: f64,
    jitter: f64,
    rng: SplitMix64,
    next_ms: u64,
}

impl ProbeSchedule {
    pub(crate) fn new(rule: &AdaptiveRule, seed: u64) -> Self {
        ProbeSchedule {
            interval_ms: rule.probe_interval_ms as f64,
            jitter: rule.probe_jitter,
            rng: SplitMix64(seed),
            next_ms: u64::MAX,
        }
    }

    /// Schedules the next probe one jittered interval after `now_ms`.
    pub(crate) fn schedule_after(&mut self, now_ms: u64) {
        let factor = 1.0 + self.jitter * self.rng.next_signed_unit();
        self.next_ms = now_ms.saturating_add((self.interval_ms * factor) as u64);
    }

    pub(crate) fn next_probe_ms(&self) -> u64 {
        self.next_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intervals(seed: u64) -> Vec<u64> {
        let mut s = ProbeSchedule::new(&AdaptiveRule::new("r"), seed);
        (0..200)
            .map(|i| {
                let now = i * 1_000_000;
                s.schedule_after(now);
                s.next_probe_ms() - now
            })
            .collect()
    }

    #[test]
    fn probes_are_jittered_within_bounds_and_differ_between_replicas() {
        let a = intervals(1);
        assert_eq!(a, intervals(1), "the same seed gives the same schedule");
        let b = intervals(2);
        assert_ne!(a, b);
        for i in a.iter().chain(&b) {
            assert!((24_000..=36_000).contains(i), "{i}");
        }
        // Spread over the jitter range, not clustered.
        let (lo, hi) = (a.iter().min(), a.iter().max());
        assert!(lo < Some(&26_000) && hi > Some(&34_000), "{lo:?} {hi:?}");
        // Two replicas started together do not probe in the same window (100 ms).
        let close = a
            .iter()
            .zip(&b)
            .filter(|(x, y)| x.abs_diff(**y) < 100)
            .count();
        assert!(close < 10, "{close} of 200 probes coincide");
    }
}
