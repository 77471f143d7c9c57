//! Compare-and-set: a `push` that loses a race, `promote` and `demote`, the default where a
//! store keeps revisions, and `--cas` where it keeps none.

use super::*;

/// `push --if-revision` with the revision our `push --json` printed, after someone else wrote:
/// exit 5 naming the conflict, and the other writer's rules stay (etcd, Redis, NATS, ZooKeeper).
#[test]
fn a_push_that_loses_a_cas_race_exits_5_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let rules = write(dir.path(), "rules.json", RULES);
    let changed = write(dir.path(), "changed.json", CHANGED);
    let theirs = CombinedJson::new()
        .convert(CHANGED.as_bytes())
        .expect("valid");
    for store in stores(dir.path(), "cas").into_iter().filter(|s| s.cas) {
        let url = store.url.as_str();
        let out = store.run(&["--json", "push", rules.as_str(), "--to"], &["--cas"]);
        assert!(out.status.success(), "{url}: {out:?}");
        let doc: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
        let seen = doc["revision"]
            .as_u64()
            .unwrap_or_else(|| panic!("{url}: no revision in {doc}"))
            .to_string();
        // Someone else writes between our read and our write.
        push(&changed, &store);
        let out = store.run(&["push", rules.as_str(), "--to"], &["--if-revision", &seen]);
        assert_eq!(out.status.code(), Some(5), "{url}: {out:?}");
        assert!(
            stderr(&out).contains("someone else wrote"),
            "{url}: {out:?}"
        );
        assert_eq!(stored(&store), theirs, "{url}: the losing push wrote");
        // Plain --cas reads the revision itself, and wins when nobody races it.
        // (Stores without revisions refuse it: see `cas_on_a_store_without_revisions_is_a_usage_error`.)
        let out = store.run(&["push", rules.as_str(), "--to"], &["--cas"]);
        assert!(out.status.success(), "{url}: {out:?}");
    }
}

/// `promote` moves a shadow rule into the enforced set and `demote` moves it back, with
/// compare-and-set; a `promote --if-revision` that lost the race exits 5 and writes nothing
/// (every store that keeps revisions: etcd, Redis, NATS with and without TLS, ZooKeeper).
#[test]
fn promote_and_demote_move_shadow_rules_and_a_lost_race_changes_nothing() {
    const SHADOWED: &str = r#"{"flow": [{"resource": "GET:/order", "count": 100}],
        "shadow": {"flow": [{"resource": "GET:/order", "count": 10}]}}"#;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let rules = write(dir.path(), "shadowed.json", SHADOWED);
    let theirs_file = write(dir.path(), "theirs.json", &SHADOWED.replace("100", "50"));
    for store in stores(dir.path(), "promote").into_iter().filter(|s| s.cas) {
        let url = store.url.as_str();
        let out = store.run(&["--json", "push", rules.as_str(), "--to"], &[]);
        assert!(out.status.success(), "{url}: {out:?}");
        let doc: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
        let seen = doc["revision"].as_u64().expect("a revision").to_string();
        let promote = ["--json", "promote", "--family", "flow", "--replace", "--at"];
        let out = store.run(&promote, &["--resource", "GET:/order"]);
        assert!(out.status.success(), "{url}: {out:?}");
        let doc: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
        assert_eq!(doc["promoted"], 1, "{url}: {doc}");
        let now = stored(&store);
        let enforced = now.flow.as_deref().expect("flow");
        assert_eq!(enforced.len(), 1, "{url}");
        assert_eq!(
            enforced[0].count, 10.0,
            "{url}: the tried limit replaced the old one"
        );
        // No shadow list left behind empty, and no empty shadow section.
        assert_eq!(now.shadow, None, "{url}");

        let out = store.run(&["demote", "--family", "flow", "--index", "0", "--at"], &[]);
        assert!(out.status.success(), "{url}: {out:?}");
        assert!(
            stdout(&out).contains("demoted 1 flow rule(s)"),
            "{url}: {out:?}"
        );
        let now = stored(&store);
        assert_eq!(now.flow.as_deref().map(<[_]>::len), Some(0), "{url}");
        assert_eq!(
            now.shadow
                .as_deref()
                .and_then(|s| s.flow.as_ref())
                .map(Vec::len),
            Some(1)
        );

        // Someone else writes after the revision we read: the promote loses and writes nothing.
        push(&theirs_file, &store);
        let theirs = stored(&store);
        let out = store.run(
            &["promote", "--family", "flow", "--at"],
            &["--if-revision", &seen],
        );
        assert_eq!(out.status.code(), Some(5), "{url}: {out:?}");
        assert!(
            stderr(&out).contains("nothing was changed"),
            "{url}: {out:?}"
        );
        assert_eq!(stored(&store), theirs, "{url}: the losing promote wrote");
        // No shadow rule to promote: a usage error naming what is missing.
        let out = store.run(&["promote", "--family", "degrade", "--at"], &[]);
        assert_eq!(out.status.code(), Some(2), "{url}: {out:?}");
        assert!(
            stderr(&out).contains("no shadow degrade rule"),
            "{url}: {out:?}"
        );
    }
}

/// A plain `push` compares and sets wherever the store keeps revisions (etcd, Redis, NATS, ZooKeeper),
/// and `--no-cas` opts out; a file and Nacos, which keep none, are overwritten.
#[test]
fn push_compares_and_sets_by_default_where_the_store_keeps_revisions() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let rules = write(dir.path(), "rules.json", RULES);
    for store in stores(dir.path(), "defaultcas")
        .into_iter()
        .filter(|s| !s.per_family)
    {
        let url = store.url.as_str();
        for (flags, expected) in [(&[][..], store.cas), (&["--no-cas"][..], false)] {
            let out = store.run(&["--json", "push", rules.as_str(), "--to"], flags);
            assert!(
                out.status.success(),
                "{url} {flags:?}: {out:?}; is the server up? start it with \
                 `scripts/services.sh start {}`",
                store.service
            );
            let doc: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
            assert_eq!(
                doc["compare_and_set"],
                Value::Bool(expected),
                "{url} {flags:?}: {doc}"
            );
        }
        let out = store.run(&["push", rules.as_str(), "--to"], &["--cas", "--no-cas"]);
        assert_eq!(out.status.code(), Some(2), "{url}: {out:?}");
    }
}

/// A file and a Nacos dataId keep no revisions: `--cas` on them is a usage error (exit 2),
/// and nothing is written.
#[test]
fn cas_on_a_store_without_revisions_is_a_usage_error() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let rules = write(dir.path(), "rules.json", RULES);
    for store in stores(dir.path(), "nocas")
        .into_iter()
        .filter(|s| !s.cas && !s.per_family)
    {
        let out = store.run(&["push", rules.as_str(), "--to"], &["--cas"]);
        assert_eq!(out.status.code(), Some(2), "{}: {out:?}", store.url);
        assert!(
            stderr(&out).contains("keeps no revisions"),
            "{}: {out:?}",
            store.url
        );
        let out = store.run(&["--json", "get", "--from"], &[]);
        assert!(out.status.success(), "{}: {out:?}", store.url);
        let doc: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
        assert_eq!(
            doc["entries"],
            serde_json::json!([]),
            "{}: {doc}",
            store.url
        );
    }
}
