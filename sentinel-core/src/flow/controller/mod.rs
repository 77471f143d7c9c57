//! Traffic-shaping controllers, one per `controlBehavior`.

mod rate_limiter;
mod reject;
mod warm_up;
mod warm_up_rate_limiter;

use std::time::Duration;

pub(crate) use rate_limiter::RateLimiter;
pub(crate) use reject::Reject;
pub(crate) use warm_up::WarmUp;
pub(crate) use warm_up_rate_limiter::WarmUpRateLimiter;

use super::rule::{ControlBehavior, FlowGrade, FlowRule};
use crate::clock::Clock;
use crate::stat::StatNode;

/// A controller's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Go ahead now.
    Pass,
    /// Go ahead after queueing this long.
    Wait(Duration),
    /// A prioritized call borrowed a slot of a future bucket: go ahead after this wait, and
    /// count the pass in that bucket, not now.
    Borrowed(Duration),
    /// Rejected.
    Block,
}

/// The compiled form of one flow rule's `controlBehavior`.
#[derive(Debug)]
pub(crate) enum Controller {
    Reject(Reject),
    WarmUp(WarmUp),
    RateLimiter(RateLimiter),
    WarmUpRateLimiter(WarmUpRateLimiter),
}

impl Controller {
    /// Whether the rule's controller keeps state between calls: every controller but
    /// reject (which concurrency rules use too).
    pub(crate) fn keeps_state(rule: &FlowRule) -> bool {
        rule.grade != FlowGrade::Thread && rule.control_behavior != ControlBehavior::Reject
    }

    /// Builds the controller for a rule. Concurrency rules always use the reject controller,
    /// as in Sentinel's `FlowRuleUtil.generateRater`.
    pub(crate) fn for_rule(rule: &FlowRule) -> Self {
        if rule.grade == FlowGrade::Thread {
            return Controller::Reject(Reject::new(rule.count, FlowGrade::Thread));
        }
        match rule.control_behavior {
            ControlBehavior::Reject => Controller::Reject(Reject::new(rule.count, FlowGrade::Qps)),
            ControlBehavior::WarmUp => Controller::WarmUp(WarmUp::new(
                rule.count,
                rule.warm_up_period_sec,
                warm_up::COLD_FACTOR,
            )),
            ControlBehavior::RateLimiter => {
                Controller::RateLimiter(RateLimiter::new(rule.count, rule.max_queueing_time_ms))
            }
            ControlBehavior::WarmUpRateLimiter => {
                Controller::WarmUpRateLimiter(WarmUpRateLimiter::new(
                    rule.count,
                    rule.warm_up_period_sec,
                    rule.max_queueing_time_ms,
                ))
            }
        }
    }

    #[inline]
    pub(crate) fn check(
        &self,
        node: &StatNode,
        acquire: u32,
        now_ms: u64,
        clock: &dyn Clock,
        prioritized: bool,
    ) -> Decision {
        match self {
            Controller::Reject(c) => c.check(node, acquire, now_ms, prioritized),
            Controller::WarmUp(c) => c.check(node, acquire, now_ms),
            Controller::RateLimiter(c) => c.check(acquire, clock),
            Controller::WarmUpRateLimiter(c) => c.check(node, acquire, now_ms, clock),
        }
    }
}

/// `Math.nextUp` for positive finite doubles.
fn next_up(x: f64) -> f64 {
    if x.is_nan() || x == f64::INFINITY {
        x
    } else if x == 0.0 {
        f64::from_bits(1)
    } else if x > 0.0 {
        f64::from_bits(x.to_bits() + 1)
    } else {
        f64::from_bits(x.to_bits() - 1)
    }
}
