//! ZooKeeper write -> rules applied latency, end to end through the data-source driver,
//! beside the floor: a bare client's watch on the same znode firing for the same writes.
//!
//! ```text
//! scripts/services.sh start zookeeper-main
//! cargo bench -p sentinel-datasource-zookeeper --bench write_to_applied
//! ```
//!
//! Each sample writes a new ~2 KiB flow payload (`setData`) to a znode that a running
//! `DataSource` watches, and waits until the driver reports it applied. 20 warm-up updates,
//! then 200 samples, with 10 ms of idle between updates. In the same run a second, bare
//! `zookeeper-client` session keeps a data watch on the znode (re-armed at once with
//! `getData`, as any watcher must): the time from each write's start to that watch firing
//! (matched by the zxid the re-arming read returns) is the floor. It prints p50, p99 and max
//! of both, and fails when the source's p50 is over 1.5 x the floor's. The server comes from
//! `SENTINEL_ZOOKEEPER_ADDR` (default `127.0.0.1:12181`).

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sentinel_core::datasource::{DataSource, FlowJson};
use sentinel_core::Sentinel;
use sentinel_datasource_zookeeper::{ZooKeeperConfig, ZooKeeperRuleWriter, ZooKeeperSource};
use sentinel_test_support::floor::{GAP, SAMPLES, WARMUP};
use sentinel_test_support::{
    bench_exit, env_or, measure_propagation, padded_flow_payload, Latencies,
};

/// Instants by zxid.
type Times = Arc<Mutex<HashMap<i64, Instant>>>;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let addr = env_or("SENTINEL_ZOOKEEPER_ADDR", "127.0.0.1:12181");
    bench_exit(
        "write_to_applied",
        run(&addr).await,
        "start ZooKeeper with `scripts/services.sh start zookeeper`",
    )
}

async fn run(addr: &str) -> Result<bool, Box<dyn std::error::Error>> {
    let config = ZooKeeperConfig::builder().servers([addr]).build()?;
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
    let path = format!("/sentinel-bench/write-to-applied-{nanos}");
    let writer = ZooKeeperRuleWriter::connect(config.clone()).await?;
    writer
        .put_bytes(&path, padded_flow_payload(0, 2048))
        .await?;

    // The floor: a bare client's data watch, re-armed after every event.
    let fired: Times = Arc::default();
    let floor = zookeeper_client::Client::connect(addr).await?;
    let (_, _, mut watch) = floor.get_and_watch_data(&path).await?;
    let floor_task = {
        let fired = fired.clone();
        let path = path.clone();
        tokio::spawn(async move {
            loop {
                watch.changed().await;
                let at = Instant::now();
                // A notification carries no zxid; the re-arming read names the write that
                // fired it (writes are one at a time, each applied before the next).
                match floor.get_and_watch_data(&path).await {
                    Ok((_, stat, next)) => {
                        if let Ok(mut fired) = fired.lock() {
                            fired.insert(stat.mzxid, at);
                        }
                        watch = next;
                    }
                    Err(_) => return,
                }
            }
        })
    };

    let sentinel = Sentinel::new();
    let source = DataSource::builder(ZooKeeperSource::node(config, &path), FlowJson::new())
        .name("bench")
        .start(&sentinel)
        .await?;
    let started: Times = Arc::default();
    let (mut latencies, mut writes) = measure_propagation(&source, WARMUP, SAMPLES, GAP, |seq| {
        let (writer, path, started) = (&writer, &path, started.clone());
        async move {
            let at = Instant::now();
            let written = writer
                .put_bytes(path, padded_flow_payload(seq, 2048))
                .await?;
            if seq > WARMUP {
                if let Ok(mut started) = started.lock() {
                    started.insert(written.mzxid, at);
                }
            }
            Ok::<_, sentinel_core::datasource::SourceError>(())
        }
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
    // The floor's last event may still be on its way.
    tokio::time::sleep(Duration::from_millis(100)).await;
    floor_task.abort();
    let mut floor = Latencies::with_capacity(SAMPLES);
    {
        let started = started.lock().map_err(|_| "poisoned")?;
        let fired = fired.lock().map_err(|_| "poisoned")?;
        for (zxid, at) in started.iter() {
            if let Some(fired_at) = fired.get(zxid) {
                floor.record(fired_at.saturating_duration_since(*at));
            }
        }
    }
    if floor.percentile(100.0).is_zero() {
        return Err("the bare client's watch never fired".into());
    }
    writer.delete(&path).await?;

    println!("zookeeper: the setData call alone: {}", writes.summary());
    println!(
        "zookeeper: floor, write -> a bare client's watch fired, over the same writes: {}",
        floor.summary()
    );
    let budget = floor.percentile(50.0).mul_f64(1.5);
    let within = latencies.percentile(50.0) <= budget;
    println!(
        "zookeeper: write -> applied over {SAMPLES} updates: {} (budget p50 <= 1.5 x the \
         floor's p50 = {:.3} ms)",
        latencies.summary(),
        budget.as_secs_f64() * 1e3
    );
    if !within {
        println!("OVER BUDGET");
    }
    Ok(within)
}
