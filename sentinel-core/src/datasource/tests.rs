//! Driver tests over the in-memory backend.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::testkit::{self, applied_seq, flow_payload, wait_status, CheckOutcome, MemoryHarness};
use super::*;
use crate::flow::FlowRule;
use crate::{RuleFamily, Sentinel, SentinelEvent, Validation};

fn flow_count(sentinel: &Sentinel) -> usize {
    sentinel.flow_rules().rules().len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_source_conforms() {
    let harness = MemoryHarness::new();
    let report = testkit::run_conformance(&harness).await;
    let report = report.unwrap_or_else(|failure| panic!("{failure}"));
    assert_eq!(report.checks.len(), 10);
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
async fn fail_fast_and_bad_first_payload() {
    let store = MemoryStore::new();
    store.put("k", "not json");
    let sentinel = Sentinel::new();
    let err = DataSource::builder(store.source("k"), FlowJson::new())
        .start(&sentinel)
        .await
        .err();
    assert!(
        matches!(err, Some(DataSourceError::Rejected { .. })),
        "{err:?}"
    );

    store.set_down(true);
    let err = DataSource::builder(store.source("k"), FlowJson::new())
        .start(&sentinel)
        .await
        .err();
    assert!(
        matches!(err, Some(DataSourceError::Source { .. })),
        "{err:?}"
    );

    // Snapshot mode with no snapshot starts empty and catches up.
    let source = DataSource::builder(store.source("k"), FlowJson::new())
        .start_mode(StartMode::Snapshot)
        .backoff(Duration::from_millis(5), Duration::from_millis(20))
        .start(&sentinel)
        .await
        .expect("starts");
    assert!(!source.status().connected);
    store.put("k", flow_payload(7));
    store.set_down(false);
    wait_status(&source, "apply", |s| s.applied_count == 1 && s.connected).await;
    assert_eq!(applied_seq::<FlowRule>(&sentinel), Some(7));
    source.close().await;
}

#[tokio::test]
async fn snapshot_start_when_first_payload_is_rejected() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("snap.json");
    let store = MemoryStore::new();
    store.put("k", flow_payload(1));
    let first = Sentinel::new();
    let source = DataSource::builder(store.source("k"), FlowJson::new())
        .snapshot_file(&path)
        .start(&first)
        .await
        .expect("starts");
    source.close().await;

    store.put("k", "[{");
    let sentinel = Sentinel::new();
    let source = DataSource::builder(store.source("k"), FlowJson::new())
        .snapshot_file(&path)
        .start_mode(StartMode::Snapshot)
        .start(&sentinel)
        .await
        .expect("starts from the snapshot");
    assert_eq!(applied_seq::<FlowRule>(&sentinel), Some(1));
    let status = source.status();
    assert!(
        status.from_snapshot && status.connected && status.rejected_count == 1,
        "{status:?}"
    );
    source.close().await;
}

#[tokio::test(start_paused = true)]
async fn reconnects_with_capped_exponential_backoff() {
    let store = MemoryStore::new();
    store.put("k", flow_payload(1));
    let sentinel = Sentinel::new();
    let source = DataSource::builder(store.source("k"), FlowJson::new())
        .backoff(Duration::from_millis(100), Duration::from_millis(800))
        .start(&sentinel)
        .await
        .expect("starts");
    let reads_at_start = store.read_count();
    store.set_down(true);
    wait_status(&source, "disconnect", |s| !s.connected).await;
    // Paused time auto-advances while the driver sleeps.
    while store.read_count() < reads_at_start + 8 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let times = store.read_times();
    let gaps: Vec<Duration> = times[times.len() - 7..]
        .windows(2)
        .map(|w| w[1] - w[0])
        .collect();
    // Reads 2..=8 after the disconnect: their delays were 400 ms, then the 800 ms cap.
    let steps = [400u64, 800, 800, 800, 800, 800];
    for (gap, step) in gaps.iter().zip(steps) {
        let step = Duration::from_millis(step);
        assert!(
            *gap >= step / 2 && *gap <= step + Duration::from_millis(1),
            "{gaps:?}"
        );
    }
    store.put("k", flow_payload(2));
    store.set_down(false);
    wait_status(&source, "reconnect", |s| {
        s.connected && s.applied_count == 2
    })
    .await;
    assert_eq!(source.status().disconnects, 1);
    source.close().await;
}

#[tokio::test]
async fn two_running_sources_cannot_share_a_name() {
    let store = MemoryStore::new();
    store.put("a", flow_payload(1));
    store.put("b", flow_payload(2));
    let sentinel = Sentinel::new();
    let first = DataSource::builder(store.source("a"), FlowJson::new())
        .name("rules")
        .start(&sentinel)
        .await
        .expect("starts");
    let second = DataSource::builder(store.source("b"), FlowJson::new())
        .name("rules")
        .start(&sentinel)
        .await;
    assert!(
        matches!(&second, Err(DataSourceError::DuplicateName { name }) if name == "rules"),
        "{second:?}"
    );
    assert_eq!(
        applied_seq::<FlowRule>(&sentinel),
        Some(1),
        "the first source's rules stay"
    );
    // Another engine may use the name; this one may once the first source is closed.
    let other = Sentinel::new();
    let elsewhere = DataSource::builder(store.source("b"), FlowJson::new())
        .name("rules")
        .start(&other)
        .await
        .expect("another engine");
    first.close().await;
    let again = DataSource::builder(store.source("b"), FlowJson::new())
        .name("rules")
        .start(&sentinel)
        .await
        .expect("the name is free after close");
    assert_eq!(applied_seq::<FlowRule>(&sentinel), Some(2));
    again.close().await;
    elsewhere.close().await;
}

#[tokio::test]
async fn dropping_the_handle_stops_the_task() {
    let store = MemoryStore::new();
    store.put("k", flow_payload(1));
    let sentinel = Sentinel::new();
    let source = DataSource::builder(store.source("k"), FlowJson::new())
        .start(&sentinel)
        .await
        .expect("starts");
    let rx = source.status_watch();
    drop(source);
    let mut rx2 = rx.clone();
    let closed = tokio::time::timeout(Duration::from_secs(5), rx2.wait_for(|s| s.closed)).await;
    assert!(closed.is_ok(), "task did not stop");
    store.put("k", flow_payload(2));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(applied_seq::<FlowRule>(&sentinel), Some(1));
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

/// The memory harness without a way to stop its store.
struct CannotStop(MemoryHarness);

#[async_trait::async_trait]
impl testkit::ConformanceHarness for CannotStop {
    type Source = MemorySource;

    fn make_source(&self) -> MemorySource {
        self.0.make_source()
    }

    async fn write(&self, bytes: &[u8]) {
        self.0.write(bytes).await;
    }

    async fn delete(&self) {
        self.0.delete().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_harness_that_cannot_stop_its_server_reports_what_was_skipped() {
    let report = testkit::run_conformance(&CannotStop(MemoryHarness::new()))
        .await
        .unwrap_or_else(|failure| panic!("{failure}"));
    assert!(!report.all_passed());
    let summary = report.to_string();
    assert!(summary.starts_with("7 passed, 3 skipped: "), "{summary}");
    for check in ["initial_load", "disconnect", "snapshot"] {
        assert!(summary.contains(check), "{summary}");
    }
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

#[tokio::test]
async fn snapshot_failures_show_in_status_and_never_lose_the_good_copy() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = MemoryStore::new();
    store.put("k", flow_payload(1));

    // An unwritable snapshot path (under a regular file): status says so, rules apply.
    let blocker = dir.path().join("not-a-dir");
    std::fs::write(&blocker, b"x").expect("write");
    let sentinel = Sentinel::new();
    let source = DataSource::builder(store.source("k"), FlowJson::new())
        .snapshot_file(blocker.join("rules.json"))
        .start(&sentinel)
        .await
        .expect("starts");
    assert_eq!(applied_seq::<FlowRule>(&sentinel), Some(1));
    let error = source.status().snapshot_error.unwrap_or_default();
    assert!(error.contains("not-a-dir"), "{error:?}");
    source.close().await;

    // A rejected payload never overwrites the last good snapshot.
    let path = dir.path().join("rules.json");
    let sentinel = Sentinel::new();
    let source = DataSource::builder(store.source("k"), FlowJson::new())
        .snapshot_file(&path)
        .start(&sentinel)
        .await
        .expect("starts");
    let good = std::fs::read(&path).expect("snapshot written");
    store.put("k", r#"[{"resource":"conformance","count":-1}]"#);
    wait_status(&source, "the bad payload rejected", |s| {
        s.rejected_count == 1
    })
    .await;
    assert_eq!(std::fs::read(&path).expect("snapshot"), good);
    source.close().await;

    // A corrupt snapshot at a Snapshot start with the store down: started, no rules, and
    // status says why.
    std::fs::write(&path, b"{ not json").expect("corrupt it");
    store.set_down(true);
    let sentinel = Sentinel::new();
    let source = DataSource::builder(store.source("k"), FlowJson::new())
        .snapshot_file(&path)
        .start_mode(StartMode::Snapshot)
        .start(&sentinel)
        .await
        .expect("a Snapshot start starts");
    assert_eq!(applied_seq::<FlowRule>(&sentinel), None);
    let status = source.status();
    assert!(
        !status.from_snapshot && status.snapshot_error.is_some(),
        "{status:?}"
    );
    source.close().await;
}

/// A backend whose watch fails after `healthy_for`, recording when it is read.
struct FailingWatch {
    reads: Arc<std::sync::Mutex<Vec<tokio::time::Instant>>>,
    healthy_for: Duration,
}

#[async_trait::async_trait]
impl ReadableDataSource for FailingWatch {
    fn describe(&self) -> String {
        "failing watch".into()
    }

    async fn read(&mut self) -> Result<RawPayload, SourceError> {
        if let Ok(mut reads) = self.reads.lock() {
            reads.push(tokio::time::Instant::now());
        }
        Ok(RawPayload::single("k", flow_payload(1)))
    }

    async fn watch(&mut self) -> Result<WatchEvent, SourceError> {
        tokio::time::sleep(self.healthy_for).await;
        Err(SourceError::Connection {
            message: "gone".into(),
            source: None,
        })
    }
}

/// The gaps between the backend's reads while `healthy_for` and the backoff play out for
/// `run` (virtual time).
async fn read_gaps(healthy_for: Duration, run: Duration) -> Vec<Duration> {
    let reads = Arc::new(std::sync::Mutex::new(Vec::new()));
    let backend = FailingWatch {
        reads: reads.clone(),
        healthy_for,
    };
    let sentinel = Sentinel::new();
    let source = DataSource::builder(backend, FlowJson::new())
        .backoff(Duration::from_millis(100), Duration::from_secs(60))
        .start(&sentinel)
        .await
        .expect("starts");
    tokio::time::sleep(run).await;
    source.close().await;
    let reads = reads.lock().map(|r| r.clone()).unwrap_or_default();
    reads.windows(2).map(|w| w[1] - w[0]).collect()
}

#[tokio::test(start_paused = true)]
async fn backoff_doubles_for_a_watch_that_fails_at_once() {
    let gaps = read_gaps(Duration::ZERO, Duration::from_secs(30)).await;
    assert!(gaps.len() >= 6, "{gaps:?}");
    for (i, gap) in gaps.iter().take(6).enumerate() {
        let step = Duration::from_millis(100) * 2u32.pow(i as u32);
        assert!(
            *gap >= step / 2 && *gap <= step,
            "gap {i} is {gap:?}, expected {:?}..={step:?}",
            step / 2
        );
    }
}

#[tokio::test(start_paused = true)]
async fn backoff_starts_over_after_a_healthy_watch() {
    // Each watch runs 11 s (over the 10 s that count as healthy) before it fails: every
    // reconnect waits the initial delay again, not a doubled one.
    let gaps = read_gaps(Duration::from_secs(11), Duration::from_secs(60)).await;
    assert!(gaps.len() >= 4, "{gaps:?}");
    for gap in &gaps {
        let backoff = gap.saturating_sub(Duration::from_secs(11));
        assert!(
            backoff >= Duration::from_millis(50) && backoff <= Duration::from_millis(100),
            "{gaps:?}"
        );
    }
}

/// A backend whose watch panics: a bug in a backend.
struct PanickingWatch;

#[async_trait::async_trait]
impl ReadableDataSource for PanickingWatch {
    fn describe(&self) -> String {
        "panicking watch".into()
    }

    async fn read(&mut self) -> Result<RawPayload, SourceError> {
        Ok(RawPayload::single("k", flow_payload(1)))
    }

    async fn watch(&mut self) -> Result<WatchEvent, SourceError> {
        panic!("a backend bug");
    }
}

#[tokio::test]
async fn close_resumes_a_panic_of_the_driver_task() {
    let sentinel = Sentinel::new();
    let source = DataSource::builder(PanickingWatch, FlowJson::new())
        .start(&sentinel)
        .await
        .expect("starts");
    // `close` runs in a task of its own so the test can see it panic.
    let closed = tokio::spawn(async move { source.close().await }).await;
    let panic = closed.expect_err("close resumes the panic");
    assert!(panic.is_panic());
}

/// A backend that says how it checks its store, around the in-memory one.
struct Checked<B>(B);

#[async_trait::async_trait]
impl<B: ReadableDataSource> ReadableDataSource for Checked<B> {
    fn describe(&self) -> String {
        self.0.describe()
    }
    fn health_check(&self) -> Option<HealthCheck> {
        Some(HealthCheck::new(
            "a ping every 1s, answered within 2s",
            Duration::from_secs(3),
        ))
    }
    async fn read(&mut self) -> Result<RawPayload, SourceError> {
        self.0.read().await
    }
    async fn watch(&mut self) -> Result<WatchEvent, SourceError> {
        self.0.watch().await
    }
}

#[tokio::test]
async fn the_status_says_how_the_backend_checks_its_store() {
    let store = MemoryStore::new();
    store.put("k", r#"[{"resource":"a","count":1}]"#);
    let sentinel = Sentinel::new();
    let plain = DataSource::builder(store.source("k"), FlowJson::new())
        .name("plain")
        .start(&sentinel)
        .await
        .expect("starts");
    assert_eq!(plain.status().health_check, None);
    let checked = DataSource::builder(Checked(store.source("k")), FlowJson::new())
        .name("checked")
        .start(&sentinel)
        .await
        .expect("starts");
    let check = checked.status().health_check.expect("a health check");
    assert_eq!(check.detection, Duration::from_secs(3));
    assert_eq!(check.check, "a ping every 1s, answered within 2s");
    plain.close().await;
    checked.close().await;
}
