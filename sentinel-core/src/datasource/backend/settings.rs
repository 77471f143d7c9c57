//! Timeouts, the health check, the payload cap and the credentials every backend has, with
//! their defaults and one check.

use std::fmt;
use std::time::Duration;

use super::{check_nonzero, ConfigError, Credentials, CredentialsEnv, TlsConfig};
use crate::datasource::DEFAULT_MAX_PAYLOAD_BYTES;

/// Default time allowed to open a connection (TCP, TLS, login): 3 s.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Default time allowed for one request (a read, a write, opening a watch): 5 s.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Default interval between a source's health checks on a quiet connection: 1 s.
pub const DEFAULT_HEALTH_CHECK_INTERVAL: Duration = Duration::from_secs(1);
/// Default time a health check may go unanswered before the connection counts as broken:
/// 2 s. With [`DEFAULT_HEALTH_CHECK_INTERVAL`], a frozen server is noticed within 3 s, and a
/// busy one must stay silent for 2 s to be taken for dead.
pub const DEFAULT_HEALTH_CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// Time allowed to open a connection and for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Time allowed to open a connection (setting `connect_timeout`).
    pub connect: Duration,
    /// Time allowed for one request (setting `request_timeout`).
    pub request: Duration,
}

impl Default for Timeouts {
    /// [`DEFAULT_CONNECT_TIMEOUT`] and [`DEFAULT_REQUEST_TIMEOUT`].
    fn default() -> Self {
        Self::new(DEFAULT_CONNECT_TIMEOUT, DEFAULT_REQUEST_TIMEOUT)
    }
}

impl Timeouts {
    /// These timeouts.
    pub const fn new(connect: Duration, request: Duration) -> Self {
        Self { connect, request }
    }

    /// Refuses a zero timeout, naming `connect_timeout` or `request_timeout`.
    pub fn check(&self) -> Result<(), ConfigError> {
        check_nonzero([
            ("connect_timeout", self.connect.is_zero()),
            ("request_timeout", self.request.is_zero()),
        ])
    }
}

/// How a source tells a frozen server (one that keeps the connection open but answers
/// nothing) from a quiet one: a check every `interval`, and a connection counts as broken
/// when a check goes unanswered for `timeout`.
///
/// `Debug` prints `(interval, timeout)`, so a config's `Debug` reads `health_check: (1s, 2s)`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct HealthCheck {
    /// Time between checks (setting `health_check interval`).
    pub interval: Duration,
    /// Time a check may go unanswered (setting `health_check timeout`).
    pub timeout: Duration,
}

impl fmt::Debug for HealthCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (self.interval, self.timeout).fmt(f)
    }
}

impl Default for HealthCheck {
    /// [`DEFAULT_HEALTH_CHECK_INTERVAL`] and [`DEFAULT_HEALTH_CHECK_TIMEOUT`]: a frozen
    /// server is noticed within 3 s.
    fn default() -> Self {
        Self::new(DEFAULT_HEALTH_CHECK_INTERVAL, DEFAULT_HEALTH_CHECK_TIMEOUT)
    }
}

impl HealthCheck {
    /// A check every `interval`, answered within `timeout`.
    pub const fn new(interval: Duration, timeout: Duration) -> Self {
        Self { interval, timeout }
    }

    /// The longest a frozen server goes unnoticed: interval + timeout.
    pub fn frozen_server_detection(&self) -> Duration {
        self.interval.saturating_add(self.timeout)
    }

    /// Refuses a zero interval or timeout, naming `health_check interval` or
    /// `health_check timeout`.
    pub fn check(&self) -> Result<(), ConfigError> {
        check_nonzero([
            ("health_check interval", self.interval.is_zero()),
            ("health_check timeout", self.timeout.is_zero()),
        ])
    }
}

/// The settings every backend's config builder has, with their defaults: credentials (given,
/// or read from the environment when [`credentials_env`](Self::credentials_env) is set),
/// timeouts, the payload cap and TLS. A backend's builder keeps one of these beside its own
/// settings and calls [`build`](Self::build) from its own `build`.
///
/// `Debug` shows the user, never the password or a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendSettings {
    /// Credentials given to the builder; they win over the environment.
    pub credentials: Option<Credentials>,
    /// Where to read credentials from when none are given; `None` (the default) reads no
    /// environment.
    pub credentials_env: Option<CredentialsEnv>,
    /// Connect and request timeouts.
    pub timeouts: Timeouts,
    /// Cap on the total size of the values a source reads (setting `max_payload_bytes`).
    pub max_payload_bytes: usize,
    /// TLS, when the backend connects with it.
    pub tls: Option<TlsConfig>,
}

impl Default for BackendSettings {
    /// No credentials, no environment, [`Timeouts::default`], the framework's payload cap
    /// ([`DEFAULT_MAX_PAYLOAD_BYTES`]), no TLS.
    fn default() -> Self {
        Self::with_timeouts(Timeouts::default())
    }
}

impl BackendSettings {
    /// The defaults with these timeouts (a backend whose defaults differ).
    pub fn with_timeouts(timeouts: Timeouts) -> Self {
        Self {
            credentials: None,
            credentials_env: None,
            timeouts,
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
            tls: None,
        }
    }

    /// The user, if credentials are set.
    pub fn user(&self) -> Option<&str> {
        self.credentials.as_ref().and_then(Credentials::user)
    }

    /// Settles and checks the settings: credentials from the environment when none are given
    /// and [`credentials_env`](Self::credentials_env) is set, then an empty user, a zero
    /// timeout or payload cap, and TLS PEMs are refused, naming the setting.
    pub fn build(self) -> Result<Self, ConfigError> {
        self.build_with(|name| std::env::var(name).ok())
    }

    /// [`build`](Self::build) with `lookup` in place of the process environment.
    pub fn build_with(
        mut self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        if self.credentials.is_none() {
            if let Some(env) = &self.credentials_env {
                self.credentials = env.read_with(lookup)?;
            }
        }
        if let Some(credentials) = &self.credentials {
            credentials.check()?;
        }
        self.timeouts.check()?;
        check_nonzero([("max_payload_bytes", self.max_payload_bytes == 0)])?;
        if let Some(tls) = &self.tls {
            tls.check()?;
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasource::backend::{PASSWORD_ENV, USER_ENV};

    #[test]
    fn defaults_notice_a_frozen_server_within_3_s() {
        let check = HealthCheck::default();
        assert_eq!(check.frozen_server_detection(), Duration::from_secs(3));
        assert_eq!(check.check(), Ok(()));
        assert_eq!(format!("{check:?}"), "(1s, 2s)");
        let settings = BackendSettings::default();
        assert_eq!(
            settings.timeouts,
            Timeouts::new(DEFAULT_CONNECT_TIMEOUT, DEFAULT_REQUEST_TIMEOUT)
        );
        assert_eq!(settings.max_payload_bytes, DEFAULT_MAX_PAYLOAD_BYTES);
        assert_eq!(settings.build(), Ok(BackendSettings::default()));
    }

    #[test]
    fn zero_settings_are_refused_by_name() {
        let zero = |field| Err(ConfigError::Zero { field });
        let with = |connect, request, max_payload_bytes| BackendSettings {
            timeouts: Timeouts::new(connect, request),
            max_payload_bytes,
            ..BackendSettings::default()
        };
        let (s, none) = (Duration::from_secs(1), Duration::ZERO);
        assert_eq!(with(none, s, 1).build(), zero("connect_timeout"));
        assert_eq!(with(s, none, 1).build(), zero("request_timeout"));
        assert_eq!(with(s, s, 0).build(), zero("max_payload_bytes"));
        let field = "health_check interval";
        assert_eq!(
            HealthCheck::new(none, s).check(),
            Err(ConfigError::Zero { field })
        );
        let field = "health_check timeout";
        assert_eq!(
            HealthCheck::new(s, none).check(),
            Err(ConfigError::Zero { field })
        );
    }

    #[test]
    fn given_credentials_win_over_the_environment_which_is_read_only_when_asked() {
        let env = |name: &str| match name {
            USER_ENV => Some("env-user".to_owned()),
            PASSWORD_ENV => Some("env-pw".to_owned()),
            _ => None,
        };
        let unasked = BackendSettings::default().build_with(env).expect("valid");
        assert_eq!(unasked.credentials, None);
        let asked = BackendSettings {
            credentials_env: Some(CredentialsEnv::default()),
            ..BackendSettings::default()
        };
        let from_env = asked.clone().build_with(env).expect("valid");
        assert_eq!(from_env.user(), Some("env-user"));
        let given = BackendSettings {
            credentials: Some(Credentials::new("given", "pw")),
            ..asked
        };
        assert_eq!(given.build_with(env).expect("valid").user(), Some("given"));
    }

    #[test]
    fn an_empty_user_and_a_bad_pem_are_refused() {
        let empty_user = BackendSettings {
            credentials: Some(Credentials::new("", "s3cret-pw")),
            ..BackendSettings::default()
        };
        assert_eq!(empty_user.build(), Err(ConfigError::EmptyUser));
        let bad_pem = BackendSettings {
            tls: Some(TlsConfig::new().ca_certificate_pem("not a pem")),
            ..BackendSettings::default()
        };
        let refused = bad_pem.build();
        assert!(
            matches!(
                refused,
                Err(ConfigError::Tls {
                    field: "ca_certificate",
                    ..
                })
            ),
            "{refused:?}"
        );
    }
}
