//! The Nacos data source end to end: `NacosSource` driven by the generic `DataSource` driver
//! into a `Sentinel`, against real rnacos servers, through the data-source conformance kit.
//!
//! ```text
//! scripts/services.sh start nacos
//! eval "$(scripts/services.sh env)"
//! cargo test -p sentinel-datasource-nacos --test conformance
//! ```
//!
//! The test that stops and restarts a server mid-long-poll uses its own instance,
//! `nacos-fault`, under a lock.

mod support;

use std::time::{Duration, Instant};

use async_trait::async_trait;
use sentinel_core::datasource::testkit::{
    applied_seq, check_ordered_updates, expect_all_conformance, expect_conformance_skipping,
    flow_payload, wait_status, wait_until, ConformanceHarness, EventRecorder,
};
use sentinel_core::datasource::{DataSource, FlowJson};
use sentinel_core::flow::FlowRule;
use sentinel_core::Sentinel;
use sentinel_datasource_nacos::{ConfigKey, NacosRuleWriter, NacosSource};
use sentinel_test_support::{fault_lock, services, ServerControl};
use support::{addr, config, fault_addr, retried, unique_id, unique_key, writer};

/// The conformance kit's view of one Nacos config.
struct NacosHarness {
    addr: String,
    key: ConfigKey,
    writer: NacosRuleWriter,
    /// How the harness stops and starts the server.
    control: ServerControl,
}

impl NacosHarness {
    async fn new(addr: &str, test: &str) -> Self {
        Self {
            addr: addr.to_owned(),
            key: unique_key(test),
            writer: writer(config(addr)).await,
            control: ServerControl::Fixed,
        }
    }
}

#[async_trait]
impl ConformanceHarness for NacosHarness {
    type Source = NacosSource;

    fn make_source(&self) -> NacosSource {
        let at = self.control.addr(&self.addr);
        NacosSource::configs(config(at), [self.key.clone()]).expect("a source")
    }

    async fn write(&self, bytes: &[u8]) {
        // Nacos refuses blank content ("content is blank"): an empty config does not exist
        // there, so the kit's empty payload is a deletion.
        if bytes.trim_ascii().is_empty() {
            return self.delete().await;
        }
        let content = String::from_utf8_lossy(bytes).into_owned();
        retried("publish", || self.writer.put_bytes(&self.key, &content)).await;
    }

    async fn delete(&self) {
        retried("delete", || self.writer.delete(&self.key)).await;
    }

    sentinel_test_support::server_control!(control);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_kit_passes_with_the_server_restarted_mid_long_poll() {
    let _fault = fault_lock().await;
    services(&["start", "nacos-fault"]).await;
    let mut harness = NacosHarness::new(&fault_addr(), "conformance").await;
    harness.control = ServerControl::Restart("nacos-fault");
    // A stopped server takes no publish, so disconnect's catch-up part is skipped here; the
    // partition test shows it.
    expect_conformance_skipping(&harness, &["disconnect"]).await;
}

/// A restart is not a deletion (issue #47). rnacos answers HTTP while it replays its log
/// after a restart: for a while it answers a config it holds with 404, then with each older
/// value of it in turn (deletions included), then with the current one. Here the config's
/// history (with a deletion) follows other configs' records in a fresh server's log; the
/// server is restarted 20 times with its data, and the source reconnects through each
/// restart into that replay. Its rules are never dropped and never go back to an older value:
/// the only applies are the start's and the last publish's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_restarts_of_the_server_never_lose_the_rules() {
    const FILLER: u64 = 1000;
    const HISTORY: u64 = 500;
    const FINAL: u64 = 1000;
    let _fault = fault_lock().await;
    // A fresh server, so that its log (replayed on every restart) is this test's alone.
    services(&["stop", "nacos-fault"]).await;
    services(&["start", "nacos-fault"]).await;
    let at = fault_addr();
    let writer = writer(config(&at)).await;
    let began = Instant::now();
    let filler = unique_id("restarts-filler");
    for n in 1..=FILLER {
        let other = ConfigKey::new(format!("{filler}-{n}"), "SENTINEL_GROUP");
        retried("publish", || writer.put_bytes(&other, "[]")).await;
    }
    let key = unique_key("restarts");
    for seq in 1..=HISTORY {
        let value = String::from_utf8_lossy(&flow_payload(seq)).into_owned();
        retried("publish", || writer.put_bytes(&key, &value)).await;
        if seq == HISTORY / 2 {
            retried("delete", || writer.delete(&key)).await;
        }
    }
    let last = String::from_utf8_lossy(&flow_payload(FINAL)).into_owned();
    retried("publish", || writer.put_bytes(&key, &last)).await;
    let filled = began.elapsed();

    let sentinel = Sentinel::new();
    let recorder = EventRecorder::attach(&sentinel, "restarts");
    let source = NacosSource::configs(config(&at), [key.clone()]).expect("a source");
    // Reconnects read within 50 ms of the server answering, so they land in its replay.
    // One second of confirmation (2 s by default) covers this server's replay and keeps
    // the test short.
    let source = DataSource::builder(source, FlowJson::new())
        .name("restarts")
        .backoff(Duration::from_millis(10), Duration::from_millis(50))
        .confirm_after_reconnect(Duration::from_secs(1))
        .start(&sentinel)
        .await
        .expect("starts");
    for round in 1..=20u64 {
        services(&["stop", "nacos-fault", "--keep-data"]).await;
        // The source sees every outage (a confirming read it was waiting for fails too)
        // before the server is back.
        wait_status(&source, "disconnected", |s| {
            !s.connected && s.disconnects == round
        })
        .await;
        services(&["start", "nacos-fault", "--keep-data"]).await;
        // Reconnected, and the change it may have read confirmed or withdrawn.
        wait_status(&source, "reconnected", |s| s.connected && !s.confirming).await;
    }
    let next = String::from_utf8_lossy(&flow_payload(FINAL + 1)).into_owned();
    retried("publish", || writer.put_bytes(&key, &next)).await;
    wait_until("the last publish applied", || {
        applied_seq::<FlowRule>(&sentinel) == Some(FINAL + 1)
    })
    .await;
    let status = source.status();
    println!(
        "a log of {} records written in {filled:?}; 20 restarts; {} changes read right after \
         a reconnect withdrawn by the confirming read; {:?} in all",
        FILLER + HISTORY + 2,
        status.unconfirmed_changes,
        began.elapsed()
    );
    assert_eq!(
        recorder.seqs::<FlowRule>(),
        vec![Some(FINAL), Some(FINAL + 1)],
        "every apply of the source, in order: {status:?}"
    );
    // The reconnects did read the server mid-replay, or the test proved nothing.
    assert!(
        status.unconfirmed_changes >= 1,
        "no reconnect read the server while it replayed its log: {status:?}"
    );
    source.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_kit_passes_through_a_network_partition() {
    let mut harness = NacosHarness::new(&addr(), "partition").await;
    harness.control = ServerControl::partition(&addr()).await;
    expect_all_conformance(&harness).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rapid_publishes_end_in_the_final_value_and_never_go_back() {
    let harness = NacosHarness::new(&addr(), "rapid").await;
    check_ordered_updates(&harness, 200)
        .await
        .unwrap_or_else(|failure| panic!("{failure}"));
}

/// Rules published through the writer's [`WritableDataSource`] target come back through a
/// [`NacosSource`] exactly.
#[tokio::test]
async fn rules_written_through_the_writer_are_applied_exactly() {
    let key = unique_key("round-trip");
    let target = writer(config(&addr())).await.at(key.clone());
    let source = NacosSource::configs(config(&addr()), [key]).expect("a source");
    sentinel_core::datasource::testkit::expect_round_trip(&target, source, false).await;
}
