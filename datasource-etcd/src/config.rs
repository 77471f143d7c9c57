//! Connection settings for etcd: endpoints, credentials, timeouts and TLS. What every store
//! shares (credentials, timeouts, the payload cap, TLS, address checks) is
//! [`sentinel_core::datasource::backend`]'s; this module keeps etcd's own: its endpoint
//! schemes, keep-alive pings, the watch's health check and the gRPC client options.

use std::time::Duration;

use sentinel_core::datasource::address_list;
use sentinel_core::datasource::backend::{
    self, parse_addresses, AddressRules, BackendSettings, Credentials, CredentialsEnv, HealthCheck,
    Timeouts,
};

use etcd_client::{Client, ConnectOptions};

#[cfg(feature = "tls")]
pub use sentinel_core::datasource::backend::TlsConfig;
/// Default interval between the progress requests a source sends on its open watch, to learn
/// that the server still answers (1 s), and the time one may go unanswered (no message at
/// all on the watch) before the connection counts as broken (2 s): a frozen server is
/// reported disconnected within 3 s.
pub use sentinel_core::datasource::backend::{
    DEFAULT_HEALTH_CHECK_INTERVAL, DEFAULT_HEALTH_CHECK_TIMEOUT,
};
/// Default cap on the total size of the values a source reads: the data-source framework's
/// cap (4 MiB), which the driver enforces too. etcd's own default request limit
/// (`--max-request-bytes`, 1.5 MiB) is lower, so a larger value needs that server setting.
pub use sentinel_core::datasource::DEFAULT_MAX_PAYLOAD_BYTES;

/// Default time allowed to open a TCP (and TLS) connection to one endpoint.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Default time allowed for one request (GET, PUT, authenticate, opening a watch).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The former name of [`DEFAULT_HEALTH_CHECK_INTERVAL`].
#[deprecated(since = "0.1.1", note = "use DEFAULT_HEALTH_CHECK_INTERVAL")]
pub const DEFAULT_WATCH_CHECK_INTERVAL: Duration = DEFAULT_HEALTH_CHECK_INTERVAL;
/// The former name of [`DEFAULT_HEALTH_CHECK_TIMEOUT`].
#[deprecated(since = "0.1.1", note = "use DEFAULT_HEALTH_CHECK_TIMEOUT")]
pub const DEFAULT_WATCH_CHECK_TIMEOUT: Duration = DEFAULT_HEALTH_CHECK_TIMEOUT;

/// Room for keys and framing on top of the payload cap when sizing gRPC messages.
const MESSAGE_OVERHEAD_BYTES: usize = 1024 * 1024;

/// What an endpoint may be: `http://host:port`, `https://host:port` or a bare `host:port`.
const ENDPOINT: AddressRules = AddressRules::new("etcd endpoint")
    .schemes(&["http", "https"])
    .path(true);

/// A configuration that [`EtcdConfigBuilder::build`] refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// No endpoint was given.
    #[error("at least one etcd endpoint is required")]
    NoEndpoints,
    /// An endpoint is malformed.
    #[error("invalid etcd endpoint {endpoint:?}: {reason}")]
    InvalidEndpoint {
        /// The endpoint as given, with any credentials in it masked.
        endpoint: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The user name is empty.
    #[error("the etcd user name is empty")]
    EmptyUser,
    /// A timeout or size limit is zero.
    #[error("{field} must be greater than zero")]
    Zero {
        /// The setting that is zero.
        field: &'static str,
    },
    /// Another shared setting is refused: half a login in the environment, a TLS PEM or
    /// file.
    #[error(transparent)]
    Settings(backend::ConfigError),
}

impl From<backend::ConfigError> for ConfigError {
    fn from(error: backend::ConfigError) -> Self {
        use backend::ConfigError as Shared;
        match error {
            Shared::NoAddress { .. } => Self::NoEndpoints,
            Shared::InvalidAddress {
                address, reason, ..
            } => Self::InvalidEndpoint {
                endpoint: address,
                reason,
            },
            Shared::EmptyUser => Self::EmptyUser,
            Shared::Zero { field } => Self::Zero { field },
            other => Self::Settings(other),
        }
    }
}

/// How to reach an etcd cluster. Built with [`EtcdConfig::builder`].
///
/// `Debug` shows the user name but never the password.
#[derive(Debug, Clone)]
pub struct EtcdConfig {
    pub(crate) endpoints: Vec<String>,
    settings: BackendSettings,
    keep_alive: Option<(Duration, Duration)>,
    health_check: HealthCheck,
}

impl EtcdConfig {
    /// Starts a configuration with no endpoints and the default timeouts.
    pub fn builder() -> EtcdConfigBuilder {
        EtcdConfigBuilder::default()
    }

    /// The endpoints, as given.
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    /// The user name, if credentials are set.
    pub fn user(&self) -> Option<&str> {
        self.settings.user()
    }

    /// Whether the client authenticates.
    pub(crate) fn has_credentials(&self) -> bool {
        self.settings.credentials.is_some()
    }

    /// Time allowed to open a connection to one endpoint.
    pub fn connect_timeout(&self) -> Duration {
        self.settings.timeouts.connect
    }

    /// Time allowed for one request.
    pub fn request_timeout(&self) -> Duration {
        self.settings.timeouts.request
    }

    /// How often a source sends a progress request on its open watch, and how long it waits
    /// for an answer (see [`EtcdConfigBuilder::health_check`]).
    pub fn health_check(&self) -> (Duration, Duration) {
        (self.health_check.interval, self.health_check.timeout)
    }

    /// The former name of [`health_check`](Self::health_check).
    #[deprecated(since = "0.1.1", note = "use health_check")]
    pub fn watch_check(&self) -> (Duration, Duration) {
        self.health_check()
    }

    /// The longest a frozen server (one that keeps the connection open but answers nothing)
    /// goes unnoticed by a watching source: the health check's interval + timeout, 3 s by
    /// default.
    pub fn frozen_server_detection(&self) -> Duration {
        self.health_check.frozen_server_detection()
    }

    /// Cap on the total size of the values one read returns.
    pub fn max_payload_bytes(&self) -> usize {
        self.settings.max_payload_bytes
    }

    /// Largest gRPC message the client accepts: the payload cap plus room for keys.
    pub(crate) fn max_message_bytes(&self) -> usize {
        self.settings
            .max_payload_bytes
            .saturating_add(MESSAGE_OVERHEAD_BYTES)
    }

    /// Opens a client to every endpoint (the writer's: the client balances its requests).
    /// With credentials this authenticates, so it talks to a server; without them the
    /// connection is made lazily by the first request.
    pub(crate) async fn connect(&self) -> Result<Client, etcd_client::Error> {
        self.connect_to(&self.endpoints).await
    }

    /// Opens a client to `endpoints` only.
    pub(crate) async fn connect_to(
        &self,
        endpoints: &[String],
    ) -> Result<Client, etcd_client::Error> {
        let mut options = ConnectOptions::new().with_connect_timeout(self.connect_timeout());
        if let Some((interval, timeout)) = self.keep_alive {
            options = options.with_keep_alive(interval, timeout);
        }
        if let Some(creds) = &self.settings.credentials {
            // etcd's simple tokens expire after --auth-token-ttl of inactivity and are lost on a
            // server restart. The client then re-authenticates once and retries the request.
            options = options
                .with_user(creds.user().unwrap_or_default(), creds.password().expose())
                .with_auto_token_refresh(true);
        }
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.settings.tls {
            options = options.with_tls(tls_options(tls));
        }
        Client::connect(endpoints, Some(options)).await
    }

    /// A short, secret-free description of the endpoints for logs.
    pub(crate) fn describe_endpoints(&self) -> String {
        self.endpoints.join(",")
    }
}

/// etcd-client's TLS options for these settings.
#[cfg(feature = "tls")]
fn tls_options(tls: &TlsConfig) -> etcd_client::TlsOptions {
    let mut options = etcd_client::TlsOptions::new();
    if let Some(ca) = tls.ca_certificate() {
        options = options.ca_certificate(etcd_client::Certificate::from_pem(ca));
    }
    if let Some((cert, key)) = tls.client_identity() {
        options = options.identity(etcd_client::Identity::from_pem(cert, key));
    }
    if let Some(name) = tls.server_name() {
        options = options.domain_name(name);
    }
    options
}

/// Builder for [`EtcdConfig`].
///
/// `Debug` shows the user name but never the password.
#[derive(Debug, Clone)]
pub struct EtcdConfigBuilder {
    endpoints: Vec<String>,
    settings: BackendSettings,
    keep_alive: Option<(Duration, Duration)>,
    health_check: HealthCheck,
}

impl Default for EtcdConfigBuilder {
    fn default() -> Self {
        Self {
            endpoints: Vec::new(),
            settings: BackendSettings::with_timeouts(Timeouts::new(
                DEFAULT_CONNECT_TIMEOUT,
                DEFAULT_REQUEST_TIMEOUT,
            )),
            // etcd refuses pings more often than --grpc-keepalive-min-time (5 s by default).
            keep_alive: Some((Duration::from_secs(10), Duration::from_secs(10))),
            health_check: HealthCheck::default(),
        }
    }
}

impl EtcdConfigBuilder {
    /// Adds one endpoint, for example `http://127.0.0.1:2379`. `https://` needs the `tls`
    /// feature.
    pub fn endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.endpoints.push(endpoint.into());
        self
    }

    /// Adds several endpoints. A comma-separated string is split, so the value of an
    /// environment variable can be passed as is.
    pub fn endpoints<I, S>(mut self, endpoints: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.endpoints.extend(address_list(endpoints));
        self
    }

    /// Authenticates as this user. The password is never logged.
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

    /// Time allowed to open a connection to one endpoint (default 5 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.settings.timeouts.connect = timeout;
        self
    }

    /// Time allowed for one request: a GET, a PUT, authentication, opening a watch
    /// (default 10 s). Waiting on an open watch has no timeout; keep-alive pings detect a dead
    /// connection instead.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.settings.timeouts.request = timeout;
        self
    }

    /// HTTP/2 keep-alive ping interval and the time to wait for its answer (default 10 s and
    /// 10 s). `None` turns pings off. etcd closes connections that ping more often than its
    /// `--grpc-keepalive-min-time` (5 s by default).
    ///
    /// These pings cannot be frequent enough to notice a frozen server quickly (etcd refuses
    /// them under 5 s apart); the [`health_check`](Self::health_check) does that.
    pub fn keep_alive(mut self, keep_alive: Option<(Duration, Duration)>) -> Self {
        self.keep_alive = keep_alive;
        self
    }

    /// How often a watching source sends a progress request on its watch stream (etcd
    /// answers at once with a progress notice), and how long it waits for any message on the
    /// stream after one (default 1 s and 2 s). No answer in time is a broken connection: the
    /// source's status turns `connected: false`, with a `last_error` naming both settings, and
    /// the driver reconnects. A server that freezes without closing the connection
    /// (`SIGSTOP`, a stalled VM, a partition) is so noticed within interval + timeout, 3 s by
    /// default, rather than the 20 s of the keep-alive pings. Progress notices are data on
    /// the stream, so etcd's ping policy (`--grpc-keepalive-min-time`) does not apply.
    /// Progress requests need etcd 3.4 or newer; etcd 3.5 before 3.5.8 may leave one
    /// unanswered while the watch is still catching up on old revisions, which then costs
    /// one reconnect and re-read, nothing more.
    pub fn health_check(mut self, interval: Duration, timeout: Duration) -> Self {
        self.health_check = HealthCheck::new(interval, timeout);
        self
    }

    /// The former name of [`health_check`](Self::health_check).
    #[deprecated(since = "0.1.1", note = "use health_check")]
    pub fn watch_check(self, interval: Duration, timeout: Duration) -> Self {
        self.health_check(interval, timeout)
    }

    /// Cap on the total size of the values one read returns (default 4 MiB).
    pub fn max_payload_bytes(mut self, limit: usize) -> Self {
        self.settings.max_payload_bytes = limit;
        self
    }

    /// Connects with TLS. Every endpoint must then be `https://` or a bare `host:port`.
    /// A CA or client certificate that holds no PEM certificate is refused by
    /// [`build`](Self::build).
    #[cfg(feature = "tls")]
    pub fn tls(mut self, tls: TlsConfig) -> Self {
        self.settings.tls = Some(tls);
        self
    }

    /// Checks the settings.
    pub fn build(self) -> Result<EtcdConfig, ConfigError> {
        let tls = self.settings.tls.is_some();
        let parsed = parse_addresses(&self.endpoints, &ENDPOINT)?;
        for (text, endpoint) in self.endpoints.iter().zip(parsed) {
            check_scheme(endpoint.scheme.as_deref(), tls, text)?;
        }
        let settings = self.settings.build()?;
        self.health_check.check()?;
        Ok(EtcdConfig {
            endpoints: self.endpoints,
            settings,
            keep_alive: self.keep_alive,
            health_check: self.health_check,
        })
    }
}

/// etcd's own rules on an endpoint's scheme: `https://` needs the `tls` feature, and with
/// TLS configured `http://` is refused.
fn check_scheme(scheme: Option<&str>, tls: bool, endpoint: &str) -> Result<(), ConfigError> {
    let reason = match scheme.map(str::to_ascii_lowercase).as_deref() {
        Some("https") if !cfg!(feature = "tls") => {
            "https:// needs the `tls` feature of datasource-etcd"
        }
        Some("http") if tls => "TLS is configured, so the endpoint must be https://",
        _ => return Ok(()),
    };
    Err(ConfigError::InvalidEndpoint {
        endpoint: endpoint.to_owned(),
        reason,
    })
}

#[cfg(test)]
mod tests;
