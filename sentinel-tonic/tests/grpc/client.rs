//! The client layer: blocked calls fail with their status without a round trip, and the
//! statuses a server returns feed the client's breakers.

use std::error::Error as _;

use sentinel_core::flow::FlowRule;
use sentinel_core::BlockError;
use sentinel_tonic::SentinelGrpcLayer;
use tonic::Code;

use crate::support::{breaker_engine, client, code, flow_engine, say, serve, SAY};

#[tokio::test]
async fn a_blocked_call_fails_with_its_status_without_a_round_trip() {
    let sentinel = flow_engine(FlowRule::qps(SAY, 1.0));
    let server = serve(None).await;
    let mut client = client(
        server.addr,
        Some(SentinelGrpcLayer::client(sentinel.clone())),
    )
    .await;

    assert!(say(&mut client, Code::Ok).await.is_ok());
    let status = say(&mut client, Code::Ok)
        .await
        .expect_err("over the limit");
    assert_eq!(status.code(), Code::ResourceExhausted);
    let blocked = status
        .source()
        .and_then(|source| source.downcast_ref::<BlockError>())
        .expect("the status says which rule blocked");
    assert_eq!(blocked.resource(), SAY);
    assert_eq!(
        server.echo.calls(),
        1,
        "the blocked call never left the process"
    );
}

#[tokio::test]
async fn a_servers_error_statuses_open_the_clients_breaker() {
    let sentinel = breaker_engine(SAY, 2.0);
    let server = serve(None).await;
    let mut client = client(
        server.addr,
        Some(SentinelGrpcLayer::client(sentinel.clone())),
    )
    .await;

    assert_eq!(code(say(&mut client, Code::NotFound).await), Code::NotFound);
    for _ in 0..3 {
        assert_eq!(
            code(say(&mut client, Code::Unavailable).await),
            Code::Unavailable
        );
    }
    assert_eq!(
        sentinel.resource_stats(SAY).expect("entered").error_qps,
        3.0
    );
    let status = say(&mut client, Code::Ok)
        .await
        .expect_err("the breaker is open");
    assert_eq!(status.code(), Code::Unavailable);
    assert!(
        status.source().is_some_and(|s| s.is::<BlockError>()),
        "blocked here, not by the server"
    );
    assert_eq!(server.echo.calls(), 4);
}

#[tokio::test]
async fn an_unreachable_server_counts_as_an_error() {
    let sentinel = breaker_engine(SAY, 1.0);
    let server = serve(None).await;
    let mut client = client(
        server.addr,
        Some(SentinelGrpcLayer::client(sentinel.clone())),
    )
    .await;
    assert!(say(&mut client, Code::Ok).await.is_ok());
    drop(server);
    // Once the server has gone, calls fail in the transport: such errors always count. The
    // server shuts down in the background, so the test calls until two have failed.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while sentinel.resource_stats(SAY).expect("entered").error_qps < 2.0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "calls still succeed"
        );
        match say(&mut client, Code::Ok).await {
            Err(status)
                if status.code() == Code::Unavailable
                    && status.source().is_some_and(|s| s.is::<BlockError>()) =>
            {
                break
            }
            _ => tokio::time::sleep(std::time::Duration::from_millis(5)).await,
        }
    }
    let status = say(&mut client, Code::Ok)
        .await
        .expect_err("the breaker is open");
    assert!(
        status.source().is_some_and(|s| s.is::<BlockError>()),
        "blocked here: {status:?}"
    );
}
