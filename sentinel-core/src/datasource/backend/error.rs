//! Why a backend's config builder refused a setting.

use std::path::PathBuf;

/// A setting a backend's config builder refused. Every variant names the setting (or the
/// environment variable, or the file) and none carries a secret: an address with
/// credentials in it is shown with them masked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// No address was given.
    #[error("at least one {what} is required")]
    NoAddress {
        /// What an address is in this store (`etcd endpoint`, `NATS server`).
        what: &'static str,
    },
    /// An address is malformed.
    #[error("invalid {what} {address:?}: {reason}")]
    InvalidAddress {
        /// What an address is in this store.
        what: &'static str,
        /// The address as given, with any credentials in it masked.
        address: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The user name is empty.
    #[error("the user name is empty")]
    EmptyUser,
    /// A timeout, interval or size limit is zero.
    #[error("{field} must be greater than zero")]
    Zero {
        /// The setting that is zero.
        field: &'static str,
    },
    /// One of the two credential variables is set and the other is not.
    #[error("{set} is set but {missing} is not: set both, or neither")]
    HalfCredentials {
        /// The variable that is set.
        set: String,
        /// The variable that is missing or empty.
        missing: String,
    },
    /// A TLS setting is refused: a PEM that holds no certificate or key, an empty name.
    #[error("TLS {field}: {reason}")]
    Tls {
        /// The TLS setting (`ca_certificate`, `client_certificate`, `client_key`,
        /// `domain_name`).
        field: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A TLS file could not be read.
    #[error("TLS {field} file {path:?}: {reason}")]
    TlsFile {
        /// The TLS setting the file is for.
        field: &'static str,
        /// The file.
        path: PathBuf,
        /// Why it could not be read.
        reason: String,
    },
}

/// Refuses the first setting of `fields` whose flag says it is zero, naming it: the check
/// every builder runs on its timeouts and limits.
///
/// ```
/// use std::time::Duration;
/// use sentinel_core::datasource::backend::{check_nonzero, ConfigError};
///
/// let poll = Duration::ZERO;
/// assert_eq!(
///     check_nonzero([("long_poll_timeout", poll.is_zero())]),
///     Err(ConfigError::Zero { field: "long_poll_timeout" })
/// );
/// ```
pub fn check_nonzero<const N: usize>(fields: [(&'static str, bool); N]) -> Result<(), ConfigError> {
    match fields.iter().find(|(_, zero)| *zero) {
        Some((field, _)) => Err(ConfigError::Zero { field }),
        None => Ok(()),
    }
}
