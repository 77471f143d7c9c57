//! `NatsSource` and `NatsRuleWriter` against real nats-server instances: reads and watches,
//! purge, wildcards, a missing bucket, auth, compare-and-set, and updates made while the
//! client was cut off. Start the servers first:
//!
//! ```text
//! scripts/services.sh start nats
//! cargo test -p sentinel-datasource-nats
//! ```

mod support;

use std::time::Duration;

use sentinel_core::datasource::testkit::{
    applied_seq, flow_payload, next_value, read, values, wait_until, EventRecorder, WAIT,
};
use sentinel_core::datasource::{DataSource, FlowJson, ReadableDataSource, SourceError};
use sentinel_core::flow::FlowRule;
use sentinel_core::{RuleSet, Sentinel};
use sentinel_datasource_nats::{MissingBucket, NatsSource, WriteError};
use sentinel_test_support::{flow_resources, services, start_flow, Partition};
use support::{
    addr, auth_addr, bucket_writer, builder, config, expect_frozen_server_noticed, expect_resumed,
    freeze_addr, retried, unique_bucket,
};

/// Starts a driver over `source` into a fresh engine, failing the start on a read error.
async fn start(source: NatsSource) -> (Sentinel, DataSource) {
    start_flow(source, "nats-test").await
}

#[tokio::test]
async fn a_put_between_the_read_and_the_watch_is_seen_and_the_revision_is_the_position() {
    let bucket = unique_bucket("between");
    let w = bucket_writer(config(&addr()), &bucket).await;
    let first = w.put_bytes("rules.flow", "v1").await.expect("put v1");
    let mut source = NatsSource::key(config(&addr()), &bucket, "rules.flow");
    let payload = read(&mut source).await.expect("read");
    assert_eq!(
        values(&payload),
        [("rules.flow".to_owned(), "v1".to_owned())]
    );
    assert_eq!(payload.revision, Some(first.to_string()));
    w.put_bytes("rules.flow", "v2").await.expect("put v2");
    let payload = next_value(&mut source).await;
    assert_eq!(
        values(&payload),
        [("rules.flow".to_owned(), "v2".to_owned())]
    );
    source.close().await;
}

#[tokio::test]
async fn delete_and_purge_markers_remove_the_value() {
    let bucket = unique_bucket("purge");
    let w = bucket_writer(config(&addr()), &bucket).await;
    w.put_bytes("rules.flow", flow_payload(1))
        .await
        .expect("put");
    let (sentinel, ds) = start(NatsSource::key(config(&addr()), &bucket, "rules.flow")).await;
    assert_eq!(applied_seq::<FlowRule>(&sentinel), Some(1));
    w.purge("rules.flow").await.expect("purge");
    wait_until("purge cleared", || sentinel.flow_rules().rules().is_empty()).await;
    w.put_bytes("rules.flow", flow_payload(2))
        .await
        .expect("put again");
    wait_until("put applied", || {
        applied_seq::<FlowRule>(&sentinel) == Some(2)
    })
    .await;
    w.delete("rules.flow").await.expect("delete");
    wait_until("delete cleared", || {
        sentinel.flow_rules().rules().is_empty()
    })
    .await;
    ds.close().await;
}

#[tokio::test]
async fn a_wildcard_source_applies_the_union_as_keys_come_and_go() {
    let bucket = unique_bucket("wildcard");
    let w = bucket_writer(config(&addr()), &bucket).await;
    let rule = |r: &str| format!(r#"[{{"resource":"{r}","count":10}}]"#);
    w.put_bytes("rules.flow.orders", rule("orders"))
        .await
        .expect("put");
    w.put_bytes("other.flow", rule("other"))
        .await
        .expect("put outside");
    let (sentinel, ds) = start(NatsSource::wildcard(
        config(&addr()),
        &bucket,
        "rules.flow.>",
    ))
    .await;
    assert_eq!(flow_resources(&sentinel), ["orders"]);

    w.put_bytes("rules.flow.payments", rule("payments"))
        .await
        .expect("add");
    wait_until("payments added", || {
        flow_resources(&sentinel) == ["orders", "payments"]
    })
    .await;
    w.delete("rules.flow.orders").await.expect("remove");
    wait_until("orders removed", || {
        flow_resources(&sentinel) == ["payments"]
    })
    .await;
    w.put_bytes("other.more", rule("x"))
        .await
        .expect("put outside");
    w.put_bytes("rules.flow.eu.stock", rule("stock"))
        .await
        .expect("add deeper");
    wait_until("stock added", || {
        flow_resources(&sentinel) == ["payments", "stock"]
    })
    .await;
    ds.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_made_while_cut_off_are_applied_after_the_reconnect_in_order() {
    let bucket = unique_bucket("cut_off");
    let w = bucket_writer(config(&addr()), &bucket).await;
    w.put_bytes("rules.flow", flow_payload(1))
        .await
        .expect("put 1");
    let proxy = Partition::start(&addr()).await;
    let sentinel = Sentinel::new();
    let recorder = EventRecorder::attach(&sentinel, "nats-cut");
    let ds = DataSource::builder(
        NatsSource::key(config(proxy.addr()), &bucket, "rules.flow"),
        FlowJson::new(),
    )
    .name("nats-cut")
    .backoff(Duration::from_millis(20), Duration::from_millis(200))
    .start(&sentinel)
    .await
    .expect("starts");
    proxy.cut();
    wait_until("disconnected", || !ds.status().connected).await;
    for seq in 2..=5 {
        w.put_bytes("rules.flow", flow_payload(seq))
            .await
            .expect("put while cut off");
    }
    proxy.heal();
    wait_until("the last update applied", || {
        applied_seq::<FlowRule>(&sentinel) == Some(5)
    })
    .await;
    w.put_bytes("rules.flow", flow_payload(6))
        .await
        .expect("put after");
    wait_until("watching again", || {
        applied_seq::<FlowRule>(&sentinel) == Some(6)
    })
    .await;
    let seqs: Vec<u64> = recorder.seqs::<FlowRule>().into_iter().flatten().collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "out of order or twice: {seqs:?}"
    );
    ds.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_lost_between_the_read_and_the_watch_ends_the_watch_at_once() {
    let bucket = unique_bucket("lost_in_setup");
    let w = bucket_writer(config(&addr()), &bucket).await;
    w.put_bytes("rules.flow", "v1").await.expect("put v1");
    let proxy = Partition::start(&addr()).await;
    let mut source = NatsSource::key(config(proxy.addr()), &bucket, "rules.flow");
    let payload = read(&mut source).await.expect("read");
    assert_eq!(
        values(&payload),
        [("rules.flow".to_owned(), "v1".to_owned())]
    );
    // The scenario's timeline, not waits for a condition: the connection is lost after the
    // read and back before the watch is set up, as when the server restarts in between.
    proxy.cut();
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.heal();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let watched = tokio::time::timeout(WAIT, source.watch())
        .await
        .unwrap_or_else(|_| {
            panic!("the watch set up after a lost connection waited {WAIT:?} and noticed nothing")
        });
    let Err(error) = watched else {
        panic!("the watch went on over a lost connection: {watched:?}");
    };
    assert!(matches!(error, SourceError::Connection { .. }), "{error:?}");
    assert!(error.to_string().contains("lost"), "{error}");
    // The re-read the driver then makes works, and so does the watch after it.
    let payload = tokio::time::timeout(WAIT, async {
        loop {
            match source.read().await {
                Ok(payload) => return payload,
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    })
    .await
    .expect("read again after the reconnect");
    assert_eq!(
        values(&payload),
        [("rules.flow".to_owned(), "v1".to_owned())]
    );
    w.put_bytes("rules.flow", "v2").await.expect("put v2");
    let payload = next_value(&mut source).await;
    assert_eq!(
        values(&payload),
        [("rules.flow".to_owned(), "v2".to_owned())]
    );
    source.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_server_is_reported_disconnected_within_three_health_check_intervals() {
    services(&["start", "nats-freeze"]).await;
    let bucket = unique_bucket("frozen");
    // The default ping interval: what a user gets.
    let defaults = sentinel_datasource_nats::NatsConfig::builder()
        .servers([format!("nats://{}", freeze_addr())])
        .build()
        .expect("valid config");
    let noticed_within = defaults.frozen_server_detection();
    let w = bucket_writer(config(&freeze_addr()), &bucket).await;
    w.put_bytes("rules.flow", flow_payload(1))
        .await
        .expect("put 1");
    let (sentinel, ds) = start(NatsSource::key(defaults, &bucket, "rules.flow")).await;
    assert_eq!(applied_seq::<FlowRule>(&sentinel), Some(1));
    expect_frozen_server_noticed(&ds, "nats-freeze", noticed_within, &["PINGs", "1s"]).await;
    retried("put 2 after the thaw", || {
        w.put_bytes("rules.flow", flow_payload(2))
    })
    .await;
    expect_resumed(&ds, &sentinel, 2).await;
    ds.close().await;
}

#[tokio::test]
async fn a_missing_bucket_fails_naming_it_or_is_waited_for() {
    let bucket = unique_bucket("missing");
    let mut source = NatsSource::key(config(&addr()), &bucket, "rules.flow");
    let err = read(&mut source).await.expect_err("missing bucket");
    assert!(err.to_string().contains(&bucket), "{err}");

    let waiting = builder(&addr())
        .missing_bucket(MissingBucket::Wait {
            poll: Duration::from_millis(100),
        })
        .build()
        .expect("valid");
    let (sentinel, ds) = start(NatsSource::key(waiting, &bucket, "rules.flow")).await;
    assert!(sentinel.flow_rules().rules().is_empty());
    let w = bucket_writer(config(&addr()), &bucket).await;
    w.put_bytes("rules.flow", flow_payload(3))
        .await
        .expect("put");
    wait_until("the new bucket's key applied", || {
        applied_seq::<FlowRule>(&sentinel) == Some(3)
    })
    .await;
    ds.close().await;
}

#[tokio::test]
async fn wrong_credentials_are_an_auth_error_without_the_secret() {
    let bucket = unique_bucket("auth");
    for cfg in [
        builder(&auth_addr()).credentials("app", "not-the-pw-123"),
        builder(&auth_addr()),
    ] {
        let cfg = cfg.build().expect("valid");
        let mut source = NatsSource::key(cfg, &bucket, "rules.flow");
        let err = tokio::time::timeout(WAIT, source.read())
            .await
            .expect("in time")
            .expect_err("refused");
        assert!(matches!(err, SourceError::Auth { .. }), "{err:?}");
        let shown = format!("{err} {err:?} {source:?} {}", source.describe());
        assert!(!shown.contains("not-the-pw-123"), "{shown}");
    }
    // The right ones work.
    let right = builder(&auth_addr())
        .credentials("app", "apppw")
        .build()
        .expect("valid");
    let w = bucket_writer(right.clone(), &bucket).await;
    w.put_bytes("rules.flow", "v1").await.expect("put");
    let mut source = NatsSource::key(right, &bucket, "rules.flow");
    assert_eq!(values(&read(&mut source).await.expect("read")).len(), 1);
}

#[tokio::test]
async fn compare_and_set_refuses_a_stale_revision() {
    let bucket = unique_bucket("cas");
    let w = bucket_writer(config(&addr()), &bucket).await;
    let rules = |count| RuleSet::new().with_flow(vec![FlowRule::qps("GET:/order", count)]);
    let first = w
        .put_rules_if("rules.flow", &rules(5.0), 0)
        .await
        .expect("create");
    assert_eq!(
        w.revision("rules.flow").await.expect("revision"),
        Some(first)
    );
    let second = w
        .put_rules_if("rules.flow", &rules(6.0), first)
        .await
        .expect("update at the read revision");
    // Another operator still holds `first`.
    let err = w
        .put_rules_if("rules.flow", &rules(7.0), first)
        .await
        .expect_err("stale");
    assert!(
        matches!(err, WriteError::Conflict { expected, .. } if expected == first),
        "{err:?}"
    );
    assert_eq!(
        w.revision("rules.flow").await.expect("revision"),
        Some(second)
    );
    let err = w
        .put_rules_if(
            "rules.flow",
            &RuleSet::new().with_flow(vec![FlowRule::qps("", 1.0)]),
            second,
        )
        .await
        .expect_err("invalid");
    assert!(matches!(err, WriteError::Invalid { .. }), "{err:?}");
}

#[cfg(feature = "tls")]
#[tokio::test]
async fn tls_with_the_servers_ca_reads_and_follows_the_key() {
    use support::{tls_addr, tls_ca};
    let bucket = unique_bucket("tls");
    let cfg = builder(&tls_addr())
        .tls_ca_certificate_file(tls_ca())
        .build()
        .expect("valid tls config");
    let w = bucket_writer(cfg.clone(), &bucket).await;
    w.put_bytes("rules.flow", flow_payload(1))
        .await
        .expect("put over tls");
    let (sentinel, ds) = start(NatsSource::key(cfg, &bucket, "rules.flow")).await;
    assert_eq!(applied_seq::<FlowRule>(&sentinel), Some(1));
    w.put_bytes("rules.flow", flow_payload(2))
        .await
        .expect("put over tls");
    wait_until("the change over tls", || {
        applied_seq::<FlowRule>(&sentinel) == Some(2)
    })
    .await;
    ds.close().await;

    // A plain client is refused by a TLS-only server.
    let mut plain = NatsSource::key(config(&tls_addr()), &bucket, "rules.flow");
    let refused = tokio::time::timeout(WAIT, plain.read())
        .await
        .expect("in time");
    assert!(refused.is_err(), "{refused:?}");
}
