//! Where the etcd servers of `scripts/services.sh` listen, and how tests reach them or fail
//! naming the command that starts them. Shared by this crate's tests and the end-to-end tests
//! (`tests/tests/support`), which include this file.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use datasource_etcd::{EtcdConfig, EtcdConfigBuilder, EtcdRuleWriter};
use sentinel_core::datasource::SourceError;

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

/// The etcd that serves TLS only (`SENTINEL_ETCD_TLS_ENDPOINTS`,
/// `scripts/services.sh start etcd-tls`).
pub fn tls_endpoints() -> String {
    env_or("SENTINEL_ETCD_TLS_ENDPOINTS", "https://127.0.0.1:23793")
}

/// The CA certificate (PEM) of the TLS etcd, made by the script (`SENTINEL_ETCD_TLS_CA`).
pub fn tls_ca_pem() -> Vec<u8> {
    let default = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../.services/etcd-tls/certs/ca.pem")
        .display()
        .to_string();
    let path = env_or("SENTINEL_ETCD_TLS_CA", &default);
    std::fs::read(&path)
        .unwrap_or_else(|e| panic!("cannot read the etcd-tls CA {path} ({e}); {START_HINT}"))
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

/// Runs `scripts/services.sh` with `args` (blocking) and fails the test if it fails.
pub fn run_services(args: &[&str]) {
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
