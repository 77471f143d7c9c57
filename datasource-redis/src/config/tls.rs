//! TLS to the servers (feature `tls`): [`TlsConfig`] is the one every store shares; this is
//! what Redis makes of it.

/// TLS to the servers (the `tls` feature): rustls, with the system's root certificates or the
/// CA given here, and an optional client certificate and key.
pub use sentinel_core::datasource::backend::TlsConfig;

use super::ConfigError;
use sentinel_core::datasource::backend;

/// The Redis client's certificates for these settings.
pub(crate) fn certificates(tls: &TlsConfig) -> redis::TlsCertificates {
    redis::TlsCertificates {
        client_tls: tls
            .client_identity()
            .map(|(cert, key)| redis::ClientTlsConfig {
                client_cert: cert.to_vec(),
                client_key: key.to_vec(),
            }),
        root_cert: tls.ca_certificate().map(<[u8]>::to_vec),
    }
}

/// Refuses what the Redis client cannot do: check the certificate against another name than
/// the address's host.
pub(super) fn check(tls: &TlsConfig) -> Result<(), ConfigError> {
    if tls.server_name().is_some() {
        return Err(ConfigError::Settings(backend::ConfigError::Tls {
            field: "domain_name",
            reason: "the Redis client checks the certificate against the address's host",
        }));
    }
    Ok(())
}
