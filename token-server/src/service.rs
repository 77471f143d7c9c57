//! The decisions: [`TokenService`] answers token requests, [`RedisTokenService`] answers them
//! from the Redis budget that `sentinel-cluster-redis` keeps per `flowId`.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Weak};

use arc_swap::ArcSwap;
use sentinel_cluster_redis::{ClusterStatus, RedisClusterBackend};
use sentinel_core::cluster::{ClusterBackend, ClusterDecision, ClusterRuleSpec, ClusterSlot};
use sentinel_core::flow::{FlowGrade, FlowRule};
use sentinel_core::RuleFamily;
use sentinel_core::{Sentinel, SentinelEvent};

use crate::protocol::{ParamValue, Status};
use crate::stats::FlowCounts;

/// A token request's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenResult {
    /// The status the client receives.
    pub status: Status,
    /// What the window has left, as far as the server knows (informational: the Java client
    /// only logs it).
    pub remaining: i32,
    /// How long a [`Status::SHOULD_WAIT`] call waits, in ms.
    pub wait_in_ms: i32,
}

impl TokenResult {
    /// A result with no data (`remaining` and `waitInMs` 0, as Sentinel's server sends for
    /// every status but OK and SHOULD_WAIT).
    pub fn of(status: Status) -> Self {
        Self {
            status,
            remaining: 0,
            wait_in_ms: 0,
        }
    }
}

/// Whether the server can decide.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Health {
    /// Decisions come from the shared budget.
    Up,
    /// Not yet connected to the store.
    Starting,
    /// The store is unreachable: rules with `fallbackToLocalWhenFail` are decided on this
    /// server's share, the others answer FAIL (the client falls back as its rule says).
    Degraded(String),
}

/// What answers token requests. Called on the connection's task: it must not block.
pub trait TokenService: Send + Sync + fmt::Debug + 'static {
    /// A `FLOW` request: `count` tokens of rule `flow_id`.
    fn request_token(&self, flow_id: i64, count: i32, prioritized: bool) -> TokenResult;

    /// A `PARAM_FLOW` request: `count` tokens of param-flow rule `flow_id` for `params`.
    fn request_param_token(&self, flow_id: i64, count: i32, params: &[ParamValue]) -> TokenResult;

    /// Whether decisions are live.
    fn health(&self) -> Health;

    /// The cluster flow rules served, with their last second's decisions: what the
    /// dashboard's cluster pages show. None by default.
    fn served_flows(&self) -> Vec<ServedFlow> {
        Vec::new()
    }
}

/// A cluster flow rule a [`TokenService`] serves, and its decisions in the last whole second.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ServedFlow {
    /// The rule's `clusterConfig.flowId`.
    pub flow_id: i64,
    /// The rule.
    pub rule: FlowRule,
    /// Requests answered OK in the last whole second.
    pub pass_qps: u64,
    /// Requests answered BLOCKED in the last whole second.
    pub block_qps: u64,
}

impl ServedFlow {
    /// `rule`, served as `flow_id`, with no decisions counted.
    pub fn new(flow_id: i64, rule: FlowRule) -> Self {
        Self {
            flow_id,
            rule,
            pass_qps: 0,
            block_qps: 0,
        }
    }

    /// With the last second's decisions.
    pub fn with_qps(mut self, pass_qps: u64, block_qps: u64) -> Self {
        self.pass_qps = pass_qps;
        self.block_qps = block_qps;
        self
    }
}

/// A flow served: its budget, its rule and its counts.
struct Served {
    slot: Arc<ClusterSlot>,
    rule: FlowRule,
    counts: Arc<FlowCounts>,
}

/// Sentinel's request check (`DefaultTokenService.notValidRequest`): a `flowId` and a count
/// that are positive.
fn valid(flow_id: i64, count: i32) -> bool {
    flow_id > 0 && count > 0
}

/// What [`RedisTokenService::apply_flow_rules`] did with a rule list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RulesApplied {
    /// The `flowId`s now served.
    pub flow_ids: Vec<i64>,
    /// Cluster rules not served, each with why (index in the list, resource, reason).
    pub skipped: Vec<String>,
}

/// Decisions from the Redis budget of `sentinel-cluster-redis`: one shared limit per
/// `flowId`, for every token server and every Rust replica on the same Redis (and prefix).
///
/// Each token server is one replica of the backend: it leases tokens from Redis and answers
/// from its lease (no Redis round trip per request), so any number of servers share one
/// limit exactly as Rust replicas do. Killing a server loses at most its current lease for
/// the rest of that window (under-admission), never admits twice.
pub struct RedisTokenService {
    backend: RedisClusterBackend,
    flows: ArcSwap<HashMap<i64, Served>>,
}

impl fmt::Debug for RedisTokenService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisTokenService")
            .field("backend", &self.backend)
            .field("flows", &self.flows.load().len())
            .finish_non_exhaustive()
    }
}

impl RedisTokenService {
    /// A service deciding through `backend`, with no rules yet.
    pub fn new(backend: RedisClusterBackend) -> Self {
        Self {
            backend,
            flows: ArcSwap::from_pointee(HashMap::new()),
        }
    }

    /// The backend (for its status and counters).
    pub fn backend(&self) -> &RedisClusterBackend {
        &self.backend
    }

    /// Serves the cluster rules among `rules` (`clusterMode: true`), replacing the ones
    /// served before; a rule equal to a served one keeps its lease. Only global QPS rules
    /// (`thresholdType` 1) can be served (Sentinel 1.8.9's protocol has no concurrency
    /// request, and an average-per-client threshold needs every client counted by one server),
    /// one per `flowId` (the first wins), with a window the backend serves; the others are
    /// skipped and reported, and their requests answered NO_RULE_EXISTS (the client then falls
    /// back to its own rule).
    pub fn apply_flow_rules(&self, rules: &[FlowRule]) -> RulesApplied {
        let mut report = RulesApplied::default();
        let mut specs: Vec<ClusterRuleSpec> = Vec::new();
        let mut served_rules: HashMap<i64, FlowRule> = HashMap::new();
        for (index, rule) in rules.iter().enumerate() {
            let Some(spec) = ClusterRuleSpec::of(rule) else {
                continue;
            };
            let skip = |why: String| format!("rule {index} ({}): {why}", rule.resource);
            if rule.grade != FlowGrade::Qps {
                report.skipped.push(skip(
                    "a thread-grade cluster rule has no request in Sentinel 1.8.9's protocol"
                        .into(),
                ));
                continue;
            }
            if !spec.global {
                // Sentinel's server multiplies `count` by the Java clients connected in the
                // namespace; the budget here is shared with servers and Rust replicas that see
                // other clients, so no server can compute that product for all: refused
                // (NO_RULE_EXISTS, so each client falls back to its rule, per instance).
                report.skipped.push(skip(
                    "clusterConfig.thresholdType 0 (average per client) is not served: use 1 \
                     (global)"
                        .into(),
                ));
                continue;
            }
            if specs.iter().any(|s| s.flow_id == spec.flow_id) {
                report.skipped.push(skip(format!(
                    "clusterConfig.flowId {} is already served by an earlier rule",
                    spec.flow_id
                )));
                continue;
            }
            if let Err((field, message)) = self.backend.check_spec(&spec) {
                report.skipped.push(skip(format!("{field}: {message}")));
                continue;
            }
            served_rules.insert(spec.flow_id, rule.clone());
            specs.push(spec);
        }
        let slots = self.backend.register(&specs);
        let before = self.flows.load();
        let table: HashMap<i64, Served> = slots
            .into_iter()
            .filter_map(|slot| {
                let flow_id = slot.spec().flow_id;
                let rule = served_rules.remove(&flow_id)?;
                // A flow served before keeps its counts.
                let counts = before
                    .get(&flow_id)
                    .map_or_else(Arc::default, |served| served.counts.clone());
                Some((flow_id, Served { slot, rule, counts }))
            })
            .collect();
        report.flow_ids = specs.iter().map(|s| s.flow_id).collect();
        for why in &report.skipped {
            tracing::warn!(rule = %why, "token server: cluster rule not served");
        }
        tracing::info!(flow_ids = ?report.flow_ids, "token server: cluster flow rules applied");
        self.flows.store(Arc::new(table));
        report
    }

    /// Serves the cluster rules of `sentinel`'s flow rules, now and after every change (from
    /// `load_rules` or any data source started on it). The listener holds the service and the
    /// engine weakly.
    pub fn follow(self: &Arc<Self>, sentinel: &Sentinel) -> RulesApplied {
        let report = self.apply_flow_rules(&sentinel.flow_rules().rules());
        let service: Weak<Self> = Arc::downgrade(self);
        let engine = sentinel.downgrade();
        sentinel.add_listener(move |event: &SentinelEvent| {
            let SentinelEvent::RulesApplied { families, .. } = event else {
                return;
            };
            if !families.iter().any(|(f, _)| *f == RuleFamily::Flow) {
                return;
            }
            if let (Some(service), Some(engine)) = (service.upgrade(), engine.upgrade()) {
                service.apply_flow_rules(&engine.flow_rules().rules());
            }
        });
        report
    }
}

impl TokenService for RedisTokenService {
    fn request_token(&self, flow_id: i64, count: i32, _prioritized: bool) -> TokenResult {
        if !valid(flow_id, count) {
            return TokenResult::of(Status::BAD_REQUEST);
        }
        let flows = self.flows.load();
        let Some(served) = flows.get(&flow_id) else {
            return TokenResult::of(Status::NO_RULE_EXISTS);
        };
        let slot = &served.slot;
        let n = u32::try_from(count).unwrap_or(u32::MAX);
        let decision = self.backend.try_acquire(slot, n);
        if matches!(decision, ClusterDecision::Pass | ClusterDecision::Block) {
            served.counts.record(
                slot.clock().now_ms(),
                matches!(decision, ClusterDecision::Pass),
            );
        }
        match decision {
            ClusterDecision::Pass => TokenResult {
                status: Status::OK,
                remaining: slot
                    .window_left()
                    .map_or(0, |left| i32::try_from(left.max(0)).unwrap_or(i32::MAX)),
                wait_in_ms: 0,
            },
            // A prioritized call is not queued into the next window: the budget lives in
            // Redis windows that no server can borrow from (blocked, as without priority).
            ClusterDecision::Block => TokenResult::of(Status::BLOCKED),
            _ => TokenResult::of(Status::FAIL),
        }
    }

    fn request_param_token(&self, flow_id: i64, count: i32, params: &[ParamValue]) -> TokenResult {
        if !valid(flow_id, count) || params.is_empty() {
            return TokenResult::of(Status::BAD_REQUEST);
        }
        // Cluster param-flow rules are not served yet: Sentinel's answer for a flowId it has
        // no rule for (the client then falls back as its rule says).
        TokenResult::of(Status::NO_RULE_EXISTS)
    }

    fn health(&self) -> Health {
        match self.backend.status() {
            ClusterStatus::Live => Health::Up,
            ClusterStatus::Connecting => Health::Starting,
            other => Health::Degraded(format!("{other:?}")),
        }
    }

    fn served_flows(&self) -> Vec<ServedFlow> {
        let flows = self.flows.load();
        let mut all: Vec<ServedFlow> = flows
            .iter()
            .map(|(flow_id, served)| {
                let (pass, block) = served.counts.last_second(served.slot.clock().now_ms());
                ServedFlow::new(*flow_id, served.rule.clone()).with_qps(pass, block)
            })
            .collect();
        all.sort_by_key(|f| f.flow_id);
        all
    }
}
