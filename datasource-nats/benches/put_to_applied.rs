//! NATS KV put -> rules applied latency, end to end through the data-source driver.
//!
//! ```text
//! scripts/services.sh start nats-main
//! cargo bench -p sentinel-datasource-nats --bench put_to_applied
//! ```
//!
//! Each sample puts a new ~2 KiB flow payload to a key that a running `DataSource` watches,
//! and waits until the driver reports it applied. 20 warm-up updates, then 200 samples, with
//! 10 ms of idle between updates (as `../shared/tools/notify-floor`, whose nats mode is the
//! floor to compare with: `ONLY=nats target/notify-floor/release/notify-floor`). It prints
//! p50, p99 and max and fails if p99 is over the 2 ms budget. The server comes from
//! `SENTINEL_NATS_ADDR` (default `127.0.0.1:14222`).

use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sentinel_core::datasource::{DataSource, FlowJson};
use sentinel_core::Sentinel;
use sentinel_datasource_nats::{NatsConfig, NatsRuleWriter, NatsSource};
use sentinel_test_support::floor::{GAP, SAMPLES, WARMUP};
use sentinel_test_support::{bench_exit, env_or, measure_propagation, padded_flow_payload};

const BUDGET_P99: Duration = Duration::from_millis(2);

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let addr = env_or("SENTINEL_NATS_ADDR", "127.0.0.1:14222");
    bench_exit(
        "put_to_applied",
        run(&addr).await,
        "start NATS with `scripts/services.sh start nats`",
    )
}

async fn run(addr: &str) -> Result<bool, Box<dyn std::error::Error>> {
    let config = NatsConfig::builder()
        .servers([format!("nats://{addr}")])
        .build()?;
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
    let bucket = format!("sentinel_bench_{nanos}");
    let writer = NatsRuleWriter::create_bucket(config.clone(), &bucket, 1).await?;
    writer
        .put_bytes("rules.flow", padded_flow_payload(0, 2048))
        .await?;

    let sentinel = Sentinel::new();
    let source = DataSource::builder(
        NatsSource::key(config, &bucket, "rules.flow"),
        FlowJson::new(),
    )
    .name("bench")
    .start(&sentinel)
    .await?;
    let (mut latencies, mut writes) = measure_propagation(&source, WARMUP, SAMPLES, GAP, |seq| {
        writer.put_bytes("rules.flow", padded_flow_payload(seq, 2048))
    })
    .await?;
    let last = (WARMUP + SAMPLES) as f64;
    if !sentinel
        .flow_rules()
        .rules()
        .iter()
        .any(|r| r.resource == "bench" && r.count == last)
    {
        return Err("the last update is not the one in force".into());
    }
    source.close().await;

    println!(
        "nats: the put call alone (with its JetStream ack): {}",
        writes.summary()
    );
    Ok(latencies.report_against(
        &format!("nats: put -> applied over {SAMPLES} updates"),
        BUDGET_P99,
    ))
}
