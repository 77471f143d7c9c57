//! sentinel-golang's Kubernetes custom resources (the `yaml` feature): the five samples of
//! its repository (copied into `tests/data/rules/` from `shared/rules/`) load with the
//! semantics its Kubernetes data source gives them.

use sentinel_core::circuit_breaker::DegradeRule;
use sentinel_core::datasource::{Converter, KubernetesYaml};
use sentinel_core::flow::{ControlBehavior, FlowRule};
use sentinel_core::param_flow::{ParamControlBehavior, ParamFlowGrade, ParamFlowItem};
use sentinel_core::system::SystemRule;
use sentinel_core::RuleIssue;
use sentinel_core::{RuleSet, Validation};

fn load(kind: &str) -> RuleSet {
    let name =
        format!("k8s-crd-{kind}-go__alibaba-sentinel-golang__pkg-datasource-k8s-samples.yaml");
    let path = format!("{}/tests/data/rules/{name}", env!("CARGO_MANIFEST_DIR"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    KubernetesYaml::new()
        .convert(&bytes)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn flow_rules_sample() {
    assert_eq!(
        load("flowrules").flow,
        Some(vec![
            FlowRule::qps("simple-resource", 500.0),
            FlowRule::qps("abcde", 100.0)
                .control_behavior(ControlBehavior::RateLimiter)
                .max_queueing_time_ms(500),
            FlowRule::qps("abcd", 200.0)
                .control_behavior(ControlBehavior::WarmUp)
                .warm_up_period_sec(20),
        ])
    );
}

#[test]
fn circuit_breaker_rules_sample_reads_ratios_as_percent() {
    let retry_500ms_as_seconds = 1;
    assert_eq!(
        load("circuitbreakerrules").degrade,
        Some(vec![
            DegradeRule::slow_ratio("test1", 100.0, 0.1, retry_500ms_as_seconds)
                .min_request_amount(10)
                .stat_interval_ms(10000),
            DegradeRule::error_ratio("test1", 0.2, retry_500ms_as_seconds)
                .min_request_amount(10)
                .stat_interval_ms(10000),
            DegradeRule::error_count("test1", 20.0, retry_500ms_as_seconds)
                .min_request_amount(10)
                .stat_interval_ms(10000),
        ])
    );
}

/// The sample's second rule is a QPS rule without `durationInSec`, which sentinel-golang
/// finds invalid and skips: strict mode refuses the resource naming the document, the rule
/// and the field; lenient mode loads the first rule, as Go does.
#[test]
fn hotspot_rules_sample_skips_its_invalid_rule_as_go_does() {
    let name = "k8s-crd-hotspotrules-go__alibaba-sentinel-golang__pkg-datasource-k8s-samples.yaml";
    let path = format!("{}/tests/data/rules/{name}", env!("CARGO_MANIFEST_DIR"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let err = KubernetesYaml::new()
        .convert(&bytes)
        .expect_err("rule #1 is invalid");
    let issues = err.issues();
    assert_eq!(issues.len(), 1, "{err}");
    assert_eq!(
        (issues[0].index, issues[0].field.as_str()),
        (1, "durationInSec")
    );
    assert!(issues[0]
        .message
        .contains("document #0 (HotspotRules sentinel-go-hotspot-rules)"));
    let out = KubernetesYaml::new()
        .convert_with(&bytes, Validation::Lenient)
        .expect("lenient");
    assert_eq!(out.skipped.len(), 1);
    let rules = out.value.param_flow.unwrap_or_default();
    assert_eq!(rules.len(), 1);
    assert_eq!(rules[0].grade, ParamFlowGrade::Thread);
    assert_eq!(rules[0].control_behavior, ParamControlBehavior::Reject);
    assert_eq!((rules[0].param_idx, rules[0].count), (Some(0), 100.0));
    assert_eq!((rules[0].burst_count, rules[0].duration_in_sec), (20, 10));
    assert_eq!(rules[0].params_max_capacity, Some(10000));
    assert_eq!(
        rules[0].param_flow_item_list,
        vec![
            ParamFlowItem::new("100", "long", 101),
            ParamFlowItem::new("200", "long", 102)
        ]
    );
}

#[test]
fn isolation_rules_sample_is_a_concurrency_limit() {
    assert_eq!(
        load("isolationrules").flow,
        Some(vec![
            FlowRule::thread("test1", 100.0),
            FlowRule::thread("test2", 200.0)
        ])
    );
}

#[test]
fn system_rules_sample() {
    assert_eq!(
        load("systemrules").system,
        Some(vec![
            SystemRule::new().avg_rt(123),
            SystemRule::new().max_thread(100)
        ])
    );
}

/// OpenSergo's fault-tolerance resources: strategies named by a `FaultToleranceRule`,
/// applied to its targets; `limitMode: Global` makes a cluster rule; fallback actions are
/// left to the application.
#[test]
fn opensergo_fault_tolerance_rules() {
    let yaml = br#"apiVersion: fault-tolerance.opensergo.io/v1alpha1
kind: RateLimitStrategy
metadata: {name: orders-global}
spec: {metricType: RequestAmount, limitMode: Global, threshold: 40, statDuration: "1s"}
---
apiVersion: fault-tolerance.opensergo.io/v1alpha1
kind: ThrottlingStrategy
metadata: {name: smooth}
spec: {minIntervalOfRequests: "25ms", queueTimeout: "400ms"}
---
apiVersion: fault-tolerance.opensergo.io/v1alpha1
kind: ConcurrencyLimitStrategy
metadata: {name: eight}
spec: {maxConcurrency: 8, limitMode: Local}
---
apiVersion: fault-tolerance.opensergo.io/v1alpha1
kind: CircuitBreakerStrategy
metadata: {name: slow}
spec:
  strategy: SlowRequestRatio
  triggerRatio: "50%"
  statDuration: "20s"
  recoveryTimeout: "3s"
  minRequestAmount: 7
  slowConditions: {maxAllowedRt: "300ms"}
---
apiVersion: fault-tolerance.opensergo.io/v1alpha1
kind: HttpRequestFallbackAction
metadata: {name: busy}
spec: {behavior: ReturnProvidedResponse}
---
apiVersion: fault-tolerance.opensergo.io/v1alpha1
kind: FaultToleranceRule
metadata: {name: orders}
spec:
  targets: [{targetResourceName: /orders}]
  strategies: [{name: orders-global}, {name: smooth}, {name: eight}, {name: slow}]
  fallbackAction: busy
"#;
    let set = KubernetesYaml::new()
        .convert(&yaml[..])
        .unwrap_or_else(|e| panic!("{e}"));
    let flow = set.flow.unwrap_or_default();
    assert_eq!(flow.len(), 3, "{flow:?}");
    assert!(flow[0].cluster_mode);
    let cluster = flow[0].cluster_config.clone().expect("a cluster rule");
    assert_eq!(cluster.threshold_type, 1, "global threshold");
    assert!(cluster.flow_id.is_some_and(|id| id > 0));
    assert_eq!(
        (flow[0].resource.as_str(), flow[0].count),
        ("/orders", 40.0)
    );
    assert_eq!(
        flow[1],
        FlowRule::qps("/orders", 40.0)
            .control_behavior(ControlBehavior::RateLimiter)
            .max_queueing_time_ms(400)
    );
    assert_eq!(flow[2], FlowRule::thread("/orders", 8.0));
    assert_eq!(
        set.degrade,
        Some(vec![DegradeRule::slow_ratio("/orders", 300.0, 0.5, 3)
            .min_request_amount(7)
            .stat_interval_ms(20000)])
    );

    // A strategy that is not in the payload, and a bad field, are named with their document.
    let bad = br#"apiVersion: fault-tolerance.opensergo.io/v1alpha1
kind: RateLimitStrategy
metadata: {name: r}
spec: {metricType: RequestAmount, limitMode: Local, threshold: 5, statDuration: "soon"}
---
apiVersion: fault-tolerance.opensergo.io/v1alpha1
kind: FaultToleranceRule
metadata: {name: x}
spec:
  targets: [{targetResourceName: /a}]
  strategies: [{name: r}, {name: missing}]
"#;
    let err = KubernetesYaml::new()
        .convert(&bad[..])
        .expect_err("invalid");
    let found: Vec<(usize, &str)> = err.issues().iter().map(RuleIssue::position).collect();
    assert!(found.contains(&(1, "spec.strategies[1].name")), "{err}");
    assert!(found.contains(&(0, "spec.statDuration")), "{err}");
    assert!(
        err.to_string()
            .contains("document #0 (RateLimitStrategy r)"),
        "{err}"
    );
}
