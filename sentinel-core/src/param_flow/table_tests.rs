//! The per-value table under races, floods and a full house; items, codes, cluster rules and
//! the rate limiter's exactness (issue-level regressions, each failing before its fix).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};

use super::*;
use crate::datasource::{Converter, GoHotspotJson, ParamFlowJson};
use crate::test_support::engine;
use crate::{FakeClock, Sentinel};

fn load(s: &Sentinel, rules: Vec<ParamFlowRule>) {
    s.param_flow_rules().load_rules(rules).expect("valid rules");
}

fn passes(s: &Sentinel, args: &[ParamValue<'_>], n: usize) -> usize {
    (0..n)
        .filter(|_| s.entry("r").args(args).enter().is_ok())
        .count()
}

/// Two threads meet here before each round. Both spin for a moment, so that on a quiet machine
/// they are released together (unlike `std::sync::Barrier`'s wake-up); one still alone after
/// the spin sleeps on a condition variable, so that on a loaded machine a round costs a
/// wake-up rather than the time slices of whatever else runs there (a spin that only yielded
/// took 473 s for the 60 000 rounds below with both cores busy; this, 11 s).
struct SpinBarrier {
    arrived: AtomicUsize,
    lock: Mutex<()>,
    all_in: Condvar,
}

impl SpinBarrier {
    const SPINS: u32 = 2_000;

    fn new() -> Self {
        SpinBarrier {
            arrived: AtomicUsize::new(0),
            lock: Mutex::new(()),
            all_in: Condvar::new(),
        }
    }

    fn wait(&self, round: usize) {
        let target = 2 * (round + 1);
        {
            // Counted under the lock, so a waiter that checks under it cannot miss the wake-up.
            let _held = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
            if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 >= target {
                self.all_in.notify_all();
                return;
            }
        }
        for _ in 0..Self::SPINS {
            if self.arrived.load(Ordering::Acquire) >= target {
                return;
            }
            std::hint::spin_loop();
        }
        let mut held = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        while self.arrived.load(Ordering::Acquire) < target {
            held = self
                .all_in
                .wait(held)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// Two callers racing onto the first call of each of `rounds` fresh values: how many values
/// were admitted twice. Each caller holds its entry until both have tried. The clock stands
/// still, so that a caller descheduled for a second on a loaded machine cannot see a refill.
fn doubles(rule: ParamFlowRule, rounds: usize) -> usize {
    let clock = FakeClock::at_ms(1_000);
    let s = engine(&clock);
    load(&s, vec![rule]);
    let (start, end) = (SpinBarrier::new(), SpinBarrier::new());
    let admitted: Vec<AtomicUsize> = (0..rounds).map(|_| AtomicUsize::new(0)).collect();
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                let handle = s.resource("r");
                for (round, count) in admitted.iter().enumerate() {
                    let value = [ParamValue::from(round as u64)];
                    start.wait(round);
                    let entry = handle.entry().args(&value).enter();
                    if entry.is_ok() {
                        count.fetch_add(1, Ordering::Relaxed);
                    }
                    end.wait(round);
                    drop(entry);
                }
            });
        }
    });
    admitted
        .iter()
        .filter(|c| c.load(Ordering::Relaxed) > 1)
        .count()
}

#[test]
fn racing_first_calls_of_a_new_value_admit_exactly_one() {
    const ROUNDS: usize = 20_000;
    assert_eq!(doubles(ParamFlowRule::qps("r", 0, 1.0), ROUNDS), 0, "QPS");
    assert_eq!(
        doubles(ParamFlowRule::qps("r", 0, 1.0).rate_limiter(0), ROUNDS),
        0,
        "rate limiter, no queue"
    );
    assert_eq!(
        doubles(ParamFlowRule::thread("r", 0, 1.0), ROUNDS),
        0,
        "thread grade 1"
    );
}

/// `values` recurring values, each calling twice a second at a limit of one a second, for
/// four seconds on the fake clock: the calls admitted in all.
fn admitted_among(values: u64) -> usize {
    let clock = FakeClock::at_ms(1_000);
    let s = engine(&clock);
    load(&s, vec![ParamFlowRule::qps("r", 0, 1.0)]);
    let handle = s.resource("r");
    let mut admitted = 0;
    for second in 0..4u64 {
        for half in 0..2u64 {
            for v in 0..values {
                clock.set_ms(1_000 + second * 1000 + half * 500 + v * 400 / values);
                let arg = [ParamValue::from(v)];
                if handle.entry().args(&arg).enter().is_ok() {
                    admitted += 1;
                }
            }
        }
    }
    admitted
}

#[test]
fn recurring_values_up_to_the_capacity_all_stay_limited() {
    // Each value alone gets what it gets among the others (the same schedule, shifted).
    let alone = admitted_among(1);
    // The default capacity is 4 000 values (durationInSec 1).
    for values in [2_000, 3_000, 4_000] {
        assert_eq!(
            admitted_among(values),
            alone * values as usize,
            "{values} recurring values"
        );
    }
}

#[test]
fn a_thread_grade_table_full_of_calls_in_flight_blocks_new_values() {
    let clock = FakeClock::new();
    let s = engine(&clock);
    // Capacity 8: 12 slots, rounded up to two buckets of 8.
    load(
        &s,
        vec![ParamFlowRule::thread("r", 0, 1.0).params_max_capacity(8)],
    );
    let handle = s.resource("r");
    let args: Vec<[ParamValue<'_>; 1]> = (0..100u64).map(|v| [ParamValue::from(v)]).collect();
    let mut inside = Vec::new();
    let mut refused = 0;
    for arg in &args {
        match handle.entry().args(arg).enter() {
            Ok(entry) => inside.push((arg, entry)),
            Err(_) => refused += 1,
        }
    }
    assert!(inside.len() <= 16, "{} values in flight", inside.len());
    assert_eq!(refused + inside.len(), 100, "no value passed unchecked");
    for (arg, _) in &inside {
        assert!(
            handle.entry().args(*arg).enter().is_err(),
            "a value in flight keeps its count"
        );
    }
    inside.clear();
    assert!(handle.entry().args(&args[99]).enter().is_ok(), "room again");
}

/// A value calling 10 times a second (limit 5) among `flood` one-time values a second, for
/// three seconds: its passes per second.
fn hot_passes_under_flood(flood: u64) -> Vec<usize> {
    let clock = FakeClock::at_ms(1_000);
    let s = engine(&clock);
    load(&s, vec![ParamFlowRule::qps("r", 0, 5.0)]);
    let handle = s.resource("r");
    let hot = [ParamValue::from("hot")];
    let mut per_second = Vec::new();
    let mut cold = 0u64;
    for second in 0..3u64 {
        let mut passed = 0;
        for tenth in 0..10u64 {
            let base = 1_000 + second * 1000 + tenth * 100;
            for i in 0..flood / 10 {
                clock.set_ms(base + i * 100 / (flood / 10));
                cold += 1;
                let _ = handle.entry().args(&[ParamValue::from(cold)]).enter();
            }
            clock.set_ms(base + 99);
            if handle.entry().args(&hot).enter().is_ok() {
                passed += 1;
            }
        }
        per_second.push(passed);
    }
    per_second
}

#[test]
fn a_value_that_keeps_coming_back_stays_limited_under_a_flood() {
    for flood in [10_000, 50_000, 80_000, 100_000] {
        let per_second = hot_passes_under_flood(flood);
        eprintln!("{flood} one-time values a second: the hot value passed {per_second:?}");
        // New, it may be replaced between its first calls (each a fresh first call) until
        // it has been seen more often than the flood's values; then it stays.
        assert!(per_second[0] <= 8, "{flood}: {per_second:?}");
        assert_eq!(per_second[1..], [5, 5], "{flood} one-time values a second");
    }
}

#[test]
fn a_cluster_qps_rule_passes_without_fallback_and_thread_grade_stays_local() {
    let clock = FakeClock::new();
    let s = engine(&clock);
    let cluster = |fallback: bool| {
        let mut rule = ParamFlowRule::qps("r", 0, 1.0);
        rule.cluster_mode = true;
        rule.cluster_config = Some(ParamFlowClusterConfig {
            flow_id: Some(7),
            threshold_type: 0,
            fallback_to_local_when_fail: fallback,
            sample_count: 10,
            window_interval_ms: 1000,
        });
        rule
    };
    let a = [ParamValue::from("a")];
    load(&s, vec![cluster(false)]);
    assert_eq!(passes(&s, &a, 5), 5, "no token server, no fallback: pass");
    assert_eq!(s.param_flow_rules().rules().len(), 1, "still active");
    load(&s, vec![cluster(true)]);
    assert_eq!(passes(&s, &a, 5), 1, "fallback: checked locally");
    let mut thread = cluster(false);
    thread.grade = ParamFlowGrade::Thread;
    load(&s, vec![thread]);
    let _held = s.entry("r").args(&a).enter().expect("first in flight");
    assert!(
        s.entry("r").args(&a).enter().is_err(),
        "thread grade: local"
    );
}

#[test]
fn a_float_item_matches_an_f32_argument() {
    let clock = FakeClock::new();
    let s = engine(&clock);
    load(
        &s,
        vec![ParamFlowRule::qps("r", 0, 1.0)
            .item(ParamFlowItem::new("0.1", "float", 3))
            .item(ParamFlowItem::new("0.2", "double", 4))],
    );
    assert_eq!(passes(&s, &[0.1f32.into()], 10), 3);
    assert_eq!(passes(&s, &[0.2f64.into()], 10), 4);
}

#[test]
fn of_two_items_for_one_value_the_last_counts() {
    let clock = FakeClock::new();
    let s = engine(&clock);
    load(
        &s,
        vec![ParamFlowRule::qps("r", 0, 1.0)
            .item(ParamFlowItem::new("42", "long", 2))
            .item(ParamFlowItem::new("42", "int", 6))],
    );
    assert_eq!(passes(&s, &[42u32.into()], 10), 6);
}

#[test]
fn boolean_items_read_as_java_reads_them() {
    // Java's Boolean.parseBoolean: `true` in any case, anything else is false.
    for (text, value) in [
        ("true", true),
        ("TRUE", true),
        ("tRuE", true),
        ("false", false),
        ("yes", false),
        ("t", false),
        ("1", false),
    ] {
        let item = ParamFlowItem::new(text, "boolean", 3);
        let clock = FakeClock::new();
        let s = engine(&clock);
        load(&s, vec![ParamFlowRule::qps("r", 0, 1.0).item(item)]);
        assert_eq!(passes(&s, &[value.into()], 10), 3, "{text:?}");
        assert_eq!(passes(&s, &[(!value).into()], 10), 1, "{text:?}");
    }
    // sentinel-golang's spellings, through its converter.
    for (text, value) in [
        ("t", true),
        ("1", true),
        ("T", true),
        ("f", false),
        ("0", false),
    ] {
        let json = format!(
            r#"[{{"resource":"r","metricType":1,"paramIndex":0,"threshold":1,"durationInSec":1,
                 "specificItems":[{{"valKind":2,"valStr":"{text}","threshold":3}}]}}]"#
        );
        let rules = GoHotspotJson::new()
            .convert(json.as_bytes())
            .expect("a Go hotspot rule")
            .param_flow
            .unwrap_or_default();
        let clock = FakeClock::new();
        let s = engine(&clock);
        load(&s, rules);
        assert_eq!(passes(&s, &[value.into()], 10), 3, "Go {text:?}");
    }
    let yes = r#"[{"resource":"r","paramIndex":0,"threshold":1,"durationInSec":1,
                   "specificItems":[{"valKind":2,"valStr":"yes","threshold":3}]}]"#;
    assert!(
        GoHotspotJson::new().convert(yes.as_bytes()).is_err(),
        "Go refuses it"
    );
}

/// Issue #48 2.2: one item Java skips (a count of -1, a value its classType cannot read, an
/// absent count) no longer makes lenient loading drop the whole rule, whose limit would then
/// disappear for every value: the item is skipped with a warning naming the rule's index and
/// the item's field, as Sentinel skips it; strict loading still refuses the rule.
#[test]
fn lenient_loading_skips_an_unusable_item_and_keeps_the_rule() {
    let json = r#"[{"resource":"other","paramIdx":0,"count":5},
        {"resource":"r","paramIdx":0,"count":1,"paramFlowItemList":[
            {"object":"v1","classType":"String"},
            {"object":"v2","classType":"String","count":-1},
            {"object":"x","classType":"int","count":5},
            {"object":"v3","classType":"String","count":4}]}]"#;
    assert!(
        ParamFlowJson::new().convert(json.as_bytes()).is_err(),
        "strict refuses it"
    );
    let converted = ParamFlowJson::lenient()
        .convert_with(json.as_bytes(), crate::Validation::Lenient)
        .expect("lenient loads it");
    let fields: Vec<(usize, &str)> = converted.warnings.iter().map(|w| w.position()).collect();
    assert_eq!(
        fields,
        [
            (1, "paramFlowItemList[0].count"),
            (1, "paramFlowItemList[1].count"),
            (1, "paramFlowItemList[2].object"),
        ],
        "{:?}",
        converted.warnings
    );
    assert!(converted.skipped.is_empty(), "{:?}", converted.skipped);
    let rules = converted.value.param_flow.unwrap_or_default();
    assert_eq!(rules[1].param_flow_item_list.len(), 1, "v3 stays");
    let typed = rules[1].clone();
    for (how, s) in [("converted", rules), ("typed", Vec::new())] {
        let clock = FakeClock::new();
        let engine = engine(&clock);
        if how == "converted" {
            load(&engine, s);
        } else {
            // The API's lenient load skips the same items, with the same warnings.
            let mut rule = typed.clone();
            rule.param_flow_item_list
                .push(ParamFlowItem::new("x", "int", 5));
            let report = engine
                .param_flow_rules()
                .load_rules_lenient(vec![rule])
                .expect("loads");
            assert_eq!(report.skipped_rules, 0);
            let fields: Vec<(usize, &str)> = report.warnings.iter().map(|w| w.position()).collect();
            assert_eq!(fields, [(0, "paramFlowItemList[1].object")]);
        }
        for value in ["v1", "v2", "x"] {
            assert_eq!(
                passes(&engine, &[value.into()], 3),
                1,
                "{how}: {value} at count 1"
            );
        }
        assert_eq!(
            passes(&engine, &["v3".into()], 6),
            4,
            "{how}: v3 keeps its item"
        );
    }
}

#[test]
fn warm_up_codes_load_and_run_the_token_bucket() {
    for code in [1, 3] {
        let json = format!(
            r#"[{{"resource":"r","paramIdx":0,"count":2,"controlBehavior":{code},"burstCount":1}}]"#
        );
        let rules = ParamFlowJson::new()
            .convert(json.as_bytes())
            .expect("loads, as in Java")
            .param_flow
            .unwrap_or_default();
        let clock = FakeClock::new();
        let s = engine(&clock);
        load(&s, rules);
        assert_eq!(passes(&s, &["a".into()], 10), 3, "code {code}: 2 + burst 1");
    }
}

#[test]
fn the_per_value_rate_limiter_is_exact_at_any_count() {
    // 600/s per value: one call every 1.67 ms, where whole milliseconds gave 2 ms (500/s).
    // 3 000/s: above 2 000 x durationInSec, whole milliseconds gave no limit at all. Calls
    // come every 2 us; a pass lands up to that late, so within 1%.
    for count in [600.0, 3_000.0] {
        let step_us = 2;
        let clock = FakeClock::at_ms(1_000);
        let s = engine(&clock);
        load(&s, vec![ParamFlowRule::qps("r", 0, count).rate_limiter(0)]);
        let a = [ParamValue::from("a")];
        let mut admitted = 0;
        for i in 0..1_000_000 / step_us {
            clock.set_nanos(1_000_000_000 + i * step_us * 1_000);
            admitted += passes(&s, &a, 1);
        }
        let expected = count as usize;
        assert!(
            admitted.abs_diff(expected) <= expected / 100,
            "{count}/s admitted {admitted} in a second"
        );
    }
}

#[test]
fn huge_batches_and_durations_neither_overflow_nor_pass() {
    let clock = FakeClock::at_ms(1_000);
    let s = engine(&clock);
    let mut rule = ParamFlowRule::qps("r", 0, 1.0).rate_limiter(0);
    rule.duration_in_sec = 1_073_741_824;
    load(&s, vec![rule]);
    let a = [ParamValue::from("a")];
    assert!(s.entry("r").args(&a).enter().is_ok(), "the first call");
    assert!(
        s.entry("r").args(&a).enter().is_err(),
        "batch 1 waits 2^30 s"
    );
    assert!(
        s.entry("r").args(&a).batch(1 << 31).enter().is_err(),
        "a huge batch waits longer, it does not wrap around"
    );
    let mut rule = ParamFlowRule::qps("r", 0, 1.0).rate_limiter(0);
    rule.duration_in_sec = 4_294_968;
    load(&s, vec![rule]);
    let _ = s.entry("r").args(&a).batch(u32::MAX).enter();
    let _ = s.entry("r").args(&a).batch(u32::MAX).enter();
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    /// Param rules at their boundary values (Sentinel JSON and the Go hotspot format) load or
    /// are refused, and take calls of any batch without panicking (debug builds panic on
    /// overflow).
    #[test]
    fn boundary_param_rules_never_panic(
        count in proptest::prop_oneof![
            proptest::strategy::Just("0"), proptest::strategy::Just("1e-9"),
            proptest::strategy::Just("1"), proptest::strategy::Just("1e18"),
            proptest::strategy::Just("1e308")
        ],
        duration in proptest::prop_oneof![
            proptest::strategy::Just(1u64), proptest::strategy::Just(4_294_968),
            proptest::strategy::Just(1_073_741_824), proptest::strategy::Just(u64::from(u32::MAX))
        ],
        behavior in 0u8..4,
        grade in 0u8..2,
        burst in proptest::prop_oneof![
            proptest::strategy::Just(0u64), proptest::strategy::Just(u64::from(u32::MAX))
        ],
        queue in proptest::prop_oneof![
            proptest::strategy::Just(0u64), proptest::strategy::Just(u64::from(u32::MAX))
        ],
        go in proptest::bool::ANY,
        batches in proptest::collection::vec(
            proptest::prop_oneof![
                proptest::strategy::Just(0u32), proptest::strategy::Just(1),
                proptest::strategy::Just(1 << 31), proptest::strategy::Just(u32::MAX)
            ],
            1..5,
        ),
    ) {
        let clock = FakeClock::at_ms(1_000);
        let s = engine(&clock);
        let json = if go {
            format!(
                r#"[{{"resource":"r","metricType":{grade},"controlBehavior":{},"paramIndex":0,"threshold":{count},"burstCount":{burst},"durationInSec":{duration},"maxQueueingTimeMs":{queue}}}]"#,
                behavior % 2
            )
        } else {
            format!(
                r#"[{{"resource":"r","grade":{grade},"controlBehavior":{behavior},"paramIdx":0,"count":{count},"burstCount":{burst},"durationInSec":{duration},"maxQueueingTimeMs":{queue}}}]"#
            )
        };
        let decoded = if go {
            GoHotspotJson::new().convert(json.as_bytes())
        } else {
            ParamFlowJson::new().convert(json.as_bytes())
        };
        if let Some(rules) = decoded.ok().and_then(|set| set.param_flow) {
            let _ = s.param_flow_rules().load_rules(rules);
        }
        let a = [ParamValue::from(7u64)];
        for batch in batches {
            let _ = s.entry("r").args(&a).batch(batch).enter();
            clock.advance_ms(1);
        }
    }
}

#[test]
fn thread_grade_counts_a_call_once_whatever_its_batch() {
    // Sentinel: `++threadCount <= threshold`, the batch plays no part (found by the Java
    // oracle, param_thread_batch).
    let clock = FakeClock::new();
    let s = engine(&clock);
    load(&s, vec![ParamFlowRule::thread("r", 0, 2.0)]);
    let a = [ParamValue::from("a")];
    let first = s.entry("r").args(&a).batch(2).enter();
    let second = s.entry("r").args(&a).batch(2).enter();
    assert!(
        first.is_ok() && second.is_ok(),
        "two calls of a batch of 2 at count 2"
    );
    assert!(s.entry("r").args(&a).batch(2).enter().is_err(), "a third");
}

/// A value calling every millisecond (limit 5 a second) among `flood` one-time values a
/// second, for three seconds on the fake clock: its passes per second.
fn every_ms_value_under_flood(flood: u64) -> Vec<usize> {
    let clock = FakeClock::at_ms(1_000);
    let s = engine(&clock);
    load(&s, vec![ParamFlowRule::qps("r", 0, 5.0)]);
    let handle = s.resource("r");
    let hot = [ParamValue::from("hot")];
    let per_ms = flood / 1000;
    let mut per_second = vec![0; 3];
    let mut cold = 0u64;
    for ms in 0..3_000u64 {
        clock.set_ms(1_000 + ms);
        for _ in 0..per_ms {
            cold += 1;
            let _ = handle.entry().args(&[ParamValue::from(cold)]).enter();
        }
        if handle.entry().args(&hot).enter().is_ok() {
            per_second[(ms / 1000) as usize] += 1;
        }
    }
    per_second
}

/// Issue #48 part 3: with 333 one-time values a millisecond, a value calling every
/// millisecond at 5 a second was admitted 69 times in 3 s (every call from 2 307 to
/// 2 375 ms): the sketch's 4-bit counters saturate under such a flood, every newcomer looked
/// as popular as it, and the least recently used of equals went. A value's hits in its slot
/// now come first: a one-time value has one, a value that keeps calling more.
#[test]
fn a_value_calling_every_millisecond_stays_limited_under_floods() {
    for flood in [100_000, 333_000] {
        let per_second = every_ms_value_under_flood(flood);
        eprintln!("{flood} one-time values a second: the every-ms value passed {per_second:?}");
        // Its first second: new, it may be replaced before its second call (a fresh first
        // call again); measured 5 in both floods, asserted at most 10.
        assert!(per_second[0] <= 10, "{flood}: {per_second:?}");
        assert_eq!(per_second[1..], [5, 5], "{flood} one-time values a second");
    }
}

/// The same with an unpaced flood: one thread enters one-time values as fast as it can on
/// the real clock, and the value whenever a millisecond has passed. Whatever the machine's
/// speed, the value gets at most its limit in each second after its first.
#[test]
fn a_value_calling_every_millisecond_stays_limited_under_an_unpaced_flood() {
    let s = Sentinel::new();
    load(&s, vec![ParamFlowRule::qps("r", 0, 5.0)]);
    let handle = s.resource("r");
    let hot = [ParamValue::from("hot")];
    let clock = crate::SystemClock::new();
    use crate::Clock;
    let start = clock.now_ms();
    let first_second = start / 1000 + 1;
    let mut per_second = std::collections::BTreeMap::<u64, usize>::new();
    let (mut cold, mut last) = (0u64, u64::MAX);
    while clock.now_ms() < (first_second + 3) * 1000 {
        cold += 1;
        let _ = handle.entry().args(&[ParamValue::from(cold)]).enter();
        let now = clock.now_ms();
        if now != last {
            last = now;
            let passed = handle.entry().args(&hot).enter().is_ok();
            *per_second.entry(now / 1000).or_default() += usize::from(passed);
        }
    }
    eprintln!("unpaced flood of {cold} one-time values: the value passed {per_second:?}");
    for (second, passed) in per_second.range(first_second + 1..) {
        assert!(*passed <= 5, "second {second}: {passed}: {per_second:?}");
    }
}
