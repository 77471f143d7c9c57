//! The server's protocol behaviour against a fake token service (no Redis): pings and
//! namespaces, answers in order, bad input, idle clients, shutdown, the health endpoint.

mod support;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use sentinel_token_server::protocol::{
    msg_type, ParamFlowRequest, ParamValue, RequestBody, ResponseBody, Status,
};
use sentinel_token_server::TokenServer;
use support::{http_get, Client, Fake, WAIT};

async fn start(fake: Arc<Fake>, idle: Duration) -> TokenServer {
    TokenServer::builder()
        .bind(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
        .health_bind(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
        .idle_timeout(idle)
        .start(fake)
        .await
        .expect("server starts")
}

fn ping(namespace: Option<&str>) -> RequestBody {
    RequestBody::Ping {
        namespace: namespace.map(str::to_owned),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ping_counts_the_clients_of_its_namespace_and_a_blank_one_is_bad() {
    let server = start(Arc::default(), WAIT).await;
    let mut a1 = Client::connect(server.local_addr()).await;
    let mut a2 = Client::connect(server.local_addr()).await;
    let mut b = Client::connect(server.local_addr()).await;
    let r = a1.call(ping(Some("app-a"))).await;
    assert_eq!(
        (r.status, r.body),
        (Status::RESPONSE_OK, ResponseBody::Ping { connected: 1 })
    );
    assert_eq!(r.msg_type, msg_type::PING);
    assert_eq!(
        a2.call(ping(Some("app-a"))).await.body,
        ResponseBody::Ping { connected: 2 }
    );
    // Pinging again (the client's keep-alive) does not count twice.
    assert_eq!(
        a2.call(ping(Some("app-a"))).await.body,
        ResponseBody::Ping { connected: 2 }
    );
    assert_eq!(
        b.call(ping(Some("app-b"))).await.body,
        ResponseBody::Ping { connected: 1 }
    );
    let bad = b.call(ping(None)).await;
    assert_eq!(
        (bad.status, bad.body),
        (Status::RESPONSE_BAD, ResponseBody::Empty)
    );
    assert_eq!(
        server.clients(),
        [("app-a".to_owned(), 2), ("app-b".to_owned(), 1)]
    );
    // A client that leaves is no longer counted.
    drop(a1);
    tokio::time::timeout(WAIT, async {
        while server.clients() != [("app-a".to_owned(), 1), ("app-b".to_owned(), 1)] {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the closed connection leaves its namespace");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_requests_get_the_services_answer_with_their_ids() {
    let server = start(Arc::default(), WAIT).await;
    let mut c = Client::connect(server.local_addr()).await;
    let ok = c.flow(1, 1).await;
    assert_eq!(
        (ok.msg_type, ok.status, ok.body),
        (
            msg_type::FLOW,
            Status::OK,
            ResponseBody::Token {
                remaining: 9,
                wait_in_ms: 0
            }
        )
    );
    assert_eq!(c.flow(2, 1).await.status, Status::BLOCKED);
    assert_eq!(c.flow(3, 1).await.status, Status::NO_RULE_EXISTS);
    let param = c
        .call(RequestBody::ParamFlow(ParamFlowRequest {
            flow_id: 5,
            count: 1,
            params: vec![ParamValue::Str("key".into()), ParamValue::Int(1)],
        }))
        .await;
    // Sentinel's param-flow processor always sends waitInMs 0.
    assert_eq!(
        (param.msg_type, param.status, param.body),
        (
            msg_type::PARAM_FLOW,
            Status::OK,
            ResponseBody::Token {
                remaining: 2,
                wait_in_ms: 0
            }
        )
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_frames_get_no_answer_and_the_connection_and_other_clients_go_on() {
    let server = start(Arc::default(), WAIT).await;
    let mut bad = Client::connect(server.local_addr()).await;
    let mut good = Client::connect(server.local_addr()).await;
    // Shorter than a header; concurrent acquire (no codec in 1.8.9); unknown type 42; a
    // FLOW with 4 bytes of data; an oversized frame (2 000 bytes).
    bad.send_raw(&[0, 3, 1, 2, 3]).await;
    bad.send_raw(&[0, 9, 0, 0, 0, 5, 3, 0, 0, 0, 1]).await;
    bad.send_raw(&[0, 5, 0, 0, 0, 6, 42]).await;
    bad.send_raw(&[0, 9, 0, 0, 0, 7, 1, 0, 0, 0, 1]).await;
    let mut oversized = 2000u16.to_be_bytes().to_vec();
    oversized.extend_from_slice(&[0x55; 2000]);
    bad.send_raw(&oversized).await;
    assert_eq!(
        good.flow(1, 1).await.status,
        Status::OK,
        "other clients unaffected"
    );
    assert!(
        bad.silent_for(Duration::from_millis(200)).await,
        "no answer to bad frames"
    );
    // The same connection still answers, with the next request's id.
    assert_eq!(bad.flow(2, 1).await.status, Status::BLOCKED);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_sends_nothing_is_closed_after_the_idle_timeout() {
    let server = start(Arc::default(), Duration::from_millis(300)).await;
    let mut silent = Client::connect(server.local_addr()).await;
    let mut busy = Client::connect(server.local_addr()).await;
    let closed = tokio::spawn(async move { silent.recv().await });
    // A client that keeps asking stays connected meanwhile.
    while !closed.is_finished() {
        assert_eq!(busy.flow(1, 1).await.status, Status::OK);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        closed.await.expect("the reader task"),
        None,
        "closed by the server"
    );
    assert_eq!(busy.flow(1, 1).await.status, Status::OK);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_closes_connections_and_stops_listening() {
    let server = start(Arc::default(), WAIT).await;
    let addr = server.local_addr();
    let mut c = Client::connect(addr).await;
    assert_eq!(c.flow(1, 1).await.status, Status::OK);
    tokio::time::timeout(WAIT, server.shutdown())
        .await
        .expect("shutdown in time");
    assert_eq!(c.recv().await, None, "the connection is closed");
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "no longer listening"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_health_endpoint_follows_the_services_health() {
    let fake = Arc::new(Fake::default());
    let server = start(fake.clone(), WAIT).await;
    let health = server.health_addr().expect("asked for");
    let mut c = Client::connect(server.local_addr()).await;
    c.call(ping(Some("app"))).await;
    let up = http_get(health, "/health").await;
    assert!(up.starts_with("HTTP/1.1 200"), "{up}");
    assert!(
        up.ends_with(r#"{"status":"UP","clients":1,"reason":""}"#),
        "{up}"
    );
    fake.degraded.store(true, Ordering::SeqCst);
    let down = http_get(health, "/health").await;
    assert!(down.starts_with("HTTP/1.1 503"), "{down}");
    assert!(
        down.contains(r#""status":"DEGRADED""#) && down.contains("redis down"),
        "{down}"
    );
    assert!(http_get(health, "/other").await.starts_with("HTTP/1.1 404"));
    server.shutdown().await;
}
