//! What a set of scenarios exercises: the features the generator must reach (issue #48's blind
//! spots among them), counted from the scenario files, and the decisions Java made.

use std::collections::BTreeMap;

use serde_json::Value;

fn list(v: Option<&Value>) -> &[Value] {
    v.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn rules_of<'a>(rules: &'a Value, family: &str) -> &'a [Value] {
    list(rules.get(family))
}

/// The numeric class of an item type or an argument key, as Java tells them apart.
fn class_of(class: &str) -> &str {
    match class {
        "int" | "java.lang.Integer" => "int",
        "long" | "java.lang.Long" => "long",
        "double" | "java.lang.Double" => "double",
        "float" | "java.lang.Float" => "float",
        "boolean" | "java.lang.Boolean" | "bool" => "bool",
        _ => "string",
    }
}

fn invalid_item(item: &Value) -> bool {
    let class = class_of(item.get("classType").and_then(Value::as_str).unwrap_or(""));
    let object = item.get("object").and_then(Value::as_str).unwrap_or("");
    let count = item.get("count").and_then(Value::as_i64);
    let parses = match class {
        "int" | "long" => object.parse::<i64>().is_ok(),
        "double" | "float" => object.parse::<f64>().is_ok(),
        "bool" => object.eq_ignore_ascii_case("true") || object.eq_ignore_ascii_case("false"),
        _ => true,
    };
    !parses || count.is_none_or(|c| c < 0)
}

/// The first scalar argument's key in a call's arguments (inside lists and arrays too).
fn arg_kind(args: &[Value]) -> Option<String> {
    args.iter().find_map(|a| {
        let (key, value) = a.as_object()?.iter().next()?;
        match key.as_str() {
            "list" | "array" => arg_kind(list(Some(value))),
            other => Some(other.to_owned()),
        }
    })
}

/// The features `scenario` exercises, each once.
pub(crate) fn features(scenario: &Value) -> Vec<&'static str> {
    let mut out = Vec::new();
    let steps = list(scenario.get("steps"));
    let mut rule_sets: Vec<&Value> = scenario.get("rules").into_iter().collect();
    for step in steps {
        if step.get("op") == Some(&Value::from("load")) {
            if let Some(rules) = step.get("rules") {
                for (family, name) in [
                    ("flow", "reload flow"),
                    ("degrade", "reload degrade"),
                    ("paramFlow", "reload paramFlow"),
                    ("authority", "reload authority"),
                    ("system", "reload system"),
                ] {
                    if rules.get(family).is_some() {
                        out.push(name);
                    }
                }
                rule_sets.push(rules);
            }
        }
    }
    let enters: Vec<&Value> = steps
        .iter()
        .filter(|s| s.get("op") == Some(&Value::from("enter")))
        .collect();
    let entered = |resource: &str| {
        enters
            .iter()
            .any(|s| s.get("resource").and_then(Value::as_str) == Some(resource))
    };
    let kind = enters
        .iter()
        .find_map(|s| arg_kind(list(s.get("args"))))
        .map(|k| class_of(&k).to_owned());
    let mut breakers = false;
    let mut thread_param = false;
    let mut default_rule = false;
    for rules in &rule_sets {
        let flow = rules_of(rules, "flow");
        let param = rules_of(rules, "paramFlow");
        breakers |= !rules_of(rules, "degrade").is_empty();
        if param.len() > 1 {
            out.push("two param rules on a resource");
        }
        for rule in param {
            let idx = rule.get("paramIdx").and_then(Value::as_i64).unwrap_or(0);
            if idx != 0 && idx != -1 {
                out.push("paramIdx other than 0 and -1");
            }
            let thread = rule.get("grade") == Some(&Value::from(0));
            thread_param |= thread;
            if thread
                && rule
                    .get("controlBehavior")
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
                    != 0
            {
                out.push("thread-grade param rule with a shaping behaviour");
            }
            for item in list(rule.get("paramFlowItemList")) {
                if invalid_item(item) {
                    out.push("invalid param item");
                } else if let Some(kind) = &kind {
                    let class =
                        class_of(item.get("classType").and_then(Value::as_str).unwrap_or(""));
                    if class != kind {
                        out.push("param item of another type than the argument");
                    }
                }
            }
        }
        for rule in flow {
            let behavior = rule
                .get("controlBehavior")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            let count = rule.get("count").and_then(Value::as_f64).unwrap_or(0.0);
            default_rule |= rule
                .get("limitApp")
                .and_then(Value::as_str)
                .unwrap_or("default")
                == "default";
            if rule.get("grade") == Some(&Value::from(0)) && behavior != 0 {
                out.push("thread-grade flow rule with a shaping behaviour");
            }
            if (behavior == 1 || behavior == 3)
                && rule.get("grade") != Some(&Value::from(0))
                && rule
                    .get("warmUpPeriodSec")
                    .and_then(Value::as_f64)
                    .is_some_and(|p| p * count < 2.0)
            {
                out.push("warm-up with count x period below 2");
            }
            let reference = rule.get("refResource").and_then(Value::as_str);
            match rule.get("strategy").and_then(Value::as_i64) {
                Some(2) if reference == Some("sentinel_default_context") => {
                    out.push("chain rule on the default context");
                }
                Some(1) if reference.is_some_and(|r| !entered(r)) => {
                    out.push("relate rule whose resource is never entered");
                }
                _ => {}
            }
        }
        for rule in rules_of(rules, "authority") {
            if rule
                .get("limitApp")
                .and_then(Value::as_str)
                .is_some_and(|l| l.contains(' '))
            {
                out.push("authority list with spaces");
            }
        }
    }
    for step in &enters {
        if step.get("hold").is_some() && breakers {
            out.push("held call with breakers");
        }
        let args = list(step.get("args"));
        if args.iter().any(|a| a.get("array").is_some()) {
            out.push("array argument");
        }
        let batch = step.get("batch").and_then(Value::as_u64).unwrap_or(1);
        if batch == 0 {
            out.push("batch 0");
        }
        if batch > 1 && thread_param {
            out.push("batch against a thread-grade param rule");
        }
        if step.get("origin") == Some(&Value::from("default")) && default_rule {
            out.push("origin default beside a default flow rule");
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Scenarios per feature.
pub(crate) fn count<'a>(
    scenarios: impl IntoIterator<Item = &'a Value>,
) -> BTreeMap<&'static str, usize> {
    let mut counts = BTreeMap::new();
    for scenario in scenarios {
        for f in features(scenario) {
            *counts.entry(f).or_default() += 1;
        }
    }
    counts
}

/// Java's decisions per outcome (`pass`, `block:flow`, `block:system:load`, ...).
pub(crate) fn decisions<'a>(
    results: impl IntoIterator<Item = &'a Value>,
) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for result in results {
        for outcome in list(result.get("outcomes")) {
            let r = outcome.get("result").and_then(Value::as_str).unwrap_or("?");
            let key = r.split('#').next().unwrap_or(r).to_owned();
            *counts.entry(key).or_default() += 1;
        }
    }
    counts
}

/// Every feature `features` names: the generator must reach each one.
pub(crate) const ALL: &[&str] = &[
    "array argument",
    "authority list with spaces",
    "batch 0",
    "batch against a thread-grade param rule",
    "chain rule on the default context",
    "held call with breakers",
    "invalid param item",
    "origin default beside a default flow rule",
    "param item of another type than the argument",
    "paramIdx other than 0 and -1",
    "relate rule whose resource is never entered",
    "reload authority",
    "reload degrade",
    "reload flow",
    "reload paramFlow",
    "reload system",
    "thread-grade flow rule with a shaping behaviour",
    "thread-grade param rule with a shaping behaviour",
    "two param rules on a resource",
    "warm-up with count x period below 2",
];
