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
//! Options: `--server HOST:PORT` (default `127.0.0.1:6379`), or `--sentinel HOST:PORT[,...]
//! --master NAME` for a Redis Sentinel deployment; `--key KEY` (default `rules:flow`);
//! `--channel CHANNEL` (default `<key>:changed`); `--mode notify|payload|keyspace` (default
//! `notify`); `--combined` (the key holds a combined document `{"flow":[...],...}`);
//! `--user NAME` and `--password PW` (`--password` alone: the default user's password);
//! `--db N`; `--rate N` (calls per second, default 50); `--seconds N` (stop after N seconds;
//! default: run until Ctrl-C).

use sentinel_core::datasource::{CombinedJson, DataSource, FlowJson, ReadableDataSource};
use sentinel_core::Sentinel;
use sentinel_datasource_redis::{ChangeMode, RedisConfig, RedisSource};

const RESOURCE: &str = "GET:/order";

#[derive(Debug, Default)]
struct Args {
    server: Option<String>,
    sentinel: Option<(String, String)>,
    key: String,
    channel: Option<String>,
    mode: String,
    combined: bool,
    user: Option<String>,
    password: Option<String>,
    db: i64,
    rate: u32,
    seconds: Option<u64>,
}

const USAGE: &str = "usage: redis [--server HOST:PORT | --sentinel HOST:PORT[,...] --master NAME] \
                     [--key KEY] [--channel CHANNEL] [--mode notify|payload|keyspace] [--combined] \
                     [--user NAME] [--password PW] [--db N] [--rate N] [--seconds N]";

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        key: "rules:flow".to_owned(),
        mode: "notify".to_owned(),
        rate: 50,
        ..Args::default()
    };
    let (mut sentinels, mut master) = (None, None);
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--server" => args.server = Some(value()?),
            "--sentinel" => sentinels = Some(value()?),
            "--master" => master = Some(value()?),
            "--key" => args.key = value()?,
            "--channel" => args.channel = Some(value()?),
            "--mode" => args.mode = value()?,
            "--combined" => args.combined = true,
            "--user" => args.user = Some(value()?),
            "--password" => args.password = Some(value()?),
            "--db" => args.db = value()?.parse().map_err(|e| format!("--db: {e}"))?,
            "--rate" => args.rate = value()?.parse().map_err(|e| format!("--rate: {e}"))?,
            "--seconds" => {
                args.seconds = Some(value()?.parse().map_err(|e| format!("--seconds: {e}"))?)
            }
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    args.sentinel = match (sentinels, master) {
        (Some(s), Some(m)) => Some((s, m)),
        (None, None) => None,
        _ => return Err("--sentinel and --master go together".to_owned()),
    };
    if args.user.is_some() && args.password.is_none() {
        return Err("--user needs --password".to_owned());
    }
    Ok(args)
}

fn config(args: &Args) -> Result<RedisConfig, Box<dyn std::error::Error>> {
    let mut config = RedisConfig::builder().db(args.db);
    config = match (&args.sentinel, &args.server) {
        (Some((sentinels, master)), _) => config.sentinel([sentinels.as_str()], master.as_str()),
        (None, Some(server)) => config.server(server.as_str()),
        (None, None) => config.server("127.0.0.1:6379"),
    };
    config = match (&args.user, &args.password) {
        (Some(user), Some(password)) => config.credentials(user.as_str(), password.as_str()),
        (None, Some(password)) => config.password(password.as_str()),
        _ => config,
    };
    Ok(config.build()?)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            std::process::exit(2);
        }
    };
    let config = config(&args)?;
    let channel = args
        .channel
        .clone()
        .unwrap_or_else(|| format!("{}:changed", args.key));
    let mode = match args.mode.as_str() {
        "notify" => ChangeMode::Notify(channel),
        "payload" => ChangeMode::Payload(channel),
        "keyspace" => ChangeMode::Keyspace,
        other => {
            eprintln!("unknown --mode {other}\n{USAGE}");
            std::process::exit(2);
        }
    };

    let sentinel = Sentinel::new();
    let backend = RedisSource::new(config, args.key.clone(), mode);
    println!("watching {}", backend.describe());
    let builder = if args.combined {
        DataSource::builder(backend, CombinedJson::new())
    } else {
        DataSource::builder(backend, FlowJson::new())
    };
    let source = builder.name("redis").start(&sentinel).await?;
    println!("guarding {RESOURCE} at {} calls/s", args.rate);
    examples::live(&sentinel, &source, RESOURCE, args.rate, args.seconds).await;
    source.close().await;
    Ok(())
}
