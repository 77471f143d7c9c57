//! `ZooKeeperSource` and `ZooKeeperRuleWriter` against real ZooKeeper servers: a znode and a
//! path's children read and watched (change, deletion, re-creation, children added and
//! removed), chroot and several servers, digest auth and ACLs, compare-and-set, bad input,
//! and the faults: a frozen server, a SIGKILL and restart, a session that expires while the
//! source is cut off. Start the servers first:
//!
//! ```text
//! scripts/services.sh start zookeeper
//! cargo test -p sentinel-datasource-zookeeper --test backend
//! ```

mod support;

use std::time::Duration;

use sentinel_core::datasource::testkit::{
    applied_seq, flow_payload, next_value, read, values, wait_status, wait_until, WAIT,
};
use sentinel_core::datasource::{DataSource, ReadableDataSource, SourceError};
use sentinel_core::flow::FlowRule;
use sentinel_core::{RuleSet, Sentinel};
use sentinel_datasource_zookeeper::{
    MissingParent, NodeAcl, WriteError, ZooKeeperRuleWriter, ZooKeeperSource,
};
use sentinel_test_support::{
    fault_lock, flow_resources, services, start_flow, start_recorded, Partition,
};
use support::{
    addr, builder, config, expect_frozen_server_noticed, expect_resumed, fault_addr,
    fault_pid_file, freeze_addr, retried, unique_path, writer,
};

/// Starts a driver over `source` into a fresh engine, failing the start on a read error.
async fn start(source: ZooKeeperSource) -> (Sentinel, DataSource) {
    start_flow(source, "zookeeper-test").await
}

/// Writes flow payload `seq` at `path` and waits until `sentinel` applies it.
async fn write_applied(w: &ZooKeeperRuleWriter, path: &str, seq: u64, sentinel: &Sentinel) {
    w.put_bytes(path, flow_payload(seq))
        .await
        .unwrap_or_else(|e| panic!("write {seq}: {e}"));
    wait_until(&format!("payload {seq} applied"), || {
        applied_seq::<FlowRule>(sentinel) == Some(seq)
    })
    .await;
}

fn rule(resource: &str) -> String {
    format!(r#"[{{"resource":"{resource}","count":10}}]"#)
}

#[tokio::test]
async fn a_znode_is_read_watched_deleted_and_recreated_and_the_revision_is_its_mzxid() {
    let path = unique_path("node");
    let w = writer(config(&addr())).await;
    let first = w.put_bytes(&path, "v1").await.expect("write v1");
    let mut source = ZooKeeperSource::node(config(&addr()), &path);
    let payload = read(&mut source).await.expect("read");
    assert_eq!(values(&payload), [(path.clone(), "v1".to_owned())]);
    assert_eq!(payload.revision, Some(first.mzxid.to_string()));
    w.put_bytes(&path, "v2").await.expect("write v2");
    let payload = next_value(&mut source).await;
    assert_eq!(values(&payload), [(path.clone(), "v2".to_owned())]);
    w.delete(&path).await.expect("delete");
    let payload = next_value(&mut source).await;
    assert!(payload.is_absent(), "{payload:?}");
    w.put_bytes(&path, "v3").await.expect("re-create");
    let payload = next_value(&mut source).await;
    assert_eq!(values(&payload), [(path.clone(), "v3".to_owned())]);
    source.close().await;
}

#[tokio::test]
async fn a_deleted_znode_clears_the_rules_and_a_recreated_one_applies_again() {
    let path = unique_path("delete");
    let w = writer(config(&addr())).await;
    w.put_bytes(&path, flow_payload(1)).await.expect("write");
    let (sentinel, ds) = start(ZooKeeperSource::node(config(&addr()), &path)).await;
    assert_eq!(applied_seq::<FlowRule>(&sentinel), Some(1));
    w.delete(&path).await.expect("delete");
    wait_until("delete cleared", || {
        sentinel.flow_rules().rules().is_empty()
    })
    .await;
    write_applied(&w, &path, 2, &sentinel).await;
    ds.close().await;
}

#[tokio::test]
async fn a_children_source_applies_the_union_as_children_come_and_go() {
    let parent = unique_path("children");
    let w = writer(config(&addr())).await;
    w.put_bytes(&format!("{parent}/orders"), rule("orders"))
        .await
        .expect("write");
    let (sentinel, ds) = start(ZooKeeperSource::children(config(&addr()), &parent)).await;
    assert_eq!(flow_resources(&sentinel), ["orders"]);

    w.put_bytes(&format!("{parent}/payments"), rule("payments"))
        .await
        .expect("add");
    wait_until("payments added", || {
        flow_resources(&sentinel) == ["orders", "payments"]
    })
    .await;
    w.put_bytes(&format!("{parent}/payments"), rule("refunds"))
        .await
        .expect("change a child");
    wait_until("a child changed", || {
        flow_resources(&sentinel) == ["orders", "refunds"]
    })
    .await;
    w.delete(&format!("{parent}/orders")).await.expect("remove");
    wait_until("orders removed", || {
        flow_resources(&sentinel) == ["refunds"]
    })
    .await;
    ds.close().await;
}

#[tokio::test]
async fn a_chroot_and_several_servers_in_the_connect_string_reach_the_same_znode() {
    let root = unique_path("chroot");
    let w = writer(config(&addr())).await;
    w.put_bytes(&format!("{root}/rules/flow"), flow_payload(1))
        .await
        .expect("write");
    // The first server listens nowhere: the client moves on to the next.
    let chrooted = builder("127.0.0.1:1")
        .servers([addr()])
        .chroot(&root)
        .build()
        .expect("valid config");
    let (sentinel, ds) = start(ZooKeeperSource::node(chrooted.clone(), "/rules/flow")).await;
    assert_eq!(applied_seq::<FlowRule>(&sentinel), Some(1));
    // A writer under the same chroot writes the same znode.
    let chrooted_writer = writer(chrooted).await;
    chrooted_writer
        .put_bytes("/rules/flow", flow_payload(2))
        .await
        .expect("write under the chroot");
    wait_until("the chrooted write applied", || {
        applied_seq::<FlowRule>(&sentinel) == Some(2)
    })
    .await;
    assert_eq!(
        w.version(&format!("{root}/rules/flow"))
            .await
            .expect("version")
            .map(|v| v.version),
        Some(1)
    );
    ds.close().await;
}

#[tokio::test]
async fn digest_acls_admit_the_right_password_and_refuse_a_wrong_one_without_showing_it() {
    let path = unique_path("acl");
    let owner = builder(&addr())
        .credentials("app", "apppw")
        .build()
        .expect("valid");
    writer(owner.clone())
        .await
        .with_acl(NodeAcl::CreatorAll)
        .put_bytes(&path, flow_payload(1))
        .await
        .expect("write as the owner");

    let (sentinel, ds) = start(ZooKeeperSource::node(owner, &path)).await;
    assert_eq!(applied_seq::<FlowRule>(&sentinel), Some(1));
    ds.close().await;

    for cfg in [
        builder(&addr()).credentials("app", "not-the-pw-123"),
        builder(&addr()),
    ] {
        let mut source = ZooKeeperSource::node(cfg.build().expect("valid"), &path);
        let err = read(&mut source).await.expect_err("refused");
        assert!(
            matches!(err, SourceError::PermissionDenied { .. }),
            "{err:?}"
        );
        let shown = format!("{err} {err:?} {source:?} {}", source.describe());
        assert!(!shown.contains("not-the-pw-123"), "{shown}");
        assert!(shown.contains(&path), "{shown}");
    }
    // Nor may a writer without the password overwrite it.
    let err = writer(config(&addr()))
        .await
        .put_bytes(&path, flow_payload(9))
        .await
        .expect_err("refused");
    assert!(
        matches!(err, SourceError::PermissionDenied { .. }),
        "{err:?}"
    );
}

/// The [`MissingParent`] an error carries as its source, if any.
fn missing_parent(err: &SourceError) -> Option<&MissingParent> {
    std::error::Error::source(err).and_then(|s| s.downcast_ref::<MissingParent>())
}

#[tokio::test]
async fn a_write_under_a_chroot_that_is_no_znode_is_a_missing_chroot_not_a_conflict() {
    let chroot = unique_path("missing-chroot");
    let chrooted = builder(&addr())
        .chroot(&chroot)
        .build()
        .expect("valid config");
    let w = writer(chrooted).await;
    let rules = RuleSet::new().with_flow(vec![FlowRule::qps("GET:/order", 5.0)]);
    let expected = MissingParent::Chroot {
        chroot: chroot.clone(),
    };
    let err = w
        .put_rules_if("/rules/flow", &rules, None)
        .await
        .expect_err("no chroot");
    let WriteError::Store(store) = &err else {
        panic!("a missing chroot must not read as {err:?}")
    };
    assert_eq!(missing_parent(store), Some(&expected), "{err:?}");
    assert!(err.to_string().contains(&chroot), "{err}");
    let err = w
        .put_rules_if("/rules/flow", &rules, Some(0))
        .await
        .expect_err("no chroot");
    assert!(
        matches!(&err, WriteError::Store(store) if missing_parent(store) == Some(&expected)),
        "{err:?}"
    );
    let err = w
        .put_bytes("/rules/flow", flow_payload(1))
        .await
        .expect_err("no chroot");
    assert_eq!(missing_parent(&err), Some(&expected), "{err:?}");
    // Once the chroot exists, the same writer creates the znode under it.
    let root = writer(config(&addr())).await;
    root.put_bytes(&chroot, Vec::new())
        .await
        .expect("create the chroot");
    w.put_rules_if("/rules/flow", &rules, None)
        .await
        .expect("created under the chroot");
    // A znode deleted since it was read is still a lost race, not a missing parent.
    w.delete("/rules/flow").await.expect("delete");
    let err = w
        .put_rules_if("/rules/flow", &rules, Some(0))
        .await
        .expect_err("deleted meanwhile");
    assert!(matches!(err, WriteError::Conflict { .. }), "{err:?}");
}

#[tokio::test]
async fn compare_and_set_refuses_a_stale_version() {
    let path = unique_path("cas");
    let w = writer(config(&addr())).await;
    let rules = |count| RuleSet::new().with_flow(vec![FlowRule::qps("GET:/order", count)]);
    let first = w
        .put_rules_if(&path, &rules(5.0), None)
        .await
        .expect("create");
    assert_eq!(first.version, 0);
    let err = w
        .put_rules_if(&path, &rules(5.5), None)
        .await
        .expect_err("exists already");
    assert!(matches!(err, WriteError::Conflict { .. }), "{err:?}");
    let second = w
        .put_rules_if(&path, &rules(6.0), Some(first.version))
        .await
        .expect("update at the read version");
    // Another operator still holds the first version.
    let err = w
        .put_rules_if(&path, &rules(7.0), Some(first.version))
        .await
        .expect_err("stale");
    assert!(
        matches!(err, WriteError::Conflict { expected: 0, .. }),
        "{err:?}"
    );
    assert_eq!(w.version(&path).await.expect("version"), Some(second));
    let err = w
        .put_rules_if(
            &path,
            &RuleSet::new().with_flow(vec![FlowRule::qps("", 1.0)]),
            Some(second.version),
        )
        .await
        .expect_err("invalid");
    assert!(matches!(err, WriteError::Invalid { .. }), "{err:?}");
    assert_eq!(w.version(&path).await.expect("version"), Some(second));
}

#[tokio::test]
async fn bad_input_is_refused_naming_it_and_the_last_good_rules_stay() {
    // A path that is no znode path.
    let mut source = ZooKeeperSource::node(config(&addr()), "rules/flow");
    let err = read(&mut source).await.expect_err("relative path");
    assert!(err.to_string().contains("rules/flow"), "{err}");
    // A payload over the cap.
    let path = unique_path("too-large");
    let w = writer(config(&addr())).await;
    w.put_bytes(&path, vec![b' '; 2048]).await.expect("write");
    let small = builder(&addr())
        .max_payload_bytes(1024)
        .build()
        .expect("valid");
    let mut source = ZooKeeperSource::node(small, &path);
    let err = read(&mut source).await.expect_err("too large");
    assert!(matches!(err, SourceError::TooLarge { .. }), "{err:?}");
    // A payload that is not rules: rejected whole, the last good rules kept.
    let path = unique_path("bad-payload");
    w.put_bytes(&path, flow_payload(1)).await.expect("write");
    let (sentinel, ds, recorder) = start_recorded(
        ZooKeeperSource::node(config(&addr()), &path),
        "zookeeper-test",
    )
    .await;
    w.put_bytes(&path, "{not json").await.expect("write");
    wait_until("the bad payload rejected", || recorder.rejections() == 1).await;
    assert_eq!(applied_seq::<FlowRule>(&sentinel), Some(1));
    write_applied(&w, &path, 2, &sentinel).await;
    ds.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_server_is_reported_disconnected_within_the_health_check_and_a_half() {
    services(&["start", "zookeeper-freeze"]).await;
    let path = unique_path("frozen");
    // The default health check: what a user gets.
    let defaults = sentinel_datasource_zookeeper::ZooKeeperConfig::builder()
        .servers([freeze_addr()])
        .build()
        .expect("valid config");
    let noticed_within = defaults.frozen_server_detection();
    let w = writer(config(&freeze_addr())).await;
    w.put_bytes(&path, flow_payload(1)).await.expect("write 1");
    let (sentinel, ds) = start(ZooKeeperSource::node(defaults, &path)).await;
    assert_eq!(applied_seq::<FlowRule>(&sentinel), Some(1));
    expect_frozen_server_noticed(&ds, "zookeeper-freeze", noticed_within, &["PINGs", "2s"]).await;
    retried("write 2 after the thaw", || {
        w.put_bytes(&path, flow_payload(2))
    })
    .await;
    expect_resumed(&ds, &sentinel, 2).await;
    ds.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_written_while_the_server_was_killed_and_restarted_is_applied() {
    let _fault = fault_lock().await;
    services(&["start", "zookeeper-fault"]).await;
    let path = unique_path("sigkill");
    let w = writer(config(&fault_addr())).await;
    w.put_bytes(&path, flow_payload(1)).await.expect("write 1");
    let (sentinel, ds) = start(ZooKeeperSource::node(config(&fault_addr()), &path)).await;
    assert_eq!(applied_seq::<FlowRule>(&sentinel), Some(1));

    let pid_file = fault_pid_file();
    let pid = std::fs::read_to_string(&pid_file)
        .unwrap_or_else(|e| panic!("{}: {e}", pid_file.display()));
    let killed = std::process::Command::new("kill")
        .args(["-KILL", pid.trim()])
        .status()
        .expect("run kill");
    assert!(killed.success(), "kill -KILL {pid}");
    wait_status(&ds, "the source notices the killed server", |s| {
        !s.connected
    })
    .await;
    services(&["start", "zookeeper-fault", "--keep-data"]).await;
    // Written as soon as the server is back, while the source is still backing off.
    retried("write 2 after the restart", || {
        w.put_bytes(&path, flow_payload(2))
    })
    .await;
    wait_until("the change written while away applied", || {
        applied_seq::<FlowRule>(&sentinel) == Some(2)
    })
    .await;
    wait_status(&ds, "reconnected", |s| s.connected).await;
    write_applied(&w, &path, 3, &sentinel).await;
    ds.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_session_expires_a_new_session_reads_the_changes_written_while_away() {
    let path = unique_path("expiry");
    let w = writer(config(&addr())).await;
    w.put_bytes(&path, flow_payload(1)).await.expect("write 1");
    let proxy = Partition::start(&addr()).await;
    // The shortest session the server grants (minSessionTimeout 1 s, asked 2 s).
    let short = builder(proxy.addr())
        .session_timeout(Duration::from_secs(2))
        .health_check(Duration::from_millis(1000))
        .build()
        .expect("valid");
    let mut source = ZooKeeperSource::node(short, &path);
    let payload = read(&mut source).await.expect("read");
    assert_eq!(values(&payload).len(), 1);
    assert_eq!(source.sessions(), 1);

    proxy.cut();
    let lost = tokio::time::timeout(WAIT, source.watch())
        .await
        .expect("the cut is noticed");
    assert!(
        matches!(lost, Err(SourceError::Connection { .. })),
        "{lost:?}"
    );
    for seq in 2..=4 {
        w.put_bytes(&path, flow_payload(seq))
            .await
            .expect("write while cut off");
    }
    // The scenario's timeline, not a wait for a condition: cut off for longer than the
    // session timeout (2 s, and the client's own 7/5 of it), so the session expires.
    tokio::time::sleep(Duration::from_secs(4)).await;
    proxy.heal();
    let payload = tokio::time::timeout(WAIT, async {
        loop {
            match source.read().await {
                Ok(payload) => return payload,
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    })
    .await
    .expect("read again after the heal");
    assert_eq!(
        values(&payload),
        [(
            path.clone(),
            String::from_utf8(flow_payload(4)).expect("utf-8")
        )]
    );
    assert_eq!(source.sessions(), 2, "a new session after the expiry");
    w.put_bytes(&path, flow_payload(5)).await.expect("write 5");
    let payload = next_value(&mut source).await;
    assert_eq!(
        values(&payload),
        [(
            path.clone(),
            String::from_utf8(flow_payload(5)).expect("utf-8")
        )]
    );
    source.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_behind_the_last_read_is_never_applied_and_a_new_session_moves_on() {
    let _fault = fault_lock().await;
    services(&["start", "zookeeper-fault"]).await;
    let path = unique_path("lagging");
    // zookeeper-main holds the newer value; zookeeper-fault, a separate server, stands for a
    // member of the ensemble that is behind: an older value at a lower zxid.
    let ahead = writer(config(&addr())).await;
    let behind = writer(config(&fault_addr())).await;
    let old = behind.put_bytes(&path, flow_payload(1)).await.expect("old");
    let mut new = ahead.put_bytes(&path, flow_payload(2)).await.expect("new");
    for _ in 0..5000 {
        if new.mzxid > old.mzxid {
            break;
        }
        new = ahead.put_bytes(&path, flow_payload(2)).await.expect("new");
    }
    assert!(new.mzxid > old.mzxid, "{new:?} {old:?}");
    let to_ahead = Partition::start(&addr()).await;
    let to_behind = Partition::start(&fault_addr()).await;
    to_behind.cut();
    // A short session: the lagging server refuses to resume one that has seen a newer zxid,
    // so the client moves on once the session expires on its side (7/5 of the timeout).
    let both = builder(to_ahead.addr())
        .servers([to_behind.addr()])
        .session_timeout(Duration::from_secs(2))
        .health_check(Duration::from_secs(1))
        .build()
        .expect("valid");
    let (sentinel, ds, recorder) =
        start_recorded(ZooKeeperSource::node(both, &path), "zookeeper-test").await;
    assert_eq!(applied_seq::<FlowRule>(&sentinel), Some(2));

    // Only the server that is behind can be reached: its session knows nothing of the old
    // one, and its value is older than the one applied.
    to_ahead.cut();
    to_behind.heal();
    let status = wait_status(&ds, "the lagging server refused", |s| {
        s.last_error
            .as_deref()
            .is_some_and(|e| e.contains("the server is behind"))
    })
    .await;
    assert!(!status.connected, "{status:?}");
    ahead
        .put_bytes(&path, flow_payload(3))
        .await
        .expect("newest");
    // Back to a server that is up to date: a new session there applies the newest value.
    to_behind.cut();
    to_ahead.heal();
    wait_until("the newest value applied", || {
        applied_seq::<FlowRule>(&sentinel) == Some(3)
    })
    .await;
    let seqs: Vec<u64> = recorder.seqs::<FlowRule>().into_iter().flatten().collect();
    assert_eq!(seqs, [2, 3], "the older value was applied");
    ds.close().await;
    behind.delete(&path).await.expect("clean up");
}
