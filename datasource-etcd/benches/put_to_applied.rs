//! etcd put -> rules applied latency, end to end through the data-source driver.
//!
//! ```text
//! scripts/services.sh start etcd-main
//! cargo bench -p sentinel-datasource-etcd --bench put_to_applied
//! ```
//!
//! Each sample writes a new flow payload to a key that a running `DataSource` watches, and
//! waits until the driver reports it applied (its status carries the put's revision). It
//! prints p50, p99 and max over 200 updates (after 20 warm-up updates) and fails if p99 is
//! over the 10 ms budget. It also prints the put RPC's own latency, which includes etcd's
//! WAL fsync and is most of the total on a slow disk. The endpoint comes from `SENTINEL_ETCD_ENDPOINTS` (default
//! `http://127.0.0.1:23790`).

use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sentinel_core::datasource::{DataSource, FlowJson};
use sentinel_core::Sentinel;
use sentinel_datasource_etcd::{EtcdConfig, EtcdRuleWriter, EtcdSource};
use sentinel_test_support::{bench_exit, env_or, Latencies};

const WARMUP: usize = 20;
const SAMPLES: usize = 200;
const BUDGET_P99: Duration = Duration::from_millis(10);
const WAIT: Duration = Duration::from_secs(10);

fn payload(seq: usize) -> String {
    format!(r#"[{{"resource":"bench","count":{seq}}}]"#)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let endpoints = env_or("SENTINEL_ETCD_ENDPOINTS", "http://127.0.0.1:23790");
    bench_exit(
        "put_to_applied",
        run(&endpoints).await,
        "start etcd with `scripts/services.sh start etcd`",
    )
}

async fn run(endpoints: &str) -> Result<bool, Box<dyn std::error::Error>> {
    let config = EtcdConfig::builder()
        .endpoints([endpoints])
        .connect_timeout(Duration::from_secs(2))
        .build()?;
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
    let key = format!("/sentinel-bench/put_to_applied/{nanos}");
    let writer = EtcdRuleWriter::connect(config.clone()).await?;
    writer.put_bytes(&key, payload(0)).await?;

    let sentinel = Sentinel::new();
    let source = DataSource::builder(EtcdSource::key(config, key.clone()), FlowJson::new())
        .name("bench")
        .start(&sentinel)
        .await?;
    let mut status = source.status_watch();

    let mut samples = Latencies::with_capacity(SAMPLES);
    let mut puts = Latencies::with_capacity(SAMPLES);
    let mut after_put = Latencies::with_capacity(SAMPLES);
    for seq in 1..=WARMUP + SAMPLES {
        let started = Instant::now();
        let revision = writer.put_bytes(&key, payload(seq)).await?.to_string();
        let put = started.elapsed();
        let applied = tokio::time::timeout(
            WAIT,
            status.wait_for(|s| {
                s.last_revision.as_deref() == Some(revision.as_str()) && s.last_error.is_none()
            }),
        )
        .await;
        if !matches!(applied, Ok(Ok(_))) {
            return Err(format!("update {seq} not applied within {WAIT:?}").into());
        }
        let elapsed = started.elapsed();
        if seq > WARMUP {
            samples.record(elapsed);
            puts.record(put);
            after_put.record(elapsed.saturating_sub(put));
        }
    }
    let active = sentinel.flow_rules().rules();
    if active.first().map(|r| r.count) != Some((WARMUP + SAMPLES) as f64) {
        return Err("the last update is not the one in force".into());
    }
    source.close().await;
    writer.delete(&key).await?;

    println!(
        "etcd put RPC alone (commit + fsync on the server): {}",
        puts.summary()
    );
    println!(
        "from the put's answer to applied (watch + convert + apply): {}",
        after_put.summary()
    );
    Ok(samples.report_against(
        &format!("etcd put -> applied over {SAMPLES} updates"),
        BUDGET_P99,
    ))
}
