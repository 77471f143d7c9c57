//! Polling and limits: polling mode, the size caps, a removed directory, and the writer.

use super::*;

#[tokio::test]
async fn polling_mode_end_to_end() {
    let (_dir, path) = temp_rules();
    fs::write(&path, flow_payload(1)).expect("write");
    let engine = Engine::new();
    let file = FileSource::builder(&path)
        .poll(Duration::from_millis(50))
        .build()
        .expect("valid settings");
    assert!(
        file.describe().contains("polled every"),
        "{}",
        file.describe()
    );
    let source = engine
        .start(DataSource::builder(file, FlowJson::new()))
        .await;
    assert_eq!(engine.seq(), Some(1));

    fs::write(&path, flow_payload(2)).expect("in-place write");
    engine.wait_seq(Some(2)).await;
    save_atomically(&path, &flow_payload(3));
    engine.wait_seq(Some(3)).await;
    let deleted = Instant::now();
    remove(&path);
    engine.wait_seq(None).await;
    assert!(deleted.elapsed() >= DEFAULT_DELETE_SETTLE);
    fs::write(&path, flow_payload(4)).expect("re-create");
    engine.wait_seq(Some(4)).await;

    let seqs = engine.seqs();
    assert!(
        seqs.windows(2).all(|w| w[0] != w[1]),
        "an unchanged poll re-applied: {seqs:?}"
    );
    assert_eq!(seqs.iter().filter(|s| s.is_none()).count(), 1, "{seqs:?}");
    assert_eq!(seqs.last(), Some(&Some(4)));
    source.close().await;
}

/// A valid flow payload of more than 300 bytes.
fn big_payload() -> Vec<u8> {
    let rules: Vec<String> = (0..20)
        .map(|i| format!(r#"{{"resource":"big-{i}","count":1}}"#))
        .collect();
    format!("[{}]", rules.join(",")).into_bytes()
}

#[tokio::test]
async fn driver_size_cap_rejects_in_status() {
    let (_dir, path) = temp_rules();
    fs::write(&path, flow_payload(1)).expect("write");
    let engine = Engine::new();
    let source = engine.start(flow(&path).max_payload_bytes(256)).await;

    save_atomically(&path, &big_payload());
    let status = wait_status(&source, "oversized file rejected", |s| {
        s.rejected_count == 1
    })
    .await;
    let error = status.last_error.unwrap_or_default();
    assert!(error.contains("256-byte cap"), "{error}");
    assert_eq!(engine.seq(), Some(1), "the old rules stay");

    save_atomically(&path, &flow_payload(2));
    engine.wait_seq(Some(2)).await;
    let status = wait_status(&source, "error cleared", |s| s.last_error.is_none()).await;
    assert_eq!(status.applied_count, 2, "{status:?}");
    source.close().await;
}

#[tokio::test]
async fn file_size_cap_shows_in_status_and_recovers() {
    let (_dir, path) = temp_rules();
    fs::write(&path, flow_payload(1)).expect("write");
    let engine = Engine::new();
    let file = FileSource::builder(&path)
        .max_payload_bytes(256)
        .build()
        .expect("valid settings");
    let source = engine
        .start(
            DataSource::builder(file, FlowJson::new())
                .backoff(Duration::from_millis(20), Duration::from_millis(200)),
        )
        .await;

    // The source refuses to read the file at all: the driver reports the error and retries.
    save_atomically(&path, &big_payload());
    let status = wait_status(&source, "oversized file refused", |s| {
        s.last_error.as_ref().is_some_and(|e| e.contains("cap"))
    })
    .await;
    let error = status.last_error.unwrap_or_default();
    assert!(error.contains("256-byte cap"), "{error}");
    assert_eq!(engine.seq(), Some(1), "the old rules stay");

    save_atomically(&path, &flow_payload(2));
    engine.wait_seq(Some(2)).await;
    let status = wait_status(&source, "recovered", |s| {
        s.connected && s.last_error.is_none()
    })
    .await;
    assert_eq!(status.applied_count, 2, "{status:?}");
    source.close().await;
}

#[tokio::test]
async fn a_removed_directory_shows_in_status_until_it_is_back() {
    let base = tempfile::tempdir().expect("tempdir");
    let dir = base.path().join("rules");
    fs::create_dir(&dir).expect("mkdir");
    let path = dir.join("rules.json");
    fs::write(&path, flow_payload(1)).expect("write");
    let engine = Engine::new();
    let source = engine.start(flow(&path)).await;
    assert_eq!(engine.seq(), Some(1));

    fs::remove_dir_all(&dir).expect("remove the directory");
    let status = wait_status(&source, "the directory reported missing", |s| {
        !s.connected
            && s.last_error
                .as_deref()
                .is_some_and(|e| e.contains("directory"))
    })
    .await;
    assert!(status.disconnects >= 1, "{status:?}");

    fs::create_dir(&dir).expect("mkdir again");
    fs::write(&path, flow_payload(2)).expect("write again");
    engine.wait_seq(Some(2)).await;
    let status = wait_status(&source, "watching again", |s| {
        s.connected && s.last_error.is_none()
    })
    .await;
    assert!(status.applied_count >= 2, "{status:?}");
    source.close().await;
}

/// Rules written through [`FileRuleWriter`] come back through a [`FileSource`] exactly.
#[tokio::test]
async fn rules_written_through_the_writer_are_applied_exactly() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("rules.json");
    let writer = FileRuleWriter::new(&path);
    // The writer writes first: build the source after.
    writer
        .write(&RuleSet::new().with_flow(vec![]))
        .await
        .expect("an empty flow list");
    let source = FileSource::builder(&path)
        .debounce(Duration::from_millis(20))
        .build()
        .expect("valid settings");
    expect_round_trip(&writer, source, false).await;
}

/// A watcher never reads a partial file from the writer: large payloads written back to
/// back are all read whole (no rejection), and the last one is applied.
#[tokio::test]
async fn a_watcher_never_sees_a_partial_write() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("rules.json");
    let writer = FileRuleWriter::new(&path);
    let set = |n: usize| {
        RuleSet::new().with_flow(
            (0..2_000)
                .map(|i| FlowRule::qps(format!("resource-{i}"), n as f64))
                .collect(),
        )
    };
    writer.write(&set(1)).await.expect("first write");
    let sentinel = Sentinel::new();
    let source = FileSource::builder(&path)
        .debounce(Duration::from_millis(1))
        .build()
        .expect("valid settings");
    let ds = DataSource::builder(source, FlowJson::new())
        .name(SOURCE)
        .start(&sentinel)
        .await
        .expect("starts");
    for n in 2..=40 {
        writer.write(&set(n)).await.expect("write");
    }
    wait_until("the last write applied", || {
        sentinel.flow_rules().rules().first().map(|r| r.count) == Some(40.0)
    })
    .await;
    assert_eq!(ds.status().rejected_count, 0, "{:?}", ds.status());
    assert_eq!(sentinel.flow_rules().rules().len(), 2_000);
    ds.close().await;
}
