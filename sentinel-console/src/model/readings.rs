//! What the engine reads out besides resources: circuit breakers, system readings and
//! cluster flow control (`GET api/breakers`, `api/system`, `api/cluster`).

use serde::Serialize;

use crate::record::ClusterState;
use crate::state::State;

/// One circuit breaker.
#[derive(Debug, Clone, Serialize)]
pub struct Breaker {
    /// The resource.
    pub resource: String,
    /// `CLOSED`, `OPEN` or `HALF_OPEN`.
    pub state: String,
    /// `error ratio`, `error count` or `slow ratio`.
    pub strategy: &'static str,
    /// The threshold (ratio, count, or max RT in ms for the slow ratio).
    pub count: f64,
    /// The slow-call ratio threshold (slow ratio only).
    pub slow_ratio_threshold: f64,
    /// Seconds the breaker stays open.
    pub time_window: u32,
    /// Calls needed in a window before it may trip.
    pub min_request_amount: u32,
    /// The statistics window in ms.
    pub stat_interval_ms: u32,
}

/// System readings.
#[derive(Debug, Clone, Serialize)]
pub struct System {
    /// Whether checks are on (Sentinel's global switch).
    pub enabled: bool,
    /// The one-minute load average, once the engine reads it.
    pub load: Option<f64>,
    /// CPU usage in [0, 1], once the engine reads it.
    pub cpu: Option<f64>,
    /// Inbound passed QPS (all inbound calls).
    pub inbound_pass_qps: f64,
    /// Inbound blocked QPS.
    pub inbound_block_qps: f64,
    /// Inbound average RT in ms.
    pub inbound_avg_rt_ms: f64,
    /// Inbound calls in flight.
    pub inbound_concurrency: u64,
    /// The BBR capacity estimate the load check compares calls in flight with.
    pub bbr_capacity: f64,
    /// System rules in force.
    pub system_rules: usize,
}

/// Cluster flow control.
#[derive(Debug, Clone, Serialize)]
pub struct Cluster {
    /// Whether a cluster backend is configured.
    pub configured: bool,
    /// Flow rules in `clusterMode`.
    pub cluster_rules: usize,
    /// The backend's state from its events.
    pub state: ClusterState,
    /// Each cluster rule's lease and what the shared window has left, by `flowId`.
    pub flows: Vec<ClusterFlow>,
}

/// One cluster rule as the backend last reported it.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterFlow {
    /// `clusterConfig.flowId`.
    pub flow_id: i64,
    /// The rule's resource.
    pub resource: String,
    /// The limit of the whole cluster per window (`count` x live replicas for a per-instance
    /// threshold).
    pub limit: f64,
    /// Tokens this replica holds in its lease.
    pub lease: i64,
    /// Live replicas, last known.
    pub live_replicas: u32,
    /// Admitted across the cluster in the current window (the limit less what is left), once
    /// the backend reported.
    pub admitted: Option<f64>,
    /// Whether the rule's checks are degraded to local ones.
    pub degraded: bool,
}

impl State {
    pub(crate) fn breakers(&self) -> Vec<Breaker> {
        let mut breakers: Vec<Breaker> = self
            .sentinel
            .circuit_breakers()
            .into_iter()
            .map(|(rule, state)| Breaker {
                strategy: crate::record::strategy(&rule),
                state: state.to_string(),
                count: rule.count,
                slow_ratio_threshold: rule.slow_ratio_threshold,
                time_window: rule.time_window,
                min_request_amount: rule.min_request_amount,
                stat_interval_ms: rule.stat_interval_ms,
                resource: rule.resource,
            })
            .collect();
        breakers.sort_by(|a, b| a.resource.cmp(&b.resource));
        breakers
    }

    pub(crate) fn system(&self) -> System {
        let inbound = self.sentinel.inbound_stats();
        let readings = self.sentinel.system_readings();
        System {
            enabled: self.sentinel.is_enabled(),
            load: readings.map(|r| r.0),
            cpu: readings.map(|r| r.1),
            inbound_pass_qps: inbound.pass_qps,
            inbound_block_qps: inbound.block_qps,
            inbound_avg_rt_ms: inbound.avg_rt_ms,
            inbound_concurrency: inbound.concurrency,
            bbr_capacity: self.sentinel.system_capacity(),
            system_rules: self.sentinel.system_rules().rules().len(),
        }
    }

    pub(crate) fn cluster(&self) -> Cluster {
        Cluster {
            configured: self.sentinel.has_cluster_backend(),
            cluster_rules: self
                .sentinel
                .flow_rules()
                .rules()
                .iter()
                .filter(|r| r.cluster_mode)
                .count(),
            state: self.recorder.cluster(),
            flows: self
                .sentinel
                .cluster_slots()
                .iter()
                .map(|slot| {
                    let spec = slot.spec();
                    let live = slot.live_replicas();
                    let per_window = spec.count * f64::from(spec.window_ms) / 1000.0;
                    let limit = if spec.global {
                        per_window
                    } else {
                        per_window * f64::from(live)
                    };
                    ClusterFlow {
                        flow_id: spec.flow_id,
                        resource: spec.resource.clone(),
                        limit,
                        lease: slot.tokens(),
                        live_replicas: live,
                        admitted: slot
                            .window_left()
                            .map(|left| (limit - left as f64).max(0.0)),
                        degraded: slot.is_degraded(),
                    }
                })
                .collect(),
        }
    }
}
