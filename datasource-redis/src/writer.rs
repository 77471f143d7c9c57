//! [`RedisRuleWriter`]: stores rules the way Sentinel's publishers do,
//! `MULTI; SET key value; PUBLISH channel value; EXEC`.

use std::fmt;

use sentinel_core::datasource::{
    encode_rules, Expected, SourceError, WritableDataSource, WriteError,
};
use sentinel_core::RuleSet;
use tokio::sync::Mutex;

use crate::config::RedisConfig;
use crate::connect::{Commands, Connector};

/// Writes rule payloads to Redis, for tools, dashboards and tests.
///
/// Every write is one transaction, `MULTI; SET key value; PUBLISH channel value; EXEC`, the
/// shape Sentinel's own publishers use: sources here in any [`ChangeMode`](crate::ChangeMode)
/// and Sentinel Java's `RedisDataSource` listening on the same key and channel all see it.
///
/// - [`put_rules`](Self::put_rules) validates a [`RuleSet`] first and stores it in the format
///   the converters read (see [`encode_rules`]).
/// - [`put_bytes`](Self::put_bytes) stores bytes as given, unchecked.
///
/// The writer keeps one connection. With Redis Sentinel it asks the sentinels for the master
/// before each write and moves to a new one at once: after a failover the old master goes on
/// taking writes for several seconds, and loses them when the sentinels make it a replica.
/// After a broken connection or a `READONLY` answer it connects again and retries the write
/// once. A retried transaction may have been applied
/// the first time; writing the same value twice is harmless.
pub struct RedisRuleWriter {
    describe: String,
    /// One write at a time: the connector, and the connection while it works.
    state: Mutex<(Connector, Option<Commands>)>,
}

impl fmt::Debug for RedisRuleWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisRuleWriter")
            .field("at", &self.describe)
            .finish_non_exhaustive()
    }
}

impl RedisRuleWriter {
    /// Connects (and authenticates, with credentials).
    pub async fn connect(config: RedisConfig) -> Result<Self, SourceError> {
        let describe = config.describe();
        let mut connector = Connector::new(config);
        let commands = connector.commands().await?;
        Ok(Self {
            describe,
            state: Mutex::new((connector, Some(commands))),
        })
    }

    /// Validates every rule of `rules`, encodes the set (see [`encode_rules`]), stores it
    /// under `key` and publishes it on `channel`, in one transaction. Returns how many
    /// subscribers received the message.
    ///
    /// An invalid set is refused whole with [`WriteError::Invalid`], naming every bad rule;
    /// nothing is written then.
    pub async fn put_rules(
        &self,
        key: impl Into<String>,
        channel: &str,
        rules: &RuleSet,
    ) -> Result<u64, WriteError> {
        let key = key.into();
        let bytes = encode_rules(&key, rules)?;
        Ok(self.put_bytes(&key, channel, bytes).await?)
    }

    /// Stores `value` under `key` and publishes it on `channel`, unchecked, in one
    /// transaction. Returns how many subscribers received the message.
    pub async fn put_bytes(
        &self,
        key: &str,
        channel: &str,
        value: impl Into<Vec<u8>>,
    ) -> Result<u64, SourceError> {
        let value = value.into();
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("SET")
            .arg(key)
            .arg(&value)
            .cmd("PUBLISH")
            .arg(channel)
            .arg(&value);
        self.transaction(&format!("set {key}"), key, &pipe).await
    }

    /// Deletes `key` and publishes an empty message on `channel`, in one transaction, so
    /// sources in [`Notify`](crate::ChangeMode::Notify) mode read the missing key (and clear
    /// their rules, by default). Returns how many subscribers received the message.
    pub async fn delete(&self, key: &str, channel: &str) -> Result<u64, SourceError> {
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("DEL")
            .arg(key)
            .cmd("PUBLISH")
            .arg(channel)
            .arg("");
        self.transaction(&format!("del {key}"), key, &pipe).await
    }

    /// Runs the two-command transaction `pipe` (a write, then PUBLISH) on the server that
    /// holds `key`, connecting again and retrying once after a connection error, and returns
    /// PUBLISH's reply: how many subscribers received the message.
    async fn transaction(
        &self,
        op: &str,
        key: &str,
        pipe: &redis::Pipeline,
    ) -> Result<u64, SourceError> {
        let mut state = self.state.lock().await;
        let (connector, slot) = &mut *state;
        let mut retried = false;
        // After a failover the old master takes writes for seconds more, and loses them when
        // it becomes a replica: ask the sentinels first.
        if connector.master_moved().await {
            *slot = None;
        }
        loop {
            let mut commands = match slot.take() {
                Some(commands) => commands,
                None => connector.commands().await?,
            };
            let timeout = connector.config().request_timeout;
            let result = connector
                .bounded(op, timeout, commands.transaction(key, pipe, 2))
                .await
                .and_then(|replies| published_to(op, &replies));
            match result {
                Err(SourceError::Connection { .. }) if !retried => {
                    tracing::debug!(writer = %self.describe, op, "reconnecting to retry a write");
                    retried = true;
                }
                Err(e @ SourceError::Connection { .. }) => return Err(e),
                result => {
                    *slot = Some(commands);
                    return result;
                }
            }
        }
    }
}

/// The receiver count in EXEC's replies to `[write, PUBLISH]`.
fn published_to(op: &str, replies: &[redis::Value]) -> Result<u64, SourceError> {
    match replies.last() {
        Some(redis::Value::Int(n)) => Ok(u64::try_from(*n).unwrap_or_default()),
        other => Err(SourceError::Backend {
            message: format!("{op}: unexpected reply to PUBLISH: {other:?}"),
            source: None,
        }),
    }
}

impl RedisRuleWriter {
    /// This writer bound to `key` and its notification `channel`, as a
    /// [`WritableDataSource`]. A Redis key keeps no revisions: `write_if` answers
    /// [`WriteError::NoRevisions`].
    pub fn at(self, key: impl Into<String>, channel: impl Into<String>) -> RedisRuleTarget {
        RedisRuleTarget {
            writer: self,
            key: key.into(),
            channel: channel.into(),
        }
    }
}

/// A [`RedisRuleWriter`] bound to one key and channel: a [`WritableDataSource`]. Made by
/// [`RedisRuleWriter::at`].
#[derive(Debug)]
pub struct RedisRuleTarget {
    writer: RedisRuleWriter,
    key: String,
    channel: String,
}

#[async_trait::async_trait]
impl WritableDataSource for RedisRuleTarget {
    fn describe(&self) -> String {
        format!(
            "redis {} (channel {}) at {}",
            self.key, self.channel, self.writer.describe
        )
    }

    async fn store(&self, bytes: Vec<u8>, expected: Expected) -> Result<Option<u64>, WriteError> {
        if expected != Expected::Anything {
            return Err(WriteError::NoRevisions {
                target: self.describe(),
            });
        }
        self.writer
            .put_bytes(&self.key, &self.channel, bytes)
            .await?;
        Ok(None)
    }
}
