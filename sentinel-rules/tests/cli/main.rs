//! The built `sentinel-rules` binary against the real servers of `scripts/services.sh`: exit
//! codes of `validate`; `push`, `get`, `diff`, `delete` and `watch` on every store (a file,
//! etcd with and without TLS, Redis with and without TLS, through a Sentinel and a Cluster,
//! one Nacos dataId and an app's dashboard dataIds, NATS with and without TLS, a ZooKeeper
//! znode, a znode's children, a chroot, a digest login and a creator-only ACL); keys with
//! special characters; a `push --cas` that loses a race; the messages a user reads; a
//! password read from standard input; stored rules the services reject (exit 6); shadow
//! rules in `diff`, the counts and `promote`/`demote`. A missing server fails the test naming the command
//! that starts it.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use sentinel_core::datasource::{CombinedJson, Converter};
use sentinel_core::RuleSet;
use sentinel_test_support::{addresses, env_or, run_services, unique_key, OutputLines};
use serde_json::Value;

mod cas;
mod messages;
mod raw;
mod rejected;
mod shadow;
mod stores;
mod validate;
mod watch;
mod zookeeper;

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

/// Three rules files in `dir`: a flow rule, a degrade rule, and both (what two keys holding
/// the first two read as, merged).
fn family_files(dir: &Path) -> [String; 3] {
    const FLOW: &str = r#"{"resource": "GET:/order", "count": 20}"#;
    const DEGRADE: &str = r#"{"resource": "GET:/order", "grade": 2, "count": 5, "timeWindow": 10}"#;
    [
        write(dir, "flow.json", &format!(r#"{{"flow": [{FLOW}]}}"#)),
        write(
            dir,
            "degrade.json",
            &format!(r#"{{"degrade": [{DEGRADE}]}}"#),
        ),
        write(
            dir,
            "both.json",
            &format!(r#"{{"flow": [{FLOW}], "degrade": [{DEGRADE}]}}"#),
        ),
    ]
}

/// The keys of the entries of a `get --json` document.
fn entry_keys(doc: &Value) -> Vec<&str> {
    doc["entries"]
        .as_array()
        .map(|e| e.iter().filter_map(|e| e["key"].as_str()).collect())
        .unwrap_or_default()
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
        Store::new(
            format!(
                "zk://{}{}",
                addresses::zookeeper::addr(),
                unique_key("/sentinel-test", &id)
            ),
            "zookeeper-main",
            true,
        ),
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
        self.finish_with(url, 0);
    }

    /// The watcher stops by itself after its updates, with exit code `code`.
    fn finish_with(&mut self, url: &str, code: i32) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match self.child.try_wait().expect("the watcher's state") {
                Some(status) => {
                    assert_eq!(status.code(), Some(code), "watch {url}: {status}");
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

impl Drop for Watch {
    /// A test that failed midway leaves no watcher running.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
