//! Sentinel Java as the oracle: every scenario in `interop/scenarios/` and several hundred
//! generated ones run through Sentinel 1.8 (the Java runner in `interop/`, one JVM) and through
//! this engine on a frozen clock; the decisions must agree step by step, except where a
//! scenario's `expect_deviation` names the rustdoc item of a deliberate difference.
//!
//! The Java harness is built by `scripts/interop.sh build`. `SENTINEL_ORACLE_SEED` replays a
//! generated run; `SENTINEL_ORACLE_CASES` sets how many scenarios are generated (default 300);
//! `SENTINEL_ORACLE_KEEP=DIR` keeps the generated files in DIR.

mod java;
mod oracle;

use std::path::PathBuf;

use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::Value;

fn read(path: &PathBuf) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

#[test]
fn scenarios_decide_as_sentinel_java() {
    let hand_dir = oracle::root().join("interop/scenarios");
    let mut hand: Vec<PathBuf> = std::fs::read_dir(&hand_dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", hand_dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    hand.sort();
    assert!(
        hand.len() >= 40,
        "only {} hand-written scenarios",
        hand.len()
    );

    let seed: u64 = std::env::var("SENTINEL_ORACLE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    let cases: usize = std::env::var("SENTINEL_ORACLE_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let work = tempfile::tempdir().expect("a temporary directory");
    // SENTINEL_ORACLE_KEEP=DIR keeps the generated scenarios there, to run them again by hand.
    let generated_dir = std::env::var_os("SENTINEL_ORACLE_KEEP")
        .map(PathBuf::from)
        .unwrap_or_else(|| work.path().join("generated"));
    std::fs::create_dir_all(&generated_dir).expect("a directory for generated scenarios");
    let mut rng = StdRng::seed_from_u64(seed);
    let generated: Vec<PathBuf> = (0..cases)
        .map(|i| {
            let name = format!("gen-{seed}-{i:04}");
            let path = generated_dir.join(format!("{name}.json"));
            let scenario = oracle::generate::scenario(&mut rng, &name);
            std::fs::write(
                &path,
                serde_json::to_vec_pretty(&scenario).unwrap_or_default(),
            )
            .expect("the generated scenario is written");
            path
        })
        .collect();

    let out = work.path().join("java");
    let all: Vec<PathBuf> = hand.iter().chain(&generated).cloned().collect();
    if let Err(e) = oracle::run_java(&all, &out) {
        panic!("{e}");
    }

    let mut failures = Vec::new();
    for path in &all {
        let scenario = read(path);
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let java = read(&out.join(&name));
        let outcome = oracle::runner::run(&scenario).and_then(|rust| {
            let deviations = oracle::deviations(&scenario)?;
            oracle::compare(&java, &rust, &deviations)
        });
        if let Err(e) = outcome {
            failures.push((path.clone(), e));
        }
    }
    let kept = oracle::root().join("target/oracle-failures");
    for (path, _) in failures
        .iter()
        .filter(|(p, _)| p.starts_with(&generated_dir))
    {
        let _ = std::fs::create_dir_all(&kept);
        if let Some(name) = path.file_name() {
            let _ = std::fs::copy(path, kept.join(name));
        }
    }
    println!(
        "differential: {} hand-written and {} generated scenarios (seed {seed}), {} differ",
        hand.len(),
        generated.len(),
        failures.len()
    );
    if !failures.is_empty() {
        let report: Vec<String> = failures
            .iter()
            .map(|(p, e)| format!("{}: {e}", p.display()))
            .collect();
        panic!(
            "{} of {} scenarios differ from Sentinel Java (generator seed {seed}; replay with \
             SENTINEL_ORACLE_SEED={seed}; failing generated scenarios copied to {}):\n{}",
            failures.len(),
            all.len(),
            kept.display(),
            report.join("\n")
        );
    }
}

/// Sentinel Java keeps a node for every resource it has seen; the runner makes it forget them
/// between scenarios, so a scenario decides the same whatever ran before it. A relate rule
/// with count 0 passes in Java until its related resource has been entered once: run after
/// a scenario that enters that resource, it blocked.
#[test]
fn java_runs_each_scenario_as_if_it_were_the_first() {
    let relate = serde_json::json!({
        "name": "relate_target_unseen",
        "rules": {"flow": [{"resource": "a", "count": 0, "strategy": 1, "refResource": "b"}]},
        "steps": [{"op": "enter", "resource": "a", "repeat": 2}],
    });
    let enters_b = serde_json::json!({
        "name": "enters_b",
        "steps": [{"op": "enter", "resource": "b", "args": [{"string": "v1"}]}],
    });
    let work = tempfile::tempdir().expect("a temporary directory");
    let files: Vec<PathBuf> = [
        ("1-first", &relate),
        ("2-between", &enters_b),
        ("3-after", &relate),
    ]
    .iter()
    .map(|(name, scenario)| {
        let path = work.path().join(format!("{name}.json"));
        std::fs::write(&path, scenario.to_string()).expect("the scenario is written");
        path
    })
    .collect();
    let out = work.path().join("java");
    if let Err(e) = oracle::run_java(&files, &out) {
        panic!("{e}");
    }
    let first = read(&out.join("1-first.json"));
    let after = read(&out.join("3-after.json"));
    assert_eq!(
        first["outcomes"], after["outcomes"],
        "the same scenario decided differently after another one entered its related resource"
    );
    assert_eq!(first["outcomes"][0]["result"], "pass", "{first}");
}
