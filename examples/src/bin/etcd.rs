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
//! `--help` lists the options: the endpoints, the key, a combined document instead of a flow
//! list, credentials, the load.

use sentinel_core::Sentinel;
use sentinel_datasource_etcd::{EtcdConfig, EtcdSource};

const RESOURCE: &str = "GET:/order";

/// Rules from etcd, changed live.
#[derive(Debug, clap::Parser)]
struct Args {
    /// etcd endpoints, comma-separated.
    #[arg(long, default_value = "http://127.0.0.1:2379")]
    endpoints: String,
    /// The key that holds the rules.
    #[arg(long, default_value = "/sentinel/rules/flow")]
    key: String,
    /// The key holds a combined document `{"flow":[...],"degrade":[...]}`.
    #[arg(long)]
    combined: bool,
    #[command(flatten)]
    load: examples::Load,
}

fn main() -> std::process::ExitCode {
    examples::main(async |args: Args| {
        let mut config = EtcdConfig::builder().endpoints([args.endpoints.as_str()]);
        if let Some((user, password)) = examples::Login::from_env()?.pair()? {
            config = config.credentials(user, password);
        }
        let config = config.build()?;

        let sentinel = Sentinel::new();
        let backend = EtcdSource::key(config, args.key.clone());
        let builder = examples::rules_source(backend, args.combined);
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
            args.load.rate
        );

        examples::live(&sentinel, &source, RESOURCE, &args.load).await;
        source.close().await;
        Ok(())
    })
}
