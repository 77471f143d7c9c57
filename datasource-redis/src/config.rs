//! Connection settings for Redis: the deployment (one server, Redis Sentinel, cluster),
//! credentials, database, timeouts. What every store shares (credentials, timeouts, the
//! payload cap, TLS, address checks) is [`sentinel_core::datasource::backend`]'s; this module
//! keeps Redis's own: the deployment, the database, the password-only login and the PINGs.

use std::fmt;
use std::time::Duration;

use sentinel_core::datasource::address_list;
use sentinel_core::datasource::backend::{
    AddressRules, BackendSettings, Credentials, CredentialsEnv, HealthCheck, Timeouts,
};

mod address;
mod error;

pub(crate) use address::{Address, Deployment};
pub use error::ConfigError;
#[cfg(feature = "tls")]
pub(crate) use tls::certificates;
#[cfg(feature = "tls")]
pub use tls::TlsConfig;

#[cfg(feature = "tls")]
mod tls;

/// Default time allowed to open a connection (TCP, handshake, AUTH, SELECT).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Default time allowed for one command (GET, SUBSCRIBE, the writer's transaction).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Default interval between PINGs on the subscription connection, which otherwise only reads
/// (1 s), and the time a PING may go unanswered before the connection counts as broken (2 s,
/// far above a Redis server's answer time on a loaded machine): a server that freezes (a
/// `SIGSTOP`, a stalled VM) is reported disconnected within 3 s.
pub use sentinel_core::datasource::backend::{
    DEFAULT_HEALTH_CHECK_INTERVAL, DEFAULT_HEALTH_CHECK_TIMEOUT,
};
/// The former name of [`DEFAULT_HEALTH_CHECK_INTERVAL`].
#[deprecated(since = "0.1.1", note = "use DEFAULT_HEALTH_CHECK_INTERVAL")]
pub const DEFAULT_PING_INTERVAL: Duration = DEFAULT_HEALTH_CHECK_INTERVAL;
/// The former name of [`DEFAULT_HEALTH_CHECK_TIMEOUT`].
#[deprecated(since = "0.1.1", note = "use DEFAULT_HEALTH_CHECK_TIMEOUT")]
pub const DEFAULT_PING_TIMEOUT: Duration = DEFAULT_HEALTH_CHECK_TIMEOUT;
/// Default cap on the size of the value a source reads: the data-source framework's cap
/// (4 MiB), which the driver enforces too.
pub use sentinel_core::datasource::DEFAULT_MAX_PAYLOAD_BYTES;

/// A Redis server's address: `host:port` or `redis://host:port`, port 6379 by default.
const SERVER: AddressRules = AddressRules::new("Redis address")
    .schemes(&["redis"])
    .default_port(6379);
/// A Redis Sentinel's address: port 26379 by default.
const SENTINEL: AddressRules = SERVER.default_port(26379);

/// How to reach Redis. Built with [`RedisConfig::builder`].
///
/// `Debug` and [`describe`](Self::describe) show the user name but never the password.
#[derive(Clone)]
pub struct RedisConfig {
    pub(crate) deployment: Deployment,
    pub(crate) db: i64,
    settings: BackendSettings,
    health_check: HealthCheck,
}

impl fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("RedisConfig");
        d.field("deployment", &self.deployment.to_string())
            .field("db", &self.db)
            .field("settings", &self.settings)
            .field("health_check", &self.health_check)
            .finish()
    }
}

impl RedisConfig {
    /// Starts a configuration with no address and the default timeouts.
    pub fn builder() -> RedisConfigBuilder {
        RedisConfigBuilder::default()
    }

    /// The ACL user name, if one is set.
    pub fn user(&self) -> Option<&str> {
        self.settings.user()
    }

    /// The database index (0 unless set).
    pub fn db(&self) -> i64 {
        self.db
    }

    /// Time allowed to open a connection.
    pub fn connect_timeout(&self) -> Duration {
        self.settings.timeouts.connect
    }

    /// Time allowed for one command.
    pub fn request_timeout(&self) -> Duration {
        self.settings.timeouts.request
    }

    /// How often a source PINGs its subscription connection, and how long a PING may go
    /// unanswered before the connection counts as broken (see
    /// [`RedisConfigBuilder::health_check`]).
    pub fn health_check(&self) -> (Duration, Duration) {
        (self.health_check.interval, self.health_check.timeout)
    }

    /// The former name of the interval of [`health_check`](Self::health_check).
    #[deprecated(since = "0.1.1", note = "use health_check")]
    pub fn ping_interval(&self) -> Duration {
        self.health_check.interval
    }

    /// The former name of the timeout of [`health_check`](Self::health_check).
    #[deprecated(since = "0.1.1", note = "use health_check")]
    pub fn ping_timeout(&self) -> Duration {
        self.health_check.timeout
    }

    /// The longest a frozen server (one that keeps its connections open but answers nothing)
    /// goes unnoticed by a source: the [`health_check`](Self::health_check)'s interval +
    /// timeout, 3 s by default.
    pub fn frozen_server_detection(&self) -> Duration {
        self.health_check.frozen_server_detection()
    }

    /// Cap on the size of the value a read returns.
    pub fn max_payload_bytes(&self) -> usize {
        self.settings.max_payload_bytes
    }

    /// Where the rules live, without secrets: `127.0.0.1:6379`, `master mymaster of sentinels
    /// ...`, `cluster ...`, with the user and database when set.
    pub fn describe(&self) -> String {
        let mut text = self.deployment.to_string();
        if let Some(credentials) = &self.settings.credentials {
            text.push_str(&credentials.describe());
        }
        if self.db != 0 {
            text.push_str(&format!(" db {}", self.db));
        }
        text
    }

    /// The credentials, for the connection code only.
    pub(crate) fn credentials(&self) -> Option<&Credentials> {
        self.settings.credentials.as_ref()
    }

    /// The password, for the connection code only.
    pub(crate) fn password(&self) -> Option<&str> {
        self.credentials().map(|c| c.password().expose())
    }

    /// The TLS settings, when the connections use TLS.
    #[cfg(feature = "tls")]
    pub(crate) fn tls(&self) -> Option<&TlsConfig> {
        self.settings.tls.as_ref()
    }

    pub(crate) fn tls_enabled(&self) -> bool {
        self.settings.tls.is_some()
    }
}

/// Builder for [`RedisConfig`].
#[derive(Clone)]
pub struct RedisConfigBuilder {
    server: Vec<String>,
    sentinels: Vec<String>,
    master: Option<String>,
    #[cfg(feature = "cluster")]
    cluster: Vec<String>,
    db: i64,
    settings: BackendSettings,
    health_check: HealthCheck,
}

impl Default for RedisConfigBuilder {
    fn default() -> Self {
        Self {
            server: Vec::new(),
            sentinels: Vec::new(),
            master: None,
            #[cfg(feature = "cluster")]
            cluster: Vec::new(),
            db: 0,
            settings: BackendSettings::with_timeouts(Timeouts::new(
                DEFAULT_CONNECT_TIMEOUT,
                DEFAULT_REQUEST_TIMEOUT,
            )),
            health_check: HealthCheck::default(),
        }
    }
}

impl fmt::Debug for RedisConfigBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisConfigBuilder")
            .field("server", &self.server)
            .field("sentinels", &self.sentinels)
            .field("master", &self.master)
            .field("user", &self.settings.user())
            .finish_non_exhaustive()
    }
}

impl RedisConfigBuilder {
    /// One Redis server: `host:port`, `host` (port 6379), `[v6addr]:port`, optionally with a
    /// `redis://` prefix. Credentials go to [`credentials`](Self::credentials) or
    /// [`password`](Self::password), never into the address.
    pub fn server(mut self, address: impl Into<String>) -> Self {
        self.server.push(address.into());
        self
    }

    /// The master named `master` of these Redis Sentinels (`host:port`, port 26379 by
    /// default; a comma-separated string is split). The sources and the writer ask the
    /// sentinels for the master on every (re)connect, so they follow a failover.
    pub fn sentinel<I, S>(mut self, sentinels: I, master: impl Into<String>) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.sentinels.extend(address_list(sentinels));
        self.master = Some(master.into());
        self
    }

    /// A Redis Cluster, reached through any of these nodes (`host:port`; a comma-separated
    /// string is split).
    #[cfg(feature = "cluster")]
    #[cfg_attr(docsrs, doc(cfg(feature = "cluster")))]
    pub fn cluster<I, S>(mut self, nodes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.cluster.extend(address_list(nodes));
        self
    }

    /// Authenticates as an ACL user (Redis 6 or newer). The password is never logged.
    pub fn credentials(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.settings.credentials = Some(Credentials::new(user, password));
        self
    }

    /// Authenticates as the default user, with the server's `requirepass` password. The
    /// password is never logged.
    pub fn password(mut self, password: impl Into<String>) -> Self {
        self.settings.credentials = Some(Credentials::password_only(password));
        self
    }

    /// Without [`credentials`](Self::credentials) or [`password`](Self::password), reads
    /// them from the environment when [`build`](Self::build) runs: `CredentialsEnv::default()`
    /// reads `SENTINEL_RULES_USER` and `SENTINEL_RULES_PASSWORD`; a password alone logs in as
    /// the default user (`requirepass`), a user alone is refused.
    pub fn credentials_from_env(mut self, env: CredentialsEnv) -> Self {
        self.settings.credentials_env = Some(env.password_alone(true));
        self
    }

    /// The database index (default 0). A cluster has only database 0.
    pub fn db(mut self, db: i64) -> Self {
        self.db = db;
        self
    }

    /// Time allowed to open a connection: TCP, AUTH, SELECT, and the Redis Sentinel lookup
    /// (default 5 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.settings.timeouts.connect = timeout;
        self
    }

    /// Time allowed for one command: GET, SUBSCRIBE, CONFIG GET, the writer's transaction
    /// (default 5 s). The PING on the subscription has its own timeout, in
    /// [`health_check`](Self::health_check).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.settings.timeouts.request = timeout;
        self
    }

    /// How often a source PINGs its subscription connection (default 1 s), and how long a
    /// PING may go unanswered before the connection counts as broken (default 2 s). A
    /// subscription only reads, so without pings a server that freezes or vanishes without
    /// closing the connection (a `SIGSTOP`, a network partition) would go unnoticed. A frozen
    /// server is so reported disconnected within interval + timeout (3 s by default). A
    /// shorter timeout notices a frozen server sooner; too short takes a busy server (or a
    /// starved client) for a dead one and reconnects for nothing.
    pub fn health_check(mut self, interval: Duration, timeout: Duration) -> Self {
        self.health_check = HealthCheck::new(interval, timeout);
        self
    }

    /// Sets the interval of [`health_check`](Self::health_check) alone.
    #[deprecated(since = "0.1.1", note = "use health_check")]
    pub fn ping_interval(mut self, interval: Duration) -> Self {
        self.health_check.interval = interval;
        self
    }

    /// Sets the timeout of [`health_check`](Self::health_check) alone.
    #[deprecated(since = "0.1.1", note = "use health_check")]
    pub fn ping_timeout(mut self, timeout: Duration) -> Self {
        self.health_check.timeout = timeout;
        self
    }

    /// Cap on the size of the value a source reads (default 4 MiB). A larger value (or
    /// message) is reported as `SourceError::TooLarge` and the watch goes on.
    pub fn max_payload_bytes(mut self, limit: usize) -> Self {
        self.settings.max_payload_bytes = limit;
        self
    }

    /// Connects with TLS (`rediss`). A CA or client certificate that holds no PEM
    /// certificate is refused by [`build`](Self::build), and so is a
    /// [`domain_name`](TlsConfig::domain_name): the Redis client checks the certificate
    /// against the address's host.
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls(mut self, tls: TlsConfig) -> Self {
        self.settings.tls = Some(tls);
        self
    }

    /// Checks the settings.
    pub fn build(self) -> Result<RedisConfig, ConfigError> {
        let deployment = self.deployment()?;
        if self.db < 0 {
            return Err(ConfigError::NegativeDatabase { db: self.db });
        }
        #[cfg(feature = "cluster")]
        if matches!(deployment, Deployment::Cluster(_)) && self.db != 0 {
            return Err(ConfigError::ClusterDatabase { db: self.db });
        }
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.settings.tls {
            tls::check(tls)?;
        }
        let settings = self.settings.build()?;
        self.health_check.check()?;
        Ok(RedisConfig {
            deployment,
            db: self.db,
            settings,
            health_check: self.health_check,
        })
    }

    fn deployment(&self) -> Result<Deployment, ConfigError> {
        let parse = |list: &[String], rules| {
            list.iter()
                .map(|a| Address::parse(a, rules))
                .collect::<Result<Vec<_>, _>>()
        };
        #[cfg(feature = "cluster")]
        let cluster = !self.cluster.is_empty();
        #[cfg(not(feature = "cluster"))]
        let cluster = false;
        let chosen = [!self.server.is_empty(), self.master.is_some(), cluster];
        match chosen.iter().filter(|c| **c).count() {
            0 => return Err(ConfigError::NoAddress),
            1 => {}
            _ => return Err(ConfigError::SeveralDeployments),
        }
        if let [server] = self.server.as_slice() {
            return Ok(Deployment::Server(Address::parse(server, &SERVER)?));
        }
        if self.server.len() > 1 {
            return Err(ConfigError::SeveralDeployments);
        }
        if let Some(master) = &self.master {
            if master.trim().is_empty() {
                return Err(ConfigError::EmptyMasterName);
            }
            let sentinels = parse(&self.sentinels, &SENTINEL)?;
            if sentinels.is_empty() {
                return Err(ConfigError::NoAddress);
            }
            return Ok(Deployment::Sentinel {
                sentinels,
                master: master.clone(),
            });
        }
        #[cfg(feature = "cluster")]
        {
            Ok(Deployment::Cluster(parse(&self.cluster, &SERVER)?))
        }
        #[cfg(not(feature = "cluster"))]
        {
            Err(ConfigError::NoAddress)
        }
    }
}

#[cfg(test)]
mod tests;
