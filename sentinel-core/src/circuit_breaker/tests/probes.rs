//! The half-open probe and the breaker's edges with the rest of the engine: exactly one
//! probe under racing threads, probes blocked, lost, aborted or dropped while queued, entries
//! that outlive the engine, windows cleared on close, reloads that keep a breaker's state.

use super::*;

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
