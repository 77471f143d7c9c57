//! The command center: Java's paths, parameters, status codes and bodies over HTTP, for the
//! callers the allowlist admits.
//!
//! A request names its command by its path (`/metric`, `/cluster/server/info`...). Its
//! parameters are the query's, then (for a POST) the form body's, decoded as Java decodes
//! them: `+` and `%xx`, keys and values trimmed, empty ones dropped. A POST body that is not
//! a form is 415, one without a length 411, as Java answers. The body is never logged: only
//! the command and the caller are.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, PoisonError, RwLock};

use axum::body::Bytes;
use axum::extract::connect_info::Connected;
use axum::extract::{ConnectInfo, State};
use axum::http::{header, HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::serve::IncomingStream;
use sentinel_core::{RuleFamily, Sentinel};
use serde_json::json;

use crate::commands::{CommandRequest, CommandResponse, Registered};
use crate::error::EditError;
use crate::heartbeat::PROTOCOL_VERSION;
use crate::metric::{MetricQuery, Metrics};
use crate::nodes;
use crate::rules::{self, Edited, Edits};
use crate::status::{RefusalReason, Refusals};

/// What every request reads.
#[derive(Debug)]
pub(crate) struct Center {
    pub(crate) sentinel: Sentinel,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) edits: Edits,
    pub(crate) admission: Admission,
    pub(crate) refusals: Arc<Refusals>,
    pub(crate) hostname: String,
    pub(crate) ip: IpAddr,
    pub(crate) app: String,
    /// The registered commands, by name.
    pub(crate) commands: HashMap<String, Registered>,
}

impl Center {
    /// The command a path names, as a bounded label: a built-in or registered command's
    /// name, `other` for none.
    pub(crate) fn label<'a>(&'a self, path: &str) -> &'a str {
        match self.commands.get_key_value(path) {
            Some((name, _)) => name,
            None => known_command(path),
        }
    }
}

/// Who may call: loopback, this host, the configured dashboards and the allowed clients.
#[derive(Debug, Default)]
pub(crate) struct Admission {
    /// [`allow_clients`](crate::TransportConfigBuilder::allow_clients), canonical.
    pub(crate) allowed: Vec<IpAddr>,
    /// The addresses the configured dashboards resolve to (refreshed with each heartbeat),
    /// unless [`allow_dashboards`](crate::TransportConfigBuilder::allow_dashboards) is off.
    pub(crate) dashboards: Arc<RwLock<Vec<IpAddr>>>,
}

impl Admission {
    /// Whether `caller`, connected to this host's `local` address, may call. A caller
    /// whose address is the one it connected to is a process of this host (the kernel
    /// picks the destination as the source of a local connection; a packet from outside
    /// cannot carry a local source address through a TCP handshake): a dashboard on this
    /// host calling back the advertised address of a `0.0.0.0` bind. (The advertised
    /// address itself proves nothing: behind a NAT that rewrites sources to it, every
    /// caller would have it.)
    pub(crate) fn admits(&self, caller: IpAddr, local: Option<IpAddr>) -> bool {
        caller.is_loopback()
            || local.is_some_and(|local| local.to_canonical() == caller)
            || self.allowed.contains(&caller)
            || self
                .dashboards
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .contains(&caller)
    }
}

/// A connection's two ends.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peer {
    remote: SocketAddr,
    local: Option<SocketAddr>,
}

impl Connected<IncomingStream<'_, tokio::net::TcpListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, tokio::net::TcpListener>) -> Self {
        Self {
            remote: *stream.remote_addr(),
            local: stream.io().local_addr().ok(),
        }
    }
}

/// The built-in command a path names, as a bounded label: `other` for none.
pub(crate) fn known_command(path: &str) -> &'static str {
    COMMANDS
        .iter()
        .map(|(name, _)| *name)
        .find(|name| *name == path)
        .unwrap_or("other")
}

/// Every command served, with what it does (the `api` command lists them).
pub(crate) const COMMANDS: &[(&str, &str)] = &[
    ("api", "the commands this command center serves"),
    ("version", "the Sentinel protocol version served"),
    ("basicInfo", "this machine's host name and address"),
    (
        "metric",
        "per-second statistics: startTime, endTime (or maxLines), identity",
    ),
    ("jsonTree", "the node tree from the root, as NodeVo"),
    (
        "clusterNode",
        "every resource's node as NodeVo; type=notZero skips idle ones",
    ),
    (
        "clusterNodeById",
        "one resource's node as NodeVo: id={resource}",
    ),
    ("systemStatus", "the inbound node's rates"),
    (
        "getRules",
        "the active rules of type={flow|degrade|system|authority}",
    ),
    (
        "setRules",
        "replaces the rules of type={...} with data={json} (read-write only)",
    ),
    ("getParamFlowRules", "the active parameter flow rules"),
    (
        "setParamFlowRules",
        "replaces the parameter flow rules with data={json} (read-write only)",
    ),
    ("getClusterMode", "this engine's cluster flow control mode"),
    ("getSwitch", "Sentinel's global switch"),
    (
        "setSwitch",
        "sets Sentinel's global switch: value={true|false} (read-write only)",
    ),
];

/// An answer: Java's status and plain-text body.
fn answer(status: StatusCode, body: impl Into<String>) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body.into(),
    )
        .into_response()
}

fn ok(body: impl Into<String>) -> Response {
    answer(StatusCode::OK, body)
}

fn failure(message: impl Into<String>) -> Response {
    answer(StatusCode::BAD_REQUEST, message)
}

/// Java's parameter decoding for one `a=1&b=2` string.
fn parse_params(text: &str, into: &mut HashMap<String, String>) {
    let text = text.split('#').next().unwrap_or_default();
    for (key, value) in form_urlencoded::parse(text.as_bytes()) {
        let (key, value) = (key.trim(), value.trim());
        if !key.is_empty() && !value.is_empty() {
            into.insert(key.to_owned(), value.to_owned());
        }
    }
}

fn is_form(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_none_or(|v| {
            v.to_ascii_lowercase()
                .contains("application/x-www-form-urlencoded")
        })
}

/// The one handler: admission, parameters, dispatch.
pub(crate) async fn handle(
    State(center): State<Arc<Center>>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let caller = peer.remote.ip().to_canonical();
    let command = uri.path().trim_start_matches('/').to_owned();
    if !center
        .admission
        .admits(caller, peer.local.map(|local| local.ip()))
    {
        let message = format!(
            "Forbidden: {caller} is not loopback, this host, a configured dashboard or an \
             allowed client; TransportConfigBuilder::allow_clients admits it"
        );
        center.refusals.refused(
            center.label(&command),
            RefusalReason::Forbidden,
            caller,
            &message,
        );
        return answer(StatusCode::FORBIDDEN, message);
    }
    let mut params = HashMap::new();
    if let Some(query) = uri.query() {
        parse_params(query, &mut params);
    }
    if method == Method::POST {
        if !is_form(&headers) {
            return answer(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "Only form-encoded post request is supported",
            );
        }
        if body.is_empty() {
            return answer(StatusCode::LENGTH_REQUIRED, "No legal Content-Length");
        }
        parse_params(&String::from_utf8_lossy(&body), &mut params);
    }
    tracing::debug!(%caller, %command, "command");
    if command.trim().is_empty() {
        return failure("Invalid command");
    }
    dispatch(&center, &command, &params, caller).await
}

fn param<'a>(params: &'a HashMap<String, String>, name: &str) -> Option<&'a str> {
    params.get(name).map(String::as_str)
}

/// A numeric parameter; the error is the 400 message.
fn number<T: std::str::FromStr>(
    params: &HashMap<String, String>,
    name: &str,
) -> Result<Option<T>, String> {
    match param(params, name) {
        None => Ok(None),
        Some(text) => text
            .parse()
            .map(Some)
            .map_err(|_| format!("bad parameter `{name}`: {text:?} is not a number")),
    }
}

/// A refused edit command: counted, then answered 400 with `error`'s text.
fn refused(center: &Center, command: &str, caller: IpAddr, error: &EditError) -> Response {
    let message = error.to_string();
    center
        .refusals
        .refused(center.label(command), error.reason(), caller, &message);
    failure(message)
}

async fn dispatch(
    center: &Center,
    command: &str,
    params: &HashMap<String, String>,
    caller: IpAddr,
) -> Response {
    let sentinel = &center.sentinel;
    if let Some(registered) = center.commands.get(command) {
        return registered_command(center, registered, params, caller);
    }
    match command {
        "version" => ok(PROTOCOL_VERSION),
        "api" => {
            let registered = center
                .commands
                .values()
                .filter(|c| !COMMANDS.iter().any(|(name, _)| *name == c.name))
                .map(|c| (c.name.as_str(), c.description.as_str()));
            let list: Vec<_> = COMMANDS
                .iter()
                .map(|(name, desc)| (*name, *desc))
                .chain(registered)
                .map(|(name, desc)| json!({ "url": format!("/{name}"), "desc": desc }))
                .collect();
            ok(serde_json::Value::Array(list).to_string())
        }
        "basicInfo" => ok(format!(
            "{{\n\t\"machine\": {},\n\t\"ip\": \"{}\"\n}}",
            json!(center.hostname),
            center.ip
        )),
        "metric" => {
            let query = (|| {
                Ok::<_, String>(MetricQuery {
                    start: number(params, "startTime")?,
                    end: number(params, "endTime")?,
                    max_lines: number(params, "maxLines")?,
                    identity: param(params, "identity").map(str::to_owned),
                })
            })();
            match query {
                Ok(query) => ok(center.metrics.lines(sentinel, &query)),
                Err(message) => failure(message),
            }
        }
        "jsonTree" => ok(nodes::json_tree(sentinel)),
        "clusterNode" => ok(nodes::cluster_nodes(
            sentinel,
            param(params, "type").is_some_and(|t| t.eq_ignore_ascii_case("notZero")),
        )),
        "clusterNodeById" => match param(params, "id") {
            Some(id) => ok(nodes::cluster_node_by_id(sentinel, id)),
            None => failure("Invalid parameter: empty clusterNode name"),
        },
        "systemStatus" => ok(nodes::system_status(sentinel)),
        "getRules" => match rules::family_of_type(param(params, "type")) {
            Some(family) => {
                center.edits.note_read(sentinel, family, caller).await;
                ok(rules::active_json(sentinel, family))
            }
            None => failure("invalid type"),
        },
        "getParamFlowRules" => {
            center
                .edits
                .note_read(sentinel, RuleFamily::ParamFlow, caller)
                .await;
            ok(rules::active_json(sentinel, RuleFamily::ParamFlow))
        }
        "setRules" => {
            let Some(family) = rules::family_of_type(param(params, "type")) else {
                let error = if center.edits.writable() {
                    EditError::InvalidType
                } else {
                    EditError::ReadOnly {
                        command: "setRules".into(),
                    }
                };
                return refused(center, command, caller, &error);
            };
            edit(center, "setRules", family, param(params, "data"), caller).await
        }
        "setParamFlowRules" => {
            edit(
                center,
                "setParamFlowRules",
                RuleFamily::ParamFlow,
                param(params, "data"),
                caller,
            )
            .await
        }
        "getClusterMode" => ok(json!({
            // Java's ClusterStateManager mode: -1, no token client or server. A cluster
            // backend (the Redis one) shares limits without Sentinel's token protocol, so
            // the dashboard has nothing to configure; `sharedLimits` says it is there.
            "mode": -1,
            "lastModified": -1,
            "clientAvailable": false,
            "serverAvailable": false,
            "sharedLimits": sentinel.has_cluster_backend(),
        })
        .to_string()),
        "getSwitch" => ok(format!("Sentinel switch value: {}", sentinel.is_enabled())),
        "setSwitch" => {
            if !center.edits.writable() {
                return refused(
                    center,
                    command,
                    caller,
                    &EditError::ReadOnly {
                        command: "setSwitch".into(),
                    },
                );
            }
            let value = param(params, "value");
            // Java's Boolean.valueOf: "true" in any case is on, anything else off.
            let on = value.is_some_and(|v| v.eq_ignore_ascii_case("true"));
            sentinel.set_enabled(on);
            tracing::info!(on, "Sentinel switch set from the dashboard");
            ok(format!(
                "Sentinel set switch value: {}",
                value.unwrap_or("null")
            ))
        }
        other => failure(format!("Unknown command `{other}`")),
    }
}

/// A registered command: a write one only with read-write access.
fn registered_command(
    center: &Center,
    registered: &Registered,
    params: &HashMap<String, String>,
    caller: IpAddr,
) -> Response {
    if registered.writes && !center.edits.writable() {
        let error = EditError::ReadOnly {
            command: registered.name.clone(),
        };
        return refused(center, &registered.name, caller, &error);
    }
    let request = CommandRequest {
        params,
        caller,
        app: &center.app,
    };
    match registered.handler.handle(&request) {
        CommandResponse::Success(body) => ok(body),
        CommandResponse::Failure(message) => failure(message),
    }
}

async fn edit(
    center: &Center,
    command: &'static str,
    family: RuleFamily,
    data: Option<&str>,
    caller: IpAddr,
) -> Response {
    match center
        .edits
        .set_rules(&center.sentinel, command, family, data, caller)
        .await
    {
        Ok(Edited::InMemory | Edited::Unchanged | Edited::Applied) => ok("success"),
        Err(error) => refused(center, command, caller, &error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    #[test]
    fn admitted_are_loopback_this_host_dashboards_and_allowed_clients_only() {
        let host = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 5));
        let dashboard = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 8));
        let allowed = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 9));
        let stranger = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 66));
        let admission = Admission {
            allowed: vec![allowed],
            dashboards: Arc::new(RwLock::new(vec![dashboard])),
        };
        assert!(admission.admits(IpAddr::V4(Ipv4Addr::LOCALHOST), Some(host)));
        assert!(admission.admits(IpAddr::V6(Ipv6Addr::LOCALHOST), None));
        // This host calling its own outward address (an IPv4-mapped listener address too).
        assert!(admission.admits(host, Some(host)));
        assert!(admission.admits(
            host,
            Some(IpAddr::V6(Ipv4Addr::new(10, 0, 0, 5).to_ipv6_mapped()))
        ));
        assert!(admission.admits(dashboard, Some(host)));
        assert!(admission.admits(allowed, Some(host)));
        assert!(!admission.admits(stranger, Some(host)));
        assert!(!admission.admits(stranger, None));
        // A caller connected to another of this host's addresses is not taken for it.
        assert!(!admission.admits(host, Some(IpAddr::V4(Ipv4Addr::LOCALHOST))));
    }

    #[test]
    fn only_served_commands_are_labels() {
        assert_eq!(known_command("setRules"), "setRules");
        assert_eq!(known_command("gateway/getApiDefinitions"), "other");
    }
}
