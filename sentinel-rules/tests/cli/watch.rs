//! `watch`: every update on every store, and the store going away and coming back.

use super::*;

/// `watch --json` on every store: the initial load, then a pushed change, each printed as
/// an applied update with its time, what changed and the source's status; on a file, a bad
/// write is printed as rejected.
#[test]
fn watch_prints_every_update_on_every_store() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let rules = write(dir.path(), "rules.json", RULES);
    let changed = write(dir.path(), "changed.json", CHANGED);
    for store in stores(dir.path(), "watch") {
        let url = store.url.clone();
        push(&rules, &store);
        let is_file = url.starts_with("file://");
        let updates = if is_file { "3" } else { "2" };
        let mut watch = Watch::start(&store, updates);
        let first = watch.next_line(&url);
        assert_eq!(first["event"], "applied", "{url}: {first}");
        assert!(
            first["time"].as_str().is_some_and(|t| t.ends_with('Z')),
            "{first}"
        );
        push(&changed, &store);
        let second = watch.next_line(&url);
        assert_eq!(second["event"], "applied", "{url}: {second}");
        assert_eq!(second["status"]["applied"], 2, "{url}: {second}");
        let what = second["changed"].as_str().unwrap_or_default();
        assert!(
            what.contains("GET:/order count: 20.0 -> 7.0"),
            "{url}: {second}"
        );
        if let Some(path) = url.strip_prefix("file://") {
            std::fs::write(
                path,
                r#"{"flow": [{"resource": "GET:/order", "count": -1}]}"#,
            )
            .expect("write a bad rules file");
            let third = watch.next_line(&url);
            assert_eq!(third["event"], "rejected", "{url}: {third}");
            assert_eq!(third["status"]["rejected"], 1, "{url}: {third}");
            // It stopped on rules the services reject: exit 6.
            watch.finish_with(&url, 6);
            continue;
        }
        watch.finish(&url);
    }
}

/// `watch` on a store that goes away and comes back prints both as they happen, between
/// its updates. Uses `redis-fault`, the Redis the fault tests stop and restart (it keeps its
/// data).
#[test]
fn watch_prints_the_store_going_away_and_coming_back() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let rules = write(dir.path(), "rules.json", RULES);
    let changed = write(dir.path(), "changed.json", CHANGED);
    let url = format!(
        "redis://{}/{}",
        env_or("SENTINEL_REDIS_FAULT_ADDR", "127.0.0.1:16382"),
        unique_key("rules:", "cli-fault").replace('/', ":")
    );
    let store = Store::new(url.clone(), "redis-fault", false);
    run_services(&["start", "redis-fault"]);
    push(&rules, &store);
    let mut watch = Watch::start(&store, "2");
    assert_eq!(watch.next_line(&url)["event"], "applied");

    run_services(&["stop", "redis-fault"]);
    let down = watch.next_line(&url);
    assert_eq!(down["event"], "disconnected", "{down}");
    assert_eq!(down["status"]["connected"], false, "{down}");
    assert!(down["error"].is_string(), "{down}");

    run_services(&["start", "redis-fault"]);
    let up = watch.next_line(&url);
    assert_eq!(up["event"], "connected", "{up}");
    assert_eq!(up["status"]["disconnects"], 1, "{up}");
    push(&changed, &store);
    let update = watch.next_line(&url);
    assert_eq!(update["event"], "applied", "{update}");
    assert_eq!(update["status"]["applied"], 2, "{update}");
    watch.finish(&url);
}
