//! [`NatsRuleWriter`]: puts rule payloads into a key-value bucket.

use std::fmt;

use async_nats::jetstream::kv::{Config, Store, UpdateErrorKind};
use sentinel_core::datasource::{
    encode_rules, Expected, SourceError, WritableDataSource, WriteError,
};
use sentinel_core::RuleSet;

use crate::config::NatsConfig;
use crate::connect::{map_error, Connection};

/// Writes rule payloads to a JetStream key-value bucket, for tools, dashboards and tests.
///
/// - [`put_rules`](Self::put_rules) validates a [`RuleSet`] first and stores it in the format
///   the converters read (see [`encode_rules`]); [`put_rules_if`](Self::put_rules_if) only
///   when the key is still at the revision the caller read (compare-and-set), so two
///   operators cannot overwrite each other unknowingly.
/// - [`put_bytes`](Self::put_bytes) stores bytes as given, unchecked.
///
/// # A put that timed out may still land, later
///
/// A put answered with a timeout (no acknowledgement within the
/// [`request_timeout`](crate::NatsConfigBuilder::request_timeout)) is not known to have
/// failed: the server may store it after the timeout, behind a newer put made meanwhile
/// (seen in a key's history: a put reported as timed out after 5 s stored after the next
/// one), and every source then applies the older rules. After a timeout, read the key back
/// before writing again, or use [`put_rules_if`](Self::put_rules_if) (compare-and-set on the
/// key's revision), which refuses to overwrite a newer value.
pub struct NatsRuleWriter {
    connection: Connection,
    store: Store,
}

impl fmt::Debug for NatsRuleWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NatsRuleWriter")
            .field("at", &self.connection.config().describe())
            .field("bucket", &self.store.name)
            .finish_non_exhaustive()
    }
}

impl NatsRuleWriter {
    /// Connects and opens `bucket`, which must exist.
    pub async fn connect(config: NatsConfig, bucket: &str) -> Result<Self, SourceError> {
        let mut connection = Connection::new(config);
        let store = connection
            .bucket(bucket)
            .await?
            .ok_or_else(|| SourceError::Backend {
                message: format!("bucket {bucket} does not exist"),
                source: None,
            })?;
        Ok(Self { connection, store })
    }

    /// Connects and opens `bucket`, creating it (with `history` values kept per key) when it
    /// does not exist.
    pub async fn create_bucket(
        config: NatsConfig,
        bucket: &str,
        history: i64,
    ) -> Result<Self, SourceError> {
        let mut connection = Connection::new(config);
        if let Some(store) = connection.bucket(bucket).await? {
            return Ok(Self { connection, store });
        }
        let mut js = async_nats::jetstream::new(connection.client().await?);
        js.set_timeout(connection.config().request_timeout());
        let op = format!("create bucket {bucket}");
        let create = js.create_key_value(Config {
            bucket: bucket.to_owned(),
            history,
            ..Config::default()
        });
        let store = connection.bounded(&op, create).await?;
        Ok(Self { connection, store })
    }

    /// Validates every rule of `rules`, encodes the set (see [`encode_rules`]) and stores it
    /// under `key`. Returns the new revision. An invalid set is refused whole with
    /// [`WriteError::Invalid`], naming every bad rule; nothing is written then.
    pub async fn put_rules(&self, key: &str, rules: &RuleSet) -> Result<u64, WriteError> {
        let bytes = encode_rules(key, rules)?;
        Ok(self.put_bytes(key, bytes).await?)
    }

    /// [`put_rules`](Self::put_rules), only if `key` is still at `revision` (0: only if the
    /// key does not exist). Another revision is [`WriteError::Conflict`] and nothing is
    /// written.
    pub async fn put_rules_if(
        &self,
        key: &str,
        rules: &RuleSet,
        revision: u64,
    ) -> Result<u64, WriteError> {
        let bytes = encode_rules(key, rules)?;
        self.put_bytes_if(key, bytes, revision).await
    }

    /// Stores `value` under `key`, unchecked, only if `key` is still at `revision` (0: only
    /// if the key does not exist); another revision is [`WriteError::Conflict`].
    pub async fn put_bytes_if(
        &self,
        key: &str,
        bytes: Vec<u8>,
        revision: u64,
    ) -> Result<u64, WriteError> {
        let op = format!("update {key} at revision {revision}");
        let update = self.store.update(key, bytes.into(), revision);
        match tokio::time::timeout(self.connection.config().request_timeout(), update).await {
            Ok(Ok(new)) => Ok(new),
            Ok(Err(e)) if e.kind() == UpdateErrorKind::WrongLastRevision => {
                Err(WriteError::Conflict {
                    key: key.to_owned(),
                    expected: revision,
                })
            }
            Ok(Err(e)) => Err(WriteError::Store(map_error(&op, e.into()))),
            Err(_) => Err(WriteError::Store(SourceError::Connection {
                message: format!("{op}: no answer from NATS"),
                source: None,
            })),
        }
    }

    /// Stores `value` under `key`, unchecked, and returns the new revision.
    pub async fn put_bytes(
        &self,
        key: &str,
        value: impl Into<Vec<u8>>,
    ) -> Result<u64, SourceError> {
        let value: Vec<u8> = value.into();
        self.connection
            .bounded(&format!("put {key}"), self.store.put(key, value.into()))
            .await
    }

    /// Deletes `key` (a delete marker; the history stays).
    pub async fn delete(&self, key: &str) -> Result<(), SourceError> {
        self.connection
            .bounded(&format!("delete {key}"), self.store.delete(key))
            .await
    }

    /// Purges `key`: a purge marker, and its history is removed.
    pub async fn purge(&self, key: &str) -> Result<(), SourceError> {
        self.connection
            .bounded(&format!("purge {key}"), self.store.purge(key))
            .await
    }

    /// The revision of `key`'s latest value, `None` when it holds none.
    pub async fn revision(&self, key: &str) -> Result<Option<u64>, SourceError> {
        let entry = self
            .connection
            .entry(&self.store, key, &format!("get {key}"))
            .await?;
        Ok(entry
            .filter(|e| e.operation == async_nats::jetstream::kv::Operation::Put)
            .map(|e| e.revision))
    }
}

impl NatsRuleWriter {
    /// This writer bound to `key`, as a [`WritableDataSource`] (with compare-and-set on the
    /// key's revision).
    pub fn at(self, key: impl Into<String>) -> NatsRuleTarget {
        NatsRuleTarget {
            writer: self,
            key: key.into(),
        }
    }
}

/// A [`NatsRuleWriter`] bound to one key: a [`WritableDataSource`]. Made by
/// [`NatsRuleWriter::at`].
#[derive(Debug)]
pub struct NatsRuleTarget {
    writer: NatsRuleWriter,
    key: String,
}

#[async_trait::async_trait]
impl WritableDataSource for NatsRuleTarget {
    fn describe(&self) -> String {
        format!(
            "nats {}/{} at {}",
            self.writer.store.name,
            self.key,
            self.writer.connection.config().describe()
        )
    }

    async fn store(&self, bytes: Vec<u8>, expected: Expected) -> Result<Option<u64>, WriteError> {
        match expected {
            Expected::Anything => Ok(Some(self.writer.put_bytes(&self.key, bytes).await?)),
            Expected::Revision(revision) => self
                .writer
                .put_bytes_if(&self.key, bytes, revision.unwrap_or(0))
                .await
                .map(Some),
        }
    }

    async fn revision(&self) -> Result<Option<u64>, SourceError> {
        self.writer.revision(&self.key).await
    }
}
