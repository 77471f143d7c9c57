//! Rules from etcd, changed live.
//!
//! ```text
//! scripts/services.sh start etcd-main
//! cargo run -p examples --features etcd --bin etcd -- --endpoints http://127.0.0.1:23790 --key /sentinel/rules/flow
//! # in another shell:
//! etcdctl --endpoints http://127.0.0.1:23790 put /sentinel/rules/flow '[{"resource":"GET:/order","count":5}]'
//! ```
//!
//! The program watches the key, guards a simulated `GET:/order` called 50 times a second, and
//! prints once a second the passes and blocks, the active rules, and any rejected payload.
//!
//! Options: `--endpoints URL[,URL...]` (default `http://127.0.0.1:2379`), `--key KEY` (default
//! `/sentinel/rules/flow`), `--combined` (the key holds a combined document
//! `{"flow":[...],"degrade":[...]}` instead of a flow list), `--user NAME --password PW`,
//! `--rate N` (calls per second, default 50), `--seconds N` (stop after N seconds; default:
//! run until Ctrl-C).

use sentinel_core::datasource::{CombinedJson, DataSource, FlowJson};
use sentinel_core::Sentinel;
use sentinel_datasource_etcd::{EtcdConfig, EtcdSource};

const RESOURCE: &str = "GET:/order";

#[derive(Debug)]
struct Args {
    endpoints: String,
    key: String,
    combined: bool,
    user: Option<(String, String)>,
    rate: u32,
    seconds: Option<u64>,
}

const USAGE: &str = "usage: etcd [--endpoints URL[,URL...]] [--key KEY] [--combined] \
                     [--user NAME --password PW] [--rate N] [--seconds N]";

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        endpoints: "http://127.0.0.1:2379".to_owned(),
        key: "/sentinel/rules/flow".to_owned(),
        combined: false,
        user: None,
        rate: 50,
        seconds: None,
    };
    let (mut user, mut password) = (None, None);
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--endpoints" => args.endpoints = value()?,
            "--key" => args.key = value()?,
            "--combined" => args.combined = true,
            "--user" => user = Some(value()?),
            "--password" => password = Some(value()?),
            "--rate" => args.rate = value()?.parse().map_err(|e| format!("--rate: {e}"))?,
            "--seconds" => {
                args.seconds = Some(value()?.parse().map_err(|e| format!("--seconds: {e}"))?)
            }
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    args.user = match (user, password) {
        (Some(u), Some(p)) => Some((u, p)),
        (None, None) => None,
        _ => return Err("--user and --password go together".to_owned()),
    };
    Ok(args)
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

    let mut config = EtcdConfig::builder().endpoints([args.endpoints.as_str()]);
    if let Some((user, password)) = &args.user {
        config = config.credentials(user.clone(), password.clone());
    }
    let config = config.build()?;

    let sentinel = Sentinel::new();
    let backend = EtcdSource::key(config, args.key.clone());
    let builder = if args.combined {
        DataSource::builder(backend, CombinedJson::new())
    } else {
        DataSource::builder(backend, FlowJson::new())
    };
    let source = builder.name("etcd").start(&sentinel).await?;
    println!(
        "watching {} at {} ({}); guarding {RESOURCE} at {} calls/s",
        args.key,
        args.endpoints,
        if args.combined {
            "combined document"
        } else {
            "flow rules"
        },
        args.rate
    );

    examples::live(&sentinel, &source, RESOURCE, args.rate, args.seconds).await;
    source.close().await;
    Ok(())
}
