//! sentinel-golang's own converters against this crate's Go converters: every Go JSON payload
//! in `../shared/rules/` and `sentinel-core/tests/data/rules/` is parsed by sentinel-golang's
//! `ext/datasource` (the Go program in `interop/go/`) and by `GoFlowJson`,
//! `GoCircuitBreakerJson`, `GoSystemJson` and `GoHotspotJson`, and the rules are compared
//! field by field through the mapping each converter documents.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use sentinel_core::datasource::{
    Converter, GoCircuitBreakerJson, GoFlowJson, GoHotspotJson, GoSystemJson,
};
use sentinel_core::RuleSet;
use serde_json::{json, Value};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The Go payloads (JSON files) of both folders, with their family.
fn payloads() -> Vec<(&'static str, PathBuf)> {
    let dirs = [
        root().join("../shared/rules"),
        root().join("sentinel-core/tests/data/rules"),
    ];
    let mut out = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut files: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        files.sort();
        for path in files {
            let name = path
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            if !name.ends_with(".json") {
                continue;
            }
            for family in ["flow", "circuitbreaker", "system", "hotspot"] {
                if name.starts_with(&format!("{family}-go__")) {
                    out.push((family, path.clone()));
                }
            }
        }
    }
    out
}

fn run_go(args: &[String]) -> Value {
    let dir = root().join("interop/go");
    let bin = root().join("target/interop-go");
    let built = Command::new("go")
        .current_dir(&dir)
        .args(["build", "-o"])
        .arg(&bin)
        .arg(".")
        .status()
        .unwrap_or_else(|e| {
            panic!("cannot run `go` ({e}): install the Go toolchain (Debian: golang-go)")
        });
    assert!(built.success(), "`go build` of interop/go failed");
    let output = Command::new(&bin)
        .args(args)
        .output()
        .expect("interop-go runs");
    assert!(
        output.status.success(),
        "interop-go failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("interop-go prints JSON")
}

fn num(v: &Value, key: &str) -> f64 {
    v.get(key).and_then(Value::as_f64).unwrap_or(0.0)
}

/// What the Sentinel rule must say, field by field, for one Go flow rule (GoFlowJson's table).
fn expected_flow(go: &Value) -> Value {
    let warm = num(go, "tokenCalculateStrategy") == 1.0;
    let throttle = num(go, "controlBehavior") == 1.0;
    let behavior = match (warm, throttle) {
        (false, false) => 0,
        (true, false) => 1,
        (false, true) => 2,
        (true, true) => 3,
    };
    let mut e = json!({
        "resource": go["resource"],
        "grade": 1,
        "count": num(go, "threshold"),
        "strategy": num(go, "relationStrategy") as i64,
        "controlBehavior": behavior,
    });
    if num(go, "relationStrategy") == 1.0 {
        e["refResource"] = go["refResource"].clone();
    }
    if throttle {
        // documented: Go's 0 (only the exact slot) becomes Sentinel's 1 ms
        e["maxQueueingTimeMs"] = json!(num(go, "maxQueueingTimeMs").max(1.0) as i64);
    }
    if warm {
        e["warmUpPeriodSec"] = json!(num(go, "warmUpPeriodSec") as i64);
    }
    e
}

fn expected_breaker(go: &Value) -> Value {
    let strategy = num(go, "strategy") as i64;
    let mut e = json!({
        "resource": go["resource"],
        "grade": strategy,
        // documented: whole seconds, rounded up
        "timeWindow": (num(go, "retryTimeoutMs") / 1000.0).ceil().max(1.0) as i64,
        // documented: Go's 0 (no minimum) is Sentinel's 1
        "minRequestAmount": num(go, "minRequestAmount").max(1.0) as i64,
        "statIntervalMs": num(go, "statIntervalMs") as i64,
    });
    if strategy == 0 {
        e["count"] = json!(num(go, "maxAllowedRtMs"));
        e["slowRatioThreshold"] = json!(num(go, "threshold"));
    } else {
        e["count"] = json!(num(go, "threshold"));
    }
    e
}

fn expected_system(go: &Value) -> Value {
    let t = num(go, "triggerCount");
    match num(go, "metricType") as i64 {
        0 => json!({"highestSystemLoad": t}),
        // integer fields in Sentinel: a fractional trigger is rounded up (see interop/README.md)
        1 => json!({"avgRt": t.ceil() as i64}),
        2 => json!({"maxThread": t.ceil() as i64}),
        3 => json!({"qps": t}),
        _ => json!({"highestCpuUsage": t}),
    }
}

fn expected_hotspot(go: &Value) -> Value {
    let mut items: Vec<Value> = go["specificItems"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|i| {
                    let class = match i["kind"].as_str().unwrap_or("") {
                        "int" => "long",
                        "string" => "String",
                        "bool" => "boolean",
                        _ => "double",
                    };
                    let object = match &i["value"] {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    json!({"object": object, "classType": class, "count": i["threshold"]})
                })
                .collect()
        })
        .unwrap_or_default();
    items.sort_by_key(|i| i["object"].to_string());
    let behavior = if num(go, "controlBehavior") == 1.0 {
        2
    } else {
        0
    };
    json!({
        "resource": go["resource"],
        "grade": if num(go, "metricType") == 1.0 { 1 } else { 0 },
        "paramIdx": num(go, "paramIndex") as i64,
        "count": num(go, "threshold"),
        "controlBehavior": behavior,
        "maxQueueingTimeMs": num(go, "maxQueueingTimeMs") as i64,
        "burstCount": num(go, "burstCount") as i64,
        "durationInSec": num(go, "durationInSec") as i64,
        // documented: 0 is the default, which Sentinel leaves out
        "paramsMaxCapacity": match num(go, "paramsMaxCapacity") as i64 {
            0 => Value::Null,
            n => json!(n),
        },
        "paramFlowItemList": items,
    })
}

fn rust_rules(family: &str, payload: &[u8]) -> Result<Vec<Value>, String> {
    // Lenient, as Go reads: an absent field is its zero value (strict mode refuses a rule
    // without the field that decides it, such as a system rule without `triggerCount`).
    let set: RuleSet = match family {
        "flow" => GoFlowJson::lenient().convert(payload),
        "circuitbreaker" => GoCircuitBreakerJson::lenient().convert(payload),
        "system" => GoSystemJson::lenient().convert(payload),
        _ => GoHotspotJson::lenient().convert(payload),
    }
    .map_err(|e| e.to_string())?;
    let list = match family {
        "flow" => serde_json::to_value(set.flow.unwrap_or_default()),
        "circuitbreaker" => serde_json::to_value(set.degrade.unwrap_or_default()),
        "system" => serde_json::to_value(set.system.unwrap_or_default()),
        _ => serde_json::to_value(set.param_flow.unwrap_or_default()),
    }
    .map_err(|e| e.to_string())?;
    Ok(list.as_array().cloned().unwrap_or_default())
}

/// The fields of `expected` that `actual` has differently (numbers compared as numbers).
fn differences(expected: &Value, actual: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let Some(fields) = expected.as_object() else {
        return out;
    };
    for (key, want) in fields {
        let mut got = actual.get(key).cloned().unwrap_or(Value::Null);
        if key == "paramFlowItemList" {
            if let Some(list) = got.as_array_mut() {
                list.sort_by_key(|i| i["object"].to_string());
            }
        }
        let same = match (want.as_f64(), got.as_f64()) {
            (Some(a), Some(b)) => (a - b).abs() < 1e-9,
            _ => *want == got,
        };
        if !same {
            out.push(format!(
                "{key}: sentinel-golang means {want}, Rust has {got}"
            ));
        }
    }
    out
}

#[test]
fn go_payloads_convert_as_sentinel_golang_reads_them() {
    let files = payloads();
    assert!(files.len() >= 6, "only {} Go payloads found", files.len());
    let args: Vec<String> = files
        .iter()
        .map(|(family, path)| format!("{family}={}", path.display()))
        .collect();
    let go = run_go(&args);
    let mut report = BTreeMap::new();
    let mut compared = 0;
    for (family, path) in &files {
        let key = path.display().to_string();
        let payload = std::fs::read(path).expect("the payload is readable");
        let go_result = &go[&key];
        let rust = rust_rules(family, &payload);
        let problems: Vec<String> = match (go_result.get("rules"), rust) {
            (Some(go_rules), Ok(rust_rules)) => {
                let go_rules = go_rules.as_array().cloned().unwrap_or_default();
                if go_rules.len() != rust_rules.len() {
                    vec![format!(
                        "Go read {} rules, Rust {}",
                        go_rules.len(),
                        rust_rules.len()
                    )]
                } else {
                    go_rules
                        .iter()
                        .zip(&rust_rules)
                        .enumerate()
                        .flat_map(|(i, (g, r))| {
                            compared += 1;
                            let expected = match *family {
                                "flow" => expected_flow(g),
                                "circuitbreaker" => expected_breaker(g),
                                "system" => expected_system(g),
                                _ => expected_hotspot(g),
                            };
                            differences(&expected, r)
                                .into_iter()
                                .map(move |d| format!("rule {i}: {d}"))
                        })
                        .collect()
                }
            }
            (None, Err(_)) => Vec::new(), // both refuse it
            (Some(_), Err(e)) => vec![format!("Go reads it, Rust refuses it: {e}")],
            (None, Ok(_)) => vec![format!(
                "Rust reads it, Go refuses it: {}",
                go_result["error"]
            )],
        };
        if !problems.is_empty() {
            report.insert(key, problems);
        }
    }
    println!(
        "go formats: {} payloads, {compared} rules compared",
        files.len()
    );
    assert!(
        report.is_empty(),
        "differences from sentinel-golang: {report:#?}"
    );
}
