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
///
/// # A write that timed out may still land, later
///
/// A write answered with a timeout (no reply within the
/// [`request_timeout`](crate::RedisConfigBuilder::request_timeout), or the retry's) is not
/// known to have failed: a frozen or overloaded server holds the transaction in its socket
/// buffer and runs it when it resumes, possibly after a newer write made meanwhile by another
/// writer (or by this one, on a fresh connection), which the old value then overwrites, and
/// every source applies the older rules. After a timeout, read the key back before writing
/// again, or write through [`at`](Self::at) with `Expected::Revision` (compare-and-set: a
/// stale write is refused as a conflict instead of reverting a newer one).
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
        let replies = self.run(op, key, Request::Transaction(pipe)).await?;
        published_to(op, &replies)
    }

    /// Runs `request` on the server that holds `key` (the master, with Redis Sentinel),
    /// connecting again and retrying once after a connection error.
    async fn run(
        &self,
        op: &str,
        key: &str,
        request: Request<'_>,
    ) -> Result<Vec<redis::Value>, SourceError> {
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
            let timeout = connector.config().request_timeout();
            let result = match request {
                Request::Transaction(pipe) => {
                    connector
                        .bounded(op, timeout, commands.transaction(key, pipe, 2))
                        .await
                }
                Request::Script(cmd) => connector
                    .bounded(op, timeout, commands.query::<redis::Value>(cmd))
                    .await
                    .map(|reply| match reply {
                        redis::Value::Array(replies) => replies,
                        other => vec![other],
                    }),
            };
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

    /// The revision of what `key` holds (see [`RedisRuleWriter::at`]); `None` when nothing.
    async fn revision_of(&self, key: &str) -> Result<Option<u64>, SourceError> {
        let op = format!("revision of {key}");
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(REVISION_SCRIPT)
            .arg(1)
            .arg(key)
            .arg(REVISION_DIGITS);
        let replies = self.run(&op, key, Request::Script(&cmd)).await?;
        match replies.first() {
            Some(redis::Value::Nil) | None => Ok(None),
            Some(value) => parse_revision(&op, value).map(Some),
        }
    }

    /// Stores `value` under `key` and publishes it on `channel` if `key` still holds the
    /// revision `expected` (`None`: nothing), in one script; the new revision, or
    /// [`WriteError::Conflict`].
    async fn put_bytes_if(
        &self,
        key: &str,
        channel: &str,
        value: Vec<u8>,
        expected: Option<u64>,
    ) -> Result<u64, WriteError> {
        let op = format!("set {key} if unchanged");
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(WRITE_IF_SCRIPT)
            .arg(1)
            .arg(key)
            .arg(value)
            .arg(expected.map(revision_text).unwrap_or_default())
            .arg(channel)
            .arg(REVISION_DIGITS);
        let replies = self.run(&op, key, Request::Script(&cmd)).await?;
        match replies.as_slice() {
            [redis::Value::Int(1), revision, ..] => Ok(parse_revision(&op, revision)?),
            [redis::Value::Int(0), ..] => Err(WriteError::Conflict {
                key: key.to_owned(),
                expected: expected.unwrap_or_default(),
            }),
            other => Err(SourceError::Backend {
                message: format!("{op}: unexpected reply {other:?}"),
                source: None,
            }
            .into()),
        }
    }
}

/// What the writer sends: a `MULTI` transaction or a script.
#[derive(Clone, Copy)]
enum Request<'a> {
    Transaction(&'a redis::Pipeline),
    Script(&'a redis::Cmd),
}

/// A revision of a Redis value: the first 15 hex digits (60 bits) of its SHA-1, which the
/// server computes in a script (each script gets this count as its last argument). Equal
/// values have equal revisions: a compare-and-set asks that the value be still the one read,
/// whoever wrote it.
const REVISION_DIGITS: usize = 15;

/// `EVAL`: the revision of `KEYS[1]`, or nil when it does not exist. `ARGV[1]`: the digits.
const REVISION_SCRIPT: &str = "local v = redis.call('GET', KEYS[1]) \
    if not v then return false end \
    return string.sub(redis.sha1hex(v), 1, tonumber(ARGV[1]))";

/// `EVAL`: when the revision of `KEYS[1]` is `ARGV[2]` (empty: the key does not exist), sets
/// it to `ARGV[1]`, publishes that on `ARGV[3]` and returns `{1, new revision, receivers}`;
/// otherwise `{0}`. `ARGV[4]`: the digits. A script runs alone, so nothing writes in
/// between. A key that holds `ARGV[1]` already is a success without a write: a retry after
/// a lost reply must not be reported as a conflict.
const WRITE_IF_SCRIPT: &str = "local function rev(x) \
        return string.sub(redis.sha1hex(x), 1, tonumber(ARGV[4])) end \
    local v = redis.call('GET', KEYS[1]) \
    if v == ARGV[1] then return {1, rev(v), 0} end \
    local now = '' \
    if v then now = rev(v) end \
    if now ~= ARGV[2] then return {0} end \
    redis.call('SET', KEYS[1], ARGV[1]) \
    local n = redis.call('PUBLISH', ARGV[3], ARGV[1]) \
    return {1, rev(ARGV[1]), n}";

fn revision_text(revision: u64) -> String {
    format!("{revision:0width$x}", width = REVISION_DIGITS)
}

fn parse_revision(op: &str, value: &redis::Value) -> Result<u64, SourceError> {
    let text = match value {
        redis::Value::BulkString(bytes) => std::str::from_utf8(bytes).ok(),
        redis::Value::SimpleString(text) => Some(text.as_str()),
        _ => None,
    };
    text.and_then(|t| u64::from_str_radix(t, 16).ok())
        .ok_or_else(|| SourceError::Backend {
            message: format!("{op}: not a revision: {value:?}"),
            source: None,
        })
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
    /// [`WritableDataSource`].
    ///
    /// A Redis key keeps no revisions, so its revision is a digest of its value (60 bits of
    /// its SHA-1, computed by the server): `write_if` writes only if the key still holds the
    /// value it had when its revision was read, comparing and writing in one script (and
    /// publishing on the channel, as `write` does). Two equal values have one revision.
    /// `write` returns no revision: it is the plain `MULTI` transaction Sentinel's own
    /// publishers use.
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
        match expected {
            Expected::Anything => {
                self.writer
                    .put_bytes(&self.key, &self.channel, bytes)
                    .await?;
                Ok(None)
            }
            Expected::Revision(revision) => self
                .writer
                .put_bytes_if(&self.key, &self.channel, bytes, revision)
                .await
                .map(Some),
        }
    }

    async fn revision(&self) -> Result<Option<u64>, SourceError> {
        self.writer.revision_of(&self.key).await
    }
}
