//! What a command needs to reach a store besides its URL (the login, the timeout, the CA),
//! and the config of each backend built from it.

use std::path::PathBuf;
use std::time::Duration;

#[cfg(feature = "etcd")]
use sentinel_datasource_etcd::EtcdConfig;
#[cfg(feature = "nacos")]
use sentinel_datasource_nacos::NacosConfig;
#[cfg(feature = "nats")]
use sentinel_datasource_nats::NatsConfig;
#[cfg(feature = "redis")]
use sentinel_datasource_redis::RedisConfig;
#[cfg(feature = "zookeeper")]
use sentinel_datasource_zookeeper::ZooKeeperConfig;

use super::login::Login;
#[cfg(feature = "redis")]
use super::url::Redis;
use super::url::Store;
use crate::failure::Failure;

/// Everything a command needs to reach a store besides its URL.
#[derive(Debug, Clone)]
pub(crate) struct Access {
    /// Who logs in.
    pub(crate) login: Login,
    /// The connect and request timeout of every backend.
    pub(crate) timeout: Duration,
    /// The CA certificate (PEM file) a TLS store's certificate is checked against; the
    /// system roots without it.
    #[cfg_attr(
        not(all(
            feature = "tls",
            any(feature = "etcd", feature = "redis", feature = "nats")
        )),
        allow(dead_code)
    )]
    pub(crate) ca_file: Option<PathBuf>,
}

/// Where the password comes from, besides `SENTINEL_RULES_PASSWORD`: asked only once a
/// command opens a store that takes one (not for `validate` or a file).
#[derive(Debug, Clone)]
pub(crate) struct AskPassword {
    /// `--ask-password`: ask on the terminal.
    pub(crate) terminal: bool,
    /// `--password-stdin`: read the first line of standard input.
    pub(crate) stdin: bool,
    /// `--timeout`: of each connect and request, and of the whole command.
    pub(crate) timeout: Duration,
    /// `--ca-file`.
    pub(crate) ca_file: Option<PathBuf>,
}

impl AskPassword {
    /// The login, timeout and CA for `store`.
    pub(crate) fn access(&self, store: &Store) -> Result<Access, Failure> {
        let mut access = Access {
            login: Login::default(),
            timeout: self.timeout,
            ca_file: self.ca_file.clone(),
        };
        if matches!(store, Store::File(_)) {
            return Ok(access);
        }
        if self.timeout.is_zero() {
            return Err(Failure::Usage("--timeout must be more than 0".into()));
        }
        let mut login = Login::from_env();
        if self.terminal {
            login.password = Some(login.ask_password()?.into());
        } else if self.stdin {
            login.password = Some(Login::password_from(std::io::stdin().lock())?.into());
        }
        access.login = login;
        Ok(access)
    }
}

impl Store {
    #[cfg(feature = "etcd")]
    pub(super) fn etcd(&self, access: &Access) -> Result<EtcdConfig, Failure> {
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
                let settings = sentinel_datasource_etcd::TlsConfig::new();
                config = config.tls(access.with_ca(settings, |s, pem| s.ca_certificate_pem(pem))?);
            }
            #[cfg(not(feature = "tls"))]
            return Err(no_tls());
        }
        config.build().map_err(Failure::store)
    }

    #[cfg(feature = "redis")]
    pub(super) fn redis(&self, access: &Access) -> Result<RedisConfig, Failure> {
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
            (None, Some(password)) => config.password(password.expose()),
            _ => match login.pair("Redis")? {
                Some((user, password)) => config.credentials(user, password),
                None => config,
            },
        };
        if *tls {
            #[cfg(feature = "tls")]
            {
                let settings = sentinel_datasource_redis::TlsConfig::new();
                config = config.tls(access.with_ca(settings, |s, pem| s.ca_certificate_pem(pem))?);
            }
            #[cfg(not(feature = "tls"))]
            return Err(no_tls());
        }
        config.build().map_err(Failure::store)
    }

    #[cfg(feature = "nacos")]
    pub(super) fn nacos(&self, access: &Access) -> Result<NacosConfig, Failure> {
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

    #[cfg(feature = "nats")]
    pub(super) fn nats(&self, access: &Access) -> Result<NatsConfig, Failure> {
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

    /// The ZooKeeper config: every server of the connect string, the chroot, and the login
    /// as digest credentials (`addauth digest user:password`).
    #[cfg(feature = "zookeeper")]
    pub(super) fn zookeeper(&self, access: &Access) -> Result<ZooKeeperConfig, Failure> {
        let Store::ZooKeeper {
            servers, chroot, ..
        } = self
        else {
            return Err(Failure::Usage("not a ZooKeeper URL".into()));
        };
        let mut config = ZooKeeperConfig::builder()
            .servers(servers)
            .connect_timeout(access.timeout)
            .request_timeout(access.timeout);
        if let Some(chroot) = chroot {
            config = config.chroot(chroot.as_str());
        }
        if let Some((user, password)) = access.login.pair("ZooKeeper")? {
            config = config.credentials(user, password);
        }
        config.build().map_err(Failure::store)
    }
}

#[cfg(all(
    not(feature = "tls"),
    any(feature = "etcd", feature = "redis", feature = "nats")
))]
fn no_tls() -> Failure {
    Failure::Usage(
        "this sentinel-rules is built without TLS: rebuild it with `--features tls`".into(),
    )
}

impl Access {
    /// A backend's TLS `settings` with the `--ca-file` CA added by `add` (its
    /// `ca_certificate_pem`); unchanged without `--ca-file` (the system roots).
    #[cfg(all(feature = "tls", any(feature = "etcd", feature = "redis")))]
    fn with_ca<T>(&self, settings: T, add: impl FnOnce(T, Vec<u8>) -> T) -> Result<T, Failure> {
        let Some(path) = &self.ca_file else {
            return Ok(settings);
        };
        let pem = std::fs::read(path)
            .map_err(|e| Failure::Usage(format!("--ca-file {}: {e}", path.display())))?;
        Ok(add(settings, pem))
    }
}

#[cfg(all(test, feature = "etcd", feature = "redis"))]
mod tests {
    use sentinel_core::datasource::ReadableDataSource;

    use super::super::login::{PASSWORD_VAR, USER_VAR};
    use super::*;

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
}
