//! The quickstart: rules in a local file, hot-updated while a simulated service runs.
//!
//! ```text
//! cargo run -p examples --bin quickstart                 # writes sentinel-quickstart/rules.json
//! cargo run -p examples --bin quickstart -- --rules my-rules.json --seconds 30
//! ```
//!
//! Edit the rules file while it runs: the numbers change within a fraction of a second. A
//! broken edit is rejected, printed, and the previous rules keep working.

use std::path::PathBuf;
use std::time::Duration;

use sentinel_core::datasource::{CombinedJson, DataSource};
use sentinel_core::{Sentinel, SentinelEvent};
use sentinel_datasource_file::FileSource;

/// The embedded default: a combined document with flow and circuit-breaker rules.
const DEFAULT_RULES: &str = r#"{
  "flow": [
    { "resource": "GET:/order", "count": 20, "grade": 1 },
    { "resource": "GET:/stock", "count": 5, "grade": 0 }
  ],
  "degrade": [
    { "resource": "GET:/stock", "grade": 0, "count": 150, "slowRatioThreshold": 0.5,
      "minRequestAmount": 5, "statIntervalMs": 1000, "timeWindow": 3 }
  ]
}
"#;

const RESOURCES: [&str; 2] = ["GET:/order", "GET:/stock"];

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
    let data_source = match DataSource::builder(source, CombinedJson::new())
        .start(&sentinel)
        .await
    {
        Ok(ds) => ds,
        Err(e) => {
            eprintln!(
                "cannot load {}: {}",
                args.rules.display(),
                examples::error_chain(&e)
            );
            std::process::exit(1);
        }
    };

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
        println!("       rules: {}", describe_rules(&sentinel));
        if args.seconds.is_some_and(|limit| elapsed >= limit) {
            break;
        }
    }
    order.abort();
    stock.abort();
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
