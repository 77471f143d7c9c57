//! Connection settings for etcd: endpoints, credentials, timeouts and TLS.

use std::fmt;
use std::time::Duration;

use sentinel_core::datasource::{address_list, Secret};

use etcd_client::{Client, ConnectOptions};

/// Default time allowed to open a TCP (and TLS) connection to one endpoint.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Default time allowed for one request (GET, PUT, authenticate, opening a watch).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Default interval between the progress requests a source sends on its open watch, to learn
/// that the server still answers.
pub const DEFAULT_HEALTH_CHECK_INTERVAL: Duration = Duration::from_secs(1);
/// Default time a progress request may go unanswered (no message at all on the watch) before
/// the connection counts as broken. With [`DEFAULT_HEALTH_CHECK_INTERVAL`], a frozen server is
/// reported disconnected within 3 s; a server must stay silent for 2 s to be taken for dead.
pub const DEFAULT_HEALTH_CHECK_TIMEOUT: Duration = Duration::from_secs(2);
/// The former name of [`DEFAULT_HEALTH_CHECK_INTERVAL`].
#[deprecated(since = "0.1.1", note = "use DEFAULT_HEALTH_CHECK_INTERVAL")]
pub const DEFAULT_WATCH_CHECK_INTERVAL: Duration = DEFAULT_HEALTH_CHECK_INTERVAL;
/// The former name of [`DEFAULT_HEALTH_CHECK_TIMEOUT`].
#[deprecated(since = "0.1.1", note = "use DEFAULT_HEALTH_CHECK_TIMEOUT")]
pub const DEFAULT_WATCH_CHECK_TIMEOUT: Duration = DEFAULT_HEALTH_CHECK_TIMEOUT;
/// Default cap on the total size of the values a source reads: the data-source framework's
/// cap (4 MiB), which the driver enforces too. etcd's own default request limit
/// (`--max-request-bytes`, 1.5 MiB) is lower, so a larger value needs that server setting.
pub use sentinel_core::datasource::DEFAULT_MAX_PAYLOAD_BYTES;

/// Room for keys and framing on top of the payload cap when sizing gRPC messages.
const MESSAGE_OVERHEAD_BYTES: usize = 1024 * 1024;

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
        /// The endpoint as given.
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
}

/// A user name and password for etcd's authentication. The password never appears in `Debug`
/// output, logs or error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Credentials {
    pub(crate) user: String,
    pub(crate) password: Secret,
}

/// TLS settings for `https://` endpoints (the `tls` feature).
///
/// Certificates and keys are PEM bytes. Without a CA certificate the built-in roots of the TLS
/// stack are not loaded, so for a private CA pass it here.
#[cfg(feature = "tls")]
#[derive(Clone, Default)]
pub struct TlsConfig {
    ca_pem: Option<Vec<u8>>,
    identity: Option<(Vec<u8>, Vec<u8>)>,
    domain_name: Option<String>,
}

#[cfg(feature = "tls")]
impl TlsConfig {
    /// Empty TLS settings.
    pub fn new() -> Self {
        Self::default()
    }

    /// Trusts this CA certificate (PEM) for the server's certificate.
    pub fn ca_certificate_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.ca_pem = Some(pem.into());
        self
    }

    /// Presents this client certificate and private key (both PEM) to the server.
    pub fn client_identity_pem(
        mut self,
        cert: impl Into<Vec<u8>>,
        key: impl Into<Vec<u8>>,
    ) -> Self {
        self.identity = Some((cert.into(), key.into()));
        self
    }

    /// Checks the server certificate against this name instead of the endpoint's host.
    pub fn domain_name(mut self, name: impl Into<String>) -> Self {
        self.domain_name = Some(name.into());
        self
    }

    fn to_options(&self) -> etcd_client::TlsOptions {
        let mut tls = etcd_client::TlsOptions::new();
        if let Some(ca) = &self.ca_pem {
            tls = tls.ca_certificate(etcd_client::Certificate::from_pem(ca));
        }
        if let Some((cert, key)) = &self.identity {
            tls = tls.identity(etcd_client::Identity::from_pem(cert, key));
        }
        if let Some(name) = &self.domain_name {
            tls = tls.domain_name(name.clone());
        }
        tls
    }
}

#[cfg(feature = "tls")]
impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConfig")
            .field("ca_certificate", &self.ca_pem.is_some())
            .field("client_identity", &self.identity.is_some())
            .field("domain_name", &self.domain_name)
            .finish()
    }
}

/// How to reach an etcd cluster. Built with [`EtcdConfig::builder`].
///
/// `Debug` shows the user name but never the password.
#[derive(Clone)]
pub struct EtcdConfig {
    pub(crate) endpoints: Vec<String>,
    pub(crate) credentials: Option<Credentials>,
    pub(crate) connect_timeout: Duration,
    pub(crate) request_timeout: Duration,
    pub(crate) keep_alive: Option<(Duration, Duration)>,
    pub(crate) health_check: (Duration, Duration),
    pub(crate) max_payload_bytes: usize,
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<TlsConfig>,
}

impl fmt::Debug for EtcdConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("EtcdConfig");
        d.field("endpoints", &self.endpoints)
            .field("user", &self.credentials.as_ref().map(|c| c.user.as_str()))
            .field("password", &self.credentials.as_ref().map(|_| "<redacted>"))
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("keep_alive", &self.keep_alive)
            .field("health_check", &self.health_check)
            .field("max_payload_bytes", &self.max_payload_bytes);
        #[cfg(feature = "tls")]
        d.field("tls", &self.tls);
        d.finish()
    }
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
        self.credentials.as_ref().map(|c| c.user.as_str())
    }

    /// Time allowed to open a connection to one endpoint.
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// Time allowed for one request.
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// How often a source sends a progress request on its open watch, and how long it waits
    /// for an answer (see [`EtcdConfigBuilder::health_check`]).
    pub fn health_check(&self) -> (Duration, Duration) {
        self.health_check
    }

    /// The former name of [`health_check`](Self::health_check).
    #[deprecated(since = "0.1.1", note = "use health_check")]
    pub fn watch_check(&self) -> (Duration, Duration) {
        self.health_check
    }

    /// The longest a frozen server (one that keeps the connection open but answers nothing)
    /// goes unnoticed by a watching source: the health check's interval + timeout, 3 s by
    /// default.
    pub fn frozen_server_detection(&self) -> Duration {
        self.health_check.0 + self.health_check.1
    }

    /// Cap on the total size of the values one read returns.
    pub fn max_payload_bytes(&self) -> usize {
        self.max_payload_bytes
    }

    /// Largest gRPC message the client accepts: the payload cap plus room for keys.
    pub(crate) fn max_message_bytes(&self) -> usize {
        self.max_payload_bytes
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
        let mut options = ConnectOptions::new().with_connect_timeout(self.connect_timeout);
        if let Some((interval, timeout)) = self.keep_alive {
            options = options.with_keep_alive(interval, timeout);
        }
        if let Some(creds) = &self.credentials {
            // etcd's simple tokens expire after --auth-token-ttl of inactivity and are lost on a
            // server restart. The client then re-authenticates once and retries the request.
            options = options
                .with_user(creds.user.clone(), creds.password.expose())
                .with_auto_token_refresh(true);
        }
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            options = options.with_tls(tls.to_options());
        }
        Client::connect(endpoints, Some(options)).await
    }

    /// A short, secret-free description of the endpoints for logs.
    pub(crate) fn describe_endpoints(&self) -> String {
        self.endpoints.join(",")
    }
}

/// Builder for [`EtcdConfig`].
#[derive(Clone)]
pub struct EtcdConfigBuilder {
    endpoints: Vec<String>,
    credentials: Option<Credentials>,
    connect_timeout: Duration,
    request_timeout: Duration,
    keep_alive: Option<(Duration, Duration)>,
    health_check: (Duration, Duration),
    max_payload_bytes: usize,
    #[cfg(feature = "tls")]
    tls: Option<TlsConfig>,
}

impl Default for EtcdConfigBuilder {
    fn default() -> Self {
        Self {
            endpoints: Vec::new(),
            credentials: None,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            // etcd refuses pings more often than --grpc-keepalive-min-time (5 s by default).
            keep_alive: Some((Duration::from_secs(10), Duration::from_secs(10))),
            health_check: (DEFAULT_HEALTH_CHECK_INTERVAL, DEFAULT_HEALTH_CHECK_TIMEOUT),
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }
}

impl fmt::Debug for EtcdConfigBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdConfigBuilder")
            .field("endpoints", &self.endpoints)
            .field("user", &self.credentials.as_ref().map(|c| c.user.as_str()))
            .finish_non_exhaustive()
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
        self.credentials = Some(Credentials {
            user: user.into(),
            password: Secret::new(password),
        });
        self
    }

    /// Time allowed to open a connection to one endpoint (default 5 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Time allowed for one request: a GET, a PUT, authentication, opening a watch
    /// (default 10 s). Waiting on an open watch has no timeout; keep-alive pings detect a dead
    /// connection instead.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
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
        self.health_check = (interval, timeout);
        self
    }

    /// The former name of [`health_check`](Self::health_check).
    #[deprecated(since = "0.1.1", note = "use health_check")]
    pub fn watch_check(self, interval: Duration, timeout: Duration) -> Self {
        self.health_check(interval, timeout)
    }

    /// Cap on the total size of the values one read returns (default 4 MiB).
    pub fn max_payload_bytes(mut self, limit: usize) -> Self {
        self.max_payload_bytes = limit;
        self
    }

    /// Connects with TLS. Every endpoint must then be `https://` or a bare `host:port`.
    #[cfg(feature = "tls")]
    pub fn tls(mut self, tls: TlsConfig) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Checks the settings.
    pub fn build(self) -> Result<EtcdConfig, ConfigError> {
        if self.endpoints.is_empty() {
            return Err(ConfigError::NoEndpoints);
        }
        for e in &self.endpoints {
            check_endpoint(e, self.has_tls())?;
        }
        if let Some(c) = &self.credentials {
            if c.user.is_empty() {
                return Err(ConfigError::EmptyUser);
            }
        }
        if self.connect_timeout.is_zero() {
            return Err(ConfigError::Zero {
                field: "connect_timeout",
            });
        }
        if self.request_timeout.is_zero() {
            return Err(ConfigError::Zero {
                field: "request_timeout",
            });
        }
        if self.max_payload_bytes == 0 {
            return Err(ConfigError::Zero {
                field: "max_payload_bytes",
            });
        }
        for (field, value) in [
            ("health_check interval", self.health_check.0),
            ("health_check timeout", self.health_check.1),
        ] {
            if value.is_zero() {
                return Err(ConfigError::Zero { field });
            }
        }
        Ok(EtcdConfig {
            endpoints: self.endpoints,
            credentials: self.credentials,
            connect_timeout: self.connect_timeout,
            request_timeout: self.request_timeout,
            keep_alive: self.keep_alive,
            health_check: self.health_check,
            max_payload_bytes: self.max_payload_bytes,
            #[cfg(feature = "tls")]
            tls: self.tls,
        })
    }

    #[cfg(feature = "tls")]
    fn has_tls(&self) -> bool {
        self.tls.is_some()
    }

    #[cfg(not(feature = "tls"))]
    fn has_tls(&self) -> bool {
        false
    }
}

fn check_endpoint(endpoint: &str, tls: bool) -> Result<(), ConfigError> {
    let invalid = |reason| ConfigError::InvalidEndpoint {
        endpoint: endpoint.to_owned(),
        reason,
    };
    if endpoint.is_empty() || endpoint.chars().any(char::is_whitespace) {
        return Err(invalid("empty or contains whitespace"));
    }
    let rest = if let Some(rest) = endpoint.strip_prefix("https://") {
        if !cfg!(feature = "tls") {
            return Err(invalid(
                "https:// needs the `tls` feature of datasource-etcd",
            ));
        }
        rest
    } else if let Some(rest) = endpoint.strip_prefix("http://") {
        if tls {
            return Err(invalid(
                "TLS is configured, so the endpoint must be https://",
            ));
        }
        rest
    } else if endpoint.contains("://") {
        return Err(invalid("the scheme must be http:// or https://"));
    } else {
        endpoint
    };
    if rest.is_empty() || rest.starts_with('/') {
        return Err(invalid("no host"));
    }
    let authority = rest.split('/').next().unwrap_or(rest);
    if let Some(at) = authority.rfind('@') {
        // User info in the URL would reach logs and Debug output: refuse it, and keep the
        // secret out of the error too.
        let scheme_len = endpoint.len() - rest.len();
        return Err(ConfigError::InvalidEndpoint {
            endpoint: format!("{}***@{}", &endpoint[..scheme_len], &rest[at + 1..]),
            reason: "credentials in the endpoint; set them with credentials(user, password)",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
