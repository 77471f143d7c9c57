//! What only `zk://` URLs have: a znode's children as one source, a chroot, several servers
//! in the connect string, a digest login and the creator-only ACL of the znodes a push
//! creates (the push, get, diff, delete and watch of one znode are in the every-store tests).

use super::*;

/// The `zk://host:port` of zookeeper-main, and a znode path no other test uses.
fn zookeeper(test: &str) -> (String, String) {
    let id = format!("cli-{test}-{}", std::process::id());
    (
        format!("zk://{}", addresses::zookeeper::addr()),
        unique_key("/sentinel-test", &id),
    )
}

/// Runs the binary with `login` as `SENTINEL_RULES_USER` / `SENTINEL_RULES_PASSWORD` (and
/// none inherited without it).
fn run_as(login: Option<(&str, &str)>, args: &[&str]) -> Output {
    let mut command = Command::new(BIN);
    command
        .args(args)
        .env_remove("SENTINEL_RULES_USER")
        .env_remove("SENTINEL_RULES_PASSWORD");
    if let Some((user, password)) = login {
        command
            .env("SENTINEL_RULES_USER", user)
            .env("SENTINEL_RULES_PASSWORD", password);
    }
    command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {BIN}: {e}"))
}

/// `?children` reads every child of a znode as one document: `get` lists them, `diff` and
/// `watch` see the union (a child changed, added or removed); `push` and `delete` on it are
/// usage errors (exit 2) that change nothing.
#[test]
fn a_znodes_children_are_read_diffed_and_watched_as_one_and_never_pushed_or_deleted() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let [flow, degrade, both] = family_files(dir.path());
    let changed = write(dir.path(), "changed.json", CHANGED);
    let (server, parent) = zookeeper("children");
    let child = |name: &str| Store::new(format!("{server}{parent}/{name}"), "zookeeper-main", true);
    let url = format!("{server}{parent}?children");
    push(&flow, &child("flow"));
    push(&degrade, &child("degrade"));

    let out = run(&["--json", "get", "--from", &url]);
    assert!(out.status.success(), "{out:?}");
    let doc: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    let keys = entry_keys(&doc);
    assert_eq!(keys.len(), 2, "{doc}");
    assert!(
        keys.iter()
            .all(|k| k.ends_with("/flow") || k.ends_with("/degrade")),
        "{doc}"
    );
    assert_eq!(run(&["diff", &both, "--from", &url]).status.code(), Some(0));
    assert_eq!(run(&["diff", &flow, "--from", &url]).status.code(), Some(3));
    for refused in [
        run(&["push", &both, "--to", &url]),
        run(&["delete", "--from", &url]),
    ] {
        assert_eq!(refused.status.code(), Some(2), "{refused:?}");
        assert!(stderr(&refused).contains("children"), "{refused:?}");
    }
    let out = run(&["--json", "get", "--from", &url]);
    let after: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(
        after["entries"], doc["entries"],
        "the refusals changed nothing"
    );

    let store = Store::new(url.clone(), "zookeeper-main", false);
    let mut watch = Watch::start(&store, "3");
    assert_eq!(watch.next_line(&url)["event"], "applied");
    push(&changed, &child("flow"));
    let update = watch.next_line(&url);
    assert!(
        update["changed"]
            .as_str()
            .is_some_and(|c| c.contains("count: 20.0 -> 7.0")),
        "{update}"
    );
    // A child removed: its rules go.
    let out = run(&["delete", "--from", &child("degrade").url]);
    assert!(out.status.success(), "{out:?}");
    let update = watch.next_line(&url);
    assert!(
        update["changed"]
            .as_str()
            .is_some_and(|c| c.contains("degrade")),
        "{update}"
    );
    watch.finish(&url);
    for last in [child("flow").url, format!("{server}{parent}")] {
        let out = run(&["delete", "--from", &last]);
        assert!(out.status.success(), "delete {last}: {out:?}");
    }
}

/// A push with `?acl=creator` and a digest login makes a znode only that user reads: the
/// right password reads it (through a chroot and a connect string whose first server
/// listens nowhere), a wrong one or none is refused (exit 4) without the password in the
/// message, and the chroot's znode is the full path's.
#[test]
fn a_digest_login_a_creator_acl_a_chroot_and_several_servers() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let rules = write(dir.path(), "rules.json", RULES);
    let expected = CombinedJson::new()
        .convert(RULES.as_bytes())
        .expect("valid");
    let (_, root) = zookeeper("acl");
    let addr = addresses::zookeeper::addr();
    let chrooted = format!("zk://127.0.0.1:1,{addr}/rules?chroot={root}&acl=creator");
    let full = format!("zk://{addr}{root}/rules");
    let app = Some(("app", "apppw"));
    // A chroot that is no znode: a store failure naming it, not a lost race.
    let out = run_as(app, &["push", &rules, "--to", &chrooted]);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert!(
        stderr(&out).contains(&format!("is there a znode {root}?")),
        "{out:?}"
    );
    // A chroot is a znode that exists (as for ZooKeeper's own clients): made here by a push
    // under it, with the open ACL.
    let seed = format!("zk://{addr}{root}/seed");
    let out = run_as(None, &["push", &rules, "--to", &seed]);
    assert!(
        out.status.success(),
        "{out:?}; start ZooKeeper with `scripts/services.sh start zookeeper`"
    );

    let out = run_as(app, &["--json", "push", &rules, "--to", &chrooted]);
    assert!(out.status.success(), "{out:?}");
    for url in [&chrooted, &full] {
        let out = run_as(app, &["--json", "get", "--from", url]);
        assert!(out.status.success(), "{url}: {out:?}");
        let doc: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
        let bytes = serde_json::to_vec(&doc["entries"][0]["value"]).expect("re-encode");
        let stored = CombinedJson::new().convert(&bytes).expect("the rules");
        assert_eq!(stored, expected, "{url}");
    }
    for login in [Some(("app", "not-the-pw-123")), None] {
        let out = run_as(login, &["get", "--from", &full]);
        assert_eq!(out.status.code(), Some(4), "{login:?}: {out:?}");
        let message = stderr(&out);
        assert!(!message.contains("not-the-pw-123"), "{message}");
        assert!(message.contains(&format!("{root}/rules")), "{message}");
    }
    // Nor may anyone else overwrite or delete it.
    let out = run_as(None, &["push", &rules, "--to", &full, "--no-cas"]);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    let out = run_as(app, &["delete", "--from", &chrooted]);
    assert!(out.status.success(), "{out:?}");
    let out = run_as(None, &["--json", "get", "--from", &full]);
    assert!(out.status.success(), "{out:?}");
    let doc: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(doc["entries"], serde_json::json!([]), "{doc}");
    assert!(run_as(None, &["delete", "--from", &seed]).status.success());
}
