//! Where the Redis servers of `scripts/services.sh` listen (re-exported from
//! `sentinel_test_support::addresses::redis`), how tests reach them or fail naming the
//! command that starts them, and the Redis-specific helpers of this crate's tests. The
//! waits, the event recorder and the server script helpers are the testkit's
//! (`sentinel_core::datasource::testkit`).

#![allow(dead_code)]

use std::io::Write;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use sentinel_core::datasource::testkit::WAIT;
use sentinel_core::datasource::SourceError;
use sentinel_datasource_redis::{RedisConfig, RedisConfigBuilder, RedisRuleWriter};
use sentinel_test_support::services_path;

// Not every test binary of this crate uses them.
#[allow(unused_imports)]
pub(crate) use sentinel_test_support::addresses::redis::{
    addr, auth_addr, cluster_addrs, fault_addr, freeze_addr, keyspace_addr, master_name,
    sentinel_addrs, tls_addr, START_HINT,
};
#[allow(unused_imports)]
pub(crate) use sentinel_test_support::{expect_frozen_server_noticed, expect_resumed, retried};

/// The CA certificate (PEM) of the TLS Redis, made by the script (`SENTINEL_REDIS_TLS_CA`).
pub(crate) fn tls_ca_pem() -> Vec<u8> {
    let path = services_path("SENTINEL_REDIS_TLS_CA", "redis-tls/certs/ca.pem");
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read the redis-tls CA {} ({e}); {START_HINT}",
            path.display()
        )
    })
}

/// A key under `rules:` (where the ACL user may read) no other test uses.
pub(crate) fn unique_key(test: &str) -> String {
    sentinel_test_support::unique_key("rules:", test)
}

/// A config builder for the server at `addr`, with short timeouts so failures show quickly.
pub(crate) fn builder(addr: &str) -> RedisConfigBuilder {
    RedisConfig::builder()
        .server(addr)
        .connect_timeout(Duration::from_secs(2))
        .request_timeout(Duration::from_secs(2))
        .health_check(
            Duration::from_secs(1),
            sentinel_datasource_redis::DEFAULT_HEALTH_CHECK_TIMEOUT,
        )
}

/// A config for the server at `addr`, with short timeouts.
pub(crate) fn config(addr: &str) -> RedisConfig {
    builder(addr).build().expect("valid test config")
}

/// A config builder for the Redis Sentinel deployment, with short timeouts.
pub(crate) fn sentinel_builder() -> RedisConfigBuilder {
    RedisConfig::builder()
        .sentinel([sentinel_addrs()], master_name())
        .connect_timeout(Duration::from_secs(2))
        .request_timeout(Duration::from_secs(2))
}

/// Connects a writer and proves the server answers with a write. Fails the test, naming the
/// command that starts the servers, when it does not.
pub(crate) async fn writer(config: RedisConfig) -> RedisRuleWriter {
    let at = config.describe();
    let probe = async {
        let writer = RedisRuleWriter::connect(config).await?;
        writer.put_bytes("rules:probe", "rules:probe", "ok").await?;
        Ok::<_, SourceError>(writer)
    };
    match tokio::time::timeout(WAIT, probe).await {
        Ok(Ok(writer)) => writer,
        Ok(Err(e)) => panic!("Redis at {at} is unreachable ({e}); {START_HINT}"),
        Err(_) => panic!("Redis at {at} did not answer within {WAIT:?}; {START_HINT}"),
    }
}

/// A plain client connection to the server at `addr`, for what a test does behind the
/// source's back (a plain SET, a PUBLISH alone, CLIENT KILL, SENTINEL FAILOVER).
pub(crate) async fn raw(addr: &str) -> MultiplexedConnection {
    let connect = async {
        let client = redis::Client::open(format!("redis://{addr}/"))?;
        client.get_multiplexed_async_connection().await
    };
    match tokio::time::timeout(WAIT, connect).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => panic!("Redis at {addr} is unreachable ({e}); {START_HINT}"),
        Err(_) => panic!("Redis at {addr} did not answer within {WAIT:?}; {START_HINT}"),
    }
}

/// Runs one command on `conn`, failing the test on an error.
pub(crate) async fn run<T: redis::FromRedisValue>(
    conn: &mut MultiplexedConnection,
    cmd: &mut redis::Cmd,
) -> T {
    match tokio::time::timeout(WAIT, cmd.query_async::<T>(conn)).await {
        Ok(Ok(value)) => value,
        Ok(Err(e)) => panic!("redis command failed: {e}"),
        Err(_) => panic!("redis command did not finish within {WAIT:?}"),
    }
}

/// Appends `SET key value` to the stopped `redis-fault`'s append-only file, so the server
/// comes back holding a value written while it was down.
pub(crate) fn append_set_while_down(key: &str, value: &[u8]) {
    let dir = services_path("SENTINEL_REDIS_FAULT_DIR", "redis-fault/data").join("appendonlydir");
    let manifest = std::fs::read_to_string(dir.join("appendonly.aof.manifest"))
        .unwrap_or_else(|e| panic!("no AOF manifest in {} ({e}); {START_HINT}", dir.display()));
    // `file appendonly.aof.3.incr.aof seq 3 type i`: the last incremental file is the one a
    // restart replays last.
    let incr = manifest
        .lines()
        .rev()
        .filter(|line| line.ends_with("type i"))
        .find_map(|line| line.split_whitespace().nth(1))
        .unwrap_or_else(|| panic!("no incremental AOF file in {manifest:?}"));
    let mut command = Vec::new();
    let mut push = |args: &[&[u8]]| {
        command.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for arg in args {
            command.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            command.extend_from_slice(arg);
            command.extend_from_slice(b"\r\n");
        }
    };
    push(&[b"SELECT", b"0"]);
    push(&[b"SET", key.as_bytes(), value]);
    let path = dir.join(incr);
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("cannot open {} ({e})", path.display()));
    file.write_all(&command)
        .unwrap_or_else(|e| panic!("cannot append to {} ({e})", path.display()));
}
