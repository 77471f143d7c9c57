//! Nacos publish -> rules applied latency, end to end through the data-source driver.
//!
//! ```text
//! scripts/services.sh start nacos-main
//! cargo bench -p sentinel-datasource-nacos --bench publish_to_applied
//! ```
//!
//! Each sample publishes a new ~2 KiB flow payload (`POST /nacos/v1/cs/configs`) to a
//! dataId that a running `DataSource` long-polls, and waits until the driver reports it
//! applied. 10 warm-up updates, then 100 samples, with 10 ms of idle between updates (as
//! `../shared/tools/notify-floor`, whose nacos mode is the floor to compare with:
//! `ONLY=nacos target/notify-floor/release/notify-floor`). It prints p50, p99 and max and
//! fails if p99 is over the 5 ms budget. The server comes from `SENTINEL_NACOS_ADDR`
//! (default `127.0.0.1:18848`).

use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sentinel_core::datasource::{DataSource, FlowJson};
use sentinel_core::Sentinel;
use sentinel_datasource_nacos::{ConfigKey, NacosConfig, NacosRuleWriter, NacosSource};
use sentinel_test_support::{bench_exit, env_or, measure_propagation, padded_flow_payload};

const WARMUP: usize = 10;
const SAMPLES: usize = 100;
const GAP: Duration = Duration::from_millis(10);
const BUDGET_P99: Duration = Duration::from_millis(5);

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let addr = env_or("SENTINEL_NACOS_ADDR", "127.0.0.1:18848");
    bench_exit(
        "publish_to_applied",
        run(&addr).await,
        "start rnacos with `scripts/services.sh start nacos`",
    )
}

async fn run(addr: &str) -> Result<bool, Box<dyn std::error::Error>> {
    let config = NacosConfig::builder().servers([addr]).build()?;
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
    let key = ConfigKey::new(
        format!("bench-publish-to-applied-{nanos}"),
        "SENTINEL_GROUP",
    );
    let writer = NacosRuleWriter::new(config.clone())?;
    writer
        .put_bytes(&key, &padded_flow_payload(0, 2048))
        .await?;

    let sentinel = Sentinel::new();
    let backend = NacosSource::configs(config, [key.clone()])?;
    let source = DataSource::builder(backend, FlowJson::new())
        .name("bench")
        .start(&sentinel)
        .await?;
    let (mut latencies, mut writes) = measure_propagation(&source, WARMUP, SAMPLES, GAP, |seq| {
        let content = padded_flow_payload(seq, 2048);
        let (writer, key) = (&writer, &key);
        async move { writer.put_bytes(key, &content).await }
    })
    .await?;
    let last = (WARMUP + SAMPLES) as f64;
    let active = sentinel.flow_rules().rules();
    if !active
        .iter()
        .any(|r| r.resource == "bench" && r.count == last)
    {
        return Err("the last update is not the one in force".into());
    }
    source.close().await;
    writer.delete(&key).await?;

    println!("nacos: the publish call alone: {}", writes.summary());
    Ok(latencies.report_against(
        &format!("nacos: publish -> applied over {SAMPLES} updates"),
        BUDGET_P99,
    ))
}
