//! The axum service with the sentinel console at `/console`, its rules in etcd:
//!
//! ```text
//! scripts/services.sh start etcd-main
//! cargo run -p examples --features console --bin console -- --etcd http://127.0.0.1:23790 --edit-token s3cret
//! open http://127.0.0.1:3000/console
//! for i in $(seq 200); do curl -s -o /dev/null localhost:3000/order/$i; curl -s -o /dev/null localhost:3000/flaky; done
//! ```
//!
//! Editing is on only with `--edit-token` (or `SENTINEL_CONSOLE_TOKEN`): the page's Token
//! field must hold it.
//!
//! Built with `--features console,transport`, the service also appears in the Sentinel
//! dashboard (`--dashboard 127.0.0.1:8080`; its command center on `--command-port`, 8719 or
//! the next free one), read-only: the rules are edited here, and the page's "Dashboard
//! commands refused" card shows every edit the dashboard sent, which the stock dashboard
//! shows as saved for degrade, system and authority rules.

use std::net::SocketAddr;

use examples::console_service::{console_service, ConsoleServiceConfig};

/// The axum service with the sentinel console mounted.
#[derive(Debug, clap::Parser)]
struct Args {
    /// Where to listen (the console is at /console).
    #[arg(long, default_value = "127.0.0.1:3000")]
    listen: SocketAddr,
    /// The etcd endpoint.
    #[arg(long, default_value = "http://127.0.0.1:23790")]
    etcd: String,
    /// The etcd key holding the combined rule document (written with defaults if missing).
    #[arg(long, default_value = "/sentinel/console-service-rules")]
    key: String,
    /// Turns editing on for requests that carry this bearer token.
    #[arg(long)]
    edit_token: Option<String>,
    /// The first port tried for the dashboard's command center (the next ones when busy).
    #[cfg(feature = "transport")]
    #[arg(long, default_value_t = sentinel_transport::TransportConfig::DEFAULT_PORT)]
    command_port: u16,
    /// A Sentinel dashboard to register with (`host:port`); repeat for several.
    #[cfg(feature = "transport")]
    #[arg(long)]
    dashboard: Vec<String>,
    /// The application name the dashboard lists.
    #[cfg(feature = "transport")]
    #[arg(long, default_value = "rust-console-service")]
    app: String,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    examples::init_tracing("info");
    let args = <Args as clap::Parser>::parse();
    let service = console_service(&ConsoleServiceConfig {
        etcd: args.etcd.clone(),
        key: args.key.clone(),
        edit_token: args
            .edit_token
            .clone()
            .or_else(|| std::env::var("SENTINEL_CONSOLE_TOKEN").ok()),
        #[cfg(feature = "transport")]
        transport: Some({
            let mut transport = sentinel_transport::TransportConfig::builder(args.app.clone())
                .port(args.command_port);
            for dashboard in &args.dashboard {
                transport = transport.dashboard(dashboard.clone());
            }
            transport.build()?
        }),
    })
    .await?;
    println!("rules from etcd {} key {}", args.etcd, args.key);
    #[cfg(feature = "transport")]
    if let Some(transport) = &service.transport {
        println!(
            "command center on 127.0.0.1:{} (read-only; heartbeat to {:?})",
            transport.port(),
            args.dashboard
        );
    }
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    println!("console on http://{}/console", args.listen);
    // Ctrl-C ends the console's event streams too: an open page does not hold the exit up.
    let shutdown = service.console.shutdown_signal(async {
        let _ = tokio::signal::ctrl_c().await;
    });
    axum::serve(listener, service.app)
        .with_graceful_shutdown(shutdown)
        .await?;
    service.source.close().await;
    #[cfg(feature = "transport")]
    if let Some(transport) = service.transport {
        transport.shutdown().await;
    }
    Ok(())
}
