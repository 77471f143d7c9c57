//! Flow control: QPS and concurrency limits with reject, warm-up, rate-limiter and
//! warm-up + rate-limiter behaviours; direct, relate and chain strategies; per-origin limits.
//!
//! Semantics follow Sentinel 1.8. Like Sentinel, a QPS check reads the window and then counts
//! the pass, so with `n` threads racing on one resource a window may admit up to `n - 1`
//! calls over the threshold; a single thread never exceeds it.
//!
//! A concurrency (thread-grade) limit is exact, unlike Sentinel's: users read it as a
//! bulkhead, never more than N calls inside. A call reserves its place on the counted node
//! with one atomic add before it passes, gives it back when it exits (or when a later check
//! blocks it), and is blocked when the places held exceed the count. Calls that were already
//! in flight when the rule was loaded count through the node's concurrency. A relate rule
//! limits this resource by another resource's concurrency; nothing is reserved there, and
//! that check stays Sentinel's check-then-count. Rules of other grades pay nothing for this.
//!
//! A rule with `clusterMode: true` is accepted and validated as Sentinel validates it. With a
//! cluster backend installed its limit is shared by every replica ([`cluster`](crate::cluster)).
//! Without one, as Sentinel does without a reachable token service, such a rule is checked
//! locally when `fallbackToLocalWhenFail` is set (the default) and lets every call pass when it
//! is not ([`FlowRule::checked_locally`]).
//!
//! Where several shaping rules make one call queue, it waits for the longest of their waits
//! (Sentinel sleeps in each in turn, each measured from the end of the one before).

mod cluster;
mod concurrency;
mod controller;
mod golang;
pub(crate) mod manager;
mod rule;

pub(crate) use cluster::check_rules;
pub(crate) use concurrency::{release_reserved, RESERVED_ON_RESOURCE};
pub(crate) use golang::{
    into_go_flow_rule, into_go_isolation_rule, GoFlowRuleWire, GoIsolationRuleWire,
};
pub(crate) use manager::{plain_qps_passes, CheckContext, FlowRef, FlowTable, ResourceFlowRules};
pub(crate) use rule::FlowRuleWire;
pub use rule::{
    ClusterFlowConfig, ControlBehavior, FlowGrade, FlowRule, FlowStrategy, CONTEXT_DEFAULT_NAME,
    LIMIT_APP_DEFAULT, LIMIT_APP_OTHER,
};

#[cfg(test)]
mod tests;
