//! The server restarting under a source, and its authentication: a wrong password, the
//! right one, and a user without read permission.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_with_nothing_changed_reconnects_then_applies_updates() {
    let _fault = fault_lock().await;
    let (cfg, key) = fault_key_at_seq_1("restart-same").await;

    let sentinel = Sentinel::new();
    let source = DataSource::builder(EtcdSource::key(cfg.clone(), key.clone()), FlowJson::new())
        .backoff(Duration::from_millis(100), Duration::from_secs(1))
        .start(&sentinel)
        .await
        .expect("start");
    let version = sentinel.rules_version();

    stop_until_disconnected(&source).await;
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
    let (cfg, key) = fault_key_at_seq_1("restart-changed").await;

    let sentinel = Sentinel::new();
    // The driver's re-read after the disconnect waits for the gate: the test restarts the
    // server and writes first.
    let (held, open) = Gated::new(EtcdSource::key(cfg.clone(), key.clone()), Hold::Reread);
    let source = DataSource::builder(held, FlowJson::new())
        .backoff(Duration::from_millis(20), Duration::from_millis(200))
        .start(&sentinel)
        .await
        .expect("start");

    stop_until_disconnected(&source).await;
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

/// Starts `etcd-fault` (the caller holds the fault lock) and writes sequence 1 to a fresh
/// key for `test`: the server's config and the key.
async fn fault_key_at_seq_1(test: &str) -> (EtcdConfig, String) {
    services(&["start", "etcd-fault"]).await;
    let cfg = config(&fault_endpoints());
    let key = unique_key("/sentinel-test", test);
    writer(cfg.clone())
        .await
        .put_bytes(&key, flow_payload(1))
        .await
        .expect("put 1");
    (cfg, key)
}

/// Stops `etcd-fault` (keeping its data) and waits until `source` reports it gone.
async fn stop_until_disconnected(source: &DataSource) {
    services(&["stop", "etcd-fault", "--keep-data"]).await;
    wait_status(source, "disconnected", |s| {
        !s.connected && s.last_error.is_some()
    })
    .await;
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
