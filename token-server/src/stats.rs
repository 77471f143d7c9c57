//! Passed and blocked token requests per `flowId`, per second: what the dashboard's
//! `cluster/server/metricList` shows (Sentinel's server shows its window's average QPS; this
//! is the last whole second's count, the same figure for a steady load).

use std::sync::{Mutex, PoisonError};

/// One flow's counts: the second being counted and the last whole one.
#[derive(Debug, Default)]
pub(crate) struct FlowCounts {
    seconds: Mutex<Seconds>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Seconds {
    /// The second counted now (`now_ms / 1000`).
    second: u64,
    pass: u64,
    block: u64,
    /// The second before `second`, whole.
    last_pass: u64,
    last_block: u64,
}

impl Seconds {
    /// Moves the count to the second of `now_ms`.
    fn roll(&mut self, now_ms: u64) {
        let now = now_ms / 1000;
        if now == self.second {
            return;
        }
        if now == self.second + 1 {
            self.last_pass = self.pass;
            self.last_block = self.block;
        } else {
            // A second or more without requests, or a clock that went back (a restarted
            // fake): nothing whole to show.
            self.last_pass = 0;
            self.last_block = 0;
        }
        self.second = now;
        self.pass = 0;
        self.block = 0;
    }
}

impl FlowCounts {
    /// Counts a decision at `now_ms` (the slot's clock).
    pub(crate) fn record(&self, now_ms: u64, passed: bool) {
        let mut seconds = self.seconds.lock().unwrap_or_else(PoisonError::into_inner);
        seconds.roll(now_ms);
        if passed {
            seconds.pass += 1;
        } else {
            seconds.block += 1;
        }
    }

    /// `(passed, blocked)` in the last whole second before `now_ms`.
    pub(crate) fn last_second(&self, now_ms: u64) -> (u64, u64) {
        let mut seconds = self.seconds.lock().unwrap_or_else(PoisonError::into_inner);
        seconds.roll(now_ms);
        (seconds.last_pass, seconds.last_block)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_whole_second_is_shown_and_an_idle_one_shows_zero() {
        let counts = FlowCounts::default();
        for ms in [10_000, 10_100, 10_999] {
            counts.record(ms, true);
        }
        counts.record(10_500, false);
        assert_eq!(counts.last_second(10_999), (0, 0), "second 10 is not whole");
        assert_eq!(counts.last_second(11_000), (3, 1));
        counts.record(11_200, true);
        assert_eq!(counts.last_second(11_900), (3, 1));
        assert_eq!(counts.last_second(12_000), (1, 0));
        assert_eq!(
            counts.last_second(14_000),
            (0, 0),
            "seconds 12 and 13 were idle"
        );
    }
}
