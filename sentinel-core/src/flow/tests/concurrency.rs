//! Limits under real threads, and the invariants proptest checks: a QPS limit across
//! threads, an exact concurrency limit, a thread limit's reservation given back, and the
//! plain-QPS fast paths against the reject controller.

use super::*;

#[test]
fn thread_grade_limits_concurrency() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    s.flow_rules()
        .load_rules(vec![FlowRule::thread("r", 2.0)])
        .unwrap();
    let a = s.entry("r").enter().unwrap();
    let _b = s.entry("r").enter().unwrap();
    assert!(s.entry("r").enter().is_err());
    drop(a);
    assert!(s.entry("r").enter().is_ok());
}

#[test]
fn qps_limit_holds_across_threads() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("r", 100.0)])
        .unwrap();
    let threads = 4;
    let passed: usize = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| scope.spawn(|| burst(&s, "r", 1_000)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or(0)).sum()
    });
    // Check-then-count, as in Sentinel, until a second thread writes: racing threads may
    // overshoot by at most threads - 1. Passes a thread took ahead (`stat::fold`) and did
    // not use go to the next calls.
    let drained = std::iter::from_fn(|| s.entry("r").enter().ok()).count();
    let passed = passed + drained;
    assert!(
        (100..100 + threads).contains(&passed),
        "passed {passed} with a limit of 100"
    );
    assert_eq!(s.resource_stats("r").unwrap().pass_qps, passed as f64);
}

#[test]
fn threads_that_fold_their_passes_never_admit_more_than_the_limit_and_then_fill_it() {
    // Once a second thread has written the node, the fast path adds before it checks:
    // racing threads never admit more than the count (Sentinel's check-then-add admits up
    // to threads - 1 more). Passes a thread took ahead and did not use go to the next
    // calls, so the window fills exactly.
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("r", 100.0)])
        .unwrap();
    let handle = s.resource("r");
    drop(handle.entry().enter().unwrap());
    s.node("r").unwrap().stat.share();
    let passed: usize = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    (0..1_000)
                        .filter(|_| handle.entry().enter().is_ok())
                        .count()
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap_or(0)).sum()
    });
    assert!(passed <= 99, "{passed} passes over a limit of 99");
    let drained = std::iter::from_fn(|| handle.entry().enter().ok()).count();
    assert_eq!(passed + drained, 99);
    let stats = s.resource_stats("r").unwrap();
    assert_eq!(stats.pass_qps, 100.0);
    assert_eq!(stats.block_qps, 4_000.0 - passed as f64 + 1.0);
    assert_eq!(stats.concurrency, 0);
}

#[test]
fn a_reload_applies_at_once_to_threads_holding_quotas() {
    // Threads that own their stripes took passes ahead under a limit of 6 400 (quotas of
    // 64); a reload to 0 blocks the next call of each, quota or not.
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("r", 6_400.0)])
        .unwrap();
    let handle = s.resource("r");
    crate::test_support::on_owned_stripe(|| {
        drop(handle.entry().enter().unwrap());
        s.node("r").unwrap().stat.share();
        drop(handle.entry().enter().unwrap());
        crate::test_support::on_owned_stripe(|| drop(handle.entry().enter().unwrap()));
        s.flow_rules()
            .load_rules(vec![FlowRule::qps("r", 0.0)])
            .unwrap();
        assert!(handle.entry().enter().is_err());
        crate::test_support::on_owned_stripe(|| assert!(handle.entry().enter().is_err()));
        assert_eq!(s.resource_stats("r").unwrap().pass_qps, 3.0);
    });
}

proptest! {
    /// Single-threaded, a reject rule never admits more than `count` in any one-second window.
    #[test]
    fn reject_never_admits_more_than_count_in_any_window(
        count in 0u32..50,
        gaps in proptest::collection::vec(0u64..120, 1..400),
    ) {
        let clock = FakeClock::at_ms(50_000);
        let s = engine(&clock);
        s.flow_rules().load_rules(vec![FlowRule::qps("r", f64::from(count))]).unwrap();
        let mut admitted: Vec<u64> = Vec::new();
        for gap in gaps {
            clock.advance_ms(gap);
            if s.entry("r").enter().is_ok() {
                admitted.push(clock.now_ms());
            }
        }
        // Any window the statistics can see spans two 500 ms buckets.
        for &t in &admitted {
            let bucket_start = t - t % 500;
            let from = bucket_start - 500;
            let in_window = admitted.iter().filter(|&&a| a >= from && a <= t).count();
            prop_assert!(in_window <= count as usize, "{} admitted in window ending {}", in_window, t);
        }
    }

    /// A plain QPS rule decides the same tested from the resource's rule slot (the resource's
    /// only rule) or inline in the flow table (next to another rule) as the reject controller
    /// decides for an equal rule that never takes a fast path (a cluster rule checked
    /// locally).
    #[test]
    fn plain_qps_fast_paths_match_the_reject_controller(
        count in 0u32..30,
        steps in proptest::collection::vec((0u64..120, 1u32..4, proptest::bool::ANY), 1..300),
    ) {
        let clock = FakeClock::at_ms(50_000);
        let alone = engine(&clock);
        let beside = engine(&clock);
        let controller = engine(&clock);
        let rule = FlowRule::qps("r", f64::from(count));
        alone.flow_rules().load_rules(vec![rule.clone()]).unwrap();
        beside
            .flow_rules()
            .load_rules(vec![rule.clone(), FlowRule::thread("r", 1e9)])
            .unwrap();
        let mut cluster = rule.cluster_mode(true);
        cluster.cluster_config = Some(crate::flow::ClusterFlowConfig {
            flow_id: Some(1),
            ..Default::default()
        });
        controller.flow_rules().load_rules(vec![cluster]).unwrap();
        for (gap, batch, prioritized) in steps {
            clock.advance_ms(gap);
            let enter = |s: &Sentinel| {
                let builder = s.entry("r").batch(batch);
                let builder = if prioritized { builder.prioritized() } else { builder };
                builder.enter().is_ok()
            };
            // A prioritized call may borrow a slot and queue, which advances the fake clock
            // (by whole milliseconds): both engines decide at the same time.
            let before = clock.now_ms();
            let expected = enter(&controller);
            let waited = clock.now_ms();
            for fast in [&alone, &beside] {
                clock.set_ms(before);
                prop_assert_eq!(enter(fast), expected);
                prop_assert_eq!(clock.now_ms(), waited, "the same queueing");
            }
        }
    }
}

#[test]
fn a_concurrency_limit_holds_exactly_under_real_threads() {
    // The real clock and 16 threads: a limit of 4 never has 5 calls inside.
    let s = Sentinel::new();
    s.flow_rules()
        .load_rules(vec![FlowRule::thread("r", 4.0)])
        .unwrap();
    let (most, admitted) = crate::test_support::most_inside(20_000, || s.entry("r").enter().ok());
    assert!(most <= 4, "{most} calls were inside a limit of 4");
    assert!(admitted > 0);
    assert_eq!(s.resource_stats("r").unwrap().concurrency, 0);
}

#[test]
fn a_concurrency_reservation_is_given_back_when_a_later_check_blocks() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    // The origin's concurrency rule (checked first: it names an origin) reserves a place on
    // the origin's node; the default QPS rule then blocks.
    s.flow_rules()
        .load_rules(vec![
            FlowRule::thread("r", 5.0).limit_app("o"),
            FlowRule::qps("r", 0.0),
        ])
        .unwrap();
    assert!(s.entry("r").origin("o").enter().is_err());
    let node = s.node("r").expect("tracked");
    let origin = node.origin("o").expect("the origin's node");
    assert_eq!(origin.reserved(), 0, "given back after the QPS block");

    // A circuit breaker blocks after the flow rules passed and reserved.
    s.flow_rules()
        .load_rules(vec![FlowRule::thread("r", 5.0)])
        .unwrap();
    s.degrade_rules()
        .load_rules(vec![crate::circuit_breaker::DegradeRule::error_count(
            "r", 0.0, 1,
        )
        .min_request_amount(1)])
        .unwrap();
    let mut failing = s.entry("r").enter().unwrap();
    assert_eq!(node.stat.reserved(), 1, "held while in flight");
    failing.set_error();
    drop(failing);
    assert_eq!(node.stat.reserved(), 0, "given back on exit");
    assert!(s.entry("r").enter().is_err(), "the breaker is open");
    assert_eq!(
        node.stat.reserved(),
        0,
        "given back after the breaker's block"
    );
}

#[test]
fn a_thread_limit_counts_a_call_once_and_checks_its_batch() {
    // Sentinel: `curThreadNum + batch > count` blocks, and a call is one thread: count 10,
    // batch 5 lets six calls in.
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    s.flow_rules()
        .load_rules(vec![FlowRule::thread("r", 10.0)])
        .unwrap();
    let inside: Vec<_> = (0..20)
        .filter_map(|_| s.entry("r").batch(5).enter().ok())
        .collect();
    assert_eq!(inside.len(), 6);
    drop(inside);
    let inside: Vec<_> = (0..20)
        .filter_map(|_| s.entry("r").origin("a").batch(1).enter().ok())
        .collect();
    assert_eq!(inside.len(), 10, "the places were given back, one per call");
}
