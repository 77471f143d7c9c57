//! A frozen server under a running data source (`scripts/services.sh freeze`, SIGSTOP): the
//! backends' frozen-server tests, and the retries of a write to a server coming back.

use std::time::Duration;

use sentinel_core::datasource::testkit::{
    applied_seq, status_within, wait_status, wait_until, WAIT,
};
use sentinel_core::datasource::{DataSource, SourceError};
use sentinel_core::flow::FlowRule;
use sentinel_core::Sentinel;

use crate::servers::{services, services_script};

/// Room on top of a backend's documented detection time, for a loaded machine.
pub const FROZEN_SLACK: Duration = Duration::from_secs(3);

/// A services-script instance frozen (`scripts/services.sh freeze`, SIGSTOP) until this is
/// dropped (`thaw`, SIGCONT), so a failing test never leaves the server frozen.
#[derive(Debug)]
pub struct Frozen(&'static str);

impl Frozen {
    /// Freezes `instance`.
    pub async fn new(instance: &'static str) -> Self {
        services(&["freeze", instance]).await;
        Self(instance)
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        // Not `run_services`: a panic here, while a failed test unwinds, would abort.
        let _ = std::process::Command::new("bash")
            .arg(services_script())
            .args(["thaw", self.0])
            .status();
    }
}

/// Freezes `instance` under the running `source`, and asserts that the source reports
/// `connected: false` within `noticed_within` (the backend's documented detection time, at
/// most 5 s) plus [`FROZEN_SLACK`], with a `last_error` that mentions each of `mentions` (the
/// settings that bound it). Thaws the server before it returns, and prints how long it took.
pub async fn expect_frozen_server_noticed(
    source: &DataSource,
    instance: &'static str,
    noticed_within: Duration,
    mentions: &[&str],
) {
    assert!(
        noticed_within <= Duration::from_secs(5),
        "the defaults notice a frozen server only after {noticed_within:?}"
    );
    // The status says how the source checks its store, and the bound the test relies on.
    let check = source
        .status()
        .health_check
        .unwrap_or_else(|| panic!("{instance}: the status names no health check"));
    assert_eq!(check.detection, noticed_within, "{check:?}");
    assert!(
        check.check.contains("within") || check.check.contains("PING"),
        "{check:?}"
    );
    let frozen = Frozen::new(instance).await;
    let since = std::time::Instant::now();
    let status = status_within(source, noticed_within + FROZEN_SLACK, |s| !s.connected)
        .await
        .unwrap_or_else(|s| {
            panic!(
                "{instance} frozen, the source still reported connected after \
                 {noticed_within:?} + {FROZEN_SLACK:?}: {s:?}"
            )
        });
    println!(
        "frozen {instance} reported disconnected after {:?}",
        since.elapsed()
    );
    drop(frozen);
    let error = status.last_error.unwrap_or_default();
    for mention in mentions {
        assert!(error.contains(mention), "{mention:?} not in {error:?}");
    }
}

/// After a thaw: waits until `sentinel`'s flow rules carry payload `seq` (written after the
/// thaw) and `source` reports connected again, having counted the freeze as one disconnect
/// (a check that flapped while the server came back would count more).
pub async fn expect_resumed(source: &DataSource, sentinel: &Sentinel, seq: u64) {
    wait_until(&format!("payload {seq} applied after the thaw"), || {
        applied_seq::<FlowRule>(sentinel) == Some(seq)
    })
    .await;
    let status = wait_status(source, "reconnected after the thaw", |s| s.connected).await;
    assert_eq!(status.disconnects, 1, "{status:?}");
}

/// Retries `op` (a write to a server that may be coming back) until it succeeds or [`WAIT`]
/// passes.
pub async fn retried<T, F, Fut>(what: &str, op: F) -> T
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T, SourceError>>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match op().await {
            Ok(value) => return value,
            Err(_) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("{what}: {e}"),
        }
    }
}
