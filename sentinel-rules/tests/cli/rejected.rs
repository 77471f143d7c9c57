//! Stored rules the services reject (a truncated write, an invalid rule): `get` prints them
//! with the reason and `diff` says so, both with exit 6 (not 4: the store answered); `watch`
//! reports the rejection, keeps following, and applies the fix.

use super::raw::{self, raw_stores};
use super::*;

/// A write cut short: the services reject it whole.
const TRUNCATED: &str = r#"{"flow": [{"resource": "GET:/order", "count": 20}"#;

/// `get` prints rules the services reject, warns with the reason and exits 6 (`--json`:
/// `"ok": false` and the error beside the entries); `diff` exits 6 where it exited 4; a
/// per-family list is checked with `--family` (`get --family flow` is no usage error), and
/// only noted as unchecked without it. File, etcd, Redis, NATS and ZooKeeper.
#[test]
fn get_and_diff_exit_6_on_stored_rules_the_services_reject() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let rules = write(dir.path(), "rules.json", RULES);
    for store in raw_stores(dir.path(), "rejected") {
        let url = store.url.as_str();
        raw::put(&store, TRUNCATED);
        let out = store.run(&["get", "--from"], &[]);
        assert_eq!(out.status.code(), Some(6), "{url}: {out:?}");
        assert!(
            stdout(&out).contains(TRUNCATED),
            "{url}: printed as stored: {out:?}"
        );
        let warning = stderr(&out);
        assert!(
            warning.contains("rejected by the services") && warning.contains("EOF"),
            "{url}: {warning}"
        );
        let out = store.run(&["--json", "get", "--from"], &[]);
        assert_eq!(out.status.code(), Some(6), "{url}: {out:?}");
        let doc: Value = serde_json::from_str(&stdout(&out)).expect("one JSON object");
        assert_eq!(doc["ok"], false, "{url}: {doc}");
        assert_eq!(doc["entries"][0]["value"], TRUNCATED, "{url}: {doc}");
        assert!(
            doc["error"]
                .as_str()
                .is_some_and(|e| e.contains("rejected")),
            "{url}: {doc}"
        );

        let out = store.run(&["diff", rules.as_str(), "--from"], &[]);
        assert_eq!(out.status.code(), Some(6), "{url}: {out:?}");
        assert!(
            stderr(&out).contains("rejected by the services"),
            "{url}: {out:?}"
        );

        // An invalid rule is rejected too, naming the field.
        raw::put(
            &store,
            r#"{"flow": [{"resource": "GET:/order", "count": -1}]}"#,
        );
        let out = store.run(&["get", "--from"], &[]);
        assert_eq!(out.status.code(), Some(6), "{url}: {out:?}");
        assert!(stderr(&out).contains("count"), "{url}: {out:?}");

        // Good rules: exit 0, no warning.
        push(&rules, &store);
        let out = store.run(&["get", "--from"], &[]);
        assert_eq!(out.status.code(), Some(0), "{url}: {out:?}");
        assert_eq!(stderr(&out), "", "{url}");

        // One family's list: checked with its --family, noted as unchecked without.
        raw::put(&store, r#"[{"resource": "GET:/order", "count": 5}]"#);
        let out = store.run(&["get", "--from"], &[]);
        assert_eq!(out.status.code(), Some(0), "{url}: {out:?}");
        assert!(stderr(&out).contains("--family"), "{url}: {out:?}");
        let out = store.run(&["get", "--family", "flow", "--from"], &[]);
        assert_eq!(out.status.code(), Some(0), "{url}: {out:?}");
        raw::put(&store, r#"[{"resource": "GET:/order", "count": -5}]"#);
        let out = store.run(&["get", "--family", "flow", "--from"], &[]);
        assert_eq!(out.status.code(), Some(6), "{url}: {out:?}");
    }
}

/// `watch` on a store holding rules the services reject prints the rejection and keeps
/// following: the fix is applied, a new bad write is reported, and a watch that stops on
/// it exits 6. File, etcd, Redis, NATS and ZooKeeper.
#[test]
fn watch_reports_stored_rules_the_services_reject_and_keeps_following() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let rules = write(dir.path(), "rules.json", RULES);
    for store in raw_stores(dir.path(), "watchrejected") {
        let url = store.url.clone();
        raw::put(&store, TRUNCATED);
        let mut watch = Watch::start(&store, "3");
        let first = watch.next_line(&url);
        assert_eq!(first["event"], "rejected", "{url}: {first}");
        assert!(
            first["error"].as_str().is_some_and(|e| e.contains("EOF")),
            "{url}: {first}"
        );
        assert_eq!(first["status"]["rejected"], 1, "{url}: {first}");
        push(&rules, &store);
        let fixed = watch.next_line(&url);
        assert_eq!(fixed["event"], "applied", "{url}: {fixed}");
        assert_eq!(fixed["rules"]["flow"], 1, "{url}: {fixed}");
        raw::put(&store, TRUNCATED);
        let again = watch.next_line(&url);
        assert_eq!(again["event"], "rejected", "{url}: {again}");
        assert_eq!(again["status"]["rejected"], 2, "{url}: {again}");
        watch.finish_with(&url, 6);
    }
}
