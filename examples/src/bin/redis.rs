//! Rules from Redis, changed live.
//!
//! ```text
//! scripts/services.sh start redis-main
//! cargo run -p examples --features redis --bin redis -- --server 127.0.0.1:16379 --key rules:flow
//! # in another shell: store the rules, then tell the sources (any message will do in the
//! # default notify mode: the source reads the key again)
//! redis-cli -p 16379 SET rules:flow '[{"resource":"GET:/order","count":5}]'
//! redis-cli -p 16379 PUBLISH rules:flow:changed ''
//! ```
//!
//! The program watches the key, guards a simulated `GET:/order` called 50 times a second, and
//! prints once a second the passes and blocks, the active rules, and any rejected payload.
//!
//! `--help` lists the options: a server or Redis Sentinel deployment, the key and channel,
//! the change mode, credentials, the database, the load.

use sentinel_core::datasource::ReadableDataSource;
use sentinel_core::Sentinel;
use sentinel_datasource_redis::{ChangeMode, RedisConfig, RedisSource};

const RESOURCE: &str = "GET:/order";

/// Rules from Redis, changed live.
#[derive(Debug, clap::Parser)]
struct Args {
    /// One Redis server, host:port.
    #[arg(long, default_value = "127.0.0.1:6379", conflicts_with = "sentinel")]
    server: String,
    /// Redis Sentinel addresses, host:port[,...] (with --master).
    #[arg(long, requires = "master")]
    sentinel: Option<String>,
    /// The master name the sentinels watch.
    #[arg(long, requires = "sentinel")]
    master: Option<String>,
    /// The key that holds the rules.
    #[arg(long, default_value = "rules:flow")]
    key: String,
    /// The channel (default: `<key>:changed`).
    #[arg(long)]
    channel: Option<String>,
    /// How the source learns of a change.
    #[arg(long, value_enum, default_value_t = Mode::Notify)]
    mode: Mode,
    /// The key holds a combined document `{"flow":[...],...}`.
    #[arg(long)]
    combined: bool,
    /// The database index.
    #[arg(long, default_value_t = 0)]
    db: i64,
    #[command(flatten)]
    load: examples::Load,
}

/// `ChangeMode` without its channel.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Mode {
    Notify,
    Payload,
    Keyspace,
}

fn config(args: &Args) -> Result<RedisConfig, Box<dyn std::error::Error>> {
    let mut config = RedisConfig::builder().db(args.db);
    config = match (&args.sentinel, &args.master) {
        (Some(sentinels), Some(master)) => config.sentinel([sentinels.as_str()], master.as_str()),
        _ => config.server(args.server.as_str()),
    };
    // SENTINEL_RULES_USER and SENTINEL_RULES_PASSWORD; a password alone is the default user's.
    let login = examples::Login::from_env()?;
    config = match (login.user(), login.password()) {
        (Some(user), Some(password)) => config.credentials(user, password),
        (None, Some(password)) => config.password(password),
        _ => config,
    };
    Ok(config.build()?)
}

fn main() -> std::process::ExitCode {
    examples::main(async |args: Args| {
        let config = config(&args)?;
        let channel = args
            .channel
            .clone()
            .unwrap_or_else(|| format!("{}:changed", args.key));
        let mode = match args.mode {
            Mode::Notify => ChangeMode::Notify(channel),
            Mode::Payload => ChangeMode::Payload(channel),
            Mode::Keyspace => ChangeMode::Keyspace,
        };

        let sentinel = Sentinel::new();
        let backend = RedisSource::new(config, args.key.clone(), mode);
        println!("watching {}", backend.describe());
        let builder = examples::rules_source(backend, args.combined);
        let source = builder.name("redis").start(&sentinel).await?;
        println!("guarding {RESOURCE} at {} calls/s", args.load.rate);
        examples::live(&sentinel, &source, RESOURCE, &args.load).await;
        source.close().await;
        Ok(())
    })
}
