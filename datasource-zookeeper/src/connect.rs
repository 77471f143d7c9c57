//! One ZooKeeper client (one session) per source or writer, made again when its session
//! ends, and how the client's errors become [`SourceError`]s.

use std::future::Future;

use sentinel_core::datasource::SourceError;
use zookeeper_client::{Client, Error};

use crate::config::ZooKeeperConfig;

/// A client made on first use and kept while its session lives: the client reconnects by
/// itself within a session (to any server of the list); an expired, closed or refused
/// session is replaced by a new one on the next use.
pub(crate) struct Connection {
    config: ZooKeeperConfig,
    client: Option<Client>,
    sessions: u64,
}

impl Connection {
    pub(crate) fn new(config: ZooKeeperConfig) -> Self {
        Self {
            config,
            client: None,
            sessions: 0,
        }
    }

    pub(crate) fn config(&self) -> &ZooKeeperConfig {
        &self.config
    }

    /// How many sessions this connection has established.
    pub(crate) fn sessions(&self) -> u64 {
        self.sessions
    }

    /// The client, establishing a session first when there is none or the last one ended
    /// (expired, closed, or its credentials refused).
    pub(crate) async fn client(&mut self) -> Result<Client, SourceError> {
        if let Some(client) = &self.client {
            if !client.state().is_terminated() {
                return Ok(client.clone());
            }
            tracing::debug!(at = %self.config.describe(), state = %client.state(), "zookeeper session ended");
            self.client = None;
        }
        let mut connector = Client::connector()
            .with_session_timeout(self.config.session_timeout)
            .with_connection_timeout(self.config.health_check)
            // Every server tried once, then an error for the driver's backoff, rather than
            // retrying inside connect for a whole session timeout.
            .with_fail_eagerly();
        if let Some(auth) = self.config.digest_auth() {
            connector = connector.with_auth("digest", &auth);
        }
        let at = self.config.describe();
        let timeout = self.config.connect_timeout();
        let connect_string = self.config.connect_string();
        let client = match tokio::time::timeout(timeout, connector.connect(&connect_string)).await {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => return Err(map_error(&format!("connect to {at}"), e)),
            Err(_) => {
                return Err(SourceError::Connection {
                    message: format!("connect to {at}: no session within {timeout:?}"),
                    source: None,
                })
            }
        };
        self.sessions += 1;
        tracing::debug!(at = %at, session = ?client.session_id(), "zookeeper session established");
        self.client = Some(client.clone());
        Ok(client)
    }

    /// Drops the client: the next [`client`](Self::client) establishes a new session.
    pub(crate) fn reset(&mut self) {
        self.client = None;
    }

    /// Runs `fut` within the request timeout (a timeout is [`Error::Timeout`]). A session
    /// that ended drops the client, so the next request starts a new one.
    pub(crate) async fn raw<T>(
        &mut self,
        fut: impl Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        match tokio::time::timeout(self.config.request_timeout(), fut).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => {
                if matches!(
                    e,
                    Error::SessionExpired | Error::ClientClosed | Error::AuthFailed
                ) {
                    self.reset();
                }
                Err(e)
            }
            Err(_) => Err(Error::Timeout),
        }
    }

    /// [`raw`](Self::raw), its error mapped onto a [`SourceError`] naming `op`.
    pub(crate) async fn bounded<T>(
        &mut self,
        op: &str,
        fut: impl Future<Output = Result<T, Error>>,
    ) -> Result<T, SourceError> {
        let result = self.raw(fut).await;
        result.map_err(|e| self.error(op, e))
    }

    /// [`bounded`](Self::bounded), with a missing node as `None`.
    pub(crate) async fn optional<T>(
        &mut self,
        op: &str,
        fut: impl Future<Output = Result<T, Error>>,
    ) -> Result<Option<T>, SourceError> {
        match self.raw(fut).await {
            Ok(value) => Ok(Some(value)),
            Err(Error::NoNode) => Ok(None),
            Err(e) => Err(self.error(op, e)),
        }
    }

    /// `err` as a [`SourceError`]; a timeout names the request timeout.
    pub(crate) fn error(&self, op: &str, err: Error) -> SourceError {
        match err {
            Error::Timeout => SourceError::Connection {
                message: format!(
                    "{op}: no answer from ZooKeeper within {:?}",
                    self.config.request_timeout()
                ),
                source: None,
            },
            e => map_error(op, e),
        }
    }

    /// Closes the session (its ephemeral nodes and watches go with it).
    pub(crate) fn close(&mut self) {
        // Dropping the last handle closes the session; no request to wait for.
        self.client = None;
    }
}

/// Maps a client error: refused credentials to `Auth`, a refused ACL to `PermissionDenied`,
/// a lost connection or session to `Connection` (the driver reads again once it is back),
/// anything else (a bad path, a node with children where data was expected) to `Backend`.
pub(crate) fn map_error(op: &str, err: Error) -> SourceError {
    let message = format!("{op}: {err}");
    match err {
        Error::AuthFailed => SourceError::Auth { message },
        Error::NoAuth => SourceError::PermissionDenied {
            message: format!(
                "{message} (the znode's ACL does not grant this; with digest credentials, a \
                 wrong password is refused the same way)"
            ),
        },
        Error::ConnectionLoss
        | Error::Timeout
        | Error::NoHosts
        | Error::SessionExpired
        | Error::SessionMoved
        | Error::ClientClosed
        | Error::Throttled
        | Error::NotReadOnly => SourceError::Connection {
            message,
            source: Some(Box::new(err)),
        },
        _ => SourceError::Backend {
            message,
            source: Some(Box::new(err)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_classified() {
        let e = map_error("get /r", Error::NoAuth);
        assert!(matches!(e, SourceError::PermissionDenied { .. }), "{e:?}");
        assert!(e.to_string().contains("get /r"), "{e}");
        let e = map_error("get /r", Error::AuthFailed);
        assert!(matches!(e, SourceError::Auth { .. }), "{e:?}");
        let e = map_error("get /r", Error::SessionExpired);
        assert!(matches!(e, SourceError::Connection { .. }), "{e:?}");
        let e = map_error("get /r", Error::BadArguments(&"path"));
        assert!(matches!(e, SourceError::Backend { .. }), "{e:?}");
    }
}
