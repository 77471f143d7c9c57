//! The Sentinel dashboard's cluster pages see the token server as Sentinel's own: its
//! commands registered on a real `sentinel-transport` command center, called over HTTP as
//! the dashboard's `SentinelApiClient` calls them (`getClusterMode`, then
//! `cluster/server/info` for a machine whose `serverAvailable` is true), with the fields its
//! `ClusterServerStateVO`, `ConnectionGroupVO` and `ClusterMetricNode` read.

mod support;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;

use sentinel_core::Sentinel;
use sentinel_token_server::protocol::RequestBody;
use sentinel_token_server::TokenServer;
use sentinel_transport::{Transport, TransportConfig};
use serde_json::Value;
use support::{http_get, Client, Fake, WAIT};

/// `GET path` on the command center: the status code and the body.
async fn command(transport: &Transport, path: &str) -> (u16, String) {
    let addr = SocketAddr::from(([127, 0, 0, 1], transport.port()));
    let text = http_get(addr, path).await;
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (status, body)
}

async fn json(transport: &Transport, path: &str) -> Value {
    let (status, body) = command(transport, path).await;
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
}

async fn ping(client: &mut Client, namespace: &str) {
    client
        .call(RequestBody::Ping {
            namespace: Some(namespace.to_owned()),
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_sees_a_token_server_with_its_port_namespaces_clients_and_flows() {
    let server = TokenServer::builder()
        .bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .idle_timeout(std::time::Duration::from_secs(90))
        .start(Arc::new(Fake::default()))
        .await
        .expect("server starts");
    let rules = Sentinel::new();
    let config = server
        .dashboard_commands()
        .register(TransportConfig::builder("token-server-app").port(0))
        .build()
        .expect("a valid config");
    let transport = tokio::time::timeout(WAIT, Transport::start(rules, config))
        .await
        .expect("in time")
        .expect("the transport starts");

    // Three clients: two in `orders`, one in `pay`.
    let mut clients = Vec::new();
    for namespace in ["orders", "orders", "pay"] {
        let mut client = Client::connect(server.local_addr()).await;
        ping(&mut client, namespace).await;
        clients.push(client);
    }

    let mode = json(&transport, "/getClusterMode").await;
    assert_eq!(mode["mode"], 1, "{mode}");
    assert_eq!(mode["serverAvailable"], true, "{mode}");
    assert_eq!(mode["clientAvailable"], false, "{mode}");
    assert!(
        mode["lastModified"].as_i64().is_some_and(|t| t > 0),
        "{mode}"
    );

    let info = json(&transport, "/cluster/server/info").await;
    assert_eq!(info["port"], server.local_addr().port(), "{info}");
    assert_eq!(info["transport"]["port"], server.local_addr().port());
    assert_eq!(info["transport"]["idleSeconds"], 90);
    assert_eq!(info["appName"], "token-server-app");
    assert_eq!(info["embedded"], false);
    assert_eq!(info["namespaceSet"], serde_json::json!(["orders", "pay"]));
    let groups = info["connection"].as_array().expect("connection groups");
    let orders = groups
        .iter()
        .find(|g| g["namespace"] == "orders")
        .expect("the orders group");
    assert_eq!(orders["connectedCount"], 2, "{info}");
    let addresses: BTreeSet<&str> = orders["connectionSet"]
        .as_array()
        .expect("a connection set")
        .iter()
        .map(|c| {
            assert_eq!(c["host"], "127.0.0.1");
            c["address"].as_str().expect("an address")
        })
        .collect();
    assert_eq!(addresses.len(), 2, "each client by its own ip:port");
    assert!(addresses.iter().all(|a| a.starts_with("127.0.0.1:")));
    // The dashboard sums `connectedCount` for the server's client count.
    let total: i64 = groups
        .iter()
        .filter_map(|g| g["connectedCount"].as_i64())
        .sum();
    assert_eq!(total, 3);

    let config = json(&transport, "/cluster/server/fetchConfig").await;
    assert_eq!(config["transport"]["port"], server.local_addr().port());
    assert_eq!(config["flow"]["exceedCount"], 1.0);
    assert_eq!(config["namespaceSet"], serde_json::json!(["orders", "pay"]));
    let one = json(&transport, "/cluster/server/fetchConfig?namespace=orders").await;
    assert!(
        one.get("flow").is_some() && one.get("transport").is_none(),
        "{one}"
    );

    // Every flowId served, under its resource, with the last second's decisions.
    let metrics = json(&transport, "/cluster/server/metricList?namespace=orders").await;
    let nodes = metrics["GET:/orders"]
        .as_array()
        .expect("the resource's nodes");
    let by_id: Vec<(i64, f64, f64)> = nodes
        .iter()
        .map(|n| {
            (
                n["flowId"].as_i64().expect("flowId"),
                n["passQps"].as_f64().expect("passQps"),
                n["blockQps"].as_f64().expect("blockQps"),
            )
        })
        .collect();
    assert_eq!(by_id, [(1, 9.0, 2.0), (2, 0.0, 4.0)]);
    let (status, body) = command(&transport, "/cluster/server/metricList").await;
    assert_eq!(
        (status, body.as_str()),
        (400, "failed: namespace cannot be empty")
    );

    let rules = json(&transport, "/cluster/server/flowRules").await;
    let ids: Vec<i64> = rules
        .as_array()
        .expect("a rule list")
        .iter()
        .filter_map(|r| r["clusterConfig"]["flowId"].as_i64())
        .collect();
    assert_eq!(ids, [1, 2]);
    assert_eq!(
        json(&transport, "/cluster/server/paramRules").await,
        serde_json::json!([])
    );

    // A client that leaves is no longer listed.
    clients.pop();
    let mut left = false;
    for _ in 0..100 {
        let info = json(&transport, "/cluster/server/info").await;
        if info["namespaceSet"] == serde_json::json!(["orders"]) {
            left = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(left, "the `pay` client's namespace went away with it");

    transport.shutdown().await;
    server.shutdown().await;
}
