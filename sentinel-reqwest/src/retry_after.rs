//! `Retry-After` from the upstream: a resource whose upstream answered 429 or 503 with a wait
//! is held back for that long.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use http::header::RETRY_AFTER;
use http::StatusCode;
use reqwest::Response;

/// Whether and how the upstream's `Retry-After` holds calls back: set it with
/// [`SentinelMiddleware::retry_after`](crate::SentinelMiddleware::retry_after). Off by
/// default.
///
/// When a response has one of the [`statuses`](Self::statuses) (by default 429 and 503)
/// and a `Retry-After` header (seconds, or an HTTP date), every later call of the same
/// resource fails at once with [`SentinelError::RetryAfter`](crate::SentinelError::RetryAfter)
/// until that time has passed (at most [`max`](Self::max), 60 s by default); then calls go
/// out again, under the resource's rules. The wait runs on the engine's clock. A later
/// `Retry-After` replaces a shorter wait, never a longer one. The hold is this middleware's
/// (its clones share it), in addition to the rules: a circuit breaker rule still counts the
/// response that carried the header.
///
/// ```
/// use std::time::Duration;
///
/// use reqwest::StatusCode;
/// use sentinel_reqwest::{RetryAfter, SentinelMiddleware};
///
/// let middleware = SentinelMiddleware::new(sentinel_core::Sentinel::new()).retry_after(
///     RetryAfter::new()
///         .statuses([StatusCode::SERVICE_UNAVAILABLE])
///         .max(Duration::from_secs(30)),
/// );
/// # let _ = middleware;
/// ```
#[derive(Debug, Clone)]
pub struct RetryAfter {
    statuses: Vec<StatusCode>,
    max: Duration,
}

impl Default for RetryAfter {
    fn default() -> Self {
        Self::new()
    }
}

impl RetryAfter {
    /// 429 and 503 hold calls back for their `Retry-After`, at most 60 s.
    pub fn new() -> Self {
        Self {
            statuses: vec![
                StatusCode::TOO_MANY_REQUESTS,
                StatusCode::SERVICE_UNAVAILABLE,
            ],
            max: Duration::from_secs(60),
        }
    }

    /// The statuses whose `Retry-After` is followed.
    pub fn statuses(mut self, statuses: impl IntoIterator<Item = StatusCode>) -> Self {
        self.statuses = statuses.into_iter().collect();
        self
    }

    /// The longest hold, whatever the upstream asks (a wrong or hostile header cannot stop
    /// calls for a day).
    pub fn max(mut self, max: Duration) -> Self {
        self.max = max;
        self
    }

    /// How long `response` asks to be left alone, capped; `None` for another status, no
    /// header, an unreadable one or a time already past.
    pub(crate) fn wait_of(&self, response: &Response) -> Option<Duration> {
        if !self.statuses.contains(&response.status()) {
            return None;
        }
        let value = response.headers().get(RETRY_AFTER)?.to_str().ok()?.trim();
        let wait = match value.parse::<u64>() {
            Ok(seconds) => Duration::from_secs(seconds),
            Err(_) => httpdate::parse_http_date(value)
                .ok()?
                .duration_since(SystemTime::now())
                .ok()?,
        };
        (!wait.is_zero()).then(|| wait.min(self.max))
    }
}

/// The most resources held back at once; past it, a new hold is not recorded (with a
/// warning), so that hostile names cannot grow the map.
const MAX_HOLDS: usize = 1024;

/// The resources held back, each until a time in engine milliseconds. Shared by the clones of
/// a middleware.
#[derive(Debug, Default)]
pub(crate) struct Holds {
    /// How many resources are held: a call reads this and takes the lock only when some are.
    active: AtomicUsize,
    until: Mutex<HashMap<Arc<str>, u64>>,
}

impl Holds {
    /// How long `resource` is still held back at `now_ms`.
    pub(crate) fn check(&self, resource: &str, now_ms: u64) -> Option<Duration> {
        if self.active.load(Ordering::Acquire) == 0 {
            return None;
        }
        let mut until = self.until.lock().unwrap_or_else(PoisonError::into_inner);
        let deadline = *until.get(resource)?;
        if now_ms < deadline {
            return Some(Duration::from_millis(deadline - now_ms));
        }
        until.remove(resource);
        self.active.store(until.len(), Ordering::Release);
        None
    }

    /// Holds `resource` back for `wait` from `now_ms` (unless it is held longer already).
    pub(crate) fn hold(&self, resource: &str, now_ms: u64, wait: Duration) {
        let wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
        let deadline = now_ms.saturating_add(wait_ms);
        let mut until = self.until.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(held) = until.get_mut(resource) {
            *held = (*held).max(deadline);
        } else {
            until.retain(|_, held| *held > now_ms);
            if until.len() >= MAX_HOLDS {
                tracing::warn!(
                    resource,
                    "{MAX_HOLDS} resources are held back by Retry-After already; not holding this one"
                );
                return;
            }
            until.insert(Arc::from(resource), deadline);
        }
        self.active.store(until.len(), Ordering::Release);
        tracing::info!(
            resource,
            wait_ms,
            "upstream asked to retry later: calls held back"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(status: u16, retry_after: Option<&str>) -> Response {
        let mut builder = http::Response::builder().status(status);
        if let Some(value) = retry_after {
            builder = builder.header(RETRY_AFTER, value);
        }
        Response::from(builder.body(String::new()).expect("a valid response"))
    }

    #[test]
    fn seconds_and_dates_are_read_and_capped() {
        let policy = RetryAfter::new().max(Duration::from_secs(60));
        assert_eq!(
            policy.wait_of(&response(503, Some("7"))),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            policy.wait_of(&response(429, Some("86400"))),
            Some(Duration::from_secs(60))
        );
        let in_30s = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(30));
        let wait = policy
            .wait_of(&response(503, Some(&in_30s)))
            .expect("a date");
        assert!(wait > Duration::from_secs(25) && wait <= Duration::from_secs(30));
        let past = httpdate::fmt_http_date(SystemTime::now() - Duration::from_secs(30));
        assert_eq!(policy.wait_of(&response(503, Some(&past))), None);
        assert_eq!(policy.wait_of(&response(503, Some("soon"))), None);
        assert_eq!(policy.wait_of(&response(503, Some("0"))), None);
        assert_eq!(policy.wait_of(&response(503, None)), None);
        assert_eq!(policy.wait_of(&response(500, Some("7"))), None);
        let only_503 = RetryAfter::new().statuses([StatusCode::SERVICE_UNAVAILABLE]);
        assert_eq!(only_503.wait_of(&response(429, Some("7"))), None);
    }

    #[test]
    fn a_hold_lasts_until_its_time_and_keeps_the_longer_wait() {
        let holds = Holds::default();
        assert_eq!(holds.check("a", 0), None);
        holds.hold("a", 1_000, Duration::from_secs(5));
        holds.hold("a", 1_000, Duration::from_secs(2));
        assert_eq!(holds.check("a", 2_000), Some(Duration::from_secs(4)));
        assert_eq!(holds.check("b", 2_000), None);
        assert_eq!(holds.check("a", 6_000), None);
        assert_eq!(holds.active.load(Ordering::Acquire), 0);
    }

    #[test]
    fn holds_are_bounded() {
        let holds = Holds::default();
        for i in 0..MAX_HOLDS + 10 {
            holds.hold(&format!("r{i}"), 0, Duration::from_secs(5));
        }
        assert_eq!(holds.active.load(Ordering::Acquire), MAX_HOLDS);
        assert_eq!(holds.check(&format!("r{}", MAX_HOLDS + 5), 1), None);
        // Expired holds make room.
        holds.hold("late", 10_000, Duration::from_secs(5));
        assert!(holds.check("late", 10_001).is_some());
    }
}
