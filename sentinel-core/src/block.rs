//! Why a call was blocked.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use crate::authority::{AuthorityRule, AuthorityStrategy};
use crate::circuit_breaker::{DegradeGrade, DegradeRule};
use crate::flow::{FlowGrade, FlowRule};
use crate::param_flow::{ParamFlowGrade, ParamFlowRule};
use crate::rule_ref::RuleRef;
use crate::rules::RuleFamily;
use crate::stat::{my_stripe, STRIPES};
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
        /// The rule that blocked, shared with the rules loaded with it.
        rule: RuleRef<FlowRule>,
    },
    /// A hot-parameter (param-flow) rule blocked the call: the value of the argument it
    /// limits was hot.
    #[error(
        "blocked by paramFlow rule on resource {resource:?}: the value of {} was hot ({}){}",
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
        /// How long until the breaker admits a probe, when it was open with its retry
        /// timeout still running (`None` while half-open: a probe is in flight).
        retry_in: Option<std::time::Duration>,
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

/// Blocks of one resource by what blocked them, counted since its statistics were made
/// (read with [`Sentinel::block_reasons`](crate::Sentinel::block_reasons)). A flow rule in
/// cluster mode counts as `cluster`, whether the shared store or the local fallback decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[non_exhaustive]
pub struct BlockReasons {
    /// Blocked by a (local) flow rule.
    pub flow: u64,
    /// Blocked by a param-flow (hot parameter) rule.
    pub param_flow: u64,
    /// Blocked by an open or probing circuit breaker.
    pub circuit_breaker: u64,
    /// Blocked by system protection.
    pub system: u64,
    /// Blocked by an authority rule.
    pub authority: u64,
    /// Blocked by a flow rule in cluster mode.
    pub cluster: u64,
}

impl BlockReasons {
    /// Every block, whatever blocked it.
    pub fn total(&self) -> u64 {
        self.flow
            + self.param_flow
            + self.circuit_breaker
            + self.system
            + self.authority
            + self.cluster
    }

    /// The blocks counted since `earlier` (each count saturating at 0).
    pub fn since(&self, earlier: &BlockReasons) -> BlockReasons {
        BlockReasons {
            flow: self.flow.saturating_sub(earlier.flow),
            param_flow: self.param_flow.saturating_sub(earlier.param_flow),
            circuit_breaker: self.circuit_breaker.saturating_sub(earlier.circuit_breaker),
            system: self.system.saturating_sub(earlier.system),
            authority: self.authority.saturating_sub(earlier.authority),
            cluster: self.cluster.saturating_sub(earlier.cluster),
        }
    }
}

/// The names of the block reasons, in [`BlockTally`]'s order (the `reason` label of
/// `sentinel_block_total`).
#[cfg(feature = "metrics")]
pub(crate) const REASONS: [&str; 6] = [
    "flow",
    "param_flow",
    "circuit_breaker",
    "system",
    "authority",
    "cluster",
];

/// What blocked: the reason's index in [`REASONS`], and the rule's kind within it (the
/// `kind` label of `sentinel_block_total`).
pub(crate) fn reason_of(error: &BlockError) -> (usize, &'static str) {
    match error {
        BlockError::Flow { rule, .. } => {
            let kind = match rule.grade {
                FlowGrade::Qps => "qps",
                FlowGrade::Thread => "concurrency",
            };
            (if rule.cluster_mode { 5 } else { 0 }, kind)
        }
        BlockError::ParamFlow { rule, .. } => (
            1,
            match rule.grade {
                ParamFlowGrade::Qps => "qps",
                ParamFlowGrade::Thread => "concurrency",
            },
        ),
        BlockError::CircuitBreaker { rule, .. } => (
            2,
            match rule.grade {
                DegradeGrade::SlowRequestRatio => "slow_ratio",
                DegradeGrade::ErrorRatio => "error_ratio",
                DegradeGrade::ErrorCount => "error_count",
            },
        ),
        BlockError::System { metric, .. } => (
            3,
            match metric {
                SystemMetric::Qps => "qps",
                SystemMetric::Concurrency => "concurrency",
                SystemMetric::AvgRt => "rt",
                SystemMetric::Load => "load",
                SystemMetric::CpuUsage => "cpu",
            },
        ),
        BlockError::Authority { rule, .. } => (
            4,
            match rule.strategy {
                AuthorityStrategy::White => "white",
                AuthorityStrategy::Black => "black",
            },
        ),
    }
}

/// The running counts behind [`BlockReasons`]: one line of counters per reason for each
/// stripe index (the thread leases of `stat::my_stripe`), written only when a call is
/// blocked, and made with the first block (most resources never see one). A thread that owns
/// its stripe index adds to its own line with a plain load and store (no locked instruction,
/// no cache line another core writes); the shared index adds atomically. Readers sum the
/// lines, so the counts stay exact.
#[derive(Debug, Default)]
pub(crate) struct BlockTally(OnceLock<Box<[TallyLine; STRIPES]>>);

/// One stripe index's counts, one per reason, on a cache line of its own.
#[repr(C, align(64))]
#[derive(Debug, Default)]
pub(crate) struct TallyLine([AtomicU64; 6]);

impl BlockTally {
    /// Counts `n` calls blocked by `error`.
    #[inline]
    pub(crate) fn add(&self, error: &BlockError, n: u64) {
        let (stripe, owned) = my_stripe();
        let lines = self.0.get_or_init(Box::default);
        let count = &lines[stripe.min(STRIPES - 1)].0[reason_of(error).0];
        if owned {
            // Only this thread writes the line.
            count.store(
                count.load(Ordering::Relaxed).wrapping_add(n),
                Ordering::Relaxed,
            );
        } else {
            count.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// The counts now.
    pub(crate) fn read(&self) -> BlockReasons {
        let [flow, param_flow, circuit_breaker, system, authority, cluster] =
            self.0.get().map_or([0; 6], |lines| {
                std::array::from_fn(|reason| {
                    lines
                        .iter()
                        .map(|line| line.0[reason].load(Ordering::Relaxed))
                        .fold(0u64, u64::wrapping_add)
                })
            });
        BlockReasons {
            flow,
            param_flow,
            circuit_breaker,
            system,
            authority,
            cluster,
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
            rule: RuleRef::new(FlowRule::qps("r", 1.0)),
        },
        RuleFamily::Degrade => BlockError::CircuitBreaker {
            resource,
            rule: Arc::new(DegradeRule::error_count("r", 1.0, 1)),
            retry_in: None,
        },
        RuleFamily::ParamFlow => BlockError::ParamFlow {
            resource,
            rule: Arc::new(ParamFlowRule::qps("r", 0, 1.0)),
            value: None,
        },
    }
}
