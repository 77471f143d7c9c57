//! Why a call was blocked.

use std::sync::Arc;

use crate::flow::FlowRule;
use crate::rules::RuleFamily;

/// A call was blocked by a rule. Says which family, which resource and which rule.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum BlockError {
    /// A flow rule blocked the call.
    #[error("blocked by flow control on resource {resource:?}: {} limit {} ({})", grade_name(rule), rule.count, rule.limit_app)]
    Flow {
        /// The resource.
        resource: Arc<str>,
        /// The rule that blocked.
        rule: Arc<FlowRule>,
    },
}

fn grade_name(rule: &FlowRule) -> &'static str {
    match rule.grade {
        crate::flow::FlowGrade::Qps => "QPS",
        crate::flow::FlowGrade::Thread => "concurrency",
    }
}

impl BlockError {
    /// The family of the rule that blocked.
    pub fn family(&self) -> RuleFamily {
        match self {
            BlockError::Flow { .. } => RuleFamily::Flow,
        }
    }

    /// The blocked resource.
    pub fn resource(&self) -> &str {
        match self {
            BlockError::Flow { resource, .. } => resource,
        }
    }
}
