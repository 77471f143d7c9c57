//! The TCP server: one task per connection, answering each request in order.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::codec::Framed;

use crate::health;
use crate::protocol::{
    msg_type, Inbound, Request, RequestBody, Response, ResponseBody, ServerCodec, Status,
};
use crate::service::TokenService;

/// Sentinel's default token server port (`ClusterConstants.DEFAULT_CLUSTER_SERVER_PORT`).
pub const DEFAULT_PORT: u16 = 18730;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// A listener could not bind.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// Settings of a [`TokenServer`], from [`TokenServer::builder`].
#[derive(Debug, Clone)]
pub struct TokenServerBuilder {
    bind: SocketAddr,
    health_bind: Option<SocketAddr>,
    idle_timeout: Duration,
    drain_timeout: Duration,
    max_namespaces: usize,
}

impl TokenServerBuilder {
    /// Where token clients connect. Default `127.0.0.1:18730` (loopback: a public address is
    /// a deliberate choice; the protocol has no authentication).
    pub fn bind(mut self, addr: SocketAddr) -> Self {
        self.bind = addr;
        self
    }

    /// Where the health endpoint listens (`GET /health`: 200 while decisions come from Redis,
    /// 503 otherwise). Default: none.
    pub fn health_bind(mut self, addr: SocketAddr) -> Self {
        self.health_bind = Some(addr);
        self
    }

    /// A connection silent this long is closed (Sentinel's `idleSeconds`, 600 s by default;
    /// its clients ping and reconnect).
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// How long [`TokenServer::shutdown`] waits for connections to finish their request.
    /// Default 5 s.
    pub fn drain_timeout(mut self, timeout: Duration) -> Self {
        self.drain_timeout = timeout;
        self
    }

    /// How many distinct namespaces are counted (each is a metric label). Default 1 024;
    /// clients of further namespaces are served but not counted.
    pub fn max_namespaces(mut self, max: usize) -> Self {
        self.max_namespaces = max;
        self
    }

    /// Binds the listeners and starts serving `service` on the current tokio runtime.
    ///
    /// # Errors
    ///
    /// [`ServerError::Bind`] when a listener cannot bind.
    pub async fn start(self, service: Arc<dyn TokenService>) -> Result<TokenServer, ServerError> {
        let listener = TcpListener::bind(self.bind)
            .await
            .map_err(|source| ServerError::Bind {
                addr: self.bind,
                source,
            })?;
        let local_addr = listener.local_addr().map_err(|source| ServerError::Bind {
            addr: self.bind,
            source,
        })?;
        let clients = Arc::new(Clients::new(self.max_namespaces));
        let (stop_tx, stop_rx) = watch::channel(false);
        let health_addr = match self.health_bind {
            Some(addr) => {
                Some(health::start(addr, service.clone(), clients.clone(), stop_rx.clone()).await?)
            }
            None => None,
        };
        let shared = Shared {
            service,
            clients: clients.clone(),
            idle_timeout: self.idle_timeout,
        };
        let task = tokio::spawn(accept_loop(
            listener,
            shared.clone(),
            stop_rx,
            self.drain_timeout,
        ));
        tracing::info!(%local_addr, health = ?health_addr, "token server listening");
        let started_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        Ok(TokenServer {
            local_addr,
            health_addr,
            service: shared.service.clone(),
            idle_timeout: self.idle_timeout,
            started_ms,
            clients,
            stop: stop_tx,
            task: Some(task),
        })
    }
}

/// A running token server. Dropping it stops accepting at once; [`shutdown`](Self::shutdown)
/// also lets connections finish their current request.
pub struct TokenServer {
    local_addr: SocketAddr,
    health_addr: Option<SocketAddr>,
    service: Arc<dyn TokenService>,
    idle_timeout: Duration,
    started_ms: i64,
    clients: Arc<Clients>,
    stop: watch::Sender<bool>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl fmt::Debug for TokenServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenServer")
            .field("local_addr", &self.local_addr)
            .field("health_addr", &self.health_addr)
            .finish_non_exhaustive()
    }
}

impl TokenServer {
    /// Settings with their defaults.
    pub fn builder() -> TokenServerBuilder {
        TokenServerBuilder {
            bind: SocketAddr::from(([127, 0, 0, 1], DEFAULT_PORT)),
            health_bind: None,
            idle_timeout: Duration::from_secs(600),
            drain_timeout: Duration::from_secs(5),
            max_namespaces: 1024,
        }
    }

    /// The address clients connect to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The health endpoint's address, if one was asked for.
    pub fn health_addr(&self) -> Option<SocketAddr> {
        self.health_addr
    }

    /// Connected clients per namespace (those that sent a `PING`).
    pub fn clients(&self) -> Vec<(String, usize)> {
        self.clients.snapshot()
    }

    /// The commands the Sentinel dashboard's cluster pages call on a token server
    /// (`getClusterMode`, `cluster/server/info`...), answered from this server's state; add
    /// them to a `sentinel-transport` command center with
    /// [`DashboardCommands::register`](crate::DashboardCommands::register).
    pub fn dashboard_commands(&self) -> crate::DashboardCommands {
        crate::DashboardCommands {
            port: self.local_addr.port(),
            idle_seconds: self.idle_timeout.as_secs(),
            started_ms: self.started_ms,
            clients: self.clients.clone(),
            service: self.service.clone(),
        }
    }

    /// Stops accepting, closes every connection once its current request is answered, and
    /// waits for them (at most the drain timeout).
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        tracing::info!(local_addr = %self.local_addr, "token server stopped");
    }
}

impl Drop for TokenServer {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// What every connection task shares.
#[derive(Clone)]
struct Shared {
    service: Arc<dyn TokenService>,
    clients: Arc<Clients>,
    idle_timeout: Duration,
}

async fn accept_loop(
    listener: TcpListener,
    shared: Shared,
    mut stop: watch::Receiver<bool>,
    drain_timeout: Duration,
) {
    let mut connections = JoinSet::new();
    let for_connections = stop.clone();
    loop {
        tokio::select! {
            () = stopped(&mut stop) => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    connections.spawn(connection(stream, peer, shared.clone(), for_connections.clone()));
                }
                Err(error) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(%error, "token server: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    let drained = tokio::time::timeout(drain_timeout, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            left = connections.len(),
            "token server: connections still open after the drain timeout"
        );
        connections.abort_all();
    }
}

async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    shared: Shared,
    mut stop: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    metrics::gauge!("sentinel_token_server_connections").increment(1.0);
    let mut client = ClientEntry {
        clients: shared.clients.clone(),
        peer,
        namespace: None,
    };
    let mut framed = Framed::new(stream, ServerCodec::default());
    tracing::debug!(%peer, "token client connected");
    loop {
        let next = tokio::select! {
            () = stopped(&mut stop) => break,
            next = tokio::time::timeout(shared.idle_timeout, framed.next()) => next,
        };
        let inbound = match next {
            Err(_) => {
                tracing::debug!(%peer, "token client idle: closed");
                break;
            }
            Ok(None) => break,
            Ok(Some(Err(error))) => {
                tracing::debug!(%peer, %error, "token client connection failed");
                break;
            }
            Ok(Some(Ok(inbound))) => inbound,
        };
        let request = match inbound {
            Inbound::Request(request) => request,
            Inbound::Rejected(error) => {
                metrics::counter!("sentinel_token_server_rejected_frames_total", "reason" => error.label())
                    .increment(1);
                tracing::debug!(%peer, %error, "token server: frame not answered");
                continue;
            }
        };
        let response = answer(request, &shared, &mut client);
        if let Err(error) = framed.send(response).await {
            tracing::debug!(%peer, %error, "token client: answer not sent");
            break;
        }
    }
    metrics::gauge!("sentinel_token_server_connections").decrement(1.0);
    tracing::debug!(%peer, "token client disconnected");
}

/// Resolves once the server is told to stop (or is gone).
pub(crate) async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

fn type_label(kind: u8) -> &'static str {
    match kind {
        msg_type::PING => "ping",
        msg_type::FLOW => "flow",
        msg_type::PARAM_FLOW => "param_flow",
        _ => "other",
    }
}

/// The answer to one request, as Sentinel's `TokenServerHandler` gives it.
fn answer(request: Request, shared: &Shared, client: &mut ClientEntry) -> Response {
    let kind = request.body.msg_type();
    let started = Instant::now();
    let response = match request.body {
        RequestBody::Ping {
            namespace: Some(namespace),
        } => Response {
            id: request.id,
            msg_type: kind,
            status: Status::RESPONSE_OK,
            body: ResponseBody::Ping {
                connected: i32::try_from(client.join(namespace)).unwrap_or(i32::MAX),
            },
        },
        RequestBody::Ping { namespace: None } => Response {
            id: request.id,
            msg_type: kind,
            status: Status::RESPONSE_BAD,
            body: ResponseBody::Empty,
        },
        RequestBody::Flow(flow) => {
            let r = shared
                .service
                .request_token(flow.flow_id, flow.count, flow.prioritized);
            Response::token(request.id, kind, r.status, r.remaining, r.wait_in_ms)
        }
        RequestBody::ParamFlow(param) => {
            let r = shared
                .service
                .request_param_token(param.flow_id, param.count, &param.params);
            // Sentinel's ParamFlowRequestProcessor always writes waitInMs 0.
            Response::token(request.id, kind, r.status, r.remaining, 0)
        }
    };
    let label = type_label(kind);
    metrics::counter!("sentinel_token_server_requests_total", "type" => label).increment(1);
    if kind != msg_type::PING {
        metrics::counter!("sentinel_token_server_decisions_total", "type" => label, "status" => response.status.label())
            .increment(1);
        metrics::histogram!("sentinel_token_server_decision_seconds").record(started.elapsed());
    }
    response
}

/// Connected clients per namespace, as Sentinel's `ConnectionManager` counts them: a
/// connection counts in the namespace of its last `PING`, by its address as this server
/// sees it (behind a proxy, the proxy's side of the connection).
pub(crate) struct Clients {
    max_namespaces: usize,
    groups: Mutex<HashMap<String, BTreeSet<SocketAddr>>>,
}

impl Clients {
    fn new(max_namespaces: usize) -> Self {
        Self {
            max_namespaces,
            groups: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, BTreeSet<SocketAddr>>> {
        self.groups.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn snapshot(&self) -> Vec<(String, usize)> {
        let mut all: Vec<_> = self
            .lock()
            .iter()
            .map(|(k, v)| (k.clone(), v.len()))
            .collect();
        all.sort();
        all
    }

    /// Every namespace with the addresses of its clients, sorted.
    pub(crate) fn groups(&self) -> Vec<(String, Vec<SocketAddr>)> {
        let mut all: Vec<_> = self
            .lock()
            .iter()
            .map(|(k, v)| (k.clone(), v.iter().copied().collect()))
            .collect();
        all.sort();
        all
    }

    pub(crate) fn total(&self) -> usize {
        self.lock().values().map(BTreeSet::len).sum()
    }

    /// Adds the client at `peer` to `namespace`; the namespace's count after, or `None`
    /// past the namespace cap.
    fn add(&self, namespace: &str, peer: SocketAddr) -> Option<usize> {
        let mut groups = self.lock();
        if !groups.contains_key(namespace) && groups.len() >= self.max_namespaces {
            return None;
        }
        let group = groups.entry(namespace.to_owned()).or_default();
        group.insert(peer);
        let now = group.len();
        metrics::gauge!("sentinel_token_server_connected_clients", "namespace" => namespace.to_owned())
            .set(now as f64);
        Some(now)
    }

    fn remove(&self, namespace: &str, peer: SocketAddr) {
        let mut groups = self.lock();
        if let Some(group) = groups.get_mut(namespace) {
            group.remove(&peer);
            let now = group.len();
            metrics::gauge!("sentinel_token_server_connected_clients", "namespace" => namespace.to_owned())
                .set(now as f64);
            if now == 0 {
                groups.remove(namespace);
            }
        }
    }

    fn count(&self, namespace: &str) -> usize {
        self.lock().get(namespace).map_or(0, BTreeSet::len)
    }
}

/// One connection's place in [`Clients`], left when the connection ends.
struct ClientEntry {
    clients: Arc<Clients>,
    peer: SocketAddr,
    namespace: Option<String>,
}

impl ClientEntry {
    /// Counts the connection in `namespace` (once, however often it pings); the namespace's
    /// connected clients.
    fn join(&mut self, namespace: String) -> usize {
        if self.namespace.as_deref() == Some(namespace.as_str()) {
            return self.clients.count(&namespace);
        }
        if let Some(old) = self.namespace.take() {
            self.clients.remove(&old, self.peer);
        }
        match self.clients.add(&namespace, self.peer) {
            Some(count) => {
                self.namespace = Some(namespace);
                count
            }
            None => {
                tracing::warn!(%namespace, "token server: too many namespaces, client not counted");
                1
            }
        }
    }
}

impl Drop for ClientEntry {
    fn drop(&mut self) {
        if let Some(namespace) = self.namespace.take() {
            self.clients.remove(&namespace, self.peer);
        }
    }
}
