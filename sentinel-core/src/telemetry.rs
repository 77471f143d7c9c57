//! The `metrics` feature: what the engine reports through the `metrics` facade (the
//! application installs the recorder and exporter; the library never does).
//!
//! | name | type | labels | what |
//! |---|---|---|---|
//! | `sentinel_pass_total` | counter | `resource` | calls that passed every check |
//! | `sentinel_block_total` | counter | `resource`, `reason`, `kind` | blocked calls: `reason` is `flow`, `param_flow`, `circuit_breaker`, `system`, `authority` or `cluster` (a flow rule in cluster mode); `kind` the rule's kind (`qps`, `concurrency`; `slow_ratio`, `error_ratio`, `error_count`; `rt`, `load`, `cpu`; `white`, `black`) |
//! | `sentinel_shadow_block_total` | counter | `resource`, `reason`, `kind` | calls a shadow rule would have blocked (they passed; see [`crate::shadow`]), labelled as `sentinel_block_total` |
//! | `sentinel_error_total` | counter | `resource` | completed calls that recorded an error |
//! | `sentinel_concurrency` | gauge | `resource` | calls in flight |
//! | `sentinel_rt_seconds` | histogram | `resource` | response time of completed calls |
//! | `sentinel_circuit_breaker_state` | gauge | `resource`, `grade` | 0 closed, 1 open, 2 half-open, set at each transition |
//! | `sentinel_circuit_breaker_transitions_total` | counter | `resource`, `grade`, `from`, `to` | breaker transitions |
//! | `sentinel_rules_applied_total` | counter | `source` | updates applied, per rule source (`api` or a data source's name) |
//! | `sentinel_rules_rejected_total` | counter | `source` | payloads rejected (the last good rules stayed) |
//! | `sentinel_rules_last_applied_timestamp_seconds` | gauge | `source` | when the source's last update was applied (Unix time) |
//! | `sentinel_active_rules` | gauge | `family` | active rules per family, over every source |
//! | `sentinel_rules_version` | gauge | | the rule-table version |
//! | `sentinel_datasource_connected` | gauge | `source` | 1 while the data source's store answers |
//! | `sentinel_datasource_revision` | gauge | `source` | the store revision last processed, where it is a number (etcd, NATS, Redis digests and Nacos MD5s are not) |
//! | `sentinel_datasource_disconnects_total` | counter | `source` | times the data source lost its store |
//! | `sentinel_datasource_store_rejected` | gauge | `source` | 1 while the payload the store holds is rejected (the source runs on its snapshot's rules, or none) |
//! | `sentinel_datasource_rejected_total` | counter | `source` | payloads from the store the data source rejected |
//!
//! Per-resource series are registered when a resource is first entered (install the
//! recorder before that), so cardinality follows the resource cap
//! ([`Limits::max_resources`](crate::Limits)); no label carries an origin or a parameter
//! value. The counters and the concurrency gauge are updated on every call (a shared atomic
//! each: what the recorder's handles cost), the histogram on every completion; a blocked call
//! looks its series up once per reason and kind.

use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::block::{reason_of, BlockError, REASONS};
use crate::circuit_breaker::{BreakerState, DegradeGrade};
use crate::events::{EventListener, SentinelEvent};

/// Every (reason, kind) pair `sentinel_block_total` can carry, by reason index.
const KINDS: [(usize, &str); 15] = [
    (0, "qps"),
    (0, "concurrency"),
    (1, "qps"),
    (1, "concurrency"),
    (2, "slow_ratio"),
    (2, "error_ratio"),
    (2, "error_count"),
    (3, "qps"),
    (3, "concurrency"),
    (3, "rt"),
    (3, "load"),
    (3, "cpu"),
    (4, "white"),
    (4, "black"),
    (5, "qps"),
];

/// One resource's series, registered once so that the hot path only updates handles.
#[derive(Debug)]
pub(crate) struct NodeMetrics {
    resource: String,
    pub(crate) pass: metrics::Counter,
    pub(crate) error: metrics::Counter,
    pub(crate) concurrency: metrics::Gauge,
    pub(crate) rt: metrics::Histogram,
    /// `sentinel_block_total` per entry of [`KINDS`], registered on the first such block.
    blocks: [OnceLock<metrics::Counter>; KINDS.len()],
    /// `sentinel_shadow_block_total`, the same way.
    shadow_blocks: [OnceLock<metrics::Counter>; KINDS.len()],
}

impl NodeMetrics {
    pub(crate) fn new(resource: &str) -> Self {
        let label = resource.to_owned();
        Self {
            pass: metrics::counter!("sentinel_pass_total", "resource" => label.clone()),
            error: metrics::counter!("sentinel_error_total", "resource" => label.clone()),
            concurrency: metrics::gauge!("sentinel_concurrency", "resource" => label.clone()),
            rt: metrics::histogram!("sentinel_rt_seconds", "resource" => label.clone()),
            blocks: Default::default(),
            shadow_blocks: Default::default(),
            resource: label,
        }
    }

    /// Counts `n` calls blocked by `error`.
    pub(crate) fn blocked(&self, error: &BlockError, n: u64) {
        let (reason, kind) = reason_of(error);
        self.count(false, reason, kind, n);
    }

    /// Counts `n` calls a shadow rule would have blocked, with `reason_of`'s labels.
    pub(crate) fn shadow_blocked(&self, reason: usize, kind: &'static str, n: u64) {
        self.count(true, reason, kind, n);
    }

    fn count(&self, shadow: bool, reason: usize, kind: &'static str, n: u64) {
        let Some(index) = KINDS.iter().position(|k| *k == (reason, kind)) else {
            return;
        };
        let (series, name) = if shadow {
            (&self.shadow_blocks, "sentinel_shadow_block_total")
        } else {
            (&self.blocks, "sentinel_block_total")
        };
        series[index]
            .get_or_init(|| {
                metrics::counter!(
                    name,
                    "resource" => self.resource.clone(),
                    "reason" => REASONS[reason],
                    "kind" => kind
                )
            })
            .increment(n);
    }
}

fn state_name(state: BreakerState) -> &'static str {
    match state {
        BreakerState::Closed => "closed",
        BreakerState::Open => "open",
        BreakerState::HalfOpen => "half_open",
    }
}

fn grade_name(grade: DegradeGrade) -> &'static str {
    match grade {
        DegradeGrade::SlowRequestRatio => "slow_ratio",
        DegradeGrade::ErrorRatio => "error_ratio",
        DegradeGrade::ErrorCount => "error_count",
    }
}

/// Turns the engine's events into the breaker and rule-source series; every engine built
/// with the feature has one.
#[derive(Debug)]
pub(crate) struct MetricsListener;

impl EventListener for MetricsListener {
    fn on_event(&self, event: &SentinelEvent) {
        match event {
            SentinelEvent::BreakerStateChanged {
                resource,
                rule,
                from,
                to,
                ..
            } => {
                let grade = grade_name(rule.grade);
                metrics::gauge!(
                    "sentinel_circuit_breaker_state",
                    "resource" => resource.clone(),
                    "grade" => grade
                )
                .set(f64::from(*to as u8));
                metrics::counter!(
                    "sentinel_circuit_breaker_transitions_total",
                    "resource" => resource.clone(),
                    "grade" => grade,
                    "from" => state_name(*from),
                    "to" => state_name(*to)
                )
                .increment(1);
            }
            SentinelEvent::RulesApplied {
                source,
                families,
                version,
                ..
            } => {
                metrics::counter!("sentinel_rules_applied_total", "source" => source.clone())
                    .increment(1);
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0.0, |d| d.as_secs_f64());
                metrics::gauge!(
                    "sentinel_rules_last_applied_timestamp_seconds",
                    "source" => source.clone()
                )
                .set(now);
                for (family, active) in families {
                    metrics::gauge!("sentinel_active_rules", "family" => family.as_str())
                        .set(*active as f64);
                }
                metrics::gauge!("sentinel_rules_version").set(*version as f64);
            }
            SentinelEvent::RulesRejected { source, .. } => {
                metrics::counter!("sentinel_rules_rejected_total", "source" => source.clone())
                    .increment(1);
            }
            _ => {}
        }
    }
}
