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

mod changes;
mod limits;
mod ordering;

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
