//! Redis `MULTI; SET; PUBLISH; EXEC` -> rules applied latency, end to end through the
//! data-source driver, in `Notify` and in `Payload` mode.
//!
//! ```text
//! scripts/services.sh start redis-main
//! cargo bench -p sentinel-datasource-redis --bench put_to_applied
//! ```
//!
//! Each sample writes a new ~2 KiB flow payload (the size `../shared/tools/notify-floor`
//! uses) with [`RedisRuleWriter::put_bytes`] to a key that a running `DataSource` watches,
//! and waits until the driver reports it applied. 20 warm-up updates, then 200 samples, with
//! 10 ms of idle between updates (as the floor tool: rule changes arrive into an idle
//! process). It prints p50, p99 and max per mode and fails if a p99 is over the 2 ms budget.
//! The server comes from `SENTINEL_REDIS_ADDR` (default `127.0.0.1:16379`).
//!
//! The floor to compare with, in the same run: `ONLY=redis
//! target/notify-floor/release/notify-floor` (see that tool's README).

use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sentinel_core::datasource::{DataSource, FlowJson};
use sentinel_core::Sentinel;
use sentinel_datasource_redis::{ChangeMode, RedisConfig, RedisRuleWriter, RedisSource};
use sentinel_test_support::floor::{GAP, SAMPLES, WARMUP};
use sentinel_test_support::{measure_propagation, padded_flow_payload};

const BUDGET_P99: Duration = Duration::from_millis(2);

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let addr = sentinel_test_support::env_or("SENTINEL_REDIS_ADDR", "127.0.0.1:16379");
    let mut within = true;
    for (name, mode) in [
        ("notify", ChangeMode::Notify as fn(String) -> ChangeMode),
        ("payload", ChangeMode::Payload),
    ] {
        match run(&addr, name, mode).await {
            Ok(ok) => within &= ok,
            Err(error) => {
                eprintln!(
                    "put_to_applied: {error} (start Redis with `scripts/services.sh start redis`)"
                );
                return ExitCode::FAILURE;
            }
        }
    }
    if within {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

async fn run(
    addr: &str,
    name: &str,
    mode: fn(String) -> ChangeMode,
) -> Result<bool, Box<dyn std::error::Error>> {
    let config = RedisConfig::builder().server(addr).build()?;
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
    let key = format!("rules:bench:{name}:{nanos}");
    let channel = format!("{key}:changed");
    let writer = RedisRuleWriter::connect(config.clone()).await?;
    writer
        .put_bytes(&key, &channel, padded_flow_payload(0, 2048))
        .await?;

    let sentinel = Sentinel::new();
    let backend = RedisSource::new(config, key.clone(), mode(channel.clone()));
    let source = DataSource::builder(backend, FlowJson::new())
        .name("bench")
        .start(&sentinel)
        .await?;
    let (mut latencies, mut writes) = measure_propagation(&source, WARMUP, SAMPLES, GAP, |seq| {
        writer.put_bytes(&key, &channel, padded_flow_payload(seq, 2048))
    })
    .await
    .map_err(|e| format!("{name}: {e}"))?;
    let active = sentinel.flow_rules().rules();
    let last = (WARMUP + SAMPLES) as f64;
    if !active
        .iter()
        .any(|r| r.resource == "bench" && r.count == last)
    {
        return Err(format!("{name}: the last update is not the one in force").into());
    }
    source.close().await;
    writer.delete(&key, &channel).await?;

    println!(
        "redis {name}: the MULTI/SET/PUBLISH/EXEC call alone: {}",
        writes.summary()
    );
    Ok(latencies.report_against(
        &format!("redis {name}: SET+PUBLISH -> applied over {SAMPLES} updates"),
        BUDGET_P99,
    ))
}
