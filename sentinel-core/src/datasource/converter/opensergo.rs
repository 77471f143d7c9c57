//! OpenSergo's fault-tolerance resources (`fault-tolerance.opensergo.io/v1alpha1`): each
//! `FaultToleranceRule` applies its strategies (`RateLimitStrategy`, `ThrottlingStrategy`,
//! `ConcurrencyLimitStrategy`, `CircuitBreakerStrategy`, named in the same payload) to its
//! targets' resources, as Sentinel rules.

use std::time::Duration;

use serde_json::{Map, Value};

use crate::circuit_breaker::DegradeRule;
use crate::flow::{ClusterFlowConfig, ControlBehavior, FlowRule};
use crate::rule_set::RuleSet;
use crate::rules::{RuleFamily, RuleIssue};

/// The API group and version of OpenSergo's fault-tolerance resources.
pub(crate) const API_VERSION: &str = "fault-tolerance.opensergo.io/v1alpha1";

/// The kind of the resource that applies strategies to targets.
pub(crate) const RULE_KIND: &str = "FaultToleranceRule";

/// The kinds of strategy read.
pub(crate) const STRATEGIES: &[&str] = &[
    "RateLimitStrategy",
    "ThrottlingStrategy",
    "ConcurrencyLimitStrategy",
    "CircuitBreakerStrategy",
];

/// Fallback actions are the application's to carry out: read, not turned into rules.
pub(crate) const IGNORED: &[&str] = &["HttpRequestFallbackAction", "RpcRequestFallbackAction"];

/// A `RateLimitStrategy`'s `metricType`s.
pub(crate) const RATE_LIMIT_METRIC_TYPES: &[&str] = &["RequestAmount"];
/// A `RateLimitStrategy`'s `limitMode`s (`GlobalToLocal` is not supported).
pub(crate) const RATE_LIMIT_MODES: &[&str] = &["Local", "Global"];
/// A `ConcurrencyLimitStrategy`'s `limitMode`s.
pub(crate) const CONCURRENCY_LIMIT_MODES: &[&str] = &["Local"];
/// A `CircuitBreakerStrategy`'s `strategy`s.
pub(crate) const BREAKER_STRATEGIES: &[&str] = &["SlowRequestRatio", "ErrorRequestRatio"];

/// One OpenSergo resource of the payload.
pub(crate) struct Resource {
    /// Its document number in the payload.
    pub(crate) number: usize,
    pub(crate) kind: String,
    pub(crate) name: String,
    pub(crate) spec: Map<String, Value>,
}

impl Resource {
    fn label(&self) -> String {
        format!("document #{} ({} {})", self.number, self.kind, self.name)
    }
}

/// Whether `kind` is one this reader knows.
pub(crate) fn known_kind(kind: &str) -> bool {
    kind == RULE_KIND || STRATEGIES.contains(&kind) || IGNORED.contains(&kind)
}

/// The kinds this reader knows, for messages.
pub(crate) fn kinds() -> String {
    let mut all = vec![RULE_KIND];
    all.extend_from_slice(STRATEGIES);
    all.extend_from_slice(IGNORED);
    all.join(", ")
}

/// The rules the payload's `FaultToleranceRule`s make, and every problem found; each issue
/// names the document, and its index is the rule document's number.
pub(crate) fn rules(resources: &[Resource]) -> (RuleSet, Vec<RuleIssue>) {
    let mut flow = Vec::new();
    let mut degrade = Vec::new();
    let mut issues = Vec::new();
    let mut strategy_issues = Vec::new();
    for rule in resources.iter().filter(|r| r.kind == RULE_KIND) {
        let mut issue =
            |family: RuleFamily, resource: Option<&str>, field: &str, message: String| {
                issues.push(RuleIssue::new(
                    family,
                    rule.number,
                    resource,
                    field,
                    format!("{}: {message}", rule.label()),
                ))
            };
        let targets: Vec<&str> = list(&rule.spec, "targets")
            .iter()
            .filter_map(|t| t.get("targetResourceName").and_then(Value::as_str))
            .collect();
        if targets.is_empty() {
            issue(
                RuleFamily::Flow,
                None,
                "spec.targets",
                "is required: a list of {targetResourceName}".into(),
            );
        }
        let names: Vec<&str> = list(&rule.spec, "strategies")
            .iter()
            .filter_map(|s| s.get("name").and_then(Value::as_str))
            .collect();
        if names.is_empty() {
            issue(
                RuleFamily::Flow,
                None,
                "spec.strategies",
                "is required: a list of {name} of strategies in this payload".into(),
            );
        }
        for (i, name) in names.iter().enumerate() {
            let Some(strategy) = resources
                .iter()
                .find(|r| r.name == *name && STRATEGIES.contains(&r.kind.as_str()))
            else {
                issue(
                    RuleFamily::Flow,
                    None,
                    &format!("spec.strategies[{i}].name"),
                    format!("no strategy named {name:?} in this payload"),
                );
                continue;
            };
            for target in &targets {
                let mut found = Vec::new();
                match strategy_rule(strategy, target, &mut found) {
                    Some(Made::Flow(r)) => flow.push(r),
                    Some(Made::Degrade(r)) => degrade.push(r),
                    None => {}
                }
                for (family, field, message) in found {
                    strategy_issues.push(RuleIssue::new(
                        family,
                        strategy.number,
                        Some(target),
                        field,
                        format!("{}: {message}", strategy.label()),
                    ));
                }
            }
        }
    }
    issues.append(&mut strategy_issues);
    let mut set = RuleSet::new();
    if !flow.is_empty() {
        set = set.with_flow(flow);
    }
    if !degrade.is_empty() {
        set = set.with_degrade(degrade);
    }
    (set, issues)
}

/// A rule one strategy makes for one resource.
enum Made {
    Flow(FlowRule),
    Degrade(DegradeRule),
}

type Found = Vec<(RuleFamily, String, String)>;

fn strategy_rule(strategy: &Resource, resource: &str, found: &mut Found) -> Option<Made> {
    let spec = &strategy.spec;
    match strategy.kind.as_str() {
        "RateLimitStrategy" => {
            let f = RuleFamily::Flow;
            if let Some(metric) = text(spec, "metricType", f, found) {
                if !RATE_LIMIT_METRIC_TYPES.contains(&metric.as_str()) {
                    found.push((
                        f,
                        "spec.metricType".into(),
                        format!(
                            "unknown value {metric:?}; expected {}",
                            RATE_LIMIT_METRIC_TYPES.join(" or ")
                        ),
                    ));
                }
            }
            let threshold = number(spec, "threshold", f, found)?;
            let per = duration(spec, "statDuration", f, found)?;
            if per != Duration::from_secs(1) {
                found.push((
                    f,
                    "spec.statDuration".into(),
                    format!("only \"1s\" is supported (Sentinel's flow rules count per second), got {per:?}"),
                ));
            }
            let rule = FlowRule::qps(resource, threshold);
            match text(spec, "limitMode", f, found)?.as_str() {
                "Local" => Some(Made::Flow(rule)),
                "Global" => {
                    let config = ClusterFlowConfig {
                        flow_id: Some(flow_id(&strategy.name, resource)),
                        threshold_type: 1,
                        ..ClusterFlowConfig::default()
                    };
                    let mut rule = rule.cluster_mode(true);
                    rule.cluster_config = Some(config);
                    Some(Made::Flow(rule))
                }
                other => {
                    found.push((
                        f,
                        "spec.limitMode".into(),
                        format!(
                            "unknown value {other:?}; expected {} (GlobalToLocal is not supported)",
                            RATE_LIMIT_MODES.join(" or ")
                        ),
                    ));
                    None
                }
            }
        }
        "ThrottlingStrategy" => {
            let f = RuleFamily::Flow;
            let interval = duration(spec, "minIntervalOfRequests", f, found)?;
            let queue = duration(spec, "queueTimeout", f, found)?;
            if interval.is_zero() {
                found.push((
                    f,
                    "spec.minIntervalOfRequests".into(),
                    "must be more than 0".into(),
                ));
                return None;
            }
            let rule = FlowRule::qps(resource, 1.0 / interval.as_secs_f64())
                .control_behavior(ControlBehavior::RateLimiter)
                .max_queueing_time_ms(u32::try_from(queue.as_millis()).unwrap_or(u32::MAX));
            Some(Made::Flow(rule))
        }
        "ConcurrencyLimitStrategy" => {
            let f = RuleFamily::Flow;
            let max = number(spec, "maxConcurrency", f, found)?;
            match text(spec, "limitMode", f, found)?.as_str() {
                "Local" => Some(Made::Flow(FlowRule::thread(resource, max))),
                other => {
                    found.push((
                        f,
                        "spec.limitMode".into(),
                        format!(
                            "{other:?} is not supported for a concurrency limit; expected {}",
                            CONCURRENCY_LIMIT_MODES.join(" or ")
                        ),
                    ));
                    None
                }
            }
        }
        "CircuitBreakerStrategy" => {
            let f = RuleFamily::Degrade;
            let ratio = percent(spec, "triggerRatio", f, found)?;
            let stat = duration(spec, "statDuration", f, found)?;
            let recovery = duration(spec, "recoveryTimeout", f, found)?;
            let min_requests = spec
                .get("minRequestAmount")
                .and_then(Value::as_u64)
                .unwrap_or(5);
            let window = u32::try_from(recovery.as_millis().div_ceil(1000)).unwrap_or(u32::MAX);
            let rule = match text(spec, "strategy", f, found)?.as_str() {
                "SlowRequestRatio" => {
                    let Some(conditions) = spec.get("slowConditions").and_then(Value::as_object)
                    else {
                        found.push((
                            f,
                            "spec.slowConditions".into(),
                            "is required with SlowRequestRatio".into(),
                        ));
                        return None;
                    };
                    let rt = duration(conditions, "maxAllowedRt", f, found)?;
                    DegradeRule::slow_ratio(resource, rt.as_millis() as f64, ratio, window)
                }
                "ErrorRequestRatio" => DegradeRule::error_ratio(resource, ratio, window),
                other => {
                    found.push((
                        f,
                        "spec.strategy".into(),
                        format!(
                            "unknown value {other:?}; expected {}",
                            BREAKER_STRATEGIES.join(" or ")
                        ),
                    ));
                    return None;
                }
            };
            let rule = rule
                .min_request_amount(u32::try_from(min_requests).unwrap_or(u32::MAX))
                .stat_interval_ms(u32::try_from(stat.as_millis()).unwrap_or(u32::MAX));
            Some(Made::Degrade(rule))
        }
        _ => None,
    }
}

/// A stable positive id for the cluster rule of `strategy` on `resource`.
fn flow_id(strategy: &str, resource: &str) -> i64 {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("{strategy}\0{resource}").as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    (i64::from_be_bytes(bytes) & i64::MAX).max(1)
}

fn list<'a>(spec: &'a Map<String, Value>, field: &str) -> &'a [Value] {
    spec.get(field)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn text(
    spec: &Map<String, Value>,
    field: &str,
    f: RuleFamily,
    found: &mut Found,
) -> Option<String> {
    match spec.get(field).and_then(Value::as_str) {
        Some(t) => Some(t.to_owned()),
        None => {
            found.push((f, format!("spec.{field}"), "is required (a string)".into()));
            None
        }
    }
}

fn number(spec: &Map<String, Value>, field: &str, f: RuleFamily, found: &mut Found) -> Option<f64> {
    match spec.get(field).and_then(Value::as_f64) {
        Some(n) if n >= 0.0 => Some(n),
        _ => {
            found.push((
                f,
                format!("spec.{field}"),
                "is required (a number >= 0)".into(),
            ));
            None
        }
    }
}

/// `"60%"` (or a number of percent) as a ratio.
fn percent(
    spec: &Map<String, Value>,
    field: &str,
    f: RuleFamily,
    found: &mut Found,
) -> Option<f64> {
    let value = spec.get(field);
    let parsed = match value {
        Some(Value::String(t)) => t.trim().trim_end_matches('%').trim().parse::<f64>().ok(),
        Some(Value::Number(n)) => n.as_f64(),
        _ => None,
    };
    match parsed {
        Some(p) if (0.0..=100.0).contains(&p) => Some(p / 100.0),
        _ => {
            found.push((
                f,
                format!("spec.{field}"),
                format!(
                    "expected a percentage such as \"60%\", got {}",
                    value.unwrap_or(&Value::Null)
                ),
            ));
            None
        }
    }
}

/// `"500ms"`, `"1s"`, `"5min"`.
fn duration(
    spec: &Map<String, Value>,
    field: &str,
    f: RuleFamily,
    found: &mut Found,
) -> Option<Duration> {
    let value = spec.get(field);
    match value
        .and_then(Value::as_str)
        .map(|t| humantime::parse_duration(t.trim()))
    {
        Some(Ok(d)) => Some(d),
        _ => {
            found.push((
                f,
                format!("spec.{field}"),
                format!(
                    "expected a duration such as \"500ms\" or \"1s\", got {}",
                    value.unwrap_or(&Value::Null)
                ),
            ));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strategy(kind: &str, spec: Value) -> Option<Made> {
        let resource = Resource {
            number: 0,
            kind: kind.to_owned(),
            name: "s".to_owned(),
            spec: spec.as_object().cloned().unwrap_or_default(),
        };
        let mut found = Vec::new();
        let made = strategy_rule(&resource, "/r", &mut found);
        assert!(found.is_empty(), "{kind} {spec}: {found:?}");
        made
    }

    /// The names the schema lists (`datasource::schema`) are the ones the reader takes.
    #[test]
    fn every_listed_enum_name_is_read() {
        use serde_json::json;
        for mode in RATE_LIMIT_MODES {
            for metric in RATE_LIMIT_METRIC_TYPES {
                let spec = json!({"metricType": metric, "limitMode": mode,
                    "threshold": 1, "statDuration": "1s"});
                assert!(strategy("RateLimitStrategy", spec).is_some(), "{mode}");
            }
        }
        for mode in CONCURRENCY_LIMIT_MODES {
            let spec = json!({"maxConcurrency": 2, "limitMode": mode});
            assert!(
                strategy("ConcurrencyLimitStrategy", spec).is_some(),
                "{mode}"
            );
        }
        for name in BREAKER_STRATEGIES {
            let spec = json!({"strategy": name, "triggerRatio": "10%", "statDuration": "1s",
                "recoveryTimeout": "1s", "slowConditions": {"maxAllowedRt": "5ms"}});
            assert!(strategy("CircuitBreakerStrategy", spec).is_some(), "{name}");
        }
        for kind in STRATEGIES.iter().chain(IGNORED).chain([&RULE_KIND]) {
            assert!(known_kind(kind), "{kind}");
        }
    }
}
