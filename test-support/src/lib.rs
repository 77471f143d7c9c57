//! The workspace's test plumbing, shared by the backends' tests and benches, the cluster
//! backend's and the examples' tests (a dev-dependency; never published).
//!
//! What a third-party backend author needs stays in `sentinel-core` behind its `testkit`
//! feature: the conformance harness and its checks, `MemoryHarness`, the waits and the
//! recorders (`sentinel_core::datasource::testkit`). This crate holds what only makes sense
//! inside this repository:
//!
//! - the test servers of `scripts/services.sh`: where each listens and what starts it
//!   ([`addresses`]), [`env_or`] (an address from the environment `scripts/services.sh env`
//!   exports), [`services_path`], [`unique_key`], running the script ([`run_services`],
//!   [`services`]) and serialising the tests that stop a shared server ([`fault_lock`]);
//! - a TCP proxy that fails over to the next of several servers, as a load balancer does
//!   ([`FailoverProxy`]);
//! - cutting a client off from a server that keeps running ([`Partition`]), and how a
//!   conformance harness stops "its server" ([`ServerControl`], and [`server_control!`] for
//!   the harness's methods);
//! - a flow source started into a fresh engine, with its events recorded ([`start_flow`],
//!   [`start_recorded`], [`flow_resources`]);
//! - a frozen server under a running source ([`Frozen`], [`expect_frozen_server_noticed`],
//!   [`expect_resumed`], [`retried`]);
//! - the checks the backends' config tests share ([`assert_default_health_check`],
//!   [`assert_refused`]);
//! - what a built binary prints, line by line, with bounded waits ([`OutputLines`]);
//! - a form POSTed as the Sentinel dashboard posts it (`post_form`, behind the `http` feature);
//! - the propagation benches' run, payloads and percentiles ([`floor`],
//!   [`measure_propagation`], [`padded_flow_payload`], [`Latencies`], [`bench_exit`]).
//!
//! ```no_run
//! use sentinel_test_support::{env_or, unique_key};
//!
//! // The plain Redis of `scripts/services.sh start redis`, and a key no other test uses.
//! let addr = env_or("SENTINEL_REDIS_ADDR", "127.0.0.1:16379");
//! let key = unique_key("rules:", "my_test");
//! assert!(key.starts_with("rules:/my_test/"));
//! # let _ = addr;
//! ```
//!
//! `docs/adding-a-backend.md` says which helper comes from where.

pub mod addresses;
mod config;
mod failover;
mod frozen;
mod harness;
#[cfg(feature = "http")]
mod http;
mod latency;
mod output;
mod partition;
mod servers;
mod started;

pub use config::{assert_default_health_check, assert_refused};
pub use failover::FailoverProxy;
pub use frozen::{expect_frozen_server_noticed, expect_resumed, retried, Frozen, FROZEN_SLACK};
#[cfg(feature = "http")]
pub use http::post_form;
pub use latency::{bench_exit, floor, measure_propagation, padded_flow_payload, Latencies};
pub use output::OutputLines;
pub use partition::{Partition, ServerControl};
pub use servers::{
    env_or, fault_lock, fault_lock_blocking, run_services, services, services_path, unique_key,
    FaultLock,
};
pub use started::{flow_resources, start_flow, start_recorded};

// What `server_control!` names in the crate that calls it.
#[doc(hidden)]
pub use harness::__ServerFuture;
#[doc(hidden)]
pub use sentinel_core::datasource::testkit::{
    ConformanceHarness as __ConformanceHarness, Unsupported as __Unsupported,
};
