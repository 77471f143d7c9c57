//! `sentinel-token-server`: a token server for Java services in Sentinel's token-client mode,
//! deciding on the Redis budget that Rust replicas of `sentinel-cluster-redis` share.
//!
//! ```text
//! sentinel-token-server --redis 127.0.0.1:6379 --rules /etc/sentinel/cluster-flow-rules.json
//! sentinel-token-server --redis-cluster 10.0.0.1:6379,10.0.0.2:6379 --rules rules.json
//! sentinel-token-server --redis-sentinel 10.0.0.1:26379 --redis-master budget --rules rules.json
//! ```
//!
//! The rules file holds Sentinel flow rules (JSON, as the dashboard writes them); its
//! `clusterMode` rules are served and followed as the file changes. Prints
//! `listening on <addr>` once serving; SIGINT or SIGTERM stop it gracefully.
//!
//! With `--command-port` (or `--dashboard`), a Sentinel command center (read-only,
//! loopback unless `--command-bind` says otherwise) answers the dashboard's cluster pages
//! (`getClusterMode`, `cluster/server/info`...), and with `--dashboard` the server sends
//! its heartbeat there as app `--app`; it prints `commands on <addr>`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use sentinel_cluster_redis::{RedisClusterBackend, RedisClusterConfig, RedisTarget};
use sentinel_core::datasource::{DataSource, FlowJson};
use sentinel_core::Sentinel;
use sentinel_datasource_file::FileSource;
use sentinel_token_server::{RedisTokenService, TokenServer, DEFAULT_PORT};
use sentinel_transport::{Transport, TransportConfig};

/// A token server for Sentinel 1.8's cluster protocol, with its budget in Redis.
#[derive(Debug, Parser)]
#[command(name = "sentinel-token-server", version)]
struct Args {
    /// Where token clients connect (loopback by default).
    #[arg(long, default_value_t = SocketAddr::from(([127, 0, 0, 1], DEFAULT_PORT)))]
    bind: SocketAddr,
    /// Where the health endpoint listens (`GET /health`); none by default.
    #[arg(long)]
    health: Option<SocketAddr>,
    /// The Redis that keeps the budget: `host:port` or a `redis://` URL. Or one of
    /// `--redis-cluster`, `--redis-sentinel`.
    #[arg(long, env = "SENTINEL_TOKEN_SERVER_REDIS", required_unless_present_any = ["redis_cluster", "redis_sentinel"], conflicts_with_all = ["redis_cluster", "redis_sentinel"])]
    redis: Option<String>,
    /// A Redis Cluster that keeps the budget, reached through any of these nodes
    /// (`host:port`, comma-separated or repeated).
    #[arg(long, value_delimiter = ',', conflicts_with = "redis_sentinel")]
    redis_cluster: Vec<String>,
    /// Redis Sentinel: the sentinels (`host:port`, comma-separated or repeated) that name
    /// the master `--redis-master`; a failover is followed.
    #[arg(long, value_delimiter = ',', requires = "redis_master")]
    redis_sentinel: Vec<String>,
    /// The master's name, with `--redis-sentinel`.
    #[arg(long, requires = "redis_sentinel")]
    redis_master: Option<String>,
    /// The key prefix shared with the Rust replicas (sentinel-cluster-redis's `prefix`).
    #[arg(long, default_value = "sentinel:cluster")]
    prefix: String,
    /// The flow rules file (Sentinel JSON); its cluster rules are served.
    #[arg(long)]
    rules: PathBuf,
    /// Close a connection silent this many seconds (Sentinel's idleSeconds).
    #[arg(long, default_value_t = 600)]
    idle_timeout_secs: u64,
    /// A Sentinel dashboard (`host:port`) to send the heartbeat to; repeatable. Starts the
    /// command center.
    #[arg(long)]
    dashboard: Vec<String>,
    /// The command center's port (the next free one when busy; 0: any). Starts the command
    /// center; 8719 when only `--dashboard` is given.
    #[arg(long)]
    command_port: Option<u16>,
    /// The address the command center binds (loopback by default: the protocol has no
    /// authentication).
    #[arg(long, default_value = "127.0.0.1")]
    command_bind: std::net::IpAddr,
    /// The app name the dashboard lists this server under.
    #[arg(long, default_value = "sentinel-token-server")]
    app: String,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("sentinel-token-server: no runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("sentinel-token-server: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let target = match (args.redis, args.redis_master) {
        (Some(server), _) => RedisTarget::Server(server),
        (None, Some(master)) => RedisTarget::Sentinel {
            sentinels: args.redis_sentinel,
            master,
        },
        (None, None) => RedisTarget::Cluster(args.redis_cluster),
    };
    let config = RedisClusterConfig::builder(target)
        .prefix(args.prefix)
        .build()?;
    let backend = RedisClusterBackend::start(config)?;
    let service = Arc::new(RedisTokenService::new(backend.clone()));
    let rules = Sentinel::builder().build();
    service.follow(&rules);
    let source = DataSource::builder(FileSource::new(&args.rules)?, FlowJson::new())
        .name("token-server-rules")
        .without_snapshot()
        .start(&rules)
        .await?;
    let mut builder = TokenServer::builder()
        .bind(args.bind)
        .idle_timeout(Duration::from_secs(args.idle_timeout_secs));
    if let Some(health) = args.health {
        builder = builder.health_bind(health);
    }
    let server = builder.start(service).await?;
    println!("listening on {}", server.local_addr());
    if let Some(health) = server.health_addr() {
        println!("health on {health}");
    }
    let transport = if args.command_port.is_some() || !args.dashboard.is_empty() {
        let mut config = TransportConfig::builder(args.app)
            .bind_ip(args.command_bind)
            .port(args.command_port.unwrap_or(TransportConfig::DEFAULT_PORT));
        for dashboard in args.dashboard {
            config = config.dashboard(dashboard);
        }
        let config = server.dashboard_commands().register(config).build()?;
        let transport = Transport::start(rules.clone(), config).await?;
        println!("commands on {}", transport.local_addr());
        Some(transport)
    } else {
        None
    };
    shutdown_signal().await;
    tracing::info!("stopping");
    if let Some(transport) = transport {
        transport.shutdown().await;
    }
    server.shutdown().await;
    source.close().await;
    backend.shutdown().await;
    Ok(())
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
