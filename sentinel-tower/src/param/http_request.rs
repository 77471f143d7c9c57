//! Param sources over `http` requests: this layer's, and sentinel-tonic's metadata.

use std::net::{IpAddr, SocketAddr};

use http::{HeaderName, Request};
use sentinel_core::{Admission, BlockError, EntryBuilder};

use super::{try_enter_with_args, ParamRequest, ParamSourceOf};

/// One argument of a request's entry: where its value comes from, in an `http` request
/// (a [`ParamSourceOf`] for [`HttpRequest`]; see there for a request without the value).
///
/// The layer's [`arg`](crate::SentinelLayer::arg) calls give the arguments in order (the
/// first is `paramIdx` 0). [`peer_ip`](ParamSourceOf::peer_ip) is the connection's address
/// that the server put in the request's extensions: axum's `ConnectInfo<SocketAddr>` (with
/// this crate's `axum` feature; serve with
/// `into_make_service_with_connect_info::<SocketAddr>()`) or a plain `SocketAddr`; a
/// [`from_fn`](ParamSourceOf::from_fn) closure gets the request's [`RequestHead`].
///
/// ```
/// use http::HeaderName;
/// use sentinel_tower::{ParamSource, SentinelLayer};
///
/// // Argument 0: the user from a header; argument 1: the client's IP address.
/// let layer = SentinelLayer::new(sentinel_core::Sentinel::new())
///     .arg(ParamSource::header(HeaderName::from_static("x-user-id")))
///     .arg(ParamSource::peer_ip());
/// # let _ = layer;
/// ```
pub type ParamSource = ParamSourceOf<HttpRequest>;

/// `http` requests (of any body), as param sources read them: through their
/// [`RequestHead`].
#[derive(Debug)]
pub enum HttpRequest {}

impl ParamRequest for HttpRequest {
    type HeaderName = HeaderName;
    type Request<'r> = RequestHead<'r>;

    #[inline]
    fn header<'a>(request: &'a RequestHead<'_>, name: &HeaderName) -> Option<&'a str> {
        request.headers.get(name).and_then(|v| v.to_str().ok())
    }

    #[inline]
    fn query<'a>(request: &'a RequestHead<'_>) -> Option<&'a str> {
        request.uri.query()
    }

    #[inline]
    fn path<'a>(request: &'a RequestHead<'_>) -> &'a str {
        request.uri.path()
    }

    fn peer_ip(request: &RequestHead<'_>) -> Option<IpAddr> {
        peer_addr(request.extensions).map(|addr| addr.ip())
    }
}

/// What a [`ParamSource::from_fn`](ParamSourceOf::from_fn) closure may read of a request.
#[derive(Debug)]
#[non_exhaustive]
pub struct RequestHead<'r> {
    /// The method.
    pub method: &'r http::Method,
    /// The URI.
    pub uri: &'r http::Uri,
    /// The headers.
    pub headers: &'r http::HeaderMap,
    /// The extensions (where middleware puts what it learnt of the caller).
    pub extensions: &'r http::Extensions,
}

impl<'r> RequestHead<'r> {
    /// The head of `request`.
    #[inline]
    pub fn of<B>(request: &'r Request<B>) -> Self {
        Self {
            method: request.method(),
            uri: request.uri(),
            headers: request.headers(),
            extensions: request.extensions(),
        }
    }
}

fn peer_addr(extensions: &http::Extensions) -> Option<SocketAddr> {
    #[cfg(feature = "axum")]
    if let Some(info) = extensions.get::<axum::extract::ConnectInfo<SocketAddr>>() {
        return Some(info.0);
    }
    extensions.get::<SocketAddr>().copied()
}

/// Enters `request` with `entry` (its resource, origin and direction already set) and the
/// arguments `sources` read from the request, without waiting: what the layer does with each
/// request, for adapters built on this crate (sentinel-tonic reads gRPC metadata this way).
///
/// `resource` is the name `entry` enters, for the block of a request without a value its
/// source requires ([`ParamSourceOf::or_block`]). At most four sources are read; more are
/// ignored. Values are borrowed from the request while the rules check them, so nothing is
/// allocated but a decoded query value.
///
/// ```
/// use http::{HeaderName, Request};
/// use sentinel_core::{param_flow::ParamFlowRule, Admission, Sentinel};
/// use sentinel_tower::{try_enter_request, ParamSource};
///
/// let sentinel = Sentinel::new();
/// sentinel
///     .param_flow_rules()
///     .load_rules(vec![ParamFlowRule::qps("report", 0, 1.0)])
///     .expect("valid rules");
/// let sources = [ParamSource::header(HeaderName::from_static("x-user-id"))];
/// let request = Request::get("/report").header("x-user-id", "alice").body(()).expect("valid");
/// let enter = || try_enter_request(sentinel.entry("report"), "report", &sources, &request);
/// assert!(matches!(enter(), Ok(Admission::Now(_))));
/// assert!(enter().is_err(), "alice's second call in the second");
/// ```
#[inline]
pub fn try_enter_request<B>(
    entry: EntryBuilder<'_>,
    resource: &str,
    sources: &[ParamSource],
    request: &Request<B>,
) -> Result<Admission<'static>, BlockError> {
    if sources.is_empty() {
        return entry.try_enter_owned();
    }
    try_enter_with_args(entry, resource, sources, &RequestHead::of(request))
}
