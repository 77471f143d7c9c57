//! The Nacos v1 Open API over HTTP: server failover, login and token refresh, config GET,
//! the long-poll listener, publish and delete.

use std::time::Duration;

use md5::{Digest, Md5};
use reqwest::{RequestBuilder, StatusCode};
use sentinel_core::datasource::{Secret, SourceError};
use tokio::time::Instant;

use crate::config::{ConfigKey, NacosConfig};

mod wire;

use wire::{config_fields, excerpt, parse_changed, transport_error, CONFIG, FIELD};

/// A config as the server holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fetched {
    /// The content and its MD5 (lowercase hex, as Nacos computes it).
    Found { content: Vec<u8>, md5: String },
    /// No such config (404).
    Absent,
}

/// The MD5 Nacos keeps for a content: lowercase hex of the UTF-8 bytes.
pub(crate) fn content_md5(content: &[u8]) -> String {
    format!("{:x}", Md5::digest(content))
}

/// A failed exchange: the error, and whether the server closed the connection without an
/// answer (not a timeout, not a refused connect), which an idempotent request may retry.
struct Failure {
    error: SourceError,
    closed: bool,
}

/// True when `e` says the server closed the connection before it answered: hyper's
/// "connection closed before message completed", or a reset or broken pipe. A request on a
/// pooled connection that the server dropped meanwhile (past its keep-alive, after a stall)
/// fails this way.
fn closed_by_server(e: &reqwest::Error) -> bool {
    if e.is_timeout() || e.is_connect() {
        return false;
    }
    let mut cause = std::error::Error::source(e);
    while let Some(inner) = cause {
        if let Some(hyper) = inner.downcast_ref::<hyper::Error>() {
            if hyper.is_incomplete_message() || hyper.is_canceled() {
                return true;
            }
        }
        if let Some(io) = inner.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::{
                BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof,
            };
            if matches!(
                io.kind(),
                BrokenPipe | ConnectionAborted | ConnectionReset | UnexpectedEof
            ) {
                return true;
            }
        }
        cause = inner.source();
    }
    false
}

/// A check that a server answers at all, made while a long poll waits on it.
pub(crate) struct HealthCheck {
    http: reqwest::Client,
    url: String,
    server: String,
    interval: Duration,
    timeout: Duration,
}

impl HealthCheck {
    /// Checks every interval, and returns the error once a check goes unanswered in time.
    /// Any HTTP answer counts: only a server that answers nothing is taken for dead.
    pub(crate) async fn until_unanswered(&self) -> SourceError {
        loop {
            tokio::time::sleep(self.interval).await;
            let answer = async {
                let response = self.http.get(&self.url).send().await?;
                response.bytes().await
            };
            match tokio::time::timeout(self.timeout, answer).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) if !e.is_timeout() && !e.is_connect() && !closed_by_server(&e) => {}
                outcome => {
                    let why = match outcome {
                        Ok(Err(e)) => transport_error(&e),
                        _ => "no answer in time",
                    };
                    return SourceError::Connection {
                        message: format!(
                            "listen at {}: health check: {why} (a check every {:?} while the \
                             long poll waits, answered within {:?})",
                            self.server, self.interval, self.timeout
                        ),
                        source: None,
                    };
                }
            }
        }
    }
}

/// An access token and when to log in again: at 90 % of its lifetime, as the Nacos SDK does.
struct Token {
    value: Secret,
    refresh_at: Instant,
}

/// One client for a list of servers: it talks to one at a time and moves to the next on a
/// connection error.
pub(crate) struct Client {
    http: reqwest::Client,
    config: NacosConfig,
    server: usize,
    token: Option<Token>,
    /// Logins after the server refused a token (expired or revoked).
    relogins: u64,
    /// The server that answered last (an index into the list).
    answered_by: Option<usize>,
    /// Times a server other than the one that answered before answered: failovers.
    failovers: u64,
}

impl Client {
    pub(crate) fn new(config: NacosConfig) -> Result<Self, SourceError> {
        let http = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout())
            .build()
            .map_err(|e| SourceError::backend("build the HTTP client", e.without_url()))?;
        Ok(Self {
            http,
            config,
            server: 0,
            token: None,
            relogins: 0,
            answered_by: None,
            failovers: 0,
        })
    }

    pub(crate) fn config(&self) -> &NacosConfig {
        &self.config
    }

    pub(crate) fn relogins(&self) -> u64 {
        self.relogins
    }

    /// How often a server other than the one that answered before answered a request: a
    /// server restarted in a cluster may answer before it has loaded its configs, so the
    /// driver confirms a change read right after a failover.
    pub(crate) fn failovers(&self) -> u64 {
        self.failovers
    }

    fn base(&self) -> &str {
        &self.config.servers[self.server % self.config.servers.len()]
    }

    /// A health check of the server the next request goes to.
    pub(crate) fn health_check(&self) -> HealthCheck {
        let (interval, timeout) = self.config.health_check();
        HealthCheck {
            http: self.http.clone(),
            url: format!("{}/v1/console/health/readiness", self.base()),
            server: self.base().to_owned(),
            interval,
            timeout,
        }
    }

    pub(crate) fn next_server(&mut self) {
        self.server = (self.server + 1) % self.config.servers.len().max(1);
    }

    /// The token to send, logging in first when there is none or it is due for a refresh.
    async fn token(&mut self) -> Result<Option<Secret>, SourceError> {
        if self.config.credentials().is_none() {
            return Ok(None);
        }
        match &self.token {
            Some(token) if Instant::now() < token.refresh_at => Ok(Some(token.value.clone())),
            _ => {
                self.login().await?;
                Ok(self.token.as_ref().map(|t| t.value.clone()))
            }
        }
    }

    /// `POST /v1/auth/login`. A refused login is [`SourceError::Auth`], with the server's
    /// answer and never the password.
    async fn login(&mut self) -> Result<(), SourceError> {
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Login {
            access_token: String,
            #[serde(default)]
            token_ttl: Option<u64>,
        }
        let Some(creds) = self.config.credentials().cloned() else {
            return Ok(());
        };
        let user = creds.user().unwrap_or_default();
        let url = format!("{}/v1/auth/login", self.base());
        let request = self
            .http
            .post(url)
            .form(&[("username", user), ("password", creds.password().expose())])
            .timeout(self.config.request_timeout());
        let (status, body) = self.exchange("login", request).await.map_err(|f| f.error)?;
        if !status.is_success() {
            return Err(SourceError::Auth {
                message: format!(
                    "login as {} at {}: {status} {}",
                    user,
                    self.base(),
                    excerpt(&body)
                ),
            });
        }
        let login: Login = serde_json::from_slice(&body).map_err(|e| {
            SourceError::backend(format!("login at {}: unexpected answer", self.base()), e)
        })?;
        let ttl = Duration::from_secs(login.token_ttl.unwrap_or(18_000).max(1));
        self.token = Some(Token {
            value: Secret::new(login.access_token),
            refresh_at: Instant::now() + ttl.mul_f64(0.9),
        });
        tracing::debug!(user = %user, server = %self.base(), ?ttl, "logged in to Nacos");
        Ok(())
    }

    /// Sends `request` and reads the answer. A transport failure is
    /// [`SourceError::Connection`] and moves to the next server; the message never carries
    /// the URL (it may carry the token).
    async fn exchange(
        &mut self,
        op: &str,
        request: RequestBuilder,
    ) -> Result<(StatusCode, Vec<u8>), Failure> {
        let failed = |this: &mut Self, e: reqwest::Error| {
            let closed = closed_by_server(&e);
            let what = if closed {
                "the server closed the connection without an answer"
            } else {
                transport_error(&e)
            };
            let message = format!("{op} at {}: {what}", this.base());
            this.next_server();
            Failure {
                error: SourceError::connection(message, e.without_url()),
                closed,
            }
        };
        let response = match request.send().await {
            Ok(response) => response,
            Err(e) => return Err(failed(self, e)),
        };
        let status = response.status();
        match response.bytes().await {
            Ok(body) => {
                let server = self.server % self.config.servers.len().max(1);
                if self.answered_by.is_some_and(|before| before != server) {
                    self.failovers += 1;
                }
                self.answered_by = Some(server);
                Ok((status, body.to_vec()))
            }
            Err(e) => Err(failed(self, e)),
        }
    }

    /// Sends the request `build` makes for the current server (base URL, token), trying
    /// each server once on connection errors and logging in again once on a 403. An
    /// `idempotent` request is also sent once more when the server closed the connection
    /// without answering it (a reused connection it had dropped).
    async fn send(
        &mut self,
        op: &str,
        timeout: Duration,
        idempotent: bool,
        build: impl Fn(&reqwest::Client, &str) -> RequestBuilder,
    ) -> Result<(StatusCode, Vec<u8>), SourceError> {
        let mut attempts = self.config.servers.len().max(1);
        let mut relogged = false;
        let mut retry_closed = idempotent;
        loop {
            let token = match self.token().await {
                Ok(token) => token,
                Err(SourceError::Connection { .. }) if attempts > 1 => {
                    attempts -= 1;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let mut request = build(&self.http, self.base()).timeout(timeout);
            if let Some(token) = &token {
                request = request.query(&[("accessToken", token.expose())]);
            }
            match self.exchange(op, request).await {
                Err(Failure { closed: true, .. }) if retry_closed => {
                    tracing::debug!(
                        op,
                        "the server closed the connection without an answer; sending again"
                    );
                    retry_closed = false;
                }
                Err(Failure {
                    error: SourceError::Connection { .. },
                    ..
                }) if attempts > 1 => attempts -= 1,
                Err(failure) => return Err(failure.error),
                Ok((StatusCode::FORBIDDEN, body)) if token.is_some() && !relogged => {
                    tracing::info!(
                        op,
                        server = %self.base(),
                        answer = %excerpt(&body),
                        "Nacos refused the token; logging in again"
                    );
                    self.token = None;
                    self.relogins += 1;
                    relogged = true;
                }
                Ok((StatusCode::FORBIDDEN, body)) => {
                    let message = format!("{op} at {}: 403 {}", self.base(), excerpt(&body));
                    return Err(if token.is_some() {
                        SourceError::PermissionDenied { message }
                    } else {
                        SourceError::Auth {
                            message: format!(
                                "{message} (the server wants a login: set credentials)"
                            ),
                        }
                    });
                }
                Ok(answer) => return Ok(answer),
            }
        }
    }

    fn tenant(&self) -> Option<&str> {
        self.config.namespace.as_deref()
    }

    /// `GET /v1/cs/configs`: the content, or absent on a 404.
    pub(crate) async fn get(&mut self, key: &ConfigKey) -> Result<Fetched, SourceError> {
        let op = format!("get {key}");
        let tenant = self.tenant().map(str::to_owned);
        let (status, body) = self
            .send(&op, self.config.request_timeout(), false, |http, base| {
                let mut query = vec![
                    ("dataId", key.data_id.as_str()),
                    ("group", key.group.as_str()),
                ];
                if let Some(t) = &tenant {
                    query.push(("tenant", t));
                }
                http.get(format!("{base}/v1/cs/configs")).query(&query)
            })
            .await?;
        match status {
            StatusCode::OK => {
                let md5 = content_md5(&body);
                Ok(Fetched::Found { content: body, md5 })
            }
            StatusCode::NOT_FOUND => Ok(Fetched::Absent),
            status => Err(self.unexpected(&op, status, &body)),
        }
    }

    /// `POST /v1/cs/configs/listener`: waits (up to the long-poll timeout) until one of the
    /// configs no longer has the MD5 given (`""` for an absent one), and returns those that
    /// changed; none when the poll timed out.
    pub(crate) async fn listen(
        &mut self,
        configs: &[(ConfigKey, String)],
    ) -> Result<Vec<ConfigKey>, SourceError> {
        let tenant = self.tenant().map(str::to_owned);
        let mut listening = String::new();
        for (key, md5) in configs {
            for field in [key.data_id.as_str(), key.group.as_str(), md5.as_str()] {
                listening.push_str(field);
                listening.push(FIELD);
            }
            listening.pop();
            if let Some(t) = &tenant {
                listening.push(FIELD);
                listening.push_str(t);
            }
            listening.push(CONFIG);
        }
        let hold = self.config.long_poll_timeout;
        let hold_ms = hold.as_millis().to_string();
        let op = "listen";
        let (status, body) = self
            .send(
                op,
                hold + self.config.request_timeout(),
                false,
                |http, base| {
                    http.post(format!("{base}/v1/cs/configs/listener"))
                        .header("Long-Pulling-Timeout", hold_ms.as_str())
                        .form(&[("Listening-Configs", listening.as_str())])
                },
            )
            .await?;
        if !status.is_success() {
            return Err(self.unexpected(op, status, &body));
        }
        Ok(parse_changed(&body))
    }

    /// `POST /v1/cs/configs` with `type=json`.
    pub(crate) async fn publish(
        &mut self,
        key: &ConfigKey,
        content: &str,
    ) -> Result<(), SourceError> {
        let op = format!("publish {key}");
        let tenant = self.tenant().map(str::to_owned);
        let (status, body) = self
            .send(&op, self.config.request_timeout(), true, |http, base| {
                let extra = [("content", content), ("type", "json")];
                http.post(format!("{base}/v1/cs/configs"))
                    .form(&config_fields(key, tenant.as_deref(), &extra))
            })
            .await?;
        self.expect_true(&op, status, &body)
    }

    /// `DELETE /v1/cs/configs`.
    pub(crate) async fn delete(&mut self, key: &ConfigKey) -> Result<(), SourceError> {
        let op = format!("delete {key}");
        let tenant = self.tenant().map(str::to_owned);
        let (status, body) = self
            .send(&op, self.config.request_timeout(), true, |http, base| {
                let mut query = vec![
                    ("dataId", key.data_id.as_str()),
                    ("group", key.group.as_str()),
                ];
                if let Some(t) = &tenant {
                    query.push(("tenant", t));
                }
                http.delete(format!("{base}/v1/cs/configs")).query(&query)
            })
            .await?;
        self.expect_true(&op, status, &body)
    }

    fn expect_true(&self, op: &str, status: StatusCode, body: &[u8]) -> Result<(), SourceError> {
        if status.is_success() && body.trim_ascii() == b"true" {
            return Ok(());
        }
        Err(self.unexpected(op, status, body))
    }

    fn unexpected(&self, op: &str, status: StatusCode, body: &[u8]) -> SourceError {
        let message = format!("{op} at {}: {status} {}", self.base(), excerpt(body));
        if status.is_server_error() {
            SourceError::Connection {
                message,
                source: None,
            }
        } else {
            SourceError::Backend {
                message,
                source: None,
            }
        }
    }
}

#[cfg(test)]
mod tests;
