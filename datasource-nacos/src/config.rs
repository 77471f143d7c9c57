//! Connection settings for Nacos: server addresses, namespace, credentials, timeouts.

use std::fmt;
use std::time::Duration;

use sentinel_core::datasource::{address_list, Secret};

/// Default time allowed to open a connection to one server.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Default time allowed for one request other than the long poll (GET, login, publish).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Default time the server may hold a long poll before it answers "no change": the Nacos
/// SDK's 30 s.
pub const DEFAULT_LONG_POLL_TIMEOUT: Duration = Duration::from_secs(30);
/// Default interval between the health checks a source makes while its long poll waits: a
/// long poll is silent by design, so only a second request tells a frozen server from one
/// with no change to report.
pub const DEFAULT_HEALTH_CHECK_INTERVAL: Duration = Duration::from_secs(1);
/// Default time a health check may go unanswered before the connection counts as broken.
/// With [`DEFAULT_HEALTH_CHECK_INTERVAL`], a frozen server is reported disconnected within
/// 3 s; a server must leave a check unanswered for 2 s to be taken for dead.
pub const DEFAULT_HEALTH_CHECK_TIMEOUT: Duration = Duration::from_secs(2);
/// Default cap on the total size of the configs a source reads: the data-source framework's
/// cap (4 MiB), which the driver enforces too.
pub use sentinel_core::datasource::DEFAULT_MAX_PAYLOAD_BYTES;

/// The group the Sentinel dashboard and Spring Cloud Alibaba keep rules in.
pub const SENTINEL_GROUP: &str = "SENTINEL_GROUP";
/// Nacos's default group.
pub const DEFAULT_GROUP: &str = "DEFAULT_GROUP";

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

/// A user name and password for `/nacos/v1/auth/login`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Credentials {
    pub(crate) user: String,
    pub(crate) password: Secret,
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
    pub(crate) credentials: Option<Credentials>,
    pub(crate) connect_timeout: Duration,
    pub(crate) request_timeout: Duration,
    pub(crate) long_poll_timeout: Duration,
    pub(crate) health_check: (Duration, Duration),
    pub(crate) max_payload_bytes: usize,
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
        self.credentials.as_ref().map(|c| c.user.as_str())
    }

    /// How often a source checks that the server answers while its long poll waits, and how
    /// long a check may take (see [`NacosConfigBuilder::health_check`]).
    pub fn health_check(&self) -> (Duration, Duration) {
        self.health_check
    }

    /// The longest a frozen server (one that keeps the connection open but answers nothing)
    /// goes unnoticed by a waiting source: the health check's interval + timeout, 3 s by
    /// default.
    pub fn frozen_server_detection(&self) -> Duration {
        self.health_check.0 + self.health_check.1
    }

    /// The long-poll timeout.
    pub fn long_poll_timeout(&self) -> Duration {
        self.long_poll_timeout
    }

    /// Time allowed for one request other than the long poll.
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// Where the configs live, without secrets: the servers, the namespace and the user.
    pub fn describe(&self) -> String {
        let mut text = self.servers.join(",");
        if let Some(ns) = &self.namespace {
            text.push_str(&format!(" namespace {ns}"));
        }
        if let Some(user) = self.user() {
            text.push_str(&format!(" as {user}"));
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
    credentials: Option<Credentials>,
    connect_timeout: Duration,
    request_timeout: Duration,
    long_poll_timeout: Duration,
    health_check: (Duration, Duration),
    max_payload_bytes: usize,
}

impl Default for NacosConfigBuilder {
    fn default() -> Self {
        Self {
            servers: Vec::new(),
            context_path: "/nacos".to_owned(),
            namespace: None,
            credentials: None,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            long_poll_timeout: DEFAULT_LONG_POLL_TIMEOUT,
            health_check: (DEFAULT_HEALTH_CHECK_INTERVAL, DEFAULT_HEALTH_CHECK_TIMEOUT),
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
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
        self.credentials = Some(Credentials {
            user: user.into(),
            password: Secret::new(password),
        });
        self
    }

    /// Time allowed to open a connection to one server (default 3 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Time allowed for one request other than the long poll: GET, login, publish
    /// (default 5 s).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
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
        self.health_check = (interval, timeout);
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
        self.max_payload_bytes = limit;
        self
    }

    /// Checks the settings.
    pub fn build(self) -> Result<NacosConfig, ConfigError> {
        if self.servers.is_empty() {
            return Err(ConfigError::NoServers);
        }
        let context = format!("/{}", self.context_path.trim_matches('/'));
        let context = if context == "/" {
            String::new()
        } else {
            context
        };
        let servers = self
            .servers
            .iter()
            .map(|s| base_url(s).map(|base| format!("{base}{context}")))
            .collect::<Result<Vec<_>, _>>()?;
        if self.credentials.as_ref().is_some_and(|c| c.user.is_empty()) {
            return Err(ConfigError::EmptyUser);
        }
        for (field, zero) in [
            ("connect_timeout", self.connect_timeout.is_zero()),
            ("request_timeout", self.request_timeout.is_zero()),
            ("long_poll_timeout", self.long_poll_timeout.is_zero()),
            ("health_check interval", self.health_check.0.is_zero()),
            ("health_check timeout", self.health_check.1.is_zero()),
            ("max_payload_bytes", self.max_payload_bytes == 0),
        ] {
            if zero {
                return Err(ConfigError::Zero { field });
            }
        }
        Ok(NacosConfig {
            servers,
            namespace: self.namespace,
            credentials: self.credentials,
            connect_timeout: self.connect_timeout,
            request_timeout: self.request_timeout,
            long_poll_timeout: self.long_poll_timeout,
            health_check: self.health_check,
            max_payload_bytes: self.max_payload_bytes,
        })
    }
}

/// `host:port` or a URL, as `scheme://host:port` without a trailing slash.
fn base_url(address: &str) -> Result<String, ConfigError> {
    let invalid = |reason| ConfigError::InvalidServer {
        address: address.to_owned(),
        reason,
    };
    let (scheme, rest) = match address.split_once("://") {
        Some((scheme @ ("http" | "https"), rest)) => (scheme, rest),
        Some(_) => return Err(invalid("only http:// and https:// are supported")),
        None => ("http", address),
    };
    let host = rest.trim_end_matches('/');
    if host.contains('@') {
        return Err(invalid(
            "credentials belong in the builder's credentials(), not in the address",
        ));
    }
    if host.is_empty() || host.contains('/') || host.contains('?') {
        return Err(invalid("expected host:port"));
    }
    Ok(format!("{scheme}://{host}"))
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
        for bad in ["ftp://h", "http://u:p@h:1", "h:1/x", ""] {
            let result = NacosConfig::builder().servers([bad]).build();
            assert!(result.is_err(), "{bad:?} accepted");
        }
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
