//! [`NacosSource`]: GET the configs, then long-poll the listener with their MD5s.

use std::fmt;

use async_trait::async_trait;
use sentinel_core::datasource::{
    HealthCheck, RawEntry, RawPayload, ReadableDataSource, SourceError, WatchEvent,
};

use crate::client::{Client, Fetched};
use crate::config::{ConfigKey, NacosConfig, SENTINEL_GROUP};

/// One or more Nacos configs (dataIds) as a rule source.
///
/// - [`read`](ReadableDataSource::read) GETs every config and remembers its MD5. The payload
///   has one entry per config that exists, keyed
///   [`ConfigKey::entry_key`] (`{group}/{dataId}`); a missing config (404) has no entry,
///   and when none exists the payload is absent (the driver's delete policy decides). The
///   payload revision is the MD5s, comma-separated.
/// - [`watch`](ReadableDataSource::watch) long-polls `/v1/cs/configs/listener` with those
///   MD5s, all configs in one request as the Nacos SDK does, and answers
///   [`WatchEvent::Resync`] when the server reports a change, so the driver reads every
///   config again and applies them together: a change to one dataId applies atomically with
///   the others. A poll that times out with no change is repeated. A config changed between
///   the GET and the poll has another MD5 by then, so the server answers at once. While the
///   poll waits, the source checks every second that the server answers
///   ([`health_check`](crate::NacosConfigBuilder::health_check)); a check unanswered
///   within 2 s ends the poll with [`SourceError::Connection`], so a frozen server is
///   reported within 3 s by default.
/// - Servers are tried in turn: a connection error moves to the next one. With credentials
///   the source logs in, refreshes its token before it expires, and logs in again when a
///   server refuses it (a 403: expired or revoked), which
///   [`SourceStatus::reauthentications`](sentinel_core::datasource::SourceStatus::reauthentications)
///   counts. A request answered by another server than the one before (a failover) counts
///   as a reconnect ([`ReadableDataSource::reconnects`]): the driver confirms a change read
///   right after it, because a restarted server answers before it has reloaded its configs.
pub struct NacosSource {
    client: Client,
    /// The configs, sorted, with the MD5 of what the last read found (`""` when absent).
    configs: Vec<(ConfigKey, String)>,
    read_once: bool,
    closed: bool,
}

impl fmt::Debug for NacosSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NacosSource")
            .field("at", &self.client.config().describe())
            .field("configs", &self.configs)
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}

impl NacosSource {
    /// A source for one config.
    pub fn new(
        config: NacosConfig,
        data_id: impl Into<String>,
        group: impl Into<String>,
    ) -> Result<Self, SourceError> {
        Self::configs(config, [ConfigKey::new(data_id, group)])
    }

    /// A source for several configs, applied together: a change to any of them applies with
    /// the others in one update. Give each a converter with
    /// [`DataSourceBuilder::converter_for`](sentinel_core::datasource::DataSourceBuilder::converter_for)
    /// and its [`ConfigKey::entry_key`] when they hold different rule families.
    pub fn configs(
        config: NacosConfig,
        keys: impl IntoIterator<Item = ConfigKey>,
    ) -> Result<Self, SourceError> {
        let mut configs: Vec<(ConfigKey, String)> =
            keys.into_iter().map(|k| (k, String::new())).collect();
        configs.sort();
        configs.dedup_by(|a, b| a.0 == b.0);
        if configs.is_empty() {
            return Err(SourceError::Backend {
                message: "a Nacos source needs at least one dataId".to_owned(),
                source: None,
            });
        }
        Ok(Self {
            client: Client::new(config)?,
            configs,
            read_once: false,
            closed: false,
        })
    }

    /// The Sentinel dashboard's dataIds for `app` in `SENTINEL_GROUP`: `{app}-flow-rules`,
    /// `{app}-degrade-rules`, `{app}-system-rules`, `{app}-authority-rules` and
    /// `{app}-param-rules`, in that order (see [`dashboard_keys`]).
    pub fn dashboard(config: NacosConfig, app: &str) -> Result<Self, SourceError> {
        Self::configs(config, dashboard_keys(app))
    }

    /// The configs this source reads.
    pub fn keys(&self) -> impl Iterator<Item = &ConfigKey> {
        self.configs.iter().map(|(k, _)| k)
    }

    async fn read_all(&mut self) -> Result<RawPayload, SourceError> {
        if self.closed {
            return Err(SourceError::Closed);
        }
        let mut entries = Vec::new();
        let mut size = 0usize;
        let mut md5s = Vec::with_capacity(self.configs.len());
        for i in 0..self.configs.len() {
            let key = self.configs[i].0.clone();
            match self.client.get(&key).await? {
                Fetched::Found { content, md5 } => {
                    size += content.len();
                    entries.push(RawEntry::new(key.entry_key(), content));
                    md5s.push(md5);
                }
                Fetched::Absent => md5s.push(String::new()),
            }
        }
        // The MD5s move even when the total is over the cap, so the next poll waits for the
        // next change rather than reporting this one again.
        for ((_, held), md5) in self.configs.iter_mut().zip(&md5s) {
            held.clone_from(md5);
        }
        self.read_once = true;
        let limit = self.client.config().max_payload_bytes();
        if size > limit {
            return Err(SourceError::TooLarge { size, limit });
        }
        entries.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(RawPayload {
            entries,
            revision: Some(md5s.join(",")),
        })
    }

    async fn next_change(&mut self) -> Result<WatchEvent, SourceError> {
        loop {
            if self.closed {
                return Err(SourceError::Closed);
            }
            if !self.read_once {
                return Ok(WatchEvent::Resync);
            }
            // A long poll is silent until a change or its timeout: a health check beside it
            // tells a frozen server from a quiet one.
            let check = self.client.health_check();
            let changed = tokio::select! {
                changed = self.client.listen(&self.configs) => changed?,
                error = check.until_unanswered() => {
                    self.client.next_server();
                    return Err(error);
                }
            };
            if !changed.is_empty() {
                tracing::debug!(source = %self.describe(), ?changed, "Nacos reports a change");
                return Ok(WatchEvent::Resync);
            }
        }
    }
}

/// The Sentinel dashboard's dataIds for `app` in `SENTINEL_GROUP`, as its Nacos rule
/// publishers name them: `{app}-flow-rules`, `{app}-degrade-rules`, `{app}-system-rules`,
/// `{app}-authority-rules`, `{app}-param-rules` (hot parameters, read with
/// [`ParamFlowJson`](sentinel_core::datasource::ParamFlowJson)).
pub fn dashboard_keys(app: &str) -> [ConfigKey; 5] {
    ["flow", "degrade", "system", "authority", "param"]
        .map(|family| ConfigKey::new(format!("{app}-{family}-rules"), SENTINEL_GROUP))
}

#[async_trait]
impl ReadableDataSource for NacosSource {
    fn health_check(&self) -> Option<HealthCheck> {
        let config = self.client.config();
        let (interval, timeout) = config.health_check();
        Some(HealthCheck::new(
            format!("a readiness request every {interval:?} beside the long poll, answered within {timeout:?}"),
            config.frozen_server_detection(),
        ))
    }

    fn describe(&self) -> String {
        let keys: Vec<String> = self.keys().map(ToString::to_string).collect();
        format!(
            "nacos {} at {}",
            keys.join(","),
            self.client.config().describe()
        )
    }

    async fn read(&mut self) -> Result<RawPayload, SourceError> {
        self.read_all().await
    }

    async fn watch(&mut self) -> Result<WatchEvent, SourceError> {
        self.next_change().await
    }

    fn reauthentications(&self) -> u64 {
        self.client.relogins()
    }

    fn reconnects(&self) -> u64 {
        self.client.failovers()
    }

    async fn close(&mut self) {
        self.closed = true;
        tracing::debug!(source = %self.describe(), "nacos source closed");
    }
}
