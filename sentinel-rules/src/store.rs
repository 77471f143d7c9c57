//! Store URLs: which backend, where, which key; and the source and writer for one.

use std::path::PathBuf;
use std::time::Duration;

use sentinel_core::datasource::{ReadableDataSource, WritableDataSource};
use sentinel_core::{RuleFamily, RuleSet};
use sentinel_datasource_etcd::{EtcdConfig, EtcdRuleWriter, EtcdSource};
use sentinel_datasource_file::{FileRuleWriter, FileSource};
use sentinel_datasource_nacos::{
    dashboard_keys, ConfigKey, NacosConfig, NacosRuleWriter, NacosSource,
};
use sentinel_datasource_nats::{NatsConfig, NatsRuleWriter, NatsSource};
use sentinel_datasource_redis::{ChangeMode, RedisConfig, RedisRuleWriter, RedisSource};
use url::Url;

use crate::Failure;

/// The environment variables credentials are read from (never from the command line).
pub(crate) const USER_VAR: &str = "SENTINEL_RULES_USER";
pub(crate) const PASSWORD_VAR: &str = "SENTINEL_RULES_PASSWORD";

/// A user (from the environment) and a password (from the environment, the terminal or
/// standard input).
#[derive(Clone, Default)]
pub(crate) struct Login {
    pub(crate) user: Option<String>,
    pub(crate) password: Option<String>,
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Login")
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl Login {
    pub(crate) fn from_env() -> Self {
        let var = |name| std::env::var(name).ok().filter(|v: &String| !v.is_empty());
        Self {
            user: var(USER_VAR),
            password: var(PASSWORD_VAR),
        }
    }

    /// The user and password for `store`, which needs both or neither: half a login is a
    /// usage error, never silently dropped.
    pub(crate) fn pair(&self, store: &str) -> Result<Option<(&str, &str)>, Failure> {
        match (&self.user, &self.password) {
            (Some(user), Some(password)) => Ok(Some((user, password))),
            (None, None) => Ok(None),
            (Some(_), None) => Err(Failure::Usage(format!(
                "{store} needs a password with {USER_VAR}: set {PASSWORD_VAR}, or pass \
                 --ask-password or --password-stdin"
            ))),
            (None, Some(_)) => Err(Failure::Usage(format!(
                "{store} needs a user with the password: set {USER_VAR}"
            ))),
        }
    }

    /// Asks for the password on the terminal, without echo.
    pub(crate) fn ask_password(&self) -> Result<String, Failure> {
        let prompt = match &self.user {
            Some(user) => format!("password for {user}: "),
            None => "password: ".to_owned(),
        };
        let password = rpassword::prompt_password(prompt).map_err(|e| {
            Failure::Usage(format!(
                "--ask-password needs a terminal ({e}); use --password-stdin or {PASSWORD_VAR}"
            ))
        })?;
        non_empty(password, "the terminal")
    }

    /// The first line of `input`, without its line end.
    pub(crate) fn password_from(mut input: impl std::io::BufRead) -> Result<String, Failure> {
        let mut line = String::new();
        input
            .read_line(&mut line)
            .map_err(|e| Failure::Usage(format!("--password-stdin: {e}")))?;
        let password = line.trim_end_matches(['\r', '\n']).to_owned();
        non_empty(password, "standard input")
    }
}

fn non_empty(password: String, from: &str) -> Result<String, Failure> {
    if password.is_empty() {
        Err(Failure::Usage(format!("no password on {from}")))
    } else {
        Ok(password)
    }
}

/// The ports a store URL without one uses: each server's usual port.
pub(crate) const DEFAULT_PORTS: [(&str, u16); 5] = [
    ("etcd", 2379),
    ("redis", 6379),
    ("redis sentinel", 26379),
    ("nacos", 8848),
    ("nats", 4222),
];

fn default_port(server: &str) -> u16 {
    DEFAULT_PORTS
        .iter()
        .find(|(name, _)| *name == server)
        .map_or(0, |(_, port)| *port)
}

/// How the Redis servers are deployed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Redis {
    /// One server (or a replica set's master), `host:port`.
    Server(String),
    /// The master named `master` of these sentinels (`?master=NAME&sentinels=...`).
    Sentinel {
        sentinels: Vec<String>,
        master: String,
    },
    /// A Redis Cluster reached through any of these nodes (`?cluster&nodes=...`).
    Cluster(Vec<String>),
}

/// What a Nacos URL names: one dataId, or the dashboard dataIds of an app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Nacos {
    /// One dataId of a group.
    Config(ConfigKey),
    /// `{app}-flow-rules`, `{app}-degrade-rules`, ... of `SENTINEL_GROUP`, as one document.
    App(String),
}

/// A parsed store URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Store {
    /// `file:///path`, or a bare path.
    File(PathBuf),
    /// `etcd://host:port/key` (`etcds://` for TLS; `?prefix` for every key under it).
    Etcd {
        endpoint: String,
        key: String,
        prefix: bool,
        tls: bool,
    },
    /// `redis://host:port/key?channel=...&db=...` (`rediss://` for TLS).
    Redis {
        servers: Redis,
        key: String,
        channel: String,
        db: i64,
        tls: bool,
    },
    /// `nacos://host:port/dataId?group=...&namespace=...`, or `nacos://host:port/?app=...`.
    Nacos {
        server: String,
        target: Nacos,
        namespace: Option<String>,
    },
    /// `nats://host:port/bucket/key` (`natss://` for TLS; `*` and `>` in the key watch
    /// every matching key).
    Nats {
        server: String,
        bucket: String,
        key: String,
        tls: bool,
    },
}

/// Everything a command needs to reach a store besides its URL.
#[derive(Debug, Clone)]
pub(crate) struct Access {
    /// Who logs in.
    pub(crate) login: Login,
    /// The connect and request timeout of every backend.
    pub(crate) timeout: Duration,
    /// The CA certificate (PEM file) a TLS store's certificate is checked against; the
    /// system roots without it.
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    pub(crate) ca_file: Option<PathBuf>,
}

impl Store {
    /// Whether the store keeps a revision per write (etcd, Redis, NATS), so a push can
    /// compare and set; a file and Nacos keep none.
    pub(crate) fn keeps_revisions(&self) -> bool {
        !matches!(self, Store::File(_) | Store::Nacos { .. })
    }

    /// Parses a store URL; text without `://` is a file path.
    pub(crate) fn parse(text: &str) -> Result<Self, Failure> {
        if !text.contains("://") {
            if text.trim().is_empty() {
                return Err(Failure::Usage("an empty store URL".into()));
            }
            return Ok(Store::File(PathBuf::from(text)));
        }
        let bad = |why: &str| Failure::Usage(format!("store URL {text:?}: {why}"));
        let url = Url::parse(text).map_err(|e| bad(&e.to_string()))?;
        if !url.username().is_empty() || url.password().is_some() {
            // Not echoed: the URL holds the secret.
            return Err(Failure::Usage(format!(
                "a store URL with a user or password ({}://...@{}): credentials do not belong \
                 in the URL (it ends up in shell history and process lists); set {USER_VAR} \
                 and {PASSWORD_VAR}, or pass --ask-password or --password-stdin",
                url.scheme(),
                url.host_str().unwrap_or("")
            )));
        }
        let host = |server: &str| -> Result<String, Failure> {
            let host = url.host_str().ok_or_else(|| bad("no host"))?;
            let port = url.port().unwrap_or_else(|| default_port(server));
            Ok(format!("{host}:{port}"))
        };
        let query = |name: &str| {
            url.query_pairs()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.into_owned())
        };
        let flag = |name: &str| query(name).is_some_and(|v| v != "false" && v != "0");
        let list = |name: &str| -> Vec<String> {
            query(name)
                .map(|v| {
                    v.split(',')
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default()
        };
        let raw_path = url.path().trim_start_matches('/');
        let path = decode(raw_path).map_err(|e| bad(&e))?;
        match url.scheme() {
            "file" => Ok(Store::File(
                url.to_file_path().map_err(|()| bad("not a file path"))?,
            )),
            scheme @ ("etcd" | "etcds") => {
                if path.is_empty() {
                    return Err(bad("no key: etcd://host:port/key"));
                }
                let tls = scheme == "etcds";
                let http = if tls { "https" } else { "http" };
                Ok(Store::Etcd {
                    endpoint: format!("{http}://{}", host("etcd")?),
                    key: format!("/{path}"),
                    prefix: flag("prefix"),
                    tls,
                })
            }
            scheme @ ("redis" | "rediss") => {
                if path.is_empty() {
                    return Err(bad("no key: redis://host:port/key?channel=..."));
                }
                let db = match query("db") {
                    Some(db) => db.parse().map_err(|_| bad("db is not a number"))?,
                    None => 0,
                };
                let servers = match (query("master"), flag("cluster")) {
                    (Some(_), true) => return Err(bad("either ?master= or ?cluster, not both")),
                    (Some(master), false) => {
                        let mut sentinels = vec![host("redis sentinel")?];
                        sentinels.extend(list("sentinels"));
                        Redis::Sentinel { sentinels, master }
                    }
                    (None, true) => {
                        let mut nodes = vec![host("redis")?];
                        nodes.extend(list("nodes"));
                        Redis::Cluster(nodes)
                    }
                    (None, false) => Redis::Server(host("redis")?),
                };
                Ok(Store::Redis {
                    servers,
                    channel: query("channel").unwrap_or_else(|| format!("{path}:changed")),
                    key: path,
                    db,
                    tls: scheme == "rediss",
                })
            }
            "nacos" => {
                let namespace = query("namespace").filter(|n| !n.is_empty());
                let target = match query("app") {
                    Some(app) if !app.is_empty() && path.is_empty() => Nacos::App(app),
                    Some(_) => {
                        return Err(bad(
                            "?app= names every dashboard dataId of an app: nacos://host:port/?app=orders",
                        ))
                    }
                    None if path.is_empty() || path.contains('/') => {
                        return Err(bad(
                            "one dataId (nacos://host:port/dataId?group=...) or an app \
                             (nacos://host:port/?app=...)",
                        ))
                    }
                    None => Nacos::Config(ConfigKey::new(
                        path,
                        query("group")
                            .unwrap_or_else(|| sentinel_datasource_nacos::SENTINEL_GROUP.to_owned()),
                    )),
                };
                Ok(Store::Nacos {
                    server: host("nacos")?,
                    target,
                    namespace,
                })
            }
            scheme @ ("nats" | "natss" | "tls") => {
                let tls = scheme != "nats";
                match raw_path.split_once('/') {
                    Some((bucket, key)) if !bucket.is_empty() && !key.is_empty() => {
                        Ok(Store::Nats {
                            server: format!(
                                "{}://{}",
                                if tls { "tls" } else { "nats" },
                                host("nats")?
                            ),
                            bucket: decode(bucket).map_err(|e| bad(&e))?,
                            key: decode(key).map_err(|e| bad(&e))?,
                            tls,
                        })
                    }
                    _ => Err(bad("a bucket and a key: nats://host:port/bucket/key")),
                }
            }
            other => Err(bad(&format!(
                "unknown scheme {other}: use file, etcd, etcds, redis, rediss, nacos, nats or natss"
            ))),
        }
    }

    /// Whether the URL names several keys (an etcd prefix, a NATS wildcard, a Nacos app).
    pub(crate) fn is_many(&self) -> bool {
        match self {
            Store::Etcd { prefix, .. } => *prefix,
            Store::Nats { key, .. } => is_wildcard(key),
            Store::Nacos { target, .. } => matches!(target, Nacos::App(_)),
            Store::File(_) | Store::Redis { .. } => false,
        }
    }

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
        let mut text = crate::chain(&error);
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

    fn etcd(&self, access: &Access) -> Result<EtcdConfig, Failure> {
        let Store::Etcd { endpoint, tls, .. } = self else {
            return Err(Failure::Usage("not an etcd URL".into()));
        };
        let mut config = EtcdConfig::builder()
            .endpoints([endpoint.as_str()])
            .connect_timeout(access.timeout)
            .request_timeout(access.timeout);
        if let Some((user, password)) = access.login.pair("etcd")? {
            config = config.credentials(user, password);
        }
        if *tls {
            #[cfg(feature = "tls")]
            {
                let mut settings = sentinel_datasource_etcd::TlsConfig::new();
                if let Some(pem) = access.ca_pem()? {
                    settings = settings.ca_certificate_pem(pem);
                }
                config = config.tls(settings);
            }
            #[cfg(not(feature = "tls"))]
            return Err(no_tls());
        }
        config.build().map_err(Failure::store)
    }

    fn redis(&self, access: &Access) -> Result<RedisConfig, Failure> {
        let Store::Redis {
            servers, db, tls, ..
        } = self
        else {
            return Err(Failure::Usage("not a Redis URL".into()));
        };
        let mut config = match servers {
            Redis::Server(server) => RedisConfig::builder().server(server.as_str()),
            Redis::Sentinel { sentinels, master } => {
                RedisConfig::builder().sentinel(sentinels, master.as_str())
            }
            #[cfg(feature = "cluster")]
            Redis::Cluster(nodes) => RedisConfig::builder().cluster(nodes),
            #[cfg(not(feature = "cluster"))]
            Redis::Cluster(_) => {
                return Err(Failure::Usage(
                    "this sentinel-rules is built without Redis Cluster: rebuild it with \
                     `--features cluster`"
                        .into(),
                ))
            }
        }
        .db(*db)
        .connect_timeout(access.timeout)
        .request_timeout(access.timeout);
        // Redis takes a password alone (the default user's).
        let login = &access.login;
        config = match (&login.user, &login.password) {
            (None, Some(password)) => config.password(password.as_str()),
            _ => match login.pair("Redis")? {
                Some((user, password)) => config.credentials(user, password),
                None => config,
            },
        };
        if *tls {
            #[cfg(feature = "tls")]
            {
                let mut settings = sentinel_datasource_redis::TlsConfig::new();
                if let Some(pem) = access.ca_pem()? {
                    settings = settings.ca_certificate_pem(pem);
                }
                config = config.tls(settings);
            }
            #[cfg(not(feature = "tls"))]
            return Err(no_tls());
        }
        config.build().map_err(Failure::store)
    }

    fn nacos(&self, access: &Access) -> Result<NacosConfig, Failure> {
        let Store::Nacos {
            server, namespace, ..
        } = self
        else {
            return Err(Failure::Usage("not a Nacos URL".into()));
        };
        let mut config = NacosConfig::builder()
            .servers([server.as_str()])
            .connect_timeout(access.timeout)
            .request_timeout(access.timeout);
        if let Some(namespace) = namespace {
            config = config.namespace(namespace.as_str());
        }
        if let Some((user, password)) = access.login.pair("Nacos")? {
            config = config.credentials(user, password);
        }
        config.build().map_err(Failure::store)
    }

    fn nats(&self, access: &Access) -> Result<NatsConfig, Failure> {
        let Store::Nats { server, tls, .. } = self else {
            return Err(Failure::Usage("not a NATS URL".into()));
        };
        let mut config = NatsConfig::builder()
            .servers([server.as_str()])
            .connect_timeout(access.timeout)
            .request_timeout(access.timeout);
        if let Some((user, password)) = access.login.pair("NATS")? {
            config = config.credentials(user, password);
        }
        if *tls {
            #[cfg(feature = "tls")]
            if let Some(path) = &access.ca_file {
                config = config.tls_ca_certificate_file(path.clone());
            }
            #[cfg(not(feature = "tls"))]
            return Err(no_tls());
        }
        config.build().map_err(Failure::store)
    }
}

impl std::fmt::Display for Store {
    /// The store and key, for messages: never a secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Store::File(path) => write!(f, "file {}", path.display()),
            Store::Etcd {
                endpoint,
                key,
                prefix,
                ..
            } => {
                let what = if *prefix { "prefix" } else { "key" };
                write!(f, "etcd {endpoint} {what} {key}")
            }
            Store::Redis { servers, key, .. } => match servers {
                Redis::Server(server) => write!(f, "Redis {server} key {key}"),
                Redis::Sentinel { sentinels, master } => write!(
                    f,
                    "Redis master {master} of sentinels {} key {key}",
                    sentinels.join(",")
                ),
                Redis::Cluster(nodes) => {
                    write!(f, "Redis cluster {} key {key}", nodes.join(","))
                }
            },
            Store::Nacos { server, target, .. } => match target {
                Nacos::Config(key) => write!(
                    f,
                    "Nacos {server} dataId {} group {}",
                    key.data_id, key.group
                ),
                Nacos::App(app) => write!(f, "Nacos {server} dashboard dataIds of app {app}"),
            },
            Store::Nats {
                server,
                bucket,
                key,
                ..
            } => write!(f, "NATS {server} bucket {bucket} key {key}"),
        }
    }
}

/// The dashboard dataIds' families, in [`dashboard_keys`]' order.
pub(crate) const DASHBOARD_FAMILIES: [RuleFamily; 5] = [
    RuleFamily::Flow,
    RuleFamily::Degrade,
    RuleFamily::System,
    RuleFamily::Authority,
    RuleFamily::ParamFlow,
];

/// The family of a dashboard entry key (`group/{app}-flow-rules` and so on).
pub(crate) fn dashboard_family(app: &str, entry_key: &str) -> Option<RuleFamily> {
    DASHBOARD_FAMILIES
        .iter()
        .zip(dashboard_keys(app))
        .find(|(_, key)| key.entry_key() == entry_key)
        .map(|(family, _)| *family)
}

/// The rules of one family of `rules`.
fn only(rules: &RuleSet, family: RuleFamily) -> RuleSet {
    crate::format::only(rules, family)
}

fn is_wildcard(key: &str) -> bool {
    key.split('.').any(|token| token == "*" || token == ">")
}

/// A percent-decoded key: `%7B` is `{`, `%20` a space, `%2F` a slash.
fn decode(text: &str) -> Result<String, String> {
    percent_encoding::percent_decode_str(text)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| format!("{text:?} does not decode to UTF-8"))
}

#[cfg(not(feature = "tls"))]
fn no_tls() -> Failure {
    Failure::Usage(
        "this sentinel-rules is built without TLS: rebuild it with `--features tls`".into(),
    )
}

impl Access {
    #[cfg(feature = "tls")]
    fn ca_pem(&self) -> Result<Option<Vec<u8>>, Failure> {
        self.ca_file
            .as_ref()
            .map(|path| {
                std::fs::read(path)
                    .map_err(|e| Failure::Usage(format!("--ca-file {}: {e}", path.display())))
            })
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_is_the_first_line_of_its_input() {
        let read = |input: &str| Login::password_from(input.as_bytes());
        assert_eq!(read("s3cret\r\nnext\n").ok().as_deref(), Some("s3cret"));
        assert_eq!(read("with spaces \n").ok().as_deref(), Some("with spaces "));
        assert!(matches!(read(""), Err(Failure::Usage(m)) if m == "no password on standard input"));
        assert!(matches!(read("\n"), Err(Failure::Usage(_))));
        let login = Login {
            user: Some("ops".into()),
            password: Some("s3cret".into()),
        };
        assert!(!format!("{login:?}").contains("s3cret"));
    }

    #[test]
    fn half_a_login_is_refused_not_dropped() {
        let etcd = Store::parse("etcd://127.0.0.1:2379/rules").ok();
        let etcd = etcd.as_ref().expect("an etcd URL");
        let redis = Store::parse("redis://127.0.0.1:6379/rules").ok();
        let redis = redis.as_ref().expect("a Redis URL");
        let password_only = Login {
            user: None,
            password: Some("s3cret".into()),
        };
        let user_only = Login {
            user: Some("ops".into()),
            password: None,
        };
        let access = |login: &Login| Access {
            login: login.clone(),
            timeout: Duration::from_secs(1),
            ca_file: None,
        };
        let refused = |result: Result<Box<dyn ReadableDataSource>, Failure>| match result {
            Err(Failure::Usage(message)) => message,
            other => panic!(
                "expected a usage error, got {:?}",
                other.map(|_| "a source")
            ),
        };
        assert!(refused(etcd.source(&access(&password_only))).contains(USER_VAR));
        assert!(refused(etcd.source(&access(&user_only))).contains("--ask-password"));
        assert!(refused(redis.source(&access(&user_only))).contains(PASSWORD_VAR));
        // Redis takes a password alone: the default user's.
        assert!(redis.source(&access(&password_only)).is_ok());
        assert!(etcd.source(&access(&Login::default())).is_ok());
    }

    #[test]
    fn urls_of_every_store() {
        let parse = |text: &str| Store::parse(text).ok();
        assert_eq!(
            parse("file:///etc/sentinel/rules.json"),
            Some(Store::File("/etc/sentinel/rules.json".into()))
        );
        assert_eq!(
            parse("etcd://127.0.0.1:2379/sentinel/rules"),
            Some(Store::Etcd {
                endpoint: "http://127.0.0.1:2379".into(),
                key: "/sentinel/rules".into(),
                prefix: false,
                tls: false,
            })
        );
        assert_eq!(
            parse("etcds://etcd.internal/sentinel/?prefix"),
            Some(Store::Etcd {
                endpoint: "https://etcd.internal:2379".into(),
                key: "/sentinel/".into(),
                prefix: true,
                tls: true,
            })
        );
        assert_eq!(
            parse("redis://127.0.0.1:6379/rules:flow?channel=flow-changed&db=2"),
            Some(Store::Redis {
                servers: Redis::Server("127.0.0.1:6379".into()),
                key: "rules:flow".into(),
                channel: "flow-changed".into(),
                db: 2,
                tls: false,
            })
        );
        assert_eq!(
            parse("rediss://s1/rules?master=main&sentinels=s2:26380,s3"),
            Some(Store::Redis {
                servers: Redis::Sentinel {
                    sentinels: vec!["s1:26379".into(), "s2:26380".into(), "s3".into()],
                    master: "main".into()
                },
                key: "rules".into(),
                channel: "rules:changed".into(),
                db: 0,
                tls: true,
            })
        );
        assert!(matches!(
            parse("redis://n1:7000/rules?cluster&nodes=n2:7000"),
            Some(Store::Redis { servers: Redis::Cluster(nodes), .. }) if nodes == ["n1:7000", "n2:7000"]
        ));
        assert_eq!(
            parse("nacos://127.0.0.1/orders-flow-rules?namespace=prod"),
            Some(Store::Nacos {
                server: "127.0.0.1:8848".into(),
                target: Nacos::Config(ConfigKey::new("orders-flow-rules", "SENTINEL_GROUP")),
                namespace: Some("prod".into())
            })
        );
        assert_eq!(
            parse("nacos://127.0.0.1:8848/?app=orders"),
            Some(Store::Nacos {
                server: "127.0.0.1:8848".into(),
                target: Nacos::App("orders".into()),
                namespace: None
            })
        );
        assert_eq!(
            parse("nats://127.0.0.1/sentinel/flow"),
            Some(Store::Nats {
                server: "nats://127.0.0.1:4222".into(),
                bucket: "sentinel".into(),
                key: "flow".into(),
                tls: false,
            })
        );
        // A bare path is a file.
        assert_eq!(
            parse("rules/prod.json"),
            Some(Store::File("rules/prod.json".into()))
        );
        for bad in [
            "etcd://127.0.0.1:2379",
            "nats://127.0.0.1:4222/bucket-only",
            "ftp://x:1/y",
            "nacos://h/?app=",
            "nacos://h/id?app=orders",
            "redis://h/k?master=m&cluster",
            "",
        ] {
            assert!(Store::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn keys_are_percent_decoded() {
        let key = |text: &str| match Store::parse(text) {
            Ok(Store::Redis { key, .. } | Store::Etcd { key, .. } | Store::Nats { key, .. }) => key,
            other => panic!("{text}: {other:?}"),
        };
        assert_eq!(key("redis://h/rules:{orders}:flow"), "rules:{orders}:flow");
        assert_eq!(
            key("redis://h/rules:%7Borders%7D:flow"),
            "rules:{orders}:flow"
        );
        assert_eq!(key("redis://h/my rules*"), "my rules*");
        assert_eq!(key("etcd://h/a/b%2Fc"), "/a/b/c");
        assert_eq!(key("nats://h/bucket/rules.>"), "rules.>");
        assert_eq!(key("nats://h/bucket/rules.*.flow"), "rules.*.flow");
        assert_eq!(key("nats://h/bucket/a/b"), "a/b");
        assert!(Store::parse("nats://h/bucket/rules.>").is_ok_and(|s| s.is_many()));
    }

    #[test]
    fn credentials_in_a_url_are_refused_naming_the_variables() {
        for url in ["redis://:pw@h/k", "etcd://ops:pw@h/k", "nats://ops@h/b/k"] {
            match Store::parse(url) {
                Err(Failure::Usage(message)) => {
                    assert!(message.contains(USER_VAR), "{message}");
                    assert!(message.contains(PASSWORD_VAR), "{message}");
                    assert!(
                        !message.contains("pw@") || message.contains(url),
                        "{message}"
                    );
                }
                other => panic!("{url}: {other:?}"),
            }
        }
    }
}
