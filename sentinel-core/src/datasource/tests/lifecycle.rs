//! A source's life: the default start on a rejected payload, fail-fast and snapshot starts, the local snapshot's failures, a name held
//! by one running source, the handle dropped, a panicking backend, the health check in the
//! status, and what the conformance kit skips.

use super::*;

/// The default start: a rejected stored payload starts the source (no snapshot here: with
/// no rules), says so, and applies the fix; an unreachable store fails the start.
#[tokio::test]
async fn a_rejected_first_payload_starts_the_source_by_default() {
    let store = MemoryStore::new();
    store.put("k", "not json");
    let sentinel = Sentinel::new();
    let recorder = testkit::EventRecorder::attach(&sentinel, "memory key k");
    let source = DataSource::builder(store.source("k"), FlowJson::new())
        .without_snapshot()
        .start(&sentinel)
        .await
        .expect("a rejected payload does not fail the default start");
    assert_eq!(applied_seq::<FlowRule>(&sentinel), None);
    let status = source.status();
    assert!(
        status.connected
            && status.store_rejected
            && status.rejected_count == 1
            && !status.from_snapshot
            && status.snapshot_file.is_none()
            && status
                .last_error
                .as_deref()
                .is_some_and(|e| e.contains("line")),
        "{status:?}"
    );
    assert_eq!(recorder.rejections(), 1);
    store.put("k", flow_payload(2));
    let status = wait_status(&source, "the fix applied", |s| s.applied_count == 1).await;
    assert!(
        !status.store_rejected && status.last_error.is_none(),
        "{status:?}"
    );
    assert_eq!(applied_seq::<FlowRule>(&sentinel), Some(2));
    source.close().await;

    store.set_down(true);
    let err = DataSource::builder(store.source("k"), FlowJson::new())
        .start(&sentinel)
        .await
        .err();
    assert!(
        matches!(err, Some(DataSourceError::Source { .. })),
        "{err:?}"
    );
}

/// `FailFast`, chosen explicitly, returns the rejection (and an unreachable store).
#[tokio::test]
async fn fail_fast_and_bad_first_payload() {
    let store = MemoryStore::new();
    store.put("k", "not json");
    let sentinel = Sentinel::new();
    let err = DataSource::builder(store.source("k"), FlowJson::new())
        .start_mode(StartMode::FailFast)
        .start(&sentinel)
        .await
        .err();
    assert!(
        matches!(err, Some(DataSourceError::Rejected { .. })),
        "{err:?}"
    );

    store.set_down(true);
    let err = DataSource::builder(store.source("k"), FlowJson::new())
        .start_mode(StartMode::FailFast)
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
        .without_snapshot()
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

/// With no snapshot named, one is kept in the default place, per source and store: a new
/// instance whose stored payload is rejected starts from it.
#[tokio::test]
async fn a_new_instance_starts_from_the_snapshot_kept_by_default() {
    let store = MemoryStore::new();
    store.put("k", flow_payload(1));
    // A name of its own: the default file is shared with nothing else.
    let name = format!("default-snapshot-{:016x}", rand::random::<u64>());
    let first = Sentinel::new();
    let source = DataSource::builder(store.source("k"), FlowJson::new())
        .name(&name)
        .start(&first)
        .await
        .expect("starts");
    let path = source
        .status()
        .snapshot_file
        .expect("a snapshot by default");
    assert!(path.starts_with(default_snapshot_dir()), "{path:?}");
    source.close().await;
    assert!(path.exists(), "{path:?}");

    store.put("k", "[{");
    let second = Sentinel::new();
    let source = DataSource::builder(store.source("k"), FlowJson::new())
        .name(&name)
        .start(&second)
        .await
        .expect("starts from the snapshot");
    assert_eq!(applied_seq::<FlowRule>(&second), Some(1));
    let status = source.status();
    assert!(
        status.from_snapshot && status.store_rejected && status.connected,
        "{status:?}"
    );
    store.put("k", flow_payload(2));
    wait_status(&source, "the fix applied", |s| !s.store_rejected).await;
    assert_eq!(applied_seq::<FlowRule>(&second), Some(2));
    source.close().await;
    let _ = std::fs::remove_file(&path);
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
    assert!(summary.starts_with("8 passed, 3 skipped: "), "{summary}");
    for check in ["initial_load", "disconnect", "snapshot"] {
        assert!(summary.contains(check), "{summary}");
    }
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
