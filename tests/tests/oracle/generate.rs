//! Random scenarios over every rule family, from a seed.
//!
//! The generator stays where the Java runner's frozen clock decides everything: rate-limiter
//! counts divide 1000 and stay at or under 1000 a second (otherwise Sentinel's
//! `ThrottlingController` reads `System.nanoTime`, which the mock cannot freeze), and queueing
//! waits stay a few milliseconds (Java really sleeps them). Known differences from Sentinel
//! are rewritten on the Rust side or avoided, each by a named rule of [`Known`] that points
//! at its row in docs/guarding.md; `interop/README.md` lists them.

use rand::rngs::StdRng;
use rand::Rng;
use serde_json::{json, Map, Value};

use super::known::{Known, Used};

fn pick<T: Clone>(rng: &mut StdRng, from: &[T]) -> T {
    from[rng.random_range(0..from.len())].clone()
}

/// The origins calls come with ("" is none). The origin `other` is left out: [`Known::OriginOther`].
const ORIGINS: &[&str] = &["", "", "app1", "app2", "default"];

/// Sentinel's name of the context of a call entered without one.
const DEFAULT_CONTEXT: &str = "sentinel_default_context";

/// A resource no generated call enters: the related resource of a relate rule that never
/// sees it.
const UNSEEN: &str = "c";

/// What the generator knows of a scenario while it writes it.
#[derive(Default)]
struct Plan {
    used: Used,
    /// the shortest `timeWindow` of any breaker loaded, in ms
    min_time_window_ms: Option<u64>,
    /// the first rules are written: what follows is a reload
    loaded: bool,
}

fn flow_rule(rng: &mut StdRng, plan: &mut Plan, resource: &str) -> Value {
    let grade = if rng.random_bool(0.75) { 1 } else { 0 };
    // thread grade with a shaping behaviour too: Sentinel ignores the behaviour there
    let behavior = if grade == 1 || rng.random_bool(0.3) {
        pick(rng, &[0, 0, 1, 2, 3])
    } else {
        0
    };
    let tiny_warm_up = grade == 1 && (behavior == 1 || behavior == 3) && rng.random_bool(0.35);
    let count: f64 = match behavior {
        _ if grade == 0 => pick(rng, &[0.0, 1.0, 2.0, 3.0]),
        // count x warmUpPeriodSec below 2 (with warmUpPeriodSec 1 below)
        1 | 3 if tiny_warm_up => 1.0,
        2 => pick(
            rng,
            &[1.0, 2.0, 5.0, 10.0, 50.0, 100.0, 250.0, 500.0, 1000.0],
        ),
        3 => pick(rng, &[2.0, 5.0, 10.0, 50.0, 100.0, 250.0, 500.0, 1000.0]),
        1 => pick(rng, &[3.0, 5.0, 10.0, 20.0]),
        _ => pick(rng, &[0.0, 1.0, 2.0, 3.0, 5.0, 10.0]),
    };
    let mut rule = json!({
        "resource": resource,
        "grade": grade,
        "count": count,
        "controlBehavior": behavior,
        "limitApp": pick(rng, &["default", "default", "app1", "other"]),
    });
    match pick(rng, &[0, 0, 0, 1, 2]) {
        1 => {
            rule["strategy"] = json!(1);
            // sometimes a resource no call enters: Java finds no node for it and passes every
            // call of the rule, whatever its count and controller; so does this engine
            rule["refResource"] = json!(if rng.random_bool(0.3) { UNSEEN } else { "b" });
        }
        2 => {
            rule["strategy"] = json!(2);
            // This engine counts calls in the default context from the load of a chain rule
            // naming it, Java from the start ([`Known::DefaultContextCountedFromLoad`]): only
            // the first rules name it.
            let context = if plan.loaded {
                plan.used.note(Known::DefaultContextCountedFromLoad);
                "ctx1"
            } else {
                pick(rng, &["ctx1", DEFAULT_CONTEXT])
            };
            rule["refResource"] = json!(context);
        }
        _ => {}
    }
    if behavior == 1 || behavior == 3 {
        rule["warmUpPeriodSec"] = json!(if tiny_warm_up {
            1
        } else {
            pick(rng, &[1, 2, 5])
        });
    }
    if rng.random_bool(0.1) {
        // no token server: checked locally with the fallback, passed without
        rule["clusterMode"] = json!(true);
        rule["clusterConfig"] = json!({
            "flowId": rng.random_range(1..1000),
            "thresholdType": 0,
            "fallbackToLocalWhenFail": rng.random_bool(0.5),
        });
    }
    if behavior == 2 || behavior == 3 {
        rule["maxQueueingTimeMs"] = json!(pick(rng, &[2, 5, 10]));
    }
    rule
}

fn flow_rules(rng: &mut StdRng, plan: &mut Plan) -> Vec<Value> {
    let n = pick(rng, &[1, 1, 2]);
    // Java checks two rules of a resource in HashSet order, and a stateful controller
    // (warm-up, rate limiter) that passes has moved when a later rule blocks: the Rust side
    // loads them in Java's order ([`Known::TwoRulesCheckOrder`]).
    if n > 1 {
        plan.used.note(Known::TwoRulesCheckOrder);
    }
    (0..n).map(|_| flow_rule(rng, plan, "a")).collect()
}

fn degrade_rule(rng: &mut StdRng, plan: &mut Plan, resource: &str) -> Value {
    let grade = pick(rng, &[0, 1, 2]);
    let count: f64 = match grade {
        0 => pick(rng, &[10.0, 50.0, 100.0]),
        1 => pick(rng, &[0.2, 0.5, 1.0]),
        _ => pick(rng, &[1.0, 2.0, 3.0, 5.0]),
    };
    let time_window: u64 = pick(rng, &[1, 2, 5]);
    plan.min_time_window_ms = Some(
        plan.min_time_window_ms
            .map_or(time_window * 1000, |m| m.min(time_window * 1000)),
    );
    let mut rule = json!({
        "resource": resource,
        "grade": grade,
        "count": count,
        "timeWindow": time_window,
        "minRequestAmount": pick(rng, &[1, 2, 5]),
        "statIntervalMs": pick(rng, &[1000, 2000, 5000]),
    });
    if grade == 0 {
        rule["slowRatioThreshold"] = json!(pick(rng, &[0.2, 0.5, 1.0]));
    }
    rule
}

/// The argument type of a scenario's hot parameters: the scenario's key for it, the item
/// `classType`, and the values calls use (as item objects).
type ParamKind = (&'static str, &'static str, &'static [&'static str]);

const PARAM_KINDS: &[ParamKind] = &[
    ("string", "java.lang.String", &["v1", "v2", "v3"]),
    ("string", "String", &["v1", "v2", "v3"]),
    ("int", "int", &["1", "2", "3"]),
    ("long", "long", &["1", "2", "3"]),
    ("double", "double", &["1.5", "2.5", "3.25"]),
    ("float", "float", &["1.5", "2.5", "3.25"]),
    ("bool", "boolean", &["true", "false"]),
];

/// Items of another type than the argument: (classType, object). Java matches none of them
/// against an argument of another class.
const OTHER_ITEMS: &[(&str, &str)] = &[
    ("java.lang.String", "1"),
    ("int", "1"),
    ("java.lang.Integer", "2"),
    ("long", "1"),
    ("java.lang.Long", "2"),
    ("double", "1.5"),
    ("float", "2.5"),
    ("boolean", "true"),
    ("java.lang.String", "true"),
    ("java.lang.String", "1.5"),
];

/// Items Java skips (or, for a boolean, reads as `false`), and one both read alike (`TRUE`):
/// (classType, object, count).
const INVALID_ITEMS: &[(&str, &str, i64)] = &[
    ("int", "x", 1),
    ("long", "1.5", 1),
    ("double", "abc", 2),
    ("java.lang.String", "v1", -1),
    ("int", "2", -1),
    ("boolean", "yes", 1),
    ("boolean", "TRUE", 0),
    ("boolean", "t", 0),
];

/// One argument of `kind` with the item text `value`, as a scenario writes it.
fn param_arg(kind: &str, value: &str) -> Value {
    match kind {
        "int" | "long" => json!({ kind: value.parse::<i64>().unwrap_or(0) }),
        "double" | "float" => json!({ kind: value.parse::<f64>().unwrap_or(0.0) }),
        "bool" => json!({ kind: value == "true" }),
        _ => json!({ kind: value }),
    }
}

/// The scenario's param-flow setup: the kind of every argument, how many arguments calls
/// carry, and whether a rule counts threads.
struct Params {
    kind: ParamKind,
    arity: usize,
    /// some rule's `paramIdx` is negative: every call has `arity` arguments
    /// ([`Known::NegativeIndexRewritten`])
    negative: bool,
    thread_grade: bool,
}

fn param_rule(rng: &mut StdRng, params: &mut Params, resource: &str) -> Value {
    let thread_grade = rng.random_bool(0.25);
    params.thread_grade |= thread_grade;
    let grade = if thread_grade { 0 } else { 1 };
    // thread grade with a shaping behaviour too: Sentinel counts threads whatever the behaviour
    let behavior = if grade == 1 || rng.random_bool(0.3) {
        pick(rng, &[0, 0, 2])
    } else {
        0
    };
    let count = if behavior == 2 && grade == 1 {
        pick(rng, &[1, 2, 5, 10, 100])
    } else {
        pick(rng, &[0, 1, 2, 3, 5])
    };
    let arity = i64::try_from(params.arity).unwrap_or(1);
    let idx = if rng.random_bool(0.3) {
        params.negative = true;
        -rng.random_range(1..=arity)
    } else {
        rng.random_range(0..arity)
    };
    let mut rule = json!({
        "resource": resource,
        "grade": grade,
        "paramIdx": idx,
        "count": count,
        "controlBehavior": behavior,
        "durationInSec": pick(rng, &[1, 1, 2]),
    });
    if behavior == 0 && grade == 1 {
        rule["burstCount"] = json!(pick(rng, &[0, 0, 2]));
    }
    if behavior == 2 {
        rule["maxQueueingTimeMs"] = json!(pick(rng, &[0, 5, 10]));
    }
    if grade == 1 && rng.random_bool(0.1) {
        rule["clusterMode"] = json!(true);
        rule["clusterConfig"] = json!({
            "flowId": rng.random_range(1..1000),
            "thresholdType": 0,
            "fallbackToLocalWhenFail": rng.random_bool(0.5),
        });
    }
    if rng.random_bool(0.5) {
        let mut items = vec![json!({
            "object": pick(rng, params.kind.2),
            "classType": params.kind.1,
            "count": pick(rng, &[0, 1, 4, 10]),
        })];
        if rng.random_bool(0.3) {
            let (class, object) = pick(rng, OTHER_ITEMS);
            items.push(
                json!({"object": object, "classType": class, "count": pick(rng, &[0, 1, 4])}),
            );
        }
        if rng.random_bool(0.2) {
            let (class, object, count) = pick(rng, INVALID_ITEMS);
            items.push(json!({"object": object, "classType": class, "count": count}));
        }
        rule["paramFlowItemList"] = Value::Array(items);
    }
    rule
}

fn param_rules(rng: &mut StdRng, plan: &mut Plan, params: &mut Params) -> Vec<Value> {
    let n = pick(rng, &[1, 1, 2]);
    // Java checks two param rules of a resource in HashSet order, and a QPS rule takes its
    // tokens before a later rule blocks: the Rust side loads them in Java's order
    // ([`Known::TwoRulesCheckOrder`]).
    if n > 1 {
        plan.used.note(Known::TwoRulesCheckOrder);
    }
    let mut list: Vec<Value> = Vec::new();
    for _ in 0..n {
        let mut rule = param_rule(rng, params, "a");
        apart_from(plan, &mut rule, &list);
        list.push(rule);
    }
    list
}

/// Whether two param rules are the same but for `paramIdx`, one of them negative: Sentinel
/// rewrites a negative index in the rule itself on its first call, and a rule equal to
/// another then shares its per-value state (its `ParameterMetric` is keyed by the rule).
fn same_once_resolved(a: &Value, b: &Value) -> bool {
    let negative = |r: &Value| r["paramIdx"].as_i64().is_some_and(|i| i < 0);
    if !negative(a) && !negative(b) {
        return false;
    }
    let without_index = |r: &Value| {
        let mut r = r.clone();
        if let Some(obj) = r.as_object_mut() {
            obj.remove("paramIdx");
        }
        r
    };
    without_index(a) == without_index(b)
}

/// Changes `rule`'s count until no rule of `others` is the same once Sentinel has resolved a
/// negative index ([`Known::NegativeIndexRewritten`]).
fn apart_from(plan: &mut Plan, rule: &mut Value, others: &[Value]) {
    while others.iter().any(|o| same_once_resolved(rule, o)) {
        plan.used.note(Known::NegativeIndexRewritten);
        rule["count"] = json!(rule["count"].as_i64().unwrap_or(0) + 1);
    }
}

fn authority_rule(rng: &mut StdRng) -> Value {
    // an entry with spaces matches no origin in Java ([`Known::AuthorityListTrimmed`])
    json!({
        "resource": "a",
        "strategy": pick(rng, &[0, 1]),
        "limitApp": pick(rng, &["app1", "app1,app2", "app2", "app1, app2", "app2 ,app1", "default,app1"]),
    })
}

fn system_rule(rng: &mut StdRng, kind: &str) -> Value {
    match kind {
        "qps" => json!({"qps": pick(rng, &[2.0, 5.0, 10.0])}),
        "thread" => json!({"maxThread": pick(rng, &[1, 2, 3])}),
        "rt" => json!({"avgRt": pick(rng, &[10, 50])}),
        "load" => json!({"highestSystemLoad": pick(rng, &[1.0, 1.5])}),
        _ => json!({"highestCpuUsage": pick(rng, &[0.5, 0.8])}),
    }
}

fn family_rules(
    rng: &mut StdRng,
    plan: &mut Plan,
    params: &mut Params,
    family: &str,
    system_kind: &str,
) -> Vec<Value> {
    match family {
        "flow" => flow_rules(rng, plan),
        "degrade" => (0..pick(rng, &[1, 1, 2]))
            .map(|_| degrade_rule(rng, plan, "a"))
            .collect(),
        "paramFlow" => param_rules(rng, plan, params),
        "authority" => vec![authority_rule(rng)],
        _ => vec![system_rule(rng, system_kind)],
    }
}

/// The rules as this engine is to read them: each rewrite of a known difference applied
/// (see [`Known`]), noted in `used`. `None` when nothing is rewritten.
fn rust_rules(rules: &Map<String, Value>, kind: ParamKind, used: &mut Used) -> Option<Value> {
    let mut out = rules.clone();
    let mut changed = false;
    for rule in out
        .get_mut("flow")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        let period = rule.get("warmUpPeriodSec").and_then(Value::as_f64);
        let count = rule.get("count").and_then(Value::as_f64).unwrap_or(0.0);
        // (a thread-grade rule ignores its behaviour)
        if rule.get("grade") != Some(&json!(0)) && period.is_some_and(|p| p * count < 2.0) {
            // warm-up: blocks every call; warm-up rate limiter: passes every call (its wait
            // is NaN, rounded to 0), and still names its limitApp for the `other` rules
            let pass_all = match rule.get("controlBehavior").and_then(Value::as_i64) {
                Some(1) => false,
                Some(3) => true,
                _ => continue,
            };
            used.note(Known::WarmUpBelowTwo);
            rule["controlBehavior"] = json!(0);
            rule["count"] = json!(if pass_all { 1_000_000.0 } else { 0.0 });
            if let Some(obj) = rule.as_object_mut() {
                obj.remove("warmUpPeriodSec");
                obj.remove("maxQueueingTimeMs");
            }
            changed = true;
        }
    }
    for rule in out
        .get_mut("authority")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        let list = rule.get("limitApp").and_then(Value::as_str).unwrap_or("");
        if list.contains(' ') {
            used.note(Known::AuthorityListTrimmed);
            let kept: Vec<&str> = list.split(',').filter(|a| !a.contains(' ')).collect();
            rule["limitApp"] = json!(kept.join(","));
            changed = true;
        }
    }
    for rule in out
        .get_mut("paramFlow")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        let Some(items) = rule
            .get_mut("paramFlowItemList")
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        let before = items.clone();
        items.retain(|item| rust_item(item, kind, used));
        changed |= *items != before;
    }
    changed.then_some(Value::Object(out))
}

/// Whether the Rust side keeps a param-flow item: not one of a numeric type Java keeps apart
/// from the argument's ([`Known::NumericTypesApart`]).
fn rust_item(item: &Value, kind: ParamKind, used: &mut Used) -> bool {
    let class = item.get("classType").and_then(Value::as_str).unwrap_or("");
    let family = |c: &str| match c {
        "int" | "java.lang.Integer" => Some("int"),
        "long" | "java.lang.Long" => Some("long"),
        "double" | "java.lang.Double" => Some("double"),
        "float" | "java.lang.Float" => Some("float"),
        _ => None,
    };
    let apart = matches!(
        (family(class), kind.0),
        (Some("int"), "long")
            | (Some("long"), "int")
            | (Some("float"), "double")
            | (Some("double"), "float")
    );
    if apart {
        used.note(Known::NumericTypesApart);
        return false;
    }
    true
}

/// The arguments of one call: `params.arity` values of the scenario's kind (sometimes one
/// more or one fewer when no index is negative), a list or array at times.
fn call_args(rng: &mut StdRng, params: &Params, used: &mut Used) -> Value {
    let values = params.kind.2;
    let arity = if params.negative {
        used.note(Known::NegativeIndexRewritten);
        params.arity
    } else {
        match rng.random_range(0..10) {
            0 => params.arity.saturating_sub(1),
            1 => params.arity + 1,
            _ => params.arity,
        }
    };
    let args: Vec<Value> = (0..arity)
        .map(|_| {
            if rng.random_bool(0.15) {
                let first = rng.random_range(0..values.len());
                // a repeated value against a thread-grade rule: [`Known::ThreadListDuplicates`]
                let second = if params.thread_grade {
                    used.note(Known::ThreadListDuplicates);
                    (first + 1) % values.len()
                } else {
                    rng.random_range(0..values.len())
                };
                let list = [values[first], values[second]].map(|v| param_arg(params.kind.0, v));
                let shape = if rng.random_bool(0.5) {
                    "list"
                } else {
                    "array"
                };
                json!({ shape: list })
            } else {
                param_arg(params.kind.0, pick(rng, values))
            }
        })
        .collect();
    Value::Array(args)
}

/// A held call: its name and the clock's bound when it entered (ms from the start, counting
/// every advance, and every RT as if every call passed).
struct Hold {
    name: String,
    entered_ms: u64,
}

/// Held calls leave before `known` would see them (a reload of breakers or of thread-grade
/// param rules while calls are inside).
fn exit_all(plan: &mut Plan, holds: &mut Vec<Hold>, steps: &mut Vec<Value>, known: Known) {
    if holds.is_empty() {
        return;
    }
    plan.used.note(known);
    for hold in holds.drain(..) {
        steps.push(json!({"op": "exit", "hold": hold.name}));
    }
}

/// With breakers, a held call leaves before the clock may reach a further `timeWindow`
/// after it entered (`clock_bound` is the latest the clock can be):
/// [`Known::ProbeHeldPastTimeWindow`].
fn exit_before_time_window(
    plan: &mut Plan,
    holds: &mut Vec<Hold>,
    steps: &mut Vec<Value>,
    clock_bound: u64,
) {
    let Some(window) = plan.min_time_window_ms else {
        return;
    };
    let mut i = 0;
    while i < holds.len() {
        if clock_bound >= holds[i].entered_ms + window {
            plan.used.note(Known::ProbeHeldPastTimeWindow);
            let hold = holds.remove(i);
            steps.push(json!({"op": "exit", "hold": hold.name}));
        } else {
            i += 1;
        }
    }
}

/// A random scenario named `name`.
pub(crate) fn scenario(rng: &mut StdRng, name: &str) -> Value {
    let mut plan = Plan::default();
    let mut rules = Map::new();
    let families = pick(rng, &[1, 1, 2]);
    let mut chosen = Vec::new();
    while chosen.len() < families {
        let f = pick(
            rng,
            &[
                "flow",
                "flow",
                "degrade",
                "paramFlow",
                "paramFlow",
                "authority",
                "system",
            ],
        );
        if !chosen.contains(&f) {
            chosen.push(f);
        }
    }
    let mut params = Params {
        kind: pick(rng, PARAM_KINDS),
        arity: pick(rng, &[1, 1, 2, 3]),
        negative: false,
        thread_grade: false,
    };
    let system_kind = pick(rng, &["qps", "thread", "rt", "load", "load", "cpu"]);
    for family in &chosen {
        let list = family_rules(rng, &mut plan, &mut params, family, system_kind);
        rules.insert((*family).to_owned(), Value::Array(list));
    }
    plan.loaded = true;
    let mut param_now: Vec<Value> = rules
        .get("paramFlow")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let has_chain = |rules: &Map<String, Value>| {
        rules
            .get("flow")
            .and_then(Value::as_array)
            .is_some_and(|l| l.iter().any(|r| r.get("strategy") == Some(&json!(2))))
    };
    let mut chain = has_chain(&rules);
    let params_on = chosen.contains(&"paramFlow");
    let system = chosen.contains(&"system");
    let load_kind = system && (system_kind == "load" || system_kind == "cpu");
    let batch_free = chosen.iter().all(|f| *f == "authority" || *f == "degrade");
    if !batch_free {
        plan.used.note(Known::BatchZero);
    }

    let mut steps = Vec::new();
    let mut rust_loads = Map::new();
    let mut holds: Vec<Hold> = Vec::new();
    let mut next_hold = 0;
    // an upper bound of the clock, from the start (ms)
    let mut clock_bound: u64 = 0;
    if load_kind && rng.random_bool(0.6) {
        steps.push(json!({"op": "system", "load": 2.0, "cpu": 0.9}));
    }
    for _ in 0..rng.random_range(12..36) {
        let roll = rng.random_range(0..100);
        if roll < 25 {
            let ms: u64 = pick(rng, &[1, 10, 100, 250, 499, 500, 999, 1000, 1500, 3000]);
            // A probe held past a further timeWindow is replaced here and never in Java
            // ([`Known::ProbeHeldPastTimeWindow`]): held calls leave before it.
            clock_bound += ms;
            exit_before_time_window(&mut plan, &mut holds, &mut steps, clock_bound);
            steps.push(json!({"op": "advance", "ms": ms}));
            continue;
        }
        if roll < 30 {
            // rules replaced (one family) while the counts stay
            let family = pick(rng, &chosen);
            let mut list = family_rules(rng, &mut plan, &mut params, family, system_kind);
            if family == "paramFlow" {
                // Java rewrote a loaded rule's negative paramIdx on its first call, so a rule
                // loaded again is another rule there than here, with other per-value state
                // ([`Known::NegativeIndexRewritten`]): a reload changes it.
                let mut others = param_now.clone();
                for rule in &mut list {
                    apart_from(&mut plan, rule, &others);
                    others.push(rule.clone());
                }
                param_now.clone_from(&list);
            }
            let threads = list.iter().any(|r| r.get("grade") == Some(&json!(0)));
            if family == "paramFlow" && threads {
                exit_all(
                    &mut plan,
                    &mut holds,
                    &mut steps,
                    Known::ParamThreadsLoadedInFlight,
                );
            }
            let mut loaded = Map::new();
            loaded.insert(family.to_owned(), Value::Array(list));
            chain |= has_chain(&loaded);
            if let Some(rust) = rust_rules(&loaded, params.kind, &mut plan.used) {
                rust_loads.insert(steps.len().to_string(), rust);
            }
            steps.push(json!({"op": "load", "rules": Value::Object(loaded)}));
            continue;
        }
        if roll < 35 && !holds.is_empty() {
            let hold = holds.remove(rng.random_range(0..holds.len()));
            let mut exit = json!({"op": "exit", "hold": hold.name});
            if rng.random_bool(0.3) {
                exit["error"] = json!(true);
            }
            steps.push(exit);
            continue;
        }
        if roll < 41 && load_kind {
            steps.push(json!({"op": "system", "load": pick(rng, &[0.5, 2.0, 2.0]), "cpu": pick(rng, &[0.2, 0.9])}));
            continue;
        }
        let resource = if rng.random_bool(0.8) { "a" } else { "b" };
        let mut step = json!({"op": "enter", "resource": resource});
        let origin = pick(rng, ORIGINS);
        if chosen.contains(&"flow") {
            plan.used.note(Known::OriginOther);
        }
        if !origin.is_empty() {
            step["origin"] = json!(origin);
        }
        if chain && rng.random_bool(0.5) {
            step["context"] = json!("ctx1");
        }
        if system && rng.random_bool(0.85) {
            step["inbound"] = json!(true);
        }
        if params_on && (params.negative || rng.random_bool(0.9)) {
            step["args"] = call_args(rng, &params, &mut plan.used);
        }
        if rng.random_bool(0.15) {
            // A batch of 0 counts as 1 here and as 0 in Java ([`Known::BatchZero`]): it is
            // generated only where no rule reads the batch (authority, breakers).
            step["batch"] = if batch_free && rng.random_bool(0.5) {
                json!(0)
            } else {
                json!(pick(rng, &[2, 3]))
            };
        }
        // about one call in five holds (one in four for the load checks, which need calls inside)
        let hold_limit = if load_kind { 62 } else { 55 };
        if roll < hold_limit {
            let name = format!("h{next_hold}");
            next_hold += 1;
            step["hold"] = json!(name);
            holds.push(Hold {
                name,
                entered_ms: clock_bound,
            });
        } else {
            let rt: u64 = pick(rng, &[0, 0, 0, 5, 20, 60, 150]);
            let repeat: u64 = pick(rng, &[1, 1, 2, 3, 5]);
            step["rt"] = json!(rt);
            if rng.random_bool(0.2) {
                step["error"] = json!(true);
            }
            step["repeat"] = json!(repeat);
            // a held call's age counts every RT the calls after it may take
            clock_bound += rt * repeat;
            exit_before_time_window(&mut plan, &mut holds, &mut steps, clock_bound);
        }
        steps.push(step);
    }
    let mut scenario = json!({"name": name, "rules": Value::Object(rules.clone()), "steps": steps});
    let mut rust = Map::new();
    if let Some(r) = rust_rules(&rules, params.kind, &mut plan.used) {
        rust.insert("rules".to_owned(), r);
    }
    if !rust_loads.is_empty() {
        rust.insert("loads".to_owned(), Value::Object(rust_loads));
    }
    if plan.used.0.contains_key(&Known::TwoRulesCheckOrder) {
        rust.insert("check_order".to_owned(), json!("java"));
    }
    if !rust.is_empty() {
        scenario["rust"] = Value::Object(rust);
    }
    if !plan.used.0.is_empty() {
        scenario["known_differences"] = plan.used.to_json();
    }
    scenario
}
