//! `NacosSource` and `NacosRuleWriter` against real rnacos servers: reads and long polls,
//! namespaces, auth and token revocation, server failover, several dataIds in one source,
//! the dashboard's payloads. Start the servers first:
//!
//! ```text
//! scripts/services.sh start nacos
//! cargo test -p sentinel-datasource-nacos
//! ```
//!
//! The tests that stop or reset a server (`nacos-fault`, `nacos-auth`) take a lock, so they
//! never run at the same time.

mod support;

use std::time::Duration;

use sentinel_core::datasource::testkit::{
    applied_seq, flow_payload, read, values, wait_status, wait_until, watch, WAIT,
};
use sentinel_core::datasource::{
    AuthorityJson, DataSource, DegradeJson, FlowJson, ParamFlowJson, ReadableDataSource,
    SourceError, SystemJson, WatchEvent,
};
use sentinel_core::flow::FlowRule;
use sentinel_core::Sentinel;
use sentinel_datasource_nacos::{
    dashboard_keys, ConfigKey, NacosConfig, NacosRuleWriter, NacosSource,
};
use sentinel_test_support::{fault_lock, services, Partition};
use support::{
    addr, auth_addr, builder, config, expect_frozen_server_noticed, expect_resumed, fault_addr,
    freeze_addr, retried, unique_id, unique_key, writer, ADMIN,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Starts a driver over `source` into a fresh engine, failing the start on a read error.
async fn start(source: NacosSource) -> (Sentinel, DataSource) {
    let sentinel = Sentinel::new();
    let ds = DataSource::builder(source, FlowJson::new())
        .name("nacos-test")
        .backoff(Duration::from_millis(20), Duration::from_millis(200))
        .start(&sentinel)
        .await
        .unwrap_or_else(|e| panic!("start: {e:?}"));
    (sentinel, ds)
}

/// Waits until the flow rules carry sequence number `seq`.
async fn wait_seq(sentinel: &Sentinel, seq: u64) {
    wait_until(&format!("payload {seq} applied"), || {
        applied_seq::<FlowRule>(sentinel) == Some(seq)
    })
    .await;
}

/// `md5("v1")`, as Nacos computes it.
const MD5_OF_V1: &str = "6654c734ccab8f440ff0825eb443dc7f";

fn text(payload: u64) -> String {
    String::from_utf8_lossy(&flow_payload(payload)).into_owned()
}

#[tokio::test]
async fn a_missing_config_is_absent_and_a_published_one_is_read_with_its_md5() {
    let w = writer(config(&addr())).await;
    let key = unique_key("read");
    let mut source = NacosSource::configs(config(&addr()), [key.clone()]).expect("source");
    let payload = read(&mut source).await.expect("read of a missing config");
    assert!(payload.is_absent(), "{payload:?}");

    w.put_bytes(&key, "v1").await.expect("publish");
    let payload = read(&mut source).await.expect("read");
    assert_eq!(values(&payload), [(key.entry_key(), "v1".to_owned())]);
    // The revision is Nacos's MD5 of the content.
    assert_eq!(payload.revision.as_deref(), Some(MD5_OF_V1));
}

#[tokio::test]
async fn a_publish_between_the_read_and_the_long_poll_is_seen_at_once() {
    let w = writer(config(&addr())).await;
    let key = unique_key("between");
    w.put_bytes(&key, "v1").await.expect("publish v1");
    let mut source = NacosSource::configs(config(&addr()), [key.clone()]).expect("source");
    read(&mut source).await.expect("read");
    w.put_bytes(&key, "v2").await.expect("publish v2");
    // The poll carries v1's MD5, so the server answers at once rather than after the hold.
    let started = tokio::time::Instant::now();
    assert_eq!(watch(&mut source).await.expect("watch"), WatchEvent::Resync);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let payload = read(&mut source).await.expect("re-read");
    assert_eq!(values(&payload), [(key.entry_key(), "v2".to_owned())]);
}

#[tokio::test]
async fn the_same_data_id_in_two_namespaces_is_two_configs() {
    let id = unique_id("namespaces");
    let key = ConfigKey::new(id, "SENTINEL_GROUP");
    let dev = builder(&addr()).namespace("dev-ns").build().expect("valid");
    let test = builder(&addr())
        .namespace("test-ns")
        .build()
        .expect("valid");
    let (w_dev, w_test) = (writer(dev.clone()).await, writer(test.clone()).await);
    w_dev.put_bytes(&key, &text(1)).await.expect("publish dev");
    w_test
        .put_bytes(&key, &text(2))
        .await
        .expect("publish test");

    let (dev_engine, dev_ds) = start(NacosSource::configs(dev, [key.clone()]).expect("src")).await;
    let (test_engine, test_ds) =
        start(NacosSource::configs(test, [key.clone()]).expect("src")).await;
    wait_seq(&dev_engine, 1).await;
    wait_seq(&test_engine, 2).await;

    w_dev
        .put_bytes(&key, &text(3))
        .await
        .expect("publish dev again");
    wait_seq(&dev_engine, 3).await;
    assert_eq!(applied_seq::<FlowRule>(&test_engine), Some(2));
    let mut plain = NacosSource::configs(config(&addr()), [key]).expect("source");
    assert!(
        read(&mut plain).await.expect("read").is_absent(),
        "public holds nothing"
    );
    dev_ds.close().await;
    test_ds.close().await;
}

#[tokio::test]
async fn several_data_ids_apply_together_and_a_change_to_one_applies_with_the_others() {
    let app = unique_id("app");
    let [flow, degrade, system, authority, param] = dashboard_keys(&app);
    let w = writer(config(&addr())).await;
    w.put_bytes(&flow, r#"[{"resource":"GET:/order","count":5}]"#)
        .await
        .expect("flow");
    w.put_bytes(
        &degrade,
        r#"[{"resource":"GET:/order","grade":0,"count":100,"timeWindow":5}]"#,
    )
    .await
    .expect("degrade");

    let sentinel = Sentinel::new();
    let source = NacosSource::dashboard(config(&addr()), &app).expect("source");
    let ds = DataSource::builder(source, FlowJson::new())
        .converter_for(flow.entry_key(), FlowJson::new())
        .converter_for(degrade.entry_key(), DegradeJson::new())
        .converter_for(system.entry_key(), SystemJson::new())
        .converter_for(authority.entry_key(), AuthorityJson::new())
        .converter_for(param.entry_key(), ParamFlowJson::new())
        .start(&sentinel)
        .await
        .expect("starts");
    assert_eq!(sentinel.flow_rules().rules().len(), 1);
    assert_eq!(sentinel.degrade_rules().rules().len(), 1);

    let version = sentinel.rules_version();
    w.put_bytes(&system, r#"[{"highestSystemLoad":8.0}]"#)
        .await
        .expect("system");
    wait_until("the system rule", || {
        sentinel.system_rules().rules().len() == 1
    })
    .await;
    assert_eq!(sentinel.rules_version(), version + 1, "one apply");
    assert_eq!(sentinel.flow_rules().rules().len(), 1, "flow kept");
    assert_eq!(sentinel.degrade_rules().rules().len(), 1, "degrade kept");

    // Deleting one dataId removes its family only.
    w.delete(&degrade).await.expect("delete degrade");
    wait_until("degrade cleared", || {
        sentinel.degrade_rules().rules().is_empty()
    })
    .await;
    assert_eq!(sentinel.flow_rules().rules().len(), 1);
    ds.close().await;
}

#[tokio::test]
async fn the_dashboards_payloads_load_through_this_source() {
    // The payloads of `shared/rules/`, as sentinel-core's converter tests keep them.
    let rules =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../sentinel-core/tests/data/rules");
    let load = |name: &str| {
        std::fs::read_to_string(rules.join(name))
            .unwrap_or_else(|e| panic!("cannot read sentinel-core/tests/data/rules/{name}: {e}"))
    };
    let app = unique_id("dashboard");
    let [flow, degrade, system, authority, param] = dashboard_keys(&app);
    let w = writer(config(&addr())).await;
    for (key, file) in [
        (
            &flow,
            "flow-dashboard-pushed__alibaba-Sentinel-issue-1147__nacos.json",
        ),
        (
            &degrade,
            "degrade__alibaba-Sentinel__sentinel-demo-dynamic-file-rule__legacy-passCount.json",
        ),
        (
            &system,
            "system__alibaba-Sentinel__sentinel-demo-dynamic-file-rule.json",
        ),
        (
            &authority,
            "authority__alibaba-spring-cloud-alibaba__sentinel-core-example-authority.json",
        ),
        (
            &param,
            "param-flow__alibaba-spring-cloud-alibaba__sentinel-core-example-param-flow.json",
        ),
    ] {
        w.put_bytes(key, &load(file)).await.expect("publish");
    }
    let sentinel = Sentinel::new();
    let ds = DataSource::builder(
        NacosSource::dashboard(config(&addr()), &app).expect("source"),
        FlowJson::new(),
    )
    .converter_for(degrade.entry_key(), DegradeJson::new())
    .converter_for(system.entry_key(), SystemJson::new())
    .converter_for(authority.entry_key(), AuthorityJson::new())
    .converter_for(param.entry_key(), ParamFlowJson::new())
    .start(&sentinel)
    .await
    .expect("the dashboard's payloads load");
    assert!(!sentinel.flow_rules().rules().is_empty());
    assert!(!sentinel.degrade_rules().rules().is_empty());
    assert!(!sentinel.system_rules().rules().is_empty());
    assert!(!sentinel.authority_rules().rules().is_empty());
    assert_eq!(sentinel.param_flow_rules().rules().len(), 1);
    assert_eq!(ds.status().rejected_count, 0);
    ds.close().await;
}

#[tokio::test]
async fn a_deleted_config_clears_the_rules_and_a_recreated_one_applies_again() {
    let key = unique_key("recreate");
    let w = writer(config(&addr())).await;
    w.put_bytes(&key, &text(1)).await.expect("publish");
    let (sentinel, ds) =
        start(NacosSource::configs(config(&addr()), [key.clone()]).expect("src")).await;
    wait_seq(&sentinel, 1).await;
    w.delete(&key).await.expect("delete");
    wait_until("cleared", || sentinel.flow_rules().rules().is_empty()).await;
    w.put_bytes(&key, &text(2)).await.expect("re-create");
    wait_seq(&sentinel, 2).await;
    ds.close().await;
}

#[tokio::test]
async fn a_wrong_password_is_an_auth_error_without_the_secret() {
    let _fault = fault_lock().await;
    let key = unique_key("wrong_password");
    let cfg = builder(&auth_addr())
        .credentials(ADMIN.0, "not-the-pw-123")
        .build()
        .expect("valid");
    let mut source = NacosSource::configs(cfg, [key.clone()]).expect("source");
    let err = read(&mut source).await.expect_err("refused");
    assert!(matches!(err, SourceError::Auth { .. }), "{err:?}");
    let shown = format!("{err} {err:?} {source:?} {}", source.describe());
    assert!(!shown.contains("not-the-pw-123"), "{shown}");

    // No credentials at all on a server that wants them.
    let mut anonymous = NacosSource::configs(config(&auth_addr()), [key]).expect("source");
    let err = read(&mut anonymous).await.expect_err("refused");
    assert!(matches!(err, SourceError::Auth { .. }), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_token_makes_the_source_log_in_again_and_status_shows_it() {
    let _fault = fault_lock().await;
    let cfg = builder(&auth_addr())
        .credentials(ADMIN.0, ADMIN.1)
        .build()
        .expect("valid");
    let key = unique_key("relogin");
    let w = NacosRuleWriter::new(cfg.clone()).expect("writer");
    let one = text(1);
    retried("publish 1", || w.put_bytes(&key, &one)).await;
    let (sentinel, ds) =
        start(NacosSource::configs(cfg.clone(), [key.clone()]).expect("src")).await;
    wait_seq(&sentinel, 1).await;
    assert_eq!(ds.status().reauthentications, 0);

    // A fresh server: every token it issued is gone (and so is the config).
    services(&["stop", "nacos-auth"]).await;
    services(&["start", "nacos-auth"]).await;
    let w = NacosRuleWriter::new(cfg).expect("writer");
    let two = text(2);
    retried("publish 2", || w.put_bytes(&key, &two)).await;
    wait_seq(&sentinel, 2).await;
    let status = wait_status(&ds, "a login after the refused token", |s| {
        s.reauthentications >= 1
    })
    .await;
    let shown = format!("{status:?}");
    assert!(!shown.contains(ADMIN.1), "{shown}");
    ds.close().await;
}

/// A read answered by another server than the one before (a failover) counts as a
/// reconnect, so the driver confirms a change it reads right after it: a restarted Nacos
/// answers before it has reloaded its configs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_to_another_server_counts_as_a_reconnect() {
    let _fault = fault_lock().await;
    services(&["start", "nacos-fault"]).await;
    let key = unique_key("failover-count");
    let one = text(1);
    for at in [fault_addr(), addr()] {
        let w = writer(config(&at)).await;
        retried("publish", || w.put_bytes(&key, &one)).await;
    }
    let both = format!("{},{}", fault_addr(), addr());
    let mut source = NacosSource::configs(config(&both), [key]).expect("src");
    read(&mut source).await.expect("read from the first server");
    read(&mut source).await.expect("read from it again");
    assert_eq!(source.reconnects(), 0);
    services(&["stop", "nacos-fault", "--keep-data"]).await;
    let second = read(&mut source).await;
    services(&["start", "nacos-fault", "--keep-data"]).await;
    second.expect("read from the second server");
    assert_eq!(source.reconnects(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_first_server_down_the_source_reads_the_second_and_fails_back() {
    let _fault = fault_lock().await;
    let key = unique_key("failover");
    services(&["start", "nacos-fault"]).await;
    let (fault, main) = (
        writer(config(&fault_addr())).await,
        writer(config(&addr())).await,
    );
    fault
        .put_bytes(&key, &text(1))
        .await
        .expect("publish on fault");
    main.put_bytes(&key, &text(1))
        .await
        .expect("publish on main");
    services(&["stop", "nacos-fault", "--keep-data"]).await;

    // The second server is reached through a proxy, so it can go away without stopping the
    // server the other tests share.
    let second = Partition::start(&addr()).await;
    let both = format!("{},{}", fault_addr(), second.addr());
    let (sentinel, ds) =
        start(NacosSource::configs(config(&both), [key.clone()]).expect("src")).await;
    wait_seq(&sentinel, 1).await;
    main.put_bytes(&key, &text(2))
        .await
        .expect("publish 2 on main");
    wait_seq(&sentinel, 2).await;

    // The first comes back with a newer value and the second goes away: the source moves
    // back to the first.
    services(&["start", "nacos-fault", "--keep-data"]).await;
    let fault = writer(config(&fault_addr())).await;
    fault
        .put_bytes(&key, &text(3))
        .await
        .expect("publish 3 on fault");
    second.cut();
    wait_seq(&sentinel, 3).await;
    ds.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_server_is_reported_disconnected_within_the_health_check() {
    services(&["start", "nacos-freeze"]).await;
    // The default long poll and health check: what a user gets.
    let defaults = NacosConfig::builder()
        .servers([freeze_addr()])
        .build()
        .expect("valid config");
    let noticed_within = defaults.frozen_server_detection();
    let key = unique_key("frozen");
    let w = writer(config(&freeze_addr())).await;
    w.put_bytes(&key, &text(1)).await.expect("publish 1");
    let (sentinel, ds) =
        start(NacosSource::new(defaults, &key.data_id, &key.group).expect("source")).await;
    wait_seq(&sentinel, 1).await;
    expect_frozen_server_noticed(
        &ds,
        "nacos-freeze",
        noticed_within,
        &["health check", "1s", "2s"],
    )
    .await;
    let two = text(2);
    retried("publish 2 after the thaw", || w.put_bytes(&key, &two)).await;
    expect_resumed(&ds, &sentinel, 2).await;
    ds.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publish_the_server_drops_unanswered_on_a_reused_connection_is_sent_again() {
    let front = closes_its_first_reused_connection(addr()).await;
    let key = unique_key("reused");
    let writer = NacosRuleWriter::new(config(&front)).expect("writer");
    writer
        .put_bytes(&key, "v1")
        .await
        .expect("the first publish is answered");
    // Goes on the pooled connection, which the server closes without answering.
    writer
        .put_bytes(&key, "v2")
        .await
        .expect("the publish is sent again on a new connection");
    let mut source = NacosSource::new(config(&addr()), &key.data_id, &key.group).expect("source");
    let payload = read(&mut source).await.expect("read");
    assert_eq!(values(&payload), [(key.entry_key(), "v2".to_owned())]);
}

/// A listener in front of Nacos at `target`: its first connection answers the first request
/// itself (`true`, as a publish does) and keeps the connection open, then reads the next
/// request on it and closes it without an answer, as a server does with a pooled connection
/// it dropped (past its keep-alive, after a stall). Every later connection is passed
/// through to `target`. Returns the `host:port` to use as the server.
async fn closes_its_first_reused_connection(target: String) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let front = listener.local_addr().expect("address").to_string();
    tokio::spawn(async move {
        let mut first = true;
        while let Ok((mut client, _)) = listener.accept().await {
            if std::mem::take(&mut first) {
                tokio::spawn(async move {
                    if read_request(&mut client).await {
                        let answer = "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\
                                      content-length: 4\r\n\r\ntrue";
                        let _ = client.write_all(answer.as_bytes()).await;
                    }
                    // The next request on the kept-alive connection: read, then dropped.
                    let _ = read_request(&mut client).await;
                });
                continue;
            }
            let target = target.clone();
            tokio::spawn(async move {
                if let Ok(mut server) = tokio::net::TcpStream::connect(&target).await {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                }
            });
        }
    });
    front
}

/// Reads one HTTP/1.1 request (head and `content-length` body); false when the connection
/// ends first.
async fn read_request(stream: &mut tokio::net::TcpStream) -> bool {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let body = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            while buf.len() < end + 4 + body {
                match tokio::time::timeout(WAIT, stream.read(&mut chunk)).await {
                    Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                    _ => return false,
                }
            }
            return true;
        }
        match tokio::time::timeout(WAIT, stream.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&chunk[..n]),
            _ => return false,
        }
    }
}
