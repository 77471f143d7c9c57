//! `validate` and `schema`: the commands that read a rules file and open no store.

use super::*;

#[test]
fn validate_exit_codes_name_index_resource_and_field() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let good = write(dir.path(), "good.json", RULES);
    let out = run(&["validate", &good]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout(&out).contains("1 flow rule, 1 degrade rule, 1 paramFlow rule"),
        "{out:?}"
    );

    let bad = write(
        dir.path(),
        "bad.json",
        r#"[{"resource": "GET:/a", "count": -1}, {"resource": "GET:/b", "grade": 9, "count": 1}]"#,
    );
    let out = run(&["validate", &bad, "--family", "flow"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = stdout(&out);
    assert!(
        text.contains("flow rule #0 (resource \"GET:/a\"): field `count`"),
        "{text}"
    );
    assert!(
        text.contains("flow rule #1 (resource \"GET:/b\"): field `grade`"),
        "{text}"
    );

    let out = run(&["--json", "validate", &bad, "--family", "flow"]);
    assert_eq!(out.status.code(), Some(1));
    let doc: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(doc["issues"].as_array().map(Vec::len), Some(2), "{doc}");
    assert_eq!(doc["issues"][1]["field"], "grade");

    let syntax = write(dir.path(), "syntax.json", "[{");
    assert_eq!(
        run(&["validate", &syntax, "--family", "flow"])
            .status
            .code(),
        Some(1)
    );
    // A usage error is exit 2.
    assert_eq!(
        run(&["validate", &good, "--format", "go"]).status.code(),
        Some(2)
    );
    assert_eq!(
        run(&["get", "--from", "ftp://x:1/y"]).status.code(),
        Some(2)
    );
}

/// A one-letter typo in a key is exit 1 with a did-you-mean; an unknown key is a warning
/// (exit 0) unless `--strict-keys`; the dashboard's extra keys are neither.
#[test]
fn validate_catches_a_misspelt_key_and_warns_about_unknown_ones() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let typo = write(
        dir.path(),
        "typo.json",
        r#"[{"resource":"GET:/order","cuont":5}]"#,
    );
    let out = run(&["validate", &typo, "--family", "flow"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        stdout(&out).contains(r#"unknown field "cuont" (did you mean "count"?)"#),
        "{out:?}"
    );
    let unknown = write(
        dir.path(),
        "unknown.json",
        r#"[{"resource":"a","count":5,"owner":"team-a","app":"shop","gmtCreate":1}]"#,
    );
    let out = run(&["validate", &unknown, "--family", "flow"]);
    assert!(out.status.success(), "{out:?}");
    let text = stdout(&out);
    assert!(
        text.contains("warning:") && text.contains("owner"),
        "{text}"
    );
    assert!(
        !text.contains("gmtCreate") && !text.contains("\"app\""),
        "{text}"
    );
    let out = run(&["--json", "validate", &unknown, "--family", "flow"]);
    let doc: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(doc["warnings"][0]["field"], "owner", "{doc}");
    let out = run(&["validate", &unknown, "--family", "flow", "--strict-keys"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    // An error that says it is one, not that the key is ignored.
    let text = stdout(&out);
    assert!(
        text.contains("invalid:")
            && text.contains("unknown field \"owner\": not a field of this rule"),
        "{text}"
    );
    assert!(!text.contains("ignored"), "{text}");
    let out = run(&[
        "--json",
        "validate",
        &unknown,
        "--family",
        "flow",
        "--strict-keys",
    ]);
    let doc: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    let message = doc["issues"][0]["message"].as_str().unwrap_or_default();
    assert!(
        !message.contains("ignored") && message.contains("owner"),
        "{doc}"
    );
    // One name for the family: `paramFlow`, as in the combined document (the old spelling
    // still works).
    let param = write(
        dir.path(),
        "param.json",
        r#"[{"resource":"a","paramIdx":0,"count":5}]"#,
    );
    for family in ["paramFlow", "param-flow"] {
        let out = run(&["validate", &param, "--family", family]);
        assert!(out.status.success(), "{family}: {out:?}");
    }
    // sentinel-golang's Kubernetes resources, several documents in one file.
    let crds = write(
        dir.path(),
        "crds.yaml",
        "apiVersion: datasource.sentinel.io/v1alpha1\nkind: FlowRules\nmetadata: {name: a}\n\
         spec:\n  rules:\n    - {resource: r, threshold: 5}\n---\n\
         apiVersion: datasource.sentinel.io/v1alpha1\nkind: SystemRules\nmetadata: {name: b}\n\
         spec:\n  rules:\n    - {metricType: CpuUsage, triggerCount: 80}\n",
    );
    let out = run(&["validate", &crds, "--format", "k8s"]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout(&out).contains("1 flow rule, 1 system rule"),
        "{out:?}"
    );
    // Without `--format k8s`, the error says it looks like YAML.
    let out = run(&["validate", &crds]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(stdout(&out).contains("looks like YAML"), "{out:?}");
    // A combined document given `--family` says to drop it.
    let combined = write(
        dir.path(),
        "combined.json",
        r#"{"flow":[{"resource":"a","count":1}]}"#,
    );
    let out = run(&["validate", &combined, "--family", "flow"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(stdout(&out).contains("drop `--family`"), "{out:?}");
}

/// `schema` prints the shipped JSON Schema of the chosen format.
#[test]
fn schema_prints_the_shipped_schema_of_a_format() {
    for (args, file) in [
        (&["schema"][..], "combined"),
        (&["schema", "--family", "flow"][..], "flow"),
        (&["schema", "--family", "paramFlow"][..], "paramFlow"),
        (
            &["schema", "--format", "go", "--family", "degrade"][..],
            "go-circuit-breaker",
        ),
        (&["schema", "--format", "k8s"][..], "k8s"),
    ] {
        let out = run(args);
        assert!(out.status.success(), "{args:?}: {out:?}");
        let printed: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
        let path = format!("{}/../schemas/{file}.json", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let shipped: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(printed, shipped, "{args:?}");
    }
}
