//! Where the etcd servers of `scripts/services.sh` listen, how tests reach them or fail naming
//! the command that starts them, and the etcd-specific helpers of this crate's tests. The
//! waits and the event recorder are the testkit's (`sentinel_core::datasource::testkit`).

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sentinel_core::datasource::{RawPayload, ReadableDataSource, WatchEvent};

pub(crate) use sentinel_core::datasource::testkit::WAIT;
use sentinel_core::datasource::SourceError;
use sentinel_datasource_etcd::{EtcdConfig, EtcdConfigBuilder, EtcdRuleWriter};

/// What to run when a server is missing.
pub(crate) const START_HINT: &str = "start the test servers with `scripts/services.sh start etcd` \
     (from the repository root; `eval \"$(scripts/services.sh env)\"` exports the endpoints)";

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| default.to_owned())
}

/// The plain etcd most tests share (`SENTINEL_ETCD_ENDPOINTS`).
pub(crate) fn endpoints() -> String {
    env_or("SENTINEL_ETCD_ENDPOINTS", "http://127.0.0.1:23790")
}

/// The etcd with auth enabled (`SENTINEL_ETCD_AUTH_ENDPOINTS`): root:rootpw, and app:apppw
/// who may read and write under `/rules/`.
pub(crate) fn auth_endpoints() -> String {
    env_or("SENTINEL_ETCD_AUTH_ENDPOINTS", "http://127.0.0.1:23791")
}

/// The etcd that the fault tests stop and restart (`SENTINEL_ETCD_FAULT_ENDPOINTS`).
pub(crate) fn fault_endpoints() -> String {
    env_or("SENTINEL_ETCD_FAULT_ENDPOINTS", "http://127.0.0.1:23792")
}

/// The etcd that serves TLS only (`SENTINEL_ETCD_TLS_ENDPOINTS`,
/// `scripts/services.sh start etcd-tls`).
pub(crate) fn tls_endpoints() -> String {
    env_or("SENTINEL_ETCD_TLS_ENDPOINTS", "https://127.0.0.1:23793")
}

/// The CA certificate (PEM) of the TLS etcd, made by the script (`SENTINEL_ETCD_TLS_CA`).
pub(crate) fn tls_ca_pem() -> Vec<u8> {
    let default = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../.services/etcd-tls/certs/ca.pem")
        .display()
        .to_string();
    let path = env_or("SENTINEL_ETCD_TLS_CA", &default);
    std::fs::read(&path)
        .unwrap_or_else(|e| panic!("cannot read the etcd-tls CA {path} ({e}); {START_HINT}"))
}

/// A config builder for `endpoints` with short timeouts, so failures show quickly.
pub(crate) fn builder(endpoints: &str) -> EtcdConfigBuilder {
    EtcdConfig::builder()
        .endpoints([endpoints])
        .connect_timeout(Duration::from_secs(2))
        .request_timeout(Duration::from_secs(5))
}

/// A config for `endpoints` with short timeouts.
pub(crate) fn config(endpoints: &str) -> EtcdConfig {
    builder(endpoints).build().expect("valid test config")
}

/// A key no other test (or earlier run) uses, under `root` (for example `/sentinel-test` or
/// `/rules`).
pub(crate) fn unique_key(root: &str, test: &str) -> String {
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
pub(crate) async fn writer_with_probe(config: EtcdConfig, probe_key: &str) -> EtcdRuleWriter {
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
pub(crate) async fn writer(config: EtcdConfig) -> EtcdRuleWriter {
    writer_with_probe(config, "/sentinel-test/probe").await
}

/// Runs `scripts/services.sh` with `args` (blocking) and fails the test if it fails.
pub(crate) fn run_services(args: &[&str]) {
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

/// Runs `scripts/services.sh` with `args` on a blocking thread; fails the test if it fails.
pub(crate) async fn services(args: &[&str]) {
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run_services(&args);
    })
    .await
    .expect("services.sh thread");
}

/// Serialises the tests that stop and restart `etcd-fault`: they run in one process, on
/// parallel threads, and share that one server.
pub(crate) async fn fault_lock() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}

/// `source.read()` within [`WAIT`].
pub(crate) async fn read<S: ReadableDataSource>(source: &mut S) -> Result<RawPayload, SourceError> {
    tokio::time::timeout(WAIT, source.read())
        .await
        .expect("read did not finish in time")
}

/// `source.watch()` within [`WAIT`].
pub(crate) async fn watch<S: ReadableDataSource>(
    source: &mut S,
) -> Result<WatchEvent, SourceError> {
    tokio::time::timeout(WAIT, source.watch())
        .await
        .expect("watch did not report in time")
}

/// The next value, as the driver would apply it: a `Resync` is answered with a read. Fails the
/// test on an error.
pub(crate) async fn next_value<S: ReadableDataSource>(source: &mut S) -> RawPayload {
    match watch(source).await {
        Ok(WatchEvent::Changed(payload)) => payload,
        Ok(WatchEvent::Resync) => read(source).await.expect("read after resync"),
        Ok(other) => panic!("unexpected watch event {other:?}"),
        Err(e) => panic!("watch failed: {e}"),
    }
}

/// The values of a payload as UTF-8 strings, by key.
pub(crate) fn values(payload: &RawPayload) -> Vec<(String, String)> {
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

/// A TCP proxy in front of an etcd, to cut a client off from a server that keeps running (a
/// network partition): writes made meanwhile reach the server directly.
pub(crate) struct Partition {
    endpoint: String,
    open: std::sync::Arc<std::sync::atomic::AtomicBool>,
    connections: std::sync::Arc<std::sync::Mutex<Vec<tokio::task::AbortHandle>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Partition {
    /// A proxy on a free loopback port to `target` (`host:port`).
    pub(crate) async fn start(target: &str) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy");
        let endpoint = format!("http://{}", listener.local_addr().expect("proxy address"));
        let open = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let connections = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (target, is_open, conns) = (target.to_owned(), open.clone(), connections.clone());
        let accept = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if !is_open.load(std::sync::atomic::Ordering::SeqCst) {
                    continue; // dropped: refused while cut
                }
                let target = target.clone();
                let task = tokio::spawn(async move {
                    if let Ok(mut server) = tokio::net::TcpStream::connect(&target).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                if let Ok(mut all) = conns.lock() {
                    all.push(task.abort_handle());
                }
            }
        });
        Self {
            endpoint,
            open,
            connections,
            accept,
        }
    }

    /// The endpoint a client reaches the server through.
    pub(crate) fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Cuts every connection and refuses new ones.
    pub(crate) fn cut(&self) {
        self.open.store(false, std::sync::atomic::Ordering::SeqCst);
        if let Ok(mut all) = self.connections.lock() {
            for connection in all.drain(..) {
                connection.abort();
            }
        }
    }

    /// Lets connections through again.
    pub(crate) fn heal(&self) {
        self.open.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        self.cut();
        self.accept.abort();
    }
}
