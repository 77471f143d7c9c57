//! The background task of one data source: read, watch, and push each payload through the
//! pipeline (size cap, dedupe, delete policy, convert, validate, apply), with status. The
//! local snapshot is `local_snapshot.rs`'s, the content hash `hash.rs`'s.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;

use super::backoff::Backoff;
use super::confirm;
use super::error::DataSourceError;
use super::hash::{content_hash, hex};
use super::options::{DeletePolicy, StartMode};
use super::SharedConverter;
use crate::datasource::source::{RawPayload, ReadableDataSource, SourceError, WatchEvent};
use crate::datasource::status::SourceStatus;
use crate::engine::{Incoming, Sentinel, SourceNameClaim};
use crate::rule_set::RuleSet;
use crate::rules::{RuleFamily, Validation};

/// How long a watch must have run before its failure counts as a new outage (the backoff
/// starts again from the initial delay).
const HEALTHY_WATCH: Duration = Duration::from_secs(10);

/// The state the background task owns.
pub(super) struct Driver {
    /// Holds the source's name until the task ends (or `start` fails).
    pub(super) _claim: SourceNameClaim,
    pub(super) name: String,
    pub(super) backend: Box<dyn ReadableDataSource>,
    pub(super) converter: SharedConverter,
    /// Converters for particular entry keys ([`DataSourceBuilder::converter_for`](super::DataSourceBuilder::converter_for)).
    pub(super) keyed: Vec<(String, SharedConverter)>,
    pub(super) sentinel: Sentinel,
    pub(super) delete_policy: DeletePolicy,
    pub(super) validation: Validation,
    pub(super) snapshot_file: Option<PathBuf>,
    pub(super) max_payload_bytes: usize,
    /// Hash of the last payload processed (applied, rejected or kept).
    pub(super) last_hash: Option<[u8; 32]>,
    pub(super) status: watch::Sender<SourceStatus>,
    /// How long after a reconnect a change is confirmed before it is applied (`confirm.rs`).
    pub(super) confirm_after_reconnect: Duration,
    /// When the source last connected again after losing its store.
    pub(super) reconnected_at: Option<tokio::time::Instant>,
    /// True once the first read of `start` is over: a connection after it is a reconnect.
    pub(super) started: bool,
    /// The backend's count of its own reconnects ([`ReadableDataSource::reconnects`]) last
    /// seen.
    pub(super) backend_reconnects: u64,
}

/// What one read of the backend came to.
enum Read {
    /// The task was stopped first.
    Stopped,
    /// The backend gave a payload, processed: applied, kept, or rejected (`Err`).
    Done(Result<(), DataSourceError>),
    /// The read failed (the backend closed, a lost connection, a value over its cap).
    Failed(SourceError),
}

/// Resolves when `close` was called or the handle dropped.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

/// [`stopped`], or never without a receiver (the first read of `start`).
async fn stop_signal(stop: Option<&mut watch::Receiver<bool>>) {
    match stop {
        Some(stop) => stopped(stop).await,
        None => std::future::pending().await,
    }
}

impl Driver {
    /// The first read, before `start` returns. `Ok(true)`: started from the snapshot with the
    /// server unreachable, so the task reads again first.
    pub(super) async fn initial_load(
        &mut self,
        start_mode: StartMode,
    ) -> Result<bool, DataSourceError> {
        let first = self.read(None).await;
        self.started = true;
        match first {
            Read::Done(Ok(())) => Ok(false),
            Read::Done(Err(error)) if start_mode != StartMode::FailFast => {
                self.start_rejected(&error).await;
                Ok(false)
            }
            Read::Failed(error @ SourceError::TooLarge { .. })
                if start_mode != StartMode::FailFast =>
            {
                // The backend's own size cap: the store answered, its payload is rejected.
                self.connected();
                self.oversized(&error, None);
                self.start_rejected(&error).await;
                Ok(false)
            }
            Read::Done(Err(error)) => {
                self.backend.close().await;
                Err(error)
            }
            Read::Failed(error) => {
                self.disconnected(&error);
                if start_mode != StartMode::Snapshot {
                    self.backend.close().await;
                    return Err(DataSourceError::Source {
                        name: self.name.clone(),
                        source: error,
                    });
                }
                tracing::warn!(source = %self.name, %error, "initial read failed; starting from the local snapshot");
                self.load_snapshot().await;
                Ok(true)
            }
            // Not reached: nothing stops the first read.
            Read::Stopped => Ok(false),
        }
    }

    /// The first payload is rejected: start from the local snapshot, or with no rules from
    /// this source, and watch on for the fix.
    async fn start_rejected(&mut self, error: &dyn std::error::Error) {
        tracing::error!(
            source = %self.name,
            %error,
            snapshot = ?self.snapshot_file,
            "the stored rules are rejected; starting from the local snapshot (or with no rules \
             from this source) until a payload that applies is stored"
        );
        self.load_snapshot().await;
    }

    pub(super) async fn run(
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
                match self.read(Some(&mut stop)).await {
                    Read::Stopped | Read::Failed(SourceError::Closed) => break,
                    Read::Done(_) => need_read = false,
                    Read::Failed(error) => {
                        if self.read_failed(&error) {
                            continue;
                        }
                        need_read = false;
                    }
                }
            }
            let watching_since = tokio::time::Instant::now();
            let event = tokio::select! {
                biased;
                () = stopped(&mut stop) => break,
                event = self.backend.watch() => event,
            };
            self.note_backend();
            match event {
                Ok(WatchEvent::Changed(payload)) => {
                    backoff.reset();
                    self.connected();
                    if self.confirmation_due(&payload).is_none() {
                        let _ = self.process(payload).await;
                    } else {
                        // A change right after a reconnect: confirmed by the read path.
                        match self.read(Some(&mut stop)).await {
                            Read::Stopped | Read::Failed(SourceError::Closed) => break,
                            Read::Done(_) => {}
                            Read::Failed(error) => need_read = self.read_failed(&error),
                        }
                    }
                }
                Ok(WatchEvent::Degraded(message)) => self.degraded(&message),
                Ok(WatchEvent::Restored) => self.connected(),
                Ok(WatchEvent::Resync) => {
                    backoff.reset();
                    match self.read(Some(&mut stop)).await {
                        Read::Stopped | Read::Failed(SourceError::Closed) => break,
                        Read::Done(_) => {}
                        Read::Failed(error) => need_read = self.read_failed(&error),
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

    /// Reads the whole value once, unless `stop` fires first, and processes the payload: the
    /// task's one read path (the first read, a reconnect, a resync). A change read right
    /// after a reconnect is read again once the confirmation time is over, and that second
    /// read is what is processed (`confirm.rs`). A failed read is returned as it is, for the
    /// caller to report.
    async fn read(&mut self, mut stop: Option<&mut watch::Receiver<bool>>) -> Read {
        let payload = match self.read_value(stop.as_deref_mut()).await {
            Ok(payload) => payload,
            Err(outcome) => return outcome,
        };
        self.note_reconnect();
        let due = self.confirmation_due(&payload);
        self.connected_now(due.is_some());
        let Some(until) = due else {
            return Read::Done(self.process(payload).await);
        };
        self.hold(&payload, until);
        tokio::select! {
            biased;
            () = stop_signal(stop.as_deref_mut()) => return Read::Stopped,
            () = tokio::time::sleep_until(until) => {}
        }
        let confirming = match self.read_value(stop).await {
            Ok(payload) => payload,
            Err(outcome) => {
                self.status.send_modify(|s| s.confirming = false);
                return outcome;
            }
        };
        self.confirmed(&payload, &confirming);
        let result = self.process(confirming).await;
        self.status.send_modify(|s| s.confirming = false);
        Read::Done(result)
    }

    /// One read of the backend, unless `stop` fires first: the payload, or how the read
    /// ended.
    async fn read_value(
        &mut self,
        stop: Option<&mut watch::Receiver<bool>>,
    ) -> Result<RawPayload, Read> {
        let read = tokio::select! {
            biased;
            () = stop_signal(stop) => return Err(Read::Stopped),
            read = self.backend.read() => read,
        };
        self.note_backend();
        read.map_err(Read::Failed)
    }

    /// Reports a failed read after the first; `true` when the task must read again (after
    /// backoff), `false` when it watches on.
    fn read_failed(&mut self, error: &SourceError) -> bool {
        if let SourceError::TooLarge { .. } = error {
            // The server answered: connected, but the value is rejected. Watch for the next
            // value (a backend reports an unchanged oversized value once).
            self.connected();
            self.oversized(error, None);
            return false;
        }
        self.disconnected(error);
        true
    }

    /// The families this source has applied, as the engine records them.
    pub(super) fn owned_families(&self) -> Vec<RuleFamily> {
        let owned = self.sentinel.owned(&self.name);
        owned.families.into_iter().collect()
    }

    /// Copies the backend's count of fresh logins into the status, and notes a reconnect the
    /// backend made by itself (a failover) as one of the driver's own.
    fn note_backend(&mut self) {
        let reconnects = self.backend.reconnects();
        if reconnects > self.backend_reconnects && self.started {
            tracing::info!(source = %self.name, "the backend connected anew (a failover)");
            self.reconnected_at = Some(tokio::time::Instant::now());
        }
        self.backend_reconnects = reconnects;
        let count = self.backend.reauthentications();
        self.status.send_if_modified(|s| {
            let changed = s.reauthentications != count;
            s.reauthentications = count;
            changed
        });
    }

    fn connected(&mut self) {
        self.note_reconnect();
        self.connected_now(false);
    }

    /// Notes a reconnect: the store answers again after the source lost it (the first read of
    /// `start` is not one).
    fn note_reconnect(&mut self) {
        if self.started && !self.status.borrow().connected {
            self.reconnected_at = Some(tokio::time::Instant::now());
        }
    }

    /// Status: connected, and whether a change awaits its confirming read, in one update.
    fn connected_now(&self, confirming: bool) {
        self.status.send_if_modified(|s| {
            let was = s.connected;
            if !was {
                tracing::info!(source = %self.name, "data source connected");
            }
            let changed = !was || s.confirming != confirming;
            s.connected = true;
            s.confirming = confirming;
            changed
        });
    }

    /// A payload over a size cap (the driver's or the backend's): rejected, rules kept.
    fn oversized(&mut self, error: &SourceError, revision: Option<String>) {
        tracing::error!(source = %self.name, %error, "the stored payload is rejected; the rules in force stay");
        // Forget the last hash: the next acceptable payload is applied even if it equals the
        // one before the oversized one, which clears this error.
        self.last_hash = None;
        self.status.send_modify(|s| {
            s.rejected_count += 1;
            s.store_rejected = true;
            s.last_error = Some(error.to_string());
            s.last_rejected_at = Some(SystemTime::now());
            s.rejected_hash = None;
            s.rejected_revision.clone_from(&revision);
            if revision.is_some() {
                s.last_revision = revision;
            }
        });
    }

    /// The backend cannot watch for now and retries by itself: shown as disconnected, with
    /// no reconnect of the driver's.
    fn degraded(&self, message: &str) {
        tracing::warn!(source = %self.name, %message, "data source cannot watch for now");
        self.mark_disconnected(message.to_owned());
    }

    fn disconnected(&self, error: &SourceError) {
        tracing::warn!(source = %self.name, %error, "data source read or watch failed; will retry");
        self.mark_disconnected(error.to_string());
    }

    /// Status: not connected, for `why` (a new disconnect if it was connected).
    fn mark_disconnected(&self, why: String) {
        self.status.send_modify(|s| {
            if s.connected {
                s.disconnects += 1;
            }
            s.connected = false;
            s.last_error = Some(why);
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
                    // The same rejected content stored again: the store's rejected payload
                    // now has this revision. The applied ones stay: the rules in force came
                    // from the payload applied before.
                    if s.store_rejected {
                        s.rejected_revision = payload.revision.clone();
                    }
                }
            });
            return Ok(());
        }
        self.last_hash = Some(hash);
        let hash_hex = hex(&hash);
        let blank = confirm::is_blank(&payload);
        if blank && self.delete_policy == DeletePolicy::Keep {
            tracing::info!(source = %self.name, "key deleted or empty; rules kept (DeletePolicy::Keep)");
            self.status.send_modify(|s| {
                s.kept_count += 1;
                s.store_rejected = false;
                s.last_hash = Some(hash_hex);
                s.last_revision = payload.revision.clone();
            });
            return Ok(());
        }

        // An absent payload clears every family this source applied: the engine knows which.
        let (set, skipped, skipped_rules, warnings) = if payload.is_absent() {
            (RuleSet::new(), Vec::new(), 0, Vec::new())
        } else {
            match self.convert(&payload) {
                Ok(converted) => converted,
                Err(error) => {
                    self.sentinel.reject(&self.name, &error);
                    return Err(self.rejected(error, &payload, hash_hex));
                }
            }
        };

        let for_snapshot = self.snapshot_file.as_ref().map(|_| set.clone());
        let incoming = Incoming::checked(set, skipped, skipped_rules)
            .with_warnings(warnings)
            .replacing_source();
        match self.sentinel.apply(&self.name, &self.name, incoming) {
            Ok(report) if report.applied.is_empty() && report.shadow_applied.is_empty() => {
                // Nothing carried and nothing owned: nothing changed.
                self.status.send_modify(|s| {
                    s.applied_hash = Some(hash_hex.clone());
                    s.applied_revision = payload.revision.clone();
                    s.last_hash = Some(hash_hex);
                    s.last_revision = payload.revision.clone();
                    s.last_error = None;
                    s.store_rejected = false;
                });
                Ok(())
            }
            Ok(report) => {
                let shadow_rules = report.shadow_rules;
                let (skipped, skipped_rules) = (report.skipped, report.skipped_rules);
                let warnings = report.warnings;
                let owned = self.owned_families();
                self.status.send_modify(|s| {
                    s.applied_count += 1;
                    s.last_applied_at = Some(SystemTime::now());
                    s.rules_version = Some(report.version);
                    s.applied_hash = Some(hash_hex.clone());
                    s.applied_revision = payload.revision.clone();
                    s.last_hash = Some(hash_hex);
                    s.last_revision = payload.revision.clone();
                    s.last_error = None;
                    s.store_rejected = false;
                    s.skipped = skipped;
                    s.skipped_rules = skipped_rules;
                    s.warnings = warnings;
                    s.families = owned;
                    s.shadow_rules = shadow_rules;
                    s.from_snapshot = false;
                });
                if let (Some(path), Some(set)) = (self.snapshot_file.clone(), for_snapshot) {
                    self.write_snapshot(&path, &set).await;
                }
                Ok(())
            }
            Err(error) => Err(self.rejected(error, &payload, hash_hex)),
        }
    }
}
