//! Connection settings for Nacos: server addresses, namespace, credentials, timeouts. What
//! every store shares (credentials, timeouts, the payload cap, address checks) is
//! [`sentinel_core::datasource::backend`]'s; this module keeps Nacos's own: the context path,
//! the namespace, the long poll and its health check.

use std::fmt;
use std::time::Duration;

use sentinel_core::datasource::address_list;
use sentinel_core::datasource::backend::{
    self, parse_addresses, AddressRules, BackendSettings, Credentials, CredentialsEnv, HealthCheck,
};

/// Default time allowed to open a connection to one server (3 s), and for one request other
/// than the long poll (GET, login, publish; 5 s).
pub use sentinel_core::datasource::backend::{DEFAULT_CONNECT_TIMEOUT, DEFAULT_REQUEST_TIMEOUT};
/// Default time the server may hold a long poll before it answers "no change": the Nacos
/// SDK's 30 s.
pub const DEFAULT_LONG_POLL_TIMEOUT: Duration = Duration::from_secs(30);
/// Default interval between the health checks a source makes while its long poll waits (1 s;
/// a long poll is silent by design, so only a second request tells a frozen server from one
/// with no change to report), and the time a check may go unanswered before the connection
/// counts as broken (2 s): a frozen server is reported disconnected within 3 s.
pub use sentinel_core::datasource::backend::{
    DEFAULT_HEALTH_CHECK_INTERVAL, DEFAULT_HEALTH_CHECK_TIMEOUT,
};
/// Default cap on the total size of the configs a source reads: the data-source framework's
/// cap (4 MiB), which the driver enforces too.
pub use sentinel_core::datasource::DEFAULT_MAX_PAYLOAD_BYTES;

/// The group the Sentinel dashboard and Spring Cloud Alibaba keep rules in.
pub const SENTINEL_GROUP: &str = "SENTINEL_GROUP";
/// Nacos's default group.
pub const DEFAULT_GROUP: &str = "DEFAULT_GROUP";

/// A server address: `host:port`, `http://host:port` or `https://host:port`.
const SERVER: AddressRules = AddressRules::new("Nacos server address").schemes(&["http", "https"]);

/// A configuration that [`NacosConfigBuilder::build`] refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// No server address was given.
    #[error("at least one Nacos server address is required")]
    NoServers,
    /// A server address is malformed.
    #[error("invalid Nacos server address {address:?}: {reason}")]
    InvalidServer {
        /// The address as given.
        address: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The user name is empty.
    #[error("the Nacos user name is empty")]
    EmptyUser,
    /// A timeout or size limit is zero.
    #[error("{field} must be greater than zero")]
    Zero {
        /// The setting that is zero.
        field: &'static str,
    },
    /// Another shared setting is refused: half a login in the environment.
    #[error(transparent)]
    Settings(backend::ConfigError),
}

impl From<backend::ConfigError> for ConfigError {
    fn from(error: backend::ConfigError) -> Self {
        use backend::ConfigError as Shared;
        match error {
            Shared::NoAddress { .. } => Self::NoServers,
            Shared::InvalidAddress {
                address, reason, ..
            } => Self::InvalidServer { address, reason },
            Shared::EmptyUser => Self::EmptyUser,
            Shared::Zero { field } => Self::Zero { field },
            other => Self::Settings(other),
        }
    }
}

/// One Nacos config: a dataId in a group.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConfigKey {
    /// The dataId, for example `orders-flow-rules`.
    pub data_id: String,
    /// The group, for example `SENTINEL_GROUP`.
    pub group: String,
}

impl ConfigKey {
    /// A dataId in `group`.
    pub fn new(data_id: impl Into<String>, group: impl Into<String>) -> Self {
        Self {
            data_id: data_id.into(),
            group: group.into(),
        }
    }

    /// The key of this config's entry in a source's payload, `{group}/{dataId}`: what
    /// [`DataSourceBuilder::converter_for`](sentinel_core::datasource::DataSourceBuilder::converter_for)
    /// takes.
    pub fn entry_key(&self) -> String {
        format!("{}/{}", self.group, self.data_id)
    }
}

impl fmt::Display for ConfigKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.group, self.data_id)
    }
}

/// How to reach Nacos. Built with [`NacosConfig::builder`].
///
/// `Debug` shows the user name but never the password.
#[derive(Debug, Clone)]
pub struct NacosConfig {
    /// Base URLs with the context path, `http://host:8848/nacos`.
    pub(crate) servers: Vec<String>,
    /// The namespace (tenant) id; `None` is the default (`public`) namespace.
    pub(crate) namespace: Option<String>,
    pub(crate) long_poll_timeout: Duration,
    settings: BackendSettings,
    health_check: HealthCheck,
}

impl NacosConfig {
    /// Starts a configuration with no servers and the default timeouts.
    pub fn builder() -> NacosConfigBuilder {
        NacosConfigBuilder::default()
    }

    /// The servers' base URLs, with the context path.
    pub fn servers(&self) -> &[String] {
        &self.servers
    }

    /// The namespace (tenant) id, `None` for the default namespace.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The user name, if credentials are set.
    pub fn user(&self) -> Option<&str> {
        self.settings.user()
    }

    /// The credentials, for the login code only.
    pub(crate) fn credentials(&self) -> Option<&Credentials> {
        self.settings.credentials.as_ref()
    }

    /// How often a source checks that the server answers while its long poll waits, and how
    /// long a check may take (see [`NacosConfigBuilder::health_check`]).
    pub fn health_check(&self) -> (Duration, Duration) {
        (self.health_check.interval, self.health_check.timeout)
    }

    /// The longest a frozen server (one that keeps the connection open but answers nothing)
    /// goes unnoticed by a waiting source: the health check's interval + timeout, 3 s by
    /// default.
    pub fn frozen_server_detection(&self) -> Duration {
        self.health_check.frozen_server_detection()
    }

    /// The long-poll timeout.
    pub fn long_poll_timeout(&self) -> Duration {
        self.long_poll_timeout
    }

    /// Time allowed to open a connection to one server.
    pub fn connect_timeout(&self) -> Duration {
        self.settings.timeouts.connect
    }

    /// Time allowed for one request other than the long poll.
    pub fn request_timeout(&self) -> Duration {
        self.settings.timeouts.request
    }

    /// Cap on the total size of the configs a source reads.
    pub fn max_payload_bytes(&self) -> usize {
        self.settings.max_payload_bytes
    }

    /// Where the configs live, without secrets: the servers, the namespace and the user.
    pub fn describe(&self) -> String {
        let mut text = self.servers.join(",");
        if let Some(ns) = &self.namespace {
            text.push_str(&format!(" namespace {ns}"));
        }
        if let Some(credentials) = self.credentials() {
            text.push_str(&credentials.describe());
        }
        text
    }
}

/// Builder for [`NacosConfig`].
#[derive(Debug, Clone)]
pub struct NacosConfigBuilder {
    servers: Vec<String>,
    context_path: String,
    namespace: Option<String>,
    long_poll_timeout: Duration,
    settings: BackendSettings,
    health_check: HealthCheck,
}

impl Default for NacosConfigBuilder {
    fn default() -> Self {
        Self {
            servers: Vec::new(),
            context_path: "/nacos".to_owned(),
            namespace: None,
            long_poll_timeout: DEFAULT_LONG_POLL_TIMEOUT,
            settings: BackendSettings::default(),
            health_check: HealthCheck::default(),
        }
    }
}

impl NacosConfigBuilder {
    /// Adds server addresses: `host:port`, `http://host:port` or `https://host:port`. A
    /// comma-separated string is split, so `spring.cloud.nacos.config.server-addr` can be
    /// passed as is. On a connection error the source moves to the next one.
    pub fn servers<I, S>(mut self, servers: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.servers.extend(address_list(servers));
        self
    }

    /// The servers' context path (default `/nacos`).
    pub fn context_path(mut self, path: impl Into<String>) -> Self {
        self.context_path = path.into();
        self
    }

    /// The namespace id (Nacos's `tenant`). `public` or empty is the default namespace.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        let namespace = namespace.into();
        self.namespace = match namespace.trim() {
            "" | "public" => None,
            ns => Some(ns.to_owned()),
        };
        self
    }

    /// Logs in with this user (`/nacos/v1/auth/login`), for servers with auth on. The
    /// password is never logged.
    pub fn credentials(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.settings.credentials = Some(Credentials::new(user, password));
        self
    }

    /// Without [`credentials`](Self::credentials), reads them from the environment when
    /// [`build`](Self::build) runs: `CredentialsEnv::default()` reads `SENTINEL_RULES_USER`
    /// and `SENTINEL_RULES_PASSWORD` (both or neither; neither means no login).
    pub fn credentials_from_env(mut self, env: CredentialsEnv) -> Self {
        self.settings.credentials_env = Some(env);
        self
    }

    /// Time allowed to open a connection to one server (default 3 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.settings.timeouts.connect = timeout;
        self
    }

    /// Time allowed for one request other than the long poll: GET, login, publish
    /// (default 5 s).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.settings.timeouts.request = timeout;
        self
    }

    /// How often a source checks that the server answers while its long poll waits, and how
    /// long a check may take (default 1 s and 2 s). A check is a `GET
    /// /v1/console/health/readiness` on the server being polled, without credentials: any
    /// HTTP answer (a 403 from a server with auth included) shows the server is alive. No
    /// answer in time is a broken connection: the source's status turns `connected: false`,
    /// with a `last_error` naming both settings, and the driver reconnects. A server that
    /// freezes without closing the connection (`SIGSTOP`, a stalled VM, a partition) is so
    /// noticed within interval + timeout, 3 s by default, rather than after the long-poll
    /// timeout plus the request timeout (35 s).
    pub fn health_check(mut self, interval: Duration, timeout: Duration) -> Self {
        self.health_check = HealthCheck::new(interval, timeout);
        self
    }

    /// How long the server may hold a long poll before it answers "no change" (default 30 s,
    /// as the Nacos SDK). The request itself may take this plus the request timeout.
    pub fn long_poll_timeout(mut self, timeout: Duration) -> Self {
        self.long_poll_timeout = timeout;
        self
    }

    /// Cap on the total size of the configs a source reads (default 4 MiB).
    pub fn max_payload_bytes(mut self, limit: usize) -> Self {
        self.settings.max_payload_bytes = limit;
        self
    }

    /// Checks the settings.
    pub fn build(self) -> Result<NacosConfig, ConfigError> {
        let context = format!("/{}", self.context_path.trim_matches('/'));
        let context = if context == "/" {
            String::new()
        } else {
            context
        };
        let servers = parse_addresses(&self.servers, &SERVER)?
            .into_iter()
            .map(|a| format!("{}://{a}{context}", a.scheme.as_deref().unwrap_or("http")))
            .collect();
        let settings = self.settings.build()?;
        backend::check_nonzero([("long_poll_timeout", self.long_poll_timeout.is_zero())])?;
        self.health_check.check()?;
        Ok(NacosConfig {
            servers,
            namespace: self.namespace,
            long_poll_timeout: self.long_poll_timeout,
            settings,
            health_check: self.health_check,
        })
    }
}

#[cfg(test)]
mod tests {
    use sentinel_test_support::{assert_default_health_check, assert_refused};

    use super::*;

    #[test]
    fn addresses_become_base_urls_with_the_context_path() {
        let config = NacosConfig::builder()
            .servers(["10.0.0.1:8848, https://nacos.local:8848/"])
            .build()
            .expect("valid");
        assert_eq!(
            config.servers(),
            [
                "http://10.0.0.1:8848/nacos",
                "https://nacos.local:8848/nacos"
            ]
        );
        let config = NacosConfig::builder()
            .servers(["h:1"])
            .context_path("/")
            .build()
            .expect("valid");
        assert_eq!(config.servers(), ["http://h:1"]);
        for bad in ["ftp://h", "http://u:p@h:1", "h:1/x", "", "h:0", "h:1?x"] {
            let result = NacosConfig::builder().servers([bad]).build();
            assert!(result.is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn credentials_come_from_the_environment_only_when_asked() {
        // Cargo and nextest set CARGO_PKG_NAME and CARGO_MANIFEST_DIR for every test run.
        let env = CredentialsEnv::new("CARGO_PKG_NAME", "CARGO_MANIFEST_DIR");
        let base = || NacosConfig::builder().servers(["h:1"]);
        assert_eq!(base().build().expect("valid").user(), None);
        let config = base().credentials_from_env(env).build().expect("valid");
        assert_eq!(config.user(), Some(env!("CARGO_PKG_NAME")));
        let half = CredentialsEnv::new("SENTINEL_TEST_UNSET_USER", "CARGO_MANIFEST_DIR");
        let err = base().credentials_from_env(half).build().expect_err("half");
        assert!(matches!(err, ConfigError::Settings(_)), "{err:?}");
    }

    #[test]
    fn public_is_the_default_namespace() {
        let config = NacosConfig::builder()
            .servers(["h:1"])
            .namespace("public")
            .build()
            .expect("valid");
        assert_eq!(config.namespace(), None);
    }

    #[test]
    fn debug_and_describe_never_show_the_password() {
        let config = NacosConfig::builder()
            .servers(["h:1"])
            .namespace("dev")
            .credentials("nacos", "s3cret-pw")
            .build()
            .expect("valid");
        let shown = format!("{config:?} {}", config.describe());
        assert!(!shown.contains("s3cret-pw"), "{shown}");
        assert_eq!(config.describe(), "http://h:1/nacos namespace dev as nacos");
    }

    #[test]
    fn entry_keys_name_group_and_data_id() {
        let key = ConfigKey::new("orders-flow-rules", SENTINEL_GROUP);
        assert_eq!(key.entry_key(), "SENTINEL_GROUP/orders-flow-rules");
    }

    #[test]
    fn the_default_health_check_notices_a_frozen_server_within_3_s_and_debug_shows_it() {
        let base = || NacosConfig::builder().servers(["127.0.0.1:8848"]);
        let config = base().build().expect("valid");
        assert_default_health_check(&config, config.frozen_server_detection());
        let zero_interval = base().health_check(Duration::ZERO, Duration::from_secs(2));
        let field = "health_check interval";
        assert_refused(zero_interval.build(), ConfigError::Zero { field });
    }
}
