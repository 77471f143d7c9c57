//! An in-memory backend: a [`MemoryStore`] of keys and values, and [`MemorySource`], the
//! [`ReadableDataSource`] over it. For tests (a backend's conformance kit runs against it) and
//! for programs that compute their rules themselves.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::sync::watch;

use super::source::{RawEntry, RawPayload, ReadableDataSource, SourceError, WatchEvent};

/// How many read times a [`MemoryStore`] remembers.
const READ_LOG: usize = 256;

/// An in-memory config store: keys and values behind a lock, with change notification and a
/// switch that makes it "unreachable". Clones share the store.
///
/// ```
/// use sentinel_core::datasource::MemoryStore;
///
/// let store = MemoryStore::new();
/// store.put("rules/flow", "[]");
/// let source = store.source("rules/flow"); // a ReadableDataSource for one key
/// let all = store.prefix_source("rules/"); // or for every key under a prefix
/// # drop((source, all));
/// ```
#[derive(Clone, Default)]
pub struct MemoryStore {
    inner: Arc<StoreInner>,
}

#[derive(Default)]
struct StoreInner {
    state: Mutex<StoreState>,
    changed: watch::Sender<u64>,
}

#[derive(Default)]
struct StoreState {
    /// key -> (value, revision of its last write)
    entries: BTreeMap<String, (Vec<u8>, u64)>,
    revision: u64,
    down: bool,
    reads: u64,
    read_times: Vec<tokio::time::Instant>,
}

impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.lock();
        f.debug_struct("MemoryStore")
            .field("keys", &state.entries.len())
            .field("revision", &state.revision)
            .field("down", &state.down)
            .finish()
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, StoreState> {
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn bump(&self, change: impl FnOnce(&mut StoreState)) {
        let revision = {
            let mut state = self.lock();
            state.revision += 1;
            change(&mut state);
            state.revision
        };
        self.inner.changed.send_replace(revision);
    }

    /// Stores `value` under `key` (a write of the same value still counts as a change).
    pub fn put(&self, key: impl Into<String>, value: impl Into<Vec<u8>>) {
        let (key, value) = (key.into(), value.into());
        self.bump(|state| {
            let revision = state.revision;
            state.entries.insert(key, (value, revision));
        });
    }

    /// Deletes `key`.
    pub fn delete(&self, key: &str) {
        self.bump(|state| {
            state.entries.remove(key);
        });
    }

    /// Makes the store unreachable (`true`): reads fail and open watches end with an error.
    pub fn set_down(&self, down: bool) {
        self.bump(|state| state.down = down);
    }

    /// The store's revision: it rises with every write, delete and up/down switch.
    pub fn revision(&self) -> u64 {
        self.lock().revision
    }

    /// How many reads were attempted, failed ones included.
    pub fn read_count(&self) -> u64 {
        self.lock().reads
    }

    /// When the last reads were attempted (up to 256), in Tokio time, so a test with paused
    /// time can check the backoff between them.
    pub fn read_times(&self) -> Vec<tokio::time::Instant> {
        self.lock().read_times.clone()
    }

    /// A data source for one key.
    pub fn source(&self, key: impl Into<String>) -> MemorySource {
        self.make_source(Selector::Key(key.into()))
    }

    /// A data source for every key under `prefix`, one entry per key.
    pub fn prefix_source(&self, prefix: impl Into<String>) -> MemorySource {
        self.make_source(Selector::Prefix(prefix.into()))
    }

    fn make_source(&self, selector: Selector) -> MemorySource {
        MemorySource {
            store: self.clone(),
            selector,
            changes: self.inner.changed.subscribe(),
            seen: None,
        }
    }
}

#[derive(Debug, Clone)]
enum Selector {
    Key(String),
    Prefix(String),
}

/// A [`ReadableDataSource`] over a [`MemoryStore`]: one key, or every key under a prefix.
///
/// `watch` reports every write to the selected keys, even of an unchanged value, as a real
/// store would; the driver deduplicates.
#[derive(Debug)]
pub struct MemorySource {
    store: MemoryStore,
    selector: Selector,
    changes: watch::Receiver<u64>,
    /// (key, revision) of every entry last reported.
    seen: Option<Vec<(String, u64)>>,
}

impl MemorySource {
    /// The current value, and its fingerprint; an error while the store is down.
    fn snapshot(&mut self) -> Result<(RawPayload, Vec<(String, u64)>), SourceError> {
        self.changes.borrow_and_update();
        let state = self.store.lock();
        if state.down {
            return Err(unreachable_error());
        }
        let selected = state
            .entries
            .iter()
            .filter(|(key, _)| match &self.selector {
                Selector::Key(k) => *key == k,
                Selector::Prefix(p) => key.starts_with(p.as_str()),
            });
        let mut entries = Vec::new();
        let mut fingerprint = Vec::new();
        for (key, (value, revision)) in selected {
            entries.push(RawEntry::new(key.clone(), value.clone()));
            fingerprint.push((key.clone(), *revision));
        }
        let payload = RawPayload {
            entries,
            revision: Some(state.revision.to_string()),
        };
        Ok((payload, fingerprint))
    }
}

fn unreachable_error() -> SourceError {
    SourceError::Connection {
        message: "memory store is down".to_owned(),
        source: None,
    }
}

#[async_trait]
impl ReadableDataSource for MemorySource {
    fn describe(&self) -> String {
        match &self.selector {
            Selector::Key(key) => format!("memory key {key}"),
            Selector::Prefix(prefix) => format!("memory prefix {prefix}"),
        }
    }

    async fn read(&mut self) -> Result<RawPayload, SourceError> {
        {
            let mut state = self.store.lock();
            state.reads += 1;
            if state.read_times.len() == READ_LOG {
                state.read_times.remove(0);
            }
            state.read_times.push(tokio::time::Instant::now());
        }
        let (payload, fingerprint) = self.snapshot()?;
        self.seen = Some(fingerprint);
        Ok(payload)
    }

    async fn watch(&mut self) -> Result<WatchEvent, SourceError> {
        loop {
            if self.store.lock().down {
                return Err(unreachable_error());
            }
            self.changes
                .changed()
                .await
                .map_err(|_| SourceError::Closed)?;
            let (payload, fingerprint) = self.snapshot()?;
            if self.seen.as_ref() != Some(&fingerprint) {
                self.seen = Some(fingerprint);
                return Ok(WatchEvent::Changed(payload));
            }
        }
    }
}
