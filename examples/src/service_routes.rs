//! The routes of the axum example services (`--bin service`, `--bin console`,
//! `--bin transport`), guarded by `sentinel-tower`, the rules they start from, and serving
//! them until Ctrl-C.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::extract::Path;
use axum::http::{HeaderName, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use sentinel_core::Sentinel;
use sentinel_tower::{ResourceKey, SentinelLayer};

/// The rules a service starts from when its store holds none: 5 orders a second, and an
/// error-ratio breaker on `/flaky`.
pub const DEFAULT_RULES: &str = r#"{
  "flow": [
    { "resource": "GET:/order/{id}", "count": 5 }
  ],
  "degrade": [
    { "resource": "GET:/flaky", "grade": 1, "count": 0.4, "timeWindow": 5,
      "minRequestAmount": 5, "statIntervalMs": 1000 }
  ]
}
"#;

/// `GET /order/{id}` (one resource for every id: the matched route names it) and
/// `GET /flaky` (fails one call in two with a 500), guarded by `sentinel`: a blocked call
/// is a 429, and a caller may name itself in `x-caller`. Routes added after this are not
/// guarded.
pub fn guarded_routes(sentinel: &Sentinel) -> Router {
    let layer = SentinelLayer::new(sentinel.clone())
        // `GET:/order/{id}`: one resource for every id (sentinel-tower's `axum` feature).
        .resource_key(ResourceKey::method_and_route())
        .origin_header(HeaderName::from_static("x-caller"))
        .on_block(|blocked| {
            (StatusCode::TOO_MANY_REQUESTS, format!("{blocked}\n")).into_response()
        });
    let calls = Arc::new(AtomicU64::new(0));
    Router::new()
        .route(
            "/order/{id}",
            get(|Path(id): Path<u64>| async move { format!("order {id}\n") }),
        )
        .route(
            "/flaky",
            get(move || async move {
                if calls.fetch_add(1, Ordering::Relaxed).is_multiple_of(2) {
                    (StatusCode::INTERNAL_SERVER_ERROR, "failed\n")
                } else {
                    (StatusCode::OK, "ok\n")
                }
            }),
        )
        .route_layer(layer)
}

/// Serves `app` on `listen` until Ctrl-C, after printing `banner` (the service's address).
pub async fn serve(listen: SocketAddr, app: Router, banner: &str) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(listen).await?;
    println!("{banner}");
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
}
