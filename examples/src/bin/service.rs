//! An axum service guarded by `sentinel-tower`, with its rules hot-updated from a file (or
//! from etcd, built with the `etcd` feature and given `--etcd`), and Prometheus metrics at
//! `/metrics` (pass, block and error counts per resource, through the `metrics` facade).
//!
//! ```text
//! cargo run -p examples --features axum --bin service
//! curl -i localhost:3000/order/42
//! for i in $(seq 20); do curl -s -o /dev/null -w '%{http_code} ' localhost:3000/order/42; done
//! curl -s localhost:3000/metrics
//! ```
//!
//! Routes: `GET /order/{id}` (limited to 5 a second, one resource for every id: the matched
//! route names it), `GET /flaky` (fails one call in two with a 500; an error-ratio breaker
//! opens on it), `GET /metrics`. A caller may name itself in `x-caller`.

use axum::routing::get;
use examples::service_routes::{guarded_routes, serve, DEFAULT_RULES};
use metrics_exporter_prometheus::PrometheusBuilder;
use sentinel_core::datasource::{CombinedJson, DataSource};
use sentinel_core::{Sentinel, SentinelEvent};
use sentinel_datasource_file::FileSource;
use std::net::SocketAddr;
use std::path::PathBuf;

/// An axum service guarded by sentinel-tower, with Prometheus metrics.
#[derive(Debug, clap::Parser)]
struct Args {
    /// Where to listen.
    #[arg(long, default_value = "127.0.0.1:3000")]
    listen: SocketAddr,
    /// The rules file (a combined document; written with a default when missing).
    #[arg(long, default_value = "sentinel-quickstart/service-rules.json")]
    rules: PathBuf,
    /// Read the rules from this etcd endpoint instead (with --key).
    #[cfg(feature = "etcd")]
    #[arg(long)]
    etcd: Option<String>,
    /// The etcd key holding the combined rule document.
    #[cfg(feature = "etcd")]
    #[arg(long, default_value = "/sentinel/service-rules")]
    key: String,
}

fn main() -> std::process::ExitCode {
    examples::main(async |args: Args| {
        // The recorder goes in before the first entry: each resource registers its counters once.
        let prometheus = PrometheusBuilder::new().install_recorder()?;
        // Histograms (sentinel_rt_seconds) are summarised only when upkeep runs.
        let upkeep = prometheus.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(std::time::Duration::from_secs(5)).await;
                upkeep.run_upkeep();
            }
        });

        let sentinel = Sentinel::new();
        sentinel.add_listener(|event: &SentinelEvent| match event {
            SentinelEvent::RulesApplied { version, .. } => {
                println!(">> rules applied (v{version})")
            }
            SentinelEvent::RulesRejected { error, .. } => println!(">> rules REJECTED: {error}"),
            SentinelEvent::BreakerStateChanged {
                resource, from, to, ..
            } => println!(">> breaker on {resource}: {from} -> {to}"),
            _ => {}
        });
        let source = start_rules(&args, &sentinel).await?;

        let app = guarded_routes(&sentinel).route(
            "/metrics",
            get(move || std::future::ready(prometheus.render())),
        );

        let banner = format!("listening on http://{}", args.listen);
        serve(args.listen, app, &banner).await?;
        source.close().await;
        Ok(())
    })
}

/// Starts the rule source: etcd when asked, else the rules file.
async fn start_rules(
    args: &Args,
    sentinel: &Sentinel,
) -> Result<DataSource, Box<dyn std::error::Error>> {
    #[cfg(feature = "etcd")]
    if let Some(endpoint) = &args.etcd {
        use sentinel_datasource_etcd::{EtcdConfig, EtcdSource};
        let config = EtcdConfig::builder()
            .endpoints([endpoint.as_str()])
            .build()?;
        println!("rules from etcd {endpoint} key {}", args.key);
        let source = EtcdSource::key(config, args.key.clone());
        return Ok(DataSource::builder(source, CombinedJson::new())
            .name("service-rules")
            .start(sentinel)
            .await?);
    }
    if !args.rules.exists() {
        if let Some(dir) = args.rules.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&args.rules, DEFAULT_RULES)?;
    }
    println!(
        "rules from {} (edit it while the service runs)",
        args.rules.display()
    );
    Ok(
        DataSource::builder(FileSource::new(&args.rules)?, CombinedJson::new())
            .name("service-rules")
            .start(sentinel)
            .await?,
    )
}
