//! The data-source contract (DESIGN §4) for the file source, through the generic driver: the
//! shared conformance kit, then the ways real tools change a rules file.
//!
//! Every wait is bounded: by a status condition or an applied sequence, with a timeout that is
//! generous for a loaded 2-core machine.

use std::collections::BTreeSet;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sentinel_core::circuit_breaker::DegradeRule;
use sentinel_core::datasource::testkit::{
    applied_seq, check_ordered_updates, expect_all_conformance, expect_round_trip, flow_payload,
    wait_status, wait_until, ConformanceHarness, EventRecorder, Unsupported, CONFORMANCE_RESOURCE,
    WAIT,
};
use sentinel_core::datasource::{
    CombinedJson, DataSource, DataSourceBuilder, DeletePolicy, FlowJson, ReadableDataSource,
    WritableDataSource,
};
use sentinel_core::flow::FlowRule;
use sentinel_core::{RuleFamily, RuleSet, Sentinel};
use sentinel_datasource_file::{FileRuleWriter, FileSource, DEFAULT_DELETE_SETTLE};
use tokio::time::{timeout, Instant};

/// The name of every data source these tests start.
const SOURCE: &str = "rules-file";

/// An editor's save: write the whole content to a temporary file next to the rules file, then
/// rename it over the rules file, so a reader sees either the old or the new content.
fn save_atomically(path: &Path, bytes: &[u8]) {
    let name = path.file_name().expect("a file name").to_string_lossy();
    let temp = path.with_file_name(format!(".{name}.swp"));
    let mut file = fs::File::create(&temp).expect("create the temporary file");
    file.write_all(bytes).expect("write the temporary file");
    drop(file);
    fs::rename(&temp, path).expect("rename over the rules file");
}

fn remove(path: &Path) {
    match fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => panic!("cannot remove {}: {e}", path.display()),
    }
}

fn temp_rules() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("rules.json");
    (dir, path)
}

// ---------------------------------------------------------------------------------------------
// The conformance kit

/// The kit's harness over one rules file in a temporary directory.
///
/// `write` saves like an editor (temporary file + rename), `delete` removes the file. A file
/// has no server to stop; its stand-in is a path that cannot be read: `stop_server` moves the
/// file aside and puts a directory in its place, so every read fails, and `start_server` puts
/// the file back.
struct FileHarness {
    _dir: tempfile::TempDir,
    path: PathBuf,
    stash: PathBuf,
}

impl FileHarness {
    fn new() -> Self {
        let (dir, path) = temp_rules();
        let stash = dir.path().join("rules.json.stopped");
        Self {
            _dir: dir,
            path,
            stash,
        }
    }
}

#[async_trait]
impl ConformanceHarness for FileHarness {
    type Source = FileSource;

    fn make_source(&self) -> FileSource {
        FileSource::new(&self.path).expect("valid settings")
    }

    async fn write(&self, bytes: &[u8]) {
        save_atomically(&self.path, bytes);
    }

    async fn delete(&self) {
        remove(&self.path);
    }

    async fn stop_server(&self) -> Result<(), Unsupported> {
        if self.path.exists() {
            fs::rename(&self.path, &self.stash).expect("move the file aside");
        }
        fs::create_dir(&self.path).expect("a directory in place of the file");
        Ok(())
    }

    async fn start_server(&self) -> Result<(), Unsupported> {
        fs::remove_dir(&self.path).expect("remove the directory");
        if self.stash.exists() {
            fs::rename(&self.stash, &self.path).expect("put the file back");
        }
        Ok(())
    }

    /// The file put back by `start_server` gets `bytes`.
    async fn write_while_down(&self, bytes: &[u8]) -> Result<(), Unsupported> {
        fs::write(&self.stash, bytes).expect("write the file aside");
        Ok(())
    }

    fn timeout(&self) -> Duration {
        WAIT
    }
}

#[tokio::test]
async fn conformance_kit_passes() {
    let harness = FileHarness::new();
    expect_all_conformance(&harness).await;
}

#[tokio::test]
async fn conformance_hundred_rapid_saves_apply_in_order() {
    let harness = FileHarness::new();
    check_ordered_updates(&harness, 100)
        .await
        .unwrap_or_else(|failure| panic!("{failure}"));
}

// ---------------------------------------------------------------------------------------------
// An engine that records what each apply left active

/// The degrade rules in combined documents carry their sequence on the conformance resource.
fn degrade_seq(sentinel: &Sentinel) -> Option<u64> {
    applied_seq::<DegradeRule>(sentinel)
}

/// A Sentinel with a recorder of every apply and rejection of [`SOURCE`].
struct Engine {
    sentinel: Sentinel,
    recorder: EventRecorder,
}

impl Engine {
    fn new() -> Self {
        let sentinel = Sentinel::new();
        let recorder = EventRecorder::attach(&sentinel, SOURCE);
        Self { sentinel, recorder }
    }

    /// The flow sequence after each apply, in order.
    fn seqs(&self) -> Vec<Option<u64>> {
        self.recorder.seqs::<FlowRule>()
    }

    fn seq(&self) -> Option<u64> {
        applied_seq::<FlowRule>(&self.sentinel)
    }

    async fn start(&self, builder: DataSourceBuilder) -> DataSource {
        builder
            .name(SOURCE)
            .start(&self.sentinel)
            .await
            .expect("the data source starts")
    }

    /// Waits until the flow sequence `seq` is active.
    async fn wait_seq(&self, seq: Option<u64>) {
        let what = format!("flow sequence {seq:?} (applies so far {:?})", self.seqs());
        wait_until(&what, || self.seq() == seq).await;
    }
}

fn flow(path: &Path) -> DataSourceBuilder {
    DataSource::builder(
        FileSource::new(path).expect("valid settings"),
        FlowJson::new(),
    )
}

/// Asserts that for `window` the source applies, keeps and rejects nothing.
async fn assert_no_apply_for(source: &DataSource, window: Duration) {
    let before = source.status();
    let mut rx = source.status_watch();
    let changed = timeout(
        window,
        rx.wait_for(|s| {
            s.applied_count != before.applied_count
                || s.kept_count != before.kept_count
                || s.rejected_count != before.rejected_count
        }),
    )
    .await;
    if let Ok(status) = changed {
        panic!(
            "expected nothing for {window:?}, status became {:?}",
            status.map(|s| s.clone())
        );
    }
}

// ---------------------------------------------------------------------------------------------
// How tools change the file

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

// ---------------------------------------------------------------------------------------------
// Ordering and atomicity

#[tokio::test]
async fn hundred_rapid_in_place_writes_end_on_the_last_and_never_go_back() {
    let (_dir, path) = temp_rules();
    fs::write(&path, flow_payload(0)).expect("write");
    let engine = Engine::new();
    let source = engine.start(flow(&path)).await;

    // Truncate-and-write each time: the source may read half-written files, which the driver
    // rejects; what it applies must still only move forward. A pause longer than the debounce
    // after every tenth write lets intermediate states through, so there is an order to check.
    for seq in 1..=100 {
        fs::write(&path, flow_payload(seq)).expect("write");
        if seq % 10 == 0 {
            tokio::time::sleep(Duration::from_millis(80)).await;
        }
    }
    engine.wait_seq(Some(100)).await;

    let seqs = engine.seqs();
    assert!(
        seqs.iter().all(Option::is_some),
        "a save is never a deletion: {seqs:?}"
    );
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "an older state applied after a newer one: {seqs:?}"
    );
    assert_eq!(seqs.last(), Some(&Some(100)));
    let status = wait_status(&source, "final state, no error", |s| s.last_error.is_none()).await;
    assert_eq!(status.applied_count as usize, seqs.len(), "{status:?}");
    eprintln!(
        "100 in-place writes: {} applies, {} partial reads rejected",
        seqs.len(),
        status.rejected_count
    );
    source.close().await;
}

/// A combined document whose flow and degrade rules both carry `seq`.
fn combined(seq: u64) -> Vec<u8> {
    format!(
        r#"{{"flow":[{{"resource":"{CONFORMANCE_RESOURCE}","count":{seq},"grade":1}}],
"degrade":[{{"resource":"{CONFORMANCE_RESOURCE}","grade":2,"count":{seq},"timeWindow":1}}]}}"#
    )
    .into_bytes()
}

/// What a reader thread saw of the two families while the documents changed.
#[derive(Debug, Default)]
struct ReaderLog {
    /// Reads of both families within one rule-table version.
    consistent: u64,
    /// Such reads whose flow and degrade sequences differed.
    torn: Vec<(u64, Option<u64>, Option<u64>)>,
    versions: BTreeSet<u64>,
}

#[tokio::test]
async fn combined_document_updates_flow_and_degrade_at_once() {
    const DOCUMENTS: u64 = 20;
    let (_dir, path) = temp_rules();
    fs::write(&path, combined(1)).expect("write");
    let engine = Engine::new();
    let file = FileSource::new(&path).expect("valid settings");
    let source = engine
        .start(DataSource::builder(file, CombinedJson::new()))
        .await;
    assert_eq!(
        (engine.seq(), degrade_seq(&engine.sentinel)),
        (Some(1), Some(1))
    );

    // The two families are two loads, but every apply stores one table with a new version.
    // A pair of reads between two equal version reads therefore saw one table, and must see
    // one document: flow and degrade from the same sequence.
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (sentinel, stop) = (engine.sentinel.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut log = ReaderLog::default();
            while !stop.load(Ordering::Relaxed) {
                let before = sentinel.rules_version();
                let flow = applied_seq::<FlowRule>(&sentinel);
                let degrade = degrade_seq(&sentinel);
                if sentinel.rules_version() == before {
                    log.consistent += 1;
                    log.versions.insert(before);
                    if flow != degrade {
                        log.torn.push((before, flow, degrade));
                    }
                }
                std::thread::yield_now();
            }
            log
        })
    };

    let start_version = engine.sentinel.rules_version();
    for seq in 2..=DOCUMENTS {
        save_atomically(&path, &combined(seq));
        engine.wait_seq(Some(seq)).await;
    }
    stop.store(true, Ordering::Relaxed);
    let log = reader.join().expect("the reader thread");

    assert!(log.torn.is_empty(), "torn reads: {:?}", log.torn);
    assert!(
        log.consistent > 0 && log.versions.len() >= 2,
        "the reader saw too little: {log:?}"
    );

    // One apply, one version, both families, per document.
    let applied = engine.recorder.applied();
    assert_eq!(applied.len() as u64, DOCUMENTS, "{applied:?}");
    for (i, apply) in applied.iter().enumerate() {
        let seq = i as u64 + 1;
        assert_eq!(
            (apply.seq::<FlowRule>(), apply.seq::<DegradeRule>()),
            (Some(seq), Some(seq)),
            "{apply:?}"
        );
        assert!(
            apply.families.contains(&RuleFamily::Flow)
                && apply.families.contains(&RuleFamily::Degrade),
            "one event replaces both families: {apply:?}"
        );
    }
    for pair in applied.windows(2) {
        assert_eq!(
            pair[1].version,
            pair[0].version + 1,
            "one bump per document"
        );
    }
    let end_version = engine.sentinel.rules_version();
    assert_eq!(end_version - start_version, DOCUMENTS - 1);

    assert_eq!(
        engine.sentinel.degrade_rules().rules(),
        vec![DegradeRule::error_count(
            CONFORMANCE_RESOURCE,
            DOCUMENTS as f64,
            1
        )]
    );
    let status = source.status();
    assert_eq!(status.applied_count, DOCUMENTS, "{status:?}");
    assert_eq!(status.rules_version, Some(end_version));
    assert_eq!(status.families, vec![RuleFamily::Flow, RuleFamily::Degrade]);
    source.close().await;
}

// ---------------------------------------------------------------------------------------------
// Polling and limits

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
