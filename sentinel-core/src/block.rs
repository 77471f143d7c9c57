//! Why a call was blocked.

use std::sync::Arc;

use crate::authority::AuthorityRule;
use crate::circuit_breaker::DegradeRule;
use crate::flow::{FlowGrade, FlowRule};
use crate::param_flow::{ParamFlowGrade, ParamFlowRule};
use crate::rules::RuleFamily;
use crate::system::SystemMetric;

/// A call was blocked by a rule. Says which family, which resource and which rule.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum BlockError {
    /// An authority rule rejected the caller's origin.
    #[error(
        "blocked by authority rule on resource {resource:?}: origin {origin:?} is not allowed"
    )]
    Authority {
        /// The resource.
        resource: Arc<str>,
        /// The rule.
        rule: Arc<AuthorityRule>,
        /// The rejected origin.
        origin: String,
    },
    /// A system rule blocked an inbound call.
    #[error("blocked by system protection on resource {resource:?}: {metric} is {value}, threshold {threshold}")]
    System {
        /// The resource.
        resource: Arc<str>,
        /// The threshold that blocked.
        metric: SystemMetric,
        /// Its value.
        threshold: f64,
        /// The value seen.
        value: f64,
    },
    /// A flow rule blocked the call.
    #[error("blocked by flow control on resource {resource:?}: {} limit {} for {}", grade_name(rule), rule.count, rule.limit_app)]
    Flow {
        /// The resource.
        resource: Arc<str>,
        /// The rule that blocked.
        rule: Arc<FlowRule>,
    },
    /// A hot-parameter (param-flow) rule blocked the call: the value of the argument it
    /// limits was hot.
    #[error(
        "blocked by param-flow rule on resource {resource:?}: the value of {} was hot ({}){}",
        argument_name(rule),
        param_limit(rule),
        value.as_deref().map(|v| format!(": {v}")).unwrap_or_default()
    )]
    ParamFlow {
        /// The resource.
        resource: Arc<str>,
        /// The rule that blocked.
        rule: Arc<ParamFlowRule>,
        /// The hot value, only if the engine was built with
        /// [`param_values_in_errors`](crate::SentinelBuilder::param_values_in_errors): it may
        /// be personal data.
        value: Option<String>,
    },
    /// An open (or half-open, probing) circuit breaker blocked the call.
    #[error("blocked by circuit breaker on resource {resource:?} ({:?}, count {}, open for {} s)", rule.grade, rule.count, rule.time_window)]
    CircuitBreaker {
        /// The resource.
        resource: Arc<str>,
        /// The breaker's rule.
        rule: Arc<DegradeRule>,
    },
}

fn grade_name(rule: &FlowRule) -> &'static str {
    match rule.grade {
        FlowGrade::Qps => "QPS",
        FlowGrade::Thread => "concurrency",
    }
}

fn argument_name(rule: &ParamFlowRule) -> String {
    match (&rule.param_key, rule.param_idx) {
        (Some(key), _) => format!("attachment {key:?}"),
        (None, index) => format!("argument {}", index.unwrap_or(0)),
    }
}

fn param_limit(rule: &ParamFlowRule) -> String {
    match rule.grade {
        ParamFlowGrade::Qps => format!(
            "limit {} per {} s per value",
            rule.count, rule.duration_in_sec
        ),
        ParamFlowGrade::Thread => format!("limit {} in flight per value", rule.count),
    }
}

impl BlockError {
    /// The family of the rule that blocked.
    pub fn family(&self) -> RuleFamily {
        match self {
            BlockError::Authority { .. } => RuleFamily::Authority,
            BlockError::System { .. } => RuleFamily::System,
            BlockError::Flow { .. } => RuleFamily::Flow,
            BlockError::CircuitBreaker { .. } => RuleFamily::Degrade,
            BlockError::ParamFlow { .. } => RuleFamily::ParamFlow,
        }
    }

    /// The blocked resource.
    pub fn resource(&self) -> &str {
        match self {
            BlockError::Authority { resource, .. }
            | BlockError::System { resource, .. }
            | BlockError::Flow { resource, .. }
            | BlockError::CircuitBreaker { resource, .. }
            | BlockError::ParamFlow { resource, .. } => resource,
        }
    }
}

/// A block error of each family: the match fails to compile when a family has no variant.
#[cfg(test)]
pub(crate) fn example(family: RuleFamily) -> BlockError {
    let resource: Arc<str> = Arc::from("r");
    match family {
        RuleFamily::Authority => BlockError::Authority {
            resource,
            rule: Arc::new(AuthorityRule::white_list("r", "a")),
            origin: "b".into(),
        },
        RuleFamily::System => BlockError::System {
            resource,
            metric: SystemMetric::Qps,
            threshold: 1.0,
            value: 2.0,
        },
        RuleFamily::Flow => BlockError::Flow {
            resource,
            rule: Arc::new(FlowRule::qps("r", 1.0)),
        },
        RuleFamily::Degrade => BlockError::CircuitBreaker {
            resource,
            rule: Arc::new(DegradeRule::error_count("r", 1.0, 1)),
        },
        RuleFamily::ParamFlow => BlockError::ParamFlow {
            resource,
            rule: Arc::new(ParamFlowRule::qps("r", 0, 1.0)),
            value: None,
        },
    }
}
