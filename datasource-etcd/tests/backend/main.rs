//! `EtcdSource` against a real etcd. Start the servers first:
//!
//! ```text
//! scripts/services.sh start etcd
//! CARGO_TARGET_DIR=/work/target-etcd cargo test -p sentinel-datasource-etcd
//! ```
//!
//! The fault test starts, stops and restarts its own instance (`etcd-fault`) through the same
//! script, so it never disturbs the servers the other tests share.

#[path = "../support/mod.rs"]
mod support;

mod auth;
#[cfg(feature = "tls")]
mod tls;

use std::time::Duration;

use sentinel_core::datasource::testkit::{
    applied_seq, flow_payload, next_value, read, values, watch, WAIT,
};
use sentinel_core::datasource::{
    DataSource, FlowJson, ReadableDataSource, SourceError, WatchEvent,
};
use sentinel_core::flow::FlowRule;
use sentinel_core::Sentinel;
use sentinel_datasource_etcd::{EtcdConfig, EtcdSource};
use sentinel_test_support::{fault_lock, run_services, services, unique_key};
use support::{
    auth_endpoints, builder, config, endpoints, expect_frozen_server_noticed, expect_resumed,
    fault_endpoints, freeze_endpoints, retried, writer,
};

#[tokio::test]
async fn initial_read_returns_value_and_header_revision() {
    let cfg = config(&endpoints());
    let w = writer(cfg.clone()).await;
    let key = unique_key("/sentinel-test", "initial_read");

    let mut missing = EtcdSource::key(cfg.clone(), key.clone());
    let payload = read(&mut missing).await.expect("read of a missing key");
    assert!(payload.is_absent(), "{payload:?}");
    assert!(payload.revision.is_some());

    let put_rev = w.put_bytes(&key, "v1").await.expect("put");
    let mut source = EtcdSource::key(cfg, key.clone());
    let payload = read(&mut source).await.expect("read");
    assert_eq!(values(&payload), [(key, "v1".to_owned())]);
    let revision: i64 = payload
        .revision
        .as_deref()
        .expect("a revision")
        .parse()
        .expect("a numeric revision");
    // The header revision is the store's, so later writes by other tests may raise it.
    assert!(revision >= put_rev, "{revision} < {put_rev}");
    assert_eq!(source.revision(), revision);
}

#[tokio::test]
async fn watch_reports_puts_and_deletes_of_a_key() {
    let cfg = config(&endpoints());
    let w = writer(cfg.clone()).await;
    let key = unique_key("/sentinel-test", "watch_key");
    w.put_bytes(&key, "v1").await.expect("put v1");

    let mut source = EtcdSource::key(cfg, key.clone());
    read(&mut source).await.expect("read");

    // Written between the read and the (lazy) watch: must not be missed.
    let rev2 = w.put_bytes(&key, "v2").await.expect("put v2");
    let payload = next_value(&mut source).await;
    assert_eq!(values(&payload), [(key.clone(), "v2".to_owned())]);
    assert_eq!(payload.revision, Some(rev2.to_string()));

    // A write to another key under the same name as a prefix is not this key's event.
    w.put_bytes(format!("{key}-other"), "x")
        .await
        .expect("put other");
    let rev3 = w.put_bytes(&key, "v3").await.expect("put v3");
    let payload = next_value(&mut source).await;
    assert_eq!(values(&payload), [(key.clone(), "v3".to_owned())]);
    assert_eq!(payload.revision, Some(rev3.to_string()));

    let rev4 = w.delete(&key).await.expect("delete");
    let payload = next_value(&mut source).await;
    assert!(payload.is_absent(), "{payload:?}");
    assert_eq!(payload.revision, Some(rev4.to_string()));

    source.close().await;
    assert!(matches!(source.read().await, Err(SourceError::Closed)));
    assert!(matches!(source.watch().await, Err(SourceError::Closed)));
}

#[tokio::test]
async fn prefix_source_tracks_added_and_removed_keys() {
    let cfg = config(&endpoints());
    let w = writer(cfg.clone()).await;
    let prefix = format!("{}/", unique_key("/sentinel-test", "prefix"));
    let a = format!("{prefix}a");
    let b = format!("{prefix}b");
    let c = format!("{prefix}c");
    w.put_bytes(&b, "B1").await.expect("put b");
    // Just outside the prefix: never part of the payload.
    w.put_bytes(prefix.trim_end_matches('/'), "outside")
        .await
        .expect("put outside");

    let mut source = EtcdSource::prefix(cfg, prefix.clone());
    let payload = read(&mut source).await.expect("read");
    assert_eq!(values(&payload), [(b.clone(), "B1".to_owned())]);

    w.put_bytes(&a, "A1").await.expect("put a");
    let payload = next_value(&mut source).await;
    assert_eq!(
        values(&payload),
        [(a.clone(), "A1".to_owned()), (b.clone(), "B1".to_owned())],
        "entries sorted by key"
    );

    w.put_bytes(&c, "C1").await.expect("put c");
    let payload = next_value(&mut source).await;
    assert_eq!(payload.entries.len(), 3, "{payload:?}");

    w.delete(&b).await.expect("delete b");
    let payload = next_value(&mut source).await;
    assert_eq!(
        values(&payload),
        [(a.clone(), "A1".to_owned()), (c.clone(), "C1".to_owned())]
    );

    w.put_bytes(&a, "A2").await.expect("put a2");
    let payload = next_value(&mut source).await;
    assert_eq!(
        values(&payload),
        [(a.clone(), "A2".to_owned()), (c.clone(), "C1".to_owned())]
    );

    w.delete(&a).await.expect("delete a");
    w.delete(&c).await.expect("delete c");
    let mut payload = next_value(&mut source).await;
    if !payload.is_absent() {
        // The two deletes may arrive in two watch responses.
        payload = next_value(&mut source).await;
    }
    assert!(payload.is_absent(), "{payload:?}");
}

#[tokio::test]
async fn compaction_past_the_watch_position_resyncs_to_the_latest_value() {
    // Compaction affects every key: only on the fault instance, under its lock, so no other
    // test's revisions go away under it.
    let _fault = fault_lock().await;
    run_services(&["start", "etcd-fault"]);
    let cfg = config(&fault_endpoints());
    let w = writer(cfg.clone()).await;
    let key = unique_key("/sentinel-test", "compaction");
    w.put_bytes(&key, "v1").await.expect("put v1");

    let mut source = EtcdSource::key(cfg, key.clone());
    read(&mut source).await.expect("read");

    // While the source is not watching, the key changes twice and history is compacted past
    // the revision it would watch from.
    w.put_bytes(&key, "v2").await.expect("put v2");
    let last = w.put_bytes(&key, "v3").await.expect("put v3");
    w.compact(last).await.expect("compact");

    match watch(&mut source).await {
        Ok(WatchEvent::Resync) => {}
        other => panic!("expected a resync after compaction, got {other:?}"),
    }
    let payload = read(&mut source).await.expect("re-read");
    assert_eq!(values(&payload), [(key.clone(), "v3".to_owned())]);

    // And the new watch, from after the re-read, works.
    let rev = w.put_bytes(&key, "v4").await.expect("put v4");
    let payload = next_value(&mut source).await;
    assert_eq!(values(&payload), [(key, "v4".to_owned())]);
    assert_eq!(payload.revision, Some(rev.to_string()));
}

#[tokio::test]
async fn large_payload_round_trips() {
    let cfg = config(&endpoints());
    let w = writer(cfg.clone()).await;
    let key = unique_key("/sentinel-test", "large");
    let rules = |count: u32| {
        let items: Vec<String> = (0..1000)
            .map(|i| {
                format!(
                    r#"{{"resource":"GET /api/v1/resource-{i:04}","limitApp":"default","grade":1,"count":{count},"strategy":0,"controlBehavior":0,"warmUpPeriodSec":10,"maxQueueingTimeMs":500,"clusterMode":false}}"#
                )
            })
            .collect();
        format!("[{}]", items.join(",")).into_bytes()
    };
    let v1 = rules(10);
    assert!(v1.len() > 140_000, "{} bytes", v1.len());
    w.put_bytes(&key, v1.clone()).await.expect("put v1");

    let mut source = EtcdSource::key(cfg, key.clone());
    let payload = read(&mut source).await.expect("read");
    assert_eq!(payload.entries.len(), 1);
    assert_eq!(payload.entries[0].value, v1);

    let v2 = rules(20);
    w.put_bytes(&key, v2.clone()).await.expect("put v2");
    let payload = next_value(&mut source).await;
    assert_eq!(payload.entries[0].value, v2);
}

#[tokio::test]
async fn payload_over_the_cap_is_rejected() {
    let cfg = config(&endpoints());
    let w = writer(cfg.clone()).await;
    let key = unique_key("/sentinel-test", "too_large");
    w.put_bytes(&key, vec![b'x'; 2048]).await.expect("put");
    let small = builder(&endpoints())
        .max_payload_bytes(1024)
        .build()
        .expect("config");
    let mut source = EtcdSource::key(small, key.clone());
    match read(&mut source).await {
        Err(SourceError::TooLarge { size, limit }) => {
            assert_eq!((size, limit), (2048, 1024));
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }

    // Shrunk: readable again. Grown on the watch: reported there too.
    w.put_bytes(&key, vec![b'x'; 10]).await.expect("put small");
    read(&mut source).await.expect("read small");
    w.put_bytes(&key, vec![b'x'; 4096])
        .await
        .expect("put large");
    match watch(&mut source).await {
        Err(SourceError::TooLarge { size, .. }) => assert_eq!(size, 4096),
        other => panic!("expected TooLarge from the watch, got {other:?}"),
    }
    // The watch stays open past the oversized value: the fix arrives on it, no read needed.
    w.put_bytes(&key, b"fixed".to_vec())
        .await
        .expect("put fixed");
    match watch(&mut source).await {
        Ok(WatchEvent::Changed(payload)) => {
            assert_eq!(payload.entries[0].value, b"fixed".to_vec());
        }
        other => panic!("expected the fixed value from the same watch, got {other:?}"),
    }
}

#[tokio::test]
async fn unreachable_server_is_a_connection_error() {
    // Nothing listens on port 9 of loopback.
    let cfg = config("http://127.0.0.1:9");
    let mut source = EtcdSource::key(cfg, "/sentinel-test/unreachable");
    // Without a read there is no revision to watch from: the driver is asked to read.
    assert!(matches!(watch(&mut source).await, Ok(WatchEvent::Resync)));
    match read(&mut source).await {
        Err(SourceError::Connection { .. }) => {}
        other => panic!("expected a connection error, got {other:?}"),
    }
    assert!(
        source.describe().contains("127.0.0.1:9"),
        "{}",
        source.describe()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn survives_a_server_restart_and_sees_changes_made_meanwhile() {
    let _fault = fault_lock().await;
    run_services(&["start", "etcd-fault"]);
    let cfg = config(&fault_endpoints());
    let key = unique_key("/sentinel-test", "restart");
    {
        let w = writer(cfg.clone()).await;
        w.put_bytes(&key, "v1").await.expect("put v1");
    }

    let mut source = EtcdSource::key(cfg.clone(), key.clone());
    read(&mut source).await.expect("read");
    {
        let w = writer(cfg.clone()).await;
        w.put_bytes(&key, "v2").await.expect("put v2");
    }
    // This opens the watch stream, which stays open for the next call.
    let payload = next_value(&mut source).await;
    assert_eq!(values(&payload), [(key.clone(), "v2".to_owned())]);

    // The stream is open already, so the watch fails on it whether the server stops before
    // or after the spawned call starts waiting.
    let waiting = tokio::spawn(async move {
        let result = tokio::time::timeout(WAIT, source.watch()).await;
        (source, result)
    });
    run_services(&["stop", "etcd-fault", "--keep-data"]);

    let (mut source, result) = tokio::time::timeout(WAIT, waiting)
        .await
        .expect("the watch task ends")
        .expect("the watch task does not panic");
    match result.expect("the watch reports the broken stream in time") {
        Err(SourceError::Connection { .. }) => {}
        other => panic!("expected a connection error from the watch, got {other:?}"),
    }
    // While the server is down, a read fails promptly.
    match read(&mut source).await {
        Err(SourceError::Connection { .. }) => {}
        other => panic!("expected a connection error while down, got {other:?}"),
    }

    run_services(&["start", "etcd-fault", "--keep-data"]);
    // Written after the restart but before the source reconnects.
    let w = writer(cfg).await;
    w.put_bytes(&key, "v3").await.expect("put v3");

    let payload = read(&mut source).await.expect("read after restart");
    assert_eq!(values(&payload), [(key.clone(), "v3".to_owned())]);

    // Watching works again on the new connection.
    w.put_bytes(&key, "v4").await.expect("put v4");
    let payload = next_value(&mut source).await;
    assert_eq!(values(&payload), [(key, "v4".to_owned())]);

    run_services(&["stop", "etcd-fault"]);
}

#[tokio::test]
async fn several_endpoints_with_the_first_down_read_from_the_next() {
    let w = writer(config(&endpoints())).await;
    let key = unique_key("/sentinel-test", "endpoints");
    w.put_bytes(&key, "v1").await.expect("put v1");
    // Nothing listens on port 1; the second endpoint is the running server.
    let cfg = sentinel_datasource_etcd::EtcdConfig::builder()
        .endpoints(["http://127.0.0.1:1".to_owned(), endpoints()])
        .connect_timeout(Duration::from_secs(2))
        .request_timeout(Duration::from_secs(5))
        .build()
        .expect("config");
    let mut source = EtcdSource::key(cfg, key.clone());
    let payload = read(&mut source)
        .await
        .expect("read through the second endpoint");
    assert_eq!(values(&payload), [(key.clone(), "v1".to_owned())]);
    w.put_bytes(&key, "v2").await.expect("put v2");
    let payload = next_value(&mut source).await;
    assert_eq!(values(&payload), [(key, "v2".to_owned())]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_server_is_reported_disconnected_within_the_health_check() {
    services(&["start", "etcd-freeze"]).await;
    // The default watch check and keep-alive: what a user gets.
    let defaults = EtcdConfig::builder()
        .endpoints([freeze_endpoints()])
        .build()
        .expect("valid config");
    let noticed_within = defaults.frozen_server_detection();
    let key = unique_key("/rules", "frozen");
    let w = writer(config(&freeze_endpoints())).await;
    w.put_bytes(&key, flow_payload(1)).await.expect("put 1");
    let sentinel = Sentinel::new();
    let ds = DataSource::builder(EtcdSource::key(defaults, key.clone()), FlowJson::new())
        .name("etcd-frozen")
        .backoff(Duration::from_millis(20), Duration::from_millis(200))
        .start(&sentinel)
        .await
        .unwrap_or_else(|e| panic!("start: {e:?}"));
    assert_eq!(applied_seq::<FlowRule>(&sentinel), Some(1));
    expect_frozen_server_noticed(
        &ds,
        "etcd-freeze",
        noticed_within,
        &["progress", "1s", "2s"],
    )
    .await;
    retried("put 2 after the thaw", || {
        w.put_bytes(&key, flow_payload(2))
    })
    .await;
    expect_resumed(&ds, &sentinel, 2).await;
    ds.close().await;
}
