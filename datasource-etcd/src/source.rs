//! [`EtcdSource`]: GET a key or prefix, then watch it from the next revision.

use std::collections::BTreeMap;
use std::fmt;

use async_trait::async_trait;
use etcd_client::{Client, EventType, GetOptions, WatchOptions, WatchResponse, WatchStream};
use sentinel_core::datasource::{
    HealthCheck, RawEntry, RawPayload, ReadableDataSource, SourceError, WatchEvent,
};
use tokio::time::Instant;

use crate::config::EtcdConfig;
use crate::error::{map_error, timed_out, Recovery};

mod io;

/// What a source reads: one key, or every key under a prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Key(String),
    Prefix(String),
}

impl Target {
    fn name(&self) -> &str {
        match self {
            Target::Key(k) | Target::Prefix(k) => k,
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Key(k) => write!(f, "key {k}"),
            Target::Prefix(p) => write!(f, "prefix {p}"),
        }
    }
}

/// An etcd key or prefix as a rule source.
///
/// - [`read`](ReadableDataSource::read) GETs the key (or every key under the prefix, sorted by
///   key) and returns the response header's revision as the payload revision. It connects
///   first if there is no client, and it drops any open watch.
/// - [`watch`](ReadableDataSource::watch) opens a watch from that revision + 1 on first use and
///   waits for the next change, so nothing between the GET and the watch is missed.
///   - Key source: a PUT yields [`WatchEvent::Changed`] with the new value, a DELETE yields
///     `Changed(RawPayload::absent())`. When one response holds several events for the key,
///     the last one wins.
///   - Prefix source: the source keeps the last read entries and applies every event of one
///     watch response to them, then yields `Changed` with the whole new set. A transaction that
///     changes several keys is therefore applied at once.
///   - The payload revision is the revision of the last event.
///   - A watch that etcd cancels because its start revision was compacted yields
///     [`WatchEvent::Resync`]: the driver reads again and the next watch starts after that read.
///     etcd checks the token and the permissions when it creates a watch, and reports a refusal
///     as a cancellation ("invalid auth token" for an expired token, "permission denied"). Such
///     a watch is re-opened once after authenticating again; refused again, it is
///     [`SourceError::Auth`] or [`SourceError::PermissionDenied`]. A watch cancelled for any
///     other reason is an error, so the driver backs off before it reads again.
///   - A broken stream is [`SourceError::Connection`]; the watch and the client are dropped and
///     the next `read` connects again.
///   - While it waits, the source sends a progress request on the watch every
///     [`health_check`](crate::EtcdConfigBuilder::health_check) interval (1 s by default);
///     a stream that then stays silent for the check's timeout (2 s) is
///     [`SourceError::Connection`] too, naming both settings. A frozen server is so noticed
///     within 3 s by default.
/// - Authentication: with credentials, the client re-authenticates and retries once when etcd
///   refuses its token (simple tokens expire after `--auth-token-ttl` of inactivity and are lost
///   on a server restart). If that still fails the next `read` authenticates afresh. Wrong
///   credentials give [`SourceError::Auth`], a user who may not read the key
///   [`SourceError::PermissionDenied`]. No message contains the password.
pub struct EtcdSource {
    config: EtcdConfig,
    target: Target,
    client: Option<Client>,
    watch: Option<WatchStream>,
    /// Revision of the last read or event; the next watch starts right after it.
    revision: i64,
    /// When to send the next progress request on the open watch.
    check_at: Instant,
    /// When the progress request still unanswered was sent.
    check_sent: Option<Instant>,
    /// For a prefix source, the entries as of `revision`.
    entries: BTreeMap<String, Vec<u8>>,
    /// Set when etcd refused the token; the next read authenticates before its GET.
    reauthenticate: bool,
    /// How often the client authenticated again after etcd refused its token.
    reauthentications: u64,
    /// The endpoint the client talks to: one at a time, the next one after a connection
    /// failure, so a dead first endpoint never fails a read while another answers.
    endpoint: usize,
    closed: bool,
}

impl fmt::Debug for EtcdSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdSource")
            .field("target", &self.target)
            .field("endpoints", &self.config.endpoints)
            .field("revision", &self.revision)
            .field("connected", &self.client.is_some())
            .field("watching", &self.watch.is_some())
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}

impl EtcdSource {
    /// A source for one key. The payload has one entry, or none when the key does not exist.
    pub fn key(config: EtcdConfig, key: impl Into<String>) -> Self {
        Self::new(config, Target::Key(key.into()))
    }

    /// A source for every key under `prefix`, one entry per key, sorted by key.
    pub fn prefix(config: EtcdConfig, prefix: impl Into<String>) -> Self {
        Self::new(config, Target::Prefix(prefix.into()))
    }

    fn new(config: EtcdConfig, target: Target) -> Self {
        Self {
            config,
            target,
            client: None,
            watch: None,
            revision: 0,
            check_at: Instant::now(),
            check_sent: None,
            entries: BTreeMap::new(),
            reauthenticate: false,
            reauthentications: 0,
            endpoint: 0,
            closed: false,
        }
    }

    /// The revision of the last read or watch event (0 before the first read).
    pub fn revision(&self) -> i64 {
        self.revision
    }

    /// Returns the client, connecting (and authenticating) first if there is none.
    async fn client(&mut self) -> Result<Client, SourceError> {
        if let Some(client) = &self.client {
            if self.reauthenticate {
                let client = client.clone();
                let timeout = self.config.request_timeout();
                match tokio::time::timeout(timeout, client.refresh_token()).await {
                    Ok(Ok(())) => {
                        self.reauthenticate = false;
                        self.reauthentications += 1;
                        return Ok(client);
                    }
                    Ok(Err(e)) => return Err(self.fail("authenticate", e)),
                    Err(_) => {
                        self.client = None;
                        return Err(timed_out("authenticate", timeout));
                    }
                }
            }
            return Ok(client.clone());
        }
        let timeout = self.config.connect_timeout() + self.config.request_timeout();
        let endpoints = self.config.endpoints();
        let endpoint = endpoints
            .get(self.endpoint % endpoints.len().max(1))
            .cloned()
            .into_iter()
            .collect::<Vec<_>>();
        match tokio::time::timeout(timeout, self.config.connect_to(&endpoint)).await {
            Ok(Ok(client)) => {
                tracing::debug!(source = %self.describe(), "connected to etcd");
                self.reauthenticate = false;
                self.client = Some(client.clone());
                Ok(client)
            }
            Ok(Err(e)) => Err(self.fail("connect", e)),
            Err(_) => {
                self.endpoint = self.endpoint.wrapping_add(1);
                Err(timed_out("connect", timeout))
            }
        }
    }

    /// Maps an error and applies its recovery to this source.
    fn fail(&mut self, op: &str, err: etcd_client::Error) -> SourceError {
        let op = format!("{op} {}", self.target.name());
        let (error, recovery) = map_error(&op, err);
        match recovery {
            Recovery::Keep => {}
            Recovery::Reconnect => {
                self.client = None;
                self.endpoint = self.endpoint.wrapping_add(1);
            }
            Recovery::Reauthenticate => self.reauthenticate = true,
        }
        error
    }

    fn get_options(&self) -> Option<GetOptions> {
        match self.target {
            Target::Key(_) => None,
            Target::Prefix(_) => Some(GetOptions::new().with_prefix()),
        }
    }

    /// The payload to hand the driver. A key source moves its value out (it keeps nothing
    /// between events); a prefix source keeps its union, to apply the next event's delta to,
    /// and hands out a copy.
    fn payload(&mut self) -> RawPayload {
        let entries = match self.target {
            Target::Key(_) => std::mem::take(&mut self.entries)
                .into_iter()
                .map(|(k, v)| RawEntry::new(k, v))
                .collect(),
            Target::Prefix(_) => self
                .entries
                .iter()
                .map(|(k, v)| RawEntry::new(k.clone(), v.clone()))
                .collect(),
        };
        RawPayload {
            entries,
            revision: Some(self.revision.to_string()),
        }
    }

    fn check_size(&self, entries: &BTreeMap<String, Vec<u8>>) -> Result<(), SourceError> {
        let size: usize = entries.values().map(Vec::len).sum();
        let limit = self.config.max_payload_bytes();
        if size > limit {
            return Err(SourceError::TooLarge { size, limit });
        }
        Ok(())
    }

    /// Opens the watch from the revision after the last read or event.
    async fn open_watch(&mut self) -> Result<(), SourceError> {
        let client = self.client().await?;
        let mut options = WatchOptions::new().with_start_revision(self.revision + 1);
        if let Target::Prefix(_) = self.target {
            options = options.with_prefix();
        }
        let mut watch_client = client
            .watch_client()
            .max_decoding_message_size(self.config.max_message_bytes());
        let key = self.target.name().to_owned();
        let timeout = self.config.request_timeout();
        match tokio::time::timeout(timeout, watch_client.watch(key, Some(options))).await {
            Ok(Ok(stream)) => {
                tracing::debug!(
                    source = %self.describe(),
                    from_revision = self.revision + 1,
                    "etcd watch opened"
                );
                self.watch = Some(stream);
                self.check_at = Instant::now() + self.config.health_check().0;
                self.check_sent = None;
                Ok(())
            }
            Ok(Err(e)) => Err(self.fail("watch", e)),
            Err(_) => {
                self.client = None;
                Err(timed_out("watch", timeout))
            }
        }
    }

    /// Applies one watch response. `None` means nothing to report (the creation notice, a
    /// progress notice, or events for other keys).
    fn apply(&mut self, resp: &WatchResponse) -> Result<Option<WatchEvent>, SourceError> {
        if resp.compact_revision() > 0 {
            tracing::info!(
                source = %self.describe(),
                revision = self.revision,
                compact_revision = resp.compact_revision(),
                "etcd compacted past the watch position; reading again"
            );
            self.watch = None;
            return Ok(Some(WatchEvent::Resync));
        }
        if resp.canceled() {
            self.watch = None;
            let reason = resp.cancel_reason().to_owned();
            tracing::warn!(source = %self.describe(), %reason, "etcd cancelled the watch");
            // etcd checks the token and the permissions when it creates a watch, and reports a
            // refusal as a cancellation: "permission denied", or "invalid auth token" for an
            // expired one. Either way authenticate again before the next attempt.
            if reason.contains("invalid auth token") {
                self.reauthenticate = true;
                return Err(SourceError::Auth {
                    message: format!("watch {}: {reason}", self.target.name()),
                });
            }
            if reason.contains("permission denied") {
                self.reauthenticate = true;
                return Err(SourceError::PermissionDenied {
                    message: format!("watch {}: {reason}", self.target.name()),
                });
            }
            return Err(SourceError::Backend {
                message: format!("watch {}: cancelled by etcd: {reason}", self.target.name()),
                source: None,
            });
        }
        let events = resp.events();
        if events.is_empty() {
            return Ok(None);
        }
        let mut entries = match self.target {
            Target::Key(_) => BTreeMap::new(),
            Target::Prefix(_) => self.entries.clone(),
        };
        let mut revision = self.revision;
        let mut touched = false;
        for event in events {
            let Some(kv) = event.kv() else { continue };
            if let Target::Key(k) = &self.target {
                if kv.key() != k.as_bytes() {
                    continue;
                }
            }
            let key = String::from_utf8_lossy(kv.key()).into_owned();
            match event.event_type() {
                EventType::Put => {
                    entries.insert(key, kv.value().to_vec());
                }
                EventType::Delete => {
                    entries.remove(&key);
                }
            }
            revision = revision.max(kv.mod_revision());
            touched = true;
        }
        if !touched {
            return Ok(None);
        }
        // The local copy follows the stream even over the cap (the watch stays open), so the
        // value is reported again as soon as it shrinks.
        self.entries = entries;
        self.revision = revision;
        self.check_size(&self.entries)?;
        Ok(Some(WatchEvent::Changed(self.payload())))
    }
}

#[async_trait]
impl ReadableDataSource for EtcdSource {
    fn health_check(&self) -> Option<HealthCheck> {
        let (interval, timeout) = self.config.health_check();
        Some(HealthCheck::new(
            format!(
                "a progress request on the watch every {interval:?}, answered within {timeout:?}"
            ),
            self.config.frozen_server_detection(),
        ))
    }

    fn describe(&self) -> String {
        format!(
            "etcd {} at {}",
            self.target,
            self.config.describe_endpoints()
        )
    }

    async fn read(&mut self) -> Result<RawPayload, SourceError> {
        // A connection failure moves to the next endpoint: try each once before failing.
        let mut attempts = self.config.endpoints().len().max(1);
        loop {
            match self.read_once().await {
                Err(SourceError::Connection { .. }) if attempts > 1 => attempts -= 1,
                result => return result,
            }
        }
    }

    async fn watch(&mut self) -> Result<WatchEvent, SourceError> {
        self.watch_events().await
    }

    fn reauthentications(&self) -> u64 {
        self.reauthentications
    }

    async fn close(&mut self) {
        self.close_source().await;
    }
}
