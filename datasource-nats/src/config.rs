//! Connection settings for NATS: servers, credentials, timeouts, what a missing bucket means.
//! What every store shares (a user and password, timeouts, the payload cap, address checks)
//! is [`sentinel_core::datasource::backend`]'s; this module keeps NATS's own: tokens, nkeys,
//! creds files, the PING interval, the CA file and the missing-bucket policy.

use std::path::PathBuf;
use std::time::Duration;

use sentinel_core::datasource::backend::{
    self, check_nonzero, parse_addresses, AddressRules, BackendSettings, Credentials,
    CredentialsEnv,
};
use sentinel_core::datasource::{address_list, Secret};

/// Default time allowed to open a connection (3 s), and for one JetStream request (a read, a
/// put, opening a watch; 5 s).
pub use sentinel_core::datasource::backend::{DEFAULT_CONNECT_TIMEOUT, DEFAULT_REQUEST_TIMEOUT};
/// Default interval between the client's PINGs on an idle connection. The client drops a
/// connection that leaves two PINGs unanswered when a third is due, so a frozen server is
/// noticed within three intervals: 3 s by default (the client library's own default, 60 s,
/// would take 3 minutes), while a server has to stay silent for over 2 s to be taken for
/// dead.
pub const DEFAULT_HEALTH_CHECK_INTERVAL: Duration = Duration::from_secs(1);
/// The former name of [`DEFAULT_HEALTH_CHECK_INTERVAL`].
#[deprecated(since = "0.1.1", note = "use DEFAULT_HEALTH_CHECK_INTERVAL")]
pub const DEFAULT_PING_INTERVAL: Duration = DEFAULT_HEALTH_CHECK_INTERVAL;
/// Default cap on the total size of the values a source reads: the data-source framework's
/// cap (4 MiB), which the driver enforces too.
pub use sentinel_core::datasource::DEFAULT_MAX_PAYLOAD_BYTES;

/// A server address: `nats://`, `tls://`, `ws://`, `wss://` or a bare `host:port`.
const SERVER: AddressRules =
    AddressRules::new("NATS server").schemes(&["nats", "tls", "ws", "wss"]);

/// A configuration that [`NatsConfigBuilder::build`] refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// No server was given.
    #[error("at least one NATS server is required")]
    NoServers,
    /// A server address is malformed.
    #[error("invalid NATS server {server:?}: {reason}")]
    InvalidServer {
        /// The address as given.
        server: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A timeout or size limit is zero.
    #[error("{field} must be greater than zero")]
    Zero {
        /// The setting that is zero.
        field: &'static str,
    },
    /// Another shared setting is refused: an empty user, half a login in the environment.
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
            } => Self::InvalidServer {
                server: address,
                reason,
            },
            Shared::Zero { field } => Self::Zero { field },
            other => Self::Settings(other),
        }
    }
}

/// How to authenticate, besides a user and password (the shared settings' credentials).
/// Secrets never appear in `Debug` output, logs or errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Auth {
    None,
    Token(Secret),
    NKey(Secret),
    CredsFile(PathBuf),
}

/// What a source does when its bucket does not exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum MissingBucket {
    /// Fail the read with a clear error (the default): the start fails, naming the bucket
    /// (with `StartMode::Snapshot` the source starts and the driver keeps retrying with
    /// backoff).
    #[default]
    Fail,
    /// Treat the missing bucket as "no rules" and look for it again every `poll`: the
    /// source starts, and applies the bucket's keys once someone creates it.
    Wait {
        /// How often to look for the bucket.
        poll: Duration,
    },
}

/// How to reach NATS. Built with [`NatsConfig::builder`].
///
/// `Debug` shows the user name but never a password, token, nkey seed or creds content.
#[derive(Debug, Clone)]
pub struct NatsConfig {
    pub(crate) servers: Vec<String>,
    auth: Auth,
    settings: BackendSettings,
    health_check_interval: Duration,
    pub(crate) missing_bucket: MissingBucket,
    #[cfg(feature = "tls")]
    tls_root: Option<PathBuf>,
}

impl NatsConfig {
    /// Starts a configuration with no servers and the default timeouts.
    pub fn builder() -> NatsConfigBuilder {
        NatsConfigBuilder::default()
    }

    /// The servers, as given.
    pub fn servers(&self) -> &[String] {
        &self.servers
    }

    /// Time allowed to open a connection.
    pub fn connect_timeout(&self) -> Duration {
        self.settings.timeouts.connect
    }

    /// Time allowed for one JetStream request.
    pub fn request_timeout(&self) -> Duration {
        self.settings.timeouts.request
    }

    /// Cap on the total size of the values a source reads.
    pub fn max_payload_bytes(&self) -> usize {
        self.settings.max_payload_bytes
    }

    /// How often the client PINGs an idle connection (see
    /// [`NatsConfigBuilder::health_check_interval`]).
    pub fn health_check_interval(&self) -> Duration {
        self.health_check_interval
    }

    /// The former name of [`health_check_interval`](Self::health_check_interval).
    #[deprecated(since = "0.1.1", note = "use health_check_interval")]
    pub fn ping_interval(&self) -> Duration {
        self.health_check_interval
    }

    /// The longest a frozen server (one that keeps the connection open but answers nothing)
    /// goes unnoticed: three [`health_check_interval`](Self::health_check_interval)s, 3 s by default (the
    /// client drops a connection with two PINGs unanswered when the third is due).
    pub fn frozen_server_detection(&self) -> Duration {
        self.health_check_interval * 3
    }

    /// What a missing bucket means.
    pub fn missing_bucket(&self) -> MissingBucket {
        self.missing_bucket
    }

    /// The servers and the kind of auth, without secrets.
    pub fn describe(&self) -> String {
        let auth = match (&self.settings.credentials, &self.auth) {
            (Some(credentials), _) => credentials.describe(),
            (None, Auth::None) => String::new(),
            (None, Auth::Token(_)) => " with a token".to_owned(),
            (None, Auth::NKey(_)) => " with an nkey".to_owned(),
            (None, Auth::CredsFile(path)) => format!(" with creds {}", path.display()),
        };
        format!("{}{auth}", self.servers.join(","))
    }

    /// The client options for this configuration.
    pub(crate) async fn options(&self) -> std::io::Result<async_nats::ConnectOptions> {
        let options = async_nats::ConnectOptions::new()
            .connection_timeout(self.connect_timeout())
            .request_timeout(Some(self.request_timeout()))
            .ping_interval(self.health_check_interval)
            .max_reconnects(None::<usize>);
        let options = match (&self.settings.credentials, &self.auth) {
            (Some(credentials), _) => options.user_and_password(
                credentials.user().unwrap_or_default().to_owned(),
                credentials.password().expose().to_owned(),
            ),
            (None, Auth::None) => options,
            (None, Auth::Token(token)) => options.token(token.expose().to_owned()),
            (None, Auth::NKey(seed)) => options.nkey(seed.expose().to_owned()),
            (None, Auth::CredsFile(path)) => options.credentials_file(path).await?,
        };
        #[cfg(feature = "tls")]
        let options = match &self.tls_root {
            Some(root) => options
                .require_tls(true)
                .add_root_certificates(root.clone()),
            None => options,
        };
        Ok(options)
    }
}

/// Builder for [`NatsConfig`].
#[derive(Debug, Clone)]
pub struct NatsConfigBuilder {
    servers: Vec<String>,
    auth: Auth,
    settings: BackendSettings,
    health_check_interval: Duration,
    missing_bucket: MissingBucket,
    #[cfg(feature = "tls")]
    tls_root: Option<PathBuf>,
}

impl Default for NatsConfigBuilder {
    fn default() -> Self {
        Self {
            servers: Vec::new(),
            auth: Auth::None,
            settings: BackendSettings::default(),
            health_check_interval: DEFAULT_HEALTH_CHECK_INTERVAL,
            missing_bucket: MissingBucket::Fail,
            #[cfg(feature = "tls")]
            tls_root: None,
        }
    }
}

impl NatsConfigBuilder {
    /// Adds servers: `nats://host:port`, `host:port` or `tls://host:port` (the `tls`
    /// feature). A comma-separated string is split. The client moves between them on its own.
    pub fn servers<I, S>(mut self, servers: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.servers.extend(address_list(servers));
        self
    }

    /// Authenticates with a user and password. The password is never logged.
    pub fn credentials(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.auth = Auth::None;
        self.settings.credentials = Some(Credentials::new(user, password));
        self
    }

    /// Without another login (credentials, a token, an nkey or a creds file), reads a user
    /// and password from the environment when [`build`](Self::build) runs:
    /// `CredentialsEnv::default()` reads `SENTINEL_RULES_USER` and `SENTINEL_RULES_PASSWORD`
    /// (both or neither; neither means no login).
    pub fn credentials_from_env(mut self, env: CredentialsEnv) -> Self {
        self.settings.credentials_env = Some(env);
        self
    }

    /// The former name of [`credentials`](Self::credentials).
    #[deprecated(since = "0.1.1", note = "use credentials")]
    pub fn user_and_password(self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.credentials(user, password)
    }

    /// Authenticates with a token.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.settings.credentials = None;
        self.auth = Auth::Token(Secret::new(token));
        self
    }

    /// Authenticates with an nkey seed (`SU...`).
    pub fn nkey(mut self, seed: impl Into<String>) -> Self {
        self.settings.credentials = None;
        self.auth = Auth::NKey(Secret::new(seed));
        self
    }

    /// Authenticates with a creds file (a user JWT and its nkey seed), read on every connect.
    pub fn creds_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.settings.credentials = None;
        self.auth = Auth::CredsFile(path.into());
        self
    }

    /// Time allowed to open a connection (default 3 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.settings.timeouts.connect = timeout;
        self
    }

    /// Time allowed for one JetStream request: a read, a put, opening a watch (default 5 s).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.settings.timeouts.request = timeout;
        self
    }

    /// How often the client PINGs an idle connection (default 1 s). It drops a connection
    /// that leaves two PINGs unanswered when the third is due, and a source then reports
    /// `connected: false`: a server that freezes without closing the connection (`SIGSTOP`,
    /// a stalled VM, a partition) is noticed within three intervals (3 s by default). Any
    /// message from the server counts as an answer, so a busy connection sends no PINGs.
    pub fn health_check_interval(mut self, interval: Duration) -> Self {
        self.health_check_interval = interval;
        self
    }

    /// The former name of [`health_check_interval`](Self::health_check_interval).
    #[deprecated(since = "0.1.1", note = "use health_check_interval")]
    pub fn ping_interval(self, interval: Duration) -> Self {
        self.health_check_interval(interval)
    }

    /// Cap on the total size of the values a source reads (default 4 MiB).
    pub fn max_payload_bytes(mut self, limit: usize) -> Self {
        self.settings.max_payload_bytes = limit;
        self
    }

    /// What a source does when its bucket does not exist ([`MissingBucket::Fail`] by
    /// default).
    pub fn missing_bucket(mut self, policy: MissingBucket) -> Self {
        self.missing_bucket = policy;
        self
    }

    /// Requires TLS and trusts this CA certificate file (PEM) for the servers.
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls_ca_certificate_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.tls_root = Some(path.into());
        self
    }

    /// The former name of [`tls_ca_certificate_file`](Self::tls_ca_certificate_file).
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    #[deprecated(since = "0.1.1", note = "use tls_ca_certificate_file")]
    pub fn tls_root_certificate(self, path: impl Into<PathBuf>) -> Self {
        self.tls_ca_certificate_file(path)
    }

    /// Checks the settings.
    pub fn build(mut self) -> Result<NatsConfig, ConfigError> {
        parse_addresses(&self.servers, &SERVER)?;
        for server in &self.servers {
            if async_nats::ToServerAddrs::to_server_addrs(&server.as_str()).is_err() {
                return Err(ConfigError::InvalidServer {
                    server: server.clone(),
                    reason: "not a NATS server address",
                });
            }
        }
        if self.auth != Auth::None {
            // A token, an nkey or a creds file is the login: the environment is not read.
            self.settings.credentials_env = None;
        }
        let settings = self.settings.build()?;
        let interval = self.health_check_interval;
        check_nonzero([("health_check_interval", interval.is_zero())])?;
        Ok(NatsConfig {
            servers: self.servers,
            auth: self.auth,
            settings,
            health_check_interval: self.health_check_interval,
            missing_bucket: self.missing_bucket,
            #[cfg(feature = "tls")]
            tls_root: self.tls_root,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_describe_never_show_secrets() {
        for builder in [
            NatsConfig::builder().credentials("app", "s3cret-pw"),
            NatsConfig::builder().token("s3cret-pw"),
            NatsConfig::builder().nkey("s3cret-pw"),
        ] {
            let config = builder.servers(["127.0.0.1:4222"]).build().expect("valid");
            let shown = format!("{config:?} {}", config.describe());
            assert!(!shown.contains("s3cret-pw"), "{shown}");
        }
    }

    #[test]
    fn credentials_come_from_the_environment_unless_another_login_is_set() {
        // Cargo and nextest set CARGO_PKG_NAME and CARGO_MANIFEST_DIR for every test run.
        let env = || CredentialsEnv::new("CARGO_PKG_NAME", "CARGO_MANIFEST_DIR");
        let base = || NatsConfig::builder().servers(["127.0.0.1:4222"]);
        let config = base().credentials_from_env(env()).build().expect("valid");
        let user = format!(" as {}", env!("CARGO_PKG_NAME"));
        assert!(config.describe().ends_with(&user), "{}", config.describe());
        let token = base().credentials_from_env(env()).token("t").build();
        assert!(token.expect("valid").describe().ends_with("with a token"));
        let err = base()
            .credentials("", "pw")
            .build()
            .expect_err("empty user");
        assert!(matches!(err, ConfigError::Settings(_)), "{err:?}");
    }

    #[test]
    fn addresses_are_checked() {
        assert_eq!(
            NatsConfig::builder().build().expect_err("none"),
            ConfigError::NoServers
        );
        let err = NatsConfig::builder()
            .servers(["nats://u:s3cret@h:4222"])
            .build()
            .expect_err("credentials in the address");
        assert!(!err.to_string().contains("s3cret"), "{err}");
        NatsConfig::builder()
            .servers(["nats://127.0.0.1:4222, 127.0.0.1:4223, tls://h:4222"])
            .build()
            .expect("valid");
    }

    #[test]
    fn the_default_health_check_interval_notices_a_frozen_server_within_3_s_and_debug_shows_it() {
        let config = NatsConfig::builder()
            .servers(["127.0.0.1:4222"])
            .build()
            .expect("valid");
        assert_eq!(config.frozen_server_detection(), Duration::from_secs(3));
        assert!(
            format!("{config:?}").contains("health_check_interval: 1s"),
            "{config:?}"
        );
        let err = NatsConfig::builder()
            .servers(["127.0.0.1:4222"])
            .health_check_interval(Duration::ZERO)
            .build()
            .expect_err("zero");
        assert_eq!(
            err,
            ConfigError::Zero {
                field: "health_check_interval"
            }
        );
    }
}
