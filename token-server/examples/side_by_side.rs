//! Side by side with Sentinel's own token server (`sentinel-cluster-server-default` 1.8.9):
//! accuracy of a global limit under 3 x its load from Java token clients, and the latency of
//! a token request on loopback at 1 and 8 concurrent clients. Prints the tables that
//! `docs/token-server.md` shows.
//!
//! ```text
//! scripts/services.sh start redis && interop/token-server/build.sh
//! cargo run --release -p sentinel-token-server --example side_by_side
//! ```
//!
//! Environment: `SENTINEL_REDIS_ADDR` (default 127.0.0.1:16379), `SECONDS` (accuracy run,
//! default 8), `CLIENTS` (Java processes, default 3), `LIMIT` (default 200).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use sentinel_cluster_redis::{RedisClusterBackend, RedisClusterConfig, RedisTarget};
use sentinel_core::flow::{ClusterFlowConfig, FlowRule};
use sentinel_core::Sentinel;
use sentinel_token_server::protocol::{ClientCodec, FlowRequest, Request, RequestBody};
use sentinel_token_server::{RedisTokenService, TokenServer};
use tokio_util::codec::Framed;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const ACCURACY_FLOW: i64 = 7001;
const LATENCY_FLOW: i64 = 7002;

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn classpath() -> Result<String, BoxError> {
    let interop = concat!(env!("CARGO_MANIFEST_DIR"), "/../interop/token-server");
    let jars = std::fs::read_to_string(format!("{interop}/target/classpath.txt"))
        .map_err(|e| format!("run interop/token-server/build.sh first ({e})"))?;
    Ok(format!("{interop}/target/classes:{}", jars.trim()))
}

/// A JVM of the harness, with its stdout lines.
struct Jvm {
    child: Child,
    lines: std::io::Lines<BufReader<ChildStdout>>,
}

impl Jvm {
    fn start(cp: &str, main: &str, namespace: &str, args: &[String]) -> Result<Self, BoxError> {
        let logs = std::env::temp_dir().join("sentinel-token-server-bench-logs");
        let mut child = Command::new("java")
            .args(["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"])
            .arg(format!("-Dproject.name={namespace}"))
            .arg(format!("-Dcsp.sentinel.log.dir={}", logs.display()))
            .args(["-cp", cp, main])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let out = child.stdout.take().ok_or("no stdout")?;
        Ok(Self {
            child,
            lines: BufReader::new(out).lines(),
        })
    }

    /// Reads lines until one starts with `prefix`; every line read is returned.
    fn until(&mut self, prefix: &str) -> Result<Vec<String>, BoxError> {
        let mut seen = Vec::new();
        for line in self.lines.by_ref() {
            let line = line?;
            let done = line.starts_with(prefix);
            seen.push(line);
            if done {
                return Ok(seen);
            }
        }
        Err(format!("the JVM ended before printing {prefix:?}").into())
    }
}

impl Drop for Jvm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Java token clients (token mode) offering 3 x `limit` to `addr`: admitted per second.
fn accuracy(
    cp: &str,
    addr: SocketAddr,
    limit: u64,
    clients: u64,
    seconds: u64,
    mode: &str,
) -> Result<Vec<u64>, BoxError> {
    let mut jvms = Vec::new();
    for i in 0..clients {
        let args = vec![
            format!("port={}", addr.port()),
            format!("flowId={ACCURACY_FLOW}"),
            format!("count={limit}"),
            format!("rate={}", 3 * limit / clients),
            format!("seconds={seconds}"),
            format!("mode={mode}"),
            "fallback=false".into(),
            "timeoutMs=500".into(),
        ];
        jvms.push(Jvm::start(
            cp,
            "tokenserver.TokenClientLoad",
            &format!("bench-{i}"),
            &args,
        )?);
    }
    for jvm in &mut jvms {
        jvm.until("ready")?;
    }
    let start = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs()
        + 1;
    for jvm in &mut jvms {
        let stdin = jvm.child.stdin.as_mut().ok_or("no stdin")?;
        writeln!(stdin, "go {start}")?;
        stdin.flush()?;
    }
    let mut total: BTreeMap<u64, u64> = BTreeMap::new();
    for jvm in &mut jvms {
        for line in jvm.until("done")? {
            let f: Vec<&str> = line.split_whitespace().collect();
            if let ["second", s, "pass", p, ..] = f.as_slice() {
                *total.entry(s.parse()?).or_default() += p.parse::<u64>()?;
            }
        }
    }
    Ok(total.into_values().collect())
}

/// `clients` connections each asking for one token after another for `run`: p50 and p99.
async fn latency(
    addr: SocketAddr,
    clients: usize,
    run: Duration,
) -> Result<(Duration, Duration, usize), BoxError> {
    let mut tasks = Vec::new();
    for _ in 0..clients {
        tasks.push(tokio::spawn(async move {
            let stream = tokio::net::TcpStream::connect(addr).await?;
            stream.set_nodelay(true)?;
            let mut framed = Framed::new(stream, ClientCodec::default());
            let mut samples = Vec::with_capacity(100_000);
            let end = Instant::now() + run;
            let mut id = 1;
            while Instant::now() < end {
                let body = RequestBody::Flow(FlowRequest {
                    flow_id: LATENCY_FLOW,
                    count: 1,
                    prioritized: false,
                });
                let sent = Instant::now();
                framed.send(Request { id, body }).await?;
                framed
                    .next()
                    .await
                    .ok_or("closed")??
                    .map_err(|e| e.to_string())?;
                samples.push(sent.elapsed());
                id += 1;
            }
            Ok::<_, BoxError>(samples)
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await??);
    }
    all.sort();
    let at = |p: f64| {
        all.get(((all.len() as f64 - 1.0) * p) as usize)
            .copied()
            .unwrap_or_default()
    };
    Ok((at(0.50), at(0.99), all.len()))
}

fn summary(series: &[u64], limit: u64) -> String {
    let ratios: Vec<f64> = series.iter().map(|n| *n as f64 / limit as f64).collect();
    let min = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let max = ratios.iter().copied().fold(0.0, f64::max);
    let mean = ratios.iter().sum::<f64>() / ratios.len().max(1) as f64;
    format!("{series:?} | {min:.3} | {max:.3} | {mean:.3}")
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), BoxError> {
    let cp = classpath()?;
    let redis = std::env::var("SENTINEL_REDIS_ADDR").unwrap_or_else(|_| "127.0.0.1:16379".into());
    let (limit, clients, seconds) = (
        env_num("LIMIT", 200),
        env_num("CLIENTS", 3),
        env_num("SECONDS", 8),
    );

    // Ours, on Redis, on a runtime of its own (2 threads, as the JVM server has its own): the
    // load below runs on this one.
    let server_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let prefix = format!("sentinel:token-server:bench:{}", std::process::id());
    let config = RedisClusterConfig::builder(RedisTarget::Server(redis))
        .prefix(prefix)
        .build()?;
    let backend = RedisClusterBackend::start_on(config, server_runtime.handle());
    let service = Arc::new(RedisTokenService::new(backend.clone()));
    let rules = Sentinel::builder().build();
    service.follow(&rules);
    rules.flow_rules().load_rules(vec![
        FlowRule::qps("accuracy", limit as f64)
            .cluster(ClusterFlowConfig::new(ACCURACY_FLOW).global(true)),
        FlowRule::qps("latency", 1e9).cluster(ClusterFlowConfig::new(LATENCY_FLOW).global(true)),
    ])?;
    let served = service.clone();
    let ours = server_runtime
        .spawn(async move {
            TokenServer::builder()
                .bind(SocketAddr::from(([127, 0, 0, 1], 0)))
                .start(served)
                .await
        })
        .await??;

    // Sentinel's: two JVMs (the accuracy rule, and a limit that never binds for latency).
    let port = |p: u16| SocketAddr::from(([127, 0, 0, 1], p));
    let mut theirs_accuracy = Jvm::start(
        &cp,
        "tokenserver.SentinelTokenServer",
        "bench-server",
        &[
            "18741".into(),
            "bench".into(),
            ACCURACY_FLOW.to_string(),
            limit.to_string(),
            "1".into(),
        ],
    )?;
    theirs_accuracy.until("ready")?;
    let mut theirs_latency = Jvm::start(
        &cp,
        "tokenserver.SentinelTokenServer",
        "bench-server",
        &[
            "18742".into(),
            "bench".into(),
            LATENCY_FLOW.to_string(),
            "1000000000".into(),
            "1".into(),
        ],
    )?;
    theirs_latency.until("ready")?;
    tokio::time::sleep(Duration::from_secs(1)).await;

    println!("accuracy: {clients} Java token clients (1.8.9) offering 3 x a global limit of {limit}/s for {seconds} s");
    println!("(token: the server's OK answers; entry: what SphU.entry admitted, fallbackToLocalWhenFail false)");
    println!("| server | counted | admitted per second | min | max | mean (x limit) |");
    println!("|---|---|---|---|---|---|");
    for mode in ["token", "entry"] {
        let a = accuracy(&cp, ours.local_addr(), limit, clients, seconds, mode)?;
        println!(
            "| sentinel-token-server (Redis) | {mode} | {} |",
            summary(&a, limit)
        );
        let b = accuracy(&cp, port(18741), limit, clients, seconds, mode)?;
        println!(
            "| Sentinel 1.8.9 token server | {mode} | {} |",
            summary(&b, limit)
        );
    }

    println!();
    println!("latency of a FLOW token request on loopback (Rust client, one request in flight per connection, 3 s each)");
    println!("| server | clients | p50 | p99 | requests |");
    println!("|---|---|---|---|---|");
    for clients in [1, 8] {
        for (name, addr) in [
            ("sentinel-token-server (Redis)", ours.local_addr()),
            ("Sentinel 1.8.9 token server", port(18742)),
        ] {
            // Warm the JIT of the Java side (and our lease) first.
            latency(addr, clients, Duration::from_secs(1)).await?;
            let (p50, p99, n) = latency(addr, clients, Duration::from_secs(3)).await?;
            println!("| {name} | {clients} | {p50:?} | {p99:?} | {n} |");
        }
    }
    server_runtime
        .spawn(async move {
            ours.shutdown().await;
            backend.shutdown().await;
        })
        .await?;
    server_runtime.shutdown_background();
    Ok(())
}
