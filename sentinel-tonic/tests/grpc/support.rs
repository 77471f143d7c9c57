//! A hand-written gRPC service (prost messages, tonic's server codec: no protoc, no build
//! script) served by a real tonic server on loopback, and clients for it.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::uri::PathAndQuery;
use sentinel_core::circuit_breaker::DegradeRule;
use sentinel_core::flow::FlowRule;
use sentinel_core::{FakeClock, Sentinel};
use sentinel_tonic::SentinelGrpcLayer;
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::body::Body;
use tonic::server::{NamedService, ServerStreamingService, UnaryService};
use tonic::transport::{Channel, Server};
use tonic::{Code, Status};
use tonic_prost::ProstCodec;
use tower::{Layer, Service};

/// The request of both methods.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Ping {
    /// The status code to end the call with (0: OK).
    #[prost(int32, tag = "1")]
    pub(crate) code: i32,
    /// How many messages a stream sends before it waits for its release (or ends).
    #[prost(uint32, tag = "2")]
    pub(crate) messages: u32,
    /// Whether a stream waits for the test's release after its messages.
    #[prost(bool, tag = "3")]
    pub(crate) hold: bool,
}

/// The response message.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Pong {
    #[prost(uint32, tag = "1")]
    pub(crate) seq: u32,
}

pub(crate) const SAY: &str = "/test.Echo/Say";
pub(crate) const WATCH: &str = "/test.Echo/Watch";

/// What the handlers saw, and the streams' release.
#[derive(Clone)]
pub(crate) struct Echo {
    /// Calls that reached a handler.
    pub(crate) calls: Arc<AtomicUsize>,
    /// Permits that let held streams end, one each.
    pub(crate) release: Arc<Semaphore>,
}

impl Echo {
    fn new() -> Self {
        Self {
            calls: Arc::new(AtomicUsize::new(0)),
            release: Arc::new(Semaphore::new(0)),
        }
    }

    pub(crate) fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

fn status_of(code: i32) -> Result<(), Status> {
    match Code::from_i32(code) {
        Code::Ok => Ok(()),
        code => Err(Status::new(code, "the test asked for it")),
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

struct Say;

impl UnaryService<Ping> for Say {
    type Response = Pong;
    type Future = BoxFuture<Result<tonic::Response<Pong>, Status>>;

    fn call(&mut self, request: tonic::Request<Ping>) -> Self::Future {
        let ping = request.into_inner();
        Box::pin(async move {
            status_of(ping.code)?;
            Ok(tonic::Response::new(Pong { seq: 0 }))
        })
    }
}

struct Watch(Arc<Semaphore>);

impl ServerStreamingService<Ping> for Watch {
    type Response = Pong;
    type ResponseStream = ReceiverStream<Result<Pong, Status>>;
    type Future = BoxFuture<Result<tonic::Response<Self::ResponseStream>, Status>>;

    fn call(&mut self, request: tonic::Request<Ping>) -> Self::Future {
        let ping = request.into_inner();
        let release = Arc::clone(&self.0);
        Box::pin(async move {
            let (sender, receiver) = mpsc::channel(8);
            tokio::spawn(async move {
                for seq in 0..ping.messages {
                    if sender.send(Ok(Pong { seq })).await.is_err() {
                        return;
                    }
                }
                if ping.hold {
                    tokio::select! {
                        permit = release.acquire() => permit.expect("open").forget(),
                        () = sender.closed() => return,
                    }
                }
                if let Err(status) = status_of(ping.code) {
                    let _ = sender.send(Err(status)).await;
                }
            });
            Ok(tonic::Response::new(ReceiverStream::new(receiver)))
        })
    }
}

impl NamedService for Echo {
    const NAME: &'static str = "test.Echo";
}

impl Service<http::Request<Body>> for Echo {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<http::Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let release = Arc::clone(&self.release);
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(ProstCodec::<Pong, Ping>::default());
            let response = match request.uri().path() {
                SAY => grpc.unary(Say, request).await,
                WATCH => grpc.server_streaming(Watch(release), request).await,
                _ => Status::unimplemented("no such method").into_http(),
            };
            Ok(response)
        })
    }
}

/// An engine on a fake clock (the windows never roll during a test).
pub(crate) fn engine() -> (Sentinel, FakeClock) {
    let clock = FakeClock::at_ms(1_000_000);
    (Sentinel::builder().clock(clock.clone()).build(), clock)
}

/// An [`engine`] with `rule` loaded.
pub(crate) fn flow_engine(rule: FlowRule) -> Sentinel {
    let (sentinel, _clock) = engine();
    sentinel
        .flow_rules()
        .load_rules(vec![rule])
        .expect("valid rules");
    sentinel
}

/// An [`engine`] whose breaker on `resource` opens past `errors` errors (in 10 s, from the
/// first call on).
pub(crate) fn breaker_engine(resource: &str, errors: f64) -> Sentinel {
    let (sentinel, _clock) = engine();
    let rule = DegradeRule::error_count(resource, errors, 10).min_request_amount(1);
    sentinel
        .degrade_rules()
        .load_rules(vec![rule])
        .expect("valid rules");
    sentinel
}

/// A running server, stopped when dropped.
pub(crate) struct TestServer {
    pub(crate) addr: SocketAddr,
    pub(crate) echo: Echo,
    _stop: oneshot::Sender<()>,
}

/// Serves the echo service on loopback, guarded by `layer` when given.
pub(crate) async fn serve(layer: Option<SentinelGrpcLayer>) -> TestServer {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let addr = listener.local_addr().expect("bound");
    let echo = Echo::new();
    let (stop, stopped) = oneshot::channel::<()>();
    let incoming = TcpListenerStream::new(listener);
    let shutdown = async {
        let _ = stopped.await;
    };
    let service = echo.clone();
    match layer {
        Some(layer) => {
            let router = Server::builder().layer(layer).add_service(service);
            tokio::spawn(router.serve_with_incoming_shutdown(incoming, shutdown));
        }
        None => {
            let router = Server::builder().add_service(service);
            tokio::spawn(router.serve_with_incoming_shutdown(incoming, shutdown));
        }
    }
    TestServer {
        addr,
        echo,
        _stop: stop,
    }
}

/// A channel to `addr`, connected.
pub(crate) async fn channel(addr: SocketAddr) -> Channel {
    Channel::from_shared(format!("http://{addr}"))
        .expect("a valid URI")
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
        .expect("the test server accepts connections")
}

/// A gRPC client over a channel, guarded or not.
pub(crate) type TestClient = tonic::client::Grpc<
    tower::util::BoxCloneSyncService<http::Request<Body>, http::Response<Body>, tower::BoxError>,
>;

/// A client of `addr`, guarded by `layer` when given.
pub(crate) async fn client(addr: SocketAddr, layer: Option<SentinelGrpcLayer>) -> TestClient {
    let channel = channel(addr).await;
    let service = match layer {
        Some(layer) => {
            let guarded = layer.layer(channel);
            tower::util::BoxCloneSyncService::new(tower::ServiceExt::map_response(
                guarded,
                |response: http::Response<sentinel_tonic::GuardedBody<Body>>| {
                    response.map(Body::new)
                },
            ))
        }
        None => tower::util::BoxCloneSyncService::new(tower::ServiceExt::map_err(
            channel,
            tower::BoxError::from,
        )),
    };
    tonic::client::Grpc::new(service)
}

/// Calls `Say`, ending with `code`.
pub(crate) async fn say(client: &mut TestClient, code: Code) -> Result<Pong, Status> {
    say_with(client, code, &[]).await
}

/// Calls `Say` with `metadata`, ending with `code`.
pub(crate) async fn say_with(
    client: &mut TestClient,
    code: Code,
    metadata: &[(&'static str, &'static str)],
) -> Result<Pong, Status> {
    client
        .ready()
        .await
        .map_err(|e| Status::unknown(e.to_string()))?;
    let ping = Ping {
        code: code as i32,
        ..Ping::default()
    };
    let mut request = tonic::Request::new(ping);
    for (key, value) in metadata {
        request
            .metadata_mut()
            .insert(*key, tonic::metadata::MetadataValue::from_static(value));
    }
    client
        .unary(
            request,
            PathAndQuery::from_static(SAY),
            ProstCodec::default(),
        )
        .await
        .map(tonic::Response::into_inner)
}

/// Starts `Watch`: `messages` messages, held open until released when `hold`, then `code`.
pub(crate) async fn watch(
    client: &mut TestClient,
    messages: u32,
    hold: bool,
    code: Code,
) -> Result<tonic::Streaming<Pong>, Status> {
    client
        .ready()
        .await
        .map_err(|e| Status::unknown(e.to_string()))?;
    let ping = Ping {
        code: code as i32,
        messages,
        hold,
    };
    client
        .server_streaming(
            tonic::Request::new(ping),
            PathAndQuery::from_static(WATCH),
            ProstCodec::default(),
        )
        .await
        .map(tonic::Response::into_inner)
}

/// Waits (bounded) until `check` holds.
pub(crate) async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting: {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The code of a failed call.
pub(crate) fn code<T: std::fmt::Debug>(result: Result<T, Status>) -> Code {
    match result {
        Ok(value) => panic!("expected a status, got {value:?}"),
        Err(status) => status.code(),
    }
}
