//! The middleware on a real actix-web server on loopback: resources per matched route,
//! block answers (429, 503, 403) with `Retry-After`, responses feeding the breakers, origins,
//! param-flow keys from header, query, path and peer address, and nested guards.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::dev::ServerHandle;
use actix_web::http::header::HeaderName;
use actix_web::{web, App, HttpResponse, HttpServer};
use sentinel_actix::{BlockResponses, ParamSource, ResourceKey, SentinelMiddleware};
use sentinel_core::authority::AuthorityRule;
use sentinel_core::circuit_breaker::{BreakerState, DegradeRule};
use sentinel_core::flow::{ControlBehavior, FlowRule};
use sentinel_core::param_flow::ParamFlowRule;
use sentinel_core::{FakeClock, RuleFamily, Sentinel};

/// Serves the app made by `$factory` on a loopback port with one worker.
macro_rules! serve {
    ($factory:expr) => {{
        let server = HttpServer::new($factory)
            .workers(1)
            .disable_signals()
            .bind(("127.0.0.1", 0))
            .expect("a loopback port");
        let addr = server.addrs()[0];
        let server = server.run();
        let handle = server.handle();
        actix_rt::spawn(server);
        Running { addr, handle }
    }};
}

struct Running {
    addr: SocketAddr,
    handle: ServerHandle,
}

impl Running {
    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    async fn stop(self) {
        self.handle.stop(false).await;
    }
}

/// The status and `Retry-After` of a GET with these headers.
async fn get(url: &str, headers: &[(&str, &str)]) -> (u16, Option<String>) {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("a client");
    let mut request = client.get(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("the server answers");
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    (response.status().as_u16(), retry_after)
}

fn engine() -> (Sentinel, FakeClock) {
    let clock = FakeClock::at_ms(1_000_000);
    (Sentinel::builder().clock(clock.clone()).build(), clock)
}

fn counted(hits: &Arc<AtomicUsize>) -> impl Fn() -> std::future::Ready<HttpResponse> + Clone {
    let hits = Arc::clone(hits);
    move || {
        hits.fetch_add(1, Ordering::SeqCst);
        std::future::ready(HttpResponse::Ok().body("ok"))
    }
}

#[actix_rt::test]
async fn every_id_of_a_route_is_one_resource_and_a_flow_block_is_a_429() {
    let (sentinel, _clock) = engine();
    sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps("GET:/order/{id}", 2.0)])
        .expect("valid rules");
    let hits = Arc::new(AtomicUsize::new(0));
    let middleware = SentinelMiddleware::new(sentinel.clone());
    let handler = counted(&hits);
    let server = serve!(move || App::new()
        .wrap(middleware.clone())
        .route("/order/{id}", web::get().to(handler.clone())));

    assert_eq!(get(&server.url("/order/1"), &[]).await.0, 200);
    assert_eq!(get(&server.url("/order/2"), &[]).await.0, 200);
    assert_eq!(
        get(&server.url("/order/3"), &[]).await,
        (429, Some(String::from("1")))
    );
    assert_eq!(
        hits.load(Ordering::SeqCst),
        2,
        "a blocked request never reaches the handler"
    );
    let stats = sentinel.resource_stats("GET:/order/{id}").expect("entered");
    assert_eq!((stats.pass_qps, stats.block_qps), (2.0, 1.0));
    assert!(sentinel.resource_stats("GET:/order/1").is_none());
    server.stop().await;
}

#[actix_rt::test]
async fn an_open_breaker_answers_503_with_retry_after_probes_and_closes() {
    let (sentinel, clock) = engine();
    sentinel
        .degrade_rules()
        .load_rules(vec![
            DegradeRule::error_count("GET:/flaky", 2.0, 10).min_request_amount(1)
        ])
        .expect("valid rules");
    let failing = Arc::new(AtomicBool::new(true));
    let middleware = SentinelMiddleware::new(sentinel.clone());
    let flag = Arc::clone(&failing);
    let server = serve!(move || {
        let flag = Arc::clone(&flag);
        App::new().wrap(middleware.clone()).route(
            "/flaky",
            web::get().to(move || {
                let failing = flag.load(Ordering::SeqCst);
                async move {
                    if failing {
                        HttpResponse::InternalServerError().finish()
                    } else {
                        HttpResponse::Ok().finish()
                    }
                }
            }),
        )
    });
    let state = || {
        sentinel
            .circuit_breakers()
            .into_iter()
            .find_map(|(rule, state)| (rule.resource == "GET:/flaky").then_some(state))
            .expect("the breaker")
    };

    for _ in 0..3 {
        assert_eq!(get(&server.url("/flaky"), &[]).await.0, 500);
    }
    assert_eq!(state(), BreakerState::Open);
    assert_eq!(
        get(&server.url("/flaky"), &[]).await,
        (503, Some(String::from("10")))
    );
    clock.advance_ms(4_000);
    assert_eq!(
        get(&server.url("/flaky"), &[]).await,
        (503, Some(String::from("6"))),
        "Retry-After is the time left until the probe"
    );
    failing.store(false, Ordering::SeqCst);
    clock.advance_ms(6_000);
    assert_eq!(get(&server.url("/flaky"), &[]).await.0, 200, "the probe");
    assert_eq!(state(), BreakerState::Closed);
    server.stop().await;
}

#[actix_rt::test]
async fn the_origin_header_feeds_authority_rules_answered_with_403() {
    let (sentinel, _clock) = engine();
    sentinel
        .authority_rules()
        .load_rules(vec![AuthorityRule::white_list("GET:/admin", "ops")])
        .expect("valid rules");
    let hits = Arc::new(AtomicUsize::new(0));
    let middleware = SentinelMiddleware::new(sentinel.clone())
        .origin_header(HeaderName::from_static("x-caller"));
    let handler = counted(&hits);
    let server = serve!(move || App::new()
        .wrap(middleware.clone())
        .route("/admin", web::get().to(handler.clone())));
    assert_eq!(
        get(&server.url("/admin"), &[("x-caller", "ops")]).await.0,
        200
    );
    assert_eq!(
        get(&server.url("/admin"), &[("x-caller", "shop")]).await,
        (403, None)
    );
    // No origin: authority rules do not check the call, as in Sentinel.
    assert_eq!(get(&server.url("/admin"), &[]).await.0, 200);
    assert_eq!(hits.load(Ordering::SeqCst), 2);
    server.stop().await;
}

#[actix_rt::test]
async fn param_flow_keys_come_from_header_query_path_and_peer() {
    let (sentinel, _clock) = engine();
    sentinel
        .param_flow_rules()
        .load_rules(vec![
            ParamFlowRule::qps("GET:/users/{id}", 0, 1.0),
            ParamFlowRule::qps("GET:/users/{id}", 1, 1.0),
            ParamFlowRule::qps("GET:/users/{id}", 2, 1.0),
            ParamFlowRule::qps("GET:/peer", 0, 1.0),
        ])
        .expect("valid rules");
    let users = SentinelMiddleware::new(sentinel.clone())
        .arg(ParamSource::header(HeaderName::from_static("x-user")).or_block())
        .arg(ParamSource::query("tenant"))
        .arg(ParamSource::path_segment(1));
    let peer = SentinelMiddleware::new(sentinel.clone()).arg(ParamSource::peer_ip());
    let hits = Arc::new(AtomicUsize::new(0));
    let handler = counted(&hits);
    let server = serve!(move || App::new()
        .service(
            web::resource("/users/{id}")
                .wrap(users.clone())
                .route(web::get().to(handler.clone()))
        )
        .service(
            web::resource("/peer")
                .wrap(peer.clone())
                .route(web::get().to(handler.clone()))
        ));
    let user = |name| [("x-user", name)];
    assert_eq!(
        get(&server.url("/users/1?tenant=x"), &user("a")).await.0,
        200
    );
    // The same header value, the same query value, the same path id: each is hot.
    assert_eq!(
        get(&server.url("/users/2?tenant=y"), &user("a")).await.0,
        429
    );
    assert_eq!(
        get(&server.url("/users/3?tenant=x"), &user("b")).await.0,
        429
    );
    assert_eq!(
        get(&server.url("/users/1?tenant=z"), &user("c")).await.0,
        429
    );
    assert_eq!(
        get(&server.url("/users/4?tenant=w"), &user("d")).await.0,
        200
    );
    // Without the header: blocked before it enters (or_block), without Retry-After.
    assert_eq!(
        get(&server.url("/users/5?tenant=v"), &[]).await,
        (429, None)
    );
    // The peer address: one call a second from 127.0.0.1.
    assert_eq!(get(&server.url("/peer"), &[]).await.0, 200);
    assert_eq!(
        get(&server.url("/peer"), &[]).await,
        (429, Some(String::from("1")))
    );
    assert_eq!(hits.load(Ordering::SeqCst), 3);
    server.stop().await;
}

/// An app whose route has an inner guard answering every request with a 503 block answer,
/// under an outer guard naming every request `outer`.
fn nested(
    sentinel: &Sentinel,
    count_block_answers: bool,
) -> (SentinelMiddleware, SentinelMiddleware) {
    let outer = SentinelMiddleware::new(sentinel.clone())
        .resource_key(ResourceKey::from_fn(|_| String::from("outer")))
        .count_block_answers(count_block_answers);
    let inner = SentinelMiddleware::new(sentinel.clone()).respond_with(
        BlockResponses::new().status(RuleFamily::Flow, http::StatusCode::SERVICE_UNAVAILABLE),
    );
    (outer, inner)
}

#[actix_rt::test]
async fn an_inner_guards_block_answer_is_not_an_error_of_the_outer_route() {
    let (sentinel, _clock) = engine();
    sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps("GET:/report", 0.0)])
        .expect("valid rules");
    for (count, expected_errors) in [(false, 0.0), (true, 3.0)] {
        let (outer, inner) = nested(&sentinel, count);
        let server = serve!(move || App::new().wrap(outer.clone()).service(
            web::resource("/report")
                .wrap(inner.clone())
                .route(web::get().to(|| async { "report" }))
        ));
        for _ in 0..3 {
            assert_eq!(get(&server.url("/report"), &[]).await.0, 503);
        }
        let stats = sentinel.resource_stats("outer").expect("entered");
        assert_eq!(
            stats.error_qps, expected_errors,
            "count_block_answers({count})"
        );
        server.stop().await;
    }
}

#[actix_rt::test]
async fn error_if_and_on_block_are_the_applications() {
    let (sentinel, _clock) = engine();
    sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps("GET:/missing", 1.0)])
        .expect("valid rules");
    let middleware = SentinelMiddleware::new(sentinel.clone())
        .error_if(|status| status == actix_web::http::StatusCode::NOT_FOUND)
        .on_block(|_| HttpResponse::ServiceUnavailable().body("later"));
    let server = serve!(move || App::new()
        .wrap(middleware.clone())
        .route("/missing", web::get().to(HttpResponse::NotFound)));
    assert_eq!(get(&server.url("/missing"), &[]).await.0, 404);
    assert_eq!(get(&server.url("/missing"), &[]).await, (503, None));
    let stats = sentinel.resource_stats("GET:/missing").expect("entered");
    assert_eq!(stats.error_qps, 1.0, "a 404 counts");
    server.stop().await;
}

#[actix_rt::test]
async fn a_rate_limiter_queues_the_request_on_tokios_timer() {
    // The engine's own clock: the queue's wait is real time.
    let sentinel = Sentinel::new();
    sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps("GET:/slot", 5.0)
            .control_behavior(ControlBehavior::RateLimiter)
            .max_queueing_time_ms(2_000)])
        .expect("valid rules");
    let hits = Arc::new(AtomicUsize::new(0));
    let middleware = SentinelMiddleware::new(sentinel);
    let handler = counted(&hits);
    let server = serve!(move || App::new()
        .wrap(middleware.clone())
        .route("/slot", web::get().to(handler.clone())));
    let start = Instant::now();
    for _ in 0..3 {
        assert_eq!(get(&server.url("/slot"), &[]).await.0, 200);
    }
    // 200 ms apart: the third starts at least 400 ms after the first (less a margin for the
    // clock's millisecond rounding).
    assert!(
        start.elapsed() >= Duration::from_millis(350),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(hits.load(Ordering::SeqCst), 3);
    server.stop().await;
}
