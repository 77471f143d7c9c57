//! Circuit-breaker tests on the fake clock.

use std::sync::{Arc, Barrier, Mutex};

use super::*;
use crate::test_support::engine;
use crate::{BlockError, Entry, FakeClock, Sentinel, SentinelEvent};

fn state(s: &Sentinel) -> BreakerState {
    s.circuit_breakers()[0].1
}

/// The seed documents' rule: max RT 500 ms, slow ratio 1.0, 5 calls, 1 s interval, 1 s open.
fn seed_rule() -> DegradeRule {
    DegradeRule::slow_ratio("r", 500.0, 1.0, 1)
        .min_request_amount(5)
        .stat_interval_ms(1000)
}

/// Enters `n` calls now, lets `rt_ms` pass, and exits them all in order; the last `errors`
/// of them failed.
fn calls(s: &Sentinel, clock: &FakeClock, n: usize, errors: usize, rt_ms: u64) {
    let mut entries: Vec<Entry<'_>> = (0..n)
        .map(|_| s.entry("r").enter().expect("closed breaker passes"))
        .collect();
    clock.advance_ms(rt_ms);
    for e in entries.iter_mut().rev().take(errors) {
        e.set_error();
    }
    drop(entries);
}

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
fn exactly_one_probe_when_threads_race_in_half_open() {
    for round in 0..200 {
        let clock = FakeClock::at_ms(10_000);
        let s = engine(&clock);
        s.degrade_rules()
            .load_rules(vec![
                DegradeRule::error_count("r", 0.0, 1).min_request_amount(1)
            ])
            .unwrap();
        calls(&s, &clock, 1, 1, 1);
        assert_eq!(state(&s), BreakerState::Open);
        clock.advance_ms(1_000);
        let barrier = Barrier::new(8);
        let passed: Vec<Entry<'_>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    scope.spawn(|| {
                        barrier.wait();
                        s.entry("r").enter().ok()
                    })
                })
                .collect();
            handles
                .into_iter()
                .filter_map(|h| h.join().ok().flatten())
                .collect()
        });
        assert_eq!(
            passed.len(),
            1,
            "round {round}: {} probes passed",
            passed.len()
        );
        assert_eq!(state(&s), BreakerState::HalfOpen);
    }
}

#[test]
fn a_probe_blocked_by_a_later_breaker_returns_to_open() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    // Breaker A (1 s) and breaker B (5 s) both trip on one error.
    let a = DegradeRule::error_count("r", 0.0, 1).min_request_amount(1);
    let b = DegradeRule::error_count("r", 0.0, 5).min_request_amount(1);
    s.degrade_rules().load_rules(vec![a, b]).unwrap();
    calls(&s, &clock, 1, 1, 1);
    let states = || {
        s.circuit_breakers()
            .into_iter()
            .map(|(_, st)| st)
            .collect::<Vec<_>>()
    };
    assert_eq!(states(), vec![BreakerState::Open, BreakerState::Open]);
    clock.advance_ms(1_000);
    // A would admit a probe, but B is still open: A must not stay HALF_OPEN.
    assert!(s.entry("r").enter().is_err());
    assert_eq!(states(), vec![BreakerState::Open, BreakerState::Open]);
    // After B's window both probe together and a good call closes both.
    clock.advance_ms(5_000);
    drop(s.entry("r").enter().unwrap());
    assert_eq!(states(), vec![BreakerState::Closed, BreakerState::Closed]);
}

#[test]
fn a_lost_probe_does_not_leave_the_breaker_stuck() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    s.degrade_rules()
        .load_rules(vec![
            DegradeRule::error_count("r", 0.0, 1).min_request_amount(1)
        ])
        .unwrap();
    calls(&s, &clock, 1, 1, 1);
    clock.advance_ms(1_000);
    let lost = s.entry("r").enter().unwrap();
    std::mem::forget(lost);
    assert!(s.entry("r").enter().is_err());
    clock.advance_ms(999);
    assert!(s.entry("r").enter().is_err());
    clock.advance_ms(1);
    let probe = s
        .entry("r")
        .enter()
        .expect("a new probe after another window");
    drop(probe);
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
fn an_owned_entry_may_outlive_its_engine() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    s.degrade_rules()
        .load_rules(vec![
            DegradeRule::error_count("r", 0.0, 10).min_request_amount(1)
        ])
        .unwrap();
    let mut entry = s.entry("r").enter().unwrap().into_owned();
    entry.set_error();
    let weak = s.downgrade();
    drop(s);
    assert!(
        weak.upgrade().is_none(),
        "the entry does not keep the engine alive"
    );
    // Its breaker is gone with the engine's rules: the exit reports to nothing.
    drop(entry);
}

#[test]
fn closing_clears_the_window_of_every_thread() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    s.degrade_rules()
        .load_rules(vec![DegradeRule::error_count("r", 2.0, 1)
            .min_request_amount(1)
            .stat_interval_ms(60_000)])
        .unwrap();
    // Two errors on another thread (its own stripe), one here: 3 > 2 opens.
    std::thread::scope(|scope| {
        scope.spawn(|| calls(&s, &clock, 2, 2, 1));
    });
    assert_eq!(state(&s), BreakerState::Closed);
    calls(&s, &clock, 1, 1, 1);
    assert_eq!(state(&s), BreakerState::Open);
    // Still inside the 60 s interval, a good probe closes and empties the window.
    clock.advance_ms(1_000);
    drop(s.entry("r").enter().unwrap());
    assert_eq!(state(&s), BreakerState::Closed);
    calls(&s, &clock, 1, 1, 1);
    std::thread::scope(|scope| {
        scope.spawn(|| calls(&s, &clock, 1, 1, 1));
    });
    assert_eq!(state(&s), BreakerState::Closed, "2 errors since closing");
    calls(&s, &clock, 1, 1, 1);
    assert_eq!(state(&s), BreakerState::Open, "3 errors since closing");
}

#[test]
fn a_call_queued_by_a_rate_limiter_then_blocked_by_a_breaker_does_not_wait() {
    use crate::flow::{ControlBehavior, FlowRule};
    use crate::Clock;
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("r", 10.0)
            .control_behavior(ControlBehavior::RateLimiter)
            .max_queueing_time_ms(1_000)])
        .unwrap();
    s.degrade_rules()
        .load_rules(vec![
            DegradeRule::error_count("r", 0.0, 10).min_request_amount(1)
        ])
        .unwrap();
    let mut first = s.entry("r").enter().unwrap();
    first.set_error();
    drop(first);
    assert_eq!(state(&s), BreakerState::Open);
    // The rate limiter would queue this call 100 ms; the open breaker blocks it instead.
    let before = clock.now_nanos();
    assert!(matches!(
        s.entry("r").enter(),
        Err(BlockError::CircuitBreaker { .. })
    ));
    assert_eq!(clock.now_nanos(), before, "a blocked call never queues");
}

#[test]
fn reload_keeps_equal_breakers_and_their_state() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    let rule = DegradeRule::error_count("r", 0.0, 10).min_request_amount(1);
    s.degrade_rules().load_rules(vec![rule.clone()]).unwrap();
    calls(&s, &clock, 1, 1, 1);
    assert_eq!(state(&s), BreakerState::Open);
    // Same rule plus a new one: the open breaker stays open.
    s.degrade_rules()
        .load_rules(vec![
            rule.clone(),
            DegradeRule::error_ratio("other", 0.5, 1),
        ])
        .unwrap();
    assert_eq!(state(&s), BreakerState::Open);
    assert!(s.entry("r").enter().is_err());
    // A changed rule is a new, closed breaker.
    s.degrade_rules()
        .load_rules(vec![
            DegradeRule::error_count("r", 1.0, 10).min_request_amount(1)
        ])
        .unwrap();
    assert_eq!(state(&s), BreakerState::Closed);
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
fn an_aborted_probe_leaves_the_retry_due() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    // A (1 s) and B (3 s) trip on one error.
    let a = DegradeRule::error_count("r", 0.0, 1).min_request_amount(1);
    let b = DegradeRule::error_count("r", 0.0, 3).min_request_amount(1);
    s.degrade_rules().load_rules(vec![a, b]).unwrap();
    calls(&s, &clock, 1, 1, 1);
    let events = Arc::new(Mutex::new(Vec::new()));
    let log = events.clone();
    s.add_listener(move |event: &SentinelEvent| {
        if let SentinelEvent::BreakerStateChanged { rule, to, .. } = event {
            if rule.time_window == 1 && *to == BreakerState::HalfOpen {
                log.lock().unwrap_or_else(|e| e.into_inner()).push(());
            }
        }
    });
    clock.advance_ms(1_000);
    assert!(
        s.entry("r").enter().is_err(),
        "A probes, B blocks: A goes back to OPEN"
    );
    // The retry stays due: the very next call is A's probe again (Java leaves the timer).
    clock.advance_ms(1);
    assert!(s.entry("r").enter().is_err());
    let probes = events.lock().unwrap_or_else(|e| e.into_inner()).len();
    assert_eq!(
        probes, 2,
        "A probed at once again, not a whole window later"
    );
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

#[test]
fn a_prioritized_call_on_a_borrowed_slot_reports_to_the_breakers_on_exit() {
    use crate::flow::FlowRule;
    let clock = FakeClock::at_ms(9_600);
    let s = engine(&clock);
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("r", 2.0)])
        .unwrap();
    s.degrade_rules()
        .load_rules(vec![
            DegradeRule::error_count("r", 0.0, 1).min_request_amount(1)
        ])
        .unwrap();
    drop(s.entry("r").enter().unwrap());
    drop(s.entry("r").enter().unwrap());
    clock.set_ms(10_100);
    let mut borrowed = s.entry("r").prioritized().enter().expect("borrows a slot");
    borrowed.set_error();
    drop(borrowed);
    assert_eq!(state(&s), BreakerState::Open, "its error counted");
}

/// A fake clock that makes queued callers wait for real (`try_enter` answers `Queued`).
#[derive(Debug, Clone)]
struct QueueingClock(FakeClock);

impl crate::Clock for QueueingClock {
    fn now_ms(&self) -> u64 {
        self.0.now_ms()
    }

    fn now_nanos(&self) -> u64 {
        self.0.now_nanos()
    }
}

#[test]
fn a_probe_dropped_while_it_queues_returns_the_breaker_to_open() {
    use crate::flow::{ControlBehavior, FlowRule};
    let clock = FakeClock::at_ms(10_000);
    let s = Sentinel::builder()
        .clock(QueueingClock(clock.clone()))
        .build();
    s.degrade_rules()
        .load_rules(vec![
            DegradeRule::error_count("r", 0.0, 1).min_request_amount(1)
        ])
        .unwrap();
    // One call a second, queueing up to 5 s.
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("r", 1.0)
            .control_behavior(ControlBehavior::RateLimiter)
            .max_queueing_time_ms(5_000)])
        .unwrap();
    let mut failed = s.entry("r").enter().unwrap();
    failed.set_error();
    drop(failed);
    assert_eq!(state(&s), BreakerState::Open);
    clock.advance_ms(500);
    // Within the breaker's second, the rate limiter queues the next call to 11 000 ms, and the
    // breaker (retry due at 11 000) blocks it.
    assert!(s.entry("r").try_enter().is_err());
    clock.advance_ms(500);
    match s.entry("r").try_enter() {
        Ok(crate::Admission::Queued(queued)) => {
            assert_eq!(
                state(&s),
                BreakerState::HalfOpen,
                "the queued call is the probe"
            );
            drop(queued);
        }
        other => panic!("expected a queued probe, got {other:?}"),
    }
    assert_eq!(state(&s), BreakerState::Open, "the probe never ran");
    clock.advance_ms(1_000);
    drop(
        s.entry("r")
            .try_enter()
            .expect("the retry is due: a new probe"),
    );
}
