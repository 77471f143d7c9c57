//! Store URLs: which backend, where, which key; and the source and writer for one.

use std::path::PathBuf;

use sentinel_core::datasource::{ReadableDataSource, WritableDataSource};
use sentinel_datasource_etcd::{EtcdConfig, EtcdRuleWriter, EtcdSource};
use sentinel_datasource_file::{FileRuleWriter, FileSource};
use sentinel_datasource_nacos::{ConfigKey, NacosConfig, NacosRuleWriter, NacosSource};
use sentinel_datasource_nats::{NatsConfig, NatsRuleWriter, NatsSource};
use sentinel_datasource_redis::{ChangeMode, RedisConfig, RedisRuleWriter, RedisSource};
use url::Url;

use crate::Failure;

/// The environment variables credentials are read from (never from the command line).
pub(crate) const USER_VAR: &str = "SENTINEL_RULES_USER";
pub(crate) const PASSWORD_VAR: &str = "SENTINEL_RULES_PASSWORD";

/// A parsed store URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Store {
    /// `file:///path`
    File(PathBuf),
    /// `etcd://host:port/key`
    Etcd { endpoint: String, key: String },
    /// `redis://host:port/key?channel=...&db=...`
    Redis {
        server: String,
        key: String,
        channel: String,
        db: i64,
    },
    /// `nacos://host:port/dataId?group=...&namespace=...`
    Nacos {
        server: String,
        key: ConfigKey,
        namespace: Option<String>,
    },
    /// `nats://host:port/bucket/key`
    Nats {
        server: String,
        bucket: String,
        key: String,
    },
}

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
    fn pair(&self, store: &str) -> Result<Option<(&str, &str)>, Failure> {
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

impl Store {
    /// Parses a store URL.
    pub(crate) fn parse(text: &str) -> Result<Self, Failure> {
        let bad = |why: &str| Failure::Usage(format!("store URL {text:?}: {why}"));
        let url = Url::parse(text).map_err(|e| bad(&e.to_string()))?;
        let host = || -> Result<String, Failure> {
            let host = url.host_str().ok_or_else(|| bad("no host"))?;
            let port = url.port().ok_or_else(|| bad("no port"))?;
            Ok(format!("{host}:{port}"))
        };
        let query = |name: &str| {
            url.query_pairs()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.into_owned())
        };
        let path = url.path().trim_start_matches('/');
        match url.scheme() {
            "file" => Ok(Store::File(
                url.to_file_path().map_err(|()| bad("not a file path"))?,
            )),
            "etcd" => {
                if path.is_empty() {
                    return Err(bad("no key: etcd://host:port/key"));
                }
                Ok(Store::Etcd {
                    endpoint: format!("http://{}", host()?),
                    key: format!("/{path}"),
                })
            }
            "redis" => {
                if path.is_empty() {
                    return Err(bad("no key: redis://host:port/key?channel=..."));
                }
                let db = match query("db") {
                    Some(db) => db.parse().map_err(|_| bad("db is not a number"))?,
                    None => 0,
                };
                Ok(Store::Redis {
                    server: host()?,
                    channel: query("channel").unwrap_or_else(|| format!("{path}:changed")),
                    key: path.to_owned(),
                    db,
                })
            }
            "nacos" => {
                if path.is_empty() || path.contains('/') {
                    return Err(bad("one dataId: nacos://host:port/dataId?group=..."));
                }
                let group = query("group")
                    .unwrap_or_else(|| sentinel_datasource_nacos::SENTINEL_GROUP.to_owned());
                Ok(Store::Nacos {
                    server: host()?,
                    key: ConfigKey::new(path, group),
                    namespace: query("namespace").filter(|n| !n.is_empty()),
                })
            }
            "nats" => match path.split_once('/') {
                Some((bucket, key)) if !bucket.is_empty() && !key.is_empty() => Ok(Store::Nats {
                    server: format!("nats://{}", host()?),
                    bucket: bucket.to_owned(),
                    key: key.to_owned(),
                }),
                _ => Err(bad("a bucket and a key: nats://host:port/bucket/key")),
            },
            other => Err(bad(&format!(
                "unknown scheme {other}: use file, etcd, redis, nacos or nats"
            ))),
        }
    }

    /// The source that reads this store.
    pub(crate) fn source(&self, login: &Login) -> Result<Box<dyn ReadableDataSource>, Failure> {
        Ok(match self {
            Store::File(path) => Box::new(FileSource::new(path).map_err(Failure::store)?),
            Store::Etcd { key, .. } => Box::new(EtcdSource::key(self.etcd(login)?, key.clone())),
            Store::Redis { key, channel, .. } => Box::new(RedisSource::new(
                self.redis(login)?,
                key.clone(),
                ChangeMode::Notify(channel.clone()),
            )),
            Store::Nacos { key, .. } => Box::new(
                NacosSource::configs(self.nacos(login)?, [key.clone()]).map_err(Failure::store)?,
            ),
            Store::Nats { bucket, key, .. } => Box::new(NatsSource::key(
                self.nats(login)?,
                bucket.clone(),
                key.clone(),
            )),
        })
    }

    /// The writer of this store.
    pub(crate) async fn writer(
        &self,
        login: &Login,
    ) -> Result<Box<dyn WritableDataSource>, Failure> {
        Ok(match self {
            Store::File(path) => Box::new(FileRuleWriter::new(path)),
            Store::Etcd { key, .. } => Box::new(
                EtcdRuleWriter::connect(self.etcd(login)?)
                    .await
                    .map_err(Failure::store)?
                    .at(key.clone()),
            ),
            Store::Redis { key, channel, .. } => Box::new(
                RedisRuleWriter::connect(self.redis(login)?)
                    .await
                    .map_err(Failure::store)?
                    .at(key.clone(), channel.clone()),
            ),
            Store::Nacos { key, .. } => Box::new(
                NacosRuleWriter::new(self.nacos(login)?)
                    .map_err(Failure::store)?
                    .at(key.clone()),
            ),
            Store::Nats { bucket, key, .. } => Box::new(
                NatsRuleWriter::create_bucket(self.nats(login)?, bucket, 1)
                    .await
                    .map_err(Failure::store)?
                    .at(key.clone()),
            ),
        })
    }

    fn etcd(&self, login: &Login) -> Result<EtcdConfig, Failure> {
        let Store::Etcd { endpoint, .. } = self else {
            return Err(Failure::Usage("not an etcd URL".into()));
        };
        let mut config = EtcdConfig::builder().endpoints([endpoint.as_str()]);
        if let Some((user, password)) = login.pair("etcd")? {
            config = config.credentials(user, password);
        }
        config.build().map_err(Failure::store)
    }

    fn redis(&self, login: &Login) -> Result<RedisConfig, Failure> {
        let Store::Redis { server, db, .. } = self else {
            return Err(Failure::Usage("not a Redis URL".into()));
        };
        let mut config = RedisConfig::builder().server(server.as_str()).db(*db);
        // Redis takes a password alone (the default user's).
        config = match (&login.user, &login.password) {
            (None, Some(password)) => config.password(password.as_str()),
            _ => match login.pair("Redis")? {
                Some((user, password)) => config.credentials(user, password),
                None => config,
            },
        };
        config.build().map_err(Failure::store)
    }

    fn nacos(&self, login: &Login) -> Result<NacosConfig, Failure> {
        let Store::Nacos {
            server, namespace, ..
        } = self
        else {
            return Err(Failure::Usage("not a Nacos URL".into()));
        };
        let mut config = NacosConfig::builder().servers([server.as_str()]);
        if let Some(namespace) = namespace {
            config = config.namespace(namespace.as_str());
        }
        if let Some((user, password)) = login.pair("Nacos")? {
            config = config.credentials(user, password);
        }
        config.build().map_err(Failure::store)
    }

    fn nats(&self, login: &Login) -> Result<NatsConfig, Failure> {
        let Store::Nats { server, .. } = self else {
            return Err(Failure::Usage("not a NATS URL".into()));
        };
        let mut config = NatsConfig::builder().servers([server.as_str()]);
        if let Some((user, password)) = login.pair("NATS")? {
            config = config.user_and_password(user, password);
        }
        config.build().map_err(Failure::store)
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
        let refused = |result: Result<Box<dyn ReadableDataSource>, Failure>| match result {
            Err(Failure::Usage(message)) => message,
            other => panic!(
                "expected a usage error, got {:?}",
                other.map(|_| "a source")
            ),
        };
        assert!(refused(etcd.source(&password_only)).contains(USER_VAR));
        assert!(refused(etcd.source(&user_only)).contains("--ask-password"));
        assert!(refused(redis.source(&user_only)).contains(PASSWORD_VAR));
        // Redis takes a password alone: the default user's.
        assert!(redis.source(&password_only).is_ok());
        assert!(etcd.source(&Login::default()).is_ok());
    }

    #[test]
    fn urls_of_every_store() {
        assert_eq!(
            Store::parse("file:///etc/sentinel/rules.json").ok(),
            Some(Store::File("/etc/sentinel/rules.json".into()))
        );
        assert_eq!(
            Store::parse("etcd://127.0.0.1:2379/sentinel/rules").ok(),
            Some(Store::Etcd {
                endpoint: "http://127.0.0.1:2379".into(),
                key: "/sentinel/rules".into()
            })
        );
        assert_eq!(
            Store::parse("redis://127.0.0.1:6379/rules:flow?channel=flow-changed&db=2").ok(),
            Some(Store::Redis {
                server: "127.0.0.1:6379".into(),
                key: "rules:flow".into(),
                channel: "flow-changed".into(),
                db: 2
            })
        );
        assert_eq!(
            Store::parse("nacos://127.0.0.1:8848/orders-flow-rules?namespace=prod").ok(),
            Some(Store::Nacos {
                server: "127.0.0.1:8848".into(),
                key: ConfigKey::new("orders-flow-rules", "SENTINEL_GROUP"),
                namespace: Some("prod".into())
            })
        );
        assert_eq!(
            Store::parse("nats://127.0.0.1:4222/sentinel/flow").ok(),
            Some(Store::Nats {
                server: "nats://127.0.0.1:4222".into(),
                bucket: "sentinel".into(),
                key: "flow".into()
            })
        );
        for bad in [
            "etcd://127.0.0.1:2379",
            "nats://127.0.0.1:4222/bucket-only",
            "ftp://x:1/y",
            "redis://nohostport",
            "not a url",
        ] {
            assert!(Store::parse(bad).is_err(), "{bad}");
        }
    }
}
