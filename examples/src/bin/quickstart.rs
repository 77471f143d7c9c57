//! The quickstart: rules in a local file, hot-updated while a simulated service runs.
//!
//! ```text
//! cargo run -p examples --bin quickstart                 # writes sentinel-quickstart/rules.json
//! cargo run -p examples --bin quickstart -- --rules my-rules.json --seconds 30
//! ```
//!
//! Edit the rules file while it runs: the numbers change within a fraction of a second. A
//! broken edit is rejected, printed, and the previous rules keep working.
//!
//! `GET:/cart` has a hot-parameter rule: at most 5 calls a second per user (argument 0). The
//! simulated user `alice` calls 50 times a second and is held to 5; nine other users, one
//! call a second each, are never blocked.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sentinel_core::datasource::{CombinedJson, DataSource};
use sentinel_core::param_flow::ParamValue;
use sentinel_core::{Sentinel, SentinelEvent};
use sentinel_datasource_file::FileSource;

/// The embedded default: a combined document with flow, circuit-breaker and hot-parameter
/// rules.
const DEFAULT_RULES: &str = r#"{
  "flow": [
    { "resource": "GET:/order", "count": 20, "grade": 1 },
    { "resource": "GET:/stock", "count": 5, "grade": 0 }
  ],
  "degrade": [
    { "resource": "GET:/stock", "grade": 0, "count": 150, "slowRatioThreshold": 0.5,
      "minRequestAmount": 5, "statIntervalMs": 1000, "timeWindow": 3 }
  ],
  "paramFlow": [
    { "resource": "GET:/cart", "paramIdx": 0, "count": 5 }
  ]
}
"#;

const RESOURCES: [&str; 3] = ["GET:/order", "GET:/stock", "GET:/cart"];

/// Passes and blocks of `GET:/cart` since the last report: alice's, then the other users'.
#[derive(Default)]
struct CartCounts([AtomicU64; 4]);

impl CartCounts {
    fn count(&self, alice: bool, passed: bool) {
        let i = usize::from(!alice) * 2 + usize::from(!passed);
        self.0[i].fetch_add(1, Ordering::Relaxed);
    }

    /// The counts, reset.
    fn take(&self) -> [u64; 4] {
        self.0.each_ref().map(|c| c.swap(0, Ordering::Relaxed))
    }
}

/// `GET:/cart`: user `alice` 50 calls a second, nine other users one call a second each.
async fn shop(sentinel: Sentinel, counts: Arc<CartCounts>) {
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    let others: Vec<String> = (1..=9).map(|i| format!("user-{i}")).collect();
    let mut n: usize = 0;
    loop {
        tick.tick().await;
        n += 1;
        let alice = [ParamValue::from("alice")];
        let passed = sentinel.entry("GET:/cart").args(&alice).enter().is_ok();
        counts.count(true, passed);
        if n.is_multiple_of(5) {
            let user = [ParamValue::from(&others[(n / 5) % others.len()])];
            let passed = sentinel.entry("GET:/cart").args(&user).enter().is_ok();
            counts.count(false, passed);
        }
    }
}

/// The quickstart: rules in a local file, hot-updated while a simulated service runs.
#[derive(Debug, clap::Parser)]
struct Args {
    /// The rules file (written with the embedded default when it does not exist).
    #[arg(long, default_value = "sentinel-quickstart/rules.json")]
    rules: PathBuf,
    /// Stop after this many seconds (default: run until Ctrl-C).
    #[arg(long)]
    seconds: Option<u64>,
}

fn describe_rules(sentinel: &Sentinel) -> String {
    let flow = sentinel.flow_rules().rules();
    let breakers = sentinel.circuit_breakers();
    let mut parts: Vec<String> = flow
        .iter()
        .map(|r| {
            let unit = match r.grade {
                sentinel_core::flow::FlowGrade::Qps => "qps",
                sentinel_core::flow::FlowGrade::Thread => "concurrent",
            };
            format!("flow {} <= {} {unit}", r.resource, r.count)
        })
        .collect();
    parts.extend(
        breakers
            .iter()
            .map(|(r, state)| format!("breaker {} {:?} [{state}]", r.resource, r.grade)),
    );
    parts.extend(sentinel.param_flow_rules().rules().iter().map(|r| {
        format!(
            "per-value {} arg {} <= {} per {} s",
            r.resource,
            r.param_idx.unwrap_or(0),
            r.count,
            r.duration_in_sec
        )
    }));
    if parts.is_empty() {
        "no rules".to_owned()
    } else {
        parts.join(", ")
    }
}

#[tokio::main]
async fn main() {
    examples::init_tracing("warn");
    let args = <Args as clap::Parser>::parse();

    if !args.rules.exists() {
        if let Some(dir) = args.rules.parent().filter(|d| !d.as_os_str().is_empty()) {
            if let Err(e) = std::fs::create_dir_all(dir) {
                eprintln!("cannot create {}: {e}", dir.display());
                std::process::exit(1);
            }
        }
        if let Err(e) = std::fs::write(&args.rules, DEFAULT_RULES) {
            eprintln!("cannot write {}: {e}", args.rules.display());
            std::process::exit(1);
        }
        println!("wrote the default rules to {}", args.rules.display());
    }
    println!(
        "watching {} -- edit it and watch the numbers change (Ctrl-C to stop)",
        args.rules.display()
    );

    let sentinel = Sentinel::new();
    sentinel.add_listener(|event: &SentinelEvent| match event {
        SentinelEvent::RulesApplied { version, .. } => {
            println!(">> rules applied (version {version})")
        }
        SentinelEvent::RulesRejected { error, .. } => {
            println!(">> rules REJECTED, previous rules kept: {error}")
        }
        SentinelEvent::BreakerStateChanged {
            resource, from, to, ..
        } => {
            println!(">> circuit breaker on {resource}: {from} -> {to}")
        }
        _ => {}
    });

    let source = match FileSource::new(&args.rules) {
        Ok(source) => source,
        Err(e) => {
            eprintln!("bad rules path: {e}");
            std::process::exit(1);
        }
    };
    let data_source = DataSource::builder(source, CombinedJson::new())
        .start(&sentinel)
        .await
        .unwrap_or_else(|e| {
            examples::exit_with(&format!("cannot load {}", args.rules.display()), &e)
        });

    // GET:/order: 50 calls/s of quick work. GET:/stock: 20 calls/s of work that is slow
    // (200 ms) every third second, which the slow-call breaker notices.
    let order = tokio::spawn(examples::simulate(
        sentinel.clone(),
        "GET:/order",
        50,
        Duration::from_millis(5),
    ));
    let stock_sentinel = sentinel.clone();
    let stock = tokio::spawn(async move {
        let mut n: u64 = 0;
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        loop {
            tick.tick().await;
            n += 1;
            let slow = (n / 20) % 3 == 2;
            let work = Duration::from_millis(if slow { 200 } else { 20 });
            let s = stock_sentinel.clone();
            tokio::spawn(async move {
                let _ = s
                    .entry("GET:/stock")
                    .inbound()
                    .run(tokio::time::sleep(work))
                    .await;
            });
        }
    });

    let counts = Arc::new(CartCounts::default());
    let cart = tokio::spawn(shop(sentinel.clone(), counts.clone()));

    let mut second = tokio::time::interval(Duration::from_secs(1));
    second.tick().await;
    let mut elapsed = 0;
    loop {
        tokio::select! {
            _ = second.tick() => {}
            _ = tokio::signal::ctrl_c() => break,
        }
        elapsed += 1;
        println!(
            "[{elapsed:>3}s] {}",
            examples::report(&sentinel, &RESOURCES)
        );
        let [alice_pass, alice_block, others_pass, others_block] = counts.take();
        println!(
            "       GET:/cart per user: alice pass {alice_pass:>3} block {alice_block:>3} | \
             9 others pass {others_pass:>3} block {others_block:>3}"
        );
        println!("       rules: {}", describe_rules(&sentinel));
        if args.seconds.is_some_and(|limit| elapsed >= limit) {
            break;
        }
    }
    order.abort();
    stock.abort();
    cart.abort();
    let status = data_source.status();
    println!(
        "source {}: {} applied, {} rejected, last error: {}",
        status.name,
        status.applied_count,
        status.rejected_count,
        status.last_error.as_deref().unwrap_or("none")
    );
    data_source.close().await;
}
