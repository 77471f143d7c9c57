//! Finds the etcd servers that `scripts/services.sh` starts, and helpers shared by the tests.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use datasource_etcd::{EtcdConfig, EtcdRuleWriter};
use sentinel_core::datasource::{RawPayload, ReadableDataSource, SourceError, WatchEvent};

/// How long any single wait in these tests may take.
pub const WAIT: Duration = Duration::from_secs(15);

const START_HINT: &str = "start it with `scripts/services.sh start etcd` \
                          (and `eval \"$(scripts/services.sh env)\"` for non-default endpoints)";

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

/// The plain etcd shared by most tests.
pub fn endpoints() -> String {
    env_or("SENTINEL_ETCD_ENDPOINTS", "http://127.0.0.1:23790")
}

/// The etcd with auth enabled (users root:rootpw and app:apppw, app may read /rules/).
pub fn auth_endpoints() -> String {
    env_or("SENTINEL_ETCD_AUTH_ENDPOINTS", "http://127.0.0.1:23791")
}

/// The etcd that the fault test stops and restarts.
pub fn fault_endpoints() -> String {
    env_or("SENTINEL_ETCD_FAULT_ENDPOINTS", "http://127.0.0.1:23792")
}

/// A config for `endpoints` with short timeouts, so failures show quickly.
pub fn config(endpoints: &str) -> EtcdConfig {
    builder(endpoints).build().expect("valid test config")
}

/// A builder for `endpoints` with short timeouts.
pub fn builder(endpoints: &str) -> datasource_etcd::EtcdConfigBuilder {
    EtcdConfig::builder()
        .endpoints([endpoints])
        .connect_timeout(Duration::from_secs(2))
        .request_timeout(Duration::from_secs(5))
}

/// A key no other test (or earlier run) uses, under `root` (for example `/sentinel-test` or
/// `/rules`).
pub fn unique_key(root: &str, test: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{root}/{test}/{}-{nanos}-{n}", std::process::id())
}

/// Connects a writer, failing the test with a hint to start the server when it is unreachable.
pub async fn writer(config: EtcdConfig) -> EtcdRuleWriter {
    let endpoints = config.endpoints().join(",");
    let probe = async {
        let writer = EtcdRuleWriter::connect(config).await?;
        writer.put_bytes("/sentinel-test/probe", "ok").await?;
        Ok::<_, SourceError>(writer)
    };
    match tokio::time::timeout(WAIT, probe).await {
        Ok(Ok(writer)) => writer,
        Ok(Err(e)) => panic!("etcd at {endpoints} is unreachable ({e}); {START_HINT}"),
        Err(_) => panic!("etcd at {endpoints} did not answer within {WAIT:?}; {START_HINT}"),
    }
}

/// `source.read()` within [`WAIT`].
pub async fn read<S: ReadableDataSource>(source: &mut S) -> Result<RawPayload, SourceError> {
    tokio::time::timeout(WAIT, source.read())
        .await
        .expect("read did not finish in time")
}

/// `source.watch()` within [`WAIT`].
pub async fn watch<S: ReadableDataSource>(source: &mut S) -> Result<WatchEvent, SourceError> {
    tokio::time::timeout(WAIT, source.watch())
        .await
        .expect("watch did not report in time")
}

/// The next value, as the driver would apply it: a `Resync` is answered with a read. Fails the
/// test on an error.
pub async fn next_value<S: ReadableDataSource>(source: &mut S) -> RawPayload {
    match watch(source).await {
        Ok(WatchEvent::Changed(payload)) => payload,
        Ok(WatchEvent::Resync) => read(source).await.expect("read after resync"),
        Ok(other) => panic!("unexpected watch event {other:?}"),
        Err(e) => panic!("watch failed: {e}"),
    }
}

/// Runs `scripts/services.sh` with `args` and fails the test if it fails.
pub fn services(args: &[&str]) {
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

/// The values of a payload as UTF-8 strings, by key.
pub fn values(payload: &RawPayload) -> Vec<(String, String)> {
    payload
        .entries
        .iter()
        .map(|e| {
            (
                e.key.clone(),
                String::from_utf8_lossy(&e.value).into_owned(),
            )
        })
        .collect()
}

/// The etcd that serves TLS only (`scripts/services.sh start etcd-tls`).
pub fn tls_endpoints() -> String {
    env_or("SENTINEL_ETCD_TLS_ENDPOINTS", "https://127.0.0.1:23793")
}

/// The CA certificate (PEM) of the TLS etcd, made by the script.
pub fn tls_ca_pem() -> Vec<u8> {
    let default = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../.services/etcd-tls/certs/ca.pem")
        .display()
        .to_string();
    let path = env_or("SENTINEL_ETCD_TLS_CA", &default);
    std::fs::read(&path)
        .unwrap_or_else(|e| panic!("cannot read the etcd-tls CA {path} ({e}); {START_HINT}"))
}
