//! The built `sentinel-rules` binary against the real servers of `scripts/services.sh`: exit
//! codes of `validate`, `push` then `get` round trips on every store, `diff`, `watch` seeing
//! each change on every store, and a password read from standard input. A missing server
//! fails the test naming the command that starts it.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use sentinel_core::datasource::testkit::{env_or, run_services, unique_key, OutputLines};
use sentinel_core::datasource::{CombinedJson, Converter};
use sentinel_core::RuleSet;
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
fn stored(url: &str) -> RuleSet {
    let out = run(&["--json", "get", "--from", url]);
    assert!(
        out.status.success(),
        "get {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    let value = &doc["entries"][0]["value"];
    let bytes = serde_json::to_vec(value).expect("re-encode");
    CombinedJson::new()
        .convert(&bytes)
        .expect("the stored rules convert")
}

/// A fresh place in every store, with the `scripts/services.sh` instance that serves it and
/// whether the store has revisions for `--cas`.
fn stores(dir: &Path, test: &str) -> Vec<(String, &'static str, bool)> {
    let id = format!("cli-{test}-{}", std::process::id());
    let etcd =
        env_or("SENTINEL_ETCD_ENDPOINTS", "http://127.0.0.1:23790").replace("http://", "etcd://");
    vec![
        (format!("file://{}/{test}.json", dir.display()), "", false),
        (
            format!("{etcd}{}", unique_key("/sentinel-test", &id)),
            "etcd-main",
            true,
        ),
        (
            format!(
                "redis://{}/{}",
                env_or("SENTINEL_REDIS_ADDR", "127.0.0.1:16379"),
                unique_key("rules:", &id).replace('/', ":")
            ),
            "redis-main",
            true,
        ),
        (
            format!(
                "nacos://{}/{id}",
                env_or("SENTINEL_NACOS_ADDR", "127.0.0.1:18848")
            ),
            "nacos-main",
            false,
        ),
        (
            format!(
                "nats://{}/{id}/rules",
                env_or("SENTINEL_NATS_ADDR", "127.0.0.1:14222")
            ),
            "nats-main",
            true,
        ),
    ]
}

/// `push` of `file` to `url` (with `--cas` if `cas`), which must succeed.
fn push(file: &str, url: &str, service: &str, cas: bool) {
    let mut args = vec!["push", file, "--to", url];
    if cas {
        args.push("--cas");
    }
    let out = run(&args);
    assert!(
        out.status.success(),
        "push to {url} failed ({}); is the server up? start it with \
         `scripts/services.sh start {service}`",
        String::from_utf8_lossy(&out.stderr)
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
        r#"[{"resource": "GET:/a", "count": -1}, {"resource": "GET:/b", "grade": 9}]"#,
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

/// Every store: push, get it back exactly, diff (nothing, then a change).
#[test]
fn push_then_get_round_trips_on_every_store() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let rules = write(dir.path(), "rules.json", RULES);
    let changed = write(dir.path(), "changed.json", CHANGED);
    let expected = CombinedJson::new()
        .convert(RULES.as_bytes())
        .expect("valid");
    for (url, service, cas) in stores(dir.path(), "push") {
        let url = url.as_str();
        push(&rules, url, service, cas);
        assert_eq!(stored(url), expected, "{url}");
        let same = run(&["diff", rules.as_str(), "--from", url]);
        assert_eq!(same.status.code(), Some(0), "{url}: {same:?}");
        let other = run(&["--json", "diff", changed.as_str(), "--from", url]);
        assert_eq!(other.status.code(), Some(1), "{url}: {other:?}");
        let doc: Value = serde_json::from_str(&stdout(&other)).expect("JSON");
        let ops: Vec<&str> = doc["changes"]
            .as_array()
            .map(|c| c.iter().filter_map(|c| c["op"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(ops, vec!["-", "+"], "{url}: {doc}");
    }
}

/// `watch --json` on every store: the initial load, then a pushed change, each printed as
/// an applied update with the source's status; on a file, a bad write is printed as
/// rejected.
#[test]
fn watch_prints_every_update_on_every_store() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let rules = write(dir.path(), "rules.json", RULES);
    let changed = write(dir.path(), "changed.json", CHANGED);
    for (url, service, cas) in stores(dir.path(), "watch") {
        push(&rules, &url, service, cas);
        let is_file = url.starts_with("file://");
        let updates = if is_file { "3" } else { "2" };
        let mut watch = Watch::start(&url, updates);
        let first = watch.next_line(&url);
        assert_eq!(first["event"], "applied", "{url}: {first}");
        push(&changed, &url, service, cas);
        let second = watch.next_line(&url);
        assert_eq!(second["event"], "applied", "{url}: {second}");
        assert_eq!(second["status"]["applied"], 2, "{url}: {second}");
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
    run_services(&["start", "redis-fault"]);
    push(&rules, &url, "redis-fault", false);
    let mut watch = Watch::start(&url, "2");
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
    push(&changed, &url, "redis-fault", false);
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
    fn start(url: &str, updates: &str) -> Self {
        let mut child = Command::new(BIN)
            .args(["--json", "watch", "--from", url, "--updates", updates])
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
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.to_lowercase().contains("auth"), "{text}");
    assert!(!text.contains(secret), "the password was printed: {text}");
}
