//! sentinel-golang's JSON mapped onto Sentinel's rules: each family's mapping, the issues
//! named in Go's terms, and keys in any letter case.

use super::*;
use crate::circuit_breaker::DegradeRule;
use crate::flow::{ControlBehavior, FlowRule};
use crate::system::SystemRule;

fn flow(set: RuleSet) -> Vec<FlowRule> {
    set.flow.unwrap_or_default()
}

#[test]
fn go_mapping() {
    let c = GoFlowJson::new();
    let rules = c
        .convert(
            br#"[{"Resource":"a","THRESHOLD":10,"tokenCalculateStrategy":1,"warmUpPeriodSec":5},
                {"resource":"b","threshold":2,"controlBehavior":1,"maxQueueingTimeMs":0},
                {"resource":"c","threshold":3,"relationStrategy":1,"refResource":"d",
                 "controlBehavior":1,"tokenCalculateStrategy":1,"warmUpPeriodSec":3,
                 "maxQueueingTimeMs":20,"statIntervalInMs":1000,"warmUpColdFactor":3}]"#,
        )
        .map(flow)
        .unwrap_or_default();
    assert_eq!(
        rules,
        vec![
            FlowRule::qps("a", 10.0)
                .control_behavior(ControlBehavior::WarmUp)
                .warm_up_period_sec(5),
            FlowRule::qps("b", 2.0)
                .control_behavior(ControlBehavior::RateLimiter)
                .max_queueing_time_ms(1),
            FlowRule::qps("c", 3.0)
                .relate("d")
                .control_behavior(ControlBehavior::WarmUpRateLimiter)
                .warm_up_period_sec(3)
                .max_queueing_time_ms(20),
        ]
    );
    for (payload, field) in [
        (
            &br#"{"resource":"a","tokenCalculateStrategy":2}"#[..],
            "tokenCalculateStrategy",
        ),
        (
            br#"{"resource":"a","statIntervalInMs":500}"#,
            "statIntervalInMs",
        ),
        (
            br#"{"resource":"a","relationStrategy":2}"#,
            "relationStrategy",
        ),
        (br#"{"resource":"a","relationStrategy":1}"#, "refResource"),
        (
            br#"{"resource":"a","tokenCalculateStrategy":1}"#,
            "warmUpPeriodSec",
        ),
        (
            br#"{"resource":"a","warmUpColdFactor":1}"#,
            "warmUpColdFactor",
        ),
        (
            br#"{"resource":"a","maxQueueingTimeMs":-1}"#,
            "maxQueueingTimeMs",
        ),
        (br#"{"resource":"a","threshold":"lots"}"#, "threshold"),
        (br#"{"threshold":1}"#, "resource"),
    ] {
        let err = c.convert(payload).err();
        let fields: Vec<String> = err
            .as_ref()
            .map(|e| e.issues().iter().map(|i| i.field.clone()).collect())
            .unwrap_or_default();
        assert!(fields.iter().any(|f| f == field), "{field}: {err:?}");
    }
}

#[test]
fn go_circuit_breaker_mapping() {
    let set = GoCircuitBreakerJson::new()
        .convert(
            br#"[{"resource":"a","strategy":0,"retryTimeoutMs":1500,"minRequestAmount":0,
                  "statIntervalMs":1000,"maxAllowedRtMs":100,"threshold":0.1,"probeNum":3},
                 {"Resource":"b","Strategy":2,"RetryTimeoutMs":10,"StatIntervalMs":500,"Threshold":3}]"#,
        )
        .unwrap_or_default();
    assert_eq!(
        set.degrade.unwrap_or_default(),
        vec![
            DegradeRule::slow_ratio("a", 100.0, 0.1, 2).min_request_amount(1),
            DegradeRule::error_count("b", 3.0, 1)
                .min_request_amount(1)
                .stat_interval_ms(500),
        ]
    );
    for (payload, field) in [
        (
            &br#"{"resource":"a","strategy":1,"statIntervalMs":1000}"#[..],
            "retryTimeoutMs",
        ),
        (
            br#"{"resource":"a","strategy":5,"retryTimeoutMs":1,"statIntervalMs":1}"#,
            "strategy",
        ),
        (
            br#"{"resource":"a","strategy":1,"retryTimeoutMs":1,"statIntervalMs":1,"threshold":2}"#,
            "count",
        ),
        (
            br#"{"resource":"a","retryTimeoutMs":1,"statIntervalMs":1,"threshold":2}"#,
            "slowRatioThreshold",
        ),
    ] {
        let err = GoCircuitBreakerJson::new().convert(payload).err();
        let fields: Vec<String> = err
            .as_ref()
            .map(|e| e.issues().iter().map(|i| i.field.clone()).collect())
            .unwrap_or_default();
        assert!(fields.iter().any(|f| f == field), "{field}: {err:?}");
    }
}

#[test]
fn go_system_mapping() {
    let set = GoSystemJson::new()
        .convert(
            br#"[{"metricType":0,"triggerCount":4.5,"strategy":1},{"metricType":1,"triggerCount":80},
                 {"metricType":2,"triggerCount":100},{"metricType":3,"triggerCount":2000},
                 {"MetricType":4,"TriggerCount":0.8}]"#,
        )
        .unwrap_or_default();
    assert_eq!(
        set.system.unwrap_or_default(),
        vec![
            SystemRule::new().highest_system_load(4.5),
            SystemRule::new().avg_rt(80),
            SystemRule::new().max_thread(100),
            SystemRule::new().qps(2000.0),
            SystemRule::new().highest_cpu_usage(0.8),
        ]
    );
    for (payload, field) in [
        (&br#"{"metricType":9,"triggerCount":1}"#[..], "metricType"),
        (br#"{"metricType":4,"triggerCount":80}"#, "triggerCount"),
        (br#"{"metricType":3,"triggerCount":-1}"#, "triggerCount"),
    ] {
        let err = GoSystemJson::new().convert(payload).err();
        let fields: Vec<String> = err
            .as_ref()
            .map(|e| e.issues().iter().map(|i| i.field.clone()).collect())
            .unwrap_or_default();
        assert!(fields.iter().any(|f| f == field), "{field}: {err:?}");
    }
}

#[test]
fn of_two_keys_differing_in_case_the_last_wins_as_in_go() {
    for (payload, count) in [
        (
            &br#"[{"resource":"a","threshold":1,"Threshold":2}]"#[..],
            2.0,
        ),
        (br#"[{"resource":"a","Threshold":2,"threshold":1}]"#, 1.0),
        (
            br#"{"resource":"a","THRESHOLD":3,"threshold":1,"Threshold":4}"#,
            4.0,
        ),
    ] {
        let rules = GoFlowJson::new()
            .convert(payload)
            .map(flow)
            .unwrap_or_default();
        assert_eq!(rules, vec![FlowRule::qps("a", count)], "{payload:?}");
    }
}

#[test]
fn go_keys_are_quoted_as_written() {
    let err = GoHotspotJson::new()
        .convert(
            br#"[{"resource":"a","paramindex":0,"threshold":1,"burstcount":"x",
                  "specificitems":[{"valkind":9,"ValStr":"1","threshold":1}]}]"#,
        )
        .err();
    let fields: Vec<String> = err
        .as_ref()
        .map(|e| e.issues().iter().map(|i| i.field.clone()).collect())
        .unwrap_or_default();
    assert!(fields.contains(&"burstcount".to_owned()), "{fields:?}");
    assert!(
        fields.contains(&"specificitems[0].valkind".to_owned()),
        "{fields:?}"
    );
    let err = GoFlowJson::new()
        .convert(br#"[{"resource":"a","thresold":1}]"#)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        err.contains(r#"unknown field "thresold" (did you mean "threshold"?)"#),
        "{err}"
    );
}
