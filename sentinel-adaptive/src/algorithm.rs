//! The three limit algorithms as pure functions of one window's statistics: the limiter
//! calls one of them once per window, off the hot path, and clamps the result.

use crate::rule::{AdaptiveRule, Algorithm};

/// What one window measured, as the algorithms read it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Window {
    /// Exits that recorded a latency.
    pub(crate) samples: u64,
    /// Exits reported as dropped (a timeout or an overload error from the dependency).
    pub(crate) drops: u64,
    /// The rule's percentile of the window's latencies, µs (meaningless when `samples == 0`).
    pub(crate) rtt: f64,
    /// The current minimum RTT, µs.
    pub(crate) min_rtt: f64,
    /// The mean number of calls in flight over the window (Little's law on the samples).
    pub(crate) in_flight: f64,
}

/// Gradient's clamp on one window's multiplier (Envoy's).
const GRADIENT_MIN: f64 = 0.5;
const GRADIENT_MAX: f64 = 2.0;

/// Envoy's `sqrt(limit)` of headroom, capped at `max(rttTolerance, 5 %)` of the limit so
/// that small limits do not overshoot by half (at a limit of 4, `sqrt` is 50 %).
fn headroom(rule: &AdaptiveRule, limit: f64) -> f64 {
    limit.sqrt().min(limit * rule.rtt_tolerance.max(0.05))
}

/// The new (unclamped) limit after `w`, from `limit`. `None` leaves the limit as it is.
pub(crate) fn next_limit(rule: &AdaptiveRule, limit: f64, w: &Window) -> Option<f64> {
    // Little's law: under half the limit in flight, the limit is not what holds calls
    // back, and the latency says nothing about a higher one (Netflix's "app-limited").
    let app_limited = w.in_flight * 2.0 < limit;
    match rule.algorithm {
        Algorithm::Gradient => {
            if w.samples == 0 {
                return None;
            }
            let gradient =
                (w.min_rtt * (1.0 + rule.rtt_tolerance) / w.rtt).clamp(GRADIENT_MIN, GRADIENT_MAX);
            // Headroom only while no queue is seen. Gradient2 adds its queue term always and
            // measures against a long-term average that follows the samples, so under modest
            // overload the limit grows without bound; here the baseline is the probed minimum
            // and the headroom stops as soon as the latency rises past the tolerance.
            let target = if gradient >= 1.0 {
                if app_limited {
                    return None;
                }
                gradient * limit + headroom(rule, limit)
            } else {
                gradient * limit
            };
            Some(limit + rule.smoothing * (target - limit))
        }
        Algorithm::Vegas => {
            let log = limit.max(1.0).log10().max(0.5);
            let target = if w.drops > 0 {
                limit - log
            } else if w.samples == 0 {
                return None;
            } else {
                let queue = limit * (1.0 - w.min_rtt / w.rtt);
                if queue > 6.0 * log {
                    limit - log
                } else if app_limited || queue >= 3.0 * log {
                    return None;
                } else if queue <= log {
                    limit + 6.0 * log
                } else {
                    limit + log
                }
            };
            // Netflix's Vegas steps whole (its smoothing defaults to 1).
            Some(target)
        }
        Algorithm::Aimd => {
            let threshold = match rule.latency_threshold_ms {
                Some(ms) => ms as f64 * 1_000.0,
                None => w.min_rtt * (1.0 + rule.rtt_tolerance),
            };
            if w.drops > 0 || (w.samples > 0 && w.rtt > threshold) {
                Some(limit * rule.backoff_ratio)
            } else if w.samples == 0 || app_limited {
                None
            } else {
                Some(limit + 1.0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(rtt: f64, in_flight: f64) -> Window {
        Window {
            samples: 100,
            drops: 0,
            rtt,
            min_rtt: 10_000.0,
            in_flight,
        }
    }

    fn rule(algorithm: Algorithm) -> AdaptiveRule {
        AdaptiveRule {
            algorithm,
            smoothing: 1.0,
            ..AdaptiveRule::new("r")
        }
    }

    #[test]
    fn gradient_shrinks_to_the_tolerance_under_queueing_and_grows_without() {
        let r = rule(Algorithm::Gradient);
        // 100 in flight, latency doubled by queueing: the dependency holds ~50.
        let shrunk = next_limit(&r, 100.0, &window(20_000.0, 100.0)).unwrap_or_default();
        assert!((shrunk - 55.0).abs() < 1e-9, "{shrunk}");
        // No queue: 1.1 x plus sqrt headroom.
        let grown = next_limit(&r, 100.0, &window(10_000.0, 100.0)).unwrap_or_default();
        assert!((grown - 120.0).abs() < 1e-9, "{grown}");
        // The multiplier is clamped to [0.5, 2].
        let floor = next_limit(&r, 100.0, &window(100_000.0, 100.0)).unwrap_or_default();
        assert!((floor - 50.0).abs() < 1e-9, "{floor}");
    }

    #[test]
    fn gradient_does_not_grow_an_app_limited_limit_nor_read_an_empty_window() {
        let r = rule(Algorithm::Gradient);
        assert_eq!(next_limit(&r, 100.0, &window(10_000.0, 40.0)), None);
        let empty = Window {
            samples: 0,
            ..window(0.0, 0.0)
        };
        assert_eq!(next_limit(&r, 100.0, &empty), None);
        // A queue still shrinks it.
        assert!(next_limit(&r, 100.0, &window(30_000.0, 40.0)).is_some());
    }

    #[test]
    fn vegas_keeps_the_queue_between_alpha_and_beta() {
        let r = rule(Algorithm::Vegas);
        // limit 100: log 2, alpha 6, beta 12.
        let queue_of = |q: f64| 10_000.0 / (1.0 - q / 100.0);
        assert_eq!(
            next_limit(&r, 100.0, &window(queue_of(1.0), 100.0)),
            Some(112.0)
        );
        assert_eq!(
            next_limit(&r, 100.0, &window(queue_of(4.0), 100.0)),
            Some(102.0)
        );
        assert_eq!(next_limit(&r, 100.0, &window(queue_of(8.0), 100.0)), None);
        assert_eq!(
            next_limit(&r, 100.0, &window(queue_of(20.0), 100.0)),
            Some(98.0)
        );
        let dropped = Window {
            drops: 1,
            ..window(10_000.0, 100.0)
        };
        assert_eq!(next_limit(&r, 100.0, &dropped), Some(98.0));
    }

    #[test]
    fn aimd_adds_one_and_backs_off_on_latency_or_drops() {
        let r = rule(Algorithm::Aimd);
        assert_eq!(next_limit(&r, 50.0, &window(10_500.0, 50.0)), Some(51.0));
        assert_eq!(next_limit(&r, 50.0, &window(11_500.0, 50.0)), Some(45.0));
        let dropped = Window {
            drops: 3,
            ..window(10_000.0, 50.0)
        };
        assert_eq!(next_limit(&r, 50.0, &dropped), Some(45.0));
        let fixed = AdaptiveRule {
            latency_threshold_ms: Some(50),
            ..r
        };
        assert_eq!(
            next_limit(&fixed, 50.0, &window(40_000.0, 50.0)),
            Some(51.0)
        );
        assert_eq!(next_limit(&fixed, 50.0, &window(10_000.0, 10.0)), None);
    }
}
