//! [`EtcdRuleWriter`]: writes rule payloads to etcd, for tools and tests.

use std::fmt;

use etcd_client::Client;
use sentinel_core::datasource::SourceError;

use crate::config::EtcdConfig;
use crate::error::{map_error, timed_out};

/// Writes raw rule payloads to etcd.
///
/// It writes bytes as given: nothing checks that they are valid rules. A writer that validates
/// a rule set before it stores it will sit on top of [`put_bytes`](Self::put_bytes).
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
        let timeout = config.connect_timeout + config.request_timeout;
        let client = match tokio::time::timeout(timeout, config.connect()).await {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => return Err(map_error("connect", e).0),
            Err(_) => return Err(timed_out("connect", timeout)),
        };
        Ok(Self { config, client })
    }

    /// Stores `value` under `key` and returns the new store revision.
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
        let timeout = self.config.request_timeout;
        match tokio::time::timeout(timeout, fut).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(map_error(op, e).0),
            Err(_) => Err(timed_out(op, timeout)),
        }
    }
}
