//! The Rust side of the differential harness: runs a scenario file on a frozen clock and
//! produces the same result shape as the Java runner (`interop/`, `sentinel.interop.Oracle`).

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use sentinel_core::datasource::{CombinedJson, Converter};
use sentinel_core::param_flow::ParamValue;
use sentinel_core::system::{ManualSystemStatus, SystemMetric};
use sentinel_core::{BlockError, Clock, Entry, FakeClock, Sentinel, Validation};
use serde_json::{json, Value};

/// Where the clock of every scenario starts, aligned as in the Java runner (`Oracle.BASE_MS`,
/// whose scenarios start at whole days after it): a multiple of every window length the
/// scenarios use, so windows align the same way.
pub(crate) const BASE_MS: u64 = 3_600_000 * 1_200_000;

/// Sentinel's mocked `TimeUtil`: time moves only when the scenario says so, and a caller that
/// queues (rate limiter) comes back at the same instant, as it does in Java under the mock
/// (Java really sleeps, but its mocked clock stands still).
#[derive(Debug, Clone)]
struct FrozenClock(FakeClock);

impl Clock for FrozenClock {
    fn now_ms(&self) -> u64 {
        self.0.now_ms()
    }

    fn now_nanos(&self) -> u64 {
        self.0.now_nanos()
    }

    fn wait_virtually(&self, _wait: Duration) -> bool {
        true
    }
}

/// One typed call argument (see `interop/README.md`).
#[derive(Debug, Clone)]
enum Arg {
    Int(i128),
    Float(f64),
    Float32(f32),
    Bool(bool),
    Str(String),
    List(Vec<Arg>),
}

fn parse_arg(value: &Value) -> Result<Arg, String> {
    let obj = value
        .as_object()
        .and_then(|o| o.iter().next())
        .ok_or_else(|| format!("argument {value} is not a one-key object"))?;
    let bad = || format!("argument {value} has a value of the wrong type");
    Ok(match obj.0.as_str() {
        "int" | "long" => Arg::Int(i128::from(obj.1.as_i64().ok_or_else(bad)?)),
        "double" => Arg::Float(obj.1.as_f64().ok_or_else(bad)?),
        #[allow(clippy::cast_possible_truncation)]
        "float" => Arg::Float32(obj.1.as_f64().ok_or_else(bad)? as f32),
        "bool" => Arg::Bool(obj.1.as_bool().ok_or_else(bad)?),
        "string" => Arg::Str(obj.1.as_str().ok_or_else(bad)?.to_owned()),
        "list" | "array" => Arg::List(
            obj.1
                .as_array()
                .ok_or_else(bad)?
                .iter()
                .map(parse_arg)
                .collect::<Result<_, _>>()?,
        ),
        other => return Err(format!("unknown argument type {other:?}")),
    })
}

fn scalar(arg: &Arg) -> ParamValue<'_> {
    match arg {
        Arg::Int(v) => ParamValue::Int(*v),
        Arg::Float(v) => ParamValue::from(*v),
        Arg::Float32(v) => ParamValue::from(*v),
        Arg::Bool(v) => ParamValue::from(*v),
        Arg::Str(v) => ParamValue::from(v.as_str()),
        // a list inside a list: Sentinel checks only the outer level's elements as values
        Arg::List(_) => ParamValue::Str("<list>"),
    }
}

/// The rules a scenario loaded, per family, to name a blocking rule by its index.
#[derive(Default)]
struct Loaded {
    flow: Vec<sentinel_core::flow::FlowRule>,
    degrade: Vec<sentinel_core::circuit_breaker::DegradeRule>,
    authority: Vec<sentinel_core::authority::AuthorityRule>,
    param_flow: Vec<sentinel_core::param_flow::ParamFlowRule>,
}

fn index_of<T: PartialEq>(list: &[T], rule: &T) -> i64 {
    list.iter()
        .position(|r| r == rule)
        .and_then(|i| i64::try_from(i).ok())
        .unwrap_or(-1)
}

fn load(sentinel: &Sentinel, loaded: &mut Loaded, rules: &Value) -> Result<(), String> {
    let bytes = serde_json::to_vec(rules).map_err(|e| e.to_string())?;
    // Java's managers drop invalid rules silently: the lenient mode does the same.
    let set = CombinedJson::new()
        .convert_with(&bytes, Validation::Lenient)
        .map_err(|e| format!("rules do not convert: {e}"))?
        .value;
    let fail = |e: sentinel_core::RuleError| format!("rules do not load: {e}");
    if let Some(v) = set.flow {
        sentinel
            .flow_rules()
            .load_rules_lenient(v.clone())
            .map_err(fail)?;
        loaded.flow = v;
    }
    if let Some(v) = set.degrade {
        sentinel
            .degrade_rules()
            .load_rules_lenient(v.clone())
            .map_err(fail)?;
        loaded.degrade = v;
    }
    if let Some(v) = set.system {
        sentinel
            .system_rules()
            .load_rules_lenient(v)
            .map_err(fail)?;
    }
    if let Some(v) = set.authority {
        sentinel
            .authority_rules()
            .load_rules_lenient(v.clone())
            .map_err(fail)?;
        loaded.authority = v;
    }
    if let Some(v) = set.param_flow {
        sentinel
            .param_flow_rules()
            .load_rules_lenient(v.clone())
            .map_err(fail)?;
        loaded.param_flow = v;
    }
    Ok(())
}

fn describe(loaded: &Loaded, blocked: &BlockError) -> String {
    match blocked {
        BlockError::System { metric, .. } => {
            let kind = match metric {
                SystemMetric::Qps => "qps",
                SystemMetric::Concurrency => "thread",
                SystemMetric::AvgRt => "rt",
                SystemMetric::Load => "load",
                SystemMetric::CpuUsage => "cpu",
                _ => "unknown",
            };
            format!("block:system:{kind}")
        }
        BlockError::Flow { rule, .. } => format!("block:flow#{}", index_of(&loaded.flow, rule)),
        BlockError::CircuitBreaker { rule, .. } => {
            format!("block:degrade#{}", index_of(&loaded.degrade, rule))
        }
        BlockError::Authority { rule, .. } => {
            format!("block:authority#{}", index_of(&loaded.authority, rule))
        }
        BlockError::ParamFlow { rule, .. } => {
            format!("block:paramFlow#{}", index_of(&loaded.param_flow, rule))
        }
        other => format!("block:{}", other.family()),
    }
}

fn field_u64(step: &Value, name: &str, default: u64) -> u64 {
    step.get(name).and_then(Value::as_u64).unwrap_or(default)
}

fn field_bool(step: &Value, name: &str) -> bool {
    step.get(name).and_then(Value::as_bool).unwrap_or(false)
}

/// `rules` with the flow and param-flow lists in the order `order` gives (payload positions,
/// as the Java runner reports the order Sentinel checks each family in), when it is an order
/// of the whole list.
fn in_order(rules: &Value, order: Option<&Value>) -> Value {
    let mut out = rules.clone();
    for family in ["flow", "paramFlow"] {
        let Some(list) = rules.get(family).and_then(Value::as_array) else {
            continue;
        };
        let Some(positions) = order
            .and_then(|o| o.get(family))
            .and_then(Value::as_array)
            .map(|p| {
                p.iter()
                    .filter_map(|i| i.as_u64().and_then(|i| usize::try_from(i).ok()))
                    .collect::<Vec<usize>>()
            })
        else {
            continue;
        };
        let mut sorted = positions.clone();
        sorted.sort_unstable();
        if sorted != (0..list.len()).collect::<Vec<_>>() {
            continue;
        }
        out[family] = Value::Array(positions.iter().map(|&i| list[i].clone()).collect());
    }
    out
}

/// Runs `scenario` and returns `{"name", "outcomes": [{"step", "rep", "at", "result"}]}`.
///
/// A generated scenario whose `rust.check_order` is `"java"` loads its flow and param-flow
/// rules in the order Sentinel checks them, as `java` (the Java runner's result for it)
/// reports: the known difference `two-rules-check-order` (oracle::known) rewritten.
pub(crate) fn run(scenario: &Value, java: Option<&Value>) -> Result<Value, String> {
    let clock = FakeClock::at_ms(BASE_MS);
    let status = ManualSystemStatus::new();
    let sentinel = Sentinel::builder()
        .clock(FrozenClock(clock.clone()))
        .system_status(status.clone())
        .build();
    let mut loaded = Loaded::default();
    // A generated scenario's `rust` field holds the rules as this engine is to read them where
    // a known difference is rewritten (oracle::known): `rules` for the first load, `loads` by
    // step index.
    let rust = scenario.get("rust");
    let java_order = rust
        .and_then(|r| r.get("check_order"))
        .filter(|o| o.as_str() == Some("java"))
        .and(java)
        .and_then(|j| j.get("checkOrder"));
    let order_of = |label: &str| java_order.and_then(|o| o.get(label));
    if let Some(rules) = rust
        .and_then(|r| r.get("rules"))
        .or_else(|| scenario.get("rules"))
    {
        load(&sentinel, &mut loaded, &in_order(rules, order_of("rules")))?;
    }
    let mut held: HashMap<String, VecDeque<Entry<'static>>> = HashMap::new();
    let mut outcomes = Vec::new();
    let steps = scenario
        .get("steps")
        .and_then(Value::as_array)
        .ok_or("the scenario has no `steps` list")?;
    for (index, step) in steps.iter().enumerate() {
        let op = step.get("op").and_then(Value::as_str).unwrap_or("");
        match op {
            "advance" => clock.advance_ms(field_u64(step, "ms", 0)),
            "load" => load(
                &sentinel,
                &mut loaded,
                &in_order(
                    rust.and_then(|r| r.get("loads"))
                        .and_then(|l| l.get(index.to_string()))
                        .or_else(|| step.get("rules"))
                        .unwrap_or(&Value::Null),
                    order_of(&index.to_string()),
                ),
            )?,
            "system" => {
                if let Some(v) = step.get("load").and_then(Value::as_f64) {
                    status.set_load(v);
                }
                if let Some(v) = step.get("cpu").and_then(Value::as_f64) {
                    status.set_cpu_usage(v);
                }
            }
            "exit" => {
                let name = step.get("hold").and_then(Value::as_str).unwrap_or("");
                let queue = held.entry(name.to_owned()).or_default();
                for _ in 0..field_u64(step, "count", 1) {
                    let Some(mut entry) = queue.pop_front() else {
                        break;
                    };
                    if field_bool(step, "error") {
                        entry.set_error();
                    }
                    drop(entry);
                }
            }
            "enter" => {
                let args: Vec<Arg> = match step.get("args").and_then(Value::as_array) {
                    Some(list) => list.iter().map(parse_arg).collect::<Result<_, _>>()?,
                    None => Vec::new(),
                };
                let inner: Vec<Vec<ParamValue<'_>>> = args
                    .iter()
                    .map(|a| match a {
                        Arg::List(items) => items.iter().map(scalar).collect(),
                        _ => Vec::new(),
                    })
                    .collect();
                let values: Vec<ParamValue<'_>> = args
                    .iter()
                    .zip(&inner)
                    .map(|(a, items)| match a {
                        Arg::List(_) => ParamValue::List(items),
                        _ => scalar(a),
                    })
                    .collect();
                let resource = step.get("resource").and_then(Value::as_str).unwrap_or("");
                let batch = u32::try_from(field_u64(step, "batch", 1)).unwrap_or(u32::MAX);
                for rep in 0..field_u64(step, "repeat", 1) {
                    let mut builder = sentinel.entry(resource).batch(batch).args(&values);
                    if let Some(origin) = step.get("origin").and_then(Value::as_str) {
                        builder = builder.origin(origin);
                    }
                    if let Some(context) = step.get("context").and_then(Value::as_str) {
                        builder = builder.context(context);
                    }
                    if field_bool(step, "inbound") {
                        builder = builder.inbound();
                    }
                    let at = clock.now_ms() - BASE_MS;
                    let (result, entry) = match builder.enter() {
                        Ok(entry) => ("pass".to_owned(), Some(entry)),
                        Err(blocked) => (describe(&loaded, &blocked), None),
                    };
                    outcomes.push(json!({"step": index, "rep": rep, "at": at, "result": result}));
                    let Some(mut entry) = entry else { continue };
                    if let Some(name) = step.get("hold").and_then(Value::as_str) {
                        held.entry(name.to_owned())
                            .or_default()
                            .push_back(entry.into_owned());
                        continue;
                    }
                    clock.advance_ms(field_u64(step, "rt", 0));
                    if field_bool(step, "error") {
                        entry.set_error();
                    }
                    drop(entry);
                }
            }
            other => return Err(format!("step {index}: unknown op {other:?}")),
        }
    }
    // Held entries exit at the end, as in the Java runner.
    drop(held);
    Ok(json!({
        "name": scenario.get("name").cloned().unwrap_or(Value::Null),
        "outcomes": outcomes,
    }))
}
