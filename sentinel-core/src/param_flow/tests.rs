//! Param-flow semantics on the fake clock (Sentinel's `ParamFlowChecker`, sentinel-golang's
//! hotspot rules).

use super::*;
use crate::test_support::engine;
use crate::{BlockError, Clock, FakeClock, RuleFamily, Sentinel};

fn load(s: &Sentinel, rules: Vec<ParamFlowRule>) {
    s.param_flow_rules().load_rules(rules).expect("valid rules");
}

/// Enters `resource` with `args` `n` times at the current time; returns how many passed.
fn passes(s: &Sentinel, resource: &str, args: &[ParamValue<'_>], n: usize) -> usize {
    (0..n)
        .filter(|_| s.entry(resource).args(args).enter().is_ok())
        .count()
}

#[test]
fn each_value_has_its_own_limit() {
    let clock = FakeClock::new();
    let s = engine(&clock);
    load(&s, vec![ParamFlowRule::qps("r", 0, 2.0)]);
    let alice = [ParamValue::from("alice")];
    let bob = [ParamValue::from("bob")];
    assert_eq!(passes(&s, "r", &alice, 5), 2);
    assert_eq!(passes(&s, "r", &bob, 5), 2);
    clock.advance_ms(999);
    assert_eq!(passes(&s, "r", &alice, 5), 0, "within the same duration");
    clock.advance_ms(2);
    assert_eq!(
        passes(&s, "r", &alice, 5),
        2,
        "refilled after a whole duration"
    );
    // Over ten seconds at 20 calls a second, a value gets its 2 a second.
    let mut passed = 0;
    for _ in 0..200 {
        clock.advance_ms(50);
        passed += passes(&s, "r", &bob, 1);
    }
    assert!((19..=21).contains(&passed), "{passed}");
}

#[test]
fn an_exception_item_has_its_own_count() {
    let clock = FakeClock::new();
    let s = engine(&clock);
    load(
        &s,
        vec![ParamFlowRule::qps("r", 0, 1.0)
            .item(ParamFlowItem::new("42", "long", 5))
            .item(ParamFlowItem::new("vip", "String", 3))
            .item(ParamFlowItem::new("true", "boolean", 0))],
    );
    assert_eq!(passes(&s, "r", &[42u32.into()], 10), 5);
    assert_eq!(passes(&s, "r", &[43u32.into()], 10), 1);
    assert_eq!(
        passes(&s, "r", &["42".into()], 10),
        1,
        "a string is not the integer"
    );
    assert_eq!(passes(&s, "r", &["vip".into()], 10), 3);
    assert_eq!(
        passes(&s, "r", &[true.into()], 10),
        0,
        "count 0 blocks the value"
    );
}

#[test]
fn burst_adds_to_the_bucket() {
    let clock = FakeClock::new();
    let s = engine(&clock);
    load(
        &s,
        vec![ParamFlowRule::qps("r", 0, 2.0)
            .burst_count(3)
            .duration_in_sec(2)],
    );
    let v = [ParamValue::from(7)];
    assert_eq!(passes(&s, "r", &v, 10), 5, "count + burst at once");
    clock.advance_ms(1500);
    assert_eq!(
        passes(&s, "r", &v, 10),
        0,
        "no refill before a whole duration"
    );
    clock.advance_ms(600);
    // 2.1 s at 2 per 2 s: 2 tokens.
    assert_eq!(passes(&s, "r", &v, 10), 2);
    clock.advance_ms(20_000);
    assert_eq!(passes(&s, "r", &v, 10), 5, "refills up to count + burst");
}

#[test]
fn the_rate_limiter_spaces_each_value() {
    let clock = FakeClock::new();
    let s = engine(&clock);
    // 10 a second: one call per 100 ms per value, queueing under 250 ms.
    load(&s, vec![ParamFlowRule::qps("r", 0, 10.0).rate_limiter(250)]);
    let (a, b) = ([ParamValue::from("a")], [ParamValue::from("b")]);
    let start = clock.now_ms();
    assert!(s.entry("r").args(&a).enter().is_ok());
    assert!(s.entry("r").args(&a).enter().is_ok(), "queues 100 ms");
    assert_eq!(clock.now_ms() - start, 100, "the fake clock slept the wait");
    assert!(s.entry("r").args(&a).enter().is_ok());
    assert_eq!(clock.now_ms() - start, 200);
    // "b" has its own spacing: its first call does not wait.
    let before = clock.now_ms();
    assert!(s.entry("r").args(&b).enter().is_ok());
    assert_eq!(clock.now_ms(), before);
    // Without queueing, a call inside the spacing is rejected.
    load(&s, vec![ParamFlowRule::qps("r", 0, 10.0).rate_limiter(0)]);
    assert!(s.entry("r").args(&b).enter().is_ok());
    assert!(s.entry("r").args(&b).enter().is_err());
    clock.advance_ms(100);
    assert!(s.entry("r").args(&b).enter().is_ok());
}

#[test]
fn thread_grade_limits_calls_in_flight_per_value() {
    let clock = FakeClock::new();
    let s = engine(&clock);
    load(&s, vec![ParamFlowRule::thread("r", 0, 2.0)]);
    let (a, b) = ([ParamValue::from("a")], [ParamValue::from("b")]);
    let first = s.entry("r").args(&a).enter();
    let second = s.entry("r").args(&a).enter();
    assert!(first.is_ok() && second.is_ok());
    assert!(s.entry("r").args(&a).enter().is_err());
    let other = s.entry("r").args(&b).enter();
    assert!(other.is_ok(), "another value has its own places");
    drop(first);
    let third = s.entry("r").args(&a).enter();
    assert!(third.is_ok(), "an exit gives its place back");
    assert!(s.entry("r").args(&a).enter().is_err());
}

#[test]
fn a_later_block_gives_the_thread_place_back() {
    let clock = FakeClock::new();
    let s = engine(&clock);
    load(&s, vec![ParamFlowRule::thread("r", 0, 1.0)]);
    s.flow_rules()
        .load_rules(vec![crate::flow::FlowRule::qps("r", 0.0)])
        .expect("valid");
    let a = [ParamValue::from("a")];
    for _ in 0..3 {
        let blocked = s.entry("r").args(&a).enter();
        assert_eq!(blocked.err().map(|e| e.family()), Some(RuleFamily::Flow));
    }
    s.flow_rules().load_rules(vec![]).expect("clears");
    assert!(s.entry("r").args(&a).enter().is_ok(), "no place leaked");
}

#[test]
fn each_element_of_a_list_argument_is_a_value_of_its_own() {
    let clock = FakeClock::new();
    let s = Sentinel::builder()
        .clock(clock.clone())
        .param_values_in_errors(true)
        .build();
    load(&s, vec![ParamFlowRule::qps("r", 0, 2.0)]);
    let (a, b, c) = ("a".into(), "b".into(), "c".into());
    let ab = [a, b];
    let nested = [ParamValue::List(&ab), c];
    // a, b and c each take a token.
    assert_eq!(passes(&s, "r", &[ParamValue::List(&nested)], 1), 1);
    assert_eq!(passes(&s, "r", &[a], 1), 1, "a has one token left");
    // a is hot now: a list holding it is blocked, naming a; c still took its token.
    let list = [c, a];
    let err = s.entry("r").args(&[ParamValue::List(&list)]).enter().err();
    let Some(BlockError::ParamFlow { value, .. }) = &err else {
        panic!("{err:?}");
    };
    assert_eq!(value.as_deref(), Some("\"a\""));
    assert_eq!(passes(&s, "r", &[c], 1), 0, "c's tokens are used up");
    assert_eq!(passes(&s, "r", &[b], 2), 1);
    assert_eq!(
        passes(&s, "r", &[ParamValue::List(&[])], 3),
        3,
        "no element, no check"
    );
}

#[test]
fn a_list_argument_holds_a_thread_place_per_element_until_it_exits() {
    let clock = FakeClock::new();
    let s = engine(&clock);
    load(&s, vec![ParamFlowRule::thread("r", 0, 1.0)]);
    let (a, b) = ("a".into(), "b".into());
    let both = [a, b];
    let args = [ParamValue::List(&both)];
    let entry = s.entry("r").args(&args).enter();
    assert!(entry.is_ok());
    assert!(s.entry("r").args(&[a]).enter().is_err());
    assert!(s.entry("r").args(&[b]).enter().is_err());
    // A list whose second element is busy gives back the first element's place.
    let c = "c".into();
    let c_then_a = [c, a];
    assert!(s
        .entry("r")
        .args(&[ParamValue::List(&c_then_a)])
        .enter()
        .is_err());
    drop(entry);
    assert!(s.entry("r").args(&[a]).enter().is_ok());
    let c_alone = [c];
    assert!(
        s.entry("r").args(&c_alone).enter().is_ok(),
        "no place leaked"
    );
}

#[test]
fn a_negative_index_counts_from_the_end() {
    let clock = FakeClock::new();
    let s = engine(&clock);
    load(&s, vec![ParamFlowRule::qps("r", -1, 1.0)]);
    let short = [ParamValue::from("x")];
    let long = [ParamValue::from("y"), ParamValue::from("x")];
    assert_eq!(passes(&s, "r", &short, 3), 1, "-1 of one argument: \"x\"");
    assert_eq!(passes(&s, "r", &long, 3), 0, "-1 of two: \"x\" again");
    assert_eq!(passes(&s, "r", &[ParamValue::from("y")], 3), 1);
    load(&s, vec![ParamFlowRule::qps("r", -3, 0.0)]);
    assert_eq!(passes(&s, "r", &long, 3), 3, "past the start: no argument");
}

#[test]
fn a_call_without_the_argument_is_not_checked() {
    let clock = FakeClock::new();
    let s = engine(&clock);
    load(&s, vec![ParamFlowRule::qps("r", 2, 0.0)]);
    assert_eq!(passes(&s, "r", &[ParamValue::from(1)], 3), 3);
    assert_eq!(passes(&s, "r", &[], 3), 3);
    assert!(s.entry("r").enter().is_ok());
    assert_eq!(passes(&s, "r", &[1.into(), 2.into(), 3.into()], 3), 0);
}

#[test]
fn a_param_key_selects_an_attachment() {
    let clock = FakeClock::new();
    let s = engine(&clock);
    load(&s, vec![ParamFlowRule::qps("r", 0, 1.0).param_key("user")]);
    let user = [("user", ParamValue::from("u1"))];
    let other = [("tenant", ParamValue::from("u1"))];
    let enter = |attachments| s.entry("r").attachments(attachments).enter().is_ok();
    assert!(enter(&user));
    assert!(!enter(&user));
    assert!(
        enter(&other) && enter(&other),
        "another attachment is not checked"
    );
    let args = [ParamValue::from("u1")];
    assert!(
        s.entry("r").args(&args).enter().is_ok(),
        "nor a positional one"
    );
}

#[test]
fn block_errors_name_the_rule_and_hide_the_value_unless_asked() {
    let clock = FakeClock::new();
    let hot = [ParamValue::from("user-secret-id")];
    for reveal in [false, true] {
        let s = Sentinel::builder()
            .clock(clock.clone())
            .param_values_in_errors(reveal)
            .build();
        load(&s, vec![ParamFlowRule::qps("r", 0, 0.0)]);
        let err = s.entry("r").args(&hot).enter().err();
        let Some(BlockError::ParamFlow { rule, value, .. }) = &err else {
            panic!("{err:?}");
        };
        assert_eq!(rule.param_idx, Some(0));
        let message = err.as_ref().map(ToString::to_string).unwrap_or_default();
        assert!(
            message.contains("paramFlow rule") && message.contains("argument 0"),
            "{message}"
        );
        assert_eq!(message.contains("user-secret-id"), reveal, "{message}");
        assert_eq!(value.is_some(), reveal);
    }
}

#[test]
fn a_reload_that_keeps_the_rule_keeps_each_values_bucket() {
    let clock = FakeClock::new();
    let s = engine(&clock);
    let rule = ParamFlowRule::qps("r", 0, 2.0);
    load(&s, vec![rule.clone()]);
    let a = [ParamValue::from("a")];
    assert_eq!(passes(&s, "r", &a, 2), 2);
    load(&s, vec![rule.clone(), ParamFlowRule::qps("other", 0, 1.0)]);
    assert_eq!(passes(&s, "r", &a, 2), 0, "the bucket survived the reload");
    load(&s, vec![rule.clone().burst_count(1)]);
    assert_eq!(passes(&s, "r", &a, 5), 3, "a changed rule starts afresh");
}

/// One rule, 1 000 000 distinct values, and a hot value among them: the table stays its
/// size, and the hot value is limited exactly as it is without the flood (an evicted hot
/// value would start again with a full bucket, and pass more).
#[test]
fn a_flood_of_distinct_values_neither_grows_memory_nor_frees_the_hot_value() {
    // The hot value's passes, per second, over 100 seconds of 20 tries a second; with
    // `flood`, 10 000 distinct values a second come between the tries.
    let run = |flood: bool| -> (Vec<usize>, usize, usize) {
        let clock = FakeClock::new();
        let s = engine(&clock);
        load(&s, vec![ParamFlowRule::qps("r", 0, 5.0)]);
        let bytes = s.param_flow_memory_bytes();
        let handle = s.resource("r");
        let hot = [ParamValue::from("hot")];
        let start = clock.now_ms();
        let mut per_second = Vec::new();
        for second in 0..100u64 {
            let mut hot_passed = 0;
            for i in 0..10_000u64 {
                clock.set_ms(start + second * 1000 + i / 10);
                if flood {
                    let cold = [ParamValue::from(second * 10_000 + i)];
                    let _ = handle.entry().args(&cold).enter();
                }
                if i % 500 == 0 && handle.entry().args(&hot).enter().is_ok() {
                    hot_passed += 1;
                }
            }
            per_second.push(hot_passed);
        }
        (per_second, bytes, s.param_flow_memory_bytes())
    };
    let (flooded, before, after) = run(true);
    let (quiet, ..) = run(false);
    assert_eq!(flooded, quiet, "the flood changed the hot value's limit");
    let total: usize = quiet.iter().sum();
    assert!(
        (450..=505).contains(&total),
        "{total} passes in 100 s at 5/s"
    );
    // 4 000 values by default: 6 000 slots (750 buckets of 8 tags, a state and a last use
    // each, a byte of insertion flag per bucket) and a sketch of 4 x 8 192 4-bit counters.
    assert_eq!(before, 750 * 64 + 6_000 * 16 + 750 + 4 * 8_192 / 2);
    assert_eq!(after, before, "the table never grows");
}

/// Eight threads on one hot value: the token bucket's compare-and-set admits exactly the
/// count (the flow rules' check-then-count slack does not apply here).
#[test]
fn eight_threads_on_one_value_share_its_limit() {
    let clock = FakeClock::new();
    let s = engine(&clock);
    load(&s, vec![ParamFlowRule::qps("r", 0, 100.0).burst_count(20)]);
    let passed = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..8 {
            scope.spawn(|| {
                let handle = s.resource("r");
                let hot = [ParamValue::from("hot")];
                for _ in 0..1000 {
                    if handle.entry().args(&hot).enter().is_ok() {
                        passed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            });
        }
    });
    assert_eq!(passed.into_inner(), 120);
}

#[test]
fn eight_threads_never_exceed_a_thread_limit_per_value() {
    let clock = FakeClock::new();
    let s = engine(&clock);
    load(&s, vec![ParamFlowRule::thread("r", 0, 3.0)]);
    let hot = [ParamValue::from("hot")];
    let (most, admitted) =
        crate::test_support::most_inside(200, || s.entry("r").args(&hot).enter().ok());
    assert!(most <= 3 && admitted > 0, "{most} inside at once");
}
