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

mod support;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefix_union_changes_atomically_as_keys_come_and_go() {
    let cfg = config(&endpoints());
    let w = writer(cfg.clone()).await;
    let base = unique_key("/sentinel-test", "prefix");
    let prefix = format!("{base}/");
    let key = |k: &str| format!("{prefix}{k}");
    w.put_bytes(key("a"), flow_list(&["a"]))
        .await
        .expect("put a");
    w.put_bytes(key("b"), flow_list(&["b", "b2"]))
        .await
        .expect("put b");

    let sentinel = Sentinel::new();
    let recorder = EventRecorder::attach(&sentinel, "prefix");
    let source = DataSource::builder(EtcdSource::prefix(cfg, prefix.clone()), FlowJson::new())
        .name("prefix")
        .start(&sentinel)
        .await
        .expect("start");
    let v0 = sentinel.rules_version();
    assert_eq!(flow_resources(&sentinel), names(&["a", "b", "b2"]));

    let steps: Vec<(&str, Vec<String>)> = vec![
        ("add c", names(&["a", "b", "b2", "c"])),
        ("delete a", names(&["b", "b2", "c"])),
        ("change b", names(&["b", "c"])),
        ("delete b", names(&["c"])),
        ("delete c", names(&[])),
        ("add d", names(&["d"])),
    ];
    for (i, (step, expected)) in steps.iter().enumerate() {
        match *step {
            "add c" => w.put_bytes(key("c"), flow_list(&["c"])).await,
            "delete a" => w.delete(key("a")).await,
            "change b" => w.put_bytes(key("b"), flow_list(&["b"])).await,
            "delete b" => w.delete(key("b")).await,
            "delete c" => w.delete(key("c")).await,
            _ => w.put_bytes(key("d"), flow_list(&["d"])).await,
        }
        .unwrap_or_else(|e| panic!("{step}: {e}"));
        // A key next to the prefix, not under it, changes nothing.
        w.put_bytes(format!("{base}-sibling"), flow_list(&["sibling"]))
            .await
            .expect("put sibling");
        wait_until(&format!("{step} applied"), || {
            flow_resources(&sentinel) == *expected
        })
        .await;
        assert_eq!(
            sentinel.rules_version(),
            v0 + 1 + i as u64,
            "{step}: one version bump per change"
        );
    }

    // Every apply carried the whole union, one per change, with no half-applied state.
    let mut expected = vec![(v0, names(&["a", "b", "b2"]))];
    for (i, (_, resources)) in steps.iter().enumerate() {
        expected.push((v0 + 1 + i as u64, resources.clone()));
    }
    let seen: Vec<(u64, Vec<String>)> = recorder
        .applied()
        .iter()
        .map(|a| {
            (
                a.version,
                a.rules
                    .as_ref()
                    .map_or_else(Vec::new, |r| resources_of(&r.flow)),
            )
        })
        .collect();
    assert_eq!(seen, expected);
    let status = source.status();
    assert_eq!(status.applied_count, 1 + steps.len() as u64, "{status:?}");
    source.close().await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_past_the_watch_position_converges_on_the_latest_value() {
    // Compaction affects every key: only on the fault instance, under its lock.
    let _fault = fault_lock().await;
    services(&["start", "etcd-fault"]).await;
    let cfg = config(&fault_endpoints());
    let w = writer(cfg.clone()).await;
    let key = unique_key("/sentinel-test", "compaction");
    w.put_bytes(&key, flow_payload(1)).await.expect("put 1");

    let (backend, open) = Gated::new(EtcdSource::key(cfg, key.clone()), Hold::Watch);
    let resyncs = backend.resyncs.clone();
    let sentinel = Sentinel::new();
    let source = DataSource::builder(backend, FlowJson::new())
        .start(&sentinel)
        .await
        .expect("start");
    assert_eq!(applied_seq::<FlowRule>(&sentinel), Some(1));

    // The source has read at some revision R and not opened its watch yet. The key changes
    // twice and the history is compacted past R.
    w.put_bytes(&key, flow_payload(2)).await.expect("put 2");
    let last = w.put_bytes(&key, flow_payload(3)).await.expect("put 3");
    w.compact(last).await.expect("compact");
    open.send(true).expect("open the gate");

    wait_until("sequence 3 after the compaction", || {
        applied_seq::<FlowRule>(&sentinel) == Some(3)
    })
    .await;
    assert!(resyncs.load(Ordering::SeqCst) >= 1, "no resync happened");
    // A compaction is not a failure: no disconnect, no error.
    let status = source.status();
    assert!(
        status.connected && status.disconnects == 0 && status.last_error.is_none(),
        "{status:?}"
    );

    // The watch opened after the re-read follows later changes.
    w.put_bytes(&key, flow_payload(4)).await.expect("put 4");
    wait_until("sequence 4", || {
        applied_seq::<FlowRule>(&sentinel) == Some(4)
    })
    .await;
    source.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_with_nothing_changed_reconnects_then_applies_updates() {
    let _fault = fault_lock().await;
    services(&["start", "etcd-fault"]).await;
    let cfg = config(&fault_endpoints());
    let key = unique_key("/sentinel-test", "restart-same");
    writer(cfg.clone())
        .await
        .put_bytes(&key, flow_payload(1))
        .await
        .expect("put 1");

    let sentinel = Sentinel::new();
    let source = DataSource::builder(EtcdSource::key(cfg.clone(), key.clone()), FlowJson::new())
        .backoff(Duration::from_millis(100), Duration::from_secs(1))
        .start(&sentinel)
        .await
        .expect("start");
    let version = sentinel.rules_version();

    services(&["stop", "etcd-fault", "--keep-data"]).await;
    wait_status(&source, "disconnected", |s| {
        !s.connected && s.last_error.is_some()
    })
    .await;
    assert_eq!(
        applied_seq::<FlowRule>(&sentinel),
        Some(1),
        "rules lost while down"
    );

    services(&["start", "etcd-fault", "--keep-data"]).await;
    let status = wait_status(&source, "reconnected", |s| s.connected).await;
    // The re-read found the same value: nothing applied again, no state reset.
    assert_eq!(status.applied_count, 1, "{status:?}");
    assert_eq!(status.disconnects, 1, "{status:?}");
    assert_eq!(sentinel.rules_version(), version);

    writer(cfg)
        .await
        .put_bytes(&key, flow_payload(2))
        .await
        .expect("put 2");
    wait_until("sequence 2 after the restart", || {
        applied_seq::<FlowRule>(&sentinel) == Some(2)
    })
    .await;
    let status = wait_status(&source, "error cleared", |s| s.last_error.is_none()).await;
    assert_eq!(status.applied_count, 2, "{status:?}");
    source.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_with_a_change_while_down_applies_it_after_the_reconnect() {
    let _fault = fault_lock().await;
    services(&["start", "etcd-fault"]).await;
    let cfg = config(&fault_endpoints());
    let key = unique_key("/sentinel-test", "restart-changed");
    writer(cfg.clone())
        .await
        .put_bytes(&key, flow_payload(1))
        .await
        .expect("put 1");

    let sentinel = Sentinel::new();
    // The driver's re-read after the disconnect waits for the gate: the test restarts the
    // server and writes first.
    let (held, open) = Gated::new(EtcdSource::key(cfg.clone(), key.clone()), Hold::Reread);
    let source = DataSource::builder(held, FlowJson::new())
        .backoff(Duration::from_millis(20), Duration::from_millis(200))
        .start(&sentinel)
        .await
        .expect("start");

    services(&["stop", "etcd-fault", "--keep-data"]).await;
    wait_status(&source, "disconnected", |s| {
        !s.connected && s.last_error.is_some()
    })
    .await;
    services(&["start", "etcd-fault", "--keep-data"]).await;
    let w = writer(cfg).await;
    w.put_bytes(&key, flow_payload(2)).await.expect("put 2");
    // And history is compacted past every revision the source has seen.
    let last = w.put_bytes(&key, flow_payload(3)).await.expect("put 3");
    w.compact(last).await.expect("compact");
    let status = source.status();
    assert!(
        !status.connected && applied_seq::<FlowRule>(&sentinel) == Some(1),
        "the source reconnected before the change was written; status {status:?}"
    );
    let _ = open.send(true);

    wait_until("sequence 3 after the reconnect", || {
        applied_seq::<FlowRule>(&sentinel) == Some(3)
    })
    .await;
    let status = wait_status(&source, "reconnected", |s| s.connected).await;
    assert_eq!(status.applied_count, 2, "{status:?}");
    assert_eq!(status.disconnects, 1, "{status:?}");

    w.put_bytes(&key, flow_payload(4)).await.expect("put 4");
    wait_until("sequence 4", || {
        applied_seq::<FlowRule>(&sentinel) == Some(4)
    })
    .await;
    source.close().await;
}

/// The auth-enabled server, written to as root.
async fn root_writer() -> EtcdRuleWriter {
    let cfg = builder(&auth_endpoints())
        .credentials("root", "rootpw")
        .build()
        .expect("config");
    writer(cfg).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_password_fails_the_start_with_an_auth_error() {
    let _root = root_writer().await;
    let cfg = builder(&auth_endpoints())
        .credentials("app", "not-the-password")
        .build()
        .expect("config");
    let key = unique_key("/rules", "wrong-password");
    let sentinel = Sentinel::new();
    let result = DataSource::builder(EtcdSource::key(cfg, key), FlowJson::new())
        .start(&sentinel)
        .await;
    match result {
        Err(DataSourceError::Source {
            source: SourceError::Auth { message },
            ..
        }) => {
            assert!(message.contains("authentication failed"), "{message}");
            assert!(!message.contains("not-the-password"), "{message}");
        }
        other => panic!("expected an Auth error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn right_password_loads_and_follows_updates() {
    let root = root_writer().await;
    let key = unique_key("/rules", "right-password");
    root.put_bytes(&key, flow_payload(1)).await.expect("put 1");
    let cfg = builder(&auth_endpoints())
        .credentials("app", "apppw")
        .build()
        .expect("config");
    let sentinel = Sentinel::new();
    let source = DataSource::builder(EtcdSource::key(cfg.clone(), key.clone()), FlowJson::new())
        .start(&sentinel)
        .await
        .expect("app may read /rules/");
    assert_eq!(applied_seq::<FlowRule>(&sentinel), Some(1));
    // The app user writes its own rules too.
    EtcdRuleWriter::connect(cfg)
        .await
        .expect("app connects")
        .put_bytes(&key, flow_payload(2))
        .await
        .expect("app may write /rules/");
    wait_until("sequence 2", || {
        applied_seq::<FlowRule>(&sentinel) == Some(2)
    })
    .await;
    // Simple tokens expire after 2 s idle; the open watch keeps delivering.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    root.put_bytes(&key, flow_payload(3)).await.expect("put 3");
    wait_until("sequence 3", || {
        applied_seq::<FlowRule>(&sentinel) == Some(3)
    })
    .await;
    source.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_without_read_permission_fails_the_start_with_permission_denied() {
    let root = root_writer().await;
    let key = unique_key("/sentinel-test", "denied");
    root.put_bytes(&key, flow_payload(1)).await.expect("put");
    let cfg = builder(&auth_endpoints())
        .credentials("app", "apppw")
        .build()
        .expect("config");
    let sentinel = Sentinel::new();
    let result = DataSource::builder(EtcdSource::key(cfg, key), FlowJson::new())
        .start(&sentinel)
        .await;
    match result {
        Err(DataSourceError::Source {
            source: SourceError::PermissionDenied { message },
            ..
        }) => assert!(message.contains("permission denied"), "{message}"),
        other => panic!("expected PermissionDenied, got {other:?}"),
    }
    assert!(sentinel.flow_rules().rules().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_rules_written_by_put_rules_are_applied() {
    let cfg = config(&endpoints());
    let w = writer(cfg.clone()).await;
    let key = unique_key("/sentinel-test", "thousand");
    let sentinel = Sentinel::new();
    let source = DataSource::builder(EtcdSource::key(cfg, key.clone()), FlowJson::new())
        .start(&sentinel)
        .await
        .expect("start on an absent key");
    assert!(sentinel.flow_rules().rules().is_empty());

    let rules: Vec<FlowRule> = (0..1000)
        .map(|i| FlowRule::qps(format!("GET:/item/{i}"), f64::from(i % 50 + 1)))
        .collect();
    let set = RuleSet::new().with_flow(rules);
    w.put_rules(&key, &set).await.expect("put 1000 rules");
    wait_until("1000 rules applied", || {
        sentinel.flow_rules().rules().len() == 1000
    })
    .await;
    let active = sentinel.flow_rules().rules();
    let rule = active
        .iter()
        .find(|r| r.resource == "GET:/item/777")
        .expect("rule 777");
    assert_eq!(rule.count, 28.0);
    let status = wait_status(&source, "applied", |s| s.applied_count == 1).await;
    assert!(status.last_error.is_none(), "{status:?}");
    source.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_rules_refuses_invalid_sets_and_writes_combined_documents() {
    let cfg = config(&endpoints());
    let w = writer(cfg.clone()).await;
    let key = unique_key("/sentinel-test", "put-rules");
    let set = RuleSet::new()
        .with_flow(vec![FlowRule::qps("GET:/order", 5.0)])
        .with_system(vec![SystemRule::default().max_thread(100)]);
    w.put_rules(&key, &set).await.expect("valid set");

    let sentinel = Sentinel::new();
    let source = DataSource::builder(EtcdSource::key(cfg, key.clone()), CombinedJson::new())
        .start(&sentinel)
        .await
        .expect("start");
    assert_eq!(sentinel.flow_rules().rules().len(), 1);
    assert_eq!(sentinel.system_rules().rules().len(), 1);

    let bad = RuleSet::new().with_flow(vec![FlowRule::qps("GET:/order", -1.0)]);
    let err = w.put_rules(&key, &bad).await.expect_err("invalid set");
    assert!(matches!(err, WriteError::Invalid { .. }), "{err:?}");
    assert_eq!(err.issues().len(), 1, "{err:?}");
    assert_eq!(err.issues()[0].field, "count", "{err:?}");

    // Nothing was written: the source saw no change, and the next valid set applies.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(source.status().applied_count, 1);
    let next = RuleSet::new()
        .with_flow(vec![FlowRule::qps("GET:/order", 7.0)])
        .with_system(Vec::new());
    w.put_rules(&key, &next).await.expect("valid set");
    wait_until("count 7", || {
        sentinel
            .flow_rules()
            .rules()
            .first()
            .is_some_and(|r| r.count == 7.0)
    })
    .await;
    assert!(sentinel.system_rules().rules().is_empty());
    // The status is updated just after the rules are applied: wait for it too.
    let status = wait_status(&source, "the second apply counted", |s| {
        s.applied_count == 2
    })
    .await;
    assert_eq!(status.rejected_count, 0, "{status:?}");
    source.close().await;
}

/// Rules written through the writer's [`WritableDataSource`] target come back through an
/// [`EtcdSource`] exactly; compare-and-set uses the key's modification revision.
#[tokio::test]
async fn rules_written_through_the_writer_are_applied_exactly() {
    let key = unique_key("/sentinel-test", "round-trip");
    let target = writer(config(&endpoints())).await.at(key.clone());
    let source = EtcdSource::key(config(&endpoints()), key);
    sentinel_core::datasource::testkit::expect_round_trip(&target, source, true).await;
}
