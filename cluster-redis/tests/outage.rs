//! Redis going away under load, with replicas as separate processes, each outage starting
//! and ending at its own phase of the window (+0, +200, +450, +700, +900 ms): SIGSTOP, and
//! SIGKILL plus an empty restart, of this crate's own Redis (`redis-flow`,
//! `scripts/services.sh start redis-flow`), a network drop (a proxy in front of it), and a
//! Redis Sentinel failover of the shared `redis-ha` deployment (the other suite that fails it
//! over follows whichever master the sentinel names, as this one does). One scenario at a
//! time.

mod support;

use std::sync::Mutex;
use std::time::Duration;

use sentinel_test_support::{run_services, Partition};
use support::*;

static SERIAL: Mutex<()> = Mutex::new(());

const LIMIT: f64 = 400.0;
const WITHIN: Duration = Duration::from_secs(90);

/// Sends SIGCONT when dropped, so a failing test never leaves `redis-flow` stopped.
struct Resume(String);

impl Drop for Resume {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .arg("-CONT")
            .arg(&self.0)
            .status();
    }
}

/// Sleeps until Unix time `at_ms`: the scenario's timeline (when to stop Redis), not a wait
/// for a condition.
fn at(at_ms: u64) {
    std::thread::sleep(Duration::from_millis(at_ms.saturating_sub(unix_ms())));
}

fn replicas(redis: &str, name: &str, flow: i64, secs: u64) -> Vec<Replica> {
    let prefix = prefix(name);
    (0..4)
        .map(|_| Replica::new(redis, &prefix, flow, LIMIT, 3.0 * LIMIT / 4.0, secs as f64))
        .collect()
}

/// The first time at or after `from` (Unix ms) that `report` said `word`.
fn first_status(report: &Report, word: &str, from: u64) -> Option<u64> {
    report
        .statuses
        .iter()
        .find(|(t, w)| *t >= from && w == word)
        .map(|(t, _)| *t)
}

/// Every replica noticed each outage: it reported degraded after the outage began (by 3 s
/// after it ended: a starved replica whose window is exhausted calls Redis again only when
/// the next one begins) and live again after that (unless the run ends within 3 s of the
/// outage's end: a starved replica may take that long). Returns the
/// slowest of each, printed: on a quiet machine a replica degrades within `open_after` of
/// its first failed call (up to 1.5 s after the outage began) and resumes within a second,
/// but a starved process takes longer, so the delays are not asserted. The limit is.
fn check_transitions(reports: &[Report], outages: &[(u64, u64)], run_end_ms: u64) -> (u64, u64) {
    let mut worst = (0, 0);
    for (i, r) in reports.iter().enumerate() {
        for &(down_ms, up_ms) in outages {
            // Degraded already (a starved replica's breaker may open before the outage).
            let already = r
                .statuses
                .iter()
                .rev()
                .find(|(t, _)| *t <= down_ms)
                .is_some_and(|(_, w)| w == "degraded");
            let degraded = (if already { Some(down_ms) } else { None })
                .or_else(|| first_status(r, "degraded", down_ms))
                .filter(|t| *t <= up_ms + 3000)
                .unwrap_or_else(|| {
                    panic!(
                        "replica {i} never reported degraded in outage {down_ms}-{up_ms}: {:?}",
                        r.statuses
                    )
                });
            let Some(live) = first_status(r, "live", degraded) else {
                // A starved replica may not have resumed when the run ends soon after.
                assert!(
                    run_end_ms < up_ms + 3000,
                    "replica {i} never resumed after outage {down_ms}-{up_ms}: {:?}",
                    r.statuses
                );
                continue;
            };
            worst.0 = worst.0.max(degraded - down_ms);
            worst.1 = worst.1.max(live.saturating_sub(up_ms));
        }
    }
    worst
}

/// No `enter()` waited on Redis: a wait would last as long as the outage (2 s or more). The
/// bound is a quarter of it and ten times what a starved process on a busy 2-core machine
/// has shown (55 ms while another build ran), so it tells a wait on Redis from a
/// descheduled thread.
fn check_entry_latency(reports: &[Report]) -> u64 {
    let max = reports.iter().map(|r| r.max_entry_us).max().unwrap_or(0);
    assert!(max < 500_000, "an entry took {max} µs: it waited on Redis");
    max
}

/// Issue #49's bounds through outages (Unix ms, start and end, each at its own phase of the
/// window): no second above 1.1 x the limit, each outage's seconds (from the one it starts
/// in to the one after it ends) and the whole run at most 1.02 x the limit a second; the
/// seconds before the first outage at most 1.01 x. The lower bound (half the limit over the
/// run) is loose: a starved replica process only under-admits.
fn check_outage_bounds(
    name: &str,
    reports: &[Report],
    start_s: u64,
    secs: u64,
    outages: &[(u64, u64)],
) {
    let series = &series(reports, start_s, secs)[..];
    let phases: Vec<(u64, u64)> = outages.iter().map(|(d, u)| (d % 1000, u % 1000)).collect();
    println!("{name}: per-second admitted {series:?}, outages (start, end phase ms) {phases:?}");
    for r in reports {
        let own: Vec<u64> = (start_s..start_s + secs)
            .map(|s| r.seconds.get(&s).copied().unwrap_or(0))
            .collect();
        println!("  a replica: {own:?}");
    }
    for (i, s) in series.iter().enumerate() {
        assert!(
            *s as f64 <= 1.1 * LIMIT,
            "{name}: second {i} admitted {s} > 1.1 x {LIMIT}: {series:?}"
        );
    }
    let first = (outages[0].0 / 1000 - start_s) as usize;
    for (i, s) in series[..first].iter().enumerate() {
        assert!(
            *s as f64 <= 1.01 * LIMIT,
            "{name}: second {i}, before the outages: {s}: {series:?}"
        );
    }
    for &(down, up) in outages {
        let from = (down / 1000 - start_s) as usize;
        let to = ((up / 1000 - start_s) as usize + 1).min(series.len() - 1);
        let total: u64 = series[from..=to].iter().sum();
        let bound = 1.02 * LIMIT * (to + 1 - from) as f64;
        assert!(
            total as f64 <= bound,
            "{name}: {total} admitted in seconds {from}..={to} of an outage > {bound}: {series:?}"
        );
    }
    let total: u64 = series.iter().sum();
    let expected = LIMIT * series.len() as f64;
    assert!(
        total as f64 <= 1.02 * expected && total as f64 >= 0.5 * expected,
        "{name}: {total} admitted over the run, outside [0.5, 1.02] x {expected}: {series:?}"
    );
}

/// Redis stopped (SIGSTOP) three times for 2.2 s, starting at +0, +450 and +900 ms into a
/// window and ending at +200, +700 and +0 ms (`redis-flow`).
#[test]
fn redis_stopped_at_any_phase_keeps_the_limit_through_the_local_fallback() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let secs = 14;
    let pid = flow_pid();
    let list = replicas(&flow_addr(), "sigstop", 5001, secs);
    let start = start_second(3);
    let children: Vec<_> = list.iter().map(|r| r.spawn(start)).collect();
    let base = start * 1000;
    let outages = [
        (base + 2000, base + 4200),
        (base + 6450, base + 8700),
        (base + 10_900, base + 13_000),
    ];
    for &(down, up) in &outages {
        at(down);
        signal(&pid, "STOP");
        let resume = Resume(pid.clone());
        at(up);
        drop(resume);
    }
    let reports: Vec<Report> = children.into_iter().map(|c| finish(c, WITHIN)).collect();
    let (degraded, resumed) = check_transitions(&reports, &outages, (start + secs) * 1000);
    let max = check_entry_latency(&reports);
    println!(
        "sigstop: degraded after {degraded} ms, resumed after {resumed} ms, longest entry {max} µs"
    );
    check_outage_bounds("sigstop", &reports, start, secs, &outages);
}

/// Redis killed at +700 and at +200 ms into a window and restarted empty (no persistence:
/// the window's counter is lost) about 1.5 s later: the local calls of the window it comes
/// back in are charged to it, so the restart re-grants nothing.
#[test]
fn redis_killed_and_restarted_empty_keeps_the_limit() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let secs = 11;
    let list = replicas(&flow_addr(), "sigkill", 5002, secs);
    let start = start_second(3);
    let children: Vec<_> = list.iter().map(|r| r.spawn(start)).collect();
    let base = start * 1000;
    let mut outages = Vec::new();
    for (down, up) in [(base + 2700, base + 4200), (base + 6200, base + 7900)] {
        at(down);
        signal(&flow_pid(), "KILL");
        at(up);
        run_services(&["start", "redis-flow"]);
        outages.push((down, unix_ms()));
    }
    let reports: Vec<Report> = children.into_iter().map(|c| finish(c, WITHIN)).collect();
    let (degraded, resumed) = check_transitions(&reports, &outages, (start + secs) * 1000);
    let max = check_entry_latency(&reports);
    println!(
        "sigkill + restart: degraded after {degraded} ms, resumed after {resumed} ms, longest \
         entry {max} µs"
    );
    check_outage_bounds("sigkill + empty restart", &reports, start, secs, &outages);
}

/// The network between the replicas and Redis dropped (a proxy that cuts every connection
/// and refuses new ones) at +450 and +900 ms into a window, for 2.35 and 2.0 s.
#[test]
fn a_network_drop_at_any_phase_keeps_the_limit() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let proxy = runtime.block_on(Partition::start(&flow_addr()));
    let secs = 11;
    let list = replicas(proxy.addr(), "netdrop", 5004, secs);
    let start = start_second(3);
    let children: Vec<_> = list.iter().map(|r| r.spawn(start)).collect();
    let base = start * 1000;
    let outages = [(base + 2450, base + 4800), (base + 6900, base + 8900)];
    for &(down, up) in &outages {
        at(down);
        proxy.cut();
        at(up);
        proxy.heal();
    }
    let reports: Vec<Report> = children.into_iter().map(|c| finish(c, WITHIN)).collect();
    let (degraded, resumed) = check_transitions(&reports, &outages, (start + secs) * 1000);
    println!("network drop: degraded after {degraded} ms, resumed after {resumed} ms");

    check_outage_bounds("network drop", &reports, start, secs, &outages);
    drop(proxy);
}

/// Fails the master of `redis-ha` over; returns (Unix ms) when the old master is a replica.
async fn sentinel_failover() -> u64 {
    let addr = sentinel_addrs()
        .split(',')
        .next()
        .unwrap_or_default()
        .to_owned();
    let client = redis::Client::open(format!("redis://{addr}")).expect("sentinel address");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .unwrap_or_else(|e| panic!("no sentinel at {addr} ({e}): {START_HINT}"));
    let master = || {
        redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(master_name())
            .clone()
    };
    let before: (String, u16) = master().query_async(&mut conn).await.expect("a master");
    let old_master = redis::Client::open(format!("redis://{}:{}", before.0, before.1))
        .expect("the master's address");
    // A failover is refused while the replica is not in sync or another one runs: retry,
    // within a bound, then wait (bounded) for the sentinel to name the new master.
    // Another suite may be failing the shared deployment over (INPROG until its failover
    // timeout, 5 s), and a loaded machine slows the sentinel: a generous bound.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(45);
    loop {
        let asked: redis::RedisResult<()> = redis::cmd("SENTINEL")
            .arg("FAILOVER")
            .arg(master_name())
            .query_async(&mut conn)
            .await;
        if asked.is_ok() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "SENTINEL FAILOVER refused: {asked:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    loop {
        let now: redis::RedisResult<(String, u16)> = master().query_async(&mut conn).await;
        if now.as_ref().is_ok_and(|now| *now != before) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the master did not move from {before:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Until the old master is a replica it still takes writes: replicas that have not
    // reconnected yet lease there. The failover is over when it is one.
    loop {
        let role: redis::RedisResult<String> = async {
            let mut c = old_master.get_multiplexed_async_connection().await?;
            let role: Vec<redis::Value> = redis::cmd("ROLE").query_async(&mut c).await?;
            Ok(match role.first() {
                Some(redis::Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
                Some(redis::Value::SimpleString(s)) => s.clone(),
                _ => String::new(),
            })
        }
        .await;
        if role.as_deref().is_ok_and(|r| r == "slave") {
            return unix_ms();
        }
        if tokio::time::Instant::now() >= deadline {
            // Replicas connected to it keep leasing there, the others on the new master:
            // what the test then sees is what a client sees.
            println!("the old master {before:?} is not a replica yet: {role:?}");
            return unix_ms();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn a_sentinel_failover_is_followed_within_the_documented_bound() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let secs = 8;
    let mut list = replicas(&sentinel_addrs(), "failover", 5003, secs);
    for r in &mut list {
        r.set("sentinel-master", &master_name());
    }
    let start = start_second(3);
    let children: Vec<_> = list.iter().map(|r| r.spawn(start)).collect();
    at(start * 1000 + 2000);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let over = runtime.block_on(sentinel_failover());
    let reports: Vec<Report> = children.into_iter().map(|c| finish(c, WITHIN)).collect();
    let series = series(&reports, start, secs);
    let over_s = (over / 1000).saturating_sub(start) as usize;
    println!(
        "sentinel failover from second 2, over in second {over_s}: per-second admitted {series:?}"
    );
    // A failover may re-grant a window once (the new master's counter may lack the last
    // grants; the old master takes writes until it is a replica): one extra window's limit
    // over the run, and never above the limit from the second after it is over.
    let total: u64 = series.iter().sum();
    assert!(
        (total as f64) <= LIMIT * secs as f64 + 1.1 * LIMIT,
        "{total} over {secs} windows and one: {series:?}"
    );
    for (i, s) in series.iter().enumerate() {
        if i < 2 || i > over_s {
            assert!(
                *s as f64 <= 1.01 * LIMIT,
                "second {i} (the failover from 2 to {over_s}): {series:?}"
            );
        }
    }
    // Something admitted after it (how much depends on the machine's load).
    let after: u64 = series[(over_s + 1).min(series.len())..].iter().sum();
    assert!(
        over_s + 1 >= series.len() || after > 0,
        "nothing admitted after the failover: {series:?}"
    );
}

/// One replica of an in-process test: its engine, its backend, what it admitted per Unix
/// second.
struct Local {
    sentinel: sentinel_core::Sentinel,
    backend: sentinel_cluster_redis::RedisClusterBackend,
    seconds: std::collections::BTreeMap<u64, u64>,
}

impl Local {
    fn start(redis: &str, prefix: &str, flow: i64, open_after: Duration) -> Self {
        use sentinel_cluster_redis::{RedisClusterBackend, RedisClusterConfig, RedisTarget};
        use sentinel_core::flow::{ClusterFlowConfig, FlowRule};
        let config = RedisClusterConfig::builder(RedisTarget::Server(redis.to_owned()))
            .prefix(prefix)
            .open_after(open_after)
            .build()
            .expect("valid settings");
        let backend = RedisClusterBackend::start(config).expect("a runtime");
        let sentinel = sentinel_core::Sentinel::builder()
            .cluster_backend(std::sync::Arc::new(backend.clone()))
            .build();
        let rule = FlowRule::qps("alone", LIMIT).cluster(ClusterFlowConfig::shared_limit(flow));
        sentinel
            .flow_rules()
            .load_rules(vec![rule])
            .expect("the rule loads");
        Self {
            sentinel,
            backend,
            seconds: std::collections::BTreeMap::new(),
        }
    }

    /// Offers the calls due at `rate` a second since `started`, given `offered` so far.
    fn offer(&mut self, started: std::time::Instant, rate: f64, offered: &mut u64) {
        let due = (started.elapsed().as_secs_f64() * rate) as u64;
        while *offered < due {
            *offered += 1;
            if self.sentinel.entry("alone").enter().is_ok() {
                *self.seconds.entry(unix_ms() / 1000).or_default() += 1;
            }
        }
    }
}

/// Issue #49: a replica whose calls to Redis fail while the others keep leasing (here a
/// proxy cut in front of it; on a starved machine its calls overrun their budget) falls
/// back to local checks mid-window. Redis keeps that replica's reservation and what it was
/// granted in the window away from the others, and its fallback admits no more than that
/// reservation, counting what it was granted: no second above the limit. Before, Redis
/// released the silent replica's demand as the window ran and the fallback took an equal
/// share whatever Redis had kept for it (up to 1.03 x the limit a second seen under two busy
/// loops; about 1.2-1.3 x in this setting).
#[test]
fn a_replica_that_loses_redis_alone_keeps_the_others_within_the_limit() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let _in_runtime = runtime.enter();
    let proxy = runtime.block_on(Partition::start(&flow_addr()));
    let prefix = prefix("alone");
    let open_after = Duration::from_millis(150);
    let mut replicas = [
        Local::start(proxy.addr(), &prefix, 5005, open_after),
        Local::start(&flow_addr(), &prefix, 5005, open_after),
        Local::start(&flow_addr(), &prefix, 5005, open_after),
    ];
    let live = || {
        replicas
            .iter()
            .all(|r| r.backend.status() == sentinel_cluster_redis::ClusterStatus::Live)
    };
    let ready_by = std::time::Instant::now() + Duration::from_secs(10);
    while !live() {
        assert!(
            std::time::Instant::now() < ready_by,
            "the replicas are not live: {START_HINT}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut statuses = replicas[0].backend.subscribe();
    let start = start_second(2);
    let secs = 6;
    // The first replica is cut off from +100 ms into second 2 to +700 ms into second 3:
    // shorter than the heartbeat TTL (2 s), for which Redis keeps its membership.
    let (cut_at, heal_at) = (start * 1000 + 2100, start * 1000 + 3700);
    at(start * 1000);
    let started = std::time::Instant::now();
    let mut offered = [0_u64; 3];
    let rate = 300.0;
    let (mut cut, mut healed, mut degraded) = (false, false, false);
    while unix_ms() < (start + secs) * 1000 {
        for (replica, offered) in replicas.iter_mut().zip(offered.iter_mut()) {
            replica.offer(started, rate, offered);
        }
        let now = unix_ms();
        if !cut && now >= cut_at {
            proxy.cut();
            cut = true;
        }
        if !healed && now >= heal_at {
            proxy.heal();
            healed = true;
        }
        if statuses.has_changed().unwrap_or(false) {
            degraded |= matches!(
                *statuses.borrow_and_update(),
                sentinel_cluster_redis::ClusterStatus::Degraded { .. }
            );
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let per_replica: Vec<Vec<u64>> = replicas
        .iter()
        .map(|r| {
            (start..start + secs)
                .map(|s| r.seconds.get(&s).copied().unwrap_or(0))
                .collect()
        })
        .collect();
    let total: Vec<u64> = (0..secs as usize)
        .map(|i| per_replica.iter().map(|r| r[i]).sum())
        .collect();
    println!(
        "one replica cut off in seconds 2-3: per-second admitted {total:?}, each {per_replica:?}"
    );
    assert!(
        degraded,
        "the cut-off replica never degraded: {per_replica:?}"
    );
    for (i, s) in total.iter().enumerate() {
        assert!(
            *s as f64 <= 1.01 * LIMIT,
            "second {i}: {s} admitted > {LIMIT}: {total:?}, each {per_replica:?}"
        );
    }
    assert!(
        per_replica[0][3] > 0,
        "the cut-off replica admitted nothing locally: {per_replica:?}"
    );
    drop(proxy);
}
