//! Entry lifecycle: cancelled and panicking guarded code, queued calls that never start.

use std::time::Duration;

use crate::circuit_breaker::{BreakerState, DegradeRule};
use crate::flow::{ControlBehavior, FlowRule};
use crate::test_support::engine;
use crate::{FakeClock, Sentinel};

/// An error-ratio breaker on `r` that the first bad call of a round trips.
fn tripped_breaker(s: &Sentinel, clock: &FakeClock) {
    s.degrade_rules()
        .load_rules(vec![
            DegradeRule::error_ratio("r", 0.5, 1).min_request_amount(1)
        ])
        .unwrap();
    let mut bad = s.entry("r").enter().unwrap();
    bad.set_error();
    drop(bad);
    assert_eq!(s.circuit_breakers()[0].1, BreakerState::Open);
    clock.advance_ms(1_000);
}

#[tokio::test]
async fn a_probe_whose_run_times_out_reopens_its_breaker() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    tripped_breaker(&s, &clock);
    // The HALF_OPEN probe runs under a timeout that fires: the call was cancelled, which is
    // not a success that could close the breaker.
    let probe = s.entry("r").run(std::future::pending::<()>());
    let timed_out = tokio::time::timeout(Duration::from_millis(10), probe).await;
    assert!(timed_out.is_err());
    assert_eq!(s.circuit_breakers()[0].1, BreakerState::Open);
    let stats = s.resource_stats("r").unwrap();
    assert_eq!(stats.concurrency, 0);
    assert_eq!(stats.error_qps, 1.0, "the cancelled probe is an error");
}

#[tokio::test]
async fn run_result_that_completes_is_counted_as_it_ended() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    let ok: Result<u8, ()> = s.entry("r").run_result(async { Ok(1) }).await.unwrap();
    assert_eq!(ok, Ok(1));
    let err: Result<u8, ()> = s.entry("r").run_result(async { Err(()) }).await.unwrap();
    assert_eq!(err, Err(()));
    let stats = s.resource_stats("r").unwrap();
    assert_eq!((stats.success_qps, stats.error_qps), (2.0, 1.0));
}

#[test]
fn a_panic_in_guarded_code_is_an_error() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _entry = s.entry("r").enter().unwrap();
        panic!("the guarded code fails");
    }));
    assert!(panicked.is_err());
    let stats = s.resource_stats("r").unwrap();
    assert_eq!((stats.error_qps, stats.concurrency), (1.0, 0));
}

#[tokio::test(start_paused = true)]
async fn a_call_cancelled_while_it_queues_counts_nothing() {
    // The real clock: the queueing wait is a tokio sleep, which the test cancels.
    let s = Sentinel::new();
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("r", 1.0)
            .control_behavior(ControlBehavior::RateLimiter)
            .max_queueing_time_ms(5_000)])
        .unwrap();
    drop(s.entry("r").enter_async().await.unwrap());
    let before = s.resource_stats("r").unwrap();
    // The next call queues for about a second; give up after 10 ms (virtual time).
    let queued = tokio::time::timeout(Duration::from_millis(10), s.entry("r").enter_async()).await;
    assert!(queued.is_err(), "still queueing");
    let after = s.resource_stats("r").unwrap();
    assert_eq!(after.concurrency, 0);
    assert_eq!(after.pass_qps, before.pass_qps, "never counted as passed");
    assert_eq!(after.success_qps, before.success_qps, "nor as a success");
}

/// A fake clock that does not advance itself on a wait: the caller is asked to wait.
#[derive(Debug, Clone)]
struct WaitingClock(FakeClock);

impl crate::Clock for WaitingClock {
    fn now_ms(&self) -> u64 {
        self.0.now_ms()
    }

    fn now_nanos(&self) -> u64 {
        self.0.now_nanos()
    }
}

/// An engine whose rate limiter spaces calls on `r` 100 ms apart, and asks the caller to
/// wait.
fn queueing_engine(clock: &FakeClock) -> Sentinel {
    let s = Sentinel::builder()
        .clock(WaitingClock(clock.clone()))
        .build();
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("r", 10.0)
            .control_behavior(ControlBehavior::RateLimiter)
            .max_queueing_time_ms(1_000)])
        .expect("valid");
    s
}

#[test]
fn try_enter_hands_the_wait_to_the_caller() {
    use crate::Admission;
    let clock = FakeClock::new();
    let s = queueing_engine(&clock);
    let first = s.entry("r").try_enter();
    assert!(matches!(first, Ok(Admission::Now(_))), "{first:?}");
    drop(first);
    let second = s.entry("r").try_enter();
    let Ok(Admission::Queued(queued)) = second else {
        panic!("expected a queued call, got {second:?}");
    };
    assert_eq!(queued.wait().as_millis(), 100);
    let passed = |s: &Sentinel| s.resource_stats("r").map_or(0.0, |n| n.pass_qps);
    assert_eq!(passed(&s), 1.0, "a queued call is not counted yet");
    clock.advance_ms(100);
    let entry = queued.into_owned().start();
    assert_eq!(passed(&s), 2.0, "counted when it starts");
    drop(entry);
    // Dropped while it waits, a call never started.
    let third = s.entry("r").try_enter();
    assert!(matches!(third, Ok(Admission::Queued(_))), "{third:?}");
    drop(third);
    assert_eq!(passed(&s), 2.0);
    assert_eq!(s.resource_stats("r").map(|n| n.concurrency), Some(0));
}

#[test]
fn an_owned_admission_outlives_its_name_and_its_handle() {
    use crate::Admission;
    let clock = FakeClock::new();
    let s = queueing_engine(&clock);
    let name = String::from("r");
    let first = s.entry(&name).inbound().try_enter_owned();
    drop(name);
    let Ok(Admission::Now(first)) = first else {
        panic!("expected a call passed now, got {first:?}");
    };
    let handle = s.resource("r");
    let second = handle.entry().try_enter_owned();
    drop(handle);
    let Ok(Admission::Queued(second)) = second else {
        panic!("expected a queued call, got {second:?}");
    };
    assert_eq!(second.wait().as_millis(), 100);
    let stats = |s: &Sentinel| s.resource_stats("r").map(|n| (n.pass_qps, n.concurrency));
    assert_eq!(
        stats(&s),
        Some((1.0, 1)),
        "the queued call is not counted yet"
    );
    clock.advance_ms(100);
    let second = second.start();
    assert_eq!(stats(&s), Some((2.0, 2)));
    drop((first, second));
    assert_eq!(stats(&s).map(|(_, concurrency)| concurrency), Some(0));
}
