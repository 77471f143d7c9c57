//! Connection settings for ZooKeeper: servers, chroot, digest credentials, session and
//! health-check timeouts. What every store shares (credentials, timeouts, the payload cap,
//! address checks) is [`sentinel_core::datasource::backend`]'s; this module keeps
//! ZooKeeper's own: the chroot, the session timeout, the health check and the digest login.

use std::time::Duration;

use sentinel_core::datasource::address_list;
use sentinel_core::datasource::backend::{
    self, check_nonzero, parse_addresses, AddressRules, BackendSettings, Credentials,
    CredentialsEnv,
};

/// Default time allowed to establish a session (3 s), and for one request (a read, a write,
/// a watch; 5 s).
pub use sentinel_core::datasource::backend::{DEFAULT_CONNECT_TIMEOUT, DEFAULT_REQUEST_TIMEOUT};
/// Default session timeout asked of the server. The server clamps it into its own
/// `[minSessionTimeout, maxSessionTimeout]` (by default 2 and 20 ticks: 4 s to 40 s).
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(10);
/// Default health check: a connection the server leaves silent this long is dropped (the
/// client PINGs an idle connection after 3/8 of it). A frozen server is noticed within
/// 1.5 times this, 3 s by default.
pub const DEFAULT_HEALTH_CHECK_TIMEOUT: Duration = Duration::from_secs(2);
/// Default cap on the total size of the values a source reads: the data-source framework's
/// cap (4 MiB), which the driver enforces too.
pub use sentinel_core::datasource::DEFAULT_MAX_PAYLOAD_BYTES;

/// A server address: `host[:port]`, no scheme and no path.
const SERVER: AddressRules = AddressRules::new("ZooKeeper server");

/// A configuration that [`ZooKeeperConfigBuilder::build`] refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// No server was given.
    #[error("at least one ZooKeeper server is required")]
    NoServers,
    /// A server address is malformed.
    #[error("invalid ZooKeeper server {server:?}: {reason}")]
    InvalidServer {
        /// The address as given.
        server: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The chroot is not an absolute znode path.
    #[error("invalid chroot {chroot:?}: {reason}")]
    InvalidChroot {
        /// The chroot as given.
        chroot: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A timeout or size limit is zero.
    #[error("{field} must be greater than zero")]
    Zero {
        /// The setting that is zero.
        field: &'static str,
    },
    /// The health check is longer than 3/5 of the session timeout: the client would ignore
    /// it and take 2/5 of the session timeout instead.
    #[error(
        "health_check timeout {health_check:?} is over 3/5 of the session timeout \
         {session_timeout:?}"
    )]
    HealthCheckTooLong {
        /// The health check timeout.
        health_check: Duration,
        /// The session timeout.
        session_timeout: Duration,
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

/// How to reach ZooKeeper. Built with [`ZooKeeperConfig::builder`].
///
/// `Debug` shows the user name but never the password.
#[derive(Debug, Clone)]
pub struct ZooKeeperConfig {
    pub(crate) servers: Vec<String>,
    pub(crate) chroot: Option<String>,
    settings: BackendSettings,
    pub(crate) session_timeout: Duration,
    pub(crate) health_check: Duration,
}

impl ZooKeeperConfig {
    /// Starts a configuration with no servers and the default timeouts.
    pub fn builder() -> ZooKeeperConfigBuilder {
        ZooKeeperConfigBuilder::default()
    }

    /// The servers, as given.
    pub fn servers(&self) -> &[String] {
        &self.servers
    }

    /// The chroot every path is under, if any.
    pub fn chroot(&self) -> Option<&str> {
        self.chroot.as_deref()
    }

    /// Time allowed to establish a session.
    pub fn connect_timeout(&self) -> Duration {
        self.settings.timeouts.connect
    }

    /// Time allowed for one request.
    pub fn request_timeout(&self) -> Duration {
        self.settings.timeouts.request
    }

    /// Cap on the total size of the values a source reads.
    pub fn max_payload_bytes(&self) -> usize {
        self.settings.max_payload_bytes
    }

    /// The bytes `addauth digest` sends, `user:password`, when credentials are set.
    pub(crate) fn digest_auth(&self) -> Option<Vec<u8>> {
        let credentials = self.settings.credentials.as_ref()?;
        let user = credentials.user().unwrap_or_default();
        Some(format!("{user}:{}", credentials.password().expose()).into_bytes())
    }

    /// The session timeout asked of the server.
    pub fn session_timeout(&self) -> Duration {
        self.session_timeout
    }

    /// How long a silent connection is kept (see
    /// [`ZooKeeperConfigBuilder::health_check`]).
    pub fn health_check(&self) -> Duration {
        self.health_check
    }

    /// The longest a frozen server (one that keeps the connection open but answers nothing)
    /// goes unnoticed: 1.5 health checks, 3 s by default (the client drops a connection
    /// silent for one health check, and looks every eighth of it).
    pub fn frozen_server_detection(&self) -> Duration {
        self.health_check * 3 / 2
    }

    /// The connect string the client is given: `host:port,host:port[/chroot]`.
    pub(crate) fn connect_string(&self) -> String {
        format!(
            "{}{}",
            self.servers.join(","),
            self.chroot.as_deref().unwrap_or_default()
        )
    }

    /// The servers, chroot and user, without the password.
    pub fn describe(&self) -> String {
        let user = self
            .settings
            .credentials
            .as_ref()
            .map(Credentials::describe);
        format!("{}{}", self.connect_string(), user.unwrap_or_default())
    }
}

/// Builder for [`ZooKeeperConfig`].
#[derive(Debug, Clone)]
pub struct ZooKeeperConfigBuilder {
    servers: Vec<String>,
    chroot: Option<String>,
    settings: BackendSettings,
    session_timeout: Duration,
    health_check: Duration,
}

impl Default for ZooKeeperConfigBuilder {
    fn default() -> Self {
        Self {
            servers: Vec::new(),
            chroot: None,
            settings: BackendSettings::default(),
            session_timeout: DEFAULT_SESSION_TIMEOUT,
            health_check: DEFAULT_HEALTH_CHECK_TIMEOUT,
        }
    }
}

impl ZooKeeperConfigBuilder {
    /// Adds servers: `host:port` (`host` alone means port 2181). A comma-separated string is
    /// split, so a Java connect string's server part passes as is. The client moves to
    /// another server when one fails. A chroot goes in [`chroot`](Self::chroot), not here.
    pub fn servers<I, S>(mut self, servers: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.servers.extend(address_list(servers));
        self
    }

    /// Every path is under `chroot` (an absolute znode path, `/apps/orders`), as a Java
    /// connect string's `/chroot` suffix does.
    pub fn chroot(mut self, chroot: impl Into<String>) -> Self {
        self.chroot = Some(chroot.into());
        self
    }

    /// Authenticates with the digest scheme, as `addauth digest user:password` does: znodes
    /// whose ACL names `digest:user:...` become readable (or writable). The password is
    /// never logged.
    pub fn credentials(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.settings.credentials = Some(Credentials::new(user, password));
        self
    }

    /// Without [`credentials`](Self::credentials), reads them from the environment when
    /// [`build`](Self::build) runs: `CredentialsEnv::default()` reads `SENTINEL_RULES_USER`
    /// and `SENTINEL_RULES_PASSWORD` (both or neither; neither means no digest login).
    pub fn credentials_from_env(mut self, env: CredentialsEnv) -> Self {
        self.settings.credentials_env = Some(env);
        self
    }

    /// Time allowed to establish a session (default 3 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.settings.timeouts.connect = timeout;
        self
    }

    /// Time allowed for one request (default 5 s).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.settings.timeouts.request = timeout;
        self
    }

    /// The session timeout asked of the server (default 10 s; the server clamps it). A
    /// session the server has not heard from for this long expires; the source then starts
    /// a new one and reads again.
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// The health check (default 2 s): the client PINGs a connection idle for 3/8 of it and
    /// drops a connection the server leaves silent for all of it; a source then reports
    /// `connected: false`. A server that freezes without closing the connection (`SIGSTOP`,
    /// a stalled VM, a partition) is noticed within 1.5 times this (3 s by default). At most
    /// 3/5 of the session timeout.
    pub fn health_check(mut self, timeout: Duration) -> Self {
        self.health_check = timeout;
        self
    }

    /// Cap on the total size of the values a source reads (default 4 MiB).
    pub fn max_payload_bytes(mut self, limit: usize) -> Self {
        self.settings.max_payload_bytes = limit;
        self
    }

    /// Checks the settings.
    pub fn build(self) -> Result<ZooKeeperConfig, ConfigError> {
        for server in &self.servers {
            if server.contains('/') && !server.contains('@') {
                return Err(ConfigError::InvalidServer {
                    server: server.clone(),
                    reason:
                        "a server is host:port; a chroot goes in ZooKeeperConfigBuilder::chroot",
                });
            }
        }
        parse_addresses(&self.servers, &SERVER)?;
        let chroot = match self.chroot {
            Some(chroot) if chroot == "/" => None,
            Some(chroot) => {
                if let Err(reason) = check_path(&chroot) {
                    return Err(ConfigError::InvalidChroot { chroot, reason });
                }
                Some(chroot)
            }
            None => None,
        };
        let settings = self.settings.build()?;
        check_nonzero([
            ("session_timeout", self.session_timeout.is_zero()),
            ("health_check", self.health_check.is_zero()),
        ])?;
        if self.health_check > self.session_timeout * 3 / 5 {
            return Err(ConfigError::HealthCheckTooLong {
                health_check: self.health_check,
                session_timeout: self.session_timeout,
            });
        }
        Ok(ZooKeeperConfig {
            servers: self.servers,
            chroot,
            settings,
            session_timeout: self.session_timeout,
            health_check: self.health_check,
        })
    }
}

/// An absolute znode path: `/a/b`, no trailing or double slash, no `.` or `..` segment.
pub(crate) fn check_path(path: &str) -> Result<(), &'static str> {
    if !path.starts_with('/') {
        return Err("a znode path starts with /");
    }
    if path == "/" {
        return Ok(());
    }
    if path.ends_with('/') {
        return Err("a znode path does not end with /");
    }
    for segment in path[1..].split('/') {
        if segment.is_empty() {
            return Err("a znode path has no empty segment (//)");
        }
        if segment == "." || segment == ".." {
            return Err("a znode path has no . or .. segment");
        }
        if segment.chars().any(|c| c == '\0' || c.is_control()) {
            return Err("a znode path has no control character");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_describe_never_show_the_password() {
        let config = ZooKeeperConfig::builder()
            .servers(["127.0.0.1:2181"])
            .credentials("app", "s3cret-pw")
            .build()
            .expect("valid");
        let shown = format!("{config:?} {}", config.describe());
        assert!(!shown.contains("s3cret-pw"), "{shown}");
        assert!(config.describe().contains("as app"), "{shown}");
    }

    #[test]
    fn credentials_come_from_the_environment_only_when_asked() {
        // Cargo and nextest set CARGO_PKG_NAME and CARGO_MANIFEST_DIR for every test run.
        let env = CredentialsEnv::new("CARGO_PKG_NAME", "CARGO_MANIFEST_DIR");
        let base = || ZooKeeperConfig::builder().servers(["h"]);
        assert_eq!(base().build().expect("valid").digest_auth(), None);
        let config = base().credentials_from_env(env).build().expect("valid");
        let auth = config.digest_auth().expect("digest login");
        let user = concat!(env!("CARGO_PKG_NAME"), ":");
        assert!(auth.starts_with(user.as_bytes()));
        let err = base()
            .credentials("", "pw")
            .build()
            .expect_err("empty user");
        assert!(matches!(err, ConfigError::Settings(_)), "{err:?}");
    }

    #[test]
    fn servers_and_chroot_make_the_connect_string() {
        let config = ZooKeeperConfig::builder()
            .servers(["10.0.0.1:2181, 10.0.0.2:2181", "10.0.0.3"])
            .chroot("/apps/orders")
            .build()
            .expect("valid");
        assert_eq!(
            config.connect_string(),
            "10.0.0.1:2181,10.0.0.2:2181,10.0.0.3/apps/orders"
        );
        let root = ZooKeeperConfig::builder()
            .servers(["h:2181"])
            .chroot("/")
            .build()
            .expect("valid");
        assert_eq!(root.connect_string(), "h:2181");
    }

    #[test]
    fn bad_addresses_chroots_and_timeouts_are_refused() {
        assert_eq!(
            ZooKeeperConfig::builder().build().expect_err("none"),
            ConfigError::NoServers
        );
        for bad in [
            "u:s3cret@h:2181",
            "h:2181/chroot",
            ":2181",
            "h:99999",
            "h:x",
        ] {
            let err = ZooKeeperConfig::builder()
                .servers([bad])
                .build()
                .expect_err(bad);
            assert!(matches!(err, ConfigError::InvalidServer { .. }), "{err:?}");
            assert!(!err.to_string().contains("s3cret"), "{err}");
        }
        for bad in ["apps", "/apps/", "/a//b", "/a/../b"] {
            let err = ZooKeeperConfig::builder()
                .servers(["h"])
                .chroot(bad)
                .build()
                .expect_err(bad);
            assert!(matches!(err, ConfigError::InvalidChroot { .. }), "{err:?}");
        }
        let err = ZooKeeperConfig::builder()
            .servers(["h"])
            .health_check(Duration::ZERO)
            .build()
            .expect_err("zero");
        assert_eq!(
            err,
            ConfigError::Zero {
                field: "health_check"
            }
        );
        let err = ZooKeeperConfig::builder()
            .servers(["h"])
            .session_timeout(Duration::from_secs(4))
            .health_check(Duration::from_secs(3))
            .build()
            .expect_err("too long");
        assert!(
            matches!(err, ConfigError::HealthCheckTooLong { .. }),
            "{err:?}"
        );
    }

    #[test]
    fn the_default_health_check_notices_a_frozen_server_within_3_s_and_debug_shows_it() {
        let config = ZooKeeperConfig::builder()
            .servers(["127.0.0.1:2181"])
            .build()
            .expect("valid");
        assert_eq!(config.frozen_server_detection(), Duration::from_secs(3));
        assert!(
            format!("{config:?}").contains("health_check: 2s"),
            "{config:?}"
        );
    }
}
