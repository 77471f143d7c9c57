//! Three processes share one 50 QPS limit on Redis, and print their admitted rates live.
//!
//! ```text
//! scripts/services.sh start redis-main
//! cargo run -p examples --features cluster --bin cluster -- --redis 127.0.0.1:16379
//! ```
//!
//! The program starts `--replicas` copies of itself (3 by default). Each installs the Redis
//! cluster backend, loads one global cluster rule (`thresholdType` 1, 50 per second, flowId
//! 50) on `GET:/order`, calls it `--rate` times a second (40: 120 offered in all), and prints
//! every second what it admitted and whether its cluster checks are live or degraded. The
//! parent prints the cluster's total for each second: 50, whatever the number of replicas.
//! Stop Redis meanwhile (`kill -STOP`) to see them degrade to 50 / 3 each and resume.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sentinel_cluster_redis::{ClusterStatus, RedisClusterBackend, RedisClusterConfig, RedisTarget};
use sentinel_core::flow::{ClusterFlowConfig, FlowRule};
use sentinel_core::Sentinel;

const RESOURCE: &str = "GET:/order";

/// Three processes share one 50 QPS limit on Redis.
#[derive(Debug, clap::Parser)]
struct Args {
    /// The Redis server, host:port.
    #[arg(long, default_value = "127.0.0.1:6379")]
    redis: String,
    /// How many replica processes to start.
    #[arg(long, default_value_t = 3)]
    replicas: u32,
    /// Calls per second each replica offers.
    #[arg(long, default_value_t = 40)]
    rate: u32,
    /// The shared limit, per second.
    #[arg(long, default_value_t = 50.0)]
    limit: f64,
    /// How long to run, in seconds.
    #[arg(long, default_value_t = 10)]
    secs: u64,
    /// The Redis key prefix (replicas with the same prefix and flowId share the limit).
    #[arg(long, default_value = "sentinel:cluster")]
    prefix: String,
    /// Run as one replica named so (the parent passes it).
    #[arg(long, hide = true)]
    child: Option<String>,
}

fn unix_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn main() -> std::process::ExitCode {
    examples::exit_on_error(run())
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args: Args = clap::Parser::parse();
    match &args.child {
        Some(name) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
            .block_on(replica(&args, name)),
        None => parent(&args),
    }
}

/// Starts the replicas and prints their lines, and each second's total.
fn parent(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let exe = std::env::current_exe()?;
    let (tx, rx) = mpsc::channel::<String>();
    let mut children = Vec::new();
    for i in 1..=args.replicas {
        let mut child = Command::new(&exe)
            .args(["--redis", &args.redis, "--child", &format!("replica-{i}")])
            .args([
                "--rate",
                &args.rate.to_string(),
                "--secs",
                &args.secs.to_string(),
            ])
            .args(["--limit", &args.limit.to_string(), "--prefix", &args.prefix])
            .stdout(Stdio::piped())
            .spawn()?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        children.push(child);
    }
    drop(tx);
    let mut per_second: BTreeMap<u64, (u32, u64)> = BTreeMap::new();
    for line in rx {
        println!("{line}");
        // `<name> <unix second> admitted <n>/s ...`
        let words: Vec<&str> = line.split_whitespace().collect();
        if let [_, second, "admitted", n, ..] = words.as_slice() {
            let (Ok(second), Ok(n)) = (
                second.parse::<u64>(),
                n.trim_end_matches("/s").parse::<u64>(),
            ) else {
                continue;
            };
            let entry = per_second.entry(second).or_default();
            entry.0 += 1;
            entry.1 += n;
            if entry.0 == args.replicas {
                println!(
                    "== cluster, second {second}: {} admitted (limit {})",
                    entry.1, args.limit
                );
            }
        }
    }
    for mut child in children {
        child.wait()?;
    }
    Ok(())
}

async fn replica(args: &Args, name: &str) -> Result<(), Box<dyn std::error::Error>> {
    let config = RedisClusterConfig::builder(RedisTarget::Server(args.redis.clone()))
        .replica_id(name)
        .build()?;
    let backend = RedisClusterBackend::start(config)?;
    let sentinel = Sentinel::builder()
        .cluster_backend(Arc::new(backend.clone()))
        .build();
    let rule = FlowRule::qps(RESOURCE, args.limit).cluster(ClusterFlowConfig::new(50).global(true));
    sentinel.flow_rules().load_rules(vec![rule])?;
    let mut tick = tokio::time::interval(Duration::from_secs(1) / args.rate.max(1));
    let mut second = unix_s();
    let mut admitted = 0u64;
    let end = tokio::time::Instant::now() + Duration::from_secs(args.secs);
    while tokio::time::Instant::now() < end {
        tick.tick().await;
        if unix_s() != second {
            let status = match backend.status() {
                ClusterStatus::Live => "live",
                ClusterStatus::Degraded { .. } => "degraded to local",
                _ => "connecting",
            };
            println!("{name} {second} admitted {admitted}/s (cluster checks {status})");
            second = unix_s();
            admitted = 0;
        }
        if sentinel.entry(RESOURCE).enter().is_ok() {
            admitted += 1;
        }
    }
    backend.shutdown().await;
    Ok(())
}
