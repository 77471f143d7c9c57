//! TLS settings: a CA certificate, a client certificate and key, a server name, given as PEM
//! or read from files, checked when the builder runs.

use std::fmt;
use std::path::Path;

use super::ConfigError;

/// TLS to a store's servers: the CA certificate to trust (PEM; without one the client's
/// built-in or system roots apply, as the backend documents), an optional client
/// certificate and key for mutual TLS, and an optional name to check the server's
/// certificate against instead of the address's host.
///
/// `Debug` says which parts are set, never the key. [`check`](Self::check) refuses a PEM
/// that holds no certificate or key, so a wrong file is reported by the builder, naming the
/// setting, rather than as a handshake failure at the first connection.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct TlsConfig {
    ca_pem: Option<Vec<u8>>,
    identity: Option<(Vec<u8>, Vec<u8>)>,
    domain_name: Option<String>,
}

impl TlsConfig {
    /// Empty TLS settings.
    pub fn new() -> Self {
        Self::default()
    }

    /// Trusts this CA certificate (PEM) for the servers' certificates.
    pub fn ca_certificate_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.ca_pem = Some(pem.into());
        self
    }

    /// Trusts the CA certificate in this PEM file.
    pub fn ca_certificate_file(self, path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let pem = read("ca_certificate", path.as_ref())?;
        Ok(self.ca_certificate_pem(pem))
    }

    /// Presents this client certificate and private key (both PEM) to the servers.
    pub fn client_identity_pem(
        mut self,
        cert: impl Into<Vec<u8>>,
        key: impl Into<Vec<u8>>,
    ) -> Self {
        self.identity = Some((cert.into(), key.into()));
        self
    }

    /// Presents the client certificate and private key in these PEM files.
    pub fn client_identity_files(
        self,
        cert: impl AsRef<Path>,
        key: impl AsRef<Path>,
    ) -> Result<Self, ConfigError> {
        let cert = read("client_certificate", cert.as_ref())?;
        let key = read("client_key", key.as_ref())?;
        Ok(self.client_identity_pem(cert, key))
    }

    /// Checks the servers' certificates against this name instead of the address's host.
    pub fn domain_name(mut self, name: impl Into<String>) -> Self {
        self.domain_name = Some(name.into());
        self
    }

    /// The CA certificate (PEM), if set.
    pub fn ca_certificate(&self) -> Option<&[u8]> {
        self.ca_pem.as_deref()
    }

    /// The client certificate and key (PEM), if set.
    pub fn client_identity(&self) -> Option<(&[u8], &[u8])> {
        self.identity
            .as_ref()
            .map(|(cert, key)| (cert.as_slice(), key.as_slice()))
    }

    /// The name the servers' certificates are checked against, if set.
    pub fn server_name(&self) -> Option<&str> {
        self.domain_name.as_deref()
    }

    /// Refuses a CA or client certificate without a PEM certificate block, a key without a
    /// PEM private-key block, and an empty server name.
    pub fn check(&self) -> Result<(), ConfigError> {
        if let Some(ca) = &self.ca_pem {
            pem_block("ca_certificate", ca, "CERTIFICATE-----")?;
        }
        if let Some((cert, key)) = &self.identity {
            pem_block("client_certificate", cert, "CERTIFICATE-----")?;
            pem_block("client_key", key, "PRIVATE KEY-----")?;
        }
        if self
            .domain_name
            .as_deref()
            .is_some_and(|n| n.trim().is_empty())
        {
            return Err(ConfigError::Tls {
                field: "domain_name",
                reason: "the name is empty",
            });
        }
        Ok(())
    }
}

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConfig")
            .field("ca_certificate", &self.ca_pem.is_some())
            .field("client_identity", &self.identity.is_some())
            .field("domain_name", &self.domain_name)
            .finish()
    }
}

fn read(field: &'static str, path: &Path) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(path).map_err(|e| ConfigError::TlsFile {
        field,
        path: path.to_owned(),
        reason: e.to_string(),
    })
}

/// Refuses `pem` unless it has a `-----BEGIN ...{label}` line.
fn pem_block(field: &'static str, pem: &[u8], label: &str) -> Result<(), ConfigError> {
    let text = String::from_utf8_lossy(pem);
    let found = text.lines().any(|line| {
        let line = line.trim();
        line.starts_with("-----BEGIN ") && line.ends_with(label)
    });
    if found {
        Ok(())
    } else if label.starts_with("PRIVATE") {
        Err(ConfigError::Tls {
            field,
            reason: "no PEM private key (-----BEGIN ... PRIVATE KEY-----) in it",
        })
    } else {
        Err(ConfigError::Tls {
            field,
            reason: "no PEM certificate (-----BEGIN CERTIFICATE-----) in it",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    const KEY: &str = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n";

    #[test]
    fn pem_blocks_are_checked_naming_the_setting() {
        let good = TlsConfig::new()
            .ca_certificate_pem(CERT)
            .client_identity_pem(CERT, KEY.replace("PRIVATE", "EC PRIVATE"))
            .domain_name("rules.internal");
        assert_eq!(good.check(), Ok(()));
        assert_eq!(TlsConfig::new().check(), Ok(()));
        let field = |tls: TlsConfig| match tls.check() {
            Err(ConfigError::Tls { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            field(TlsConfig::new().ca_certificate_pem(KEY)),
            "ca_certificate"
        );
        assert_eq!(
            field(TlsConfig::new().client_identity_pem("junk", KEY)),
            "client_certificate"
        );
        assert_eq!(
            field(TlsConfig::new().client_identity_pem(CERT, CERT)),
            "client_key"
        );
        assert_eq!(field(TlsConfig::new().domain_name(" ")), "domain_name");
    }

    #[test]
    fn files_are_read_and_a_missing_one_is_named() {
        let dir = std::env::temp_dir().join(format!("sentinel-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, CERT).expect("write");
        let tls = TlsConfig::new().ca_certificate_file(&ca).expect("read");
        assert_eq!(tls.ca_certificate(), Some(CERT.as_bytes()));
        let missing = dir.join("missing.pem");
        let err = TlsConfig::new()
            .client_identity_files(&ca, &missing)
            .expect_err("missing key file");
        assert!(
            matches!(&err, ConfigError::TlsFile { field: "client_key", path, .. } if *path == missing),
            "{err:?}"
        );
        std::fs::remove_dir_all(&dir).expect("clean up");
    }

    #[test]
    fn debug_never_shows_the_key() {
        let tls = TlsConfig::new().client_identity_pem(CERT, KEY);
        let shown = format!("{tls:?}");
        assert!(!shown.contains("MIIE"), "{shown}");
        assert!(shown.contains("client_identity: true"), "{shown}");
    }
}
