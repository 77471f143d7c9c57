//! What every backend's configuration shares: credentials (given, or read from the
//! environment) whose password never shows, TLS certificates checked when the builder runs,
//! connect and request timeouts, a health check, a payload cap, address lists, and the
//! errors a builder refuses a setting with, each naming the setting.
//!
//! A backend's config builder keeps a [`BackendSettings`] for these and only its own
//! settings beside it (a namespace, a chroot, a database index), checks them all in `build`
//! with [`BackendSettings::build`] and [`parse_address`], and maps [`ConfigError`] into its
//! own error type. Then credentials come from the environment the same way in every store,
//! a password never reaches `Debug` output, a log line or an error, a CA file that is not a
//! PEM certificate is refused before the first connection, and a zero timeout is refused
//! with the setting's name. `docs/adding-a-backend.md` walks through it.
//!
//! ```
//! use sentinel_core::datasource::backend::{
//!     parse_address, AddressRules, BackendSettings, ConfigError, Credentials,
//! };
//!
//! const RULES: AddressRules = AddressRules::new("Example server")
//!     .schemes(&["http", "https"])
//!     .default_port(8080);
//!
//! let settings = BackendSettings {
//!     credentials: Some(Credentials::new("app", "s3cret")),
//!     ..BackendSettings::default()
//! }
//! .build()?;
//! assert!(!format!("{settings:?}").contains("s3cret"));
//!
//! let address = parse_address("https://rules.internal", &RULES)?;
//! assert_eq!(address.to_string(), "rules.internal:8080");
//! let refused = parse_address("http://app:s3cret@rules.internal", &RULES).unwrap_err();
//! assert!(!refused.to_string().contains("s3cret"));
//! # Ok::<(), ConfigError>(())
//! ```

mod address;
mod credentials;
mod error;
mod settings;
mod tls;

pub use address::{parse_address, parse_addresses, Address, AddressRules};
pub use credentials::{Credentials, CredentialsEnv, PASSWORD_ENV, USER_ENV};
pub use error::{check_nonzero, ConfigError};
pub use settings::{
    BackendSettings, HealthCheck, Timeouts, DEFAULT_CONNECT_TIMEOUT, DEFAULT_HEALTH_CHECK_INTERVAL,
    DEFAULT_HEALTH_CHECK_TIMEOUT, DEFAULT_REQUEST_TIMEOUT,
};
pub use tls::TlsConfig;
