//! The generic driver: one loop, for every backend, that loads, converts, validates,
//! deduplicates, applies, reports and reconnects.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::converter::Converter;
use super::source::{ReadableDataSource, DEFAULT_MAX_PAYLOAD_BYTES};
use super::status::SourceStatus;
use crate::engine::Sentinel;
use crate::rule_set::RuleSet;
use crate::rules::Validation;

mod backoff;
mod confirm;
mod entries;
mod error;
mod hash;
mod local_snapshot;
mod options;
mod task;

use backoff::Backoff;
pub use error::DataSourceError;
pub use local_snapshot::{default_snapshot_dir, SNAPSHOT_DIR_ENV};
pub use options::{DeletePolicy, StartMode};
use task::Driver;
/// A converter the driver shares with its task.
type SharedConverter = Arc<dyn Converter<[u8], RuleSet>>;

const DEFAULT_BACKOFF_INITIAL: Duration = Duration::from_millis(100);
const DEFAULT_BACKOFF_MAX: Duration = Duration::from_secs(30);
/// The default [`DataSourceBuilder::confirm_after_reconnect`].
const DEFAULT_CONFIRM_AFTER_RECONNECT: Duration = Duration::from_secs(2);

/// Configures a [`DataSource`]. Obtained from [`DataSource::builder`].
pub struct DataSourceBuilder {
    backend: Box<dyn ReadableDataSource>,
    converter: SharedConverter,
    keyed: Vec<(String, SharedConverter)>,
    name: Option<String>,
    delete_policy: DeletePolicy,
    validation: Validation,
    start_mode: StartMode,
    snapshot: SnapshotChoice,
    max_payload_bytes: usize,
    backoff: (Duration, Duration),
    confirm_after_reconnect: Duration,
}

impl fmt::Debug for DataSourceBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DataSourceBuilder")
            .field("backend", &self.backend.describe())
            .field("name", &self.name)
            .field(
                "keyed_converters",
                &self.keyed.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .field("delete_policy", &self.delete_policy)
            .field("validation", &self.validation)
            .field("start_mode", &self.start_mode)
            .field("snapshot", &self.snapshot)
            .field("max_payload_bytes", &self.max_payload_bytes)
            .field("backoff", &self.backoff)
            .field("confirm_after_reconnect", &self.confirm_after_reconnect)
            .finish_non_exhaustive()
    }
}

impl DataSourceBuilder {
    /// The source name: its key in the engine's union of sources, and the name in status,
    /// events and errors. Defaults to the backend's [`describe`](ReadableDataSource::describe).
    /// Two running sources of one engine cannot share a name: `start` returns
    /// [`DataSourceError::DuplicateName`] for the second until the first is closed.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Converts the entry stored under `key` with `converter` rather than the source's
    /// converter, for a source whose keys hold different formats: several Nacos dataIds of
    /// one app, say, `{app}-flow-rules` and `{app}-degrade-rules`, each a list of its own
    /// family, applied together as one update. The key is the entry's
    /// [`RawEntry::key`](super::RawEntry::key) as the backend names it.
    pub fn converter_for(
        mut self,
        key: impl Into<String>,
        converter: impl Converter<[u8], RuleSet> + 'static,
    ) -> Self {
        let key = key.into();
        self.keyed.retain(|(k, _)| *k != key);
        self.keyed.push((key, Arc::new(converter)));
        self
    }

    /// What a deleted key or an empty payload does ([`DeletePolicy::Clear`] by default).
    pub fn delete_policy(mut self, policy: DeletePolicy) -> Self {
        self.delete_policy = policy;
        self
    }

    /// Strict (the default: one invalid rule rejects the payload) or lenient (invalid rules
    /// are skipped and listed in [`SourceStatus::skipped`]).
    pub fn validation(mut self, validation: Validation) -> Self {
        self.validation = validation;
        self
    }

    /// What to do when the first read fails or its payload is rejected
    /// ([`StartMode::FailIfUnreachable`] by default: only an unreachable store fails the
    /// start; a rejected payload starts from the local snapshot or with no rules).
    pub fn start_mode(mut self, mode: StartMode) -> Self {
        self.start_mode = mode;
        self
    }

    /// Keeps the local snapshot at `path` rather than in the default place.
    ///
    /// After each successful apply, the applied rules are written atomically (a temporary
    /// file, fsync, rename; about 3 ms on a 2-core VM's disk) as a combined document; a start
    /// whose stored payload is rejected (and, with [`StartMode::Snapshot`], one whose store
    /// cannot be read) applies it back. Missing folders are created. By default the file is
    /// in [`default_snapshot_dir`] (`$SENTINEL_SNAPSHOT_DIR`, else
    /// `$HOME/.sentinel/snapshots`), named after the source's name and what it reads;
    /// [`SourceStatus::snapshot_file`] says where. Name a path on a volume that outlives the
    /// instance (a Kubernetes pod's own filesystem does not) for a new instance to find it.
    pub fn snapshot_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.snapshot = SnapshotChoice::File(path.into());
        self
    }

    /// Keeps no local snapshot: nothing is written, and a start that would apply one
    /// starts with no rules from this source.
    pub fn without_snapshot(mut self) -> Self {
        self.snapshot = SnapshotChoice::Off;
        self
    }

    /// The largest payload accepted, over all entries (4 MiB by default). A larger one is
    /// rejected with [`SourceError::TooLarge`](super::SourceError::TooLarge) and the rules stay.
    pub fn max_payload_bytes(mut self, limit: usize) -> Self {
        self.max_payload_bytes = limit;
        self
    }

    /// Reconnect backoff: the first delay and the cap (100 ms and 30 s by default). Each
    /// failed attempt doubles the delay; each delay is jittered down by up to half.
    pub fn backoff(mut self, initial: Duration, max: Duration) -> Self {
        let initial = initial.max(Duration::from_millis(1));
        self.backoff = (initial, max.max(initial));
        self
    }

    /// How long after a reconnect a change must still be stored to be applied (2 s by
    /// default; `Duration::ZERO` applies what a reconnect reads at once).
    ///
    /// A store that restarts may answer before it has loaded its data: rnacos, while it
    /// replays its log, answers a config it holds with 404 and then with each older value in
    /// turn. A payload that would change the rules in force (a deletion above all) read
    /// within this time of a reconnect is therefore not applied at once: the source reads
    /// again when this time since the reconnect is over, and processes what that read finds.
    /// A store that only restarted never drops the rules or brings old ones back; a change
    /// really made during an outage applies this much later. Raise it for a store that takes
    /// longer to load its data. [`SourceStatus::unconfirmed_changes`] counts the changes a
    /// second read withdrew. The first read of [`start`](Self::start) is not a reconnect.
    pub fn confirm_after_reconnect(mut self, time: Duration) -> Self {
        self.confirm_after_reconnect = time;
        self
    }

    /// Reads and applies the current value, then watches for changes in one background
    /// task.
    ///
    /// The initial value is applied before this returns. A payload the store holds that is
    /// rejected fails the start only with [`StartMode::FailFast`]; otherwise the source
    /// starts from the local snapshot (or with no rules from it) and applies the fix when it
    /// is stored. A store that cannot be read fails the start, except with
    /// [`StartMode::Snapshot`], which starts from the local snapshot and keeps retrying.
    pub async fn start(self, sentinel: &Sentinel) -> Result<DataSource, DataSourceError> {
        let name = self.name.unwrap_or_else(|| self.backend.describe());
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(DataSourceError::NoRuntime { name });
        }
        let Some(claim) = sentinel.claim_source_name(&name) else {
            return Err(DataSourceError::DuplicateName { name });
        };
        let snapshot_file = match self.snapshot {
            SnapshotChoice::Default => Some(local_snapshot::snapshot_path_in(
                &default_snapshot_dir(),
                &name,
                &self.backend.describe(),
            )),
            SnapshotChoice::File(path) => Some(path),
            SnapshotChoice::Off => None,
        };
        let mut status = SourceStatus::new(name.clone());
        status.health_check = self.backend.health_check();
        status.snapshot_file.clone_from(&snapshot_file);
        let (status_tx, status_rx) = watch::channel(status);
        let mut driver = Driver {
            _claim: claim,
            name: name.clone(),
            backend: self.backend,
            converter: self.converter,
            keyed: self.keyed,
            sentinel: sentinel.clone(),
            delete_policy: self.delete_policy,
            validation: self.validation,
            snapshot_file,
            max_payload_bytes: self.max_payload_bytes,
            last_hash: None,
            status: status_tx,
            confirm_after_reconnect: self.confirm_after_reconnect,
            reconnected_at: None,
            started: false,
            backend_reconnects: 0,
        };
        let need_read = driver.initial_load(self.start_mode).await?;
        let (stop_tx, stop_rx) = watch::channel(false);
        let backoff = Backoff::new(self.backoff.0, self.backoff.1);
        let task = tokio::spawn(driver.run(stop_rx, backoff, need_read));
        // Ends with the driver task, when the status sender goes.
        #[cfg(feature = "metrics")]
        tokio::spawn(crate::datasource::status::report_source(status_rx.clone()));
        Ok(DataSource {
            name,
            status: status_rx,
            stop: stop_tx,
            task: Some(task),
        })
    }
}

/// Where a source keeps its local snapshot.
#[derive(Debug, Clone)]
enum SnapshotChoice {
    /// In [`default_snapshot_dir`], named after the source.
    Default,
    /// In the file the user named.
    File(PathBuf),
    /// Nowhere.
    Off,
}

/// A running data source: it keeps one backend's stored rules applied to a [`Sentinel`].
///
/// Built with [`DataSource::builder`]. One background task watches the backend. Updates are
/// applied in the order the backend reports them; an identical payload is not applied again;
/// a bad payload is rejected whole and the last good rules stay; a deleted key clears this
/// source's rules (or keeps them, see [`DeletePolicy`]); an error marks the source
/// disconnected, and it backs off, re-reads and watches again.
///
/// A source **owns** every family it has applied. Each new payload replaces all the families
/// it owns, so a family missing from a combined document is cleared for this source. Rules of
/// other sources are untouched: the engine unions the sources of each family. A payload of
/// several entries (a prefix) is converted entry by entry, merged and applied in one step.
///
/// [`close`](Self::close) stops the task and closes the backend; dropping the handle stops
/// the task too. Applying runs on the task, so a very large payload holds its worker thread
/// while it is converted and compiled.
///
/// ```
/// use sentinel_core::datasource::{DataSource, FlowJson, MemoryStore};
/// use sentinel_core::Sentinel;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let store = MemoryStore::new();
/// store.put("flow", r#"[{"resource": "GET:/order", "count": 5}]"#);
/// let sentinel = Sentinel::new();
/// let source = DataSource::builder(store.source("flow"), FlowJson::new())
///     .start(&sentinel)
///     .await
///     .expect("started");
/// assert_eq!(sentinel.flow_rules().rules().len(), 1);
/// assert_eq!(source.status().applied_count, 1);
/// source.close().await;
/// # }
/// ```
pub struct DataSource {
    name: String,
    status: watch::Receiver<SourceStatus>,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl fmt::Debug for DataSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DataSource")
            .field("name", &self.name)
            .field("status", &*self.status.borrow())
            .finish_non_exhaustive()
    }
}

impl DataSource {
    /// Starts configuring a data source over `backend`, converting its payloads with
    /// `converter`.
    pub fn builder(
        backend: impl ReadableDataSource,
        converter: impl Converter<[u8], RuleSet> + 'static,
    ) -> DataSourceBuilder {
        DataSourceBuilder {
            backend: Box::new(backend),
            converter: Arc::new(converter),
            keyed: Vec::new(),
            name: None,
            delete_policy: DeletePolicy::default(),
            validation: Validation::default(),
            start_mode: StartMode::default(),
            snapshot: SnapshotChoice::Default,
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
            backoff: (DEFAULT_BACKOFF_INITIAL, DEFAULT_BACKOFF_MAX),
            confirm_after_reconnect: DEFAULT_CONFIRM_AFTER_RECONNECT,
        }
    }

    /// The source's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The source's current status.
    pub fn status(&self) -> SourceStatus {
        self.status.borrow().clone()
    }

    /// A receiver that sees every status change, to wait for a condition:
    /// `rx.wait_for(|s| s.applied_count >= 2)`.
    pub fn status_watch(&self) -> watch::Receiver<SourceStatus> {
        self.status.clone()
    }

    /// Stops watching, closes the backend, and waits for the task to end. Nothing is applied
    /// after this returns. If the task panicked (a bug in a backend or a converter), `close`
    /// resumes that panic in the caller, so it is not lost.
    pub async fn close(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            if let Err(error) = task.await {
                if error.is_panic() {
                    std::panic::resume_unwind(error.into_panic());
                }
                tracing::warn!(source = %self.name, %error, "data source task ended abnormally");
            }
        }
    }
}

impl Drop for DataSource {
    fn drop(&mut self) {
        // The task sees the signal at its next await and closes the backend itself.
        let _ = self.stop.send(true);
    }
}
