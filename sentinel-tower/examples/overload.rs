//! An axum service offered ten times its limit by `wrk` on loopback: the server's CPU time
//! per request while most requests are refused with a 429, for three servers in the same
//! run, alternating rounds:
//!
//! - `bare`: a handler that answers every request with the 429 sentinel-tower would send
//!   (same status, headers and body), the floor;
//! - `sentinel`: `SentinelLayer` (route key, `BlockResponses`) on a route whose handler
//!   answers 200, one QPS rule at a tenth of what `wrk` offers;
//! - `governor`: tower_governor's `GovernorLayer` (one global key) at the same limit, its
//!   own 429.
//!
//! One core for the server, one for `wrk` (Linux, `taskset` and `wrk` on the path):
//!
//! ```text
//! cargo build --release -p sentinel-tower --example overload --features axum
//! taskset -c 0 target/release/examples/overload [--rounds 3] [--seconds 5] [--connections 32]
//! ```
//!
//! The server runs on a current-thread tokio runtime; its CPU time is the process's
//! (every thread's `/proc/self/task/*/schedstat`, nanoseconds) over the `wrk` run, divided
//! by the responses `wrk` counted. The limit is a tenth of the bare server's rate in the
//! first round; a round where most requests passed (the machine's other load starved the
//! server or `wrk`) is printed but left out of the medians.
#![allow(missing_docs)]

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderValue, Response, StatusCode};
use axum::routing::get;
use axum::Router;
use sentinel_core::{flow::FlowRule, Sentinel};
use sentinel_tower::{BlockResponses, ResourceKey, SentinelLayer};
use tokio::sync::oneshot;
use tower_governor::governor::GovernorConfigBuilder;
use tower_governor::key_extractor::GlobalKeyExtractor;
use tower_governor::GovernorLayer;

const VARIANTS: [&str; 3] = ["bare", "sentinel", "governor"];

#[derive(Clone, Copy)]
struct Options {
    rounds: usize,
    seconds: u64,
    connections: u32,
}

fn options() -> Options {
    let mut options = Options {
        rounds: 3,
        seconds: 5,
        connections: 32,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).map(String::as_str).unwrap_or("");
        match pair[0].as_str() {
            "--rounds" => options.rounds = value.parse().expect("--rounds N"),
            "--seconds" => options.seconds = value.parse().expect("--seconds N"),
            "--connections" => options.connections = value.parse().expect("--connections N"),
            other => panic!("unknown option {other}"),
        }
    }
    options
}

/// The 429 sentinel-tower's `BlockResponses` sends for a QPS block, made by hand.
fn bare_429() -> Response<Body> {
    let mut response = Response::new(Body::from("too many requests, retry later\n"));
    *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(header::RETRY_AFTER, HeaderValue::from(1));
    response
}

fn app(variant: &str, limit: u64) -> Router {
    match variant {
        "bare" => Router::new().route("/order", get(|| async { bare_429() })),
        "sentinel" => {
            let sentinel = Sentinel::new();
            sentinel
                .flow_rules()
                .load_rules(vec![FlowRule::qps("GET:/order", limit as f64)])
                .expect("valid rules");
            let layer = SentinelLayer::new(sentinel)
                .resource_key(ResourceKey::method_and_route())
                .respond_with(BlockResponses::new());
            Router::new()
                .route("/order", get(|| async { "order" }))
                .route_layer(layer)
        }
        _ => {
            let config = GovernorConfigBuilder::default()
                .per_nanosecond(1_000_000_000 / limit.max(1))
                .burst_size(u32::try_from(limit).unwrap_or(u32::MAX).max(1))
                .key_extractor(GlobalKeyExtractor)
                .finish()
                .expect("a valid quota");
            Router::new()
                .route("/order", get(|| async { "order" }))
                .route_layer(GovernorLayer::new(config))
        }
    }
}

/// CPU time of every thread of this process, in nanoseconds.
fn cpu_ns() -> u64 {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task").expect("Linux /proc") {
        let path = task.expect("a task").path().join("schedstat");
        if let Ok(text) = std::fs::read_to_string(path) {
            total += text
                .split_whitespace()
                .next()
                .and_then(|ns| ns.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    total
}

/// What `wrk` counted.
struct Counted {
    requests: u64,
    non_2xx: u64,
}

fn wrk(addr: SocketAddr, options: &Options) -> Counted {
    let output = Command::new("taskset")
        .args(["-c", "1", "wrk", "-t1"])
        .arg(format!("-c{}", options.connections))
        .arg(format!("-d{}s", options.seconds))
        .arg(format!("http://{addr}/order"))
        .output()
        .expect("taskset and wrk on the path");
    let text = String::from_utf8_lossy(&output.stdout);
    let number_before = |needle: &str| -> Option<u64> {
        let line = text.lines().find(|l| l.contains(needle))?;
        let before = &line[..line.find(needle)?];
        before.split_whitespace().last()?.parse().ok()
    };
    let requests = number_before(" requests in").expect("wrk's request count");
    let non_2xx = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Non-2xx or 3xx responses:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    Counted { requests, non_2xx }
}

/// Serves `variant` on a current-thread runtime, runs `wrk` against it, and returns the
/// count and the server's CPU time.
fn measure(variant: &str, limit: u64, options: &Options) -> (Counted, u64) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("a loopback port");
    let addr = listener.local_addr().expect("bound");
    let app = app(variant, limit);
    let (stop, stopped) = oneshot::channel::<()>();
    let server = std::thread::spawn(move || {
        runtime.block_on(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await
                .expect("serving");
        });
    });
    // A short warm-up, then the measured run.
    let warm = Options {
        seconds: 1,
        ..*options
    };
    wrk(addr, &warm);
    std::thread::sleep(Duration::from_millis(200));
    let before = cpu_ns();
    let counted = wrk(addr, options);
    let cpu = cpu_ns() - before;
    let _ = stop.send(());
    server.join().expect("the server stopped");
    (counted, cpu)
}

fn main() {
    let options = options();
    let mut limit = 0;
    let mut per_request: Vec<Vec<f64>> = vec![Vec::new(); VARIANTS.len()];
    println!("variant   round  requests/s  refused  CPU per request (us)");
    for round in 0..options.rounds {
        for k in 0..VARIANTS.len() {
            // Each round starts with another variant; the first round calibrates the limit.
            let i = if round == 0 {
                k
            } else {
                (k + round) % VARIANTS.len()
            };
            let variant = VARIANTS[i];
            let (counted, cpu) = measure(variant, limit.max(1), &options);
            if variant == "bare" && limit == 0 {
                limit = (counted.requests / options.seconds / 10).max(1);
            }
            let us = cpu as f64 / 1e3 / counted.requests.max(1) as f64;
            let rate = counted.requests / options.seconds;
            let refused = counted.non_2xx as f64 / counted.requests.max(1) as f64;
            // A round where the machine's other load starved the server or wrk, so that most
            // requests were not refused: not the overload this measures, left out.
            let overloaded = variant == "bare" || refused >= 0.5;
            if overloaded {
                per_request[i].push(us);
            }
            println!(
                "{variant:9} {round:5}  {rate:10}  {:6.1} %  {us:.2}{}",
                100.0 * refused,
                if overloaded {
                    ""
                } else {
                    "  (most passed: left out)"
                },
            );
        }
    }
    println!("limit: {limit} requests/s");
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
    };
    let bare = median(&mut per_request[0]);
    for (i, variant) in VARIANTS.iter().enumerate() {
        let m = median(&mut per_request[i]);
        println!(
            "{variant:9} median CPU per request {m:.2} us ({:.3} x bare)",
            m / bare
        );
    }
}
