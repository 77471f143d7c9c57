//! A payload's way through the driver: the memory source's conformance, writes applied in
//! order, prefix entries and keyed converters, the combined document (the families it owns,
//! seen atomically), lenient skips, the keep policy and unchanged payloads, the size cap,
//! active rules.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_source_conforms() {
    let harness = MemoryHarness::new();
    let report = testkit::run_conformance(&harness).await;
    let report = report.unwrap_or_else(|failure| panic!("{failure}"));
    assert_eq!(report.checks.len(), 11);
    assert!(report.all_passed(), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rapid_writes_converge_in_order() {
    let harness = MemoryHarness::new();
    let outcome = testkit::check_ordered_updates(&harness, 500).await;
    assert_eq!(outcome, Ok(CheckOutcome::Passed));
}

#[tokio::test]
async fn prefix_entries_are_merged_and_applied_once() {
    let store = MemoryStore::new();
    store.put("rules/a", r#"[{"resource":"a","count":1}]"#);
    store.put("rules/b", r#"{"resource":"b","count":2}"#);
    store.put("other", r#"[{"resource":"x","count":3}]"#);
    let sentinel = Sentinel::new();
    let before = sentinel.rules_version();
    let source = DataSource::builder(store.prefix_source("rules/"), FlowJson::new())
        .start(&sentinel)
        .await
        .expect("starts");
    assert_eq!(
        sentinel.rules_version(),
        before + 1,
        "one apply for two keys"
    );
    assert_eq!(flow_count(&sentinel), 2);

    // A bad entry rejects the whole prefix and names its key.
    store.put("rules/b", "[{");
    let status = wait_status(&source, "rejection", |s| s.rejected_count == 1).await;
    assert!(status.last_error.unwrap_or_default().contains("rules/b"));
    assert_eq!(flow_count(&sentinel), 2);

    store.delete("rules/b");
    wait_status(&source, "apply", |s| s.applied_count == 2).await;
    assert_eq!(sentinel.flow_rules().rules(), vec![FlowRule::qps("a", 1.0)]);
    source.close().await;
}

#[tokio::test]
async fn keyed_converters_read_each_entry_in_its_own_family() {
    let store = MemoryStore::new();
    store.put("app/app-flow-rules", r#"[{"resource":"a","count":1}]"#);
    store.put(
        "app/app-degrade-rules",
        r#"[{"resource":"a","grade":2,"count":3,"timeWindow":5}]"#,
    );
    let sentinel = Sentinel::new();
    let source = DataSource::builder(store.prefix_source("app/"), FlowJson::new())
        .converter_for("app/app-degrade-rules", DegradeJson::new())
        .start(&sentinel)
        .await
        .expect("starts");
    assert_eq!(sentinel.flow_rules().rules(), vec![FlowRule::qps("a", 1.0)]);
    assert_eq!(sentinel.degrade_rules().rules().len(), 1);

    // One change to either key applies with the other, in one update.
    let before = sentinel.rules_version();
    store.put("app/app-degrade-rules", "[]");
    wait_status(&source, "apply", |s| s.applied_count == 2).await;
    assert_eq!(sentinel.rules_version(), before + 1);
    assert!(sentinel.degrade_rules().rules().is_empty());
    assert_eq!(flow_count(&sentinel), 1);
    source.close().await;
}

#[tokio::test]
async fn combined_document_is_one_apply_and_owns_its_families() {
    let store = MemoryStore::new();
    store.put(
        "all",
        r#"{"flow":[{"resource":"a","count":1},{"resource":"b","count":2}]}"#,
    );
    let sentinel = Sentinel::new();
    let applies = Arc::new(AtomicUsize::new(0));
    let counter = applies.clone();
    sentinel.add_listener(move |e: &SentinelEvent| {
        if matches!(e, SentinelEvent::RulesApplied { .. }) {
            counter.fetch_add(1, Ordering::SeqCst);
        }
    });
    sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps("api", 9.0)])
        .expect("loads");
    let source = DataSource::builder(store.source("all"), CombinedJson::new())
        .start(&sentinel)
        .await
        .expect("starts");
    assert_eq!(
        applies.load(Ordering::SeqCst),
        2,
        "one apply for the document"
    );
    assert_eq!(flow_count(&sentinel), 3, "unioned with the api source");
    assert_eq!(source.status().families, vec![RuleFamily::Flow]);

    // The family disappears from the document: this source's part of it is cleared.
    store.put("all", "{}");
    wait_status(&source, "apply", |s| s.applied_count == 2).await;
    assert_eq!(
        sentinel.flow_rules().rules(),
        vec![FlowRule::qps("api", 9.0)]
    );
    source.close().await;
}

#[tokio::test]
async fn lenient_reports_skipped_rules() {
    let store = MemoryStore::new();
    store.put(
        "k",
        r#"[{"resource":"a","count":1},{"controlBehavior":"x"},{"resource":"c","count":-1}]"#,
    );
    let sentinel = Sentinel::new();
    let source = DataSource::builder(store.source("k"), FlowJson::new())
        .validation(Validation::Lenient)
        .start(&sentinel)
        .await
        .expect("starts");
    assert_eq!(flow_count(&sentinel), 1);
    let skipped = source.status().skipped;
    assert!(
        skipped
            .iter()
            .any(|i| i.index == 1 && i.field == "controlBehavior"),
        "{skipped:?}"
    );
    assert!(
        skipped.iter().any(|i| i.index == 2 && i.field == "count"),
        "{skipped:?}"
    );
    // Rule #1 has two problems (the type of `controlBehavior`, no `resource`): three issues,
    // two rules.
    assert_eq!(skipped.len(), 3, "{skipped:?}");
    assert_eq!(source.status().skipped_rules, 2);
    source.close().await;
}

#[tokio::test]
async fn keep_policy_and_identical_payloads() {
    let store = MemoryStore::new();
    store.put("k", flow_payload(1));
    let sentinel = Sentinel::new();
    let source = DataSource::builder(store.source("k"), FlowJson::new())
        .delete_policy(DeletePolicy::Keep)
        .start(&sentinel)
        .await
        .expect("starts");
    store.put("k", "  \n");
    wait_status(&source, "kept", |s| s.kept_count == 1).await;
    store.put("k", flow_payload(1));
    wait_status(&source, "re-applied", |s| s.applied_count == 2).await;
    store.put("k", flow_payload(1));
    wait_status(&source, "unchanged", |s| s.unchanged_count == 1).await;
    assert_eq!(source.status().applied_count, 2);
    assert_eq!(applied_seq::<FlowRule>(&sentinel), Some(1));
    source.close().await;
}

/// A reader that loads the engine's rule snapshot while a combined document changes flow and
/// degrade rules together never sees one family from one document and the other from the
/// next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn combined_document_is_seen_atomically() {
    let sentinel = Sentinel::new();
    let store = MemoryStore::new();
    let doc = |n: usize| {
        let flow: Vec<String> = (0..n)
            .map(|i| format!(r#"{{"resource":"r{i}","count":{n}}}"#))
            .collect();
        let degrade: Vec<String> = (0..n)
            .map(|i| format!(r#"{{"resource":"r{i}","grade":2,"count":{n},"timeWindow":1}}"#))
            .collect();
        format!(
            r#"{{"flow":[{}],"degrade":[{}]}}"#,
            flow.join(","),
            degrade.join(",")
        )
    };
    store.put("rules", doc(1));
    let source = DataSource::builder(store.source("rules"), CombinedJson::new())
        .start(&sentinel)
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let sentinel = sentinel.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut checked = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let snapshot = sentinel.inner.shared.rules.load();
                let flow = snapshot.tables.flow.rules.len();
                let degrade = snapshot.tables.degrade.rules.len();
                assert_eq!(flow, degrade, "a half-applied document was visible");
                if let (Some(f), Some(d)) = (
                    snapshot.tables.flow.rules.first(),
                    snapshot.tables.degrade.rules.first(),
                ) {
                    assert_eq!(
                        f.count, d.count,
                        "flow and degrade from different documents"
                    );
                }
                checked += 1;
            }
            checked
        })
    };
    for n in 2..60 {
        store.put("rules", doc(n));
        wait_status(&source, "the document applied", |s| {
            s.last_revision.is_some() && sentinel.flow_rules().rules().len() == n
        })
        .await;
    }
    stop.store(true, Ordering::Relaxed);
    let checked = reader
        .join()
        .unwrap_or_else(|_| panic!("the reader saw a torn update"));
    assert!(checked > 0);
    source.close().await;
}

#[tokio::test]
async fn active_rules_and_weak_handles() {
    let sentinel = Sentinel::new();
    let weak = sentinel.downgrade();
    let seen = Arc::new(AtomicUsize::new(0));
    let count = seen.clone();
    // A listener that reads the engine through a weak handle does not keep it alive.
    sentinel.add_listener(move |_: &SentinelEvent| {
        if let Some(engine) = weak.upgrade() {
            count.store(engine.active_rules().flow.len(), Ordering::SeqCst);
        }
    });
    sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps("a", 1.0), FlowRule::qps("b", 1.0)])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(seen.load(Ordering::SeqCst), 2);
    let active = sentinel.active_rules();
    assert_eq!(
        (active.version, active.flow.len(), active.degrade.len()),
        (1, 2, 0)
    );
    let weak = sentinel.downgrade();
    drop(sentinel);
    assert!(weak.upgrade().is_none(), "the engine was kept alive");
}

#[tokio::test]
async fn the_default_cap_is_4_mib() {
    let store = MemoryStore::new();
    let at_cap = {
        let mut bytes = vec![b' '; DEFAULT_MAX_PAYLOAD_BYTES - 2];
        bytes.extend_from_slice(b"[]");
        bytes
    };
    store.put("k", at_cap.clone());
    let sentinel = Sentinel::new();
    let source = DataSource::builder(store.source("k"), FlowJson::new())
        .start(&sentinel)
        .await
        .expect("a payload of exactly 4 MiB is accepted");
    let mut over = at_cap;
    over.push(b' ');
    store.put("k", over);
    let status = wait_status(&source, "the oversized payload rejected", |s| {
        s.rejected_count == 1
    })
    .await;
    let error = status.last_error.unwrap_or_default();
    assert!(
        error.contains(&format!("{}-byte cap", 4 * 1024 * 1024)),
        "{error}"
    );
    source.close().await;
}

/// The provenance of the rules in force (`applied_*`) is kept apart from the last rejected
/// payload's (`rejected_*`): a rejection leaves the applied revision and hash alone, a fix
/// updates them and keeps the rejected ones (so the rejection can be shown resolved), and an
/// unchanged payload moves neither.
#[tokio::test]
async fn applied_and_rejected_provenance_are_kept_apart() {
    let store = MemoryStore::new();
    store.put("k", flow_payload(1));
    let first = store.revision().to_string();
    let sentinel = Sentinel::new();
    let source = DataSource::builder(store.source("k"), FlowJson::new())
        .start(&sentinel)
        .await
        .expect("starts");
    let applied = source.status();
    assert_eq!(applied.applied_revision.as_deref(), Some(first.as_str()));
    let first_hash = applied.applied_hash.clone().expect("an applied hash");
    assert_eq!(applied.last_hash.as_deref(), Some(first_hash.as_str()));
    assert_eq!(applied.rejected_revision, None);
    assert_eq!(applied.last_rejected_at, None);

    store.put("k", "[{\"resource\":");
    let broken = store.revision().to_string();
    let rejected = wait_status(&source, "rejected", |s| s.rejected_count == 1).await;
    assert!(rejected.store_rejected);
    assert_eq!(rejected.applied_revision.as_deref(), Some(first.as_str()));
    assert_eq!(rejected.applied_hash.as_deref(), Some(first_hash.as_str()));
    assert_eq!(rejected.rejected_revision.as_deref(), Some(broken.as_str()));
    let broken_hash = rejected.rejected_hash.clone().expect("a rejected hash");
    assert_ne!(broken_hash, first_hash);
    assert!(rejected.last_rejected_at.is_some());
    // `last_*` still name the last payload processed, the rejected one.
    assert_eq!(rejected.last_revision.as_deref(), Some(broken.as_str()));
    assert_eq!(rejected.last_hash.as_deref(), Some(broken_hash.as_str()));
    assert_eq!(applied_seq::<FlowRule>(&sentinel), Some(1));

    store.put("k", flow_payload(2));
    let fixed = store.revision().to_string();
    let resolved = wait_status(&source, "fixed", |s| s.applied_count == 2).await;
    assert!(!resolved.store_rejected);
    assert_eq!(resolved.applied_revision.as_deref(), Some(fixed.as_str()));
    let fixed_hash = resolved.applied_hash.clone().expect("an applied hash");
    assert_ne!(fixed_hash, first_hash);
    assert_eq!(resolved.rejected_revision.as_deref(), Some(broken.as_str()));
    assert_eq!(
        resolved.rejected_hash.as_deref(),
        Some(broken_hash.as_str())
    );
    assert_eq!(resolved.last_rejected_at, rejected.last_rejected_at);

    store.put("k", flow_payload(2));
    let again = store.revision().to_string();
    let unchanged = wait_status(&source, "unchanged", |s| s.unchanged_count == 1).await;
    assert_eq!(unchanged.last_revision.as_deref(), Some(again.as_str()));
    assert_eq!(unchanged.applied_revision.as_deref(), Some(fixed.as_str()));
    assert_eq!(unchanged.applied_hash.as_deref(), Some(fixed_hash.as_str()));
    assert_eq!(
        unchanged.rejected_revision.as_deref(),
        Some(broken.as_str())
    );
    source.close().await;
}
