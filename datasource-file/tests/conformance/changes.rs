//! How tools change the file (an editor's rename, an in-place write, a ConfigMap's symlink
//! swap), and how deleting it is seen.

use super::*;

#[tokio::test]
async fn editor_rename_is_applied() {
    let (_dir, path) = temp_rules();
    fs::write(&path, flow_payload(1)).expect("write");
    let engine = Engine::new();
    let source = engine.start(flow(&path)).await;
    assert_eq!(engine.seq(), Some(1));

    save_atomically(&path, &flow_payload(2));
    engine.wait_seq(Some(2)).await;
    let status = wait_status(&source, "two applies", |s| s.applied_count == 2).await;
    assert_eq!(status.rejected_count, 0, "{status:?}");
    assert!(
        status.connected && status.last_error.is_none(),
        "{status:?}"
    );
    assert_eq!(engine.seqs(), vec![Some(1), Some(2)]);
    source.close().await;
}

#[tokio::test]
async fn in_place_write_rejects_the_partial_file_then_applies_the_complete_one() {
    let (_dir, path) = temp_rules();
    fs::write(&path, flow_payload(1)).expect("write");
    let engine = Engine::new();
    let source = engine.start(flow(&path)).await;

    // Truncate and write half, as a writer that is slow or was preempted mid-write.
    let complete = flow_payload(2);
    let (head, tail) = complete.split_at(complete.len() / 2);
    let mut file = fs::File::create(&path).expect("truncate");
    file.write_all(head).expect("first half");
    file.flush().expect("flush");

    let status = wait_status(&source, "partial file rejected", |s| s.rejected_count >= 1).await;
    let error = status.last_error.clone().unwrap_or_default();
    assert!(
        error.contains("line"),
        "the error names a position: {error}"
    );
    assert_eq!(status.applied_count, 1, "{status:?}");
    assert_eq!(engine.seq(), Some(1), "the old rules stay active");

    file.write_all(tail).expect("second half");
    drop(file);
    engine.wait_seq(Some(2)).await;
    let status = wait_status(&source, "error cleared", |s| s.last_error.is_none()).await;
    assert_eq!(status.applied_count, 2, "{status:?}");
    assert_eq!(engine.seqs(), vec![Some(1), Some(2)]);
    assert!(engine.recorder.rejections() >= 1);
    source.close().await;
}

#[cfg(unix)]
#[tokio::test]
async fn configmap_symlink_swap_is_applied() {
    use std::os::unix::fs::symlink;

    /// A version directory as kubelet writes it.
    fn version(root: &Path, name: &str, seq: u64) {
        fs::create_dir(root.join(name)).expect("version dir");
        fs::write(root.join(name).join("rules.json"), flow_payload(seq)).expect("write");
    }

    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    version(root, "..2024_05_01_10_00_00.1", 1);
    symlink("..2024_05_01_10_00_00.1", root.join("..data")).expect("..data");
    symlink("..data/rules.json", root.join("rules.json")).expect("rules.json");
    let engine = Engine::new();
    let source = engine.start(flow(&root.join("rules.json"))).await;
    assert_eq!(engine.seq(), Some(1));

    // kubelet's update: a new version dir, a new link renamed over ..data, the old dir removed.
    version(root, "..2024_05_01_10_01_00.2", 2);
    symlink("..2024_05_01_10_01_00.2", root.join("..data_tmp")).expect("..data_tmp");
    fs::rename(root.join("..data_tmp"), root.join("..data")).expect("swap ..data");
    fs::remove_dir_all(root.join("..2024_05_01_10_00_00.1")).expect("remove the old version");

    engine.wait_seq(Some(2)).await;
    assert_eq!(engine.seqs(), vec![Some(1), Some(2)]);
    assert_eq!(source.status().rejected_count, 0);
    source.close().await;
}

// ---------------------------------------------------------------------------------------------
// Deletion

#[tokio::test]
async fn delete_clears_only_after_the_settle_delay() {
    let (_dir, path) = temp_rules();
    fs::write(&path, flow_payload(1)).expect("write");
    let engine = Engine::new();
    let source = engine.start(flow(&path)).await;

    let deleted = Instant::now();
    remove(&path);
    engine.wait_seq(None).await;
    let waited = deleted.elapsed();
    assert!(
        waited >= DEFAULT_DELETE_SETTLE,
        "cleared {waited:?} after the delete, before the {DEFAULT_DELETE_SETTLE:?} settle delay"
    );
    assert_eq!(engine.seqs(), vec![Some(1), None]);
    let status = wait_status(&source, "clear applied", |s| s.applied_count == 2).await;
    assert_eq!(status.kept_count, 0, "{status:?}");
    source.close().await;
}

#[tokio::test]
async fn delete_with_keep_policy_keeps_the_rules() {
    let (_dir, path) = temp_rules();
    fs::write(&path, flow_payload(1)).expect("write");
    let engine = Engine::new();
    let source = engine
        .start(flow(&path).delete_policy(DeletePolicy::Keep))
        .await;

    let deleted = Instant::now();
    remove(&path);
    let status = wait_status(&source, "deletion kept", |s| s.kept_count == 1).await;
    assert!(deleted.elapsed() >= DEFAULT_DELETE_SETTLE);
    assert_eq!(status.applied_count, 1, "{status:?}");
    assert_eq!(engine.seq(), Some(1), "Keep keeps the rules");

    fs::write(&path, flow_payload(2)).expect("re-create");
    engine.wait_seq(Some(2)).await;
    assert_eq!(engine.seqs(), vec![Some(1), Some(2)]);
    source.close().await;
}

#[tokio::test]
async fn delete_and_quick_recreate_never_clears() {
    // A settle delay long enough that this test's own pause between delete and re-create can
    // not exceed it on a loaded machine.
    let settle = Duration::from_secs(1);
    let (_dir, path) = temp_rules();
    fs::write(&path, flow_payload(1)).expect("write");
    let engine = Engine::new();
    let file = FileSource::builder(&path)
        .delete_settle(settle)
        .build()
        .expect("valid settings");
    let source = engine
        .start(DataSource::builder(file, FlowJson::new()))
        .await;

    // Delete, then re-create with new content (`rm rules.json && cp new.json rules.json`).
    let deleted = Instant::now();
    remove(&path);
    fs::write(&path, flow_payload(2)).expect("re-create");
    assert!(deleted.elapsed() < settle, "the test itself was too slow");
    engine.wait_seq(Some(2)).await;

    // Delete, then re-create with the same content: nothing to apply at all.
    let deleted = Instant::now();
    remove(&path);
    fs::write(&path, flow_payload(2)).expect("re-create");
    assert!(deleted.elapsed() < settle, "the test itself was too slow");
    let window = (deleted + settle + Duration::from_millis(500)) - Instant::now();
    assert_no_apply_for(&source, window).await;

    assert_eq!(engine.seqs(), vec![Some(1), Some(2)], "never cleared");
    let status = source.status();
    assert_eq!(
        (status.applied_count, status.kept_count),
        (2, 0),
        "{status:?}"
    );
    source.close().await;
}

#[tokio::test]
async fn recreate_after_delete_is_applied() {
    let (_dir, path) = temp_rules();
    fs::write(&path, flow_payload(1)).expect("write");
    let engine = Engine::new();
    let source = engine.start(flow(&path)).await;

    remove(&path);
    engine.wait_seq(None).await;
    save_atomically(&path, &flow_payload(2));
    engine.wait_seq(Some(2)).await;
    assert_eq!(engine.seqs(), vec![Some(1), None, Some(2)]);
    source.close().await;
}
