//! sentinel-golang's Kubernetes custom resources (the `yaml` feature): the five samples of
//! its repository (copied into `tests/data/rules/` from `shared/rules/`) load with the
//! semantics its Kubernetes data source gives them.

use sentinel_core::circuit_breaker::DegradeRule;
use sentinel_core::datasource::{Converter, KubernetesYaml};
use sentinel_core::flow::{ControlBehavior, FlowRule};
use sentinel_core::param_flow::{ParamControlBehavior, ParamFlowGrade, ParamFlowItem};
use sentinel_core::system::SystemRule;
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
