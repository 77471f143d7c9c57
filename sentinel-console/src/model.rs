//! The JSON the API serves and the page renders, built from what the engine exposes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use sentinel_core::datasource::SourceStatus;
use sentinel_core::series::MetricRow;
use sentinel_core::{BlockReasons, RuleFamily};
use serde::{Deserialize, Serialize};

use crate::record::{ClusterState, Issue, RuleEvent, Transition};
use crate::State;

/// The seconds a sparkline covers.
pub const SPARK_SECONDS: usize = 60;

/// A column the resources table sorts by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SortKey {
    /// The resource name.
    Resource,
    /// Passed calls in the last second.
    #[default]
    Pass,
    /// Blocked calls in the last second.
    Block,
    /// Completed calls in the last second.
    Success,
    /// Calls that failed (exceptions) in the last second.
    Error,
    /// Average response time in the last second.
    Rt,
    /// Calls in flight.
    Concurrency,
    /// Blocks since the resource was first entered.
    Blocked,
}

/// The resources table's query: `GET api/resources?q=order&sort=pass&desc=true&limit=50`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default)]
pub struct ResourceQuery {
    /// Only resources whose name contains this (case-insensitive).
    pub q: String,
    /// The column to sort by.
    pub sort: SortKey,
    /// Descending (the default) or ascending.
    pub desc: bool,
    /// How many rows to return (top-N, at most the console's cap).
    pub limit: usize,
}

impl Default for ResourceQuery {
    fn default() -> Self {
        Self {
            q: String::new(),
            sort: SortKey::Pass,
            desc: true,
            limit: 50,
        }
    }
}

/// Block counts by family.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Blocks {
    /// Flow rules.
    pub flow: u64,
    /// Hot-parameter rules.
    pub param_flow: u64,
    /// Circuit breakers.
    pub circuit_breaker: u64,
    /// System rules.
    pub system: u64,
    /// Authority rules.
    pub authority: u64,
    /// Cluster flow control.
    pub cluster: u64,
}

impl From<BlockReasons> for Blocks {
    fn from(b: BlockReasons) -> Self {
        Self {
            flow: b.flow,
            param_flow: b.param_flow,
            circuit_breaker: b.circuit_breaker,
            system: b.system,
            authority: b.authority,
            cluster: b.cluster,
        }
    }
}

/// One row of the resources table: the newest collected second of one resource.
#[derive(Debug, Clone, Serialize)]
pub struct ResourceRow {
    /// The resource.
    pub resource: String,
    /// Passed calls in the second (QPS).
    pub pass: u64,
    /// Blocked calls in the second.
    pub block: u64,
    /// Completed calls in the second.
    pub success: u64,
    /// Failed calls (exceptions) in the second.
    pub error: u64,
    /// Average response time of the second's completed calls, in ms.
    pub avg_rt_ms: f64,
    /// Calls in flight when the second was collected.
    pub concurrency: u64,
    /// The second's blocks by family.
    pub blocks: Blocks,
    /// Blocks by family since the resource was first entered.
    pub blocks_total: Blocks,
    /// Passed calls per second over the last 60 seconds, oldest first.
    pub spark_pass: Vec<u64>,
    /// Blocked calls per second over the same seconds.
    pub spark_block: Vec<u64>,
}

/// The resources table.
#[derive(Debug, Clone, Serialize)]
pub struct Resources {
    /// The second the rows show (Unix epoch ms of its start), if one was collected.
    pub second_ms: Option<u64>,
    /// The same second on the engine's clock (what `Sentinel::resource_seconds` takes).
    pub engine_second_ms: Option<u64>,
    /// Resources with statistics.
    pub total: usize,
    /// Resources matching the search.
    pub matched: usize,
    /// The query answered (with the limit as capped).
    pub query: ResourceQuery,
    /// The top rows.
    pub rows: Vec<ResourceRow>,
}

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

/// One data source, its status and whether the console may edit its store.
#[derive(Debug, Clone, Serialize)]
pub struct Source {
    /// The source's name.
    pub name: String,
    /// True while the backend answers.
    pub connected: bool,
    /// True once closed.
    pub closed: bool,
    /// The backend revision of the last payload processed.
    pub revision: Option<String>,
    /// Hex SHA-256 of the last payload processed.
    pub hash: Option<String>,
    /// When rules from it were last applied (Unix epoch ms).
    pub last_applied_ms: Option<u64>,
    /// The rule-table version after its last apply.
    pub rules_version: Option<u64>,
    /// Why the last read, watch or payload failed.
    pub last_error: Option<String>,
    /// Payloads applied, rejected, unchanged.
    pub applied: u64,
    /// Payloads rejected.
    pub rejected: u64,
    /// Payloads that were the same as the last one.
    pub unchanged: u64,
    /// Times the connection was lost.
    pub disconnects: u64,
    /// Logins again after an expired or revoked token.
    pub reauthentications: u64,
    /// The families it owns.
    pub families: Vec<String>,
    /// Rules skipped in lenient mode, with index and field.
    pub skipped: Vec<Issue>,
    /// True when the rules in force came from the local snapshot file.
    pub from_snapshot: bool,
    /// The last rejection's issues (index, field), if the console saw one.
    pub last_rejection: Option<RuleEvent>,
    /// What the console writes to when editing, if this source is editable.
    pub writer: Option<String>,
    /// How many shadow rules it supplies.
    pub shadow_rules: usize,
}

impl Source {
    pub(crate) fn of(
        status: &SourceStatus,
        last_rejection: Option<RuleEvent>,
        writer: Option<String>,
    ) -> Self {
        Self {
            name: status.name.clone(),
            connected: status.connected,
            closed: status.closed,
            revision: status.last_revision.clone(),
            hash: status.last_hash.clone(),
            last_applied_ms: status.last_applied_at.and_then(|t| {
                t.duration_since(UNIX_EPOCH)
                    .ok()
                    .and_then(|d| u64::try_from(d.as_millis()).ok())
            }),
            rules_version: status.rules_version,
            last_error: status.last_error.clone(),
            applied: status.applied_count,
            rejected: status.rejected_count,
            unchanged: status.unchanged_count,
            disconnects: status.disconnects,
            reauthentications: status.reauthentications,
            families: status.families.iter().map(RuleFamily::to_string).collect(),
            skipped: status.skipped.iter().map(Issue::from).collect(),
            from_snapshot: status.from_snapshot,
            last_rejection,
            writer,
            shadow_rules: status.shadow_rules,
        }
    }
}

/// The rules one source contributes.
#[derive(Debug, Clone, Serialize)]
pub struct SourceRules {
    /// The source (`api` for `load_rules` calls).
    pub source: String,
    /// Active rules per family this source carries.
    pub counts: Vec<(String, usize)>,
    /// The rules as a combined Sentinel JSON document, `{"flow": [...], ...}`.
    pub document: serde_json::Value,
}

/// Every rule in force, by source.
#[derive(Debug, Clone, Serialize)]
pub struct Rules {
    /// The rule-table version.
    pub version: u64,
    /// Active rules per family, over every source.
    pub active: Vec<(String, usize)>,
    /// Each source's part.
    pub sources: Vec<SourceRules>,
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

/// Everything the page shows, as one document: `GET api/snapshot` and each server-sent
/// `snapshot` event.
#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    /// When this was built (Unix epoch ms).
    pub now_ms: u64,
    /// The rule-table version (the page asks `api/rules` again when it changes).
    pub rules_version: u64,
    /// Whether editing is on.
    pub editing: bool,
    /// The resources table.
    pub resources: Resources,
    /// Every circuit breaker.
    pub breakers: Vec<Breaker>,
    /// Breaker transitions, newest first.
    pub timeline: Vec<Transition>,
    /// The data sources.
    pub sources: Vec<Source>,
    /// Rule applies and rejections, newest first.
    pub rule_events: Vec<RuleEvent>,
    /// System readings.
    pub system: System,
    /// Cluster flow control.
    pub cluster: Cluster,
    /// Shadow rules and their would-blocks.
    pub shadow: Vec<crate::shadow::ShadowRow>,
}

/// How many transitions and rule events a snapshot carries.
const EVENTS_IN_SNAPSHOT: usize = 50;

impl State {
    /// The resources table for `query`: every resource's newest collected second, filtered,
    /// sorted, the top `limit` with their sparklines.
    pub(crate) fn resources(&self, query: &ResourceQuery) -> Resources {
        let mut query = query.clone();
        query.limit = query.limit.clamp(1, self.max_rows);
        let newest = self.series.newest_second();
        let names = self.sentinel.resources();
        let total = names.len();
        let rows: HashMap<Arc<str>, MetricRow> = match newest {
            Some(second) => self
                .series
                .rows(second, second + 1000, None)
                .into_iter()
                .map(|r| (r.resource.clone(), r))
                .collect(),
            None => HashMap::new(),
        };
        let needle = query.q.to_lowercase();
        let mut matched: Vec<(String, Option<&MetricRow>, u64)> = names
            .into_iter()
            .filter(|n| needle.is_empty() || n.to_lowercase().contains(&needle))
            .map(|n| {
                let row = rows.get(n.as_str());
                let blocked = if query.sort == SortKey::Blocked {
                    self.sentinel.block_reasons(&n).map_or(0, |b| b.total())
                } else {
                    0
                };
                (n, row, blocked)
            })
            .collect();
        let count = matched.len();
        let key = query.sort;
        let value = |row: Option<&MetricRow>, blocked: u64| -> f64 {
            let Some(r) = row else {
                return if key == SortKey::Blocked {
                    blocked as f64
                } else {
                    0.0
                };
            };
            match key {
                SortKey::Pass => r.stats.pass as f64,
                SortKey::Block => r.stats.block as f64,
                SortKey::Success => r.stats.success as f64,
                SortKey::Error => r.stats.error as f64,
                SortKey::Rt => r.stats.avg_rt_ms(),
                SortKey::Concurrency => r.concurrency as f64,
                SortKey::Blocked => blocked as f64,
                SortKey::Resource => 0.0,
            }
        };
        matched.sort_by(|a, b| {
            let order = if key == SortKey::Resource {
                a.0.cmp(&b.0)
            } else {
                value(a.1, a.2).total_cmp(&value(b.1, b.2))
            };
            let order = if query.desc { order.reverse() } else { order };
            // Ties in name order, whichever the direction.
            order.then_with(|| a.0.cmp(&b.0))
        });
        let rows = matched
            .into_iter()
            .take(query.limit)
            .map(|(name, row, _)| self.row(name, row, newest))
            .collect();
        Resources {
            second_ms: newest.map(|s| self.recorder.to_epoch(s)),
            engine_second_ms: newest,
            total,
            matched: count,
            query,
            rows,
        }
    }

    fn row(&self, name: String, row: Option<&MetricRow>, newest: Option<u64>) -> ResourceRow {
        let mut spark_pass = vec![0; SPARK_SECONDS];
        let mut spark_block = vec![0; SPARK_SECONDS];
        if let Some(newest) = newest {
            let from = newest.saturating_sub(1000 * (SPARK_SECONDS as u64 - 1));
            for s in self.sentinel.resource_seconds(&name, from, newest + 1000) {
                // The newest second is the last point, whatever the clock's origin.
                let ago = (newest.saturating_sub(s.second_ms) / 1000) as usize;
                if let Some(i) = (SPARK_SECONDS - 1).checked_sub(ago) {
                    spark_pass[i] = s.pass;
                    spark_block[i] = s.block;
                }
            }
        }
        let blocks_total = self
            .sentinel
            .block_reasons(&name)
            .map(Blocks::from)
            .unwrap_or_default();
        let (pass, block, success, error, avg_rt_ms, concurrency, blocks) = match row {
            Some(r) => (
                r.stats.pass,
                r.stats.block,
                r.stats.success,
                r.stats.error,
                r.stats.avg_rt_ms(),
                r.concurrency,
                Blocks::from(r.blocks),
            ),
            None => (0, 0, 0, 0, 0.0, 0, Blocks::default()),
        };
        ResourceRow {
            resource: name,
            pass,
            block,
            success,
            error,
            avg_rt_ms,
            concurrency,
            blocks,
            blocks_total,
            spark_pass,
            spark_block,
        }
    }

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

    pub(crate) fn sources(&self) -> Vec<Source> {
        self.sources
            .iter()
            .map(|rx| {
                let status = rx.borrow().clone();
                let rejection = self.recorder.last_rejection(&status.name);
                let writer = self
                    .editing
                    .as_ref()
                    .and_then(|e| e.writers.get(&status.name))
                    .map(|w| w.writer.describe());
                Source::of(&status, rejection, writer)
            })
            .collect()
    }

    pub(crate) fn rules(&self) -> Rules {
        let active = self.sentinel.active_rules();
        let counts = vec![
            ("flow".to_owned(), active.flow.len()),
            ("degrade".to_owned(), active.degrade.len()),
            ("system".to_owned(), active.system.len()),
            ("authority".to_owned(), active.authority.len()),
            ("paramFlow".to_owned(), active.param_flow.len()),
        ];
        let sources = self
            .sentinel
            .rules_by_source()
            .into_iter()
            .map(|(source, set)| {
                let counts = [
                    ("flow", set.flow.as_ref().map(Vec::len)),
                    ("degrade", set.degrade.as_ref().map(Vec::len)),
                    ("system", set.system.as_ref().map(Vec::len)),
                    ("authority", set.authority.as_ref().map(Vec::len)),
                    ("paramFlow", set.param_flow.as_ref().map(Vec::len)),
                ]
                .into_iter()
                .filter_map(|(f, n)| n.map(|n| (f.to_owned(), n)))
                .collect();
                let document = set
                    .to_combined_json()
                    .ok()
                    .and_then(|bytes| serde_json::from_slice(&bytes).ok())
                    .unwrap_or(serde_json::Value::Null);
                SourceRules {
                    source,
                    counts,
                    document,
                }
            })
            .collect();
        Rules {
            version: active.version,
            active: counts,
            sources,
        }
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

    /// Everything, for one refresh of the page.
    pub(crate) fn snapshot(&self, query: &ResourceQuery) -> Snapshot {
        self.series.collect(&self.sentinel);
        Snapshot {
            now_ms: crate::record::epoch_ms(),
            rules_version: self.sentinel.rules_version(),
            editing: self.editing.is_some(),
            resources: self.resources(query),
            breakers: self.breakers(),
            timeline: self.recorder.transitions(EVENTS_IN_SNAPSHOT),
            sources: self.sources(),
            rule_events: self.recorder.rule_events(EVENTS_IN_SNAPSHOT),
            system: self.system(),
            cluster: self.cluster(),
            shadow: self.shadow(),
        }
    }
}
