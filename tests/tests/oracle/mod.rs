//! The differential harness: scenario files run through Sentinel Java (`interop/`, one JVM
//! for all of them) and through this engine, compared step by step.

pub(crate) mod coverage;
pub(crate) mod generate;
pub(crate) mod known;
pub(crate) mod runner;

use std::path::{Path, PathBuf};

use serde_json::Value;

pub(crate) use crate::java::root;

/// Runs the Java runner once over `files`, writing one result per file into `out`.
pub(crate) fn run_java(files: &[PathBuf], out: &Path) -> Result<(), String> {
    let output = crate::java::java("sentinel.interop.Oracle")?
        .arg(out)
        .args(files)
        .output()
        .map_err(|e| {
            format!("cannot run java ({e}): apt-get install openjdk-17-jdk-headless maven")
        })?;
    if !output.status.success() {
        return Err(format!(
            "the Java runner failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(())
}

/// A scenario's declared deviation: a step (and optionally one repetition) where this engine
/// differs from Java, with the row of docs/guarding.md's table of differences that says why
/// (and, for a deliberate one, the rustdoc item that documents it).
#[derive(Debug)]
pub(crate) struct Deviation {
    pub(crate) step: u64,
    pub(crate) rep: Option<u64>,
    pub(crate) row: String,
    pub(crate) item: Option<String>,
}

/// The deviations `scenario` declares.
pub(crate) fn deviations(scenario: &Value) -> Result<Vec<Deviation>, String> {
    let Some(list) = scenario.get("expect_deviation") else {
        return Ok(Vec::new());
    };
    let list = list.as_array().ok_or("`expect_deviation` is not a list")?;
    list.iter()
        .map(|d| {
            let step = d
                .get("step")
                .and_then(Value::as_u64)
                .ok_or("a deviation has no `step`")?;
            let row = d.get("row").and_then(Value::as_str).ok_or(
                "a deviation names no row of docs/guarding.md's table of differences (`row`)",
            )?;
            let item = match d.get("item") {
                None => None,
                Some(item) => Some(
                    item.as_str()
                        .filter(|i| i.starts_with("sentinel_core::"))
                        .ok_or(
                            "a deviation's `item` is not a rustdoc item (\"sentinel_core::...\")",
                        )?
                        .to_owned(),
                ),
            };
            Ok(Deviation {
                step,
                rep: d.get("rep").and_then(Value::as_u64),
                row: row.to_owned(),
                item,
            })
        })
        .collect()
}

/// Whether two outcomes are the same decision: pass, or blocked by the same family (and the
/// same system metric). The blocking rule's index is printed but not compared: with several
/// rules of a family on a resource, Sentinel checks them in the order of a `HashSet` (its
/// `FlowRuleUtil.buildFlowRuleMap`), so which one is named is Java's hash order
/// (see interop/README.md).
fn same_decision(java: Option<&Value>, rust: Option<&Value>) -> bool {
    let family = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .map(|s| s.split('#').next().unwrap_or(s).to_owned())
    };
    family(java) == family(rust)
}

/// Compares the two results: `Ok` if they agree except where `deviations` say, and every
/// declared deviation is seen; otherwise the first diverging step.
pub(crate) fn compare(java: &Value, rust: &Value, deviations: &[Deviation]) -> Result<(), String> {
    let empty = Vec::new();
    let java = java
        .get("outcomes")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    let rust = rust
        .get("outcomes")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    let mut seen = vec![false; deviations.len()];
    for (i, (j, r)) in java.iter().zip(rust).enumerate() {
        if same_decision(j.get("result"), r.get("result")) {
            continue;
        }
        let step = j.get("step").and_then(Value::as_u64).unwrap_or(u64::MAX);
        let rep = j.get("rep").and_then(Value::as_u64).unwrap_or(0);
        let declared = deviations
            .iter()
            .position(|d| d.step == step && d.rep.is_none_or(|x| x == rep));
        match declared {
            Some(k) => seen[k] = true,
            None => {
                return Err(format!(
                "outcome {i} (step {step}, repetition {rep}, at {} ms) differs: Java {}, Rust {}",
                j.get("at").unwrap_or(&Value::Null),
                j.get("result").unwrap_or(&Value::Null),
                r.get("result").unwrap_or(&Value::Null),
            ))
            }
        }
    }
    if java.len() != rust.len() {
        return Err(format!(
            "Java made {} decisions, Rust {}",
            java.len(),
            rust.len()
        ));
    }
    if let Some(k) = seen.iter().position(|s| !s) {
        return Err(format!(
            "step {} is declared to deviate ({}{}) but both engines agree there",
            deviations[k].step,
            deviations[k].row,
            deviations[k]
                .item
                .as_deref()
                .map(|i| format!(", {i}"))
                .unwrap_or_default()
        ));
    }
    Ok(())
}
