//! The dashboard's commands as Java answers them: the heartbeat, `metric`, the command
//! center's status codes and shapes, read-only access, who may call, the port, and POST
//! bodies.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeat_registers_with_every_field_within_one_interval() {
    let dashboard = Dashboard::with_registry().await;
    let registry = dashboard.registry.expect("a registry");
    let sentinel = Sentinel::new();
    let before = epoch_ms();
    let transport = start(
        &sentinel,
        config("heartbeat-app")
            .dashboard(registry.to_string())
            .heartbeat_interval(Duration::from_millis(200))
            .hostname("test-host"),
    )
    .await;
    wait_until("a heartbeat", || !dashboard.heartbeats().is_empty()).await;
    let form = &dashboard.heartbeats()[0];
    assert_eq!(form.get("app").map(String::as_str), Some("heartbeat-app"));
    assert_eq!(form.get("app_type").map(String::as_str), Some("0"));
    assert_eq!(form.get("hostname").map(String::as_str), Some("test-host"));
    assert_eq!(form.get("ip").map(String::as_str), Some("127.0.0.1"));
    assert_eq!(
        form.get("port"),
        Some(&transport.port().to_string()),
        "the bound command port"
    );
    assert_eq!(form.get("v").map(String::as_str), Some(PROTOCOL_VERSION));
    let v: Vec<u32> = PROTOCOL_VERSION
        .split('.')
        .map(|p| p.parse().expect("numeric"))
        .collect();
    assert!(
        v >= vec![1, 7, 1],
        "the dashboard POSTs setRules from 1.7.1"
    );
    let version: i64 = form["version"].parse().expect("epoch ms");
    assert!(
        version >= before,
        "version is epoch ms now: {version} < {before}"
    );
    assert_eq!(form.len(), 7, "{form:?}");
    // A second heartbeat follows within the interval's reach.
    wait_until("a second heartbeat", || dashboard.heartbeats().len() >= 2).await;
    transport.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metric_lines_count_a_known_burst_in_the_window_the_dashboard_asks() {
    let clock = FakeClock::at_ms(1_000_000);
    let sentinel = Sentinel::builder().clock(clock.clone()).build();
    sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps("burst", 5.0)])
        .expect("valid rules");
    let started = epoch_ms();
    let transport = start(&sentinel, config("metric-app")).await;
    let mut passed = 0;
    for _ in 0..8 {
        if let Ok(entry) = sentinel.entry("burst").enter() {
            passed += 1;
            drop(entry);
        }
    }
    assert_eq!(passed, 5);
    drop(sentinel.entry("GET|/pipe").enter());
    clock.advance_ms(1000);
    wait_until("the burst second collected", || {
        transport.series().newest_second() == Some(1_000_000)
    })
    .await;
    let dashboard = Dashboard::calling(local(&transport));
    // The dashboard's clock 15 s after the transport started: its window starts at the
    // burst's epoch second.
    let (start_ms, end_ms, body) = dashboard.fetch_metric(started + 15_000).await;
    let lines: Vec<&str> = body.lines().collect();
    for line in &lines {
        let fields: Vec<&str> = line.split('|').collect();
        assert_eq!(fields.len(), 10, "{line}");
        let ts: i64 = fields[0].parse().expect("a timestamp");
        assert_eq!(ts % 1000, 0, "whole seconds: {line}");
        if !fields[1].starts_with("__") {
            assert!(
                ts >= start_ms && ts <= end_ms,
                "{line} outside [{start_ms}, {end_ms}]"
            );
        }
    }
    let burst: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.contains("|burst|"))
        .collect();
    assert_eq!(burst.len(), 1, "{body}");
    let own = sentinel.resource_seconds("burst", 1_000_000, 1_001_000);
    let fields: Vec<u64> = burst[0]
        .split('|')
        .skip(2)
        .map(|f| f.parse().expect("a number"))
        .collect();
    assert_eq!(
        fields[..6],
        [
            own[0].pass,
            own[0].block,
            own[0].success,
            own[0].error,
            0,
            0
        ],
        "pass, block, success, exception, rt, occupied against the engine's counters"
    );
    assert_eq!(fields[..2], [5, 3]);
    assert!(
        lines.iter().any(|l| l.contains("|GET_/pipe|")),
        "`|` in a name becomes `_`: {body}"
    );
    // The same window asked again gives the same resource rows.
    let (_, _, again) = dashboard.fetch_metric(started + 15_000).await;
    let rows = |b: &str| -> Vec<String> {
        b.lines()
            .filter(|l| !l.contains("|__"))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(rows(&body), rows(&again));
    transport.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_answer_with_java_status_codes_and_shapes() {
    let sentinel = Sentinel::new();
    sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps("GET:/order", 10.0)])
        .expect("valid rules");
    drop(sentinel.entry("GET:/order").enter());
    let transport = start(&sentinel, config("shapes-app")).await;
    let dashboard = Dashboard::calling(local(&transport));
    assert_eq!(
        dashboard.get("version", &[]).await,
        (200, PROTOCOL_VERSION.to_owned())
    );
    let (status, body) = dashboard.get("nope", &[]).await;
    assert_eq!((status, body.as_str()), (400, "Unknown command `nope`"));
    let (status, body) = dashboard.get("getRules", &[("type", "bogus")]).await;
    assert_eq!((status, body.as_str()), (400, "invalid type"));
    let (status, body) = dashboard.get("getRules", &[("type", "FLOW")]).await;
    assert_eq!(status, 200);
    let rules: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(rules[0]["resource"], "GET:/order");
    assert_eq!(rules[0]["count"], 10.0);
    let (_, body) = dashboard.get("clusterNode", &[("type", "notZero")]).await;
    let nodes: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let node = &nodes[0];
    for key in [
        "resource",
        "threadNum",
        "passQps",
        "blockQps",
        "totalQps",
        "averageRt",
        "successQps",
        "exceptionQps",
        "oneMinutePass",
        "oneMinuteBlock",
        "oneMinuteException",
        "oneMinuteTotal",
        "timestamp",
    ] {
        assert!(node.get(key).is_some(), "NodeVo field {key}: {node}");
    }
    assert_eq!(node["oneMinutePass"], 1);
    let (_, body) = dashboard.get("jsonTree", &[]).await;
    let tree: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(tree[0]["resource"], "machine-root");
    assert_eq!(tree[2]["parentId"], tree[1]["id"]);
    let (_, body) = dashboard.get("systemStatus", &[]).await;
    let status: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    for key in ["rqps", "qps", "b", "r", "t"] {
        assert!(status.get(key).is_some(), "{key}: {status}");
    }
    let (_, body) = dashboard.get("getClusterMode", &[]).await;
    let mode: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(mode["mode"], -1);
    assert_eq!(
        dashboard.get("getSwitch", &[]).await.1,
        "Sentinel switch value: true"
    );
    let (_, body) = dashboard.get("api", &[]).await;
    let api: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert!(api
        .as_array()
        .is_some_and(|a| a.iter().any(|c| c["url"] == "/metric")));
    transport.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_refuses_set_rules_and_set_switch_with_a_clear_message() {
    let sentinel = Sentinel::new();
    let transport = start(&sentinel, config("read-only-app")).await;
    let dashboard = Dashboard::calling(local(&transport));
    let (status, body) = dashboard
        .set_rules("flow", r#"[{"resource":"a","count":1}]"#)
        .await
        .expect_err("refused");
    assert_eq!(status, 400);
    assert!(
        body.contains("read-only") && body.contains("setRules"),
        "{body}"
    );
    let (status, body) = dashboard.get("setSwitch", &[("value", "false")]).await;
    assert_eq!(status, 400);
    assert!(body.contains("read-only"), "{body}");
    assert!(sentinel.is_enabled());
    assert!(sentinel.flow_rules().rules().is_empty());
    transport.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_from_another_host_is_refused_unless_allowed() {
    // Another host, as far as the command center can tell: this host's outward address
    // calling loopback, while the service advertises a documentation address.
    let ip = outward_ip();
    let sentinel = Sentinel::new();
    let any = config("allow-app")
        .bind_ip(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
        .advertise_ip(IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7)));
    let closed = start(&sentinel, any.clone()).await;
    let dashboard = Dashboard::calling_from(local(&closed), ip);
    let (status, body) = dashboard.get("version", &[]).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains(&ip.to_string()), "{body}");
    // Loopback is always admitted.
    let (status, _) = Dashboard::calling(local(&closed)).get("version", &[]).await;
    assert_eq!(status, 200);
    closed.shutdown().await;
    let open = start(&sentinel, any.allow_clients([ip])).await;
    let dashboard = Dashboard::calling_from(local(&open), ip);
    assert_eq!(dashboard.get("version", &[]).await.0, 200);
    open.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_port_moves_to_the_next_and_binds_loopback_by_default() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = busy.local_addr().expect("its address").port();
    let sentinel = Sentinel::new();
    let transport = start(&sentinel, config("port-app").port(port)).await;
    assert!(transport.port() > port && transport.port() < port + 64);
    assert!(transport.local_addr().ip().is_loopback());
    transport.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_bodies_must_be_forms_with_a_length_as_in_java() {
    let sentinel = Sentinel::new();
    let transport = start(&sentinel, config("post-app")).await;
    let url = format!("http://{}/version", local(&transport));
    let http = reqwest::Client::new();
    let json = http
        .post(&url)
        .header("Content-Type", "application/json")
        .body("{}")
        .send()
        .await
        .expect("an answer");
    assert_eq!(json.status().as_u16(), 415);
    assert_eq!(
        json.text().await.unwrap_or_default(),
        "Only form-encoded post request is supported"
    );
    let empty = http.post(&url).send().await.expect("an answer");
    assert_eq!(empty.status().as_u16(), 411);
    // Query and form parameters together, `+` and `%xx` decoded, empty values dropped.
    let dashboard = Dashboard::calling(local(&transport));
    let (status, body) = dashboard
        .post("getRules?type=", &[("type", "flow"), ("unused", "")])
        .await;
    assert_eq!((status, body.as_str()), (200, "[]"));
    transport.shutdown().await;
}
