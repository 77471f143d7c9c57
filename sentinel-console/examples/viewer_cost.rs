//! What viewers cost the server: 10 000 resources under live traffic, the console served on
//! loopback, and 0, 1, 5 and 10 viewers reading its event stream (as the page does, the
//! default query: top 50 by pass QPS). Prints the CPU per second of the process's threads but
//! the traffic's (the runtime's: the console's collection, snapshots, JSON and sockets) in
//! each phase, and the cost of one viewer: (CPU with N viewers - CPU with none) / N, in % of
//! one core.
//!
//! ```text
//! cargo run --release -p sentinel-console --example viewer_cost [resources] [seconds per phase]
//! cargo run --release -p sentinel-console --example viewer_cost 10000 300 serve
//! ```
//!
//! With `serve`, it serves the console on 127.0.0.1:8721 with the same traffic for that many
//! seconds and measures nothing: open it in a browser (the page's main-thread tasks).
//!
//! The viewers are plain HTTP readers in this process (a few socket reads a second, no
//! parsing); the traffic runs on its own thread, the same in every phase.
#![allow(clippy::print_stdout)] // a measurement binary prints its figures

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sentinel_console::Console;
use sentinel_core::Sentinel;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// CPU time of this process's threads but `traffic`, in nanoseconds: the sum of
/// `/proc/self/task/*/schedstat`'s first field (time on a CPU), finer than the 10 ms ticks of
/// `/proc/self/stat`.
fn cpu_ns() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .flatten()
        .filter(|task| {
            std::fs::read_to_string(task.path().join("comm")).is_ok_and(|c| c.trim() != "traffic")
        })
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|line| line.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// One viewer: `GET /console/api/stream`, reading and counting bytes until `stop`.
async fn viewer(port: u16, stop: Arc<AtomicBool>, bytes: Arc<AtomicUsize>) {
    let Ok(mut socket) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        println!("viewer: no connection");
        return;
    };
    let request = format!(
        "GET /console/api/stream?limit=50 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n\r\n"
    );
    if socket.write_all(request.as_bytes()).await.is_err() {
        return;
    }
    let mut buffer = vec![0u8; 64 * 1024];
    while !stop.load(Ordering::Relaxed) {
        match tokio::time::timeout(Duration::from_millis(200), socket.read(&mut buffer)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return,
            Ok(Ok(n)) => {
                bytes.fetch_add(n, Ordering::Relaxed);
            }
            Err(_) => {}
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let resources: usize = args.next().map_or(Ok(10_000), |a| a.parse())?;
    let seconds: u64 = args.next().map_or(Ok(10), |a| a.parse())?;
    let serve = args.next().is_some_and(|a| a == "serve");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(measure(resources, seconds, serve))
}

async fn measure(
    resources: usize,
    seconds: u64,
    serve: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let sentinel = Sentinel::new();
    let builder = Console::builder(&sentinel);
    // With the `transport` feature, `serve` also runs the dashboard transport (read-only, on
    // 127.0.0.1:8719 or the next free port): its refused edits show on the page.
    #[cfg(feature = "transport")]
    let (builder, _transport) = if serve {
        let config = sentinel_transport::TransportConfig::builder("viewer-cost").build()?;
        let transport = sentinel_transport::Transport::start(sentinel.clone(), config).await?;
        println!("dashboard transport on port {}", transport.port());
        (builder.transport(&transport), Some(transport))
    } else {
        (builder, None)
    };
    let console = builder.build()?;
    let addr = if serve {
        sentinel_console::DEFAULT_ADDR
    } else {
        std::net::SocketAddr::from(([127, 0, 0, 1], 0))
    };
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let port = listener.local_addr()?.port();
    let app = console.mount::<()>("/console");
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    // Traffic: resource i is called i % 7 + 1 times a second, every second.
    let stop_traffic = Arc::new(AtomicBool::new(false));
    let traffic = {
        let sentinel = sentinel.clone();
        let stop = stop_traffic.clone();
        std::thread::Builder::new()
            .name("traffic".into())
            .spawn(move || {
                let names: Vec<String> = (0..resources).map(|i| format!("res/{i:05}")).collect();
                while !stop.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    for (i, name) in names.iter().enumerate() {
                        for _ in 0..(i % 7 + 1) {
                            drop(sentinel.entry(name).enter());
                        }
                    }
                    std::thread::sleep(Duration::from_secs(1).saturating_sub(started.elapsed()));
                }
            })?
    };
    // Two seconds for every resource to exist and the first second to be collected.
    tokio::time::sleep(Duration::from_secs(3)).await;
    println!(
        "{} resources, {} s per phase, 2 runtime workers",
        sentinel.resources().len(),
        seconds
    );
    let span = Duration::from_secs(seconds);
    if serve {
        println!("serving http://127.0.0.1:{port}/console for {seconds} s");
        tokio::time::sleep(span).await;
    }
    let mut baseline = None;
    let phases: &[usize] = if serve { &[] } else { &[0, 1, 5, 10] };
    for &n in phases {
        let stop = Arc::new(AtomicBool::new(false));
        let bytes = Arc::new(AtomicUsize::new(0));
        let viewers: Vec<_> = (0..n)
            .map(|_| tokio::spawn(viewer(port, stop.clone(), bytes.clone())))
            .collect();
        // Past the first snapshot of each viewer: the steady state.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let sent_before = bytes.load(Ordering::Relaxed);
        let (cpu, started) = (cpu_ns(), Instant::now());
        tokio::time::sleep(span).await;
        // Nanoseconds on a CPU per second, in % of one core.
        let used = cpu_ns().saturating_sub(cpu) as f64 / started.elapsed().as_secs_f64() / 1e7;
        let sent = (bytes.load(Ordering::Relaxed) - sent_before) as f64 / span.as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        for v in viewers {
            let _ = v.await;
        }
        match baseline {
            None => {
                println!("viewers  0: CPU {used:5.2} % of a core (collecting the series)");
                baseline = Some(used);
            }
            Some(base) => println!(
                "viewers {n:2}: CPU {used:5.2} % of a core, {:.2} % per viewer, {:.0} bytes/s per viewer",
                (used - base) / n as f64,
                sent / n as f64
            ),
        }
    }
    stop_traffic.store(true, Ordering::Relaxed);
    let _ = traffic.join();
    server.abort();
    Ok(())
}
