//! Flow control: QPS and concurrency limits with reject, warm-up, rate-limiter and
//! warm-up + rate-limiter behaviours; direct, relate and chain strategies; per-origin limits.
//!
//! Semantics follow Sentinel 1.8. Like Sentinel, a QPS check reads the window and then counts
//! the pass, so with `n` threads racing on one resource a window may admit up to `n - 1`
//! calls over the threshold; a single thread never exceeds it.
//!
//! A rule with `clusterMode: true` is accepted and validated as Sentinel validates it. There is
//! no cluster token server in this crate, so, as Sentinel does without a reachable token
//! service, such a rule is checked locally when `fallbackToLocalWhenFail` is set (the default)
//! and lets every call pass when it is not ([`FlowRule::checked_locally`]).
//!
//! Where several shaping rules make one call queue, it waits for the longest of their waits
//! (Sentinel sleeps in each in turn, each measured from the end of the one before).

mod controller;
pub(crate) mod manager;
mod rule;

pub(crate) use manager::{plain_qps_passes, CheckContext, FlowTable, ResourceFlowRules};
pub(crate) use rule::FlowRuleWire;
pub use rule::{
    ClusterFlowConfig, ControlBehavior, FlowGrade, FlowRule, FlowStrategy, LIMIT_APP_DEFAULT,
    LIMIT_APP_OTHER,
};

#[cfg(test)]
mod tests;
