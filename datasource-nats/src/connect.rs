//! One NATS client per source or writer, the JetStream requests they make, and how their
//! errors become [`SourceError`]s.

use std::future::Future;

use async_nats::connection::State;
use async_nats::jetstream::kv::{Entry, Store, Watch};
use async_nats::{Client, ConnectErrorKind, Event};
use futures_util::TryStreamExt;
use sentinel_core::datasource::SourceError;
use tokio::sync::watch;

use crate::config::NatsConfig;

/// A client made on first use and kept: it reconnects by itself, and counts its
/// disconnects so a watch can end when the connection drops.
pub(crate) struct Connection {
    config: NatsConfig,
    client: Option<Client>,
    lost: watch::Sender<u64>,
}

/// Waits for the next disconnect of a [`Connection`]'s client.
pub(crate) struct Disconnects(watch::Receiver<u64>);

impl Disconnects {
    /// Returns at the next disconnect (never, once the connection is gone).
    pub(crate) async fn wait(&mut self) {
        if self.0.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

impl Connection {
    pub(crate) fn new(config: NatsConfig) -> Self {
        Self {
            config,
            client: None,
            lost: watch::Sender::new(0),
        }
    }

    pub(crate) fn config(&self) -> &NatsConfig {
        &self.config
    }

    /// The disconnects from now on.
    pub(crate) fn disconnects(&self) -> Disconnects {
        let mut rx = self.lost.subscribe();
        rx.mark_unchanged();
        Disconnects(rx)
    }

    /// The client, connecting first when there is none. A client that is reconnecting is a
    /// [`SourceError::Connection`]: the driver backs off and tries again.
    pub(crate) async fn client(&mut self) -> Result<Client, SourceError> {
        if let Some(client) = &self.client {
            return match client.connection_state() {
                State::Connected => Ok(client.clone()),
                _ => Err(SourceError::Connection {
                    message: format!(
                        "not connected to {} (the client is reconnecting)",
                        self.config.describe()
                    ),
                    source: None,
                }),
            };
        }
        let lost = self.lost.clone();
        let options = self
            .config
            .options()
            .await
            .map_err(|e| {
                SourceError::backend(
                    format!("read the creds file for {}", self.config.describe()),
                    e,
                )
            })?
            .event_callback(move |event| {
                let lost = lost.clone();
                async move {
                    if let Event::Disconnected = event {
                        lost.send_modify(|n| *n += 1);
                    }
                }
            });
        let timeout = self.config.connect_timeout() + self.config.request_timeout();
        let at = self.config.describe();
        let connected =
            tokio::time::timeout(timeout, options.connect(self.config.servers.clone())).await;
        let client = match connected {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => {
                let message = format!("connect to {at}: {e}");
                return Err(match e.kind() {
                    ConnectErrorKind::AuthorizationViolation | ConnectErrorKind::Authentication => {
                        SourceError::Auth { message }
                    }
                    ConnectErrorKind::ServerParse => SourceError::backend(message, e),
                    _ => SourceError::connection(message, e),
                });
            }
            Err(_) => {
                return Err(SourceError::Connection {
                    message: format!("connect to {at}: no answer within {timeout:?}"),
                    source: None,
                })
            }
        };
        tracing::debug!(at = %at, "connected to NATS");
        self.client = Some(client.clone());
        Ok(client)
    }

    /// The bucket, or `None` when it does not exist.
    pub(crate) async fn bucket(&mut self, bucket: &str) -> Result<Option<Store>, SourceError> {
        let client = self.client().await?;
        let mut js = async_nats::jetstream::new(client);
        js.set_timeout(self.config.request_timeout());
        let op = format!("open bucket {bucket}");
        match self.bounded(&op, js.get_key_value(bucket)).await {
            Ok(store) => Ok(Some(store)),
            Err(SourceError::Backend { message, .. }) if message.contains("not found") => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The stream position now (its last sequence), asked of the server.
    pub(crate) async fn last_sequence(&self, store: &Store) -> Result<u64, SourceError> {
        let mut stream = store.stream.clone();
        let op = format!("stream info of bucket {}", store.name);
        let info = self
            .bounded(&op, async { stream.info().await.cloned() })
            .await?;
        Ok(info.state.last_sequence)
    }

    /// The bucket's keys that hold a value.
    pub(crate) async fn keys(&self, store: &Store, op: &str) -> Result<Vec<String>, SourceError> {
        self.bounded(op, async {
            let keys = store.keys().await?;
            keys.try_collect::<Vec<String>>()
                .await
                .map_err(Box::<dyn std::error::Error + Send + Sync>::from)
        })
        .await
    }

    /// One key's latest entry.
    pub(crate) async fn entry(
        &self,
        store: &Store,
        key: &str,
        op: &str,
    ) -> Result<Option<Entry>, SourceError> {
        self.bounded(op, store.entry(key)).await
    }

    /// A watch of `filter` from stream position `from`.
    pub(crate) async fn watch(
        &self,
        store: &Store,
        filter: &str,
        from: u64,
        op: &str,
    ) -> Result<Watch, SourceError> {
        self.bounded(op, store.watch_from_revision(filter, from))
            .await
    }

    /// Runs `fut` within the request timeout, mapping its error.
    pub(crate) async fn bounded<T, E>(
        &self,
        op: &str,
        fut: impl Future<Output = Result<T, E>>,
    ) -> Result<T, SourceError>
    where
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let timeout = self.config.request_timeout();
        match tokio::time::timeout(timeout, fut).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(map_error(op, e.into())),
            Err(_) => Err(SourceError::Connection {
                message: format!("{op}: no answer from NATS within {timeout:?}"),
                source: None,
            }),
        }
    }

    /// Drops the client (it drains in the background).
    pub(crate) async fn close(&mut self) {
        if let Some(client) = self.client.take() {
            let _ = tokio::time::timeout(self.config.request_timeout(), client.drain()).await;
        }
    }
}

/// Maps a JetStream request's error: refusals by their text, "not found" kept as a backend
/// error (a missing bucket), anything else (timeouts, no responders while the server is
/// down) a connection error.
pub(crate) fn map_error(op: &str, err: Box<dyn std::error::Error + Send + Sync>) -> SourceError {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(inner) = cause {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        cause = inner.source();
    }
    let message = format!("{op}: {text}");
    let lower = text.to_ascii_lowercase();
    if lower.contains("permission") {
        return SourceError::PermissionDenied { message };
    }
    if lower.contains("authorization") || lower.contains("authentication") {
        return SourceError::Auth { message };
    }
    if lower.contains("not found") {
        return SourceError::Backend {
            message,
            source: Some(err),
        };
    }
    SourceError::Connection {
        message,
        source: Some(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_classified_by_their_text() {
        let e = map_error("get k", "stream not found".into());
        assert!(matches!(e, SourceError::Backend { .. }), "{e:?}");
        let e = map_error("get k", "Permissions Violation for Subscription".into());
        assert!(matches!(e, SourceError::PermissionDenied { .. }), "{e:?}");
        let e = map_error("get k", "timed out".into());
        assert!(matches!(e, SourceError::Connection { .. }), "{e:?}");
        assert!(e.to_string().contains("get k"), "{e}");
    }
}
