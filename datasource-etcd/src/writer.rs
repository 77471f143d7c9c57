//! [`EtcdRuleWriter`]: writes rule payloads to etcd, for tools, dashboards and tests.

use std::fmt;

use etcd_client::Client;
use sentinel_core::datasource::{
    encode_rules, Expected, SourceError, WritableDataSource, WriteError,
};
use sentinel_core::RuleSet;

use crate::config::EtcdConfig;
use crate::error::{map_error, timed_out};

/// Writes rule payloads to etcd.
///
/// - [`put_rules`](Self::put_rules) validates a [`RuleSet`] and stores it in the format the
///   converters read: a single-family set as that family's Sentinel JSON list (for
///   [`FlowJson`](sentinel_core::datasource::FlowJson) and its siblings), a set of several
///   families as the combined document `{"flow":[...],"degrade":[...]}` (for
///   [`CombinedJson`](sentinel_core::datasource::CombinedJson)).
/// - [`put_bytes`](Self::put_bytes) stores bytes as given, unchecked.
///
/// # A write that timed out may still land, later
///
/// A put answered with a timeout (no answer within the
/// [`request_timeout`](crate::EtcdConfigBuilder::request_timeout)) is not known to have
/// failed: the request may already be on its way through the cluster and be committed after
/// the timeout, behind a newer put made meanwhile, which it then overwrites, and every source
/// applies the older rules. After a timeout, read the key back before writing again, or write
/// through [`at`](Self::at) with `Expected::Revision` (a compare-and-set transaction on the
/// key's `mod_revision`: a stale put is refused as a conflict instead of reverting a newer
/// one).
#[derive(Clone)]
pub struct EtcdRuleWriter {
    config: EtcdConfig,
    client: Client,
}

impl fmt::Debug for EtcdRuleWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdRuleWriter")
            .field("endpoints", &self.config.endpoints)
            .finish_non_exhaustive()
    }
}

impl EtcdRuleWriter {
    /// Connects (and authenticates, with credentials).
    pub async fn connect(config: EtcdConfig) -> Result<Self, SourceError> {
        let timeout = config.connect_timeout() + config.request_timeout();
        let client = match tokio::time::timeout(timeout, config.connect()).await {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => return Err(map_error("connect", e).0),
            Err(_) => return Err(timed_out("connect", timeout)),
        };
        Ok(Self { config, client })
    }

    /// Validates every rule of `rules`, encodes the set (see [`encode_rules`]) and stores it
    /// under `key`. Returns the new store revision.
    ///
    /// An invalid set is refused whole with [`WriteError::Invalid`], naming every bad rule;
    /// nothing is written then.
    pub async fn put_rules(
        &self,
        key: impl Into<String>,
        rules: &RuleSet,
    ) -> Result<i64, WriteError> {
        let key = key.into();
        let bytes = encode_rules(&key, rules)?;
        Ok(self.put_bytes(key, bytes).await?)
    }

    /// Stores `value` under `key`, unchecked, and returns the new store revision.
    pub async fn put_bytes(
        &self,
        key: impl Into<String>,
        value: impl Into<Vec<u8>>,
    ) -> Result<i64, SourceError> {
        let key = key.into();
        let op = format!("put {key}");
        let mut kv = self
            .client
            .kv_client()
            .max_encoding_message_size(self.config.max_message_bytes());
        let resp = self.bounded(&op, kv.put(key, value, None)).await?;
        Ok(resp.header().map_or(0, |h| h.revision()))
    }

    /// Deletes `key` and returns the new store revision (unchanged when the key did not exist).
    pub async fn delete(&self, key: impl Into<String>) -> Result<i64, SourceError> {
        let key = key.into();
        let op = format!("delete {key}");
        let mut kv = self.client.kv_client();
        let resp = self.bounded(&op, kv.delete(key, None)).await?;
        Ok(resp.header().map_or(0, |h| h.revision()))
    }

    /// Compacts the store's history up to `revision`: watches that start at or before it are
    /// cancelled by etcd. Returns the store revision.
    pub async fn compact(&self, revision: i64) -> Result<i64, SourceError> {
        let op = format!("compact {revision}");
        let mut kv = self.client.kv_client();
        let resp = self.bounded(&op, kv.compact(revision, None)).await?;
        Ok(resp.header().map_or(0, |h| h.revision()))
    }

    async fn bounded<T>(
        &self,
        op: &str,
        fut: impl std::future::Future<Output = Result<T, etcd_client::Error>>,
    ) -> Result<T, SourceError> {
        let timeout = self.config.request_timeout();
        match tokio::time::timeout(timeout, fut).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(map_error(op, e).0),
            Err(_) => Err(timed_out(op, timeout)),
        }
    }
}

impl EtcdRuleWriter {
    /// This writer bound to `key`, as a [`WritableDataSource`] (with compare-and-set on the
    /// key's modification revision, in one etcd transaction).
    pub fn at(self, key: impl Into<String>) -> EtcdRuleTarget {
        EtcdRuleTarget {
            writer: self,
            key: key.into(),
        }
    }

    /// The modification revision of `key`, `None` when it does not exist.
    pub async fn revision(&self, key: &str) -> Result<Option<i64>, SourceError> {
        let op = format!("get {key}");
        let mut kv = self.client.kv_client();
        let resp = self.bounded(&op, kv.get(key, None)).await?;
        Ok(resp.kvs().first().map(|kv| kv.mod_revision()))
    }

    /// [`put_rules`](Self::put_rules), only if `key`'s modification revision is still
    /// `expected` (`None`: only if the key does not exist), in one transaction. Another
    /// revision is [`WriteError::Conflict`] and nothing is written. Returns the new store
    /// revision.
    pub async fn put_rules_if(
        &self,
        key: &str,
        rules: &RuleSet,
        expected: Option<i64>,
    ) -> Result<i64, WriteError> {
        let bytes = encode_rules(key, rules)?;
        self.put_bytes_if(key, bytes, expected).await
    }

    /// Stores `bytes` under `key`, unchecked, only if `key`'s modification revision is still
    /// `expected` (`None`: only if the key does not exist), in one transaction; another
    /// revision is [`WriteError::Conflict`]. Returns the new store revision.
    pub async fn put_bytes_if(
        &self,
        key: &str,
        bytes: Vec<u8>,
        expected: Option<i64>,
    ) -> Result<i64, WriteError> {
        use etcd_client::{Compare, CompareOp, Txn, TxnOp};
        let guard = match expected {
            Some(revision) => Compare::mod_revision(key, CompareOp::Equal, revision),
            None => Compare::version(key, CompareOp::Equal, 0),
        };
        let txn = Txn::new()
            .when([guard])
            .and_then([TxnOp::put(key, bytes, None)]);
        let op = format!("put {key} if at revision {expected:?}");
        let mut kv = self
            .client
            .kv_client()
            .max_encoding_message_size(self.config.max_message_bytes());
        let resp = self.bounded(&op, kv.txn(txn)).await?;
        if !resp.succeeded() {
            return Err(WriteError::Conflict {
                key: key.to_owned(),
                expected: expected.map_or(0, |r| u64::try_from(r).unwrap_or(0)),
            });
        }
        Ok(resp.header().map_or(0, |h| h.revision()))
    }
}

/// An [`EtcdRuleWriter`] bound to one key: a [`WritableDataSource`]. Made by
/// [`EtcdRuleWriter::at`]. Revisions are the key's modification revision.
#[derive(Debug, Clone)]
pub struct EtcdRuleTarget {
    writer: EtcdRuleWriter,
    key: String,
}

/// An etcd revision as the trait's `u64` (etcd's are positive).
fn revision_u64(revision: i64) -> u64 {
    u64::try_from(revision).unwrap_or(0)
}

#[async_trait::async_trait]
impl WritableDataSource for EtcdRuleTarget {
    fn describe(&self) -> String {
        format!(
            "etcd {} at {}",
            self.key,
            self.writer.config.describe_endpoints()
        )
    }

    async fn store(&self, bytes: Vec<u8>, expected: Expected) -> Result<Option<u64>, WriteError> {
        let revision = match expected {
            Expected::Anything => self.writer.put_bytes(self.key.as_str(), bytes).await?,
            Expected::Revision(revision) => {
                let revision = revision.map(|r| i64::try_from(r).unwrap_or(i64::MAX));
                self.writer.put_bytes_if(&self.key, bytes, revision).await?
            }
        };
        Ok(Some(revision_u64(revision)))
    }

    async fn revision(&self) -> Result<Option<u64>, SourceError> {
        Ok(self.writer.revision(&self.key).await?.map(revision_u64))
    }
}
