//! The heartbeat: a form POST to every dashboard's `/registry/machine`, as Sentinel Java's
//! `SimpleHttpHeartbeatSender` sends it.
//!
//! The form: `app`, `app_type` (0, a plain service), `hostname`, `ip` and `port` (where the
//! dashboard calls the command center back), `v` and `version` (epoch ms now; the
//! dashboard keeps the newest). `v` is [`PROTOCOL_VERSION`], the
//! Sentinel Java version whose command protocol this crate speaks: the dashboard reads it to
//! choose how to call the machine, and from 1.6.0 it sends `setRules` and
//! `setParamFlowRules` as form POSTs (long rule lists do not fit in a URL), from 1.7.1 with
//! `Content-Type: application/x-www-form-urlencoded; charset=UTF-8`. An older or unknown
//! version would make it fall back to GET with the rules in the query string.
//!
//! Java sends to one dashboard of its list; this sends to each, so that several dashboards
//! (a blue/green pair) all list the machine.

use std::net::IpAddr;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use crate::error::TransportError;
use crate::metric::epoch_now_ms;

/// The Sentinel Java version whose command protocol this crate speaks, sent as the
/// heartbeat's `v` and answered by `version` (see the heartbeat notes in docs/dashboard.md).
pub const PROTOCOL_VERSION: &str = "1.8.9";

/// The full heartbeat URL of a dashboard address.
pub(crate) fn dashboard_url(address: &str, path: &str) -> Result<String, TransportError> {
    let address = address.trim().trim_end_matches('/');
    let bad = |message: String| TransportError::Config {
        setting: "dashboard",
        message,
    };
    if address.is_empty() {
        return Err(bad("an empty dashboard address".into()));
    }
    let base = if let Some(rest) = address.strip_prefix("https://") {
        if !cfg!(feature = "tls") {
            return Err(bad(format!(
                "{address}: https needs sentinel-transport's `tls` feature"
            )));
        }
        format!("https://{rest}")
    } else if address.starts_with("http://") {
        address.to_owned()
    } else if address.contains("://") {
        return Err(bad(format!("{address}: only http and https dashboards")));
    } else {
        format!("http://{address}")
    };
    Ok(format!("{base}{path}"))
}

/// What every heartbeat carries but the time.
#[derive(Debug, Clone)]
pub(crate) struct Heartbeat {
    pub(crate) app: String,
    pub(crate) hostname: String,
    pub(crate) ip: IpAddr,
    pub(crate) port: u16,
}

impl Heartbeat {
    /// The form fields, `version` being now.
    pub(crate) fn form(&self) -> Vec<(&'static str, String)> {
        vec![
            ("app", self.app.clone()),
            ("app_type", "0".to_owned()),
            ("hostname", self.hostname.clone()),
            ("ip", self.ip.to_string()),
            ("port", self.port.to_string()),
            ("v", PROTOCOL_VERSION.to_owned()),
            ("version", epoch_now_ms().to_string()),
        ]
    }
}

/// The addresses the dashboards at `urls` resolve to now (a name that does not resolve is
/// skipped, and logged).
pub(crate) async fn resolve(urls: &[String]) -> Vec<IpAddr> {
    let mut ips = Vec::new();
    for url in urls {
        let Some((host, port)) = reqwest::Url::parse(url)
            .ok()
            .and_then(|url| Some((url.host_str()?.to_owned(), url.port_or_known_default()?)))
        else {
            continue;
        };
        let lookup = tokio::net::lookup_host(format!("{host}:{port}"));
        match tokio::time::timeout(Duration::from_secs(2), lookup).await {
            Ok(Ok(addrs)) => ips.extend(addrs.map(|a| a.ip().to_canonical())),
            Ok(Err(error)) => {
                tracing::debug!(%host, %error, "cannot resolve the dashboard's address")
            }
            Err(_) => tracing::debug!(%host, "the dashboard's address did not resolve in time"),
        }
    }
    ips.sort();
    ips.dedup();
    ips
}

/// Sends a heartbeat to every URL every `every`, from now until the task is aborted.
/// Before each round, when `dashboards` is given, the dashboards' addresses are resolved
/// into it (the command center admits them).
pub(crate) async fn run(
    client: reqwest::Client,
    urls: Vec<String>,
    heartbeat: Heartbeat,
    every: Duration,
    dashboards: Option<Arc<RwLock<Vec<IpAddr>>>>,
) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        if let Some(dashboards) = &dashboards {
            let ips = resolve(&urls).await;
            *dashboards.write().unwrap_or_else(PoisonError::into_inner) = ips;
        }
        let form = heartbeat.form();
        for url in &urls {
            match client.post(url).form(&form).send().await {
                Ok(response) if response.status().is_success() => {
                    tracing::trace!(%url, "heartbeat sent");
                }
                Ok(response) => {
                    tracing::warn!(%url, status = %response.status(), "the dashboard refused the heartbeat");
                }
                Err(error) => {
                    tracing::warn!(%url, %error, "cannot send the heartbeat");
                }
            }
        }
    }
}

/// This machine's host name: `/proc/sys/kernel/hostname` or `$HOSTNAME`, else `localhost`.
pub(crate) fn system_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

/// The address other hosts see this machine at: the local end of a UDP socket "connected"
/// to a public address (nothing is sent), else loopback.
pub(crate) fn outward_ip() -> IpAddr {
    std::net::UdpSocket::bind("0.0.0.0:0")
        .and_then(|s| {
            s.connect("192.0.2.1:9")?;
            s.local_addr()
        })
        .map(|a| a.ip())
        .unwrap_or(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_as_java_writes_them_get_http() {
        let url = dashboard_url("localhost:8080", "/registry/machine").expect("valid");
        assert_eq!(url, "http://localhost:8080/registry/machine");
        let url = dashboard_url("http://d:1/", "/x").expect("valid");
        assert_eq!(url, "http://d:1/x");
        assert!(dashboard_url("ftp://d", "/x").is_err());
        // https only with the `tls` feature, which brings the TLS client.
        assert_eq!(
            dashboard_url("https://d:8443", "/x").is_ok(),
            cfg!(feature = "tls")
        );
        assert!(dashboard_url(" ", "/x").is_err());
    }

    #[tokio::test]
    async fn dashboards_resolve_to_their_addresses() {
        let urls = [
            dashboard_url("127.0.0.1:8080", "/r").expect("valid"),
            dashboard_url("http://[::1]:8080", "/r").expect("valid"),
        ];
        let ips = resolve(&urls).await;
        assert!(
            ips.contains(&IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)),
            "{ips:?}"
        );
        assert!(
            ips.contains(&IpAddr::V6(std::net::Ipv6Addr::LOCALHOST)),
            "{ips:?}"
        );
    }

    #[test]
    fn the_form_has_every_field_the_dashboard_reads() {
        let hb = Heartbeat {
            app: "svc".into(),
            hostname: "h".into(),
            ip: IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
            port: 8719,
        };
        let keys: Vec<&str> = hb.form().iter().map(|(k, _)| *k).collect();
        assert_eq!(
            keys,
            ["app", "app_type", "hostname", "ip", "port", "v", "version"]
        );
    }
}
