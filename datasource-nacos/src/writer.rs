//! [`NacosRuleWriter`]: publishes rules as the Sentinel dashboard does.

use std::fmt;

use sentinel_core::datasource::{
    encode_rules, Expected, SourceError, WritableDataSource, WriteError,
};
use sentinel_core::RuleSet;
use tokio::sync::Mutex;

use crate::client::Client;
use crate::config::{ConfigKey, NacosConfig};

/// Publishes rule payloads to Nacos (`POST /v1/cs/configs`, `type=json`), for tools,
/// dashboards and tests.
///
/// - [`put_rules`](Self::put_rules) validates a [`RuleSet`] first and publishes it in the
///   format the converters read (see [`encode_rules`]).
/// - [`put_bytes`](Self::put_bytes) publishes content as given, unchecked.
/// - A publish or delete that the server did not answer because it closed the connection
///   (a pooled connection it had dropped, past its keep-alive or after a stall) is sent once
///   more, on a new connection: publishing the same content twice is harmless. A timeout is
///   not retried.
///
/// # A publish that timed out may still land, later
///
/// A publish answered with a timeout (no answer within the
/// [`request_timeout`](crate::NacosConfigBuilder::request_timeout)) is not known to have
/// failed: a stalled server may still apply it when it resumes, after a newer publish made
/// meanwhile, which it then overwrites, and every source applies the older rules. Nacos
/// keeps no revision this writer can compare (`write_if` answers
/// [`WriteError::NoRevisions`]), so after a timeout read the config back (its MD5) before
/// publishing again.
pub struct NacosRuleWriter {
    describe: String,
    client: Mutex<Client>,
}

impl fmt::Debug for NacosRuleWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NacosRuleWriter")
            .field("at", &self.describe)
            .finish_non_exhaustive()
    }
}

impl NacosRuleWriter {
    /// A writer for `config`'s servers and namespace. It logs in (with credentials) on its
    /// first request.
    pub fn new(config: NacosConfig) -> Result<Self, SourceError> {
        Ok(Self {
            describe: config.describe(),
            client: Mutex::new(Client::new(config)?),
        })
    }

    /// Validates every rule of `rules`, encodes the set (see [`encode_rules`]) and
    /// publishes it under `key`. An invalid set is refused whole with
    /// [`WriteError::Invalid`], naming every bad rule; nothing is published then.
    pub async fn put_rules(&self, key: &ConfigKey, rules: &RuleSet) -> Result<(), WriteError> {
        let bytes = encode_rules(&key.to_string(), rules)?;
        let content = String::from_utf8(bytes).map_err(|e| {
            SourceError::backend(format!("publish {key}: the encoded rules are not UTF-8"), e)
        })?;
        Ok(self.put_bytes(key, &content).await?)
    }

    /// Publishes `content` under `key`, unchecked.
    pub async fn put_bytes(&self, key: &ConfigKey, content: &str) -> Result<(), SourceError> {
        self.client.lock().await.publish(key, content).await
    }

    /// Deletes the config `key`.
    pub async fn delete(&self, key: &ConfigKey) -> Result<(), SourceError> {
        self.client.lock().await.delete(key).await
    }
}

impl NacosRuleWriter {
    /// This writer bound to the config `key`, as a [`WritableDataSource`]. Nacos keeps no
    /// revisions this writer can compare: `write_if` answers [`WriteError::NoRevisions`].
    pub fn at(self, key: ConfigKey) -> NacosRuleTarget {
        NacosRuleTarget { writer: self, key }
    }
}

/// A [`NacosRuleWriter`] bound to one config: a [`WritableDataSource`]. Made by
/// [`NacosRuleWriter::at`].
#[derive(Debug)]
pub struct NacosRuleTarget {
    writer: NacosRuleWriter,
    key: ConfigKey,
}

#[async_trait::async_trait]
impl WritableDataSource for NacosRuleTarget {
    fn describe(&self) -> String {
        format!("nacos {} at {}", self.key, self.writer.describe)
    }

    async fn store(&self, bytes: Vec<u8>, expected: Expected) -> Result<Option<u64>, WriteError> {
        if expected != Expected::Anything {
            return Err(WriteError::NoRevisions {
                target: self.describe(),
            });
        }
        let content = String::from_utf8(bytes).map_err(|e| {
            SourceError::backend(format!("publish {}: the rules are not UTF-8", self.key), e)
        })?;
        self.writer.put_bytes(&self.key, &content).await?;
        Ok(None)
    }
}
