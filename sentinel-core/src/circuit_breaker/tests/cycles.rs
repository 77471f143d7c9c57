//! The breaker's cycles, per strategy: slow ratio, error ratio and error count open, probe and
//! close or reopen as Sentinel's do; the minimum request amount; validity as in Java; the
//! transitions reported.

use super::*;

#[test]
fn seed_scenario_slow_calls_open_then_fast_probe_closes() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    s.degrade_rules().load_rules(vec![seed_rule()]).unwrap();
    calls(&s, &clock, 6, 0, 1_000);
    assert_eq!(state(&s), BreakerState::Open);
    // Blocked during the window.
    clock.advance_ms(500);
    let err = s.entry("r").enter().unwrap_err();
    assert!(matches!(err, BlockError::CircuitBreaker { .. }));
    clock.advance_ms(499);
    assert!(s.entry("r").enter().is_err());
    // After the window: one probe.
    clock.advance_ms(1);
    let probe = s.entry("r").enter().expect("the probe passes");
    assert_eq!(state(&s), BreakerState::HalfOpen);
    assert!(s.entry("r").enter().is_err(), "only one probe");
    clock.advance_ms(20);
    drop(probe);
    assert_eq!(state(&s), BreakerState::Closed);
    assert!(s.entry("r").enter().is_ok());
}

#[test]
fn seed_scenario_slow_probe_reopens() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    s.degrade_rules().load_rules(vec![seed_rule()]).unwrap();
    calls(&s, &clock, 6, 0, 1_000);
    clock.advance_ms(1_000);
    let probe = s.entry("r").enter().unwrap();
    clock.advance_ms(600);
    drop(probe);
    assert_eq!(state(&s), BreakerState::Open);
    assert!(s.entry("r").enter().is_err());
    clock.advance_ms(1_000);
    assert!(
        s.entry("r").enter().is_ok(),
        "next probe after another window"
    );
}

#[test]
fn fewer_than_min_request_amount_never_trips() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    s.degrade_rules().load_rules(vec![seed_rule()]).unwrap();
    calls(&s, &clock, 4, 0, 1_000);
    assert_eq!(state(&s), BreakerState::Closed);
    // The next interval starts over.
    clock.advance_ms(1_000);
    calls(&s, &clock, 4, 0, 1_000);
    assert_eq!(state(&s), BreakerState::Closed);
}

#[test]
fn slow_ratio_below_threshold_does_not_trip() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    s.degrade_rules()
        .load_rules(vec![DegradeRule::slow_ratio("r", 100.0, 0.5, 1)])
        .unwrap();
    calls(&s, &clock, 5, 0, 10); // fast
    calls(&s, &clock, 5, 0, 200); // slow: ratio 0.5, not over 0.5
    assert_eq!(state(&s), BreakerState::Closed);
    calls(&s, &clock, 1, 0, 200); // 6/11 > 0.5
    assert_eq!(state(&s), BreakerState::Open);
}

#[test]
fn error_ratio_cycle() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    s.degrade_rules()
        .load_rules(vec![DegradeRule::error_ratio("r", 0.5, 2)])
        .unwrap();
    calls(&s, &clock, 6, 3, 5); // exactly 0.5: not over
    assert_eq!(state(&s), BreakerState::Closed);
    calls(&s, &clock, 2, 2, 5); // 5/8
    assert_eq!(state(&s), BreakerState::Open);
    assert!(s.entry("r").enter().is_err());
    clock.advance_ms(2_000);
    // A failing probe reopens.
    let mut probe = s.entry("r").enter().unwrap();
    assert!(s.entry("r").enter().is_err());
    probe.set_error();
    drop(probe);
    assert_eq!(state(&s), BreakerState::Open);
    clock.advance_ms(2_000);
    // A good probe closes.
    drop(s.entry("r").enter().unwrap());
    assert_eq!(state(&s), BreakerState::Closed);
}

#[test]
fn error_count_cycle() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    s.degrade_rules()
        .load_rules(vec![DegradeRule::error_count("r", 2.0, 1)])
        .unwrap();
    calls(&s, &clock, 5, 2, 5);
    assert_eq!(state(&s), BreakerState::Closed);
    calls(&s, &clock, 1, 1, 5);
    assert_eq!(state(&s), BreakerState::Open);
    assert!(s.entry("r").enter().is_err());
    clock.advance_ms(1_000);
    let mut probe = s.entry("r").enter().unwrap();
    probe.set_error();
    drop(probe);
    assert_eq!(state(&s), BreakerState::Open);
    clock.advance_ms(1_000);
    drop(s.entry("r").enter().unwrap());
    assert_eq!(state(&s), BreakerState::Closed);
}

#[test]
fn a_good_call_that_reaches_min_request_amount_trips_on_earlier_errors() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    s.degrade_rules()
        .load_rules(vec![DegradeRule::error_ratio("r", 0.5, 1)])
        .unwrap();
    calls(&s, &clock, 4, 4, 5); // 4 calls: under minRequestAmount 5
    assert_eq!(state(&s), BreakerState::Closed);
    calls(&s, &clock, 1, 0, 5); // the fifth, fine, call: 4/5 errors
    assert_eq!(state(&s), BreakerState::Open);
}

#[test]
fn a_bad_call_counted_into_the_next_round_still_counts_for_a_good_call() {
    // A writer that read the time just before a round boundary counts into a bucket that
    // already holds the next round; the good call that then reaches minRequestAmount must
    // still see those errors. (Replayed on one thread by stepping the clock back.)
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    s.degrade_rules()
        .load_rules(vec![DegradeRule::error_ratio("r", 0.5, 1)
            .min_request_amount(5)
            .stat_interval_ms(1000)])
        .unwrap();
    clock.set_ms(11_000);
    calls(&s, &clock, 1, 0, 0); // this thread's bucket now holds the round from 11 000
    clock.set_ms(10_999);
    calls(&s, &clock, 3, 3, 0); // counted in that bucket
    clock.set_ms(11_000);
    calls(&s, &clock, 1, 0, 0); // 5 calls, 3 errors: 0.6 > 0.5
    assert_eq!(state(&s), BreakerState::Open);
}

#[test]
fn transitions_are_reported_with_the_tripping_value() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    s.add_listener(move |event: &SentinelEvent| {
        if let SentinelEvent::BreakerStateChanged {
            from, to, value, ..
        } = event
        {
            if let Ok(mut v) = sink.lock() {
                v.push((*from, *to, *value));
            }
        }
    });
    s.degrade_rules().load_rules(vec![seed_rule()]).unwrap();
    calls(&s, &clock, 6, 0, 1_000);
    clock.advance_ms(1_000);
    drop(s.entry("r").enter().unwrap());
    // The listener survives a reload: a new breaker's trip after it is reported too.
    s.degrade_rules()
        .load_rules(vec![seed_rule().min_request_amount(6)])
        .unwrap();
    calls(&s, &clock, 6, 0, 1_000);
    let seen = seen.lock().map(|v| v.clone()).unwrap_or_default();
    assert_eq!(
        seen,
        vec![
            (BreakerState::Closed, BreakerState::Open, Some(1.0)),
            (BreakerState::Open, BreakerState::HalfOpen, None),
            (BreakerState::HalfOpen, BreakerState::Closed, None),
            (BreakerState::Closed, BreakerState::Open, Some(1.0)),
        ]
    );
}

#[test]
fn validity_follows_java() {
    let mut bad = DegradeRule::error_ratio("r", 1.5, 0);
    bad.stat_interval_ms = 0;
    bad.min_request_amount = 0;
    let fields: Vec<String> = bad.validate(3).into_iter().map(|i| i.field).collect();
    assert_eq!(
        fields,
        ["timeWindow", "minRequestAmount", "statIntervalMs", "count"]
    );
    let mut slow = DegradeRule::slow_ratio("r", 100.0, 1.2, 1);
    assert_eq!(slow.validate(0)[0].field, "slowRatioThreshold");
    slow.slow_ratio_threshold = 1.0;
    assert!(slow.validate(0).is_empty());
}

#[test]
fn a_slow_call_threshold_is_rounded_to_whole_milliseconds() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    // 100.4 ms rounds to 100: a 100 ms call is not slow; 100.6 rounds to 101.
    s.degrade_rules()
        .load_rules(vec![
            DegradeRule::slow_ratio("r", 100.6, 0.4, 1).min_request_amount(1)
        ])
        .unwrap();
    calls(&s, &clock, 1, 0, 101);
    assert_eq!(
        state(&s),
        BreakerState::Closed,
        "101 ms is not above round(100.6)"
    );
    calls(&s, &clock, 1, 0, 102);
    assert_eq!(state(&s), BreakerState::Open);
}

/// As Sentinel's `DegradeSlot.exit`, which reports every completion to the breakers the
/// resource has at exit: calls entered before a breaker was loaded (through the fast path,
/// and through the full checks of another rule) count when they complete after it.
#[test]
fn a_breaker_counts_calls_that_were_in_flight_when_it_was_loaded() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    s.flow_rules()
        .load_rules(vec![crate::flow::FlowRule::thread("held", 100.0)])
        .unwrap();
    let mut inside: Vec<_> = (0..3)
        .flat_map(|_| {
            [
                s.entry("r").enter().unwrap(),
                s.entry("held").enter().unwrap(),
            ]
        })
        .collect();
    s.degrade_rules()
        .load_rules(vec![
            DegradeRule::error_count("r", 2.0, 5).min_request_amount(1),
            DegradeRule::error_count("held", 2.0, 5).min_request_amount(1),
        ])
        .unwrap();
    for entry in &mut inside {
        entry.set_error();
    }
    drop(inside);
    assert!(
        s.entry("r").enter().is_err(),
        "three errors opened r's breaker"
    );
    assert!(s.entry("held").enter().is_err(), "and held's");
}
