//! The layers' cost per call against bare tonic, in one run: a unary call over loopback
//! (a real tonic server and channel, bare, with the server layer, and with both layers), and
//! the same call served in-process (the echo service called as a tower service with an
//! encoded request, bare and behind the server layer, the response body drained). Each
//! guarded resource has one QPS rule too high to block, as in sentinel-tower's bench.
#![allow(missing_docs)] // criterion_group! generates an undocumented function

#[allow(dead_code)] // the bench uses a part of the tests' service and clients
#[path = "../tests/grpc/support.rs"]
mod support;

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{criterion_group, Criterion, Throughput};
use http_body_util::{BodyExt, Full};
use prost::Message;
use sentinel_core::{flow::FlowRule, Sentinel};
use sentinel_tonic::SentinelGrpcLayer;
use tonic::body::Body;
use tonic::Code;
use tower::{Layer, Service, ServiceExt};

use support::{client, say, serve, Ping, SAY};

/// An engine with one QPS rule on `SAY` that never blocks.
fn engine() -> Sentinel {
    let sentinel = Sentinel::new();
    sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps(SAY, 1e12)])
        .expect("valid rules");
    sentinel
}

fn loopback(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let mut group = c.benchmark_group("grpc_unary_loopback");
    group.throughput(Throughput::Elements(1));
    let variants: [(&str, bool, bool); 3] = [
        ("bare", false, false),
        ("server_layer", true, false),
        ("server_and_client_layers", true, true),
    ];
    let clients: Vec<_> = variants
        .iter()
        .map(|&(_, guard_server, guard_client)| {
            runtime.block_on(async {
                let server = serve(guard_server.then(|| SentinelGrpcLayer::server(engine()))).await;
                let client = client(
                    server.addr,
                    guard_client.then(|| SentinelGrpcLayer::client(engine())),
                )
                .await;
                (server, client)
            })
        })
        .collect();
    // Each variant is timed in blocks interleaved with blocks of the others, so that a
    // shared machine's load weighs on all of them alike.
    for (i, (name, _, _)) in variants.iter().enumerate() {
        let mut clients: Vec<_> = clients.iter().map(|(_, client)| client.clone()).collect();
        group.bench_function(*name, |b| {
            b.iter_custom(|iters| {
                interleaved(iters, i, clients.len(), |variant| {
                    runtime
                        .block_on(say(&mut clients[variant], Code::Ok))
                        .expect("never blocked");
                })
            })
        });
    }
    group.finish();
}

/// Runs `iters` calls of variant `measured` in blocks of 16, each followed by a block of
/// every other variant of `count` (untimed); returns the time of the measured calls.
fn interleaved(iters: u64, measured: usize, count: usize, mut call: impl FnMut(usize)) -> Duration {
    const BLOCK: u64 = 16;
    let mut total = Duration::ZERO;
    let mut done = 0;
    while done < iters {
        let n = BLOCK.min(iters - done);
        let start = Instant::now();
        for _ in 0..n {
            call(measured);
        }
        total += start.elapsed();
        for other in (0..count).filter(|&v| v != measured) {
            for _ in 0..n {
                call(other);
            }
        }
        done += n;
    }
    total
}

/// A unary `SAY` request with an encoded empty `Ping`, as it reaches a server's routes.
fn encoded_request() -> http::Request<Body> {
    let message = Ping::default().encode_to_vec();
    let mut frame = Vec::with_capacity(5 + message.len());
    frame.push(0); // not compressed
    frame.extend_from_slice(&u32::try_from(message.len()).expect("small").to_be_bytes());
    frame.extend_from_slice(&message);
    http::Request::post(SAY)
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(Body::new(Full::new(Bytes::from(frame))))
        .expect("a valid request")
}

/// Calls `service` with an encoded request and drains the response body (its trailers end
/// the guarded call).
async fn serve_once<S, B>(service: &mut S)
where
    S: Service<http::Request<Body>, Response = http::Response<B>>,
    S::Error: std::fmt::Debug,
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    let response = service
        .ready()
        .await
        .expect("ready")
        .call(encoded_request())
        .await
        .expect("served");
    let collected = response.into_body().collect().await.expect("a body");
    black_box(collected.trailers());
}

fn in_process(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let echo = runtime.block_on(serve(None)).echo;
    let mut group = c.benchmark_group("grpc_unary_in_process");
    group.throughput(Throughput::Elements(1));
    let mut bare = echo.clone();
    group.bench_function("bare", |b| {
        b.iter(|| runtime.block_on(serve_once(&mut bare)))
    });
    let mut guarded = SentinelGrpcLayer::server(engine()).layer(echo);
    group.bench_function("server_layer", |b| {
        b.iter(|| runtime.block_on(serve_once(&mut guarded)))
    });
    group.finish();
}

/// `GRPC_BENCH_CALLS=<variant>:<n>`: makes `n` calls of one variant and exits (`bare` or
/// `server_layer` in-process; `loopback_bare`, `loopback_server` or `loopback_both` over
/// loopback, client and server in this process), for an instruction count under callgrind (the difference of two `n`s is the
/// cost per call, free of the machine's load):
/// `GRPC_BENCH_CALLS=server_layer:2000 valgrind --tool=callgrind target/release/deps/grpc-*`.
fn count_calls(spec: &str) {
    let (variant, n) = spec.split_once(':').expect("<variant>:<n>");
    let n: u32 = n.parse().expect("a number of calls");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    if let Some(layers) = variant.strip_prefix("loopback_") {
        // A unary call over loopback, client and server in this process.
        let (guard_server, guard_client) = (layers != "bare", layers == "both");
        runtime.block_on(async {
            let server = serve(guard_server.then(|| SentinelGrpcLayer::server(engine()))).await;
            let layer = guard_client.then(|| SentinelGrpcLayer::client(engine()));
            let mut client = client(server.addr, layer).await;
            for _ in 0..n {
                say(&mut client, Code::Ok).await.expect("never blocked");
            }
        });
        return;
    }
    let echo = runtime.block_on(serve(None)).echo;
    let mut guarded = SentinelGrpcLayer::server(engine()).layer(echo.clone());
    let mut bare = echo;
    for _ in 0..n {
        match variant {
            "bare" => runtime.block_on(serve_once(&mut bare)),
            _ => runtime.block_on(serve_once(&mut guarded)),
        }
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = loopback, in_process
}

fn main() {
    if let Ok(spec) = std::env::var("GRPC_BENCH_CALLS") {
        count_calls(&spec);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
