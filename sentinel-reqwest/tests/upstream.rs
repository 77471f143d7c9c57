//! The middleware against a real axum server on loopback that fails, slows down, hangs and
//! recovers: circuit breakers open, probe and close as Sentinel's rules say, on the engine's
//! fake clock (the server's "slow" answers advance it, so a call's response time is virtual).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{header::RETRY_AFTER, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use sentinel_core::circuit_breaker::{BreakerState, DegradeRule};
use sentinel_core::flow::{ControlBehavior, FlowRule};
use sentinel_core::{BlockError, FakeClock, RuleFamily, Sentinel};
use sentinel_reqwest::{
    Outcome, ResourceName, RetryAfter, Route, SentinelError, SentinelMiddleware,
};

/// What the upstream answers.
#[derive(Clone, Copy)]
#[repr(u8)]
enum Mode {
    Ok,
    Fail,
    /// 200 after advancing the fake clock by 600 ms: a slow call in the engine's time.
    Slow,
    /// Never answers.
    Hang,
    /// 503 with `Retry-After: 5`.
    Busy,
    /// 404.
    Missing,
}

struct Upstream {
    addr: SocketAddr,
    hits: Arc<AtomicUsize>,
    mode: Arc<AtomicU8>,
}

#[derive(Clone)]
struct Shared {
    hits: Arc<AtomicUsize>,
    mode: Arc<AtomicU8>,
    clock: FakeClock,
}

async fn answer(State(shared): State<Shared>) -> Response {
    shared.hits.fetch_add(1, Ordering::SeqCst);
    match shared.mode.load(Ordering::SeqCst) {
        m if m == Mode::Fail as u8 => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        m if m == Mode::Slow as u8 => {
            shared.clock.advance_ms(600);
            "slow".into_response()
        }
        m if m == Mode::Hang as u8 => std::future::pending().await,
        m if m == Mode::Busy as u8 => {
            (StatusCode::SERVICE_UNAVAILABLE, [(RETRY_AFTER, "5")]).into_response()
        }
        m if m == Mode::Missing as u8 => StatusCode::NOT_FOUND.into_response(),
        _ => "ok".into_response(),
    }
}

impl Upstream {
    async fn start(clock: &FakeClock) -> Self {
        let shared = Shared {
            hits: Arc::default(),
            mode: Arc::new(AtomicU8::new(Mode::Ok as u8)),
            clock: clock.clone(),
        };
        let app = Router::new()
            .route("/api/{id}", get(answer))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let addr = listener.local_addr().expect("bound");
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self {
            addr,
            hits: shared.hits,
            mode: shared.mode,
        }
    }

    fn set(&self, mode: Mode) {
        self.mode.store(mode as u8, Ordering::SeqCst);
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    /// The host resource.
    fn resource(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn url(&self, id: u32) -> String {
        format!("http://{}/api/{id}", self.addr)
    }
}

fn engine() -> (Sentinel, FakeClock) {
    let clock = FakeClock::at_ms(1_000_000);
    (Sentinel::builder().clock(clock.clone()).build(), clock)
}

/// An engine on a fake clock, an upstream on it, and a circuit breaker on the upstream's
/// host resource.
async fn with_breaker(rule: impl FnOnce(&str) -> DegradeRule) -> (Sentinel, FakeClock, Upstream) {
    let (sentinel, clock) = engine();
    let upstream = Upstream::start(&clock).await;
    sentinel
        .degrade_rules()
        .load_rules(vec![rule(&upstream.resource())])
        .expect("valid rules");
    (sentinel, clock, upstream)
}

fn client(middleware: SentinelMiddleware) -> ClientWithMiddleware {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .expect("a client");
    ClientBuilder::new(client).with(middleware).build()
}

/// The status, or the middleware's error, or another failure as a string.
async fn call(client: &ClientWithMiddleware, url: &str) -> Result<StatusCode, Held> {
    match client.get(url).send().await {
        Ok(response) => Ok(response.status()),
        Err(error) => Err(match SentinelError::of(&error) {
            Some(held) => Held::Sentinel(held.clone()),
            None => Held::Failed {
                timeout: error.is_timeout(),
                connect: error.is_connect(),
            },
        }),
    }
}

#[derive(Debug)]
enum Held {
    Sentinel(SentinelError),
    Failed { timeout: bool, connect: bool },
}

impl Held {
    fn family(&self) -> Option<RuleFamily> {
        match self {
            Held::Sentinel(held) => held.block_error().map(BlockError::family),
            Held::Failed { .. } => None,
        }
    }
}

fn breaker_state(sentinel: &Sentinel, resource: &str) -> BreakerState {
    sentinel
        .circuit_breakers()
        .into_iter()
        .find(|(rule, _)| rule.resource == resource)
        .map(|(_, state)| state)
        .expect("a breaker on the resource")
}

#[tokio::test]
async fn a_failing_upstream_opens_the_breaker_which_probes_and_closes() {
    let (sentinel, clock, upstream) =
        with_breaker(|resource| DegradeRule::error_count(resource, 2.0, 10).min_request_amount(1))
            .await;
    let resource = upstream.resource();
    let client = client(SentinelMiddleware::new(sentinel.clone()));

    upstream.set(Mode::Fail);
    for _ in 0..3 {
        let status = call(&client, &upstream.url(1)).await.expect("answered");
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    }
    assert_eq!(breaker_state(&sentinel, &resource), BreakerState::Open);
    let blocked = call(&client, &upstream.url(2)).await.expect_err("blocked");
    assert_eq!(blocked.family(), Some(RuleFamily::Degrade));
    let Held::Sentinel(held) = &blocked else {
        panic!("a block, got {blocked:?}")
    };
    assert_eq!(held.resource(), resource);
    assert_eq!(held.retry_in(), Some(Duration::from_secs(10)));
    assert_eq!(upstream.hits(), 3, "a blocked call is never sent");

    // The retry timeout passes; the upstream still fails: the probe reopens the breaker.
    clock.advance_ms(10_000);
    assert_eq!(
        call(&client, &upstream.url(3))
            .await
            .expect("the probe is sent"),
        StatusCode::INTERNAL_SERVER_ERROR
    );
    assert_eq!(breaker_state(&sentinel, &resource), BreakerState::Open);
    assert!(call(&client, &upstream.url(3)).await.is_err());
    assert_eq!(upstream.hits(), 4);

    // It recovers: the next probe closes the breaker, and calls flow again.
    upstream.set(Mode::Ok);
    clock.advance_ms(10_000);
    assert_eq!(
        call(&client, &upstream.url(4)).await.expect("probe"),
        StatusCode::OK
    );
    assert_eq!(breaker_state(&sentinel, &resource), BreakerState::Closed);
    for id in 5..8 {
        assert_eq!(
            call(&client, &upstream.url(id)).await.expect("passes"),
            StatusCode::OK
        );
    }
    assert_eq!(upstream.hits(), 8);
}

#[tokio::test]
async fn a_slow_upstream_trips_a_slow_call_ratio_breaker() {
    let (sentinel, clock, upstream) = with_breaker(|resource| {
        DegradeRule::slow_ratio(resource, 100.0, 0.5, 5)
            .min_request_amount(2)
            .stat_interval_ms(10_000)
    })
    .await;
    let resource = upstream.resource();
    let client = client(SentinelMiddleware::new(sentinel.clone()));

    upstream.set(Mode::Slow);
    for id in 0..2 {
        assert_eq!(
            call(&client, &upstream.url(id)).await.expect("answered"),
            StatusCode::OK
        );
    }
    assert_eq!(breaker_state(&sentinel, &resource), BreakerState::Open);
    let blocked = call(&client, &upstream.url(9)).await.expect_err("blocked");
    assert_eq!(blocked.family(), Some(RuleFamily::Degrade));
    assert_eq!(upstream.hits(), 2);

    upstream.set(Mode::Ok);
    clock.advance_ms(5_000);
    assert_eq!(
        call(&client, &upstream.url(3)).await.expect("probe"),
        StatusCode::OK
    );
    assert_eq!(breaker_state(&sentinel, &resource), BreakerState::Closed);
}

#[tokio::test]
async fn timeouts_and_refused_connections_count_as_errors() {
    let (sentinel, clock) = engine();
    let upstream = Upstream::start(&clock).await;
    // A port nothing listens on: bound, then released.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let refused = closed.local_addr().expect("bound");
    drop(closed);
    let refused_resource = format!("http://{refused}");
    sentinel
        .degrade_rules()
        .load_rules(vec![
            DegradeRule::error_count(upstream.resource(), 1.0, 10).min_request_amount(1),
            DegradeRule::error_count(&refused_resource, 1.0, 10).min_request_amount(1),
        ])
        .expect("valid rules");
    let client = client(SentinelMiddleware::new(sentinel.clone()));

    upstream.set(Mode::Hang);
    for id in 0..2 {
        match call(&client, &upstream.url(id)).await {
            Err(Held::Failed { timeout: true, .. }) => {}
            other => panic!("a timeout, got {other:?}"),
        }
    }
    assert_eq!(
        breaker_state(&sentinel, &upstream.resource()),
        BreakerState::Open
    );
    let blocked = call(&client, &upstream.url(2)).await.expect_err("blocked");
    assert_eq!(blocked.family(), Some(RuleFamily::Degrade));
    assert_eq!(upstream.hits(), 2);

    let url = format!("http://{refused}/api/1");
    for _ in 0..2 {
        let refused = call(&client, &url).await;
        assert!(
            matches!(refused, Err(Held::Failed { connect: true, .. })),
            "{refused:?}"
        );
    }
    assert_eq!(
        breaker_state(&sentinel, &refused_resource),
        BreakerState::Open
    );
    assert_eq!(
        call(&client, &url).await.expect_err("blocked").family(),
        Some(RuleFamily::Degrade)
    );
}

#[tokio::test]
async fn error_if_chooses_what_counts() {
    let (sentinel, _clock, upstream) =
        with_breaker(|resource| DegradeRule::error_count(resource, 1.0, 10).min_request_amount(1))
            .await;
    let resource = upstream.resource();
    // 404 counts; timeouts do not.
    let client = client(
        SentinelMiddleware::new(sentinel.clone())
            .error_if(|outcome: &Outcome<'_>| outcome.status() == Some(StatusCode::NOT_FOUND)),
    );
    upstream.set(Mode::Hang);
    for id in 0..3 {
        assert!(matches!(
            call(&client, &upstream.url(id)).await,
            Err(Held::Failed { timeout: true, .. })
        ));
    }
    assert_eq!(breaker_state(&sentinel, &resource), BreakerState::Closed);
    let stats = sentinel.resource_stats(&resource).expect("entered");
    assert_eq!((stats.error_qps, stats.success_qps), (0.0, 3.0));

    upstream.set(Mode::Missing);
    for id in 0..2 {
        assert_eq!(
            call(&client, &upstream.url(id)).await.expect("answered"),
            StatusCode::NOT_FOUND
        );
    }
    assert_eq!(breaker_state(&sentinel, &resource), BreakerState::Open);
}

#[tokio::test]
async fn a_blocked_call_is_never_sent() {
    let (sentinel, clock) = engine();
    let upstream = Upstream::start(&clock).await;
    sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps(upstream.resource(), 1.0)])
        .expect("valid rules");
    let client = client(SentinelMiddleware::new(sentinel.clone()));
    assert_eq!(
        call(&client, &upstream.url(1)).await.expect("passes"),
        StatusCode::OK
    );
    let blocked = call(&client, &upstream.url(2)).await.expect_err("blocked");
    assert_eq!(blocked.family(), Some(RuleFamily::Flow));
    assert_eq!(upstream.hits(), 1);
    let error = client
        .get(upstream.url(3))
        .send()
        .await
        .expect_err("blocked");
    assert!(
        error.to_string().contains("outbound call blocked"),
        "{error}"
    );
    assert!(error.is_middleware());
}

#[tokio::test]
async fn a_route_template_names_one_resource_for_every_id() {
    let (sentinel, clock) = engine();
    let upstream = Upstream::start(&clock).await;
    let route = format!("GET:{}/api/{{id}}", upstream.resource());
    sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps(&route, 2.0)])
        .expect("valid rules");
    let client = client(
        SentinelMiddleware::new(sentinel.clone()).resource_name(ResourceName::method_and_host()),
    );
    let send = |id| {
        client
            .get(upstream.url(id))
            .with_extension(Route::new("/api/{id}"))
            .send()
    };
    assert!(send(1).await.is_ok());
    assert!(send(2).await.is_ok());
    let error = send(3).await.expect_err("the route's limit");
    let held = SentinelError::of(&error).expect("a block");
    assert_eq!(held.resource(), route);
    // Without the extension, the call enters the host's resource.
    assert_eq!(
        call(&client, &upstream.url(4)).await.expect("passes"),
        StatusCode::OK
    );
    assert!(sentinel
        .resource_stats(&format!("GET:{}", upstream.resource()))
        .is_some());
    assert_eq!(upstream.hits(), 3);
}

#[tokio::test]
async fn retry_after_holds_the_resource_back_when_asked() {
    let (sentinel, clock) = engine();
    let upstream = Upstream::start(&clock).await;
    let client = client(SentinelMiddleware::new(sentinel.clone()).retry_after(RetryAfter::new()));
    upstream.set(Mode::Busy);
    assert_eq!(
        call(&client, &upstream.url(1)).await.expect("answered"),
        StatusCode::SERVICE_UNAVAILABLE
    );
    upstream.set(Mode::Ok);
    match call(&client, &upstream.url(2)).await {
        Err(Held::Sentinel(SentinelError::RetryAfter { retry_in, resource })) => {
            assert_eq!(retry_in, Duration::from_secs(5));
            assert_eq!(&*resource, upstream.resource());
        }
        other => panic!("held back, got {other:?}"),
    }
    clock.advance_ms(4_000);
    assert!(call(&client, &upstream.url(3)).await.is_err());
    assert_eq!(upstream.hits(), 1, "held calls are never sent");
    clock.advance_ms(1_000);
    assert_eq!(
        call(&client, &upstream.url(4)).await.expect("sent"),
        StatusCode::OK
    );
    assert_eq!(upstream.hits(), 2);
}

#[tokio::test]
async fn retry_after_is_not_followed_by_default() {
    let (sentinel, clock) = engine();
    let upstream = Upstream::start(&clock).await;
    let client = client(SentinelMiddleware::new(sentinel));
    upstream.set(Mode::Busy);
    for id in 0..2 {
        assert_eq!(
            call(&client, &upstream.url(id)).await.expect("sent"),
            StatusCode::SERVICE_UNAVAILABLE
        );
    }
    assert_eq!(upstream.hits(), 2);
}

/// Two guards: the outer one names every call `outer`, the inner one blocks them all.
fn nested(sentinel: &Sentinel, count_inner_blocks: bool) -> ClientWithMiddleware {
    let outer = SentinelMiddleware::new(sentinel.clone())
        .resource_name(ResourceName::from_fn(|_, _| String::from("outer")))
        .count_inner_blocks(count_inner_blocks);
    ClientBuilder::new(reqwest::Client::new())
        .with(outer)
        .with(SentinelMiddleware::new(sentinel.clone()))
        .build()
}

#[tokio::test]
async fn an_inner_block_is_not_an_error_of_the_outer_resource() {
    let (sentinel, clock) = engine();
    let upstream = Upstream::start(&clock).await;
    sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps(upstream.resource(), 0.0)])
        .expect("valid rules");
    sentinel
        .degrade_rules()
        .load_rules(vec![
            DegradeRule::error_count("outer", 1.0, 10).min_request_amount(1)
        ])
        .expect("valid rules");
    let client = nested(&sentinel, false);
    for id in 0..3 {
        assert_eq!(
            call(&client, &upstream.url(id))
                .await
                .expect_err("blocked")
                .family(),
            Some(RuleFamily::Flow)
        );
    }
    assert_eq!(breaker_state(&sentinel, "outer"), BreakerState::Closed);

    let counted = nested(&sentinel, true);
    for id in 0..2 {
        assert!(call(&counted, &upstream.url(id)).await.is_err());
    }
    assert_eq!(breaker_state(&sentinel, "outer"), BreakerState::Open);
    assert_eq!(upstream.hits(), 0);
}

#[tokio::test]
async fn a_dropped_call_counts_as_an_error() {
    let (sentinel, clock) = engine();
    let upstream = Upstream::start(&clock).await;
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(SentinelMiddleware::new(sentinel.clone()))
        .build();
    upstream.set(Mode::Hang);
    let call = client.get(upstream.url(1)).send();
    assert!(tokio::time::timeout(Duration::from_millis(200), call)
        .await
        .is_err());
    let stats = sentinel
        .resource_stats(&upstream.resource())
        .expect("entered");
    assert_eq!((stats.error_qps, stats.concurrency), (1.0, 0));
}

#[tokio::test]
async fn a_rate_limiter_queues_the_call_on_tokios_timer() {
    // The engine's own clock: the queue's wait is real time.
    let sentinel = Sentinel::new();
    let upstream = Upstream::start(&FakeClock::new()).await;
    sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps(upstream.resource(), 5.0)
            .control_behavior(ControlBehavior::RateLimiter)
            .max_queueing_time_ms(2_000)])
        .expect("valid rules");
    let client = client(SentinelMiddleware::new(sentinel));
    let start = Instant::now();
    for id in 0..3 {
        assert_eq!(
            call(&client, &upstream.url(id)).await.expect("passes"),
            StatusCode::OK
        );
    }
    // 200 ms apart: the third call starts at least 400 ms after the first (less a margin
    // for the clock's millisecond rounding).
    assert!(
        start.elapsed() >= Duration::from_millis(350),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(upstream.hits(), 3);
}
