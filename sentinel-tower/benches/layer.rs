//! The layer's cost per request: the same `service_fn` called bare and behind
//! `SentinelLayer` with one QPS rule too high to block, without a network or a runtime
//! (every future is ready on its first poll). One thread, and two threads on one resource;
//! and, for scale, the engine's own entry and exit and the layer's other parts.
#![allow(missing_docs)] // criterion_group! generates an undocumented function

use std::convert::Infallible;
use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::sync::Barrier;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use http::{HeaderName, HeaderValue, Request, Response, Uri};
use sentinel_core::{flow::FlowRule, param_flow::ParamFlowRule, Sentinel};
use sentinel_tower::{ExtractResource, ParamSource, ResourceKey, SentinelLayer};
use tower::{service_fn, Layer, Service};

/// Polls `future` until it is ready, with a waker that does nothing.
fn run<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
    }
}

/// [`request`] with an `x-user-id` header.
fn request_as<S>(service: &mut S, uri: &Uri, user: &HeaderValue) -> Result<S::Response, S::Error>
where
    S: Service<Request<()>>,
{
    let mut request = Request::new(());
    *request.uri_mut() = uri.clone();
    request
        .headers_mut()
        .insert(HeaderName::from_static("x-user-id"), user.clone());
    send(service, request)
}

/// One request: ready, call, and the response future awaited.
fn request<S>(service: &mut S, uri: &Uri) -> Result<S::Response, S::Error>
where
    S: Service<Request<()>>,
{
    let mut request = Request::new(());
    *request.uri_mut() = uri.clone();
    send(service, request)
}

/// Ready, call, and the response future awaited.
fn send<S>(service: &mut S, request: Request<()>) -> Result<S::Response, S::Error>
where
    S: Service<Request<()>>,
{
    let mut cx = Context::from_waker(Waker::noop());
    match service.poll_ready(&mut cx) {
        Poll::Ready(Ok(())) => {}
        Poll::Ready(Err(error)) => return Err(error),
        Poll::Pending => unreachable!("a service_fn is always ready"),
    }
    run(service.call(request))
}

fn handler() -> impl Service<Request<()>, Response = Response<()>, Error = Infallible, Future: Send>
       + Clone
       + Send
       + 'static {
    service_fn(|request: Request<()>| async move {
        black_box(&request);
        Ok::<_, Infallible>(Response::new(()))
    })
}

/// `iters` requests on each of two threads, each thread with its own clone of `service`;
/// the slower thread's time, so the result is the time per request on one thread while the
/// other one runs too.
fn two_threads<S>(service: &S, uri: &Uri, iters: u64) -> Duration
where
    S: Service<Request<()>> + Clone + Send,
    S::Error: std::fmt::Debug,
{
    let barrier = Barrier::new(2);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let (mut service, barrier) = (service.clone(), &barrier);
                scope.spawn(move || {
                    barrier.wait();
                    let start = Instant::now();
                    for _ in 0..iters {
                        request(&mut service, uri).expect("passes");
                    }
                    start.elapsed()
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().expect("the worker finished"))
            .max()
            .unwrap_or_default()
    })
}

fn layer_overhead(c: &mut Criterion) {
    let uri = Uri::from_static("/order");
    let sentinel = Sentinel::new();
    sentinel
        .flow_rules()
        .load_rules(vec![
            FlowRule::qps("GET:/order", 1e12),
            FlowRule::qps("/order", 1e12),
        ])
        .expect("valid rules");
    let bare = handler();
    let guarded = SentinelLayer::new(sentinel.clone()).layer(handler());
    let by_path = SentinelLayer::new(sentinel.clone())
        .resource_key(ResourceKey::path())
        .layer(handler());
    // The same route with a param rule per user, the user read from a header.
    let per_user = Sentinel::new();
    per_user
        .flow_rules()
        .load_rules(vec![FlowRule::qps("GET:/order", 1e12)])
        .expect("valid rules");
    per_user
        .param_flow_rules()
        .load_rules(vec![ParamFlowRule::qps("GET:/order", 0, 1e9)])
        .expect("valid rules");
    let with_user = SentinelLayer::new(per_user)
        .arg(ParamSource::header(HeaderName::from_static("x-user-id")))
        .layer(handler());

    let mut group = c.benchmark_group("layer");
    group.throughput(Throughput::Elements(1));
    // What the engine alone costs for the same entry, for scale: the rest of the layer's
    // overhead is its own.
    group.bench_function("engine alone: GET:/order entered and exited", |b| {
        b.iter(|| {
            run(sentinel
                .entry(black_box("GET:/order"))
                .inbound()
                .enter_async())
        })
    });
    // What the layer calls: the check without a future, with an entry that outlives the
    // call (owned).
    group.bench_function("engine alone: GET:/order try_enter_owned and exit", |b| {
        b.iter(|| {
            sentinel
                .entry(black_box("GET:/order"))
                .inbound()
                .try_enter_owned()
        })
    });
    // The layer's other part: the resource name.
    let mut named = Request::new(());
    *named.uri_mut() = uri.clone();
    group.bench_function("METHOD:/path name built", |b| {
        b.iter(|| ResourceKey::method_and_path().with_resource(black_box(&named), str::len))
    });
    group.bench_function("path name taken", |b| {
        b.iter(|| ResourceKey::path().with_resource(black_box(&named), str::len))
    });
    let mut service = bare.clone();
    group.bench_function("bare service", |b| {
        b.iter(|| request(&mut service, &uri).expect("served"))
    });
    let mut service = guarded.clone();
    group.bench_function("METHOD:/path key, one QPS rule", |b| {
        b.iter(|| request(&mut service, &uri).expect("passes"))
    });
    let mut service = by_path.clone();
    group.bench_function("path key, one QPS rule", |b| {
        b.iter(|| request(&mut service, &uri).expect("passes"))
    });
    let mut service = with_user.clone();
    let users: Vec<HeaderValue> = (0..1_000)
        .map(|i| HeaderValue::from_str(&format!("user-{i}")).expect("a header value"))
        .collect();
    let mut next = 0;
    group.bench_function(
        "METHOD:/path key, one QPS rule + a param rule on a header (1 000 users)",
        |b| {
            b.iter(|| {
                next = (next + 1) % users.len();
                request_as(&mut service, &uri, &users[next]).expect("passes")
            })
        },
    );
    group.bench_function("bare service, 2 threads", |b| {
        b.iter_custom(|iters| two_threads(&bare, &uri, iters))
    });
    group.bench_function("METHOD:/path key, one QPS rule, 2 threads", |b| {
        b.iter_custom(|iters| two_threads(&guarded, &uri, iters))
    });
    group.finish();
}

criterion_group!(benches, layer_overhead);
criterion_main!(benches);
