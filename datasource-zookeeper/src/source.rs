//! [`ZooKeeperSource`]: read a znode (or every child of a path) with one-shot watches set by
//! the same requests, and read again on every event, reconnect or new session.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use async_trait::async_trait;
use futures_util::stream::{FuturesUnordered, StreamExt};
use sentinel_core::datasource::{
    HealthCheck, RawEntry, RawPayload, ReadableDataSource, SourceError, WatchEvent,
};
use zookeeper_client::{
    Client, EventType, OneshotWatcher, SessionState, StateWatcher, WatchedEvent,
};

use crate::config::{check_path, ZooKeeperConfig};
use crate::connect::Connection;

/// What a source reads: one znode, or every child of a znode.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Node(String),
    Children(String),
}

impl Target {
    fn path(&self) -> &str {
        match self {
            Target::Node(p) | Target::Children(p) => p,
        }
    }
}

/// A watch set by a read, waiting for its event.
type Armed = Pin<Box<dyn Future<Output = WatchedEvent> + Send>>;

/// What one read found: the entries, the highest zxid among them, the watches it set.
struct Read {
    entries: Vec<RawEntry>,
    zxid: Option<i64>,
    watches: Vec<OneshotWatcher>,
}

/// A znode, or every child of a znode, as a rule source.
///
/// - [`read`](ReadableDataSource::read) reads the value and sets a one-shot watch with the
///   same request (`getData` with a watch; for a node that does not exist, `exists` with a
///   watch, which fires on its creation; for children, `getChildren` with a watch, then each
///   child's `getData` with a watch). A change between the read and the watch cannot be
///   missed: they are one request.
/// - [`watch`](ReadableDataSource::watch) waits for any of those watches to fire, then reads
///   everything again and sets new watches (ZooKeeper's watches fire once), and returns the
///   new value: a change, a deletion (no value: the driver's
///   [`DeletePolicy`](sentinel_core::datasource::DeletePolicy) applies), a re-creation, a
///   child added or removed. Several events in a burst are one read.
/// - The revision is the highest zxid of what was read: the node's `mzxid` (for children,
///   also the parent's `pzxid`, which moves when a child is added or removed). A read that
///   returns an older zxid than one already read (a new session on a server that is behind)
///   makes the source `sync` the path and read again; if it is still behind, the read fails
///   (the driver retries) and the next one starts a new session: an older value is never
///   applied after a newer one.
/// - Any change of the session's state (the connection lost, the session expired) ends the
///   watch with [`SourceError::Connection`]; the driver backs off and reads again once the
///   client is back (a new session when the old one expired), so a change written while the
///   source was away is in that read.
/// - A server that freezes without closing the connection is noticed by the client's PINGs
///   ([`health_check`](crate::ZooKeeperConfigBuilder::health_check)): within 3 s by default.
pub struct ZooKeeperSource {
    connection: Connection,
    target: Target,
    armed: FuturesUnordered<Armed>,
    state: Option<StateWatcher>,
    /// The highest zxid read so far.
    zxid: i64,
    read_once: bool,
    closed: bool,
}

impl fmt::Debug for ZooKeeperSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZooKeeperSource")
            .field("at", &self.connection.config().describe())
            .field("target", &self.target)
            .field("zxid", &self.zxid)
            .field("watches", &self.armed.len())
            .finish_non_exhaustive()
    }
}

impl ZooKeeperSource {
    /// A source for the znode at `path` (absolute, under the config's chroot if it has one):
    /// its data is the payload, as Sentinel's `ZookeeperDataSource` reads it.
    pub fn node(config: ZooKeeperConfig, path: impl Into<String>) -> Self {
        Self::new(config, Target::Node(path.into()))
    }

    /// A source for every child of the znode at `path`: each child's data is a document of
    /// the converter's format, and all of them apply together as one update (children with
    /// no data are skipped). A missing parent means no rules.
    pub fn children(config: ZooKeeperConfig, path: impl Into<String>) -> Self {
        Self::new(config, Target::Children(path.into()))
    }

    fn new(config: ZooKeeperConfig, target: Target) -> Self {
        Self {
            connection: Connection::new(config),
            target,
            armed: FuturesUnordered::new(),
            state: None,
            zxid: 0,
            read_once: false,
            closed: false,
        }
    }

    /// The highest zxid read so far (0 before the first read).
    pub fn zxid(&self) -> i64 {
        self.zxid
    }

    /// How many sessions the source has established (a new one after each expiry).
    pub fn sessions(&self) -> u64 {
        self.connection.sessions()
    }

    fn op(&self, what: &str) -> String {
        format!("{what} {}", self.target.path())
    }

    /// Drops the watches; the next watch asks for a read.
    fn disarm(&mut self) {
        self.armed = FuturesUnordered::new();
        self.state = None;
    }

    /// The error for a session state change seen while watching.
    fn lost_error(&self, state: SessionState) -> SourceError {
        let config = self.connection.config();
        SourceError::Connection {
            message: format!(
                "{}: the ZooKeeper session is {state} (the client PINGs an idle connection \
                 and drops one silent for {:?}; a session unheard of for {:?} expires)",
                self.op("watch"),
                config.health_check,
                config.session_timeout,
            ),
            source: None,
        }
    }

    /// Reads everything and sets the watches; a read behind one already made is synced and
    /// made again once.
    async fn read_all(&mut self) -> Result<RawPayload, SourceError> {
        if self.closed {
            return Err(SourceError::Closed);
        }
        self.disarm();
        let path = self.target.path().to_owned();
        if let Err(reason) = check_path(&path) {
            return Err(SourceError::Backend {
                message: format!("invalid znode path {path:?}: {reason}"),
                source: None,
            });
        }
        let client = self.connection.client().await?;
        // Before the requests: a disconnect from here on ends the watch.
        let state = client.state_watcher();
        let mut synced = false;
        let read = loop {
            let read = match &self.target {
                Target::Node(_) => self.read_node(&client, &path).await?,
                Target::Children(_) => self.read_children(&client, &path).await?,
            };
            match read.zxid {
                Some(zxid) if zxid < self.zxid => {
                    if synced {
                        // A new session next time, perhaps on a server that is not behind.
                        self.connection.reset();
                        return Err(SourceError::Connection {
                            message: format!(
                                "{}: the server is behind (zxid {zxid:#x} read after \
                                 {:#x}); trying again",
                                self.op("read"),
                                self.zxid
                            ),
                            source: None,
                        });
                    }
                    synced = true;
                    let op = self.op("sync");
                    self.connection.bounded(&op, client.sync(&path)).await?;
                }
                _ => break read,
            }
        };
        let size: usize = read.entries.iter().map(|e| e.value.len()).sum();
        let limit = self.connection.config().max_payload_bytes();
        if size > limit {
            return Err(SourceError::TooLarge { size, limit });
        }
        for watch in read.watches {
            self.armed.push(Box::pin(watch.changed()));
        }
        self.state = Some(state);
        self.read_once = true;
        if let Some(zxid) = read.zxid {
            self.zxid = self.zxid.max(zxid);
        }
        tracing::debug!(source = %self.describe(), zxid = read.zxid, entries = read.entries.len(), "zookeeper read");
        let payload = RawPayload {
            entries: read.entries,
            revision: None,
        };
        Ok(match read.zxid {
            Some(zxid) => payload.with_revision(zxid.to_string()),
            None => payload,
        })
    }

    /// One znode's data with a watch; a missing node is watched with `exists`, and read
    /// again if it appeared in between.
    async fn read_node(&mut self, client: &Client, path: &str) -> Result<Read, SourceError> {
        let op = format!("get {path}");
        loop {
            if let Some((data, stat, watch)) = self
                .connection
                .optional(&op, client.get_and_watch_data(path))
                .await?
            {
                return Ok(Read {
                    entries: vec![RawEntry::new(path, data)],
                    zxid: Some(stat.mzxid),
                    watches: vec![watch],
                });
            }
            let (stat, watch) = self
                .connection
                .bounded(&format!("exists {path}"), client.check_and_watch_stat(path))
                .await?;
            if stat.is_none() {
                return Ok(Read {
                    entries: Vec::new(),
                    zxid: None,
                    watches: vec![watch],
                });
            }
            // Created between the two requests: read it.
        }
    }

    /// Every child's data, each with a watch, and the list with a watch.
    async fn read_children(&mut self, client: &Client, path: &str) -> Result<Read, SourceError> {
        let op = format!("list {path}");
        let Some((mut children, stat, list_watch)) = self
            .connection
            .optional(&op, client.get_and_watch_children(path))
            .await?
        else {
            let (stat, watch) = self
                .connection
                .bounded(&format!("exists {path}"), client.check_and_watch_stat(path))
                .await?;
            // Created in between: the watch fires at once and the next read lists it.
            let _ = stat;
            return Ok(Read {
                entries: Vec::new(),
                zxid: None,
                watches: vec![watch],
            });
        };
        children.sort();
        let mut zxid = stat.pzxid.max(stat.mzxid);
        let mut watches = vec![list_watch];
        let mut entries = Vec::with_capacity(children.len());
        let mut size = 0usize;
        let limit = self.connection.config().max_payload_bytes();
        for child in children {
            let child_path = if path == "/" {
                format!("/{child}")
            } else {
                format!("{path}/{child}")
            };
            let op = format!("get {child_path}");
            // Removed since the list: the list's watch fires and the next read drops it.
            if let Some((data, stat, watch)) = self
                .connection
                .optional(&op, client.get_and_watch_data(&child_path))
                .await?
            {
                zxid = zxid.max(stat.mzxid);
                watches.push(watch);
                size += data.len();
                if size > limit {
                    return Err(SourceError::TooLarge { size, limit });
                }
                if !data.is_empty() {
                    entries.push(RawEntry::new(child_path, data));
                }
            }
        }
        Ok(Read {
            entries,
            zxid: Some(zxid),
            watches,
        })
    }

    /// Waits for a watch to fire or the session's state to change.
    async fn next_change(&mut self) -> Result<WatchEvent, SourceError> {
        if self.closed {
            return Err(SourceError::Closed);
        }
        if !self.read_once || self.armed.is_empty() {
            return Ok(WatchEvent::Resync);
        }
        let Some(mut state) = self.state.take() else {
            return Ok(WatchEvent::Resync);
        };
        let fired = loop {
            let woke = tokio::select! {
                event = self.armed.next() => Ok(event),
                changed = state.changed() => Err(changed),
            };
            match woke {
                Ok(event) => break event,
                // Back on a connection (the read was made while the client reconnected, or a
                // flap too short to see): the client set the watches again, with the zxid it
                // had seen, and the server fires those whose node changed meanwhile.
                Err(SessionState::SyncConnected | SessionState::ConnectedReadOnly) => {}
                Err(changed) => {
                    self.disarm();
                    if changed.is_terminated() {
                        self.connection.reset();
                    }
                    return Err(self.lost_error(changed));
                }
            }
        };
        self.state = Some(state);
        match fired {
            Some(event) if event.event_type == EventType::Session => {
                // The session ended (expired, closed, credentials refused): a new one and a
                // full read.
                self.disarm();
                self.connection.reset();
                Err(self.lost_error(event.session_state))
            }
            Some(event) => {
                tracing::trace!(source = %self.describe(), path = %event.path, kind = %event.event_type, "zookeeper watch fired");
                self.read_all().await.map(WatchEvent::Changed)
            }
            None => Ok(WatchEvent::Resync),
        }
    }
}

#[async_trait]
impl ReadableDataSource for ZooKeeperSource {
    fn health_check(&self) -> Option<HealthCheck> {
        let config = self.connection.config();
        Some(HealthCheck::new(
            format!(
                "the client's PING on an idle connection; a connection silent for {:?} is \
                 dropped, noticed within {:?}",
                config.health_check,
                config.frozen_server_detection()
            ),
            config.frozen_server_detection(),
        ))
    }

    fn describe(&self) -> String {
        let what = match &self.target {
            Target::Node(p) => format!("znode {p}"),
            Target::Children(p) => format!("children of {p}"),
        };
        format!(
            "zookeeper {what} at {}",
            self.connection.config().describe()
        )
    }

    async fn read(&mut self) -> Result<RawPayload, SourceError> {
        let result = self.read_all().await;
        if result.is_err() {
            self.disarm();
        }
        result
    }

    async fn watch(&mut self) -> Result<WatchEvent, SourceError> {
        let result = self.next_change().await;
        if result.is_err() {
            self.disarm();
        }
        result
    }

    async fn close(&mut self) {
        self.closed = true;
        self.disarm();
        self.connection.close();
        tracing::debug!(source = %self.describe(), "zookeeper source closed");
    }
}
