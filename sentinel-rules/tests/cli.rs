//! The built `sentinel-rules` binary against the real servers of `scripts/services.sh`: exit
//! codes of `validate`; `push`, `get`, `diff`, `delete` and `watch` on every store (a file,
//! etcd with and without TLS, Redis with and without TLS, through a Sentinel and a Cluster,
//! one Nacos dataId and an app's dashboard dataIds, NATS with and without TLS); keys with
//! special characters; a `push --cas` that loses a race; the messages a user reads; and a
//! password read from standard input. A missing server fails the test naming the command
//! that starts it.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use sentinel_core::datasource::{CombinedJson, Converter};
use sentinel_core::RuleSet;
use sentinel_test_support::{env_or, run_services, unique_key, OutputLines};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_sentinel-rules");

const RULES: &str = r#"{
  "flow": [{"resource": "GET:/order", "count": 20}],
  "degrade": [{"resource": "GET:/order", "grade": 2, "count": 5, "timeWindow": 10}],
  "paramFlow": [{"resource": "GET:/order", "paramIdx": 0, "count": 5}]
}"#;

const CHANGED: &str = r#"{"flow": [{"resource": "GET:/order", "count": 7}]}"#;

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {BIN}: {e}"))
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write a rules file");
    path.display().to_string()
}

/// `get --json` of `url`: the one stored entry's value, converted as a combined document.
fn stored(store: &Store) -> RuleSet {
    let out = store.run(&["--json", "get", "--from"], &[]);
    assert!(out.status.success(), "get {}: {}", store.url, stderr(&out));
    let doc: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    let value = &doc["entries"][0]["value"];
    let bytes = serde_json::to_vec(value).expect("re-encode");
    CombinedJson::new()
        .convert(&bytes)
        .expect("the stored rules convert")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A place in a store, the `scripts/services.sh` instance that serves it, and what it takes.
#[derive(Debug, Clone)]
struct Store {
    url: String,
    service: &'static str,
    /// Whether the store keeps revisions, for `--cas`.
    cas: bool,
    /// Options every command on it takes (`--ca-file` of a TLS store).
    options: Vec<String>,
    /// Whether `get` shows one document per family (a Nacos app).
    per_family: bool,
}

impl Store {
    fn new(url: String, service: &'static str, cas: bool) -> Self {
        Self {
            url,
            service,
            cas,
            options: Vec::new(),
            per_family: false,
        }
    }

    fn ca(mut self, variable: &str) -> Self {
        let ca = std::env::var(variable).unwrap_or_else(|_| {
            panic!("{variable} is not set: run `eval \"$(scripts/services.sh env)\"`")
        });
        self.options = vec!["--ca-file".into(), ca];
        self
    }

    /// Runs `args`, then this store's URL, then `more` and the store's options.
    fn run(&self, args: &[&str], more: &[&str]) -> Output {
        let mut all: Vec<&str> = args.to_vec();
        all.push(&self.url);
        all.extend_from_slice(more);
        all.extend(self.options.iter().map(String::as_str));
        run(&all)
    }
}

/// A fresh place in every store.
fn stores(dir: &Path, test: &str) -> Vec<Store> {
    let id = format!("cli-{test}-{}", std::process::id());
    let etcd = |var: &str, default: &str, scheme: &str| {
        let endpoint = env_or(var, default);
        let host = endpoint.split("://").nth(1).unwrap_or(&endpoint).to_owned();
        format!("{scheme}://{host}{}", unique_key("/sentinel-test", &id))
    };
    let redis_key = unique_key("rules:", &id).replace('/', ":");
    let first = |var: &str, default: &str| {
        env_or(var, default)
            .split(',')
            .next()
            .unwrap_or_default()
            .to_owned()
    };
    let mut app = Store::new(
        format!(
            "nacos://{}/?app={id}",
            env_or("SENTINEL_NACOS_ADDR", "127.0.0.1:18848")
        ),
        "nacos-main",
        false,
    );
    app.per_family = true;
    vec![
        Store::new(format!("file://{}/{test}.json", dir.display()), "", false),
        Store::new(
            etcd("SENTINEL_ETCD_ENDPOINTS", "http://127.0.0.1:23790", "etcd"),
            "etcd-main",
            true,
        ),
        Store::new(
            etcd(
                "SENTINEL_ETCD_TLS_ENDPOINTS",
                "https://127.0.0.1:23793",
                "etcds",
            ),
            "etcd-tls",
            true,
        )
        .ca("SENTINEL_ETCD_TLS_CA"),
        Store::new(
            format!(
                "redis://{}/{redis_key}",
                env_or("SENTINEL_REDIS_ADDR", "127.0.0.1:16379")
            ),
            "redis-main",
            true,
        ),
        Store::new(
            format!(
                "rediss://{}/{redis_key}",
                env_or("SENTINEL_REDIS_TLS_ADDR", "127.0.0.1:16383")
            ),
            "redis-tls",
            true,
        )
        .ca("SENTINEL_REDIS_TLS_CA"),
        Store::new(
            format!(
                "redis://{}/{redis_key}?master={}",
                first("SENTINEL_REDIS_SENTINEL_ADDRS", "127.0.0.1:26390"),
                env_or("SENTINEL_REDIS_MASTER_NAME", "sentinel-test")
            ),
            "redis-ha",
            true,
        ),
        Store::new(
            format!(
                "redis://{}/{redis_key}?cluster",
                first("SENTINEL_REDIS_CLUSTER_ADDRS", "127.0.0.1:16401")
            ),
            "redis-cluster",
            true,
        ),
        Store::new(
            format!(
                "nacos://{}/{id}",
                env_or("SENTINEL_NACOS_ADDR", "127.0.0.1:18848")
            ),
            "nacos-main",
            false,
        ),
        app,
        Store::new(
            format!(
                "nats://{}/{id}/rules",
                env_or("SENTINEL_NATS_ADDR", "127.0.0.1:14222")
            ),
            "nats-main",
            true,
        ),
        Store::new(
            format!(
                "natss://{}/{id}/rules",
                env_or("SENTINEL_NATS_TLS_ADDR", "127.0.0.1:14225")
            ),
            "nats-tls",
            true,
        )
        .ca("SENTINEL_NATS_TLS_CA"),
    ]
}

/// `push` of `file` to the store (with `--cas` where it keeps revisions), which must
/// succeed.
fn push(file: &str, store: &Store) {
    let mut more = Vec::new();
    if store.cas {
        more.push("--cas");
    }
    let out = store.run(&["push", file, "--to"], &more);
    assert!(
        out.status.success(),
        "push to {} failed ({}); is the server up? start it with \
         `scripts/services.sh start {}`",
        store.url,
        stderr(&out),
        store.service
    );
}

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
        }
        watch.finish(&url);
    }
}

impl Drop for Watch {
    /// A test that failed midway leaves no watcher running.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
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

/// A running `watch --json`, its output read line by line as it comes.
struct Watch {
    child: std::process::Child,
    output: OutputLines,
}

impl Watch {
    fn start(store: &Store, updates: &str) -> Self {
        let mut child = Command::new(BIN)
            .args([
                "--json",
                "watch",
                "--from",
                &store.url,
                "--updates",
                updates,
            ])
            .args(&store.options)
            .stdout(Stdio::piped())
            .spawn()
            .expect("watch starts");
        let output = OutputLines::read(child.stdout.take().expect("piped stdout"));
        Self { child, output }
    }

    /// The next update printed, within 20 s.
    fn next_line(&mut self, url: &str) -> Value {
        let line = self
            .output
            .next_within(Duration::from_secs(20))
            .unwrap_or_else(|| panic!("watch {url} printed no update within 20 s"));
        serde_json::from_str(&line).expect("one JSON object per line")
    }

    /// The watcher stops by itself after its updates, with success.
    fn finish(&mut self, url: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match self.child.try_wait().expect("the watcher's state") {
                Some(status) => {
                    assert!(status.success(), "watch {url}: {status}");
                    return;
                }
                None if Instant::now() > deadline => {
                    panic!("watch {url} did not stop after its updates")
                }
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }
}

/// `--password-stdin` reaches the store, and the password is never printed: the test Redis
/// has no password, so it refuses the one the command sends.
#[test]
fn a_password_from_stdin_reaches_the_store_and_is_never_printed() {
    use std::io::Write as _;
    let url = format!(
        "redis://{}/{}",
        env_or("SENTINEL_REDIS_ADDR", "127.0.0.1:16379"),
        unique_key("rules:", "cli-password").replace('/', ":")
    );
    let out = run(&["get", "--from", &url]);
    assert!(
        out.status.success(),
        "get {url} failed ({}); is the server up? start it with \
         `scripts/services.sh start redis-main`",
        String::from_utf8_lossy(&out.stderr)
    );
    let secret = "pw-from-stdin-7f3a";
    let mut child = Command::new(BIN)
        .args(["--password-stdin", "get", "--from", &url])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {BIN}: {e}"));
    if let Some(mut stdin) = child.stdin.take() {
        // A command that failed before reading its input says why below.
        let _ = writeln!(stdin, "{secret}");
    }
    let out = child.wait_with_output().expect("the command ends");
    let text = format!("{}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    // A store error: exit 4, naming the server.
    assert_eq!(out.status.code(), Some(4), "{text}");
    assert!(text.to_lowercase().contains("auth"), "{text}");
    assert!(
        text.contains(&env_or("SENTINEL_REDIS_ADDR", "127.0.0.1:16379")),
        "{text}"
    );
    assert!(!text.contains(secret), "the password was printed: {text}");
}

/// `push --if-revision` with the revision our `push --json` printed, after someone else wrote:
/// exit 5 naming the conflict, and the other writer's rules stay (etcd, Redis, NATS).
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
/// (every store that keeps revisions: etcd, Redis, NATS, with and without TLS).
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
        let shadow = now.shadow.as_deref().expect("a shadow section");
        assert_eq!(shadow.flow.as_deref().map(<[_]>::len), Some(0), "{url}");

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

/// A plain `push` compares and sets wherever the store keeps revisions (etcd, Redis, NATS),
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
    let keys: Vec<&str> = doc["entries"]
        .as_array()
        .map(|e| e.iter().filter_map(|e| e["key"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(keys.len(), 2, "{doc}");
    assert!(
        keys.iter()
            .all(|k| k.ends_with("rules.flow") || k.ends_with("rules.degrade")),
        "{doc}"
    );
    let out = run(&["delete", "--from", &format!("nats://{nats}/{id}/rules.>")]);
    assert!(out.status.success(), "{out:?}");
}

/// What a user reads: a refused connection names the server and says each cause once; a
/// password in a URL is refused pointing at the variables; a bare path is a file; a missing
/// NATS bucket is named plainly; `--help` has examples and the environment; a mistyped
/// command gets a suggestion; completions print; `--timeout` bounds a silent server.
#[test]
fn messages_name_the_store_and_say_what_to_do() {
    for url in [
        "etcd://127.0.0.1:1/rules",
        "redis://127.0.0.1:1/rules",
        "nats://127.0.0.1:1/bucket/rules",
        "nacos://127.0.0.1:1/rules",
    ] {
        let out = run(&["get", "--from", url]);
        assert_eq!(out.status.code(), Some(4), "{url}: {out:?}");
        let text = stderr(&out);
        assert!(text.contains("127.0.0.1:1"), "{url}: {text}");
        assert_eq!(
            text.matches("Connection refused").count(),
            1,
            "{url}: {text}"
        );
        assert_eq!(text.lines().count(), 1, "{url}: {text}");
    }

    // A TLS store without its CA says which option gives it.
    let tls = format!(
        "rediss://{}/rules",
        env_or("SENTINEL_REDIS_TLS_ADDR", "127.0.0.1:16383")
    );
    let out = run(&["get", "--from", &tls]);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert!(stderr(&out).contains("--ca-file"), "{out:?}");

    let out = run(&["get", "--from", "redis://ops:hunter2@127.0.0.1:6379/rules"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let text = stderr(&out);
    assert!(
        text.contains("SENTINEL_RULES_USER") && text.contains("SENTINEL_RULES_PASSWORD"),
        "{text}"
    );
    assert!(
        !text.contains("hunter2"),
        "the password was printed: {text}"
    );

    let dir = tempfile::tempdir().expect("a temporary directory");
    let rules = write(dir.path(), "rules.json", RULES);
    let bare = dir.path().join("bare.json").display().to_string();
    let out = run(&["push", &rules, "--to", &bare]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        run(&["diff", &rules, "--from", &bare]).status.code(),
        Some(0)
    );

    let nats = env_or("SENTINEL_NATS_ADDR", "127.0.0.1:14222");
    let bucket = format!("cli-missing-{}", std::process::id());
    let out = run(&["get", "--from", &format!("nats://{nats}/{bucket}/rules")]);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{out:?}; start NATS with `scripts/services.sh start nats-main`"
    );
    let text = stderr(&out);
    assert!(
        text.contains(&format!("bucket {bucket} does not exist")),
        "{text}"
    );
    assert!(!text.contains("::"), "names a Rust item: {text}");

    let help = stdout(&run(&["--help"]));
    for needle in [
        "Examples:",
        "SENTINEL_RULES_USER",
        "SENTINEL_RULES_PASSWORD",
        "Exit codes:",
        "3 diff",
    ] {
        assert!(help.contains(needle), "--help lacks {needle}: {help}");
    }
    let out = run(&["gett", "--from", "x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("similar subcommand exists: 'get'"),
        "{out:?}"
    );
    let out = run(&["completions", "bash"]);
    let script = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        script.contains("complete -F"),
        "not a bash completion script"
    );
    // Bash completes a subcommand's options with it.
    let completed = Command::new("bash")
        .arg("-c")
        .arg(
            "source /dev/stdin; COMP_WORDS=(sentinel-rules push --if); COMP_CWORD=2; \
             _sentinel__rules sentinel-rules --if push; echo \"${COMPREPLY[@]}\"",
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write as _;
            if let Some(mut stdin) = child.stdin.take() {
                stdin.write_all(script.as_bytes())?;
            }
            child.wait_with_output()
        })
        .expect("bash runs the completion script");
    assert_eq!(stdout(&completed).trim(), "--if-revision");

    // A server that accepts the connection and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("a local port");
    let port = silent.local_addr().expect("its address").port();
    let out = run(&[
        "--timeout",
        "300ms",
        "get",
        "--from",
        &format!("redis://127.0.0.1:{port}/rules"),
    ]);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    let text = stderr(&out).to_lowercase();
    assert!(
        text.contains("timed out") || text.contains("no answer within"),
        "{text}"
    );
    drop(silent);
}

/// An etcd prefix is every key under it, merged: `get` lists them, `diff` and `watch` see the
/// union, `push` to it is refused (exit 2), and `delete` removes every key.
#[test]
fn an_etcd_prefix_reads_diffs_watches_and_deletes_every_key_under_it() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let flow = write(
        dir.path(),
        "flow.json",
        r#"{"flow": [{"resource": "GET:/order", "count": 20}]}"#,
    );
    let degrade = write(
        dir.path(),
        "degrade.json",
        r#"{"degrade": [{"resource": "GET:/order", "grade": 2, "count": 5, "timeWindow": 10}]}"#,
    );
    let both = write(
        dir.path(),
        "both.json",
        r#"{"flow": [{"resource": "GET:/order", "count": 20}],
            "degrade": [{"resource": "GET:/order", "grade": 2, "count": 5, "timeWindow": 10}]}"#,
    );
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
