//! An axum service that appears in the Sentinel dashboard: `sentinel-tower` guards its
//! routes, and `sentinel-transport` registers it with the dashboard (heartbeat) and serves
//! the dashboard's commands (live metrics, resources, rules).
//!
//! ```text
//! # a dashboard (Sentinel 1.8.x): java -Dserver.port=8080 -jar sentinel-dashboard-1.8.9.jar
//! cargo run -p examples --features transport --bin transport -- --dashboard 127.0.0.1:8080
//! for i in $(seq 20); do curl -s -o /dev/null -w '%{http_code} ' localhost:3000/order/42; done
//! ```
//!
//! The dashboard lists the app `rust-order-service`; its real-time monitoring page shows
//! `GET:/order/{id}`, and its flow rule page the rule. Read-only by default. With
//! `--features transport,etcd` and `--etcd http://127.0.0.1:2379`, flow rules come from the
//! etcd key `--key` and the dashboard's flow rule edits are written to that key (every
//! instance reading it applies them); `--memory-only-edits` instead lets edits change this
//! process's memory alone, as Java does by default.

use std::net::SocketAddr;

use sentinel_core::flow::FlowRule;
use sentinel_core::Sentinel;
use sentinel_transport::{Access, Transport, TransportConfig};

use examples::service_routes::{guarded_routes, serve};

/// An axum service with the Sentinel dashboard transport.
#[derive(Debug, clap::Parser)]
struct Args {
    /// Where the service listens.
    #[arg(long, default_value = "127.0.0.1:3000")]
    listen: SocketAddr,
    /// A dashboard to register with (`host:port`, `http://...`); repeat for several.
    #[arg(long)]
    dashboard: Vec<String>,
    /// The first command-center port tried (the next ones when busy).
    #[arg(long, default_value_t = TransportConfig::DEFAULT_PORT)]
    command_port: u16,
    /// The application name the dashboard lists.
    #[arg(long, default_value = "rust-order-service")]
    app: String,
    /// Let the dashboard's edits change this process's rules in memory only.
    #[arg(long)]
    memory_only_edits: bool,
    /// Read flow rules from this etcd endpoint, and write the dashboard's edits there.
    #[cfg(feature = "etcd")]
    #[arg(long)]
    etcd: Option<String>,
    /// The etcd key holding the flow rules (Sentinel JSON).
    #[cfg(feature = "etcd")]
    #[arg(long, default_value = "/sentinel/rust-order-service/flow")]
    key: String,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    examples::init_tracing("info");
    let args = <Args as clap::Parser>::parse();
    let sentinel = Sentinel::new();
    sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps("GET:/order/{id}", 5.0)])?;

    let mut config = TransportConfig::builder(args.app.clone()).port(args.command_port);
    for dashboard in &args.dashboard {
        config = config.dashboard(dashboard.clone());
    }
    if args.memory_only_edits {
        config = config.access(Access::ReadWrite).memory_only_edits(true);
    }
    #[cfg(feature = "etcd")]
    let _source = match &args.etcd {
        Some(endpoint) => {
            use sentinel_core::datasource::{DataSource, FlowJson};
            use sentinel_core::RuleFamily;
            use sentinel_datasource_etcd::{EtcdConfig, EtcdRuleWriter, EtcdSource};
            let etcd = || EtcdConfig::builder().endpoints([endpoint.as_str()]).build();
            let source =
                DataSource::builder(EtcdSource::key(etcd()?, args.key.clone()), FlowJson::new())
                    .name("flow-rules")
                    .start(&sentinel)
                    .await?;
            let writer = EtcdRuleWriter::connect(etcd()?).await?.at(args.key.clone());
            println!(
                "flow rules from etcd {endpoint} key {}; dashboard edits go there",
                args.key
            );
            config = config
                .access(Access::ReadWrite)
                .rule_store(RuleFamily::Flow, std::sync::Arc::new(writer));
            Some(source)
        }
        None => None,
    };
    let transport = Transport::start(sentinel.clone(), config.build()?).await?;
    println!(
        "command center on 127.0.0.1:{} (heartbeat to {:?})",
        transport.port(),
        args.dashboard
    );

    let app = guarded_routes(&sentinel);
    let banner = format!("listening on http://{}", args.listen);
    serve(args.listen, app, &banner).await?;
    transport.shutdown().await;
    Ok(())
}
