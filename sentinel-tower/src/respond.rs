//! Ready-made answers to blocked requests: a status per family, `Retry-After` where the rule
//! says how long the wait lasts, and a body in plain words.

use std::time::Duration;

use http::header::{HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use http::{Response, StatusCode};
use sentinel_core::flow::{ControlBehavior, FlowGrade};
use sentinel_core::param_flow::ParamFlowGrade;
use sentinel_core::{BlockError, RuleFamily};

use crate::block::BlockHandler;

/// Answers blocked requests with an HTTP response chosen by the family that blocked: set it
/// with [`SentinelLayer::respond_with`](crate::SentinelLayer::respond_with).
///
/// | blocked by | status (default) | `Retry-After` | body |
/// |---|---|---|---|
/// | flow, QPS | 429 | 1 s (the sliding second frees room within it); a rate limiter under 1 call a second: `1 / count` s, its spacing | `too many requests, retry later` |
/// | param-flow, QPS | 429 | `durationInSec / count` s (at least 1) | `too many requests, retry later` |
/// | circuit breaker | 503 | the time left until the open breaker admits a probe (`timeWindow` while one is in flight) | `service temporarily unavailable, retry later` |
/// | flow or param-flow, concurrency | 429 | none: the wait is a call's completion | `too many requests, retry later` |
/// | system protection | 503 | none | `service temporarily unavailable, retry later` |
/// | authority | 403 | none: retrying does not help | `forbidden` |
///
/// `Retry-After` is in whole seconds, rounded up. The body names no rule, resource or origin.
///
/// ```
/// use http::StatusCode;
/// use sentinel_core::RuleFamily;
/// use sentinel_tower::{BlockResponses, SentinelLayer};
///
/// let layer = SentinelLayer::new(sentinel_core::Sentinel::new()).respond_with(
///     BlockResponses::new().status(RuleFamily::Degrade, StatusCode::BAD_GATEWAY),
/// );
/// # let _ = layer;
/// ```
#[derive(Debug, Clone)]
pub struct BlockResponses {
    flow: StatusCode,
    param_flow: StatusCode,
    degrade: StatusCode,
    system: StatusCode,
    authority: StatusCode,
    retry_after: bool,
}

impl Default for BlockResponses {
    fn default() -> Self {
        Self::new()
    }
}

impl BlockResponses {
    /// The defaults of the table above.
    pub fn new() -> Self {
        Self {
            flow: StatusCode::TOO_MANY_REQUESTS,
            param_flow: StatusCode::TOO_MANY_REQUESTS,
            degrade: StatusCode::SERVICE_UNAVAILABLE,
            system: StatusCode::SERVICE_UNAVAILABLE,
            authority: StatusCode::FORBIDDEN,
            retry_after: true,
        }
    }

    /// Answers requests blocked by `family` with `status`.
    pub fn status(mut self, family: RuleFamily, status: StatusCode) -> Self {
        match family {
            RuleFamily::Flow => self.flow = status,
            RuleFamily::ParamFlow => self.param_flow = status,
            RuleFamily::Degrade => self.degrade = status,
            RuleFamily::System => self.system = status,
            RuleFamily::Authority => self.authority = status,
            // A family added later keeps the status of flow control.
            _ => {}
        }
        self
    }

    /// Whether to send `Retry-After` (on by default).
    pub fn retry_after(mut self, on: bool) -> Self {
        self.retry_after = on;
        self
    }

    /// The status for a block.
    pub fn status_of(&self, error: &BlockError) -> StatusCode {
        match error.family() {
            RuleFamily::ParamFlow => self.param_flow,
            RuleFamily::Degrade => self.degrade,
            RuleFamily::System => self.system,
            RuleFamily::Authority => self.authority,
            _ => self.flow,
        }
    }

    /// How long a blocked caller should wait before it retries, when the block says (see
    /// the table above).
    pub fn wait_of(error: &BlockError) -> Option<Duration> {
        let seconds = |s: f64| (s.is_finite() && s > 0.0).then(|| Duration::from_secs_f64(s));
        match error {
            BlockError::Flow { rule, .. } if rule.grade == FlowGrade::Qps => {
                match rule.control_behavior {
                    // Calls are spaced 1 / count apart.
                    ControlBehavior::RateLimiter | ControlBehavior::WarmUpRateLimiter
                        if rule.count > 0.0 && rule.count < 1.0 =>
                    {
                        seconds(1.0 / rule.count)
                    }
                    // The sliding second frees room within it.
                    _ => seconds(1.0),
                }
            }
            BlockError::ParamFlow { rule, .. } if rule.grade == ParamFlowGrade::Qps => {
                let duration = f64::from(rule.duration_in_sec.max(1));
                seconds(if rule.count > 0.0 {
                    duration / rule.count
                } else {
                    duration
                })
            }
            BlockError::CircuitBreaker { rule, retry_in, .. } => {
                retry_in.or_else(|| seconds(f64::from(rule.time_window)))
            }
            _ => None,
        }
    }

    /// The response for a block.
    pub fn response<B: From<String>>(&self, error: &BlockError) -> Response<B> {
        let status = self.status_of(error);
        // Whole lines, copied once (no formatting on the block path).
        let body = match error.family() {
            RuleFamily::Authority => "forbidden\n",
            RuleFamily::Degrade | RuleFamily::System => {
                "service temporarily unavailable, retry later\n"
            }
            _ => "too many requests, retry later\n",
        };
        let mut response = Response::new(B::from(String::from(body)));
        *response.status_mut() = status;
        let headers = response.headers_mut();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        if self.retry_after {
            if let Some(wait) = Self::wait_of(error) {
                let whole = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                headers.insert(RETRY_AFTER, HeaderValue::from(whole.max(1)));
            }
        }
        response
    }
}

impl<B: From<String>, E> BlockHandler<Response<B>, E> for BlockResponses {
    type Error = E;

    fn blocked(&self, error: BlockError) -> Result<Response<B>, E> {
        Ok(self.response(&error))
    }

    fn inner_error(error: E) -> E {
        error
    }
}
