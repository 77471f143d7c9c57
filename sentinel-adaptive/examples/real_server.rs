//! The real-server measurement: an axum service whose one route calls a simulated
//! dependency (a semaphore of C places, 10 ms service time, optionally jittered), guarded by
//! a tower layer (axum's `from_fn`) that uses the limiter directly, loaded by a separate
//! load-generator process (this binary with `load`), open loop at a fixed rate.
//!
//! ```text
//! cargo run --release -p sentinel-adaptive --example real_server -- \
//!     [--guard adaptive|static|none] [--capacity 8] [--load 2] [--secs 30] [--jitter 0]
//! ```
//! C halves at a third of the run and doubles back at two thirds. The server prints one line
//! per second: limit, in flight, goodput (answers 200 per second), p99 of admitted calls.
#![allow(missing_docs, clippy::unwrap_used)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use sentinel_adaptive::{AdaptiveLimiter, AdaptiveRule, Outcome};
use tokio::sync::Semaphore;

fn arg<T: std::str::FromStr>(name: &str, default: T) -> T {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

enum Guard {
    Adaptive(Arc<AdaptiveLimiter>),
    /// A static thread-grade bulkhead tuned for the original C.
    Static {
        in_flight: AtomicU64,
        limit: u64,
    },
    None,
}

struct Server {
    guard: Guard,
    start: Instant,
    ok: AtomicU64,
    /// This second's admitted latencies (µs), for the p99.
    latencies: std::sync::Mutex<Vec<u64>>,
}

async fn guarded(State(s): State<Arc<Server>>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let finish = |s: &Server, res: &Response| {
        let us = started.elapsed().as_micros() as u64;
        if res.status().is_success() {
            s.ok.fetch_add(1, Ordering::Relaxed);
            s.latencies.lock().unwrap().push(us);
        }
    };
    match &s.guard {
        Guard::Adaptive(limiter) => {
            let Some(permit) = limiter.try_acquire_owned() else {
                return StatusCode::SERVICE_UNAVAILABLE.into_response();
            };
            let res = next.run(req).await;
            permit.release(started.elapsed(), Outcome::Success);
            finish(&s, &res);
            res
        }
        Guard::Static { in_flight, limit } => {
            if in_flight.fetch_add(1, Ordering::Acquire) >= *limit {
                in_flight.fetch_sub(1, Ordering::Release);
                return StatusCode::SERVICE_UNAVAILABLE.into_response();
            }
            let res = next.run(req).await;
            in_flight.fetch_sub(1, Ordering::Release);
            finish(&s, &res);
            res
        }
        Guard::None => {
            let res = next.run(req).await;
            finish(&s, &res);
            res
        }
    }
}

async fn serve(port_out: std::net::TcpListener) {
    let capacity: usize = arg("--capacity", 8);
    let secs: u64 = arg("--secs", 30);
    let jitter: f64 = arg("--jitter", 0.0);
    let guard_name: String = arg("--guard", "adaptive".to_string());
    let guard = match guard_name.as_str() {
        "static" => Guard::Static {
            in_flight: AtomicU64::new(0),
            limit: capacity as u64,
        },
        "none" => Guard::None,
        _ => Guard::Adaptive(Arc::new(
            AdaptiveLimiter::builder(AdaptiveRule::new("dependency"))
                .build(0)
                .unwrap(),
        )),
    };
    let server = Arc::new(Server {
        guard,
        start: Instant::now(),
        ok: AtomicU64::new(0),
        latencies: std::sync::Mutex::new(Vec::new()),
    });
    // The dependency: 2 C units, a call takes 2 (C places) or 4 while C is halved (C / 2).
    let dependency = Arc::new(Semaphore::new(2 * capacity));
    let weight = Arc::new(AtomicU64::new(2));
    let seq = Arc::new(AtomicU64::new(1));
    let app = Router::new()
        .route(
            "/",
            get({
                let (dependency, weight) = (dependency.clone(), weight.clone());
                move || {
                    let (dependency, seq) = (dependency.clone(), seq.clone());
                    let units = weight.load(Ordering::Relaxed) as u32;
                    async move {
                        let _place = dependency.acquire_many(units).await.unwrap();
                        // A cheap deterministic spread over [-jitter, +jitter].
                        let n = seq.fetch_add(0x9E37_79B9, Ordering::Relaxed);
                        let u = ((n >> 8) % 1_000) as f64 / 1_000.0 * 2.0 - 1.0;
                        tokio::time::sleep(Duration::from_secs_f64(0.010 * (1.0 + jitter * u)))
                            .await;
                        "ok"
                    }
                }
            }),
        )
        .layer(middleware::from_fn_with_state(server.clone(), guarded));
    port_out.set_nonblocking(true).unwrap();
    let listener = tokio::net::TcpListener::from_std(port_out).unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    if let Guard::Adaptive(limiter) = &server.guard {
        let (limiter, start) = (limiter.clone(), server.start);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_millis(10));
            loop {
                every.tick().await;
                limiter.tick(start.elapsed().as_millis() as u64);
            }
        });
    }
    println!("second,capacity,limit,in_flight,goodput,p99_ms");
    let mut every = tokio::time::interval(Duration::from_secs(1));
    every.tick().await;
    for second in 1..=secs {
        every.tick().await;
        let want = if second > secs / 3 && second <= 2 * secs / 3 {
            capacity / 2
        } else {
            capacity
        };
        // New calls take twice the units while C is halved; calls in service keep theirs.
        weight.store(if want < capacity { 4 } else { 2 }, Ordering::Relaxed);
        let mut lat = std::mem::take(&mut *server.latencies.lock().unwrap());
        lat.sort_unstable();
        let p99 = lat
            .get((lat.len() * 99 / 100).min(lat.len().saturating_sub(1)))
            .map_or(0.0, |us| *us as f64 / 1e3);
        let (limit, in_flight) = match &server.guard {
            Guard::Adaptive(l) => (l.limit() as i64, l.in_flight() as i64),
            Guard::Static { in_flight, limit } => {
                (*limit as i64, in_flight.load(Ordering::Relaxed) as i64)
            }
            Guard::None => (-1, -1),
        };
        let ok = server.ok.swap(0, Ordering::Relaxed);
        println!("{second},{want},{limit},{in_flight},{ok},{p99:.1}");
    }
}

/// The load generator: `rate` requests per second, open loop, for `secs`.
async fn load(port: u16, rate: f64, secs: u64) {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .pool_max_idle_per_host(2_000)
        .build()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}/");
    let start = Instant::now();
    let mut sent = 0u64;
    let errors = Arc::new(AtomicU64::new(0));
    let mut every = tokio::time::interval(Duration::from_millis(1));
    while start.elapsed() < Duration::from_secs(secs) {
        every.tick().await;
        let due = (start.elapsed().as_secs_f64() * rate) as u64;
        while sent < due {
            sent += 1;
            let (client, url, errors) = (client.clone(), url.clone(), errors.clone());
            tokio::spawn(async move {
                if client.get(&url).send().await.is_err() {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    }
    eprintln!(
        "load: sent {sent} at {rate}/s, {} transport errors",
        errors.load(Ordering::Relaxed)
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    if std::env::args().nth(1).as_deref() == Some("load") {
        rt.block_on(load(
            arg("--port", 0),
            arg("--rate", 1_000.0),
            arg("--secs", 30),
        ));
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let capacity: f64 = arg("--capacity", 8.0);
    let rate = capacity * 100.0 * arg("--load", 2.0);
    let secs: u64 = arg("--secs", 30);
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "load",
            "--port",
            &port.to_string(),
            "--rate",
            &rate.to_string(),
        ])
        .args(["--secs", &secs.to_string()])
        .spawn()
        .unwrap();
    rt.block_on(serve(listener));
    let _ = child.wait();
}
