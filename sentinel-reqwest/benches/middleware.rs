//! The middleware's cost per call against the bare `reqwest-middleware` client, in one run:
//! in process (a last middleware answers every call at once, so only the client's plumbing
//! and the guard are measured) and over loopback to an axum server (the real call, where
//! the guard's share is what matters). One QPS rule too high to block.
//!
//! The machine is shared and its load moves within seconds, so each iteration makes one
//! bare and one guarded call, in alternating order, and each benchmark times only its own:
//! both see the same conditions.
#![allow(missing_docs)] // criterion_group! generates an undocumented function

use std::future::Future;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use http::Extensions;
use reqwest::{Request, Response};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware, Middleware, Next};
use sentinel_core::{flow::FlowRule, Sentinel};
use sentinel_reqwest::SentinelMiddleware;

/// Answers every call with an empty 200, without a network.
struct Answer;

#[async_trait::async_trait]
impl Middleware for Answer {
    async fn handle(
        &self,
        _request: Request,
        _extensions: &mut Extensions,
        _next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        Ok(Response::from(http::Response::new(String::new())))
    }
}

fn guard(resource: &str) -> SentinelMiddleware {
    let sentinel = Sentinel::new();
    sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps(resource, 1e9)])
        .expect("valid rules");
    SentinelMiddleware::new(sentinel)
}

/// Benchmarks `bare` and `guarded` in `group`, each iteration calling both (in alternating
/// order) and timing one.
fn paired<F, Fut>(c: &mut Criterion, group: &str, call: F)
where
    F: Fn(bool) -> Fut,
    Fut: Future,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let mut group = c.benchmark_group(group);
    group.throughput(Throughput::Elements(1));
    for (name, timed) in [("bare", false), ("guarded", true)] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut spent = Duration::ZERO;
                for i in 0..iters {
                    let order = if i % 2 == 0 {
                        [false, true]
                    } else {
                        [true, false]
                    };
                    for guarded in order {
                        let start = Instant::now();
                        runtime.block_on(call(guarded));
                        if guarded == timed {
                            spent += start.elapsed();
                        }
                    }
                }
                spent
            })
        });
    }
    group.finish();
}

fn in_process(c: &mut Criterion) {
    let bare = ClientBuilder::new(reqwest::Client::new())
        .with(Answer)
        .build();
    let guarded = ClientBuilder::new(reqwest::Client::new())
        .with(guard("http://upstream.test:80"))
        .with(Answer)
        .build();
    paired(c, "in_process", |guard| {
        let client = if guard { &guarded } else { &bare };
        async move {
            client
                .get("http://upstream.test/users/42")
                .send()
                .await
                .expect("answered")
        }
    });
}

fn loopback(c: &mut Criterion) {
    // The server runs on a runtime of its own, on another thread.
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async move {
            let app =
                axum::Router::new().route("/users/{id}", axum::routing::get(|| async { "user" }));
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("a loopback port");
            addr_tx
                .send(listener.local_addr().expect("bound"))
                .expect("the bench waits");
            axum::serve(listener, app).await.expect("serving");
        });
    });
    let addr = addr_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the server starts");
    let client = |middleware: Option<SentinelMiddleware>| -> ClientWithMiddleware {
        let builder = ClientBuilder::new(reqwest::Client::new());
        match middleware {
            Some(middleware) => builder.with(middleware).build(),
            None => builder.build(),
        }
    };
    let bare = client(None);
    let guarded = client(Some(guard(&format!("http://{addr}"))));
    let url = format!("http://{addr}/users/42");
    paired(c, "loopback", |guard| {
        let client = if guard { &guarded } else { &bare };
        let url = &url;
        async move {
            let response = client.get(url).send().await.expect("answered");
            response.bytes().await.expect("a body")
        }
    });
}

criterion_group!(benches, in_process, loopback);
criterion_main!(benches);
