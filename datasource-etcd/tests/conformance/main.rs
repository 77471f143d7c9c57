//! The etcd data source end to end: `EtcdSource` driven by the generic `DataSource` driver
//! into a `Sentinel`, against real etcd servers.
//!
//! ```text
//! scripts/services.sh start etcd
//! eval "$(scripts/services.sh env)"
//! cargo test -p sentinel-datasource-etcd --test conformance
//! ```
//!
//! The tests that stop and restart a server use their own instance, `etcd-fault`, which they
//! start (and stop and restart) through `scripts/services.sh`; they take a lock so that only
//! one of them touches it at a time.

#[path = "../support/mod.rs"]
mod support;

mod server;
mod store;
mod writer;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sentinel_core::datasource::testkit::{
    applied_seq, check_ordered_updates, expect_all_conformance, expect_conformance_skipping,
    flow_payload, wait_status, wait_until, ConformanceHarness, EventRecorder, WAIT,
};
use sentinel_core::datasource::{
    CombinedJson, DataSource, DataSourceError, FlowJson, RawPayload, ReadableDataSource,
    SourceError, WatchEvent,
};
use sentinel_core::flow::FlowRule;
use sentinel_core::system::SystemRule;
use sentinel_core::{RuleSet, Sentinel};
use sentinel_datasource_etcd::{EtcdConfig, EtcdRuleWriter, EtcdSource, WriteError};
use sentinel_test_support::{fault_lock, services, unique_key, ServerControl};
use support::{auth_endpoints, builder, config, endpoints, fault_endpoints, writer};

/// The conformance kit's view of one etcd key.
struct EtcdHarness {
    config: EtcdConfig,
    key: String,
    writer: tokio::sync::Mutex<EtcdRuleWriter>,
    /// How the harness stops and starts the server.
    control: ServerControl,
}

impl EtcdHarness {
    async fn new(endpoints: &str, test: &str, restartable: bool) -> Self {
        let config = config(endpoints);
        let writer = writer(config.clone()).await;
        Self {
            key: unique_key("/sentinel-test", test),
            config,
            writer: tokio::sync::Mutex::new(writer),
            control: if restartable {
                ServerControl::Restart("etcd-fault")
            } else {
                ServerControl::Fixed
            },
        }
    }

    /// A harness whose sources reach `endpoints` through a proxy: stopping the server cuts
    /// the proxy while etcd runs on, so a write can be made while the source is cut off.
    async fn partitioned(endpoints: &str, test: &str) -> Self {
        let target = endpoints.trim_start_matches("http://").to_owned();
        let mut harness = Self::new(endpoints, test, false).await;
        harness.control = ServerControl::partition(&target).await;
        harness
    }

    /// Runs `op` with the writer, reconnecting and retrying (bounded) while the server comes
    /// back from a restart.
    async fn with_writer<T, F, Fut>(&self, what: &str, op: F) -> T
    where
        F: Fn(EtcdRuleWriter) -> Fut,
        Fut: std::future::Future<Output = Result<T, SourceError>>,
    {
        let deadline = tokio::time::Instant::now() + WAIT;
        let mut writer = self.writer.lock().await;
        loop {
            match op(writer.clone()).await {
                Ok(value) => return value,
                Err(error) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    if let Ok(fresh) = EtcdRuleWriter::connect(self.config.clone()).await {
                        *writer = fresh;
                    }
                    let _ = error;
                }
                Err(error) => panic!("{what} {}: {error}", self.key),
            }
        }
    }
}

#[async_trait]
impl ConformanceHarness for EtcdHarness {
    type Source = EtcdSource;

    fn make_source(&self) -> EtcdSource {
        let config = match &self.control {
            ServerControl::Partition(partition) => config(&format!("http://{}", partition.addr())),
            _ => self.config.clone(),
        };
        EtcdSource::key(config, self.key.clone())
    }

    async fn write(&self, bytes: &[u8]) {
        let key = self.key.clone();
        self.with_writer("put", |w| {
            let (key, bytes) = (key.clone(), bytes.to_vec());
            async move { w.put_bytes(key, bytes).await }
        })
        .await;
    }

    async fn delete(&self) {
        let key = self.key.clone();
        self.with_writer("delete", |w| {
            let key = key.clone();
            async move { w.delete(key).await }
        })
        .await;
    }

    sentinel_test_support::server_control!(control);

    fn timeout(&self) -> Duration {
        WAIT
    }
}

/// The active flow rules' resources, sorted.
fn flow_resources(sentinel: &Sentinel) -> Vec<String> {
    resources_of(&sentinel.flow_rules().rules())
}

/// The resources of `rules`, sorted, once each.
fn resources_of(rules: &[FlowRule]) -> Vec<String> {
    let set: BTreeSet<String> = rules.iter().map(|r| r.resource.clone()).collect();
    set.into_iter().collect()
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

fn flow_list(resources: &[&str]) -> String {
    let rules: Vec<String> = resources
        .iter()
        .map(|r| format!(r#"{{"resource":"{r}","count":10}}"#))
        .collect();
    format!("[{}]", rules.join(","))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_kit_passes_with_server_restarts() {
    let _fault = fault_lock().await;
    services(&["start", "etcd-fault"]).await;
    let harness = EtcdHarness::new(&fault_endpoints(), "conformance", true).await;
    // A stopped etcd takes no write, so disconnect's catch-up part is skipped here; the
    // partition test below shows it.
    expect_conformance_skipping(&harness, &["disconnect"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_kit_passes_through_a_network_partition() {
    let harness = EtcdHarness::partitioned(&endpoints(), "partition").await;
    expect_all_conformance(&harness).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rapid_puts_end_in_the_final_value_and_never_go_back() {
    let harness = EtcdHarness::new(&endpoints(), "rapid", false).await;
    check_ordered_updates(&harness, 500)
        .await
        .unwrap_or_else(|failure| panic!("{failure}"));
}

/// Which calls of a [`Gated`] source wait for its gate.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Hold {
    /// Every watch: a test compacts the history past the revision the watch will start from.
    Watch,
    /// Every read after the first (the driver's reconnect): a test changes the key while the
    /// source is disconnected, instead of racing a long backoff.
    Reread,
}

/// An etcd source whose calls wait for a gate, so that a test changes the store first.
struct Gated {
    inner: EtcdSource,
    hold: Hold,
    gate: tokio::sync::watch::Receiver<bool>,
    reads: usize,
    /// How many watches reported a resync.
    resyncs: Arc<AtomicUsize>,
}

impl Gated {
    fn new(inner: EtcdSource, hold: Hold) -> (Self, tokio::sync::watch::Sender<bool>) {
        let (open, gate) = tokio::sync::watch::channel(false);
        let gated = Self {
            inner,
            hold,
            gate,
            reads: 0,
            resyncs: Arc::new(AtomicUsize::new(0)),
        };
        (gated, open)
    }

    async fn pass(&mut self) {
        let _ = self.gate.wait_for(|open| *open).await;
    }
}

#[async_trait]
impl ReadableDataSource for Gated {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    async fn read(&mut self) -> Result<RawPayload, SourceError> {
        self.reads += 1;
        if self.hold == Hold::Reread && self.reads > 1 {
            self.pass().await;
        }
        self.inner.read().await
    }

    async fn watch(&mut self) -> Result<WatchEvent, SourceError> {
        if self.hold == Hold::Watch {
            self.pass().await;
        }
        let event = self.inner.watch().await;
        if matches!(event, Ok(WatchEvent::Resync)) {
            self.resyncs.fetch_add(1, Ordering::SeqCst);
        }
        event
    }

    async fn close(&mut self) {
        self.inner.close().await;
    }
}
