//! Checks the backends' config tests share: each backend's config has the same health-check
//! defaults and refuses the same zero durations.

use std::fmt::Debug;
use std::time::Duration;

/// Checks a backend config built with the default health check: `detection` (its
/// `frozen_server_detection()`) is 3 s, and its `Debug` shows `health_check: (1s, 2s)`.
pub fn assert_default_health_check(config: &impl Debug, detection: Duration) {
    assert_eq!(detection, Duration::from_secs(3));
    let debug = format!("{config:?}");
    assert!(debug.contains("health_check: (1s, 2s)"), "{debug}");
}

/// Checks that a config builder refused a setting: `built` is what `build()` returned, and
/// `expected` the error it should be (a `ConfigError::Zero` for a zero duration).
pub fn assert_refused<C: Debug, E: Debug + PartialEq>(built: Result<C, E>, expected: E) {
    match built {
        Err(error) => assert_eq!(error, expected),
        Ok(config) => panic!("expected {expected:?}, built {config:?}"),
    }
}
