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
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sentinel_core::datasource::testkit::Latencies;
use sentinel_core::datasource::{DataSource, FlowJson};
use sentinel_core::Sentinel;
use sentinel_datasource_redis::{ChangeMode, RedisConfig, RedisRuleWriter, RedisSource};

const WARMUP: usize = 20;
const SAMPLES: usize = 200;
const GAP: Duration = Duration::from_millis(10);
const BUDGET_P99: Duration = Duration::from_millis(2);
const WAIT: Duration = Duration::from_secs(10);

/// A flow rule list of about 2 KiB whose first rule's count is `seq`.
fn payload(seq: usize) -> String {
    let mut rules = vec![format!(r#"{{"resource":"bench","count":{seq}}}"#)];
    let mut n = 0;
    while rules.iter().map(String::len).sum::<usize>() < 2000 {
        rules.push(format!(
            r#"{{"resource":"bench-padding-{n}","count":100,"grade":1,"limitApp":"default"}}"#
        ));
        n += 1;
    }
    format!("[{}]", rules.join(","))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let addr =
        std::env::var("SENTINEL_REDIS_ADDR").unwrap_or_else(|_| "127.0.0.1:16379".to_owned());
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
    writer.put_bytes(&key, &channel, payload(0)).await?;

    let sentinel = Sentinel::new();
    let backend = RedisSource::new(config, key.clone(), mode(channel.clone()));
    let source = DataSource::builder(backend, FlowJson::new())
        .name("bench")
        .start(&sentinel)
        .await?;
    let mut status = source.status_watch();

    let mut latencies = Latencies::with_capacity(SAMPLES);
    let mut writes = Latencies::with_capacity(SAMPLES);
    for seq in 1..=WARMUP + SAMPLES {
        tokio::time::sleep(GAP).await;
        let applied_before = status.borrow().applied_count;
        let body = payload(seq);
        let started = Instant::now();
        writer.put_bytes(&key, &channel, body).await?;
        let write = started.elapsed();
        let applied = tokio::time::timeout(
            WAIT,
            status.wait_for(|s| s.applied_count > applied_before && s.last_error.is_none()),
        )
        .await;
        if !matches!(applied, Ok(Ok(_))) {
            return Err(format!("{name}: update {seq} not applied within {WAIT:?}").into());
        }
        let elapsed = started.elapsed();
        if seq > WARMUP {
            latencies.record(elapsed);
            writes.record(write);
        }
    }
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
    println!(
        "redis {name}: SET+PUBLISH -> applied over {SAMPLES} updates: {} (budget p99 <= {} ms)",
        latencies.summary(),
        BUDGET_P99.as_millis()
    );
    if latencies.percentile(99.0) > BUDGET_P99 {
        println!("OVER BUDGET");
        return Ok(false);
    }
    Ok(true)
}
