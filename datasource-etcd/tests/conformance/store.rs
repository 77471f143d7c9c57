//! What the store does under a source: an etcd prefix's keys coming and going, and a
//! compaction past the watch position.

use super::*;

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
