//! Shadow rules: `diff` sees them added, removed and changed; `validate` and `push` count
//! them; `promote` and `demote` change the moved rule and keep the rest of the stored text.

use super::raw::{self, raw_stores};
use super::*;

const ENFORCED: &str = r#"{"flow": [{"resource": "GET:/order", "count": 20}]}"#;

const SHADOWED: &str = r#"{"flow": [{"resource": "GET:/order", "count": 20}],
    "shadow": {"flow": [{"resource": "GET:/order", "count": 10}]}}"#;

/// A shadow rule added, changed or removed is a change (exit 3) in both directions, named
/// `shadow flow` (`"shadow": true` in `--json`); the same document is no change. Every
/// store that holds a combined document.
#[test]
fn diff_sees_a_shadow_rule_added_changed_or_removed() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let enforced = write(dir.path(), "enforced.json", ENFORCED);
    let shadowed = write(dir.path(), "shadowed.json", SHADOWED);
    let changed = write(dir.path(), "changed.json", &SHADOWED.replace("10}", "5}"));
    for store in stores(dir.path(), "shadowdiff")
        .into_iter()
        .filter(|s| !s.per_family)
    {
        let url = store.url.as_str();
        push(&enforced, &store);
        let out = store.run(&["diff", shadowed.as_str(), "--from"], &[]);
        assert_eq!(out.status.code(), Some(3), "{url}: added: {out:?}");
        let text = stdout(&out);
        assert!(
            text.contains("+ shadow flow GET:/order: {"),
            "{url}: {text}"
        );
        assert!(text.contains("shadow flow: 1 rule added"), "{url}: {text}");
        let out = store.run(&["--json", "diff", shadowed.as_str(), "--from"], &[]);
        let doc: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
        assert_eq!(doc["changes"][0]["op"], "+", "{url}: {doc}");
        assert_eq!(doc["changes"][0]["family"], "flow", "{url}: {doc}");
        assert_eq!(doc["changes"][0]["shadow"], true, "{url}: {doc}");

        push(&shadowed, &store);
        let out = store.run(&["diff", shadowed.as_str(), "--from"], &[]);
        assert_eq!(out.status.code(), Some(0), "{url}: same: {out:?}");
        let out = store.run(&["diff", enforced.as_str(), "--from"], &[]);
        assert_eq!(out.status.code(), Some(3), "{url}: removed: {out:?}");
        let text = stdout(&out);
        assert!(
            text.contains("- shadow flow GET:/order: {"),
            "{url}: {text}"
        );
        assert!(
            text.contains("shadow flow: 1 rule removed"),
            "{url}: {text}"
        );
        assert!(!text.contains("~ flow"), "{url}: {text}");
        let out = store.run(&["diff", changed.as_str(), "--from"], &[]);
        assert_eq!(out.status.code(), Some(3), "{url}: changed: {out:?}");
        assert!(
            stdout(&out).contains("~ shadow flow GET:/order: count: 10.0 -> 5.0"),
            "{url}: {out:?}"
        );
    }
}

/// `validate` and `push` count shadow rules beside the enforced ones, in text and JSON.
#[test]
fn validate_and_push_count_shadow_rules() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let shadowed = write(dir.path(), "shadowed.json", SHADOWED);
    let out = run(&["validate", &shadowed]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout(&out).contains("ok: 1 flow rule, 1 shadow flow rule"),
        "{out:?}"
    );
    let counts = serde_json::json!({"flow": 1, "shadow": {"flow": 1}});
    let out = run(&["--json", "validate", &shadowed]);
    let doc: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(doc["rules"], counts, "{doc}");
    let to = dir.path().join("stored.json").display().to_string();
    let out = run(&["push", &shadowed, "--to", &to]);
    assert!(
        stdout(&out).contains("pushed 1 flow rule, 1 shadow flow rule to"),
        "{out:?}"
    );
    let out = run(&["--json", "push", &shadowed, "--to", &to]);
    let doc: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(doc["rules"], counts, "{doc}");
}

/// A hand-written document with a key the converters ignore, no defaults spelt out and its
/// own layout.
const HAND_WRITTEN: &str = "{\n  \"flow\": [\n    {\"resource\": \"GET:/order\", \"count\": 100, \"owner\": \"team-a\"}\n  ],\n  \"degrade\": [{\"resource\": \"GET:/order\", \"grade\": 2, \"count\": 5, \"timeWindow\": 10}],\n  \"shadow\": {\n    \"flow\": [\n      {\"resource\": \"GET:/order\", \"count\": 10}\n    ]\n  }\n}";

/// After `promote --replace`: the tried rule replaced the enforced one, nothing else moved,
/// and no empty shadow section is left.
const PROMOTED: &str = "{\n  \"flow\": [\n    {\"resource\": \"GET:/order\", \"count\": 10}\n  ],\n  \"degrade\": [{\"resource\": \"GET:/order\", \"grade\": 2, \"count\": 5, \"timeWindow\": 10}]\n}";

/// After `demote --index 0` of that: the enforced list stays (empty), and the shadow section
/// comes back at the document's indentation.
const DEMOTED: &str = "{\n  \"flow\": [],\n  \"degrade\": [{\"resource\": \"GET:/order\", \"grade\": 2, \"count\": 5, \"timeWindow\": 10}],\n  \"shadow\": {\n    \"flow\": [\n      {\"resource\": \"GET:/order\", \"count\": 10}\n    ]\n  }\n}";

/// `promote` and `demote` change the moved rule only: the stored text is otherwise byte for
/// byte what it was (no defaults spelt out, the unknown key and the layout kept, no
/// `"shadow": {"flow": []}` left behind). etcd, Redis, NATS and ZooKeeper.
#[test]
fn promote_and_demote_change_the_moved_rule_and_keep_the_rest_of_the_text() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for store in raw_stores(dir.path(), "intext")
        .into_iter()
        .filter(|s| s.cas)
    {
        let url = store.url.as_str();
        raw::put(&store, HAND_WRITTEN);
        let promote = ["--json", "promote", "--family", "flow", "--replace", "--at"];
        let out = store.run(&promote, &["--resource", "GET:/order"]);
        assert!(out.status.success(), "{url}: {out:?}");
        let doc: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
        assert_eq!(doc["promoted"], 1, "{url}: {doc}");
        assert_eq!(doc["edited_in_place"], true, "{url}: {doc}");
        assert_eq!(raw::text(&store), PROMOTED, "{url}");

        let out = store.run(&["demote", "--family", "flow", "--index", "0", "--at"], &[]);
        assert!(out.status.success(), "{url}: {out:?}");
        assert_eq!(raw::text(&store), DEMOTED, "{url}");

        let out = store.run(&["promote", "--family", "flow", "--at"], &[]);
        assert!(out.status.success(), "{url}: {out:?}");
        assert_eq!(raw::text(&store), PROMOTED, "{url}");
    }
}
