//! TLS to the servers (feature `tls`).

use std::fmt;

/// TLS to the servers (the `tls` feature): rustls, with the system's root certificates or the
/// CA given here.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct TlsConfig {
    pub(crate) ca_pem: Option<Vec<u8>>,
}

impl TlsConfig {
    /// TLS with the system's root certificates.
    pub fn new() -> Self {
        Self::default()
    }

    /// Trusts this CA certificate (PEM) for the servers' certificates, instead of the system
    /// roots.
    pub fn ca_certificate_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.ca_pem = Some(pem.into());
        self
    }

    pub(crate) fn certificates(&self) -> redis::TlsCertificates {
        redis::TlsCertificates {
            client_tls: None,
            root_cert: self.ca_pem.clone(),
        }
    }
}

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConfig")
            .field("ca_certificate", &self.ca_pem.is_some())
            .finish()
    }
}
