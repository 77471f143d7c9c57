//! Rules written through `EtcdRuleWriter`: a thousand rules, invalid sets refused, combined
//! documents, and what the writer writes read back exactly.

use super::*;

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
