//! The README's cluster command works: three processes share one 50 QPS limit on Redis
//! (`scripts/services.sh start redis-main`), and the cluster's total per second stays at the
//! limit while they offer 120 calls a second together.

use std::process::{Command, Stdio};
use std::time::Duration;

use sentinel_test_support::{env_or, unique_key, OutputLines};

const WAIT: Duration = Duration::from_secs(30);

#[test]
fn three_processes_share_one_limit() {
    let redis = env_or("SENTINEL_REDIS_ADDR", "127.0.0.1:16379");
    let prefix = unique_key("sentinel:cluster:example", "three");
    let mut child = Command::new(env!("CARGO_BIN_EXE_cluster"))
        .args(["--redis", &redis, "--secs", "4", "--prefix", &prefix])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the example starts");
    let mut output = OutputLines::read(child.stdout.take().expect("stdout"));
    let seen = output.rest(WAIT).to_vec();
    let status = child.wait().expect("the example exits");
    assert!(status.success(), "{status:?}: {seen:?}");
    let totals: Vec<u64> = seen
        .iter()
        .filter_map(|l| l.strip_prefix("== cluster, second "))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse().ok())
        .collect();
    assert!(
        !totals.is_empty(),
        "no per-second totals (is Redis up? `scripts/services.sh start redis-main`): {seen:?}"
    );
    assert!(
        totals.iter().all(|t| *t <= 50),
        "the cluster admitted over 50 in a second: {totals:?}"
    );
    // Past the first second (connecting), the replicas together reach the limit.
    assert!(
        totals.iter().skip(1).any(|t| *t >= 45),
        "the cluster never reached the limit: {totals:?}"
    );
}
