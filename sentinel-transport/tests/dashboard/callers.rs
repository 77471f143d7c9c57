//! No silent empty pages: a dashboard on this host, calling back the address the heartbeat
//! advertises for a `0.0.0.0` bind, is admitted; so are the configured dashboards' own
//! addresses; other callers are refused unless allowed (issue #46, point 5).

use super::*;

/// A caller that is not this host, as far as the command center can tell: this host's
/// outward address calling loopback, while the service advertises a documentation
/// address.
const ADVERTISED: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7));

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dashboard_on_this_host_calling_back_the_advertised_address_is_admitted() {
    let dashboard = Dashboard::with_registry().await;
    let registry = dashboard.registry.expect("a registry");
    let sentinel = Sentinel::new();
    sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps("GET:/shown", 3.0)])
        .expect("valid rules");
    let transport = start(
        &sentinel,
        config("same-host-app")
            .bind_ip(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
            .dashboard(registry.to_string())
            .heartbeat_interval(Duration::from_millis(200)),
    )
    .await;
    wait_until("a heartbeat", || !dashboard.heartbeats().is_empty()).await;
    let form = &dashboard.heartbeats()[0];
    let ip: IpAddr = form["ip"].parse().expect("an address");
    assert!(!ip.is_loopback(), "a 0.0.0.0 bind advertises {ip}");
    let port: u16 = form["port"].parse().expect("a port");
    // The dashboard calls the machine back where the heartbeat says.
    let callback = Dashboard::calling(SocketAddr::new(ip, port));
    let (status, body) = callback.get("getRules", &[("type", "flow")]).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("GET:/shown"), "{body}");
    assert_eq!(transport.status().refused, 0);
    transport.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_dashboards_own_address_is_admitted_by_default() {
    let ip = outward_ip();
    let sentinel = Sentinel::new();
    // Port 9 (discard): nothing answers the heartbeat there; its address is what counts.
    let any = config("dashboard-address-app")
        .bind_ip(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
        .advertise_ip(ADVERTISED)
        .dashboard(format!("{ip}:9"))
        .heartbeat_interval(Duration::from_millis(200));
    let admitted = start(&sentinel, any.clone()).await;
    let dashboard = Dashboard::calling_from(local(&admitted), ip);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (status, body) = dashboard.get("version", &[]).await;
        if status == 200 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the dashboard's address is still refused: {status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    admitted.shutdown().await;
    let closed = start(&sentinel, any.allow_dashboards(false)).await;
    let dashboard = Dashboard::calling_from(local(&closed), ip);
    assert_eq!(dashboard.get("version", &[]).await.0, 403);
    closed.shutdown().await;
}
