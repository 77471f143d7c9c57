//! A load driver for one replica: it installs the Redis cluster backend, loads one cluster
//! rule, offers calls at a fixed rate from a given Unix time, and prints what it admitted per
//! Unix second (Redis's windows, on one host), its status changes and its counters. The
//! multi-process tests run several of them; it also measures a real deployment.
//!
//! ```text
//! sentinel-cluster-load --redis 127.0.0.1:6379 --flow 7 --count 1000 --global 1 \
//!     --rate 3000 --secs 4 --start-at-ms 1767225600000 [--prefix P] [--exact 1]
//!     [--ttl-ms 2000] [--sentinel-master NAME] [--cluster 1] [--leave 1] [--id NAME]
//!     [--call-timeout-ms 5]
//! ```
//!
//! Output lines: `ready`, `status <unix ms> <live|degraded|...>`, `second <unix s> <admitted>`,
//! `offered <unix s> <calls offered>`,
//! `straddled <unix s> <admitted>` (exact mode: the Redis call crossed into that second),
//! `fallback <unix s> <admitted>` (exact mode: Redis did not answer within the call budget),
//! `max_entry_us <µs>`, `stats <redis_calls> <granted> <stranded> <given_back>`, `done`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sentinel_cluster_redis::{ClusterStatus, RedisClusterBackend, RedisClusterConfig, RedisTarget};
use sentinel_core::cluster::ClusterDecision;
use sentinel_core::flow::{ClusterFlowConfig, FlowRule};
use sentinel_core::Sentinel;

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn fail(message: &str) -> ! {
    eprintln!("sentinel-cluster-load: {message}");
    std::process::exit(2)
}

struct Args(BTreeMap<String, String>);

impl Args {
    fn parse() -> Self {
        let mut map = BTreeMap::new();
        let mut it = std::env::args().skip(1);
        while let Some(key) = it.next() {
            let Some(name) = key.strip_prefix("--") else {
                fail(&format!("unexpected argument {key}"))
            };
            let value = it
                .next()
                .unwrap_or_else(|| fail(&format!("--{name} needs a value")));
            map.insert(name.to_owned(), value);
        }
        Self(map)
    }

    fn text(&self, name: &str, default: &str) -> String {
        self.0
            .get(name)
            .cloned()
            .unwrap_or_else(|| default.to_owned())
    }

    fn num(&self, name: &str, default: f64) -> f64 {
        match self.0.get(name) {
            None => default,
            Some(v) => v
                .parse()
                .unwrap_or_else(|_| fail(&format!("--{name}: not a number: {v}"))),
        }
    }
}

fn status_word(status: &ClusterStatus) -> &'static str {
    match status {
        ClusterStatus::Connecting => "connecting",
        ClusterStatus::Live => "live",
        ClusterStatus::Degraded { .. } => "degraded",
        ClusterStatus::Stopped => "stopped",
        _ => "other",
    }
}

fn main() {
    let args = Args::parse();
    // Two workers, as a service has: the backend's background tasks run beside the load.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(&format!("cannot start a runtime: {e}")));
    runtime.block_on(run(args));
}

async fn run(args: Args) {
    let redis = args.text("redis", "127.0.0.1:16379");
    let target = if args.num("cluster", 0.0) > 0.0 {
        RedisTarget::Cluster(redis.split(',').map(str::to_owned).collect())
    } else if let Some(master) = args.0.get("sentinel-master") {
        RedisTarget::Sentinel {
            sentinels: redis.split(',').map(str::to_owned).collect(),
            master: master.clone(),
        }
    } else {
        RedisTarget::Server(redis)
    };
    let flow = args.num("flow", 1.0) as i64;
    let exact = args.num("exact", 0.0) > 0.0;
    let mut config = RedisClusterConfig::builder(target)
        .prefix(args.text("prefix", "sentinel:cluster"))
        .heartbeat_ttl(Duration::from_millis(args.num("ttl-ms", 2000.0) as u64));
    if let Some(id) = args.0.get("id") {
        config = config.replica_id(id.clone());
    }
    if exact {
        config = config.exact_flow(flow);
    }
    if let Some(ms) = args.0.get("call-timeout-ms") {
        let ms = ms
            .parse()
            .unwrap_or_else(|_| fail("--call-timeout-ms takes milliseconds"));
        config = config.call_timeout(Duration::from_millis(ms));
    }
    let config = config.build().unwrap_or_else(|e| fail(&e.to_string()));
    let backend = RedisClusterBackend::start(config).unwrap_or_else(|e| fail(&e.to_string()));
    let sentinel = Sentinel::builder()
        .cluster_backend(Arc::new(backend.clone()))
        .build();
    let cluster = ClusterFlowConfig::new(flow).global(args.num("global", 1.0) > 0.0);
    let rule = FlowRule::qps("load", args.num("count", 100.0)).cluster(cluster);
    if let Err(e) = sentinel.flow_rules().load_rules(vec![rule]) {
        fail(&format!("the rule does not load: {e}"));
    }
    let slot = backend
        .slot(flow)
        .unwrap_or_else(|| fail("the rule has no cluster slot"));

    // Status changes, as they happen, with their Unix time.
    let mut statuses = backend.subscribe();
    tokio::spawn(async move {
        loop {
            let word = status_word(&statuses.borrow_and_update());
            println!("status {} {word}", unix_ms());
            if statuses.changed().await.is_err() {
                return;
            }
        }
    });
    let ready_by = Instant::now() + Duration::from_secs(10);
    while backend.status() != ClusterStatus::Live {
        if Instant::now() > ready_by {
            fail(&format!("Redis not reachable: {:?}", backend.status()));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    println!("ready");

    let rate = args.num("rate", 100.0).max(1.0);
    let secs = args.num("secs", 4.0);
    let start_ms = args.num("start-at-ms", unix_ms() as f64) as u64;
    let now = unix_ms();
    if start_ms > now {
        tokio::time::sleep(Duration::from_millis(start_ms - now)).await;
    }
    let started = Instant::now();
    let total = (rate * secs) as u64;
    let mut offered = 0u64;
    let mut per_second: BTreeMap<u64, u64> = BTreeMap::new();
    // Exact mode: admissions whose Redis call straddled a second boundary. Redis granted them
    // in its window of either second (its clock is this host's), so they are reported apart,
    // by the later second, instead of being pinned to one by when this process ran again.
    let mut straddled: BTreeMap<u64, u64> = BTreeMap::new();
    // Exact mode: admissions after a call Redis did not answer within the budget (the rule's
    // fallback decided them, or a late grant's token did).
    let mut fallback: BTreeMap<u64, u64> = BTreeMap::new();
    // Calls offered per second (admitted or not).
    let mut offered_per_second: BTreeMap<u64, u64> = BTreeMap::new();
    let mut max_entry = Duration::ZERO;
    while offered < total {
        let due = ((started.elapsed().as_secs_f64() * rate) as u64).min(total);
        while offered < due {
            offered += 1;
            let asked = unix_ms() / 1000;
            *offered_per_second.entry(asked).or_default() += 1;
            let decision = if exact {
                backend.acquire_exact(&slot, 1).await
            } else {
                ClusterDecision::Pass
            };
            if decision == ClusterDecision::Block {
                continue;
            }
            let t = Instant::now();
            let entry = sentinel.entry("load").enter();
            max_entry = max_entry.max(t.elapsed());
            if entry.is_ok() {
                let second = unix_ms() / 1000;
                let tally = if decision == ClusterDecision::Degraded {
                    &mut fallback
                } else if exact && second != asked {
                    &mut straddled
                } else {
                    &mut per_second
                };
                *tally.entry(second).or_default() += 1;
            }
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    for (second, admitted) in &per_second {
        println!("second {second} {admitted}");
    }
    for (second, n) in &offered_per_second {
        println!("offered {second} {n}");
    }
    for (second, admitted) in &straddled {
        println!("straddled {second} {admitted}");
    }
    for (second, admitted) in &fallback {
        println!("fallback {second} {admitted}");
    }
    println!("max_entry_us {}", max_entry.as_micros());
    let stats = backend.stats();
    println!(
        "stats {} {} {} {}",
        stats.redis_calls, stats.granted, stats.stranded, stats.given_back
    );
    if args.num("leave", 1.0) > 0.0 {
        backend.shutdown().await;
    }
    println!("done");
}
