//! [`NatsSource`]: read a key (or every key matching a wildcard) of a JetStream key-value
//! bucket, then watch from the stream position of that read.

use std::collections::BTreeMap;
use std::fmt;

use async_nats::jetstream::kv::{Operation, Store, Watch};
use async_trait::async_trait;
use futures_util::StreamExt;
use sentinel_core::datasource::{
    HealthCheck, RawEntry, RawPayload, ReadableDataSource, SourceError, WatchEvent,
};

use crate::config::{MissingBucket, NatsConfig};
use crate::connect::{Connection, Disconnects};

/// What a source reads: one key, or every key matching a wildcard (`rules.flow.>`).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Key(String),
    Pattern(String),
}

impl Target {
    fn filter(&self) -> &str {
        match self {
            Target::Key(k) | Target::Pattern(k) => k,
        }
    }

    fn matches(&self, key: &str) -> bool {
        match self {
            Target::Key(k) => k == key,
            Target::Pattern(_) => true,
        }
    }
}

/// A key of a NATS JetStream key-value bucket, or every key matching a wildcard, as a rule
/// source.
///
/// - [`read`](ReadableDataSource::read) notes the bucket's stream position first, then reads
///   the key (or lists the keys matching the wildcard and reads each). The payload has one
///   entry per key that holds a value, sorted by key; the revision is the stream position.
/// - [`watch`](ReadableDataSource::watch) watches the key or wildcard from the position after
///   the read, so a change made during the read is delivered again: an event at or below the
///   revision the read returned for its key is skipped, a newer one applied. Nothing between
///   the read and the watch is lost, and nothing older is applied after newer. Events
///   already waiting are applied together, so a burst of puts to a wildcard source is one
///   update. Deletes and purges remove their key (for a key source: the payload is absent and
///   the driver's delete policy applies).
/// - A disconnect (the client reconnects by itself) ends the watch with
///   [`SourceError::Connection`]; the driver backs off and reads again once the client is
///   back, then watches from the new position. Updates made while the client was away are in
///   that read. The source listens for disconnects from the start of each read until its
///   watch ends, so a connection lost during the read or while the watch is being set up
///   ends them too, at once, rather than leaving a watch that waits on a dead connection.
/// - A server that freezes without closing the connection is noticed by the client's PINGs
///   ([`health_check_interval`](crate::NatsConfigBuilder::health_check_interval)): within 3 s by default.
/// - A bucket that does not exist is an error naming it, or, with
///   [`MissingBucket::Wait`], no rules until someone creates it.
pub struct NatsSource {
    connection: Connection,
    bucket: String,
    target: Target,
    store: Option<Store>,
    watch: Option<Watch>,
    /// The client's disconnects since the last read began; kept across the watch setup and
    /// the watch, so a disconnect at any point between is heard.
    lost: Option<Disconnects>,
    /// The values as of `position`, with the revision each was read or changed at.
    held: BTreeMap<String, (u64, Vec<u8>)>,
    /// The stream position of the last read or event; the watch starts after it.
    position: u64,
    read_once: bool,
    closed: bool,
}

impl fmt::Debug for NatsSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NatsSource")
            .field("at", &self.connection.config().describe())
            .field("bucket", &self.bucket)
            .field("target", &self.target)
            .field("position", &self.position)
            .field("watching", &self.watch.is_some())
            .finish_non_exhaustive()
    }
}

impl NatsSource {
    /// A source for one key of `bucket`.
    pub fn key(config: NatsConfig, bucket: impl Into<String>, key: impl Into<String>) -> Self {
        Self::new(config, bucket.into(), Target::Key(key.into()))
    }

    /// A source for every key of `bucket` matching `pattern` (NATS subject wildcards: `*` is
    /// one token, `>` the rest: `rules.flow.>`). The keys' values, each a document of the
    /// converter's format, apply together as one update.
    pub fn wildcard(
        config: NatsConfig,
        bucket: impl Into<String>,
        pattern: impl Into<String>,
    ) -> Self {
        Self::new(config, bucket.into(), Target::Pattern(pattern.into()))
    }

    fn new(config: NatsConfig, bucket: String, target: Target) -> Self {
        Self {
            connection: Connection::new(config),
            bucket,
            target,
            store: None,
            watch: None,
            lost: None,
            held: BTreeMap::new(),
            position: 0,
            read_once: false,
            closed: false,
        }
    }

    /// The stream position of the last read or event (0 before the first read).
    pub fn position(&self) -> u64 {
        self.position
    }

    fn op(&self, what: &str) -> String {
        format!("{what} {} in bucket {}", self.target.filter(), self.bucket)
    }

    /// Drops the watch and the bucket handle; the next read opens them again.
    fn reset(&mut self) {
        self.watch = None;
        self.store = None;
        self.lost = None;
    }

    /// The error for a connection lost during `what`; it names the ping setting that bounds
    /// how soon a frozen server is noticed.
    fn lost_error(&self, what: &str) -> SourceError {
        SourceError::Connection {
            message: format!(
                "{}: the connection to NATS was lost (the client PINGs an idle connection every \
                 {:?} and drops it when two PINGs go unanswered)",
                self.op(what),
                self.connection.config().health_check_interval()
            ),
            source: None,
        }
    }

    fn payload(&self) -> Result<RawPayload, SourceError> {
        let size: usize = self.held.values().map(|(_, v)| v.len()).sum();
        let limit = self.connection.config().max_payload_bytes();
        if size > limit {
            return Err(SourceError::TooLarge { size, limit });
        }
        Ok(RawPayload {
            entries: self
                .held
                .iter()
                .map(|(k, (_, v))| RawEntry::new(k.clone(), v.clone()))
                .collect(),
            revision: Some(self.position.to_string()),
        })
    }

    /// Reads every value, listening for disconnects from before the first request; the
    /// listener is kept for the watch that follows.
    async fn read_all(&mut self) -> Result<RawPayload, SourceError> {
        if self.closed {
            return Err(SourceError::Closed);
        }
        self.watch = None;
        self.lost = None;
        let mut lost = self.connection.disconnects();
        let result = tokio::select! {
            result = self.read_values() => result,
            () = lost.wait() => Err(self.lost_error("read")),
        };
        if result.is_ok() {
            self.lost = Some(lost);
        }
        result
    }

    async fn read_values(&mut self) -> Result<RawPayload, SourceError> {
        let Some(store) = self.connection.bucket(&self.bucket).await? else {
            return match self.connection.config().missing_bucket {
                MissingBucket::Fail => Err(SourceError::Backend {
                    message: format!(
                        "bucket {} does not exist: create it (`nats kv add {}`), or let the \
                         source wait for it (MissingBucket::Wait)",
                        self.bucket, self.bucket
                    ),
                    source: None,
                }),
                MissingBucket::Wait { .. } => {
                    self.held.clear();
                    self.read_once = true;
                    Ok(RawPayload::absent())
                }
            };
        };
        // The position first: anything that changes while the keys are read is delivered
        // again by the watch from here, and skipped where the read already has it.
        let position = self.connection.last_sequence(&store).await?;
        let keys = match &self.target {
            Target::Key(key) => vec![key.clone()],
            Target::Pattern(_) => self.connection.keys(&store, &self.op("list keys")).await?,
        };
        let keys: Vec<String> = keys
            .into_iter()
            .filter(|k| self.target_matches(k))
            .collect();
        let mut held = BTreeMap::new();
        for key in keys {
            let op = format!("get {key} in bucket {}", self.bucket);
            if let Some(entry) = self.connection.entry(&store, &key, &op).await? {
                if entry.operation == Operation::Put {
                    held.insert(entry.key, (entry.revision, entry.value.to_vec()));
                }
            }
        }
        self.held = held;
        self.position = position;
        self.store = Some(store);
        self.read_once = true;
        tracing::debug!(source = %self.describe(), position, keys = self.held.len(), "nats read");
        self.payload()
    }

    /// True when `key` is the source's key, or matches its wildcard.
    fn target_matches(&self, key: &str) -> bool {
        match &self.target {
            Target::Key(k) => k == key,
            Target::Pattern(pattern) => subject_matches(pattern, key),
        }
    }

    /// Waits for the next change, with the disconnect listener of the last read (or a fresh
    /// one, before any read), which it keeps for the next call.
    async fn next_change(&mut self) -> Result<WatchEvent, SourceError> {
        let mut lost = match self.lost.take() {
            Some(lost) => lost,
            None => self.connection.disconnects(),
        };
        let result = self.next_change_heard(&mut lost).await;
        if result.is_ok() {
            self.lost = Some(lost);
        }
        result
    }

    async fn next_change_heard(
        &mut self,
        lost: &mut Disconnects,
    ) -> Result<WatchEvent, SourceError> {
        loop {
            if self.closed {
                return Err(SourceError::Closed);
            }
            if !self.read_once {
                return Ok(WatchEvent::Resync);
            }
            let Some(store) = self.store.clone() else {
                // The bucket was missing (MissingBucket::Wait): look again later.
                if let MissingBucket::Wait { poll } = self.connection.config().missing_bucket {
                    tokio::time::sleep(poll).await;
                }
                return Ok(WatchEvent::Resync);
            };
            if self.watch.is_none() {
                let op = self.op("watch");
                let from = self.position + 1;
                let watch = tokio::select! {
                    watch = self.connection.watch(&store, self.target.filter(), from, &op) => watch?,
                    () = lost.wait() => return Err(self.lost_error("open the watch of")),
                };
                self.watch = Some(watch);
            }
            let Some(watch) = self.watch.as_mut() else {
                continue;
            };
            let entry = tokio::select! {
                entry = watch.next() => entry,
                () = lost.wait() => return Err(self.lost_error("watch")),
            };
            let entry = match entry {
                Some(Ok(entry)) => entry,
                Some(Err(e)) => {
                    return Err(SourceError::connection(self.op("watch"), e));
                }
                None => {
                    return Err(SourceError::Connection {
                        message: format!("{}: the watch ended", self.op("watch")),
                        source: None,
                    });
                }
            };
            let pending = entry.delta;
            let changed = self.apply(entry);
            // More events already waiting: take them too, so a burst is one update.
            if pending > 0 || !changed {
                continue;
            }
            return self.payload().map(WatchEvent::Changed);
        }
    }

    /// Applies one watch event to the held values; false when it changes nothing (an event
    /// the read already had, or for another key).
    fn apply(&mut self, entry: async_nats::jetstream::kv::Entry) -> bool {
        self.position = self.position.max(entry.revision);
        if !self.target.matches(&entry.key) {
            return false;
        }
        if let Some((held, _)) = self.held.get(&entry.key) {
            if entry.revision <= *held {
                return false;
            }
        }
        match entry.operation {
            Operation::Put => {
                self.held
                    .insert(entry.key, (entry.revision, entry.value.to_vec()));
            }
            Operation::Delete | Operation::Purge => {
                self.held.remove(&entry.key);
            }
        }
        true
    }
}

/// NATS subject matching: `*` matches one token, a final `>` one or more.
fn subject_matches(pattern: &str, subject: &str) -> bool {
    let mut subject = subject.split('.');
    for token in pattern.split('.') {
        match (token, subject.next()) {
            (">", Some(_)) => return true,
            ("*", Some(_)) => {}
            (t, Some(s)) if t == s => {}
            _ => return false,
        }
    }
    subject.next().is_none()
}

#[async_trait]
impl ReadableDataSource for NatsSource {
    fn health_check(&self) -> Option<HealthCheck> {
        let config = self.connection.config();
        Some(HealthCheck::new(
            format!(
                "the client's PING every {:?}; two unanswered drop the connection",
                config.health_check_interval()
            ),
            config.frozen_server_detection(),
        ))
    }

    fn describe(&self) -> String {
        let what = match &self.target {
            Target::Key(k) => format!("key {k}"),
            Target::Pattern(p) => format!("keys {p}"),
        };
        format!(
            "nats kv {what} in bucket {} at {}",
            self.bucket,
            self.connection.config().describe()
        )
    }

    async fn read(&mut self) -> Result<RawPayload, SourceError> {
        let result = self.read_all().await;
        if let Err(SourceError::Connection { .. }) = &result {
            self.reset();
        }
        result
    }

    async fn watch(&mut self) -> Result<WatchEvent, SourceError> {
        let result = self.next_change().await;
        if let Err(SourceError::Connection { .. }) = &result {
            self.reset();
        }
        result
    }

    async fn close(&mut self) {
        self.closed = true;
        self.reset();
        self.connection.close().await;
        tracing::debug!(source = %self.describe(), "nats source closed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_match_nats_wildcards() {
        assert!(subject_matches("rules.flow.>", "rules.flow.orders"));
        assert!(subject_matches("rules.flow.>", "rules.flow.orders.eu"));
        assert!(!subject_matches("rules.flow.>", "rules.flow"));
        assert!(subject_matches("rules.*.orders", "rules.flow.orders"));
        assert!(!subject_matches("rules.*.orders", "rules.flow.payments"));
        assert!(subject_matches("rules.flow", "rules.flow"));
        assert!(!subject_matches("rules.flow", "rules.flow.x"));
    }
}
