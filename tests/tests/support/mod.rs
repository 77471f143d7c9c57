//! Shared pieces of the end-to-end tests: where the servers are, a way to fail clearly when
//! they are not running, the `scripts/services.sh` wrapper, and bounded waits.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use datasource_etcd::{EtcdConfig, EtcdConfigBuilder, EtcdRuleWriter};
use sentinel_core::datasource::{DataSource, SourceError, SourceStatus};

/// The longest any single wait in these tests may take.
pub const WAIT: Duration = Duration::from_secs(15);

/// What to run when a server is missing.
pub const START_HINT: &str = "start the test servers with `scripts/services.sh start etcd` \
     (from the repository root; `eval \"$(scripts/services.sh env)\"` exports the endpoints)";

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| default.to_owned())
}

/// The plain etcd most tests share (`SENTINEL_ETCD_ENDPOINTS`).
pub fn endpoints() -> String {
    env_or("SENTINEL_ETCD_ENDPOINTS", "http://127.0.0.1:23790")
}

/// The etcd with auth enabled (`SENTINEL_ETCD_AUTH_ENDPOINTS`): root:rootpw, and app:apppw
/// who may read and write under `/rules/`.
pub fn auth_endpoints() -> String {
    env_or("SENTINEL_ETCD_AUTH_ENDPOINTS", "http://127.0.0.1:23791")
}

/// The etcd that the fault tests stop and restart (`SENTINEL_ETCD_FAULT_ENDPOINTS`).
pub fn fault_endpoints() -> String {
    env_or("SENTINEL_ETCD_FAULT_ENDPOINTS", "http://127.0.0.1:23792")
}

/// A config builder for `endpoints` with short timeouts, so failures show quickly.
pub fn builder(endpoints: &str) -> EtcdConfigBuilder {
    EtcdConfig::builder()
        .endpoints([endpoints])
        .connect_timeout(Duration::from_secs(2))
        .request_timeout(Duration::from_secs(5))
}

/// A config for `endpoints` with short timeouts.
pub fn config(endpoints: &str) -> EtcdConfig {
    builder(endpoints).build().expect("valid test config")
}

/// A key no other test (or earlier run) uses, under `root`.
pub fn unique_key(root: &str, test: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{root}/{test}/{}-{nanos}-{n}", std::process::id())
}

/// Connects a writer and proves the server answers with a write under `probe_key`. Fails the
/// test, naming the command that starts the servers, when it does not.
pub async fn writer_with_probe(config: EtcdConfig, probe_key: &str) -> EtcdRuleWriter {
    let endpoints = config.endpoints().join(",");
    let probe = async {
        let writer = EtcdRuleWriter::connect(config).await?;
        writer.put_bytes(probe_key, "ok").await?;
        Ok::<_, SourceError>(writer)
    };
    match tokio::time::timeout(WAIT, probe).await {
        Ok(Ok(writer)) => writer,
        Ok(Err(e)) => panic!("etcd at {endpoints} is unreachable ({e}); {START_HINT}"),
        Err(_) => panic!("etcd at {endpoints} did not answer within {WAIT:?}; {START_HINT}"),
    }
}

/// [`writer_with_probe`] with a probe key outside `/rules/`.
pub async fn writer(config: EtcdConfig) -> EtcdRuleWriter {
    writer_with_probe(config, "/sentinel-test/probe").await
}

/// Runs `scripts/services.sh` with `args` on a blocking thread; fails the test if it fails.
pub async fn services(args: &[&str]) {
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    tokio::task::spawn_blocking(move || services_blocking(&args))
        .await
        .expect("services.sh thread");
}

fn services_blocking(args: &[String]) {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/services.sh");
    let out = Command::new("bash")
        .arg(&script)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "scripts/services.sh {} failed:\n{}\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Serialises the tests that stop and restart `etcd-fault`: they run in one process, on
/// parallel threads, and share that one server.
pub async fn fault_lock() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}

/// Waits (at most [`WAIT`]) until `source`'s status satisfies `condition`.
pub async fn wait_status(
    source: &DataSource,
    what: &str,
    condition: impl Fn(&SourceStatus) -> bool,
) -> SourceStatus {
    let mut rx = source.status_watch();
    let found = match tokio::time::timeout(WAIT, rx.wait_for(|s| condition(s))).await {
        Ok(Ok(status)) => Some(status.clone()),
        _ => None,
    };
    found.unwrap_or_else(|| {
        panic!(
            "timed out after {WAIT:?} waiting for {what}; status is {:?}",
            source.status()
        )
    })
}

/// Polls `condition` every 5 ms until it holds; fails the test after [`WAIT`].
pub async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {WAIT:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
