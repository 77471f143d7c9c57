//! [`FileSource`]: reading the file, watching its directory (or polling), and reporting
//! each change once.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use sentinel_core::datasource::{RawPayload, ReadableDataSource, SourceError, WatchEvent};
use tokio::time::Instant;

use crate::config::{FileConfig, MISSING_DIR_RETRY};
use crate::snapshot::{self, Seen, Snapshot};
use crate::watch::DirWatch;

/// Rules stored in one local file. See the [crate documentation](crate) for how changes are
/// detected.
///
/// `watch` is cancel-safe: if its future is dropped, the next call still reports any change
/// the dropped one had noticed.
pub struct FileSource {
    config: FileConfig,
    /// The directory watch; `None` in polling mode, before the first read, and while the
    /// watch cannot be set up.
    watch: Option<DirWatch>,
    /// What was last reported; `None` before the first read.
    last: Option<Seen>,
    /// An event was received and the file not yet compared since.
    pending: bool,
    /// The watch setup failure was already logged at warn level.
    watch_failure_logged: bool,
    /// The driver was told the directory cannot be watched (`WatchEvent::Degraded`), and not
    /// yet that it can again.
    degraded: bool,
    closed: bool,
}

/// What ended a wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wake {
    /// Look at the file: an event came, a poll tick passed, or a watch was just set up.
    Look,
    /// The deadline passed.
    Deadline,
}

impl FileSource {
    pub(crate) fn from_config(config: FileConfig) -> Self {
        Self {
            config,
            watch: None,
            last: None,
            pending: false,
            watch_failure_logged: false,
            degraded: false,
            closed: false,
        }
    }

    fn ensure_open(&self) -> Result<(), SourceError> {
        if self.closed {
            Err(SourceError::Closed)
        } else {
            Ok(())
        }
    }

    /// Sets up the directory watch unless it runs or the source polls. True if it was set up
    /// just now.
    fn start_watch(&mut self) -> bool {
        if self.config.poll.is_some() {
            return false;
        }
        if self.watch.as_ref().is_some_and(|w| !w.is_broken()) {
            return false;
        }
        self.watch = None;
        match DirWatch::start(&self.config.dir, &self.config.file_name) {
            Ok(watch) => {
                self.watch = Some(watch);
                if self.watch_failure_logged {
                    tracing::info!(dir = %self.config.dir.display(), "watching the directory again");
                }
                self.watch_failure_logged = false;
                true
            }
            Err(error) => {
                if !self.watch_failure_logged {
                    tracing::warn!(
                        %error,
                        dir = %self.config.dir.display(),
                        "cannot watch the directory, checking the file every {:?}",
                        MISSING_DIR_RETRY
                    );
                    self.watch_failure_logged = true;
                }
                false
            }
        }
    }

    /// A change in whether the directory can be watched, to report before anything else: the
    /// file is still checked every second meanwhile, but status should show why edits are
    /// not seen at once (a missing directory, the inotify limit).
    fn health(&mut self) -> Option<WatchEvent> {
        if self.config.poll.is_some() {
            return None;
        }
        if self.start_watch() {
            // Changes made before the watch existed were not reported: look first.
            self.pending = true;
        }
        let watching = self.watch.is_some();
        if watching && self.degraded {
            self.degraded = false;
            return Some(WatchEvent::Restored);
        }
        if !watching && !self.degraded {
            self.degraded = true;
            return Some(WatchEvent::Degraded(format!(
                "cannot watch the directory {} (missing, or no watch available); checking the \
                 file every {:?}",
                self.config.dir.display(),
                MISSING_DIR_RETRY
            )));
        }
        None
    }

    /// Waits for a reason to look at the file, or for `deadline`.
    async fn wait(&mut self, deadline: Option<Instant>) -> Wake {
        if let Some(interval) = self.config.poll {
            return sleep_capped(interval, deadline).await;
        }
        if self.start_watch() {
            // Changes made before the watch existed were not reported: look now.
            return Wake::Look;
        }
        let Some(watch) = self.watch.as_mut() else {
            return sleep_capped(MISSING_DIR_RETRY, deadline).await;
        };
        let alive = match deadline {
            None => watch.changed().await,
            Some(deadline) => tokio::select! {
                alive = watch.changed() => alive,
                () = tokio::time::sleep_until(deadline) => return Wake::Deadline,
            },
        };
        if !alive {
            tracing::warn!(dir = %self.config.dir.display(), "the directory watch stopped");
            self.watch = None;
        }
        Wake::Look
    }

    /// After an event, lets the burst it belongs to finish.
    async fn debounce(&mut self) {
        let (quiet, max) = (self.config.debounce, self.config.max_debounce());
        if let Some(watch) = self.watch.as_mut() {
            watch.quiet(quiet, max).await;
            if watch.is_broken() {
                tracing::warn!(dir = %self.config.dir.display(), "the watched directory was removed or moved");
                self.watch = None;
            }
        }
    }

    async fn snapshot(&self) -> Result<Snapshot, SourceError> {
        snapshot::take(self.config.path.clone(), self.config.max_payload_bytes).await
    }

    /// Reads the file; returns the payload to report if it differs from the last report.
    async fn observe(&mut self) -> Result<Option<RawPayload>, SourceError> {
        let mut snap = self.snapshot().await?;
        if snap.is_vacant() && self.last != Some(snap.seen()) {
            snap = self.settle(snap).await?;
        }
        if self.last == Some(snap.seen()) {
            return Ok(None);
        }
        Ok(Some(self.report(snap)))
    }

    /// The file is missing or empty: gives it the settle delay to get content back.
    async fn settle(&mut self, vacant: Snapshot) -> Result<Snapshot, SourceError> {
        if self.config.delete_settle.is_zero() {
            return Ok(vacant);
        }
        tracing::debug!(path = %self.config.path.display(), "file missing or empty, waiting for it to settle");
        let deadline = Instant::now() + self.config.delete_settle;
        loop {
            match self.wait(Some(deadline)).await {
                Wake::Deadline => return self.snapshot().await,
                Wake::Look => {
                    self.debounce().await;
                    let snap = self.snapshot().await?;
                    if !snap.is_vacant() {
                        return Ok(snap);
                    }
                }
            }
        }
    }

    /// Remembers an oversized file, so it is reported once per change rather than on every
    /// look; other errors pass through.
    fn oversized(&mut self, error: SourceError) -> SourceError {
        if let SourceError::TooLarge { size, .. } = error {
            self.last = Some(Seen::Oversized(size));
            self.pending = false;
        }
        error
    }

    /// Records `snap` as reported and turns it into a payload.
    fn report(&mut self, snap: Snapshot) -> RawPayload {
        self.last = Some(snap.seen());
        match snap {
            Snapshot::Missing => {
                tracing::debug!(path = %self.config.path.display(), "file is absent");
                RawPayload::absent()
            }
            Snapshot::Content { bytes, hash } => {
                let revision = snapshot::hex(&hash);
                tracing::debug!(
                    path = %self.config.path.display(),
                    size = bytes.len(),
                    %revision,
                    "file content changed"
                );
                RawPayload::single(self.config.key(), bytes).with_revision(revision)
            }
        }
    }
}

/// Sleeps for `interval`, or until `deadline` if that comes first.
async fn sleep_capped(interval: Duration, deadline: Option<Instant>) -> Wake {
    let wake_at = Instant::now() + interval;
    match deadline {
        Some(deadline) if deadline <= wake_at => {
            tokio::time::sleep_until(deadline).await;
            Wake::Deadline
        }
        _ => {
            tokio::time::sleep_until(wake_at).await;
            Wake::Look
        }
    }
}

#[async_trait]
impl ReadableDataSource for FileSource {
    fn describe(&self) -> String {
        match self.config.poll {
            Some(interval) => format!(
                "file {} (polled every {:?})",
                self.config.path.display(),
                interval
            ),
            None => format!("file {}", self.config.path.display()),
        }
    }

    async fn read(&mut self) -> Result<RawPayload, SourceError> {
        self.ensure_open()?;
        // Watch first, then read: a change after the read is then sure to raise an event.
        self.start_watch();
        if let Some(watch) = self.watch.as_mut() {
            watch.drain();
        }
        // The drained events are covered by this read, but only once it completes: if it
        // fails or is cancelled, the next watch looks at the file without waiting.
        self.pending = true;
        let snap = match self.snapshot().await {
            Ok(snap) => snap,
            Err(error) => return Err(self.oversized(error)),
        };
        self.pending = false;
        Ok(self.report(snap))
    }

    async fn watch(&mut self) -> Result<WatchEvent, SourceError> {
        self.ensure_open()?;
        loop {
            if let Some(event) = self.health() {
                return Ok(event);
            }
            if !self.pending {
                self.wait(None).await;
                self.pending = true;
            }
            self.debounce().await;
            let changed = match self.observe().await {
                Ok(changed) => changed,
                Err(SourceError::TooLarge { size, .. })
                    if self.last == Some(Seen::Oversized(size)) =>
                {
                    // Still the same oversized file: reported already, wait for a change.
                    self.pending = false;
                    continue;
                }
                Err(error) => return Err(self.oversized(error)),
            };
            self.pending = false;
            if let Some(payload) = changed {
                return Ok(WatchEvent::Changed(payload));
            }
        }
    }

    async fn close(&mut self) {
        self.closed = true;
        self.watch = None;
    }
}

impl fmt::Debug for FileSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileSource")
            .field("path", &self.config.path)
            .field("debounce", &self.config.debounce)
            .field("delete_settle", &self.config.delete_settle)
            .field("poll", &self.config.poll)
            .field("max_payload_bytes", &self.config.max_payload_bytes)
            .field("watching", &self.watch.is_some())
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}
