//! What every request passes before a handler runs, for a page served on the application's
//! own (possibly public) port: the Host header against the allowed hosts (DNS rebinding),
//! the application's read check, and the security headers every answer carries (a
//! Content-Security-Policy that admits only the page's own inline script and style,
//! `frame-ancestors 'none'`).

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::{Arc, LazyLock};

use axum::extract::{Request, State as AxumState};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use sha2::{Digest, Sha256};

use crate::edit::AuthHook;
use crate::state::State;

/// Which `Host` headers the console answers.
#[derive(Debug, Clone)]
pub(crate) enum AllowedHosts {
    /// Any host (`ConsoleBuilder::allow_any_host`).
    Any,
    /// Loopback names (`localhost`, `*.localhost`), IP literals, and these names
    /// (lower-case, without port).
    Names(BTreeSet<String>),
}

impl Default for AllowedHosts {
    fn default() -> Self {
        AllowedHosts::Names(BTreeSet::new())
    }
}

impl AllowedHosts {
    /// Whether `host` (a `Host` header value, with or without a port) is allowed. A name an
    /// attacker's DNS can point at this machine is refused unless configured; an IP literal
    /// is not such a name (a page on an attacker's IP has that IP as its origin).
    pub(crate) fn allows(&self, host: &str) -> bool {
        let names = match self {
            AllowedHosts::Any => return true,
            AllowedHosts::Names(names) => names,
        };
        let name = host_name(host).to_ascii_lowercase();
        let name = name.trim_end_matches('.');
        if name.is_empty() {
            return false;
        }
        name == "localhost"
            || name.ends_with(".localhost")
            || name.parse::<IpAddr>().is_ok()
            || names.contains(name)
    }
}

/// The host of a `Host` header value: `[::1]:8721` is `::1`, `example.com:80` is
/// `example.com`.
fn host_name(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default();
    }
    match host.rsplit_once(':') {
        // One colon: a port. More: an unbracketed IPv6 address.
        Some((name, port)) if !name.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => {
            name
        }
        _ => host,
    }
}

/// The checks and headers of every request.
pub(crate) struct Guard {
    pub(crate) hosts: AllowedHosts,
    pub(crate) read: Option<AuthHook>,
}

/// The Content-Security-Policy of every answer: the page's own inline script and style (by
/// their SHA-256), requests to its own origin only, no frames, no forms posted elsewhere.
pub(crate) static CONTENT_SECURITY_POLICY: LazyLock<HeaderValue> = LazyLock::new(|| {
    let page = String::from_utf8_lossy(crate::PAGE);
    let hash = |open: &str, close: &str| {
        let body = page
            .split_once(open)
            .and_then(|(_, rest)| rest.split_once(close))
            .map_or("", |(body, _)| body);
        let digest = Sha256::digest(body.as_bytes());
        format!(
            "'sha256-{}'",
            base64::engine::general_purpose::STANDARD.encode(digest)
        )
    };
    let policy = format!(
        "default-src 'none'; script-src {}; style-src {}; connect-src 'self'; img-src 'self' data:; \
         base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        hash("<script>", "</script>"),
        hash("<style>", "</style>"),
    );
    HeaderValue::from_str(&policy)
        .unwrap_or_else(|_| HeaderValue::from_static("default-src 'none'; frame-ancestors 'none'"))
});

fn refused(status: StatusCode, message: String) -> Response {
    (status, axum::Json(serde_json::json!({ "error": message }))).into_response()
}

/// The middleware: refuses a disallowed host (421) or a read the application's hook says no
/// to (403), and sets the security headers on every answer.
pub(crate) async fn check(
    AxumState(state): AxumState<Arc<State>>,
    request: Request,
    next: Next,
) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned)
        .or_else(|| request.uri().authority().map(|a| a.as_str().to_owned()));
    let mut response = match host {
        // A request without a Host (HTTP/1.0, a test's own request) comes from no browser.
        Some(host) if !state.guard.hosts.allows(&host) => {
            tracing::warn!(%host, "sentinel console: refused a request for a host not allowed (allow it with ConsoleBuilder::allowed_hosts)");
            refused(
                StatusCode::MISDIRECTED_REQUEST,
                format!("host {host:?} is not allowed: the console answers loopback names and IP addresses, and the names given to ConsoleBuilder::allowed_hosts"),
            )
        }
        _ if !readable(&state.guard, request.headers()) => refused(
            StatusCode::FORBIDDEN,
            "not allowed to read the console".to_owned(),
        ),
        _ => next.run(request).await,
    };
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        CONTENT_SECURITY_POLICY.clone(),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

fn readable(guard: &Guard, headers: &HeaderMap) -> bool {
    guard.read.as_ref().is_none_or(|hook| hook(headers))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_and_ip_literals_are_allowed_by_default_other_names_only_when_given() {
        let default = AllowedHosts::default();
        for host in [
            "localhost",
            "localhost:8721",
            "LOCALHOST.",
            "app.localhost:3000",
            "127.0.0.1:3000",
            "10.1.2.3",
            "[::1]:8721",
            "::1",
        ] {
            assert!(default.allows(host), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:3000",
            "",
            ":80",
            "localhost.evil.example",
        ] {
            assert!(!default.allows(host), "{host}");
        }
        let named = AllowedHosts::Names(["console.example.com".to_owned()].into());
        assert!(named.allows("Console.Example.com:443"));
        assert!(!named.allows("other.example.com"));
        assert!(AllowedHosts::Any.allows("evil.example"));
    }

    #[test]
    fn the_policy_names_the_pages_script_and_style_and_forbids_frames() {
        let policy = CONTENT_SECURITY_POLICY.to_str().unwrap_or_default();
        assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
        assert_eq!(policy.matches("'sha256-").count(), 2, "{policy}");
        assert!(!policy.contains("unsafe-inline"), "{policy}");
    }
}
