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

/// Every replica degraded within 2 s of each outage's start and resumed within 2 s of its
/// end; returns the slowest of each. A replica whose window is exhausted calls Redis again
/// only when the next window begins (or to heartbeat), and its breaker opens `open_after`
/// (500 ms) after its first failed call: up to 1.5 s after the outage began. Resuming took
/// 1.08 s once for a replica process starved on a 2-core machine with both cores busy, so
/// that bound is 2 s too. The limit itself is asserted strictly by the callers; these bounds
/// only catch a replica that never notices.
fn check_transitions(reports: &[Report], outages: &[(u64, u64)]) -> (u64, u64) {
    let mut worst = (0, 0);
    for (i, r) in reports.iter().enumerate() {
        for &(down_ms, up_ms) in outages {
            let degraded = first_status(r, "degraded", down_ms).unwrap_or_else(|| {
                panic!(
                    "replica {i} never reported degraded after {down_ms}: {:?}",
                    r.statuses
                )
            });
            let live = first_status(r, "live", degraded)
                .unwrap_or_else(|| panic!("replica {i} never resumed: {:?}", r.statuses));
            if degraded - down_ms > 2000 || live.saturating_sub(up_ms) > 2000 {
                println!("replica {i}, outage {down_ms}-{up_ms}: {:?}", r.statuses);
            }
            worst.0 = worst.0.max(degraded - down_ms);
            worst.1 = worst.1.max(live.saturating_sub(up_ms));
        }
    }
    assert!(
        worst.0 <= 2000,
        "degraded {} ms after Redis went away",
        worst.0
    );
    assert!(
        worst.1 <= 2000,
        "resumed {} ms after Redis came back",
        worst.1
    );
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
    let (degraded, resumed) = check_transitions(&reports, &outages);
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
    let (degraded, resumed) = check_transitions(&reports, &outages);
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
    let (degraded, resumed) = check_transitions(&reports, &outages);
    println!("network drop: degraded after {degraded} ms, resumed after {resumed} ms");

    check_outage_bounds("network drop", &reports, start, secs, &outages);
    drop(proxy);
}

async fn sentinel_failover() {
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
    // A failover is refused while the replica is not in sync or another one runs: retry,
    // within a bound, then wait (bounded) for the sentinel to name the new master.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
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
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the master did not move from {before:?}"
        );
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
    runtime.block_on(sentinel_failover());
    let reports: Vec<Report> = children.into_iter().map(|c| finish(c, WITHIN)).collect();
    let series = series(&reports, start, secs);
    println!("sentinel failover at second 2: per-second admitted {series:?}");
    // A failover may re-grant one window, once; the run stays within that bound.
    let total: u64 = series.iter().sum();
    assert!(
        (total as f64) <= LIMIT * secs as f64 + 1.1 * LIMIT,
        "{total} over {secs} windows and one: {series:?}"
    );
    for s in &series[..2] {
        assert!(*s as f64 <= 1.01 * LIMIT, "before the failover: {series:?}");
    }
    // Never over the limit after it; under it only as far as a replica starved on a loaded
    // machine can fall behind (223 of 400 was seen with both cores busy).
    for s in &series[5..] {
        assert!(
            *s as f64 <= 1.01 * LIMIT && *s as f64 >= 0.5 * LIMIT,
            "after it: {series:?}"
        );
    }
}
