//! The generic driver: one loop, for every backend, that loads, converts, validates,
//! deduplicates, applies, reports and reconnects.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rand::Rng;
use sha2::{Digest, Sha256};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::converter::Converter;
use super::snapshot;
use super::source::{RawPayload, ReadableDataSource, SourceError, WatchEvent};
use super::status::SourceStatus;
use crate::engine::{RuleSet, Sentinel, SourceNameClaim};
use crate::rules::{RuleError, RuleFamily, Validation};

/// Default payload size cap: 4 MiB, as Sentinel's file data source.
pub const DEFAULT_MAX_PAYLOAD_BYTES: usize = 4 * 1024 * 1024;
const DEFAULT_BACKOFF_INITIAL: Duration = Duration::from_millis(100);
const DEFAULT_BACKOFF_MAX: Duration = Duration::from_secs(30);

/// What a deleted key, or an empty payload, does to the rules a source applied.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeletePolicy {
    /// Clear them, as Sentinel does. The default.
    #[default]
    Clear,
    /// Keep them until a non-empty payload arrives.
    Keep,
}

/// What [`DataSourceBuilder::start`] does when the first read fails.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StartMode {
    /// Return the error: the caller decides. The default.
    #[default]
    FailFast,
    /// Apply the local snapshot (see [`DataSourceBuilder::snapshot_file`]), start anyway, and
    /// keep retrying in the background. With no snapshot, start with no rules from this
    /// source. A first payload that is rejected is handled the same way.
    Snapshot,
}

/// Why a data source could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DataSourceError {
    /// The backend failed (unreachable, denied, payload too large...).
    #[error("data source {name}: {source}")]
    Source {
        /// The data source.
        name: String,
        /// The backend's error.
        #[source]
        source: SourceError,
    },
    /// The stored payload was not applied.
    #[error("data source {name}: {source}")]
    Rejected {
        /// The data source.
        name: String,
        /// Why the rules were rejected.
        #[source]
        source: RuleError,
    },
    /// `start` was called outside a Tokio runtime.
    #[error("data source {name}: must be started inside a Tokio runtime")]
    NoRuntime {
        /// The data source.
        name: String,
    },
    /// Another running source of this engine has the same name: the two would replace each
    /// other's rules. Give one a distinct [`name`](DataSourceBuilder::name), or close the
    /// other first.
    #[error("data source {name}: another running source of this engine has this name")]
    DuplicateName {
        /// The data source.
        name: String,
    },
}

/// Configures a [`DataSource`]. Obtained from [`DataSource::builder`].
pub struct DataSourceBuilder {
    backend: Box<dyn ReadableDataSource>,
    converter: Arc<dyn Converter<[u8], RuleSet>>,
    name: Option<String>,
    delete_policy: DeletePolicy,
    validation: Validation,
    start_mode: StartMode,
    snapshot_file: Option<PathBuf>,
    max_payload_bytes: usize,
    backoff: (Duration, Duration),
}

impl fmt::Debug for DataSourceBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DataSourceBuilder")
            .field("backend", &self.backend.describe())
            .field("name", &self.name)
            .field("delete_policy", &self.delete_policy)
            .field("validation", &self.validation)
            .field("start_mode", &self.start_mode)
            .field("snapshot_file", &self.snapshot_file)
            .field("max_payload_bytes", &self.max_payload_bytes)
            .field("backoff", &self.backoff)
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

    /// What to do when the first read fails ([`StartMode::FailFast`] by default).
    pub fn start_mode(mut self, mode: StartMode) -> Self {
        self.start_mode = mode;
        self
    }

    /// Keeps a local snapshot: after each successful apply, the applied rules are written
    /// atomically to `path` as a combined document; [`StartMode::Snapshot`] reads it back.
    pub fn snapshot_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.snapshot_file = Some(path.into());
        self
    }

    /// The largest payload accepted, over all entries (4 MiB by default). A larger one is
    /// rejected with [`SourceError::TooLarge`] and the rules stay.
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

    /// Reads and applies the current value, then watches for changes in one background
    /// task.
    ///
    /// The initial value is applied before this returns. If the first read fails, or its
    /// payload is rejected, [`StartMode::FailFast`] returns the error and
    /// [`StartMode::Snapshot`] starts from the local snapshot and keeps retrying.
    pub async fn start(self, sentinel: &Sentinel) -> Result<DataSource, DataSourceError> {
        let name = self.name.unwrap_or_else(|| self.backend.describe());
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(DataSourceError::NoRuntime { name });
        }
        let Some(claim) = sentinel.claim_source_name(&name) else {
            return Err(DataSourceError::DuplicateName { name });
        };
        let (status_tx, status_rx) = watch::channel(SourceStatus::new(name.clone()));
        let mut driver = Driver {
            _claim: claim,
            name: name.clone(),
            backend: self.backend,
            converter: self.converter,
            sentinel: sentinel.clone(),
            delete_policy: self.delete_policy,
            validation: self.validation,
            snapshot_file: self.snapshot_file,
            max_payload_bytes: self.max_payload_bytes,
            owned: BTreeSet::new(),
            last_hash: None,
            status: status_tx,
        };
        let need_read = match driver.backend.read().await {
            Ok(payload) => {
                driver.connected();
                match driver.process(payload).await {
                    Ok(()) => false,
                    Err(error) if self.start_mode == StartMode::Snapshot => {
                        tracing::warn!(source = %name, %error, "initial payload not applied; starting from the local snapshot");
                        driver.load_snapshot().await;
                        false
                    }
                    Err(error) => {
                        driver.backend.close().await;
                        return Err(error);
                    }
                }
            }
            Err(error) => {
                driver.disconnected(&error);
                if self.start_mode == StartMode::FailFast {
                    driver.backend.close().await;
                    return Err(DataSourceError::Source {
                        name,
                        source: error,
                    });
                }
                tracing::warn!(source = %name, %error, "initial read failed; starting from the local snapshot");
                driver.load_snapshot().await;
                true
            }
        };
        let (stop_tx, stop_rx) = watch::channel(false);
        let backoff = Backoff::new(self.backoff.0, self.backoff.1);
        let task = tokio::spawn(driver.run(stop_rx, backoff, need_read));
        Ok(DataSource {
            name,
            status: status_rx,
            stop: stop_tx,
            task: Some(task),
        })
    }
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
            name: None,
            delete_policy: DeletePolicy::default(),
            validation: Validation::default(),
            start_mode: StartMode::default(),
            snapshot_file: None,
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
            backoff: (DEFAULT_BACKOFF_INITIAL, DEFAULT_BACKOFF_MAX),
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
    /// after this returns.
    pub async fn close(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            if let Err(error) = task.await {
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

/// How long a watch must have run before its failure counts as a new outage (the backoff
/// starts again from the initial delay).
const HEALTHY_WATCH: Duration = Duration::from_secs(10);

/// Exponential backoff with jitter, capped.
#[derive(Debug)]
struct Backoff {
    initial: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max,
            next: initial,
        }
    }

    /// The next delay: the current step scaled by a random factor in [0.5, 1].
    fn next_delay(&mut self) -> Duration {
        let base = self.next;
        self.next = self.next.saturating_mul(2).min(self.max);
        base.mul_f64(rand::rng().random_range(0.5..=1.0))
    }

    fn reset(&mut self) {
        self.next = self.initial;
    }
}

/// The state the background task owns.
struct Driver {
    /// Holds the source's name until the task ends (or `start` fails).
    _claim: SourceNameClaim,
    name: String,
    backend: Box<dyn ReadableDataSource>,
    converter: Arc<dyn Converter<[u8], RuleSet>>,
    sentinel: Sentinel,
    delete_policy: DeletePolicy,
    validation: Validation,
    snapshot_file: Option<PathBuf>,
    max_payload_bytes: usize,
    /// Every family this source has applied.
    owned: BTreeSet<RuleFamily>,
    /// Hash of the last payload processed (applied, rejected or kept).
    last_hash: Option<[u8; 32]>,
    status: watch::Sender<SourceStatus>,
}

/// Resolves when `close` was called or the handle dropped.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

impl Driver {
    async fn run(
        mut self,
        mut stop: watch::Receiver<bool>,
        mut backoff: Backoff,
        mut need_read: bool,
    ) {
        loop {
            if need_read {
                let delay = backoff.next_delay();
                tracing::debug!(source = %self.name, ?delay, "reconnecting after backoff");
                tokio::select! {
                    biased;
                    () = stopped(&mut stop) => break,
                    () = tokio::time::sleep(delay) => {}
                }
                let read = tokio::select! {
                    biased;
                    () = stopped(&mut stop) => break,
                    read = self.backend.read() => read,
                };
                match read {
                    Ok(payload) => {
                        self.connected();
                        need_read = false;
                        let _ = self.process(payload).await;
                    }
                    Err(SourceError::Closed) => break,
                    Err(error @ SourceError::TooLarge { .. }) => {
                        // The server answered: connected, but the value is rejected. Watch
                        // for the next value (a backend reports an unchanged oversized
                        // value once).
                        self.connected();
                        need_read = false;
                        self.oversized(&error, None);
                    }
                    Err(error) => {
                        self.disconnected(&error);
                        continue;
                    }
                }
            }
            let watching_since = tokio::time::Instant::now();
            let event = tokio::select! {
                biased;
                () = stopped(&mut stop) => break,
                event = self.backend.watch() => event,
            };
            match event {
                Ok(WatchEvent::Changed(payload)) => {
                    backoff.reset();
                    let _ = self.process(payload).await;
                }
                Ok(WatchEvent::Resync) => {
                    backoff.reset();
                    let read = tokio::select! {
                        biased;
                        () = stopped(&mut stop) => break,
                        read = self.backend.read() => read,
                    };
                    match read {
                        Ok(payload) => {
                            let _ = self.process(payload).await;
                        }
                        Err(SourceError::Closed) => break,
                        Err(error @ SourceError::TooLarge { .. }) => {
                            self.oversized(&error, None);
                        }
                        Err(error) => {
                            self.disconnected(&error);
                            need_read = true;
                        }
                    }
                }
                Err(SourceError::Closed) => break,
                Err(error @ SourceError::TooLarge { .. }) => {
                    // A backend's own size cap: a rejected payload, not a lost connection.
                    // Keep watching, so a fixed value is picked up at once.
                    self.oversized(&error, None);
                }
                Err(error) => {
                    // A watch that was healthy for a while ends an outage streak: the next
                    // reconnect starts from the initial delay. A watch that fails at once
                    // keeps doubling it, so a broken backend cannot spin.
                    if watching_since.elapsed() >= HEALTHY_WATCH {
                        backoff.reset();
                    }
                    self.disconnected(&error);
                    need_read = true;
                }
            }
        }
        self.backend.close().await;
        self.status.send_modify(|s| {
            s.connected = false;
            s.closed = true;
        });
        tracing::debug!(source = %self.name, "data source closed");
    }

    fn connected(&self) {
        self.status.send_if_modified(|s| {
            let was = s.connected;
            s.connected = true;
            if !was {
                tracing::info!(source = %self.name, "data source connected");
            }
            !was
        });
    }

    /// A payload over a size cap (the driver's or the backend's): rejected, rules kept.
    fn oversized(&mut self, error: &SourceError, revision: Option<String>) {
        tracing::warn!(source = %self.name, %error, "payload rejected; previous rules kept");
        // Forget the last hash: the next acceptable payload is applied even if it equals the
        // one before the oversized one, which clears this error.
        self.last_hash = None;
        self.status.send_modify(|s| {
            s.rejected_count += 1;
            s.last_error = Some(error.to_string());
            if revision.is_some() {
                s.last_revision = revision;
            }
        });
    }

    fn disconnected(&self, error: &SourceError) {
        tracing::warn!(source = %self.name, %error, "data source read or watch failed; will retry");
        self.status.send_modify(|s| {
            if s.connected {
                s.disconnects += 1;
            }
            s.connected = false;
            s.last_error = Some(error.to_string());
        });
    }

    /// Converts and applies one payload. Errors are reported in status (and by event); the
    /// returned error only matters for the initial load.
    async fn process(&mut self, payload: RawPayload) -> Result<(), DataSourceError> {
        let size = payload.size();
        if size > self.max_payload_bytes {
            let error = SourceError::TooLarge {
                size,
                limit: self.max_payload_bytes,
            };
            self.oversized(&error, payload.revision.clone());
            return Err(DataSourceError::Source {
                name: self.name.clone(),
                source: error,
            });
        }

        let hash = content_hash(&payload);
        if self.last_hash == Some(hash) {
            tracing::debug!(source = %self.name, "payload unchanged; not applied again");
            self.status.send_modify(|s| {
                s.unchanged_count += 1;
                if payload.revision.is_some() {
                    s.last_revision = payload.revision.clone();
                }
            });
            return Ok(());
        }
        self.last_hash = Some(hash);
        let hash_hex = hex(&hash);
        let blank = payload
            .entries
            .iter()
            .all(|e| e.value.iter().all(u8::is_ascii_whitespace));

        if blank && self.delete_policy == DeletePolicy::Keep {
            tracing::info!(source = %self.name, "key deleted or empty; rules kept (DeletePolicy::Keep)");
            self.status.send_modify(|s| {
                s.kept_count += 1;
                s.last_hash = Some(hash_hex);
                s.last_revision = payload.revision.clone();
            });
            return Ok(());
        }

        let mut set = RuleSet::new();
        let mut skipped = Vec::new();
        if payload.is_absent() {
            set = RuleSet::cleared(&self.owned.iter().copied().collect::<Vec<_>>());
        } else {
            for entry in &payload.entries {
                let label = if entry.key.is_empty() {
                    self.name.as_str()
                } else {
                    entry.key.as_str()
                };
                match self.converter.convert_with(&entry.value, self.validation) {
                    Ok(converted) => {
                        skipped.extend(converted.skipped);
                        set.merge(converted.value);
                    }
                    Err(error) => {
                        let error = error.with_payload(label);
                        self.sentinel.reject_rules(&self.name, &error);
                        return Err(self.rejected(error, &payload, hash_hex));
                    }
                }
            }
        }

        // Ownership: every family applied before is replaced, cleared if not carried now.
        let carried: BTreeSet<RuleFamily> = set.families().into_iter().collect();
        let missing: Vec<RuleFamily> = self.owned.difference(&carried).copied().collect();
        set.merge(RuleSet::cleared(&missing));
        let families: BTreeSet<RuleFamily> = set.families().into_iter().collect();
        if families.is_empty() {
            // Nothing stored and nothing owned: there is nothing to change.
            self.status.send_modify(|s| {
                s.last_hash = Some(hash_hex);
                s.last_revision = payload.revision.clone();
                s.last_error = None;
            });
            return Ok(());
        }

        let for_snapshot = self.snapshot_file.as_ref().map(|_| set.clone());
        match self.sentinel.apply_rules(&self.name, set, self.validation) {
            Ok(report) => {
                self.owned.extend(families);
                skipped.extend(report.skipped);
                let owned: Vec<RuleFamily> = self.owned.iter().copied().collect();
                self.status.send_modify(|s| {
                    s.applied_count += 1;
                    s.last_applied_at = Some(SystemTime::now());
                    s.rules_version = Some(report.version);
                    s.last_hash = Some(hash_hex);
                    s.last_revision = payload.revision.clone();
                    s.last_error = None;
                    s.skipped = skipped;
                    s.families = owned;
                    s.from_snapshot = false;
                });
                if let (Some(path), Some(set)) = (self.snapshot_file.clone(), for_snapshot) {
                    self.write_snapshot(&path, &set).await;
                }
                Ok(())
            }
            // The engine has emitted the rejection event.
            Err(error) => Err(self.rejected(error, &payload, hash_hex)),
        }
    }

    fn rejected(
        &self,
        error: RuleError,
        payload: &RawPayload,
        hash_hex: String,
    ) -> DataSourceError {
        self.status.send_modify(|s| {
            s.rejected_count += 1;
            s.last_error = Some(error.to_string());
            s.last_hash = Some(hash_hex);
            s.last_revision = payload.revision.clone();
        });
        DataSourceError::Rejected {
            name: self.name.clone(),
            source: error,
        }
    }

    async fn write_snapshot(&mut self, path: &Path, set: &RuleSet) {
        let result = match snapshot::encode(set) {
            Ok(bytes) => snapshot::write_atomic(path, bytes).await,
            Err(error) => Err(std::io::Error::other(error)),
        };
        let error = result
            .err()
            .map(|e| format!("writing {}: {e}", path.display()));
        if let Some(error) = &error {
            tracing::warn!(source = %self.name, %error, "snapshot not written");
        }
        self.status.send_if_modified(|s| {
            let changed = s.snapshot_error != error;
            s.snapshot_error = error;
            changed
        });
    }

    /// Applies the local snapshot, if there is one.
    async fn load_snapshot(&mut self) {
        let Some(path) = self.snapshot_file.clone() else {
            tracing::warn!(source = %self.name, "no snapshot file configured; starting without rules from this source");
            return;
        };
        let bytes = match snapshot::read(&path).await {
            Ok(Some(bytes)) => bytes,
            Ok(None) => {
                tracing::warn!(source = %self.name, path = %path.display(), "no snapshot yet; starting without rules from this source");
                return;
            }
            Err(error) => {
                let error = format!("reading {}: {error}", path.display());
                tracing::warn!(source = %self.name, %error, "snapshot not read");
                self.status.send_modify(|s| s.snapshot_error = Some(error));
                return;
            }
        };
        let applied = snapshot::decode(&bytes, self.validation).and_then(|set| {
            let families: Vec<RuleFamily> = set.families();
            self.sentinel
                .apply_rules(&self.name, set, self.validation)
                .map(|report| (families, report))
        });
        match applied {
            Ok((families, report)) => {
                tracing::info!(source = %self.name, path = %path.display(), "rules applied from the local snapshot");
                self.owned.extend(families);
                let owned: Vec<RuleFamily> = self.owned.iter().copied().collect();
                self.status.send_modify(|s| {
                    s.from_snapshot = true;
                    s.rules_version = Some(report.version);
                    s.families = owned;
                    s.snapshot_error = None;
                });
            }
            Err(error) => {
                let error = format!("{}: {error}", path.display());
                tracing::warn!(source = %self.name, %error, "snapshot not applied");
                self.status.send_modify(|s| s.snapshot_error = Some(error));
            }
        }
    }
}

/// SHA-256 over every entry's key and value, length-prefixed so that entry boundaries count.
fn content_hash(payload: &RawPayload) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update((payload.entries.len() as u64).to_le_bytes());
    for entry in &payload.entries {
        hasher.update((entry.key.len() as u64).to_le_bytes());
        hasher.update(entry.key.as_bytes());
        hasher.update((entry.value.len() as u64).to_le_bytes());
        hasher.update(&entry.value);
    }
    hasher.finalize().into()
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_and_caps() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        let delays: Vec<Duration> = (0..8).map(|_| b.next_delay()).collect();
        let steps = [100u64, 200, 400, 800, 1000, 1000, 1000, 1000];
        for (delay, step) in delays.iter().zip(steps) {
            let step = Duration::from_millis(step);
            assert!(
                *delay <= step && *delay >= step / 2,
                "{delay:?} vs {step:?}"
            );
        }
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(100));
    }

    #[test]
    fn hash_sees_entry_boundaries() {
        let a = RawPayload {
            entries: vec![
                super::super::RawEntry::new("k", "ab"),
                super::super::RawEntry::new("l", "c"),
            ],
            revision: None,
        };
        let b = RawPayload {
            entries: vec![
                super::super::RawEntry::new("k", "a"),
                super::super::RawEntry::new("l", "bc"),
            ],
            revision: None,
        };
        assert_ne!(content_hash(&a), content_hash(&b));
        assert_ne!(
            content_hash(&RawPayload::absent()),
            content_hash(&RawPayload::single("", ""))
        );
        assert_eq!(hex(&[0, 255, 16]), "00ff10");
    }
}
