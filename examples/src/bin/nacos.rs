//! Rules from Nacos, changed live: the Sentinel dashboard's dataIds of one app.
//!
//! ```text
//! scripts/services.sh start nacos-main
//! cargo run -p examples --features nacos --bin nacos -- --server 127.0.0.1:18848 --app orders
//! # in another shell, publish a flow rule as the dashboard does:
//! curl -X POST 'http://127.0.0.1:18848/nacos/v1/cs/configs' \
//!   -d dataId=orders-flow-rules -d group=SENTINEL_GROUP -d type=json \
//!   --data-urlencode 'content=[{"resource":"GET:/order","count":5}]'
//! ```
//!
//! The program reads `{app}-flow-rules`, `{app}-degrade-rules`, `{app}-system-rules` and
//! `{app}-authority-rules` in `SENTINEL_GROUP` as one source, guards a simulated
//! `GET:/order` called 50 times a second, and prints once a second the passes and blocks,
//! the active rules, and any rejected payload. `--help` lists the options (servers,
//! namespace, credentials, the load).

use sentinel_core::datasource::{
    AuthorityJson, DataSource, DegradeJson, FlowJson, ParamFlowJson, ReadableDataSource, SystemJson,
};
use sentinel_core::Sentinel;
use sentinel_datasource_nacos::{dashboard_keys, NacosConfig, NacosSource};

const RESOURCE: &str = "GET:/order";

/// Rules from Nacos, changed live.
#[derive(Debug, clap::Parser)]
struct Args {
    /// Nacos server addresses, host:port[,...].
    #[arg(long, default_value = "127.0.0.1:8848")]
    server: String,
    /// The application whose dashboard dataIds hold the rules.
    #[arg(long, default_value = "orders")]
    app: String,
    /// The namespace id (default: public).
    #[arg(long)]
    namespace: Option<String>,
    #[command(flatten)]
    load: examples::Load,
}

fn main() -> std::process::ExitCode {
    examples::main(async |args: Args| {
        let mut config = NacosConfig::builder().servers([args.server.as_str()]);
        if let Some(namespace) = &args.namespace {
            config = config.namespace(namespace.as_str());
        }
        if let Some((user, password)) = examples::Login::from_env()?.pair()? {
            config = config.credentials(user, password);
        }
        let config = config.build()?;

        let sentinel = Sentinel::new();
        let backend = NacosSource::dashboard(config, &args.app)?;
        println!("watching {}", backend.describe());
        let [_, degrade, system, authority, param] = dashboard_keys(&args.app);
        let source = DataSource::builder(backend, FlowJson::new())
            .converter_for(degrade.entry_key(), DegradeJson::new())
            .converter_for(system.entry_key(), SystemJson::new())
            .converter_for(authority.entry_key(), AuthorityJson::new())
            .converter_for(param.entry_key(), ParamFlowJson::new())
            .name("nacos")
            .start(&sentinel)
            .await?;
        println!("guarding {RESOURCE} at {} calls/s", args.load.rate);
        examples::live(&sentinel, &source, RESOURCE, &args.load).await;
        source.close().await;
        Ok(())
    })
}
