//! The source that reads a store and the writer that writes it, and the store's errors as a
//! command reports them.

use sentinel_core::datasource::{ReadableDataSource, WritableDataSource};
use sentinel_core::{RuleFamily, RuleSet};
use sentinel_datasource_etcd::{EtcdRuleWriter, EtcdSource};
use sentinel_datasource_file::{FileRuleWriter, FileSource};
use sentinel_datasource_nacos::{dashboard_keys, ConfigKey, NacosRuleWriter, NacosSource};
use sentinel_datasource_nats::{NatsRuleWriter, NatsSource};
use sentinel_datasource_redis::{ChangeMode, RedisRuleWriter, RedisSource};

use super::access::Access;
use super::url::{is_wildcard, Nacos, Store, DASHBOARD_FAMILIES};
use crate::failure::{chain, Failure};

impl Store {
    /// The source that reads this store.
    pub(crate) fn source(&self, access: &Access) -> Result<Box<dyn ReadableDataSource>, Failure> {
        Ok(match self {
            Store::File(path) => Box::new(FileSource::new(path).map_err(Failure::store)?),
            Store::Etcd { key, prefix, .. } => {
                let config = self.etcd(access)?;
                if *prefix {
                    Box::new(EtcdSource::prefix(config, key.clone()))
                } else {
                    Box::new(EtcdSource::key(config, key.clone()))
                }
            }
            Store::Redis { key, channel, .. } => Box::new(RedisSource::new(
                self.redis(access)?,
                key.clone(),
                ChangeMode::Notify(channel.clone()),
            )),
            Store::Nacos { target, .. } => Box::new(
                match target {
                    Nacos::Config(key) => NacosSource::configs(self.nacos(access)?, [key.clone()]),
                    Nacos::App(app) => NacosSource::dashboard(self.nacos(access)?, app),
                }
                .map_err(Failure::store)?,
            ),
            Store::Nats { bucket, key, .. } => {
                let config = self.nats(access)?;
                if is_wildcard(key) {
                    Box::new(NatsSource::wildcard(config, bucket.clone(), key.clone()))
                } else {
                    Box::new(NatsSource::key(config, bucket.clone(), key.clone()))
                }
            }
        })
    }

    /// The writer of this store's one key.
    pub(crate) async fn writer(
        &self,
        access: &Access,
    ) -> Result<Box<dyn WritableDataSource>, Failure> {
        if self.is_many() {
            return Err(Failure::Usage(
                "push writes one key: not an etcd prefix or a NATS wildcard".into(),
            ));
        }
        Ok(match self {
            Store::File(path) => Box::new(FileRuleWriter::new(path)),
            Store::Etcd { key, .. } => Box::new(
                EtcdRuleWriter::connect(self.etcd(access)?)
                    .await
                    .map_err(|e| self.failed(e))?
                    .at(key.clone()),
            ),
            Store::Redis { key, channel, .. } => Box::new(
                RedisRuleWriter::connect(self.redis(access)?)
                    .await
                    .map_err(|e| self.failed(e))?
                    .at(key.clone(), channel.clone()),
            ),
            Store::Nacos { target, .. } => match target {
                Nacos::Config(key) => Box::new(
                    NacosRuleWriter::new(self.nacos(access)?)
                        .map_err(|e| self.failed(e))?
                        .at(key.clone()),
                ),
                Nacos::App(_) => {
                    return Err(Failure::Usage(
                        "an app's dataIds are written one family each (push does it)".into(),
                    ))
                }
            },
            Store::Nats { bucket, key, .. } => Box::new(
                NatsRuleWriter::create_bucket(self.nats(access)?, bucket, 1)
                    .await
                    .map_err(|e| self.failed(e))?
                    .at(key.clone()),
            ),
        })
    }

    /// Writes `rules` to an app's dashboard dataIds: each family the set carries to its own
    /// dataId, and the dataIds of the families it does not carry deleted, so the app holds
    /// exactly the document. Returns the dataIds written.
    pub(crate) async fn push_app(
        &self,
        access: &Access,
        rules: &RuleSet,
    ) -> Result<Vec<String>, Failure> {
        let Store::Nacos {
            target: Nacos::App(app),
            ..
        } = self
        else {
            return Err(Failure::Usage("not a Nacos app URL".into()));
        };
        let writer = NacosRuleWriter::new(self.nacos(access)?).map_err(|e| self.failed(e))?;
        let carried = rules.families();
        let mut written = Vec::new();
        for (family, key) in DASHBOARD_FAMILIES.iter().zip(dashboard_keys(app)) {
            if carried.contains(family) {
                let mut one = RuleSet::cleared(&[]);
                one.merge(only(rules, *family));
                writer
                    .put_rules(&key, &one)
                    .await
                    .map_err(|e| self.failed(e))?;
                written.push(key.data_id.clone());
            } else {
                writer.delete(&key).await.map_err(|e| self.failed(e))?;
            }
        }
        Ok(written)
    }

    /// Deletes what this URL names (every key of a prefix or wildcard, every dataId of an
    /// app). Returns the keys deleted.
    pub(crate) async fn delete(&self, access: &Access) -> Result<Vec<String>, Failure> {
        let keys = self.stored_keys(access).await?;
        match self {
            Store::File(path) => match std::fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(Failure::Store(format!(
                        "cannot delete {}: {e}",
                        path.display()
                    )))
                }
            },
            Store::Etcd { .. } => {
                let writer = EtcdRuleWriter::connect(self.etcd(access)?)
                    .await
                    .map_err(|e| self.failed(e))?;
                for key in &keys {
                    writer
                        .delete(key.clone())
                        .await
                        .map_err(|e| self.failed(e))?;
                }
            }
            Store::Redis { key, channel, .. } => {
                RedisRuleWriter::connect(self.redis(access)?)
                    .await
                    .map_err(|e| self.failed(e))?
                    .delete(key, channel)
                    .await
                    .map_err(|e| self.failed(e))?;
            }
            Store::Nacos { target, .. } => {
                let writer =
                    NacosRuleWriter::new(self.nacos(access)?).map_err(|e| self.failed(e))?;
                let targets: Vec<ConfigKey> = match target {
                    Nacos::Config(key) => vec![key.clone()],
                    Nacos::App(app) => dashboard_keys(app).to_vec(),
                };
                for key in &targets {
                    writer.delete(key).await.map_err(|e| self.failed(e))?;
                }
            }
            Store::Nats { bucket, .. } => {
                let writer = NatsRuleWriter::connect(self.nats(access)?, bucket)
                    .await
                    .map_err(|e| self.failed(e))?;
                for key in &keys {
                    writer.delete(key).await.map_err(|e| self.failed(e))?;
                }
            }
        }
        Ok(keys)
    }

    /// The keys that hold a value now, as the store names them.
    async fn stored_keys(&self, access: &Access) -> Result<Vec<String>, Failure> {
        let mut source = self.source(access)?;
        let payload = source.read().await.map_err(|e| self.failed(e));
        source.close().await;
        Ok(payload?.entries.into_iter().map(|e| e.key).collect())
    }

    /// A store error, naming the store once and the error's causes once each.
    pub(crate) fn failed(&self, error: impl std::error::Error) -> Failure {
        let mut text = chain(&error);
        if let Store::Nats { bucket, .. } = self {
            // The backend's advice names its Rust API; a CLI user creates the bucket.
            if let Some(at) = text.find(", or let the source wait for it") {
                text.truncate(at);
                text.push_str(&format!(
                    ", or push rules to it (`sentinel-rules push` creates bucket {bucket})"
                ));
            }
        }
        if text.contains("invalid peer certificate") {
            text.push_str(
                " (give the CA that signed the server's certificate with --ca-file or \
                 SENTINEL_RULES_CA_FILE)",
            );
        }
        let what = self.to_string();
        if text.contains(&what) {
            Failure::Store(text)
        } else {
            Failure::Store(format!("{what}: {text}"))
        }
    }
}

/// The rules of one family of `rules`.
fn only(rules: &RuleSet, family: RuleFamily) -> RuleSet {
    crate::format::only(rules, family)
}
