//! A stream is one entry for its whole life: in flight until its trailers pass, its status
//! counted from them, and a cancelled stream ended at once.

use sentinel_core::flow::FlowRule;
use sentinel_tonic::SentinelGrpcLayer;
use tonic::Code;

use crate::support::{
    breaker_engine, client, code, eventually, flow_engine, say, serve, watch, WATCH,
};

#[tokio::test]
async fn a_server_stream_held_open_is_in_flight_until_it_ends() {
    let sentinel = flow_engine(FlowRule::thread(WATCH, 1.0));
    let server = serve(Some(SentinelGrpcLayer::server(sentinel.clone()))).await;
    let mut client = client(server.addr, None).await;

    let mut first = watch(&mut client, 2, true, Code::Ok)
        .await
        .expect("admitted");
    assert_eq!(
        first.message().await.expect("a message").map(|m| m.seq),
        Some(0)
    );
    assert_eq!(
        first.message().await.expect("a message").map(|m| m.seq),
        Some(1)
    );
    // Its messages are sent, but the stream is open: it still holds the one slot.
    assert_eq!(
        sentinel.resource_stats(WATCH).expect("entered").concurrency,
        1
    );
    assert_eq!(
        code(watch(&mut client, 0, false, Code::Ok).await),
        Code::ResourceExhausted
    );

    server.echo.release.add_permits(1);
    assert!(first.message().await.expect("ends with OK").is_none());
    eventually("the stream's entry exits", || {
        sentinel.resource_stats(WATCH).expect("entered").concurrency == 0
    })
    .await;
    let mut second = watch(&mut client, 1, false, Code::Ok)
        .await
        .expect("the slot is free");
    assert!(second.message().await.expect("a message").is_some());
    assert!(second.message().await.expect("ends").is_none());
    assert!(
        say(&mut client, Code::Ok).await.is_ok(),
        "another method is another resource"
    );
}

#[tokio::test]
async fn a_cancelled_stream_frees_its_slot_without_counting_an_error() {
    let sentinel = flow_engine(FlowRule::thread(WATCH, 1.0));
    let server = serve(Some(SentinelGrpcLayer::server(sentinel.clone()))).await;
    let mut client = client(server.addr, None).await;

    let mut held = watch(&mut client, 1, true, Code::Ok)
        .await
        .expect("admitted");
    assert!(held.message().await.expect("a message").is_some());
    drop(held); // the client cancels: the server drops the response body
    eventually("the cancelled stream's entry exits", || {
        sentinel.resource_stats(WATCH).expect("entered").concurrency == 0
    })
    .await;
    let stats = sentinel.resource_stats(WATCH).expect("entered");
    assert_eq!(
        (stats.success_qps, stats.error_qps),
        (1.0, 0.0),
        "CANCELLED is not an error by default"
    );
    assert!(watch(&mut client, 0, false, Code::Ok).await.is_ok());
}

#[tokio::test]
async fn a_streams_status_in_its_trailers_feeds_the_breaker() {
    let sentinel = breaker_engine(WATCH, 1.0);
    let server = serve(Some(SentinelGrpcLayer::server(sentinel.clone()))).await;
    let mut client = client(server.addr, None).await;

    for _ in 0..2 {
        // Two messages, then INTERNAL in the trailers.
        let mut stream = watch(&mut client, 2, false, Code::Internal)
            .await
            .expect("admitted");
        assert!(stream.message().await.expect("a message").is_some());
        assert!(stream.message().await.expect("a message").is_some());
        assert_eq!(code(stream.message().await), Code::Internal);
    }
    eventually("both streams' errors are counted", || {
        sentinel.resource_stats(WATCH).expect("entered").error_qps == 2.0
    })
    .await;
    assert_eq!(
        code(watch(&mut client, 0, false, Code::Ok).await),
        Code::Unavailable
    );
}

#[tokio::test]
async fn a_client_stream_is_in_flight_until_the_caller_has_read_it() {
    let sentinel = flow_engine(FlowRule::thread(WATCH, 1.0));
    let server = serve(None).await;
    let layer = SentinelGrpcLayer::client(sentinel.clone());
    let mut client = client(server.addr, Some(layer)).await;

    let mut first = watch(&mut client, 1, true, Code::Ok)
        .await
        .expect("admitted");
    assert!(first.message().await.expect("a message").is_some());
    let blocked = watch(&mut client, 0, false, Code::Ok)
        .await
        .expect_err("one at a time");
    assert_eq!(blocked.code(), Code::ResourceExhausted);
    assert_eq!(
        server.echo.calls(),
        1,
        "the blocked stream never left the process"
    );
    server.echo.release.add_permits(1);
    assert!(first.message().await.expect("ends").is_none());
    assert_eq!(
        sentinel.resource_stats(WATCH).expect("entered").concurrency,
        0
    );
    assert!(watch(&mut client, 0, false, Code::Ok).await.is_ok());
}
