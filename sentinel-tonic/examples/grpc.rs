//! A gRPC server and a client on loopback, both guarded by Sentinel:
//! `cargo run -p sentinel-tonic --example grpc`.
//!
//! The server allows 3 calls a second of `/demo.Greeter/SayHello` and refuses the caller
//! `crawler` (its name in the `x-caller` metadata); the client trips its own circuit breaker
//! on the server's `UNAVAILABLE` answers, and then fails fast without calling. The service is
//! written by hand with tonic's codec, as `tonic-prost-build` would generate it from
//! `service Greeter { rpc SayHello (HelloRequest) returns (HelloReply); }`.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::uri::PathAndQuery;
use http::HeaderName;
use sentinel_core::authority::AuthorityRule;
use sentinel_core::circuit_breaker::DegradeRule;
use sentinel_core::flow::FlowRule;
use sentinel_core::Sentinel;
use sentinel_tonic::SentinelGrpcLayer;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::body::Body;
use tonic::server::NamedService;
use tonic::transport::{Channel, Server};
use tonic::Status;
use tonic_prost::ProstCodec;
use tower::{service_fn, Layer, Service};

const SAY_HELLO: &str = "/demo.Greeter/SayHello";

#[derive(Clone, PartialEq, prost::Message)]
struct HelloRequest {
    #[prost(string, tag = "1")]
    name: String,
}

#[derive(Clone, PartialEq, prost::Message)]
struct HelloReply {
    #[prost(string, tag = "1")]
    message: String,
}

/// The server side of `demo.Greeter`: says hello, or fails with `UNAVAILABLE` for "nobody".
#[derive(Clone)]
struct Greeter;

impl NamedService for Greeter {
    const NAME: &'static str = "demo.Greeter";
}

impl Service<http::Request<Body>> for Greeter {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let say_hello = service_fn(|request: tonic::Request<HelloRequest>| async move {
            match request.into_inner().name.as_str() {
                "nobody" => Err(Status::unavailable("no one to greet")),
                name => Ok(tonic::Response::new(HelloReply {
                    message: format!("hello {name}"),
                })),
            }
        });
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(ProstCodec::default());
            Ok(grpc.unary(say_hello, request).await)
        })
    }
}

/// Calls `SayHello` as `caller` with `name`, and prints how it ended.
async fn say_hello<T>(client: &mut tonic::client::Grpc<T>, caller: &'static str, name: &str)
where
    T: tonic::client::GrpcService<Body>,
    T::Error: Into<tower::BoxError>,
    T::ResponseBody: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    <T::ResponseBody as http_body::Body>::Error: Into<tower::BoxError>,
{
    let mut request = tonic::Request::new(HelloRequest { name: name.into() });
    request.metadata_mut().insert(
        "x-caller",
        tonic::metadata::MetadataValue::from_static(caller),
    );
    let outcome: Result<tonic::Response<HelloReply>, Status> = match client.ready().await {
        Ok(()) => {
            let path = PathAndQuery::from_static(SAY_HELLO);
            client.unary(request, path, ProstCodec::default()).await
        }
        Err(error) => Err(Status::from_error(error.into())),
    };
    match outcome {
        Ok(reply) => println!("{caller:>8} {name:>7}: OK {:?}", reply.into_inner().message),
        Err(status) => {
            let pushback = status
                .metadata()
                .get(sentinel_tonic::RETRY_PUSHBACK_KEY)
                .map(|ms| format!(", retry in {} ms", ms.to_str().unwrap_or("?")))
                .unwrap_or_default();
            let here = std::error::Error::source(&status)
                .is_some_and(|source| source.is::<sentinel_core::BlockError>());
            let side = if here {
                "blocked by the client"
            } else {
                "from the server"
            };
            println!(
                "{caller:>8} {name:>7}: {:?} ({side}{pushback})",
                status.code()
            );
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The server's rules: 3 calls a second, and not for the caller "crawler".
    let server_sentinel = Sentinel::new();
    server_sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps(SAY_HELLO, 3.0)])?;
    server_sentinel
        .authority_rules()
        .load_rules(vec![AuthorityRule::black_list(SAY_HELLO, "crawler")])?;
    let server_layer = SentinelGrpcLayer::server(server_sentinel)
        .origin_metadata(HeaderName::from_static("x-caller"));

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = Server::builder()
        .layer(server_layer)
        .add_service(Greeter)
        .serve_with_incoming(TcpListenerStream::new(listener));
    tokio::spawn(server);

    // The client's rules: a breaker that opens after 2 errors for 10 s.
    let client_sentinel = Sentinel::new();
    client_sentinel
        .degrade_rules()
        .load_rules(vec![
            DegradeRule::error_count(SAY_HELLO, 2.0, 10).min_request_amount(1)
        ])?;
    let channel = Channel::from_shared(format!("http://{addr}"))?
        .connect()
        .await?;
    let guarded = SentinelGrpcLayer::client(client_sentinel).layer(channel);
    let mut client = tonic::client::Grpc::new(guarded);

    for _ in 0..4 {
        say_hello(&mut client, "shop", "alice").await;
    }
    say_hello(&mut client, "crawler", "alice").await;
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await; // a new second
    for _ in 0..4 {
        say_hello(&mut client, "shop", "nobody").await;
    }
    Ok(())
}
