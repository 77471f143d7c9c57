//! System rule tests with an injected status.

use super::*;
use crate::{BlockError, Entry, FakeClock, Sentinel};

fn engine(clock: &FakeClock, status: &ManualSystemStatus) -> Sentinel {
    Sentinel::builder()
        .clock(clock.clone())
        .system_status(status.clone())
        .build()
}

fn metric(result: Result<Entry<'_>, BlockError>) -> Option<SystemMetric> {
    match result {
        Err(BlockError::System { metric, .. }) => Some(metric),
        _ => None,
    }
}

#[test]
fn qps_threshold_applies_to_inbound_only() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock, &ManualSystemStatus::new());
    s.system_rules()
        .load_rules(vec![SystemRule::new().qps(3.0)])
        .unwrap();
    for _ in 0..3 {
        assert!(s.entry("a").inbound().enter().is_ok());
    }
    assert_eq!(
        metric(s.entry("b").inbound().enter()),
        Some(SystemMetric::Qps)
    );
    assert!(s.entry("c").enter().is_ok(), "outbound is not checked");
}

#[test]
fn max_thread_threshold() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock, &ManualSystemStatus::new());
    s.system_rules()
        .load_rules(vec![SystemRule::new().max_thread(2)])
        .unwrap();
    let _a = s.entry("a").inbound().enter().unwrap();
    let _b = s.entry("a").inbound().enter().unwrap();
    // Sentinel blocks when concurrency is already over the threshold.
    let _c = s.entry("a").inbound().enter().unwrap();
    assert_eq!(
        metric(s.entry("a").inbound().enter()),
        Some(SystemMetric::Concurrency)
    );
}

#[test]
fn avg_rt_threshold() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock, &ManualSystemStatus::new());
    s.system_rules()
        .load_rules(vec![SystemRule::new().avg_rt(50)])
        .unwrap();
    let e = s.entry("a").inbound().enter().unwrap();
    clock.advance_ms(80);
    drop(e);
    assert_eq!(
        metric(s.entry("a").inbound().enter()),
        Some(SystemMetric::AvgRt)
    );
}

#[test]
fn cpu_threshold() {
    let clock = FakeClock::at_ms(10_000);
    let status = ManualSystemStatus::new();
    let s = engine(&clock, &status);
    s.system_rules()
        .load_rules(vec![SystemRule::new().highest_cpu_usage(0.8)])
        .unwrap();
    status.set_cpu_usage(0.5);
    assert!(s.entry("a").inbound().enter().is_ok());
    status.set_cpu_usage(0.9);
    assert_eq!(
        metric(s.entry("a").inbound().enter()),
        Some(SystemMetric::CpuUsage)
    );
}

#[test]
fn load_blocks_only_past_the_bbr_capacity() {
    let clock = FakeClock::at_ms(10_000);
    let status = ManualSystemStatus::new();
    let s = engine(&clock, &status);
    s.system_rules()
        .load_rules(vec![SystemRule::new().highest_system_load(4.0)])
        .unwrap();
    // History: 10 calls of 100 ms completed in one 500 ms bucket: maxSuccessQps 20/s,
    // minRt 100 ms, so the estimated capacity is 20 * 100 / 1000 = 2 concurrent calls.
    let entries: Vec<_> = (0..10)
        .map(|_| s.entry("a").inbound().enter().unwrap())
        .collect();
    clock.advance_ms(100);
    drop(entries);
    status.set_load(8.0);
    // Under high load, calls pass while concurrency is within capacity.
    let _a = s.entry("a").inbound().enter().unwrap();
    let _b = s.entry("a").inbound().enter().unwrap();
    let _c = s.entry("a").inbound().enter().unwrap();
    assert_eq!(
        metric(s.entry("a").inbound().enter()),
        Some(SystemMetric::Load)
    );
    // Low load: no check.
    status.set_load(1.0);
    assert!(s.entry("a").inbound().enter().is_ok());
}

#[test]
fn bbr_capacity_of_a_fast_service_is_not_zero() {
    let clock = FakeClock::at_ms(10_000);
    let status = ManualSystemStatus::new();
    let s = engine(&clock, &status);
    s.system_rules()
        .load_rules(vec![SystemRule::new().highest_system_load(4.0)])
        .unwrap();
    // 5 000 inbound calls of 0 ms in one bucket: maxSuccessQps 10 000/s, minRt 0 -> 1 ms,
    // so the capacity is 10 000 * 1 / 1000 = 10 concurrent calls, as in Sentinel.
    for _ in 0..5_000 {
        drop(s.entry("a").inbound().enter().unwrap());
    }
    status.set_load(8.0);
    let admitted: Vec<_> = (0..20)
        .map_while(|_| s.entry("a").inbound().enter().ok())
        .collect();
    assert_eq!(
        admitted.len(),
        11,
        "concurrency may reach the capacity, not pass it"
    );
    drop(admitted);

    // A second with no completion: maxSuccessQps 2/s (one per bucket) and minRt 5 000 ms,
    // a capacity of 10 again.
    clock.advance_ms(5_000);
    let admitted: Vec<_> = (0..20)
        .map_while(|_| s.entry("a").inbound().enter().ok())
        .collect();
    assert_eq!(admitted.len(), 11);
}

#[test]
fn rules_merge_by_minimum_and_empty_turns_off() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock, &ManualSystemStatus::new());
    s.system_rules()
        .load_rules(vec![
            SystemRule::new().qps(5.0),
            SystemRule::new().qps(2.0),
            SystemRule::new(),
        ])
        .unwrap();
    assert!(s.entry("a").inbound().enter().is_ok());
    assert!(s.entry("a").inbound().enter().is_ok());
    assert!(s.entry("a").inbound().enter().is_err());
    s.system_rules().load_rules(vec![]).unwrap();
    assert!(s.entry("a").inbound().enter().is_ok());
}

#[test]
fn cpu_usage_outside_unit_range_is_invalid() {
    let s = Sentinel::new();
    let err = s
        .system_rules()
        .load_rules(vec![SystemRule::new().highest_cpu_usage(80.0)])
        .unwrap_err();
    assert_eq!(err.issues()[0].field, "highestCpuUsage");
}

#[test]
fn max_thread_under_real_threads() {
    // Sentinel blocks when the inbound concurrency is already above `maxThread`, so up to
    // maxThread + 1 calls are inside; 16 racing threads must not push it further.
    let status = ManualSystemStatus::new();
    let s = Sentinel::builder().system_status(status).build();
    s.system_rules()
        .load_rules(vec![SystemRule::new().max_thread(4)])
        .unwrap();
    let (most, _) =
        crate::test_support::most_inside(20_000, || s.entry("a").inbound().enter().ok());
    assert!(most <= 5, "{most} inbound calls inside maxThread 4");
}

#[test]
fn a_max_thread_reservation_is_given_back_when_a_later_check_blocks() {
    let clock = FakeClock::at_ms(10_000);
    let status = ManualSystemStatus::new();
    let s = engine(&clock, &status);
    s.system_rules()
        .load_rules(vec![SystemRule::new().max_thread(0)])
        .unwrap();
    s.flow_rules()
        .load_rules(vec![crate::flow::FlowRule::qps("closed", 0.0)])
        .unwrap();
    for _ in 0..3 {
        assert!(
            s.entry("closed").inbound().enter().is_err(),
            "the flow rule blocks"
        );
    }
    // Every place was given back: maxThread 0 still admits a first call (none inside).
    let first = s.entry("open").inbound().enter().expect("nothing inside");
    assert!(
        s.entry("open").inbound().enter().is_err(),
        "one is inside now"
    );
    drop(first);
    assert!(s.entry("open").inbound().enter().is_ok());
}

#[test]
fn max_thread_counts_a_call_once_whatever_its_batch() {
    // Sentinel: `curThreadNum > maxThread` blocks, the batch plays no part: 11 inside.
    let clock = FakeClock::at_ms(10_000);
    let status = ManualSystemStatus::new();
    let s = engine(&clock, &status);
    s.system_rules()
        .load_rules(vec![SystemRule::new().max_thread(10)])
        .unwrap();
    let inside: Vec<_> = (0..20)
        .filter_map(|_| s.entry("a").inbound().batch(5).enter().ok())
        .collect();
    assert_eq!(inside.len(), 11);
    drop(inside);
    assert!(
        s.entry("a").inbound().batch(5).enter().is_ok(),
        "places given back"
    );
}
