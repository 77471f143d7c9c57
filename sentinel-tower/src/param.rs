//! Request values for hot-parameter (param-flow) rules: which parts of a request become the
//! entry's arguments, so that "5 requests a second per user" holds through the layer.

use std::borrow::Cow;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use http::{HeaderName, Request};
use sentinel_core::param_flow::ParamValue;

/// One argument of a request's entry: where its value comes from.
///
/// The layer's [`arg`](crate::SentinelLayer::arg) calls give the arguments in order (the
/// first is `paramIdx` 0). A request without the value has an empty argument there, which
/// no param-flow rule checks (as a call without the argument is not checked). Values are
/// read while the request is checked and borrowed from it: nothing is allocated, except
/// a query value with escapes, which is decoded.
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
#[derive(Clone)]
pub struct ParamSource(Source, Kind);

/// How a text value is handed to the rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Text,
    Int,
}

#[derive(Clone)]
enum Source {
    Header(HeaderName),
    Query(Arc<str>),
    PathSegment(usize),
    PeerIp,
    Custom(Arc<ValueFn>),
}

/// A [`ParamSource::from_fn`] closure.
type ValueFn = dyn Fn(&RequestHead<'_>) -> Option<String> + Send + Sync;

impl ParamSource {
    /// The value of a request header (its first value, if it is visible ASCII).
    pub fn header(name: HeaderName) -> Self {
        Self(Source::Header(name), Kind::Text)
    }

    /// The value of a query parameter (the first one with that name), percent-decoded.
    pub fn query(name: impl Into<String>) -> Self {
        Self(Source::Query(Arc::from(name.into())), Kind::Text)
    }

    /// The `index`th segment of the path (0 is the segment after the first `/`):
    /// `path_segment(1)` of `/users/42/orders` is `42`. For a path parameter of a route.
    pub fn path_segment(index: usize) -> Self {
        Self(Source::PathSegment(index), Kind::Text)
    }

    /// The client's IP address, from the connection's address that the server put in the
    /// request's extensions: axum's `ConnectInfo<SocketAddr>` (with this crate's `axum`
    /// feature; serve with `into_make_service_with_connect_info::<SocketAddr>()`) or a plain
    /// `SocketAddr`. Compared as a number, so it allocates nothing.
    pub fn peer_ip() -> Self {
        Self(Source::PeerIp, Kind::Text)
    }

    /// A value computed from the request: a claim your authentication middleware put in the
    /// request's extensions, a cookie, a part of the body's metadata. Allocates the string it
    /// returns.
    pub fn from_fn<F>(f: F) -> Self
    where
        F: Fn(&RequestHead<'_>) -> Option<String> + Send + Sync + 'static,
    {
        Self(Source::Custom(Arc::new(f)), Kind::Text)
    }

    /// The value read as an integer, so that it matches `long` exception items
    /// (`ParamFlowItem::long(42, 50)`): `"42"` becomes 42. Text that is not an integer stays
    /// text.
    pub fn as_int(self) -> Self {
        Self(self.0, Kind::Int)
    }

    /// This source's value of `request`.
    pub(crate) fn value<'r, B>(&self, request: &'r Request<B>) -> Option<Value<'r>> {
        let value = self.read(request)?;
        match (self.1, value) {
            (Kind::Int, Value::Text(text)) => Some(match text.trim().parse::<i128>() {
                Ok(int) => Value::Int(int),
                Err(_) => Value::Text(text),
            }),
            (_, value) => Some(value),
        }
    }

    fn read<'r, B>(&self, request: &'r Request<B>) -> Option<Value<'r>> {
        match &self.0 {
            Source::Header(name) => request
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(|v| Value::Text(Cow::Borrowed(v))),
            Source::Query(name) => {
                let query = request.uri().query()?;
                form_urlencoded::parse(query.as_bytes())
                    .find(|(key, _)| key == &**name)
                    .map(|(_, value)| Value::Text(value))
            }
            Source::PathSegment(index) => request
                .uri()
                .path()
                .trim_start_matches('/')
                .split('/')
                .nth(*index)
                .filter(|s| !s.is_empty())
                .map(|s| Value::Text(Cow::Borrowed(s))),
            Source::PeerIp => peer_addr(request.extensions()).map(|addr| Value::Ip(addr.ip())),
            Source::Custom(f) => {
                let head = RequestHead {
                    method: request.method(),
                    uri: request.uri(),
                    headers: request.headers(),
                    extensions: request.extensions(),
                };
                f(&head).map(|s| Value::Text(Cow::Owned(s)))
            }
        }
    }
}

impl fmt::Debug for ParamSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.1 == Kind::Int {
            f.write_str("Int ")?;
        }
        match &self.0 {
            Source::Header(name) => f.debug_tuple("Header").field(name).finish(),
            Source::Query(name) => f.debug_tuple("Query").field(name).finish(),
            Source::PathSegment(i) => f.debug_tuple("PathSegment").field(i).finish(),
            Source::PeerIp => f.write_str("PeerIp"),
            Source::Custom(_) => f.write_str("Custom"),
        }
    }
}

/// What a [`ParamSource::from_fn`] closure may read of a request.
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

/// A value read from a request.
#[derive(Debug)]
pub(crate) enum Value<'r> {
    Text(Cow<'r, str>),
    Int(i128),
    Ip(IpAddr),
}

impl Value<'_> {
    pub(crate) fn param(&self) -> ParamValue<'_> {
        match self {
            Value::Text(text) => ParamValue::Str(text),
            Value::Int(int) => ParamValue::Int(*int),
            Value::Ip(IpAddr::V4(ip)) => ParamValue::Int(u32::from(*ip).into()),
            Value::Ip(IpAddr::V6(ip)) => ParamValue::Int(u128::from(*ip) as i128),
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

/// The most arguments a layer reads per request (kept on the stack).
pub(crate) const MAX_ARGS: usize = 4;

/// No value: an empty list, which no param-flow rule checks.
pub(crate) const MISSING: ParamValue<'static> = ParamValue::List(&[]);
