//! The middleware's cost per request against the bare app, in actix-web's in-process test
//! loop (`test::init_service` and `call_service`, as actix-web's own benches): one route,
//! one QPS rule too high to block. The machine is shared and its load moves within seconds,
//! so each iteration makes one bare and one guarded request, in alternating order, and each
//! benchmark times only its own: both see the same conditions.
#![allow(missing_docs)] // criterion_group! generates an undocumented function

use std::time::{Duration, Instant};

use actix_web::{test, web, App, HttpResponse};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use sentinel_actix::{ResourceKey, SentinelMiddleware};
use sentinel_core::{flow::FlowRule, Sentinel};

fn in_process(c: &mut Criterion) {
    let system = actix_rt::System::new();
    let sentinel = Sentinel::new();
    sentinel
        .flow_rules()
        .load_rules(vec![
            FlowRule::qps("GET:/order/{id}", 1e9),
            FlowRule::qps("GET:/order/42", 1e9),
        ])
        .expect("valid rules");
    let route = || web::get().to(|| async { HttpResponse::Ok().body("order") });
    let app = |middleware: Option<SentinelMiddleware>| {
        let app = App::new().wrap(actix_web::middleware::Condition::new(
            middleware.is_some(),
            middleware.unwrap_or_else(|| SentinelMiddleware::new(Sentinel::new())),
        ));
        system.block_on(test::init_service(app.route("/order/{id}", route())))
    };
    // The bare app has the same wrapper (actix-web's `Condition`), disabled.
    let apps = [
        ("bare", app(None)),
        (
            "route_key",
            app(Some(SentinelMiddleware::new(sentinel.clone()))),
        ),
        (
            "path_key",
            app(Some(
                SentinelMiddleware::new(sentinel).resource_key(ResourceKey::method_and_path()),
            )),
        ),
    ];
    let mut group = c.benchmark_group("actix_in_process");
    group.throughput(Throughput::Elements(1));
    for timed in 0..apps.len() {
        group.bench_function(apps[timed].0, |b| {
            b.iter_custom(|iters| {
                let mut spent = Duration::ZERO;
                for i in 0..iters {
                    for k in 0..apps.len() {
                        // Each iteration starts with another app.
                        let which = (k + i as usize) % apps.len();
                        let request = test::TestRequest::get().uri("/order/42").to_request();
                        let start = Instant::now();
                        let status = system
                            .block_on(test::call_service(&apps[which].1, request))
                            .status();
                        if which == timed {
                            spent += start.elapsed();
                        }
                        assert!(status.is_success());
                    }
                }
                spent
            })
        });
    }
    group.finish();
}

criterion_group!(benches, in_process);
criterion_main!(benches);
