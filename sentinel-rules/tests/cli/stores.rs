//! `push`, `get`, `diff` and `delete` on every store, keys with special characters, and an
//! etcd prefix.

use super::*;

/// Every store: push, get it back exactly, diff (nothing: exit 0; then field-level changes
/// in every family the store holds: exit 3), delete, and get and diff after the delete.
#[test]
fn push_get_diff_delete_on_every_store() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let rules = write(dir.path(), "rules.json", RULES);
    let changed = write(dir.path(), "changed.json", CHANGED);
    let expected = CombinedJson::new()
        .convert(RULES.as_bytes())
        .expect("valid");
    for store in stores(dir.path(), "push") {
        let url = store.url.as_str();
        push(&rules, &store);
        let out = store.run(&["--json", "get", "--from"], &[]);
        assert!(out.status.success(), "{url}: {}", stderr(&out));
        if store.per_family {
            let doc: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
            assert_eq!(
                doc["entries"].as_array().map(Vec::len),
                Some(3),
                "{url}: {doc}"
            );
            // Read as one document, each dataId with its family's converter.
            assert_eq!(
                doc["document"]["flow"][0]["resource"], "GET:/order",
                "{url}: {doc}"
            );
            assert_eq!(stderr(&out), "", "{url}: nothing to warn about");
        } else {
            assert_eq!(stored(&store), expected, "{url}");
        }
        let same = store.run(&["diff", rules.as_str(), "--from"], &[]);
        assert_eq!(same.status.code(), Some(0), "{url}: {same:?}");
        assert!(stdout(&same).starts_with("no change"), "{url}: {same:?}");

        let other = store.run(&["diff", changed.as_str(), "--from"], &[]);
        assert_eq!(other.status.code(), Some(3), "{url}: {other:?}");
        let text = stdout(&other);
        assert!(
            text.contains("~ flow GET:/order: count: 20.0 -> 7.0"),
            "{url}: {text}"
        );
        assert!(text.contains("degrade: 1 rule removed"), "{url}: {text}");
        assert!(text.contains("paramFlow: 1 rule removed"), "{url}: {text}");
        let other = store.run(&["--json", "diff", changed.as_str(), "--from"], &[]);
        assert_eq!(other.status.code(), Some(3), "{url}: {other:?}");
        let doc: Value = serde_json::from_str(&stdout(&other)).expect("JSON");
        let ops: Vec<(&str, &str)> = doc["changes"]
            .as_array()
            .map(|c| {
                c.iter()
                    .filter_map(|c| Some((c["op"].as_str()?, c["family"].as_str()?)))
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(
            ops,
            vec![("~", "flow"), ("-", "degrade"), ("-", "paramFlow")],
            "{url}: {doc}"
        );
        assert_eq!(
            doc["changes"][0]["fields"][0]["field"], "count",
            "{url}: {doc}"
        );

        let out = store.run(&["delete", "--from"], &[]);
        assert!(out.status.success(), "delete {url}: {}", stderr(&out));
        let out = store.run(&["--json", "get", "--from"], &[]);
        assert!(out.status.success(), "{url}: {}", stderr(&out));
        let doc: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
        assert_eq!(
            doc["entries"],
            serde_json::json!([]),
            "{url}: after delete: {doc}"
        );
        // Nothing stored: every rule of the file is an addition.
        let out = store.run(&["--json", "diff", changed.as_str(), "--from"], &[]);
        assert_eq!(out.status.code(), Some(3), "{url}: {out:?}");
        let doc: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
        assert_eq!(doc["changes"][0]["op"], "+", "{url}: {doc}");
        // Deleting what is not there succeeds.
        let out = store.run(&["delete", "--from"], &[]);
        assert!(out.status.success(), "delete {url} again: {}", stderr(&out));
    }
}

/// Keys with `{}`, `*`, `/` and spaces, written percent-encoded or not, reach the store as
/// written (etcd and Redis), and a NATS `>` wildcard reads every key under it.
#[test]
fn keys_with_special_characters_are_stored_as_written() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let rules = write(dir.path(), "rules.json", RULES);
    let id = format!("cli-keys-{}", std::process::id());
    let etcd =
        env_or("SENTINEL_ETCD_ENDPOINTS", "http://127.0.0.1:23790").replace("http://", "etcd://");
    let redis = env_or("SENTINEL_REDIS_ADDR", "127.0.0.1:16379");
    let key = format!(
        "{}:{{orders}}:a b*/c",
        unique_key("rules", &id).replace('/', ":")
    );
    let encoded = key
        .replace('{', "%7B")
        .replace('}', "%7D")
        .replace(' ', "%20");
    for (written, read, shown) in [
        (
            format!("{etcd}/{key}"),
            format!("{etcd}/{encoded}"),
            format!("/{key}"),
        ),
        (
            format!("redis://{redis}/{encoded}"),
            format!("redis://{redis}/{key}"),
            key.clone(),
        ),
    ] {
        let store = Store::new(written.clone(), "", false);
        push(&rules, &store);
        let out = run(&["--json", "get", "--from", &read]);
        assert!(out.status.success(), "{read}: {out:?}");
        let doc: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
        assert_eq!(doc["entries"][0]["key"], shown.as_str(), "{read}: {doc}");
        assert!(run(&["delete", "--from", &written]).status.success());
    }
    let nats = env_or("SENTINEL_NATS_ADDR", "127.0.0.1:14222");
    for key in ["rules.flow", "rules.degrade"] {
        push(
            &rules,
            &Store::new(format!("nats://{nats}/{id}/{key}"), "nats-main", false),
        );
    }
    let out = run(&[
        "--json",
        "get",
        "--from",
        &format!("nats://{nats}/{id}/rules.%3E"),
    ]);
    assert!(out.status.success(), "{out:?}");
    let doc: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    let keys = entry_keys(&doc);
    assert_eq!(keys.len(), 2, "{doc}");
    assert!(
        keys.iter()
            .all(|k| k.ends_with("rules.flow") || k.ends_with("rules.degrade")),
        "{doc}"
    );
    let out = run(&["delete", "--from", &format!("nats://{nats}/{id}/rules.>")]);
    assert!(out.status.success(), "{out:?}");
}

/// An etcd prefix is every key under it, merged: `get` lists them, `diff` and `watch` see the
/// union, `push` to it is refused (exit 2), and `delete` removes every key.
#[test]
fn an_etcd_prefix_reads_diffs_watches_and_deletes_every_key_under_it() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let [flow, degrade, both] = family_files(dir.path());
    let changed = write(dir.path(), "changed.json", CHANGED);
    let etcd =
        env_or("SENTINEL_ETCD_ENDPOINTS", "http://127.0.0.1:23790").replace("http://", "etcd://");
    let prefix = format!(
        "{etcd}{}/",
        unique_key(
            "/sentinel-test",
            &format!("cli-prefix-{}", std::process::id())
        )
    );
    let url = format!("{prefix}?prefix");
    push(&flow, &Store::new(format!("{prefix}a"), "etcd-main", true));
    push(
        &degrade,
        &Store::new(format!("{prefix}b"), "etcd-main", true),
    );

    let out = run(&["--json", "get", "--from", &url]);
    assert!(out.status.success(), "{out:?}");
    let doc: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(doc["entries"].as_array().map(Vec::len), Some(2), "{doc}");
    assert_eq!(run(&["diff", &both, "--from", &url]).status.code(), Some(0));
    assert_eq!(run(&["diff", &flow, "--from", &url]).status.code(), Some(3));
    let out = run(&["push", &both, "--to", &url]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");

    let store = Store::new(url.clone(), "etcd-main", false);
    let mut watch = Watch::start(&store, "2");
    assert_eq!(watch.next_line(&url)["event"], "applied");
    push(
        &changed,
        &Store::new(format!("{prefix}a"), "etcd-main", true),
    );
    let update = watch.next_line(&url);
    assert!(
        update["changed"]
            .as_str()
            .is_some_and(|c| c.contains("count: 20.0 -> 7.0")),
        "{update}"
    );
    watch.finish(&url);

    let out = run(&["--json", "delete", "--from", &url]);
    assert!(out.status.success(), "{out:?}");
    let doc: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(doc["deleted"].as_array().map(Vec::len), Some(2), "{doc}");
    let out = run(&["--json", "get", "--from", &url]);
    let doc: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(doc["entries"], serde_json::json!([]), "{doc}");
}
