//! Rules from a NATS JetStream key-value bucket, changed live.
//!
//! ```text
//! scripts/services.sh start nats-main
//! cargo run -p examples --features nats --bin nats -- --server 127.0.0.1:14222 watch
//! # in another shell (the `nats` CLI is not packaged here; this subcommand puts like `nats kv put`):
//! cargo run -p examples --features nats --bin nats -- --server 127.0.0.1:14222 \
//!   put '[{"resource":"GET:/order","count":5}]'
//! ```
//!
//! `watch` reads the key (the bucket is created when missing), guards a simulated
//! `GET:/order` called 50 times a second, and prints once a second the passes and blocks,
//! the active rules and any rejected payload. `put` stores a payload, validated first, with
//! a compare-and-set on the revision it read. `--help` lists the options.

use sentinel_core::datasource::{CombinedJson, Converter, FlowJson, ReadableDataSource};
use sentinel_core::Sentinel;
use sentinel_datasource_nats::{NatsConfig, NatsRuleWriter, NatsSource};

const RESOURCE: &str = "GET:/order";

/// Rules from a NATS JetStream key-value bucket, changed live.
#[derive(Debug, clap::Parser)]
struct Args {
    /// NATS servers, host:port[,...].
    #[arg(long, default_value = "127.0.0.1:4222")]
    server: String,
    /// The bucket.
    #[arg(long, default_value = "sentinel")]
    bucket: String,
    /// The key (or, for `watch`, a wildcard such as `rules.>`).
    #[arg(long, default_value = "rules.flow")]
    key: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Watch the key and guard a simulated load with its rules.
    Watch {
        /// The key holds a combined document `{"flow":[...],...}`.
        #[arg(long)]
        combined: bool,
        #[command(flatten)]
        load: examples::Load,
    },
    /// Store a payload (Sentinel flow rule JSON, or a combined document) under the key.
    Put {
        /// The payload.
        payload: String,
    },
}

fn main() -> std::process::ExitCode {
    examples::main(async |args: Args| {
        let servers: Vec<String> = args
            .server
            .split(',')
            .map(|s| format!("nats://{}", s.trim()))
            .collect();
        let mut config = NatsConfig::builder().servers(servers);
        if let Some((user, password)) = examples::Login::from_env()?.pair()? {
            config = config.credentials(user, password);
        }
        let config = config.build()?;
        let writer = NatsRuleWriter::create_bucket(config.clone(), &args.bucket, 5).await?;
        match args.command {
            Command::Put { payload } => {
                // Read as the sources read it: a combined document or a flow list.
                let rules = if payload.trim_start().starts_with('{') {
                    CombinedJson::new().convert(payload.as_bytes())?
                } else {
                    FlowJson::new().convert(payload.as_bytes())?
                };
                let seen = writer.revision(&args.key).await?.unwrap_or(0);
                let revision = writer.put_rules_if(&args.key, &rules, seen).await?;
                println!("stored {} at revision {revision}", args.key);
            }
            Command::Watch { combined, load } => {
                let backend = if args.key.contains(['*', '>']) {
                    NatsSource::wildcard(config, &args.bucket, &args.key)
                } else {
                    NatsSource::key(config, &args.bucket, &args.key)
                };
                println!("watching {}", backend.describe());
                let builder = examples::rules_source(backend, combined);
                let sentinel = Sentinel::new();
                let source = builder.name("nats").start(&sentinel).await?;
                println!("guarding {RESOURCE} at {} calls/s", load.rate);
                examples::live(&sentinel, &source, RESOURCE, &load).await;
                source.close().await;
            }
        }
        Ok(())
    })
}
