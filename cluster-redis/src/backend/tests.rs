//! The local fallback on tokio's paused clock: what the lease admitted in a window counts
//! against the fallback's share of it, and what the fallback admitted is charged to Redis
//! before the flow takes leases again.

use sentinel_core::flow::{ClusterFlowConfig, FlowRule};

use super::*;
use crate::config::RedisTarget;

const WINDOW: Duration = Duration::from_secs(1);

/// A backend with no task running (the test drives it), on a global rule of 400/s with the
/// fallback, and its one flow.
fn backend() -> (RedisClusterBackend, Arc<Flow>, Arc<ClusterSlot>) {
    let config = RedisClusterConfig::builder(RedisTarget::Server("127.0.0.1:1".into()))
        .failures_to_open(1)
        .open_after(Duration::ZERO)
        .build()
        .expect("valid settings");
    let backend = RedisClusterBackend {
        inner: Arc::new(Inner::new(config)),
        runtime: tokio::runtime::Handle::current(),
    };
    let rule = FlowRule::qps("r", 400.0).cluster(ClusterFlowConfig::new(9).global(true));
    let spec = ClusterRuleSpec::of(&rule).expect("a cluster rule");
    let slot = backend.register(&[spec]).remove(0);
    let flow = lock(&backend.inner.flows)[0].clone();
    (backend, flow, slot)
}

/// Redis granted `granted` in window 7, with `ms_left` of it left and `left` tokens left
/// for the cluster of 4 replicas.
fn grant(backend: &RedisClusterBackend, flow: &Flow, granted: i64, ms_left: i64, left: i64) {
    let reply = LeaseReply {
        sent: Instant::now(),
        granted,
        window: 7,
        ms_left,
        live: 4,
        left,
        reserve: 100,
    };
    let request = Request {
        want: granted,
        ..Request::HEARTBEAT
    };
    backend.inner.apply(flow, reply, request);
}

fn admit(backend: &RedisClusterBackend, slot: &ClusterSlot, at_most: u32) -> u32 {
    let mut passed = 0;
    while passed < at_most && backend.try_acquire(slot, 1) == ClusterDecision::Pass {
        passed += 1;
    }
    passed
}

fn open_breaker(backend: &RedisClusterBackend) {
    backend.inner.failed(&over_budget());
    assert!(lock(&backend.inner.breaker).open);
}

#[tokio::test(start_paused = true)]
async fn the_fallback_counts_what_the_lease_admitted_in_the_window() {
    let (backend, flow, slot) = backend();
    // 100 leased, 80 of them admitted; Redis had 40 left for everyone (10 a replica).
    grant(&backend, &flow, 100, 600, 40);
    assert_eq!(admit(&backend, &slot, 80), 80);
    open_breaker(&backend);
    // The share of the window is 100: the 20 leased tokens left, nothing more.
    assert_eq!(admit(&backend, &slot, 1000), 20);
    assert_eq!(backend.try_acquire(&slot, 1), ClusterDecision::Block);
    // Next window (extrapolated from Redis's): the whole share, and no more.
    tokio::time::advance(Duration::from_millis(600)).await;
    backend.inner.expire(&flow, Instant::now());
    assert_eq!(admit(&backend, &slot, 1000), 100);
    assert_eq!(backend.try_acquire(&slot, 1), ClusterDecision::Block);
}

#[tokio::test(start_paused = true)]
async fn the_fallback_takes_no_more_than_its_part_of_what_redis_had_left() {
    let (backend, flow, slot) = backend();
    // 30 leased and admitted; Redis had 120 left for the 4 replicas: 30 more each.
    grant(&backend, &flow, 30, 500, 120);
    assert_eq!(admit(&backend, &slot, 30), 30);
    open_breaker(&backend);
    assert_eq!(admit(&backend, &slot, 1000), 30);
    assert_eq!(backend.try_acquire(&slot, 1), ClusterDecision::Block);
}

#[tokio::test(start_paused = true)]
async fn on_resume_the_local_calls_of_the_window_are_charged_before_any_grant() {
    let (backend, flow, slot) = backend();
    grant(&backend, &flow, 10, 200, 390);
    assert_eq!(admit(&backend, &slot, 10), 10);
    tokio::time::advance(Duration::from_millis(200)).await;
    backend.inner.expire(&flow, Instant::now());
    open_breaker(&backend);
    // Window 8, in the fallback: 60 admitted locally.
    assert_eq!(admit(&backend, &slot, 60), 60);
    tokio::time::advance(Duration::from_millis(500)).await;
    backend.inner.succeeded();
    assert!(slot.is_degraded(), "leases resume at a window boundary");
    let now = Instant::now();
    let request = backend.inner.plan(&flow, now).expect("a charge");
    assert_eq!(
        (request.charge, request.charge_window, request.want),
        (60, 8, 0)
    );
    let reply = LeaseReply {
        sent: now,
        granted: 0,
        window: 8,
        ms_left: 499,
        live: 4,
        left: 340,
        reserve: 100,
    };
    backend.inner.apply(&flow, reply, request);
    assert!(backend.inner.plan(&flow, now).is_none(), "charged once");
    // 5 more admitted locally: charged too.
    assert_eq!(admit(&backend, &slot, 5), 5);
    let request = backend.inner.plan(&flow, now).expect("a charge");
    assert_eq!((request.charge, request.want), (5, 0));
    backend.inner.apply(&flow, reply, request);
    // Window 9 begins 500 ms after Redis came back: back to leases, a grant asked.
    tokio::time::advance(Duration::from_millis(500)).await;
    backend.inner.expire(&flow, Instant::now());
    assert!(!slot.is_degraded());
    assert_eq!(backend.try_acquire(&slot, 1), ClusterDecision::Block);
    let request = backend.inner.plan(&flow, Instant::now()).expect("a lease");
    assert!(request.want > 0 && request.charge == 0, "{request:?}");
}

#[tokio::test(start_paused = true)]
async fn resuming_late_in_a_window_keeps_the_fallback_one_more_window() {
    let (backend, flow, slot) = backend();
    grant(&backend, &flow, 10, 900, 390);
    open_breaker(&backend);
    tokio::time::advance(Duration::from_millis(800)).await;
    backend.inner.succeeded();
    // Window 8 begins 100 ms after the resume: still local, with its share.
    tokio::time::advance(Duration::from_millis(100)).await;
    backend.inner.expire(&flow, Instant::now());
    assert!(slot.is_degraded());
    assert_eq!(admit(&backend, &slot, 1000), 100);
    let request = backend.inner.plan(&flow, Instant::now()).expect("a charge");
    assert_eq!(
        (request.charge, request.charge_window, request.want),
        (100, 8, 0)
    );
    // Redis counts the 4 replicas again.
    let reply = LeaseReply {
        sent: Instant::now(),
        granted: 0,
        window: 8,
        ms_left: 999,
        live: 4,
        left: 300,
        reserve: 100,
    };
    backend.inner.apply(&flow, reply, request);
    tokio::time::advance(WINDOW).await;
    backend.inner.expire(&flow, Instant::now());
    assert!(!slot.is_degraded());
}

#[tokio::test(start_paused = true)]
async fn rules_without_the_fallback_pass_while_degraded() {
    let (backend, _flow, _slot) = backend();
    let rule = FlowRule::qps("r", 400.0).cluster(
        ClusterFlowConfig::new(10)
            .global(true)
            .fallback_to_local_when_fail(false),
    );
    let spec = ClusterRuleSpec::of(&rule).expect("a cluster rule");
    let slot = backend.register(&[spec]).remove(0);
    open_breaker(&backend);
    assert_eq!(backend.try_acquire(&slot, 1), ClusterDecision::Degraded);
}

#[tokio::test(start_paused = true)]
async fn a_reply_never_ends_the_fallbacks_window_earlier() {
    let (backend, flow, slot) = backend();
    grant(&backend, &flow, 10, 900, 390);
    open_breaker(&backend);
    assert_eq!(admit(&backend, &slot, 1000), 100);
    tokio::time::advance(Duration::from_millis(700)).await;
    backend.inner.succeeded();
    // A reply whose send time was taken long before Redis ran it (a reconnect in between)
    // says little time was left: the window end known from before stands.
    let reply = LeaseReply {
        sent: Instant::now() - Duration::from_millis(600),
        granted: 0,
        window: 7,
        ms_left: 200,
        live: 4,
        left: 0,
        reserve: 100,
    };
    backend.inner.apply(&flow, reply, Request::HEARTBEAT);
    backend.inner.expire(&flow, Instant::now());
    assert_eq!(backend.try_acquire(&slot, 1), ClusterDecision::Block);
}

#[tokio::test(start_paused = true)]
async fn after_an_outage_the_share_stays_that_of_the_replicas_known_before_it() {
    let (backend, flow, slot) = backend();
    grant(&backend, &flow, 10, 900, 390);
    open_breaker(&backend);
    tokio::time::advance(Duration::from_millis(800)).await;
    backend.inner.succeeded();
    // Redis's membership expired during the outage: only 2 replicas heartbeated so far.
    let reply = LeaseReply {
        sent: Instant::now(),
        granted: 0,
        window: 7,
        ms_left: 99,
        live: 2,
        left: 0,
        reserve: 100,
    };
    backend.inner.apply(&flow, reply, Request::HEARTBEAT);
    tokio::time::advance(Duration::from_millis(100)).await;
    backend.inner.expire(&flow, Instant::now());
    assert_eq!(admit(&backend, &slot, 1000), 100, "a quarter, not a half");
}

#[tokio::test(start_paused = true)]
async fn a_lease_follows_demand_and_a_replica_refused_for_fairness_waits() {
    let (backend, flow, slot) = backend();
    // 100 calls offered in 50 ms (2 000/s), all refused: the flow asks for about
    // `lease_horizon` (200 ms) of them, at most 5 % of the limit per live replica (one
    // known so far: 20).
    for _ in 0..100 {
        assert_eq!(backend.try_acquire(&slot, 1), ClusterDecision::Block);
    }
    tokio::time::advance(Duration::from_millis(50)).await;
    let request = backend.inner.plan(&flow, Instant::now()).expect("a lease");
    assert_eq!((request.want, request.charge), (20, 0));
    assert!(request.demand > 0.0);
    // Redis granted 5 of the 20 (the rest is other replicas' fair part): no new ask until
    // half a horizon later, however hard the replica is pressed meanwhile.
    let reply = LeaseReply {
        sent: Instant::now(),
        granted: 5,
        window: 7,
        ms_left: 900,
        live: 4,
        left: 200,
        reserve: 100,
    };
    backend.inner.apply(&flow, reply, request);
    assert_eq!(admit(&backend, &slot, 1000), 5);
    for step in 0..19 {
        tokio::time::advance(Duration::from_millis(5)).await;
        let _ = backend.try_acquire(&slot, 1);
        let plan = backend.inner.plan(&flow, Instant::now());
        assert!(plan.is_none_or(|r| r.want == 0), "step {step}: {plan:?}");
    }
    tokio::time::advance(Duration::from_millis(5)).await;
    let _ = backend.try_acquire(&slot, 1);
    let request = backend
        .inner
        .plan(&flow, Instant::now())
        .expect("asks again");
    assert!(request.want > 0);
    // 10 ms before the window ends, the lease asked is what 10 ms of demand spends.
    tokio::time::advance(Duration::from_millis(790)).await;
    let _ = backend.try_acquire(&slot, 1);
    let request = backend.inner.plan(&flow, Instant::now()).expect("a lease");
    assert!(request.want <= 25, "{request:?}");
}

/// Under CPU starvation a reply can come back long after its request was sent, so the end
/// of Redis's window is known only within that round trip. The fallback starts the next
/// window's share once that window has surely begun: spent from the early estimate of its
/// start, it admitted calls in the last milliseconds of the window before (1 089 of 1 000 in
/// one second with two busy loops on the 2-core machine).
#[tokio::test(start_paused = true)]
async fn the_fallback_starts_a_windows_share_only_once_the_window_has_surely_begun() {
    let (backend, flow, slot) = backend();
    // Sent 30 ms before it was applied (now): window 7 ends between 69 and 100 ms from now.
    let sent = Instant::now();
    tokio::time::advance(Duration::from_millis(30)).await;
    let reply = LeaseReply {
        sent,
        granted: 100,
        window: 7,
        ms_left: 100,
        live: 4,
        left: 300,
        reserve: 100,
    };
    let request = Request {
        want: 100,
        ..Request::HEARTBEAT
    };
    backend.inner.apply(&flow, reply, request);
    assert_eq!(admit(&backend, &slot, 100), 100);
    open_breaker(&backend);
    assert_eq!(backend.try_acquire(&slot, 1), ClusterDecision::Block);
    // Past the early end of window 7 but maybe still in it: nothing.
    tokio::time::advance(Duration::from_millis(70)).await;
    let wake = backend.inner.expire(&flow, Instant::now());
    assert_eq!(admit(&backend, &slot, 1000), 0);
    assert_eq!(wake, Some(Instant::now() + Duration::from_millis(30)));
    tokio::time::advance(Duration::from_millis(29)).await;
    let wake = backend.inner.expire(&flow, Instant::now());
    assert_eq!(admit(&backend, &slot, 1000), 0, "window 7 may not be over");
    assert_eq!(wake, Some(Instant::now() + Duration::from_millis(1)));
    // Window 8 has surely begun: its whole share (400 / 4), and no more.
    tokio::time::advance(Duration::from_millis(1)).await;
    backend.inner.expire(&flow, Instant::now());
    assert_eq!(admit(&backend, &slot, 1000), 100);
    // Its share ends at its early end, one window after window 7's.
    tokio::time::advance(Duration::from_millis(969)).await;
    backend.inner.expire(&flow, Instant::now());
    assert_eq!(admit(&backend, &slot, 1000), 0);
}

/// A reply that arrives after a later one (a lease call over its budget whose answer came
/// late, on a starved process) belongs to a window that is over. It used to take the lease
/// back to that window: the current lease was drained and what the replica had admitted in
/// the current window forgotten, so the fallback that followed gave it a whole share again.
#[tokio::test(start_paused = true)]
async fn a_late_reply_of_an_earlier_window_changes_nothing() {
    let (backend, flow, slot) = backend();
    grant(&backend, &flow, 100, 600, 40);
    assert_eq!(admit(&backend, &slot, 80), 80);
    let late = LeaseReply {
        sent: Instant::now(),
        granted: 50,
        window: 6,
        ms_left: 10,
        live: 4,
        left: 0,
        reserve: 100,
    };
    let request = Request {
        want: 50,
        ..Request::HEARTBEAT
    };
    backend.inner.apply(&flow, late, request);
    assert_eq!(slot.tokens(), 20, "the lease of window 7 stays");
    assert_eq!(backend.stats().stranded, 50);
    // The fallback still counts the 80 admitted in window 7: 20 more, not a new share.
    open_breaker(&backend);
    assert_eq!(admit(&backend, &slot, 1000), 20);
}

/// Redis granted `granted` in window 7 and holds `reserve` for this replica.
fn grant_reserving(backend: &RedisClusterBackend, flow: &Flow, granted: i64, reserve: i64) {
    let reply = LeaseReply {
        sent: Instant::now(),
        granted,
        window: 7,
        ms_left: 500,
        live: 4,
        left: 300,
        reserve,
    };
    let request = Request {
        want: granted,
        ..Request::HEARTBEAT
    };
    backend.inner.apply(flow, reply, request);
}

/// A replica that loses Redis alone while the others keep leasing: Redis keeps its
/// reservation (60 here, less than an equal 100) away from the others, so its fallback
/// admits no more than that in a window, counting what it was granted in the window. With
/// an equal share it admitted up to 100 while the others were granted all but its 30.
#[tokio::test(start_paused = true)]
async fn the_fallback_admits_no_more_than_the_reservation_redis_holds() {
    let (backend, flow, slot) = backend();
    grant_reserving(&backend, &flow, 30, 60);
    assert_eq!(admit(&backend, &slot, 30), 30);
    open_breaker(&backend);
    assert_eq!(
        admit(&backend, &slot, 1000),
        30,
        "60 in the window, 30 of them leased"
    );
    assert_eq!(backend.try_acquire(&slot, 1), ClusterDecision::Block);
    tokio::time::advance(Duration::from_millis(500)).await;
    backend.inner.expire(&flow, Instant::now());
    assert_eq!(
        admit(&backend, &slot, 1000),
        60,
        "the next window: the reservation"
    );
    // Leased beyond its reservation (taken from what nobody reserved): no local room.
    let (backend, flow, slot) = self::backend();
    grant_reserving(&backend, &flow, 90, 60);
    assert_eq!(admit(&backend, &slot, 50), 50);
    open_breaker(&backend);
    assert_eq!(admit(&backend, &slot, 1000), 40, "only the lease's 40");
}

/// Every call says the reservation the replica holds, so Redis never keeps less for it
/// (a reply that lowered it may have been lost); in the fallback, the share it admits.
#[tokio::test(start_paused = true)]
async fn every_call_says_the_reservation_it_holds() {
    let (backend, flow, slot) = backend();
    assert_eq!(
        backend.inner.heartbeat(&flow).held,
        0,
        "nothing before a reply"
    );
    grant_reserving(&backend, &flow, 10, 60);
    assert_eq!(backend.inner.heartbeat(&flow).held, 60);
    for _ in 0..100 {
        let _ = backend.try_acquire(&slot, 1);
    }
    tokio::time::advance(Duration::from_millis(50)).await;
    let request = backend.inner.plan(&flow, Instant::now()).expect("a lease");
    assert_eq!((request.held, request.want > 0), (60, true));
    // A late reply of an earlier window lowers it, never raises it.
    let late = |reserve| LeaseReply {
        sent: Instant::now(),
        granted: 0,
        window: 6,
        ms_left: 10,
        live: 4,
        left: 0,
        reserve,
    };
    backend.inner.apply(&flow, late(80), Request::HEARTBEAT);
    assert_eq!(backend.inner.heartbeat(&flow).held, 60);
    backend.inner.apply(&flow, late(50), Request::HEARTBEAT);
    assert_eq!(backend.inner.heartbeat(&flow).held, 50);
    open_breaker(&backend);
    tokio::time::advance(Duration::from_millis(100)).await;
    backend.inner.succeeded();
    assert_eq!(backend.inner.heartbeat(&flow).held, 50);
    let _ = admit(&backend, &slot, 5);
    let request = backend.inner.plan(&flow, Instant::now()).expect("a charge");
    assert_eq!((request.held, request.demand), (50, 0.0));
}

/// After an outage longer than the heartbeat TTL, Redis counts only the replicas that called
/// since it came back. A replica still in its fallback that has not called (a starved
/// process) is unknown to it: had the others gone back to leases, Redis would have granted
/// them its share while its fallback admitted it (443 of 400 in a second, under two busy
/// loops). The flow stays in the fallback until Redis counts the replicas known before, or
/// a heartbeat TTL after the resume.
#[tokio::test(start_paused = true)]
async fn leases_resume_once_redis_counts_the_replicas_known_before_the_outage() {
    let (backend, flow, slot) = backend();
    grant(&backend, &flow, 10, 900, 390);
    open_breaker(&backend);
    tokio::time::advance(Duration::from_millis(500)).await;
    backend.inner.succeeded();
    let back = |live, ms_left| LeaseReply {
        sent: Instant::now(),
        granted: 0,
        window: 8,
        ms_left,
        live,
        left: 400,
        reserve: 100,
    };
    // Window 8 begins 400 ms after the resume, before any reply: still local.
    tokio::time::advance(Duration::from_millis(400)).await;
    backend.inner.expire(&flow, Instant::now());
    assert!(slot.is_degraded(), "no replica counted yet");
    backend
        .inner
        .apply(&flow, back(2, 999), backend.inner.heartbeat(&flow));
    // All 4 are back: window 9 goes back to leases.
    backend.inner.apply(&flow, back(4, 990), Request::HEARTBEAT);
    tokio::time::advance(WINDOW).await;
    backend.inner.expire(&flow, Instant::now());
    assert!(!slot.is_degraded());

    // A replica that does not come back (3 of 4 counted): local until a heartbeat TTL (2 s)
    // after Redis came back.
    let (backend, flow, slot) = self::backend();
    grant(&backend, &flow, 10, 900, 390);
    open_breaker(&backend);
    tokio::time::advance(Duration::from_millis(500)).await;
    backend.inner.succeeded();
    tokio::time::advance(Duration::from_millis(400)).await;
    backend.inner.apply(&flow, back(3, 999), Request::HEARTBEAT);
    for window in 8..10 {
        backend.inner.expire(&flow, Instant::now());
        assert!(slot.is_degraded(), "window {window}");
        tokio::time::advance(WINDOW).await;
    }
    backend.inner.expire(&flow, Instant::now());
    assert!(
        !slot.is_degraded(),
        "window 10 begins 2.4 s after the resume"
    );
}
