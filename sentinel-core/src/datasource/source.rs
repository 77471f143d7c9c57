//! The backend side of a data source: read the stored value, watch for changes.

use std::fmt;

use async_trait::async_trait;

/// The default payload size cap: 4 MiB, as Sentinel's file data source. The driver enforces
/// it ([`DataSourceBuilder::max_payload_bytes`](super::DataSourceBuilder::max_payload_bytes));
/// a backend that caps what it reads uses this value as its default too.
pub const DEFAULT_MAX_PAYLOAD_BYTES: usize = 4 * 1024 * 1024;

/// Server addresses given as a list whose items may each be comma-separated (the value of an
/// environment variable or of `spring.cloud.nacos.config.server-addr` passes as is): every
/// address, trimmed, blanks dropped. The backends' config builders take their address lists
/// through it.
pub fn address_list<I, S>(items: I) -> Vec<String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    items
        .into_iter()
        .flat_map(|item| {
            item.as_ref()
                .split(',')
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// A boxed error from a backend client library.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// One stored value: a key and its raw bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct RawEntry {
    /// The key (file path, etcd key, Redis key, Nacos dataId...).
    pub key: String,
    /// The stored bytes, exactly as the backend returned them.
    pub value: Vec<u8>,
}

impl RawEntry {
    /// Creates an entry.
    pub fn new(key: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        Self {
            key: key.into(),
            value: value.into(),
        }
    }
}

impl fmt::Debug for RawEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawEntry")
            .field("key", &self.key)
            .field("len", &self.value.len())
            .finish()
    }
}

/// Everything a backend currently stores for one data source.
///
/// A single-key source yields at most one entry. A prefix source yields one entry per key
/// under the prefix. No entries means nothing is stored: the key was deleted or never
/// written, and the driver applies its [`DeletePolicy`](super::DeletePolicy).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawPayload {
    /// The stored entries, sorted by key.
    pub entries: Vec<RawEntry>,
    /// The backend's own version of this value (an etcd revision, a Nacos MD5...), if any.
    pub revision: Option<String>,
}

impl RawPayload {
    /// A payload with one entry.
    pub fn single(key: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        Self {
            entries: vec![RawEntry::new(key, value)],
            revision: None,
        }
    }

    /// A payload that says nothing is stored.
    pub fn absent() -> Self {
        Self::default()
    }

    /// Sets the backend revision.
    pub fn with_revision(mut self, revision: impl Into<String>) -> Self {
        self.revision = Some(revision.into());
        self
    }

    /// Total size of all entry values in bytes.
    pub fn size(&self) -> usize {
        self.entries.iter().map(|e| e.value.len()).sum()
    }

    /// True when nothing is stored.
    pub fn is_absent(&self) -> bool {
        self.entries.is_empty()
    }
}

/// What a backend's watch reports.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WatchEvent {
    /// The stored value changed, and this is the new full value.
    Changed(RawPayload),
    /// The value may have changed (a notification without a trustworthy payload, a compaction,
    /// a cancelled watch): the driver calls [`ReadableDataSource::read`] again.
    Resync,
    /// The backend cannot watch for now but keeps trying by itself, without the driver's
    /// reconnect (a file source whose directory is missing): status shows the source
    /// disconnected with this message until [`Restored`](WatchEvent::Restored) or the next
    /// value.
    Degraded(String),
    /// The backend watches again after [`Degraded`](WatchEvent::Degraded).
    Restored,
}

/// Errors a backend reports. The driver retries all of them with backoff, except
/// [`SourceError::Closed`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// The server could not be reached, or the connection broke.
    #[error("connection failed: {message}")]
    Connection {
        /// What went wrong, without secrets.
        message: String,
        /// The client library's error.
        #[source]
        source: Option<BoxError>,
    },
    /// The server rejected the credentials.
    #[error("authentication failed: {message}")]
    Auth {
        /// What the server said, without secrets.
        message: String,
    },
    /// The credentials are valid but may not read the key.
    #[error("permission denied: {message}")]
    PermissionDenied {
        /// What the server said.
        message: String,
    },
    /// The stored value is larger than the configured cap.
    #[error("payload of {size} bytes is over the {limit}-byte cap")]
    TooLarge {
        /// The payload size in bytes.
        size: usize,
        /// The cap in bytes.
        limit: usize,
    },
    /// Any other backend failure.
    #[error("{message}")]
    Backend {
        /// What went wrong.
        message: String,
        /// The client library's error.
        #[source]
        source: Option<BoxError>,
    },
    /// The source was closed.
    #[error("the data source is closed")]
    Closed,
}

impl SourceError {
    /// A connection error wrapping a client error.
    pub fn connection(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Connection {
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// A backend error wrapping a client error.
    pub fn backend(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Backend {
            message: message.into(),
            source: Some(source.into()),
        }
    }
}

/// A config store that holds rule payloads: the part of a data source that differs per
/// backend.
///
/// How a backend notices a store that stops answering: what it checks, and how long a frozen
/// store can go unnoticed at most with its settings.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HealthCheck {
    /// What the backend does, for example `a PING every 1s, answered within 2s`.
    pub check: String,
    /// The longest a frozen store goes unnoticed: after it, the status turns
    /// `connected: false` and the driver reconnects.
    pub detection: std::time::Duration,
}

impl HealthCheck {
    /// A check described by `check` that notices a frozen store within `detection`.
    pub fn new(check: impl Into<String>, detection: std::time::Duration) -> Self {
        Self {
            check: check.into(),
            detection,
        }
    }
}

/// The generic driver ([`DataSource`](super::DataSource)) calls [`read`](Self::read) once at
/// start and after every error (a reconnect is a full re-read), then [`watch`](Self::watch) in
/// a loop. Converting, validating, deduplicating, applying, backoff and status are the
/// driver's work, so a backend only talks to its server.
///
/// Contract:
/// - `read` returns the whole current value and, where the backend has versions, remembers
///   the position, so the next `watch` starts right after it and misses nothing.
/// - `watch` waits for the next change after the last `read` or event. An error from it makes
///   the driver back off and call `read` again.
/// - Neither holds a lock or a borrowed guard across an `.await` that outlives the call.
#[async_trait]
pub trait ReadableDataSource: Send + 'static {
    /// A short description for status and logs, for example `etcd key /rules/flow`.
    /// It must not contain secrets.
    fn describe(&self) -> String;

    /// How the backend checks that its store still answers while it waits for a change (a
    /// store that freezes without closing the connection looks healthy otherwise), shown in
    /// [`SourceStatus::health_check`](super::SourceStatus::health_check). `None` (the
    /// default): the backend has no such check.
    fn health_check(&self) -> Option<HealthCheck> {
        None
    }

    /// Reads the full current value.
    async fn read(&mut self) -> Result<RawPayload, SourceError>;

    /// Waits for the next change after the last read or event.
    async fn watch(&mut self) -> Result<WatchEvent, SourceError>;

    /// How often the backend logged in again because the server refused its token (expired
    /// or revoked); the driver shows it in
    /// [`SourceStatus::reauthentications`](super::SourceStatus::reauthentications). Backends
    /// without token auth keep the default, 0.
    fn reauthentications(&self) -> u64 {
        0
    }

    /// How often the backend connected anew by itself, with no error reaching the driver: a
    /// failover to another server of a cluster, say. The driver treats a rise like a
    /// reconnect of its own: a change read right after it is confirmed before it applies
    /// ([`DataSourceBuilder::confirm_after_reconnect`](super::DataSourceBuilder::confirm_after_reconnect)),
    /// since the server it moved to may not have loaded its data yet. Backends that never
    /// switch servers by themselves keep the default, 0.
    fn reconnects(&self) -> u64 {
        0
    }

    /// Releases connections and background work. The driver calls it once, on close.
    async fn close(&mut self) {}
}

/// A boxed source is a source: a program that picks its backend at run time (from a URL,
/// say) hands the driver a `Box<dyn ReadableDataSource>`.
#[async_trait]
impl ReadableDataSource for Box<dyn ReadableDataSource> {
    fn describe(&self) -> String {
        (**self).describe()
    }

    fn health_check(&self) -> Option<HealthCheck> {
        (**self).health_check()
    }

    async fn read(&mut self) -> Result<RawPayload, SourceError> {
        (**self).read().await
    }

    async fn watch(&mut self) -> Result<WatchEvent, SourceError> {
        (**self).watch().await
    }

    fn reauthentications(&self) -> u64 {
        (**self).reauthentications()
    }

    fn reconnects(&self) -> u64 {
        (**self).reconnects()
    }

    async fn close(&mut self) {
        (**self).close().await
    }
}
