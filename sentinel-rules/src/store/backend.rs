//! The source that reads a store and the writer that writes it, and the store's errors as a
//! command reports them.

//!
//! Each store's client is a Cargo feature (`etcd`, `redis`, `nacos`, `nats`, `zookeeper`; all
//! by default);
//! a URL of a store this build lacks is a usage error naming the feature.

use sentinel_core::datasource::{ReadableDataSource, WritableDataSource};
#[cfg(feature = "nacos")]
use sentinel_core::{RuleFamily, RuleSet};
#[cfg(feature = "etcd")]
use sentinel_datasource_etcd::{EtcdRuleWriter, EtcdSource};
use sentinel_datasource_file::{FileRuleWriter, FileSource};
#[cfg(feature = "nacos")]
use sentinel_datasource_nacos::{dashboard_keys, ConfigKey, NacosRuleWriter, NacosSource};
#[cfg(feature = "nats")]
use sentinel_datasource_nats::{NatsRuleWriter, NatsSource};
#[cfg(feature = "redis")]
use sentinel_datasource_redis::{ChangeMode, RedisRuleWriter, RedisSource};
#[cfg(feature = "zookeeper")]
use sentinel_datasource_zookeeper::{NodeAcl, ZooKeeperRuleWriter, ZooKeeperSource};

use super::access::Access;
#[cfg(feature = "nats")]
use super::url::is_wildcard;
use super::url::Store;
#[cfg(feature = "zookeeper")]
use super::url::ZnodeAcl;
#[cfg(feature = "nacos")]
use super::url::{Nacos, NacosKey};
use crate::failure::{chain, Failure};
use crate::format::{Boxed, Shape};

impl Store {
    /// The source that reads this store.
    pub(crate) fn source(&self, access: &Access) -> Result<Box<dyn ReadableDataSource>, Failure> {
        Ok(match self {
            Store::File(path) => Box::new(FileSource::new(path).map_err(Failure::store)?),
            #[cfg(feature = "etcd")]
            Store::Etcd { key, prefix, .. } => {
                let config = self.etcd(access)?;
                if *prefix {
                    Box::new(EtcdSource::prefix(config, key.clone()))
                } else {
                    Box::new(EtcdSource::key(config, key.clone()))
                }
            }
            #[cfg(feature = "redis")]
            Store::Redis { key, channel, .. } => Box::new(RedisSource::new(
                self.redis(access)?,
                key.clone(),
                ChangeMode::Notify(channel.clone()),
            )),
            #[cfg(feature = "nacos")]
            Store::Nacos { target, .. } => Box::new(
                match target {
                    Nacos::Config(key) => {
                        NacosSource::configs(self.nacos(access)?, [config_key(key)])
                    }
                    Nacos::App(app) => NacosSource::dashboard(self.nacos(access)?, app),
                }
                .map_err(Failure::store)?,
            ),
            #[cfg(feature = "nats")]
            Store::Nats { bucket, key, .. } => {
                let config = self.nats(access)?;
                if is_wildcard(key) {
                    Box::new(NatsSource::wildcard(config, bucket.clone(), key.clone()))
                } else {
                    Box::new(NatsSource::key(config, bucket.clone(), key.clone()))
                }
            }
            #[cfg(feature = "zookeeper")]
            Store::ZooKeeper { path, children, .. } => {
                let config = self.zookeeper(access)?;
                if *children {
                    Box::new(ZooKeeperSource::children(config, path.clone()))
                } else {
                    Box::new(ZooKeeperSource::node(config, path.clone()))
                }
            }
            #[allow(unreachable_patterns)]
            _ => {
                // A build without this store's client reads no access.
                let _ = access;
                return Err(self.not_built());
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
                "push writes one key: not an etcd prefix, a NATS wildcard or a znode's \
                 ?children"
                    .into(),
            ));
        }
        Ok(match self {
            Store::File(path) => Box::new(FileRuleWriter::new(path)),
            #[cfg(feature = "etcd")]
            Store::Etcd { key, .. } => Box::new(
                EtcdRuleWriter::connect(self.etcd(access)?)
                    .await
                    .map_err(|e| self.failed(e))?
                    .at(key.clone()),
            ),
            #[cfg(feature = "redis")]
            Store::Redis { key, channel, .. } => Box::new(
                RedisRuleWriter::connect(self.redis(access)?)
                    .await
                    .map_err(|e| self.failed(e))?
                    .at(key.clone(), channel.clone()),
            ),
            #[cfg(feature = "nacos")]
            Store::Nacos { target, .. } => match target {
                Nacos::Config(key) => Box::new(
                    NacosRuleWriter::new(self.nacos(access)?)
                        .map_err(|e| self.failed(e))?
                        .at(config_key(key)),
                ),
                Nacos::App(_) => {
                    return Err(Failure::Usage(
                        "an app's dataIds are written one family each (push does it)".into(),
                    ))
                }
            },
            #[cfg(feature = "nats")]
            Store::Nats { bucket, key, .. } => Box::new(
                NatsRuleWriter::create_bucket(self.nats(access)?, bucket, 1)
                    .await
                    .map_err(|e| self.failed(e))?
                    .at(key.clone()),
            ),
            #[cfg(feature = "zookeeper")]
            Store::ZooKeeper { path, acl, .. } => Box::new(
                ZooKeeperRuleWriter::connect(self.zookeeper(access)?)
                    .await
                    .map_err(|e| self.failed(e))?
                    .with_acl(match acl {
                        ZnodeAcl::Open => NodeAcl::Open,
                        ZnodeAcl::Creator => NodeAcl::CreatorAll,
                    })
                    .at(path.clone()),
            ),
            #[allow(unreachable_patterns)]
            _ => {
                // A build without this store's client reads no access.
                let _ = access;
                return Err(self.not_built());
            }
        })
    }

    /// Writes `rules` to an app's dashboard dataIds: each family the set carries to its own
    /// dataId, and the dataIds of the families it does not carry deleted, so the app holds
    /// exactly the document. Returns the dataIds written.
    #[cfg(feature = "nacos")]
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
        if let Store::ZooKeeper { children: true, .. } = self {
            return Err(Failure::Usage(
                "delete takes one znode: ?children is for get, diff and watch".into(),
            ));
        }
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
            #[cfg(feature = "etcd")]
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
            #[cfg(feature = "redis")]
            Store::Redis { key, channel, .. } => {
                RedisRuleWriter::connect(self.redis(access)?)
                    .await
                    .map_err(|e| self.failed(e))?
                    .delete(key, channel)
                    .await
                    .map_err(|e| self.failed(e))?;
            }
            #[cfg(feature = "nacos")]
            Store::Nacos { target, .. } => {
                let writer =
                    NacosRuleWriter::new(self.nacos(access)?).map_err(|e| self.failed(e))?;
                let targets: Vec<ConfigKey> = match target {
                    Nacos::Config(key) => vec![config_key(key)],
                    Nacos::App(app) => dashboard_keys(app).to_vec(),
                };
                for key in &targets {
                    writer.delete(key).await.map_err(|e| self.failed(e))?;
                }
            }
            #[cfg(feature = "nats")]
            Store::Nats { bucket, .. } => {
                let writer = NatsRuleWriter::connect(self.nats(access)?, bucket)
                    .await
                    .map_err(|e| self.failed(e))?;
                for key in &keys {
                    writer.delete(key).await.map_err(|e| self.failed(e))?;
                }
            }
            #[cfg(feature = "zookeeper")]
            Store::ZooKeeper { path, .. } => {
                ZooKeeperRuleWriter::connect(self.zookeeper(access)?)
                    .await
                    .map_err(|e| self.failed(e))?
                    .delete(path)
                    .await
                    .map_err(|e| self.failed(e))?;
            }
            #[allow(unreachable_patterns)]
            _ => return Err(self.not_built()),
        }
        Ok(keys)
    }

    /// The converter of one entry of what this store holds: `shape`'s, or for an app's
    /// dashboard dataIds the family's of each (`None`: an entry of no family, skipped).
    pub(crate) fn entry_converter(
        &self,
        shape: &Shape,
        entry_key: &str,
    ) -> Result<Option<Boxed>, Failure> {
        #[cfg(feature = "nacos")]
        if let Store::Nacos {
            target: Nacos::App(app),
            ..
        } = self
        {
            return Ok(dashboard_family(app, entry_key).map(crate::format::java));
        }
        let _ = entry_key;
        shape.converter().map(Some)
    }

    /// The converters a source of this store takes per entry key (an app's dashboard
    /// dataIds, each its family's); none for the others.
    pub(crate) fn entry_converters(&self) -> Vec<(String, Boxed)> {
        #[cfg(feature = "nacos")]
        if let Store::Nacos {
            target: Nacos::App(app),
            ..
        } = self
        {
            return DASHBOARD_FAMILIES
                .iter()
                .zip(dashboard_keys(app))
                .map(|(family, key)| (key.entry_key(), crate::format::java(*family)))
                .collect();
        }
        Vec::new()
    }

    /// The usage error of a store whose client this build lacks.
    #[cfg_attr(
        all(
            feature = "etcd",
            feature = "redis",
            feature = "nacos",
            feature = "nats",
            feature = "zookeeper"
        ),
        allow(dead_code)
    )]
    pub(crate) fn not_built(&self) -> Failure {
        let feature = match self {
            Store::Etcd { .. } => "etcd",
            Store::Redis { .. } => "redis",
            Store::Nacos { .. } => "nacos",
            Store::Nats { .. } => "nats",
            Store::ZooKeeper { .. } => "zookeeper",
            Store::File(_) => "file",
        };
        Failure::Usage(format!(
            "this sentinel-rules is built without {feature}: rebuild it with `--features \
             {feature}` (`cargo install sentinel-rules --features {feature}`)"
        ))
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
#[cfg(feature = "nacos")]
fn only(rules: &RuleSet, family: RuleFamily) -> RuleSet {
    crate::format::only(rules, family)
}

/// The Nacos client's key of a URL's dataId.
#[cfg(feature = "nacos")]
fn config_key(key: &NacosKey) -> ConfigKey {
    ConfigKey::new(key.data_id.clone(), key.group.clone())
}

/// The dashboard dataIds' families, in [`dashboard_keys`]' order.
#[cfg(feature = "nacos")]
const DASHBOARD_FAMILIES: [RuleFamily; 5] = [
    RuleFamily::Flow,
    RuleFamily::Degrade,
    RuleFamily::System,
    RuleFamily::Authority,
    RuleFamily::ParamFlow,
];

/// The family of a dashboard entry key (`group/{app}-flow-rules` and so on).
#[cfg(feature = "nacos")]
fn dashboard_family(app: &str, entry_key: &str) -> Option<RuleFamily> {
    DASHBOARD_FAMILIES
        .iter()
        .zip(dashboard_keys(app))
        .find(|(_, key)| key.entry_key() == entry_key)
        .map(|(family, _)| *family)
}

#[cfg(all(test, feature = "nacos"))]
mod tests {
    /// The URL's default group is the dashboard's, which the Nacos client names.
    #[test]
    fn the_default_group_is_the_dashboards() {
        assert_eq!(
            super::super::url::SENTINEL_GROUP,
            sentinel_datasource_nacos::SENTINEL_GROUP
        );
    }
}
