//! Connection settings for Redis: the deployment (one server, Redis Sentinel, cluster),
//! credentials, database, timeouts.

use std::fmt;
use std::time::Duration;

use sentinel_core::datasource::{address_list, Secret};

mod address;
mod error;

pub(crate) use address::{Address, Deployment};
pub use error::ConfigError;
#[cfg(feature = "tls")]
pub use tls::TlsConfig;

#[cfg(feature = "tls")]
mod tls;

/// Default time allowed to open a connection (TCP, handshake, AUTH, SELECT).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Default time allowed for one command (GET, SUBSCRIBE, the writer's transaction).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Default interval between PINGs on the subscription connection, which otherwise only reads:
/// with [`DEFAULT_HEALTH_CHECK_TIMEOUT`], a server that freezes (a `SIGSTOP`, a stalled VM) is reported
/// disconnected within 3 s.
pub const DEFAULT_HEALTH_CHECK_INTERVAL: Duration = Duration::from_secs(1);
/// Default time a PING on the subscription may go unanswered before the connection counts as
/// broken: 2 s, far above a Redis server's answer time on a loaded machine, so a busy server
/// is not taken for a dead one.
pub const DEFAULT_HEALTH_CHECK_TIMEOUT: Duration = Duration::from_secs(2);
/// The former name of [`DEFAULT_HEALTH_CHECK_INTERVAL`].
#[deprecated(since = "0.1.1", note = "use DEFAULT_HEALTH_CHECK_INTERVAL")]
pub const DEFAULT_PING_INTERVAL: Duration = DEFAULT_HEALTH_CHECK_INTERVAL;
/// The former name of [`DEFAULT_HEALTH_CHECK_TIMEOUT`].
#[deprecated(since = "0.1.1", note = "use DEFAULT_HEALTH_CHECK_TIMEOUT")]
pub const DEFAULT_PING_TIMEOUT: Duration = DEFAULT_HEALTH_CHECK_TIMEOUT;
/// Default cap on the size of the value a source reads: the data-source framework's cap
/// (4 MiB), which the driver enforces too.
pub use sentinel_core::datasource::DEFAULT_MAX_PAYLOAD_BYTES;

/// The port a Redis server listens on when an address names none.
const DEFAULT_PORT: u16 = 6379;
/// The port a Redis Sentinel listens on when an address names none.
const DEFAULT_SENTINEL_PORT: u16 = 26379;

/// An ACL user (or the default user) and its password. The password never appears in
/// `Debug` output, logs or errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Credentials {
    /// `None` authenticates as the default user (`requirepass`).
    pub(crate) user: Option<String>,
    pub(crate) password: Secret,
}

/// How to reach Redis. Built with [`RedisConfig::builder`].
///
/// `Debug` and [`describe`](Self::describe) show the user name but never the password.
#[derive(Clone)]
pub struct RedisConfig {
    pub(crate) deployment: Deployment,
    pub(crate) credentials: Option<Credentials>,
    pub(crate) db: i64,
    pub(crate) connect_timeout: Duration,
    pub(crate) request_timeout: Duration,
    pub(crate) ping_interval: Duration,
    pub(crate) ping_timeout: Duration,
    pub(crate) max_payload_bytes: usize,
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<TlsConfig>,
}

impl fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("RedisConfig");
        d.field("deployment", &self.deployment.to_string())
            .field("user", &self.user())
            .field("password", &self.credentials.as_ref().map(|_| "<redacted>"))
            .field("db", &self.db)
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("health_check", &(self.ping_interval, self.ping_timeout))
            .field("max_payload_bytes", &self.max_payload_bytes);
        #[cfg(feature = "tls")]
        d.field("tls", &self.tls);
        d.finish()
    }
}

impl RedisConfig {
    /// Starts a configuration with no address and the default timeouts.
    pub fn builder() -> RedisConfigBuilder {
        RedisConfigBuilder::default()
    }

    /// The ACL user name, if one is set.
    pub fn user(&self) -> Option<&str> {
        self.credentials.as_ref().and_then(|c| c.user.as_deref())
    }

    /// The database index (0 unless set).
    pub fn db(&self) -> i64 {
        self.db
    }

    /// Time allowed to open a connection.
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// Time allowed for one command.
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// How often a source PINGs its subscription connection, and how long a PING may go
    /// unanswered before the connection counts as broken (see
    /// [`RedisConfigBuilder::health_check`]).
    pub fn health_check(&self) -> (Duration, Duration) {
        (self.ping_interval, self.ping_timeout)
    }

    /// The former name of the interval of [`health_check`](Self::health_check).
    #[deprecated(since = "0.1.1", note = "use health_check")]
    pub fn ping_interval(&self) -> Duration {
        self.ping_interval
    }

    /// The former name of the timeout of [`health_check`](Self::health_check).
    #[deprecated(since = "0.1.1", note = "use health_check")]
    pub fn ping_timeout(&self) -> Duration {
        self.ping_timeout
    }

    /// The longest a frozen server (one that keeps its connections open but answers nothing)
    /// goes unnoticed by a source: the [`health_check`](Self::health_check)'s interval +
    /// timeout, 3 s by default.
    pub fn frozen_server_detection(&self) -> Duration {
        self.ping_interval + self.ping_timeout
    }

    /// Cap on the size of the value a read returns.
    pub fn max_payload_bytes(&self) -> usize {
        self.max_payload_bytes
    }

    /// Where the rules live, without secrets: `127.0.0.1:6379`, `master mymaster of sentinels
    /// ...`, `cluster ...`, with the user and database when set.
    pub fn describe(&self) -> String {
        let mut text = self.deployment.to_string();
        if let Some(user) = self.user() {
            text.push_str(&format!(" as {user}"));
        }
        if self.db != 0 {
            text.push_str(&format!(" db {}", self.db));
        }
        text
    }

    /// The password, for the connection code only.
    pub(crate) fn password(&self) -> Option<&str> {
        self.credentials.as_ref().map(|c| c.password.expose())
    }

    pub(crate) fn tls_enabled(&self) -> bool {
        #[cfg(feature = "tls")]
        {
            self.tls.is_some()
        }
        #[cfg(not(feature = "tls"))]
        {
            false
        }
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
    credentials: Option<Credentials>,
    db: i64,
    connect_timeout: Duration,
    request_timeout: Duration,
    ping_interval: Duration,
    ping_timeout: Duration,
    max_payload_bytes: usize,
    #[cfg(feature = "tls")]
    tls: Option<TlsConfig>,
}

impl Default for RedisConfigBuilder {
    fn default() -> Self {
        Self {
            server: Vec::new(),
            sentinels: Vec::new(),
            master: None,
            #[cfg(feature = "cluster")]
            cluster: Vec::new(),
            credentials: None,
            db: 0,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            ping_interval: DEFAULT_HEALTH_CHECK_INTERVAL,
            ping_timeout: DEFAULT_HEALTH_CHECK_TIMEOUT,
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }
}

impl fmt::Debug for RedisConfigBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisConfigBuilder")
            .field("server", &self.server)
            .field("sentinels", &self.sentinels)
            .field("master", &self.master)
            .field(
                "user",
                &self.credentials.as_ref().and_then(|c| c.user.as_deref()),
            )
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
        self.credentials = Some(Credentials {
            user: Some(user.into()),
            password: Secret::new(password),
        });
        self
    }

    /// Authenticates as the default user, with the server's `requirepass` password. The
    /// password is never logged.
    pub fn password(mut self, password: impl Into<String>) -> Self {
        self.credentials = Some(Credentials {
            user: None,
            password: Secret::new(password),
        });
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
        self.connect_timeout = timeout;
        self
    }

    /// Time allowed for one command: GET, SUBSCRIBE, CONFIG GET, the writer's transaction
    /// (default 5 s). The PING on the subscription has its own timeout, in
    /// [`health_check`](Self::health_check).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
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
        self.ping_interval = interval;
        self.ping_timeout = timeout;
        self
    }

    /// Sets the interval of [`health_check`](Self::health_check) alone.
    #[deprecated(since = "0.1.1", note = "use health_check")]
    pub fn ping_interval(mut self, interval: Duration) -> Self {
        self.ping_interval = interval;
        self
    }

    /// Sets the timeout of [`health_check`](Self::health_check) alone.
    #[deprecated(since = "0.1.1", note = "use health_check")]
    pub fn ping_timeout(mut self, timeout: Duration) -> Self {
        self.ping_timeout = timeout;
        self
    }

    /// Cap on the size of the value a source reads (default 4 MiB). A larger value (or
    /// message) is reported as `SourceError::TooLarge` and the watch goes on.
    pub fn max_payload_bytes(mut self, limit: usize) -> Self {
        self.max_payload_bytes = limit;
        self
    }

    /// Connects with TLS (`rediss`).
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls(mut self, tls: TlsConfig) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Checks the settings.
    pub fn build(self) -> Result<RedisConfig, ConfigError> {
        let deployment = self.deployment()?;
        if let Some(creds) = &self.credentials {
            if creds.user.as_deref().is_some_and(str::is_empty) {
                return Err(ConfigError::EmptyUser);
            }
        }
        if self.db < 0 {
            return Err(ConfigError::NegativeDatabase { db: self.db });
        }
        #[cfg(feature = "cluster")]
        if matches!(deployment, Deployment::Cluster(_)) && self.db != 0 {
            return Err(ConfigError::ClusterDatabase { db: self.db });
        }
        for (field, zero) in [
            ("connect_timeout", self.connect_timeout.is_zero()),
            ("request_timeout", self.request_timeout.is_zero()),
            ("health_check interval", self.ping_interval.is_zero()),
            ("health_check timeout", self.ping_timeout.is_zero()),
            ("max_payload_bytes", self.max_payload_bytes == 0),
        ] {
            if zero {
                return Err(ConfigError::Zero { field });
            }
        }
        Ok(RedisConfig {
            deployment,
            credentials: self.credentials,
            db: self.db,
            connect_timeout: self.connect_timeout,
            request_timeout: self.request_timeout,
            ping_interval: self.ping_interval,
            ping_timeout: self.ping_timeout,
            max_payload_bytes: self.max_payload_bytes,
            #[cfg(feature = "tls")]
            tls: self.tls,
        })
    }

    fn deployment(&self) -> Result<Deployment, ConfigError> {
        let parse = |list: &[String], port| {
            list.iter()
                .map(|a| Address::parse(a, port))
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
            return Ok(Deployment::Server(Address::parse(server, DEFAULT_PORT)?));
        }
        if self.server.len() > 1 {
            return Err(ConfigError::SeveralDeployments);
        }
        if let Some(master) = &self.master {
            if master.trim().is_empty() {
                return Err(ConfigError::EmptyMasterName);
            }
            let sentinels = parse(&self.sentinels, DEFAULT_SENTINEL_PORT)?;
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
            Ok(Deployment::Cluster(parse(&self.cluster, DEFAULT_PORT)?))
        }
        #[cfg(not(feature = "cluster"))]
        {
            Err(ConfigError::NoAddress)
        }
    }
}

#[cfg(test)]
mod tests;
