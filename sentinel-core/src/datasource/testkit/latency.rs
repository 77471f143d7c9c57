//! Latency samples for the propagation benchmarks.

use std::time::Duration;

/// Latency samples: record, then read percentiles.
#[derive(Debug, Clone, Default)]
pub struct Latencies {
    samples: Vec<Duration>,
    sorted: bool,
}

impl Latencies {
    /// No samples yet, with room for `capacity`.
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            samples: Vec::with_capacity(capacity),
            sorted: true,
        }
    }

    /// Records one sample.
    pub fn record(&mut self, sample: Duration) {
        self.samples.push(sample);
        self.sorted = false;
    }

    /// The `p`th percentile (nearest rank; `p` in 0..=100), zero with no samples.
    pub fn percentile(&mut self, p: f64) -> Duration {
        if self.samples.is_empty() {
            return Duration::ZERO;
        }
        if !self.sorted {
            self.samples.sort_unstable();
            self.sorted = true;
        }
        let rank = ((p / 100.0) * self.samples.len() as f64).ceil() as usize;
        self.samples[rank.clamp(1, self.samples.len()) - 1]
    }

    /// `p50 {..} ms, p99 {..} ms, max {..} ms`.
    pub fn summary(&mut self) -> String {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        format!(
            "p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
            ms(self.percentile(50.0)),
            ms(self.percentile(99.0)),
            ms(self.percentile(100.0))
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let mut l = Latencies::with_capacity(100);
        for ms in (1..=100).rev() {
            l.record(Duration::from_millis(ms));
        }
        assert_eq!(l.percentile(50.0), Duration::from_millis(50));
        assert_eq!(l.percentile(99.0), Duration::from_millis(99));
        assert_eq!(l.percentile(100.0), Duration::from_millis(100));
        assert_eq!(Latencies::default().percentile(50.0), Duration::ZERO);
    }
}
