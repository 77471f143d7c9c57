//! Rules from ZooKeeper, changed live.
//!
//! ```text
//! scripts/services.sh start zookeeper
//! cargo run -p examples --features zookeeper --bin zookeeper -- --server 127.0.0.1:12181 \
//!   --path /sentinel_rule_config/orders/flow
//! # in another shell (validated, compare-and-set on the znode's mzxid):
//! echo '[{"resource":"GET:/order","count":5}]' > flow.json
//! cargo run -p sentinel-rules -- push flow.json --family flow \
//!   --to zk://127.0.0.1:12181/sentinel_rule_config/orders/flow
//! ```
//!
//! The program watches the znode (Sentinel's `ZookeeperDataSource` layout: one znode per
//! rule family), or with `--children` every child of it as one set, guards a simulated
//! `GET:/order` called 50 times a second, and prints once a second the passes and blocks,
//! the active rules, and any rejected payload. A digest login (`addauth digest`) comes from
//! `SENTINEL_RULES_USER` and `SENTINEL_RULES_PASSWORD`.
//!
//! `--help` lists the options: the servers, the znode, its children, a chroot, a combined
//! document instead of a flow list, the load.

use sentinel_core::datasource::ReadableDataSource;
use sentinel_core::Sentinel;
use sentinel_datasource_zookeeper::{ZooKeeperConfig, ZooKeeperSource};

const RESOURCE: &str = "GET:/order";

/// Rules from ZooKeeper, changed live.
#[derive(Debug, clap::Parser)]
struct Args {
    /// ZooKeeper servers, host:port[,host:port...] (a Java connect string's server part).
    #[arg(long, default_value = "127.0.0.1:2181")]
    server: String,
    /// The znode that holds the rules.
    #[arg(long, default_value = "/sentinel_rule_config/orders/flow")]
    path: String,
    /// Read every child of the znode, their rules applied as one set.
    #[arg(long)]
    children: bool,
    /// Every path is under this znode (a Java connect string's `/chroot` suffix).
    #[arg(long)]
    chroot: Option<String>,
    /// The znode holds a combined document `{"flow":[...],"degrade":[...]}`.
    #[arg(long)]
    combined: bool,
    #[command(flatten)]
    load: examples::Load,
}

fn main() -> std::process::ExitCode {
    examples::main(async |args: Args| {
        let mut config = ZooKeeperConfig::builder().servers([args.server.as_str()]);
        if let Some(chroot) = &args.chroot {
            config = config.chroot(chroot.as_str());
        }
        if let Some((user, password)) = examples::Login::from_env()?.pair()? {
            config = config.credentials(user, password);
        }
        let config = config.build()?;

        let sentinel = Sentinel::new();
        let backend = if args.children {
            ZooKeeperSource::children(config, args.path.clone())
        } else {
            ZooKeeperSource::node(config, args.path.clone())
        };
        let what = if args.combined {
            "a combined document"
        } else {
            "flow rules"
        };
        println!(
            "watching {} ({what}); guarding {RESOURCE} at {} calls/s",
            backend.describe(),
            args.load.rate
        );
        let builder = examples::rules_source(backend, args.combined);
        let source = builder.name("zookeeper").start(&sentinel).await?;

        examples::live(&sentinel, &source, RESOURCE, &args.load).await;
        source.close().await;
        Ok(())
    })
}
