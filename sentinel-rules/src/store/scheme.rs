//! Which scheme a server speaks, asked when a command on it failed. A TLS URL against a
//! plain port, or a plain URL against a TLS port, fails with a transport message ("broken
//! pipe", "tls handshake eof", a time-out) that names neither; a short probe of the port
//! says which one the server speaks, and the message then says which URL to use.

use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use super::url::{Redis, Store};
use crate::failure::Failure;

/// What a port answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Speaks {
    /// TLS: a TLS record (a server hello or an alert) came back.
    Tls,
    /// The store's own plain protocol.
    Plain,
}

/// A probe's longest wait for one answer.
const PROBE_WAIT: Duration = Duration::from_secs(1);

/// A TLS 1.2/1.3 client hello (no server name, common suites and groups): any TLS server
/// answers it with a server hello or an alert, both TLS records (first byte 0x16 or 0x15).
const CLIENT_HELLO: &[u8] = &[
    0x16, 0x03, 0x01, 0x00, 0x4b, // record: handshake, TLS 1.0 on the wire, 75 bytes
    0x01, 0x00, 0x00, 0x47, // client hello, 71 bytes
    0x03, 0x03, // TLS 1.2
    0x53, 0x45, 0x4e, 0x54, 0x49, 0x4e, 0x45, 0x4c, 0x2d, 0x52, 0x55, 0x4c, 0x45, 0x53, 0x2d, 0x50,
    0x52, 0x4f, 0x42, 0x45, 0x2d, 0x52, 0x41, 0x4e, 0x44, 0x4f, 0x4d, 0x2d, 0x30, 0x31, 0x32,
    0x33, // 32 bytes of "random"
    0x00, // no session id
    0x00, 0x0a, 0x13, 0x01, 0x13, 0x02, 0xc0, 0x2f, 0xc0, 0x2b, 0xc0, 0x30, // 5 suites
    0x01, 0x00, // no compression
    0x00, 0x14, // 20 bytes of extensions
    0x00, 0x0a, 0x00, 0x06, 0x00, 0x04, 0x00, 0x1d, 0x00, 0x17, // groups: x25519, P-256
    0x00, 0x0d, 0x00, 0x06, 0x00, 0x04, 0x04, 0x03, 0x08, 0x04, // ECDSA-P256, RSA-PSS
];

/// Whether `bytes` open a TLS record (a handshake or an alert).
fn is_tls(bytes: &[u8]) -> bool {
    matches!(bytes, [0x15 | 0x16, 0x03, ..])
}

/// Connects to `address` and sends `hello` (nothing: only listens); the first bytes the
/// server answers, within [`PROBE_WAIT`] (empty: none).
async fn answer(address: &str, hello: &[u8]) -> Vec<u8> {
    let exchange = async {
        let mut stream = TcpStream::connect(address).await.ok()?;
        if !hello.is_empty() {
            stream.write_all(hello).await.ok()?;
        }
        let mut buf = vec![0u8; 512];
        let n = stream.read(&mut buf).await.ok()?;
        buf.truncate(n);
        Some(buf)
    };
    tokio::time::timeout(PROBE_WAIT, exchange)
        .await
        .ok()
        .flatten()
        .unwrap_or_default()
}

impl Store {
    /// The server's address and whether this URL asks for TLS, for a store that has both
    /// schemes (etcd, Redis, NATS; ZooKeeper is plain only).
    fn address(&self) -> Option<(String, bool)> {
        let strip = |url: &str| url.split("://").nth(1).unwrap_or(url).to_owned();
        match self {
            Store::Etcd { endpoint, tls, .. } => Some((strip(endpoint), *tls)),
            Store::Redis { servers, tls, .. } => {
                let first = match servers {
                    Redis::Server(server) => Some(server),
                    Redis::Sentinel { sentinels, .. } => sentinels.first(),
                    Redis::Cluster(nodes) => nodes.first(),
                }?;
                Some((first.clone(), *tls))
            }
            Store::Nats { server, tls, .. } => Some((strip(server), *tls)),
            Store::File(_) | Store::Nacos { .. } | Store::ZooKeeper { .. } => None,
        }
    }

    /// Which scheme the server speaks, when a probe can tell.
    pub(crate) async fn speaks(&self) -> Option<Speaks> {
        let (address, _) = self.address()?;
        match self {
            Store::Nats { .. } => {
                // A NATS server greets first, saying whether it requires TLS.
                let info = answer(&address, b"").await;
                if info.starts_with(b"INFO") {
                    let info = String::from_utf8_lossy(&info).replace(' ', "");
                    return Some(if info.contains("\"tls_required\":true") {
                        Speaks::Tls
                    } else {
                        Speaks::Plain
                    });
                }
                // One that wants the TLS handshake first.
                is_tls(&answer(&address, CLIENT_HELLO).await).then_some(Speaks::Tls)
            }
            Store::Redis { .. } => {
                // A plain Redis answers PING (`+PONG`, or `-NOAUTH`); a TLS one an alert.
                let reply = answer(&address, b"PING\r\n").await;
                if is_tls(&reply) {
                    Some(Speaks::Tls)
                } else if reply.starts_with(b"+") || reply.starts_with(b"-") {
                    Some(Speaks::Plain)
                } else {
                    is_tls(&answer(&address, CLIENT_HELLO).await).then_some(Speaks::Tls)
                }
            }
            _ => {
                // etcd: a TLS port answers a client hello; a plain one answers HTTP.
                if is_tls(&answer(&address, CLIENT_HELLO).await) {
                    return Some(Speaks::Tls);
                }
                let request = format!(
                    "GET /version HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
                );
                answer(&address, request.as_bytes())
                    .await
                    .starts_with(b"HTTP/")
                    .then_some(Speaks::Plain)
            }
        }
    }

    /// `failure` with what the server speaks added when this URL asks for the other scheme
    /// (a store failure that is not a refused connection or a login).
    pub(crate) async fn explain(&self, failure: Failure) -> Failure {
        let Failure::Store(message) = &failure else {
            return failure;
        };
        let Some((address, tls)) = self.address() else {
            return failure;
        };
        let lower = message.to_lowercase();
        if [
            "refused",
            "auth",
            "password",
            "does not exist",
            "permission",
        ]
        .iter()
        .any(|word| lower.contains(word))
        {
            return failure;
        }
        let (plain, secure) = match self {
            Store::Etcd { .. } => ("etcd", "etcds"),
            Store::Redis { .. } => ("redis", "rediss"),
            _ => ("nats", "natss"),
        };
        let hint = match (tls, self.speaks().await) {
            (true, Some(Speaks::Plain)) => format!(
                "the server at {address} speaks plain {plain}, not TLS: use {plain}:// \
                 instead of {secure}://"
            ),
            (false, Some(Speaks::Tls)) => format!(
                "the server at {address} speaks TLS: use {secure}:// instead of {plain}://, \
                 with --ca-file if its CA is not a system root"
            ),
            _ => return failure,
        };
        Failure::Store(format!("{message} ({hint})"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_hello_is_one_well_formed_record() {
        let record_len = usize::from(CLIENT_HELLO[3]) << 8 | usize::from(CLIENT_HELLO[4]);
        assert_eq!(CLIENT_HELLO.len(), 5 + record_len);
        let hello_len = usize::from(CLIENT_HELLO[7]) << 8 | usize::from(CLIENT_HELLO[8]);
        assert_eq!(record_len, 4 + hello_len);
        // Extensions: their length field says what follows.
        let ext_at = 5 + 4 + 2 + 32 + 1 + 2 + 10 + 2;
        let ext_len =
            usize::from(CLIENT_HELLO[ext_at]) << 8 | usize::from(CLIENT_HELLO[ext_at + 1]);
        assert_eq!(CLIENT_HELLO.len(), ext_at + 2 + ext_len);
        assert!(is_tls(CLIENT_HELLO));
        assert!(!is_tls(b"+PONG\r\n"));
    }
}
