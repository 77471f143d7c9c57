//! Each controller on the fake clock: reject (and batches), the rate limiter, warm-up and
//! warm-up + rate limiter, prioritized calls that borrow a future slot, several shaping rules,
//! and counts, periods and batches at their extremes.

use super::*;

#[test]
fn reject_rule_admits_exactly_count_per_window() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("r", 10.0)])
        .unwrap();
    assert_eq!(burst(&s, "r", 25), 10);
    let err = s.entry("r").enter().unwrap_err();
    assert!(matches!(&err, BlockError::Flow { rule, .. } if rule.count == 10.0));
    assert_eq!(err.family(), RuleFamily::Flow);
    assert_eq!(err.resource(), "r");
    // Half a window later the first bucket still counts.
    clock.advance_ms(500);
    assert_eq!(burst(&s, "r", 5), 0);
    // A full window later everything has slid out.
    clock.advance_ms(500);
    assert_eq!(burst(&s, "r", 25), 10);
    let stats = s.resource_stats("r").unwrap();
    assert_eq!(stats.pass_qps, 10.0);
    // 15 blocked now plus the 5 blocked half a window ago.
    assert_eq!(stats.block_qps, 20.0);
}

#[test]
fn batch_counts_permits() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("r", 10.0)])
        .unwrap();
    assert!(s.entry("r").batch(6).enter().is_ok());
    assert!(s.entry("r").batch(5).enter().is_err());
    assert!(s.entry("r").batch(4).enter().is_ok());
}

#[test]
fn zero_count_blocks_everything() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("r", 0.0)])
        .unwrap();
    assert_eq!(burst(&s, "r", 3), 0);
}

#[test]
fn rate_limiter_spaces_passes_and_rejects_past_max_queueing() {
    let clock = FakeClock::at_ms(10_000);
    let limiter = RateLimiter::new(10.0, 500);
    // Concurrent callers at the same instant: each is scheduled 100 ms after the previous.
    assert_eq!(limiter.check(1, &clock), Decision::Pass);
    for i in 1..=5u64 {
        assert_eq!(
            limiter.check(1, &clock),
            Decision::Wait(Duration::from_millis(100 * i))
        );
    }
    // The seventh would wait 600 ms > 500 ms.
    assert_eq!(limiter.check(1, &clock), Decision::Block);
    // Once time catches up, the slot frees.
    clock.set_ms(10_600);
    assert_eq!(limiter.check(1, &clock), Decision::Pass);
}

/// Calls offered every 10 µs (or a quarter of the spacing, if larger) for `seconds` to a
/// limiter of `count`/s that queues at most 1 ms: how many were admitted with a slot inside
/// the interval.
fn admitted_by_rate_limiter(count: f64, seconds: u64) -> u64 {
    let clock = FakeClock::at_ms(0);
    let limiter = RateLimiter::new(count, 1);
    let end = Duration::from_secs(seconds);
    let step = Duration::from_micros(10).max(Duration::from_secs_f64(0.25 / count));
    let mut admitted = 0;
    let mut now = Duration::ZERO;
    while now < end {
        clock.set_nanos(now.as_nanos() as u64);
        match limiter.check(1, &clock) {
            Decision::Pass => admitted += 1,
            Decision::Wait(wait) if now + wait < end => admitted += 1,
            _ => {}
        }
        now += step;
    }
    admitted
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Over 10 simulated seconds the rate limiter admits `count x 10` calls, within 1% (or one
    /// call, for counts whose spacing does not divide 10 s evenly).
    #[test]
    fn rate_limiter_admits_its_count_at_any_rate(count in 1.0f64..5_000.0) {
        let admitted = admitted_by_rate_limiter(count, 10) as f64;
        let expected = count * 10.0;
        prop_assert!(
            (admitted - expected).abs() <= (expected * 0.01).max(1.0),
            "{count}/s admitted {admitted} in 10 s, expected {expected}"
        );
    }

    /// Rules at their boundary values load and take calls of any batch without panicking
    /// (debug builds panic on overflow).
    #[test]
    fn boundary_rules_never_panic(
        count in prop_oneof![Just(0.0), Just(1e-300), Just(1e-6), Just(1.0), Just(1e18), Just(1e308)],
        period in prop_oneof![Just(1u32), Just(4_000_000), Just(u32::MAX)],
        queue in prop_oneof![Just(1u32), Just(u32::MAX)],
        behavior in prop_oneof![
            Just(ControlBehavior::Reject),
            Just(ControlBehavior::WarmUp),
            Just(ControlBehavior::RateLimiter),
            Just(ControlBehavior::WarmUpRateLimiter),
        ],
        thread in any::<bool>(),
        batches in proptest::collection::vec(prop_oneof![Just(0u32), Just(1), Just(u32::MAX)], 1..4),
    ) {
        let clock = FakeClock::at_ms(0);
        let s = engine(&clock);
        let rule = if thread { FlowRule::thread("r", count) } else { FlowRule::qps("r", count) };
        let rule = rule
            .control_behavior(behavior)
            .warm_up_period_sec(period)
            .max_queueing_time_ms(queue);
        // Refused or loaded, never a panic; then calls of every batch.
        let _ = s.flow_rules().load_rules(vec![rule]);
        for batch in batches {
            let _ = s.entry("r").batch(batch).prioritized().enter();
            let _ = s.entry("r").batch(batch).enter();
        }
    }
}

#[test]
fn rate_limiter_spacing_is_exact_below_1000_per_second() {
    // Millisecond spacing admitted 1 000 for 700/s, 500 for 600/s and 333 for 400/s.
    for count in [700.0, 600.0, 400.0, 333.0] {
        let admitted = admitted_by_rate_limiter(count, 2) as f64;
        assert!(
            (admitted - 2.0 * count).abs() <= 2.0 * count * 0.01,
            "{count}/s admitted {admitted} in 2 s"
        );
    }
}

#[test]
fn the_first_call_after_process_start_passes_the_rate_limiter() {
    for behavior in [
        ControlBehavior::RateLimiter,
        ControlBehavior::WarmUpRateLimiter,
    ] {
        let clock = FakeClock::at_ms(0);
        let s = engine(&clock);
        s.flow_rules()
            .load_rules(vec![FlowRule::qps("r", 1.0)
                .control_behavior(behavior)
                .max_queueing_time_ms(500)])
            .unwrap();
        assert!(s.entry("r").enter().is_ok(), "{behavior:?}");
        assert_eq!(
            clock.now_ms(),
            0,
            "{behavior:?}: the first call does not queue"
        );
    }
}

#[test]
fn rate_limiter_on_the_real_clock_never_admits_more_than_its_count() {
    // A fresh engine on the system clock: the first call passes, and 700/s never admits more
    // than 700 calls a second (plus the first, and one queued). How many fewer depends on how
    // much CPU a loaded machine gives this thread, so only the upper bound is checked here;
    // the exact count is `rate_limiter_spacing_is_exact_below_1000_per_second`'s, on the fake
    // clock.
    let s = Sentinel::new();
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("r", 700.0)
            .control_behavior(ControlBehavior::RateLimiter)
            .max_queueing_time_ms(1)])
        .unwrap();
    let start = std::time::Instant::now();
    assert!(s.entry("r").enter().is_ok(), "the first call passes");
    let mut admitted = 1u32;
    while start.elapsed() < Duration::from_millis(200) {
        if s.entry("r").enter().is_ok() {
            admitted += 1;
        }
    }
    // The engine's clock ticks each millisecond, so allow the tick it may lag behind.
    let elapsed = start.elapsed().as_secs_f64() + 0.002;
    let most = (elapsed * 700.0).ceil() as u32 + 2;
    assert!(admitted <= most, "admitted {admitted}, at most {most}");
}

#[test]
fn rate_limiter_through_the_engine_spaces_calls_by_one_over_count() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("r", 20.0)
            .control_behavior(ControlBehavior::RateLimiter)
            .max_queueing_time_ms(1_000)])
        .unwrap();
    let mut times = Vec::new();
    for _ in 0..5 {
        let _e = s.entry("r").enter().unwrap();
        times.push(clock.now_nanos());
    }
    // The fake clock advances by each queueing wait: exactly 50 ms apart.
    for pair in times.windows(2) {
        assert_eq!(pair[1] - pair[0], 50_000_000);
    }
}

#[test]
fn rate_limiter_spaces_in_nanoseconds_above_1000_qps() {
    let clock = FakeClock::at_ms(10_000);
    let limiter = RateLimiter::new(4_000.0, 10);
    assert_eq!(limiter.check(1, &clock), Decision::Pass);
    // 1/4000 s = 250 µs, which a millisecond clock would round to 0.
    assert_eq!(
        limiter.check(1, &clock),
        Decision::Wait(Duration::from_micros(250))
    );
}

/// Runs `seconds` of load: each second, `offered` calls spread over the second.
#[test]
fn warm_up_starts_near_a_third_and_reaches_count() {
    let clock = FakeClock::at_ms(100_000);
    let s = engine(&clock);
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("r", 90.0)
            .control_behavior(ControlBehavior::WarmUp)
            .warm_up_period_sec(10)])
        .unwrap();
    let passed = run_load(&s, &clock, "r", 16, 200);
    // Cold: about count / 3 in the first second.
    assert!(
        (28..=32).contains(&passed[0]),
        "first second passed {}",
        passed[0]
    );
    // Rising monotonically (allowing for window edges) ...
    assert!(passed[5] > passed[0] && passed[9] > passed[5], "{passed:?}");
    // ... and at count once the warm-up period has been sustained.
    assert!(passed[12..].iter().all(|p| *p == 90), "{passed:?}");
}

#[test]
fn warm_up_cools_down_again_when_idle() {
    let controller = WarmUp::new(30.0, 10, 3);
    let full = controller.stored_tokens();
    assert!(full > 0);
    let clock = FakeClock::at_ms(100_000);
    let s = engine(&clock);
    s.flow_rules()
        .load_rules(vec![
            FlowRule::qps("r", 30.0).control_behavior(ControlBehavior::WarmUp)
        ])
        .unwrap();
    let hot = run_load(&s, &clock, "r", 14, 60);
    assert_eq!(*hot.last().unwrap(), 30);
    // Idle for a long time: the bucket refills and the rule is cold again.
    clock.advance_ms(120_000);
    let cold = run_load(&s, &clock, "r", 1, 60);
    assert!(cold[0] <= 12, "after idling passed {}", cold[0]);
}

#[test]
fn warm_up_rate_limiter_spaces_at_the_warming_rate() {
    let clock = FakeClock::at_ms(100_000);
    let s = engine(&clock);
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("r", 30.0)
            .control_behavior(ControlBehavior::WarmUpRateLimiter)
            .max_queueing_time_ms(2_000)])
        .unwrap();
    let a = clock.now_ms();
    drop(s.entry("r").enter().unwrap());
    drop(s.entry("r").enter().unwrap());
    // Cold: 10 QPS, so 100 ms apart.
    assert_eq!(clock.now_ms() - a, 100);
}

#[test]
fn prioritized_call_borrows_a_future_slot_when_a_bucket_is_about_to_slide_out() {
    let clock = FakeClock::at_ms(9_600);
    let s = engine(&clock);
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("r", 10.0)])
        .unwrap();
    assert_eq!(burst(&s, "r", 10), 10); // all in the bucket [9500, 10000)
    clock.set_ms(10_100);
    assert!(s.entry("r").enter().is_err(), "a normal call is blocked");
    let before = clock.now_ms();
    let entry = s
        .entry("r")
        .prioritized()
        .enter()
        .expect("borrows the next bucket");
    // It waited until [9500, 10000) slid out at 10500.
    assert_eq!(clock.now_ms() - before, 400);
    drop(entry);
    let stats = s.resource_stats("r").unwrap();
    // The borrowed pass counts in the bucket it borrowed from.
    assert_eq!(stats.pass_qps, 1.0);
    // And as an occupied pass in the bucket where it borrowed, [10000, 10500).
    assert_eq!(stats.occupied_pass_qps, 1.0);
    // A second prioritized call finds the next slot taken by nothing yet: room for 9 more.
    assert!(s.entry("r").prioritized().enter().is_ok());
}

#[test]
fn prioritized_call_is_blocked_when_no_slot_frees_within_the_timeout() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("r", 10.0)])
        .unwrap();
    assert_eq!(burst(&s, "r", 10), 10); // all in [10000, 10500): they stay until 11000
    clock.set_ms(10_100);
    assert!(s.entry("r").prioritized().enter().is_err());
}

#[test]
fn warm_up_without_room_to_warm_is_refused() {
    let s = Sentinel::new();
    let rule = FlowRule::qps("r", 1.0)
        .control_behavior(ControlBehavior::WarmUp)
        .warm_up_period_sec(1);
    let err = s.flow_rules().load_rules(vec![rule]).unwrap_err();
    assert_eq!(err.issues()[0].field, "warmUpPeriodSec", "{err}");
    // count x period = 2 warms (from 1/3 of the count), and a count of 0 blocks as ever.
    for (count, period) in [(1.0, 2), (0.0, 1)] {
        let rule = FlowRule::qps("r", count)
            .control_behavior(ControlBehavior::WarmUp)
            .warm_up_period_sec(period);
        assert!(
            s.flow_rules().load_rules(vec![rule]).is_ok(),
            "{count} x {period}"
        );
    }
}

#[test]
fn extreme_counts_periods_and_batches_never_panic() {
    // Debug builds panic on arithmetic overflow: these used to.
    let clock = FakeClock::at_ms(0);
    let s = engine(&clock);
    let rules = vec![
        FlowRule::qps("warm", 1e18)
            .control_behavior(ControlBehavior::WarmUp)
            .warm_up_period_sec(u32::MAX),
        FlowRule::qps("warm-rl", 1e-6)
            .control_behavior(ControlBehavior::WarmUpRateLimiter)
            .warm_up_period_sec(4_000_000)
            .max_queueing_time_ms(u32::MAX),
        FlowRule::qps("rl", 1e308)
            .control_behavior(ControlBehavior::RateLimiter)
            .max_queueing_time_ms(u32::MAX),
        FlowRule::qps("tiny-rl", 1e-300)
            .control_behavior(ControlBehavior::RateLimiter)
            .max_queueing_time_ms(u32::MAX),
    ];
    s.flow_rules().load_rules(rules).unwrap();
    for resource in ["warm", "warm-rl", "rl", "tiny-rl"] {
        for batch in [0, 1, u32::MAX] {
            let _ = s.entry(resource).batch(batch).enter();
        }
    }
}

#[test]
fn several_shaping_rules_wait_about_the_longest_wait() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    let shaping = |count: f64, app: &str| {
        FlowRule::qps("r", count)
            .limit_app(app)
            .control_behavior(ControlBehavior::RateLimiter)
            .max_queueing_time_ms(1_000)
    };
    s.flow_rules()
        .load_rules(vec![shaping(10.0, "default"), shaping(5.0, "other")])
        .unwrap();
    drop(s.entry("r").origin("a").enter().unwrap());
    let before = clock.now_ms();
    drop(s.entry("r").origin("a").enter().unwrap());
    // 100 ms and 200 ms of spacing: the call waits 200 ms, not 300.
    assert_eq!(clock.now_ms() - before, 200);
}

#[test]
fn an_equal_rule_keeps_its_rate_limiter_slot_across_a_reload() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    let rule = FlowRule::qps("r", 10.0)
        .control_behavior(ControlBehavior::RateLimiter)
        .max_queueing_time_ms(500);
    s.flow_rules().load_rules(vec![rule.clone()]).unwrap();
    drop(s.entry("r").enter().unwrap());
    // Reloading the same rule keeps its schedule: the next call still queues 100 ms.
    s.flow_rules().load_rules(vec![rule]).unwrap();
    let before = clock.now_ms();
    drop(s.entry("r").enter().unwrap());
    assert_eq!(clock.now_ms() - before, 100);
    // A changed rule starts a new, idle schedule.
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("r", 20.0)
            .control_behavior(ControlBehavior::RateLimiter)
            .max_queueing_time_ms(500)])
        .unwrap();
    let before = clock.now_ms();
    drop(s.entry("r").enter().unwrap());
    assert_eq!(clock.now_ms(), before);
}

#[test]
fn warm_up_rate_limiter_spacing_tightens_as_the_rule_warms() {
    let clock = FakeClock::at_ms(100_000);
    let s = engine(&clock);
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("r", 30.0)
            .control_behavior(ControlBehavior::WarmUpRateLimiter)
            .warm_up_period_sec(5)
            .max_queueing_time_ms(2_000)])
        .unwrap();
    // A caller that always waits for its slot: each pass moves the fake clock to it.
    let mut times = Vec::new();
    while clock.now_ms() < 120_000 {
        drop(s.entry("r").enter().unwrap());
        times.push(clock.now_nanos());
    }
    let gaps_ms: Vec<f64> = times
        .windows(2)
        .map(|w| (w[1] - w[0]) as f64 / 1e6)
        .collect();
    let first = gaps_ms[0];
    let last = gaps_ms[gaps_ms.len() - 1];
    // Cold: 10/s (count / cold factor 3), 100 ms apart; warm: 30/s, 33.3 ms apart.
    assert!((first - 100.0).abs() < 1.0, "first gap {first} ms");
    assert!((last - 1000.0 / 30.0).abs() < 1.0, "last gap {last} ms");
    // In between it only tightens (each second's spacing no wider than the one before).
    let per_second: Vec<f64> = gaps_ms.chunks(10).map(|c| c[0]).collect();
    assert!(
        per_second.windows(2).all(|w| w[1] <= w[0] + 0.5),
        "{per_second:?}"
    );
}

#[test]
fn a_reload_keeps_each_name_and_puts_a_resource_s_rules_in_check_order() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    let table = || s.inner.shared.rules.load().tables.flow.clone();
    let load = |count: f64| {
        let rules = vec![
            FlowRule::qps("a", count),
            FlowRule::qps("b", count),
            FlowRule::qps("a", 1.0).limit_app("app1"),
            FlowRule::qps("a", count),
        ];
        s.flow_rules().load_rules(rules).unwrap();
    };
    load(5.0);
    let first = table();
    let (name, rules) = first.get_key_value("a").unwrap();
    // The specific origin's rule first, and the duplicate gone.
    let apps: Vec<&str> = rules.rule_refs().map(|r| r.limit_app.as_str()).collect();
    assert_eq!(apps, ["app1", "default"]);
    load(6.0);
    let second = table();
    let (again, rules) = second.get_key_value("a").unwrap();
    assert!(
        std::sync::Arc::ptr_eq(name, again),
        "the name's allocation is kept"
    );
    let counts: Vec<f64> = rules.rule_refs().map(|r| r.count).collect();
    assert_eq!(counts, [1.0, 6.0]);
}

#[test]
fn a_table_keeps_every_resource_s_rules_in_one_list_its_slots_share() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    let load = |count: f64| {
        s.flow_rules()
            .load_rules(vec![FlowRule::qps("a", count), FlowRule::qps("b", 2.0)])
            .unwrap();
        let snapshot = s.inner.shared.rules.load_full();
        let flow = |name: &str| {
            let at = snapshot.index.get(name).expect("a slot");
            let slot = snapshot.slot(at).expect("the slot");
            slot.flow.clone().expect("flow rules")
        };
        (flow("a"), flow("b"))
    };
    let count = |rules: &crate::flow::FlowRef| rules.only_rule().map(|r| r.count);
    let (a, b) = load(1.0);
    assert!(
        a.shares_list_with(&b),
        "one list, not one allocation per resource"
    );
    assert_eq!((count(&a), count(&b)), (Some(1.0), Some(2.0)));
    let (again, _) = load(3.0);
    assert_eq!(count(&again), Some(3.0));
    assert!(!again.shares_list_with(&a), "each table its own list");
    assert_eq!(count(&a), Some(1.0), "a slot keeps the table it came from");
}
