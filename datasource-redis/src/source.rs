//! [`RedisSource`]: SUBSCRIBE first, then GET the key; learn of changes from a channel, from
//! the messages' payloads, or from keyspace notifications.

use std::fmt;

use async_trait::async_trait;
use futures_util::{FutureExt, StreamExt};
use redis::aio::{PubSubSink, PubSubStream};
use sentinel_core::datasource::{
    HealthCheck, RawPayload, ReadableDataSource, SourceError, WatchEvent,
};

use crate::config::{Address, RedisConfig};
use crate::connect::{Commands, Connected, Connector, Failovers};

/// How a [`RedisSource`] learns that the rules changed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChangeMode {
    /// Any message on this channel means "read the key again" (the default, and the safe
    /// choice): the key is the truth, so a lost, repeated, reordered or wrong message cannot
    /// leave stale rules. Works with Sentinel's publishers, which run
    /// `MULTI; SET key v; PUBLISH channel v; EXEC`.
    Notify(String),
    /// Sentinel Java's `RedisDataSource` mode: each message on this channel *is* the new
    /// value, for publishers that only PUBLISH. The key is still read at start and after every
    /// reconnect (keep it in step with the messages, as Sentinel's publishers do).
    Payload(String),
    /// The key's keyspace notifications (`__keyspace@<db>__:<key>`): any command that changes
    /// the key (a plain `SET` by any tool, `DEL`, an expiry) makes the source read it again,
    /// with no cooperating publisher. The server must have `notify-keyspace-events` with `K`
    /// and the string and generic classes (`K$g`, or `KA`); the source checks that when it
    /// connects and fails otherwise.
    Keyspace,
}

impl ChangeMode {
    fn name(&self) -> &'static str {
        match self {
            ChangeMode::Notify(_) => "notify",
            ChangeMode::Payload(_) => "payload",
            ChangeMode::Keyspace => "keyspace",
        }
    }
}

/// A Redis key as a rule source, live through pub/sub.
///
/// - [`read`](ReadableDataSource::read) makes sure the source is subscribed (connecting
///   first if needed), then GETs the key. Subscribing before the GET means a change between
///   the two cannot be missed: its message is already queued. A missing key is an absent
///   payload (the driver's delete policy decides what that means). The source keeps one
///   multiplexed connection for commands and one subscription connection for its whole life;
///   it never opens a connection per read.
/// - [`watch`](ReadableDataSource::watch) waits for the next message.
///   - `Notify` and `Keyspace`: the message (and every other already queued) yields
///     [`WatchEvent::Resync`], and the driver reads the key again.
///   - `Payload`: the message's payload is the new value, [`WatchEvent::Changed`].
///   - The subscription is PINGed every
///     [`health_check`](crate::RedisConfigBuilder::health_check) interval (1 s by default). A
///     PING unanswered within its timeout (2 s) or a
///     subscription the server closes (a restart, `CLIENT KILL TYPE pubsub`) is
///     [`SourceError::Connection`], naming both settings: both connections are dropped and
///     the driver's next read connects again, subscribes again and re-reads the key, so a
///     change made while the source was away is applied. A frozen server is so reported
///     disconnected within interval + timeout (3 s by default).
///   - With Redis Sentinel the source also subscribes to a sentinel's `+switch-master`
///     channel (before it asks for the master, so no failover falls in between). When a
///     failover of its master ends, it drops both connections and answers
///     [`WatchEvent::Resync`]: the driver reads at once, which connects to the new master,
///     subscribes there and GETs the key, so a change written to the new master right after
///     the failover is applied without waiting for a PING. As a fallback (a sentinel that
///     restarted, a message lost with its connection) the sentinels are also asked at every
///     PING which master they name.
/// - A value or message larger than
///   [`max_payload_bytes`](crate::RedisConfigBuilder::max_payload_bytes) is
///   [`SourceError::TooLarge`]; the subscription stays, so a smaller value is seen at once.
pub struct RedisSource {
    connector: Connector,
    key: String,
    mode: ChangeMode,
    /// The channel subscribed to: the configured one, or the key's keyspace channel.
    channel: String,
    commands: Option<Commands>,
    sink: Option<PubSubSink>,
    messages: Option<PubSubStream>,
    /// In a cluster, the shard that holds the key.
    shard: Option<Address>,
    /// With Redis Sentinel, the subscription to a sentinel's `+switch-master`.
    failovers: Option<Failovers>,
    closed: bool,
}

impl fmt::Debug for RedisSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisSource")
            .field("at", &self.connector.config().describe())
            .field("key", &self.key)
            .field("mode", &self.mode.name())
            .field("channel", &self.channel)
            .field("subscribed", &self.messages.is_some())
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}

impl RedisSource {
    /// A source for `key` that learns of changes as `mode` says.
    pub fn new(config: RedisConfig, key: impl Into<String>, mode: ChangeMode) -> Self {
        let key = key.into();
        let channel = match &mode {
            ChangeMode::Notify(channel) | ChangeMode::Payload(channel) => channel.clone(),
            ChangeMode::Keyspace => format!("__keyspace@{}__:{key}", config.db),
        };
        Self {
            connector: Connector::new(config),
            key,
            mode,
            channel,
            commands: None,
            sink: None,
            messages: None,
            shard: None,
            failovers: None,
            closed: false,
        }
    }

    /// A source for `key` in the default [`ChangeMode::Notify`] mode: any message on
    /// `channel` makes it read the key again.
    pub fn notify(config: RedisConfig, key: impl Into<String>, channel: impl Into<String>) -> Self {
        Self::new(config, key, ChangeMode::Notify(channel.into()))
    }

    /// The key this source reads.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The channel this source subscribes to (the keyspace channel in
    /// [`ChangeMode::Keyspace`]).
    pub fn channel(&self) -> &str {
        &self.channel
    }

    fn config(&self) -> &RedisConfig {
        self.connector.config()
    }

    /// Drops both connections; the next read connects again.
    fn disconnect(&mut self) {
        self.commands = None;
        self.sink = None;
        self.messages = None;
        self.shard = None;
        self.failovers = None;
    }

    /// Drops the connections when `result` is a connection error.
    fn checked<T>(&mut self, result: Result<T, SourceError>) -> Result<T, SourceError> {
        if let Err(SourceError::Connection { .. }) = &result {
            self.disconnect();
        }
        result
    }

    /// Connects both connections and subscribes; the subscription is confirmed before this
    /// returns, so the GET that follows cannot miss a change.
    async fn subscribe(&mut self) -> Result<(), SourceError> {
        // With Redis Sentinel, hear of failovers from before the master is looked up.
        self.watch_failovers().await;
        let Connected {
            mut commands,
            pubsub,
            shard,
        } = self.connector.subscribe_ready(&self.key).await?;
        if self.mode == ChangeMode::Keyspace {
            self.check_keyspace_events(&mut commands, shard.as_ref())
                .await?;
        }
        let (mut sink, stream) = pubsub.split();
        let op = format!("subscribe {}", self.channel);
        self.connector
            .bounded(
                &op,
                self.config().request_timeout(),
                sink.subscribe(&self.channel),
            )
            .await?;
        tracing::debug!(
            source = %self.describe(),
            channel = %self.channel,
            "subscribed"
        );
        self.commands = Some(commands);
        self.sink = Some(sink);
        self.messages = Some(stream);
        self.shard = shard;
        Ok(())
    }

    /// With Redis Sentinel, subscribes to a sentinel's `+switch-master` unless already
    /// subscribed. No sentinel taking the subscription is not an error: the master lookup
    /// that follows fails on its own if none answers, and the check at every PING still
    /// notices a failover.
    async fn watch_failovers(&mut self) {
        if self.failovers.is_some() {
            return;
        }
        match self.connector.failovers().await {
            Ok(failovers) => {
                if let Some(f) = &failovers {
                    tracing::debug!(source = %self.describe(), sentinel = %f.at, "watching +switch-master");
                }
                self.failovers = failovers;
            }
            Err(e) => tracing::warn!(
                source = %self.describe(),
                error = %e,
                "cannot subscribe to +switch-master; a failover is noticed at the next PING"
            ),
        }
    }

    /// Fails when the server does not send the keyspace notifications this mode needs. A
    /// server that refuses `CONFIG GET` (an ACL without `@admin`, a managed service) is
    /// trusted, with a warning.
    async fn check_keyspace_events(
        &self,
        commands: &mut Commands,
        shard: Option<&Address>,
    ) -> Result<(), SourceError> {
        let cmd = redis::cmd("CONFIG")
            .arg("GET")
            .arg("notify-keyspace-events")
            .clone();
        let reply: Result<Vec<String>, _> = self
            .connector
            .bounded(
                "config get notify-keyspace-events",
                self.config().request_timeout(),
                commands.query_at(shard, &cmd),
            )
            .await;
        let flags = match reply {
            Ok(reply) => reply.get(1).cloned().unwrap_or_default(),
            Err(e @ SourceError::Connection { .. }) => return Err(e),
            Err(e) => {
                tracing::warn!(
                    source = %self.describe(),
                    error = %e,
                    "cannot check notify-keyspace-events; trusting that keyspace notifications are on"
                );
                return Ok(());
            }
        };
        if keyspace_events_cover_sets_and_deletes(&flags) {
            return Ok(());
        }
        Err(SourceError::Backend {
            message: format!(
                "keyspace mode needs keyspace notifications for {}, but the server's \
                 notify-keyspace-events is {flags:?}: turn them on with \
                 `CONFIG SET notify-keyspace-events KA` (or `notify-keyspace-events KA` in \
                 redis.conf; `K$g` is the least that works)",
                self.key
            ),
            source: None,
        })
    }

    /// GETs the key.
    async fn get(&mut self) -> Result<RawPayload, SourceError> {
        let Some(commands) = self.commands.as_mut() else {
            return Err(SourceError::Closed);
        };
        let op = format!("get {}", self.key);
        let cmd = redis::cmd("GET").arg(&self.key).clone();
        let value: Option<Vec<u8>> = self
            .connector
            .bounded(
                &op,
                self.connector.config().request_timeout(),
                commands.query(&cmd),
            )
            .await?;
        let Some(value) = value else {
            return Ok(RawPayload::absent());
        };
        self.check_size(value.len())?;
        Ok(RawPayload::single(self.key.clone(), value))
    }

    fn check_size(&self, size: usize) -> Result<(), SourceError> {
        let limit = self.config().max_payload_bytes();
        if size > limit {
            return Err(SourceError::TooLarge { size, limit });
        }
        Ok(())
    }

    /// Takes the messages already queued without waiting, and returns how many there were.
    fn drain_queued(&mut self) -> usize {
        let Some(messages) = self.messages.as_mut() else {
            return 0;
        };
        let mut drained = 0;
        while let Some(Some(_)) = messages.next().now_or_never() {
            drained += 1;
        }
        drained
    }

    /// PINGs the subscription connection. The error names the ping settings, so a status
    /// shows how soon a frozen server is noticed.
    async fn ping(&mut self) -> Result<(), SourceError> {
        let config = self.connector.config();
        let (interval, timeout) = config.health_check();
        let Some(sink) = self.sink.as_mut() else {
            return Err(SourceError::Closed);
        };
        let op =
            format!("ping (subscription; a PING every {interval:?}, answered within {timeout:?})");
        self.connector
            .bounded(&op, timeout, sink.ping::<()>())
            .await
    }

    /// Drops both connections after a Redis Sentinel failover, so the driver's read (at once,
    /// on [`WatchEvent::Resync`]) connects to the new master.
    fn follow_failover(&mut self, why: &str) -> WatchEvent {
        tracing::info!(source = %self.describe(), why, "Redis Sentinel failover; reconnecting to the new master");
        self.disconnect();
        WatchEvent::Resync
    }

    async fn read_value(&mut self) -> Result<RawPayload, SourceError> {
        if self.closed {
            return Err(SourceError::Closed);
        }
        if self.messages.is_none() || self.commands.is_none() {
            self.subscribe().await?;
        }
        let payload = self.get().await?;
        if let ChangeMode::Payload(_) = self.mode {
            // Messages queued by now were published before the GET was answered, so their
            // values are at most as new as the key's: applying them after it would go back.
            let stale = self.drain_queued();
            if stale > 0 {
                tracing::debug!(source = %self.describe(), stale, "dropped messages older than the read");
            }
        }
        tracing::debug!(
            source = %self.describe(),
            bytes = payload.size(),
            "redis read"
        );
        Ok(payload)
    }

    async fn next_event(&mut self) -> Result<WatchEvent, SourceError> {
        loop {
            if self.closed {
                return Err(SourceError::Closed);
            }
            let interval = self.connector.config().health_check().0;
            let Some(messages) = self.messages.as_mut() else {
                // Not subscribed (no read yet): ask the driver to read, which subscribes.
                return Ok(WatchEvent::Resync);
            };
            let message = tokio::select! {
                message = messages.next() => message,
                switch = next_failover(&mut self.failovers) => {
                    match switch {
                        Some(text) => return Ok(self.follow_failover(&format!("+switch-master {text}"))),
                        None => {
                            tracing::debug!(source = %self.describe(), "the sentinel closed the +switch-master subscription");
                            self.failovers = None;
                            continue;
                        }
                    }
                }
                () = tokio::time::sleep(interval) => {
                    self.ping().await?;
                    if self.connector.master_moved().await {
                        return Ok(self.follow_failover("the sentinels name another master"));
                    }
                    self.watch_failovers().await;
                    continue;
                }
            };
            let Some(message) = message else {
                return Err(SourceError::Connection {
                    message: format!(
                        "subscription to {}: the server closed the connection",
                        self.channel
                    ),
                    source: None,
                });
            };
            return match &self.mode {
                ChangeMode::Notify(_) | ChangeMode::Keyspace => {
                    // The read that follows answers every message queued so far too.
                    self.drain_queued();
                    Ok(WatchEvent::Resync)
                }
                ChangeMode::Payload(_) => {
                    let value = message.get_payload_bytes();
                    self.check_size(value.len())?;
                    Ok(WatchEvent::Changed(RawPayload::single(
                        self.key.clone(),
                        value.to_vec(),
                    )))
                }
            };
        }
    }
}

/// The next `+switch-master` of `failovers`; never, without a subscription.
async fn next_failover(failovers: &mut Option<Failovers>) -> Option<String> {
    match failovers {
        Some(failovers) => failovers.next().await,
        None => std::future::pending().await,
    }
}

/// True when `flags` (the value of `notify-keyspace-events`) makes the server send keyspace
/// notifications for `SET` and `DEL`: `K`, and `A` or both `$` and `g`.
fn keyspace_events_cover_sets_and_deletes(flags: &str) -> bool {
    let has = |c| flags.contains(c);
    has('K') && (has('A') || (has('$') && has('g')))
}

#[async_trait]
impl ReadableDataSource for RedisSource {
    fn health_check(&self) -> Option<HealthCheck> {
        let config = self.config();
        Some(HealthCheck::new(
            format!(
                "a PING every {:?} on the subscription, answered within {:?}",
                config.health_check().0,
                config.health_check().1
            ),
            config.frozen_server_detection(),
        ))
    }

    fn describe(&self) -> String {
        format!(
            "redis key {} ({} {}) at {}",
            self.key,
            self.mode.name(),
            self.channel,
            self.config().describe()
        )
    }

    async fn read(&mut self) -> Result<RawPayload, SourceError> {
        let result = self.read_value().await;
        self.checked(result)
    }

    async fn watch(&mut self) -> Result<WatchEvent, SourceError> {
        let result = self.next_event().await;
        self.checked(result)
    }

    async fn close(&mut self) {
        self.closed = true;
        self.disconnect();
        tracing::debug!(source = %self.describe(), "redis source closed");
    }
}

#[cfg(test)]
mod tests;
