//! Request values for hot-parameter (param-flow) rules: which parts of a request become the
//! entry's arguments, so that "5 requests a second per user" holds through the layer.

use std::borrow::Cow;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use http::{HeaderName, Request};
use sentinel_core::param_flow::{ParamFlowRule, ParamValue};
use sentinel_core::{Admission, BlockError, EntryBuilder};

/// One argument of a request's entry: where its value comes from.
///
/// The layer's [`arg`](crate::SentinelLayer::arg) calls give the arguments in order (the
/// first is `paramIdx` 0). Values are read while the request is checked and borrowed from
/// it: nothing is allocated, except a query value with escapes, which is decoded.
///
/// # A request without the value
///
/// By default it **passes unchecked**: its argument is empty there, which no param-flow rule
/// checks (as Sentinel does not check a call without the argument), so a client that leaves
/// the header out escapes a per-user limit. Choose otherwise per source:
///
/// | | a request without the value |
/// | --- | --- |
/// | (default) | passes, not checked by the rules on this argument |
/// | [`or(source)`](Self::or) | takes the value of another source (`header("x-user-id").or(peer_ip())`) |
/// | [`or_value("anonymous")`](Self::or_value) | takes a fixed value: every such request shares that value's limit |
/// | [`or_block()`](Self::or_block) | is blocked before it enters the resource, as a param-flow block |
///
/// The three chain: `header(..).or(query("user")).or_block()` tries the header, then the
/// query, and blocks a request with neither.
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
pub struct ParamSource {
    source: Source,
    kind: Kind,
    missing: Missing,
}

/// What a request without the value gets.
#[derive(Clone)]
enum Missing {
    /// An empty argument: no rule checks it.
    Pass,
    /// Blocked before it enters.
    Block,
    /// This value (read as the source's kind).
    Value(Arc<str>),
    /// The value of another source.
    Or(Box<ParamSource>),
}

/// A request has no value for a source that requires one ([`ParamSource::or_block`]).
#[derive(Debug)]
pub(crate) struct Required;

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
    fn of(source: Source) -> Self {
        Self {
            source,
            kind: Kind::Text,
            missing: Missing::Pass,
        }
    }

    /// The value of a request header (its first value, if it is visible ASCII).
    pub fn header(name: HeaderName) -> Self {
        Self::of(Source::Header(name))
    }

    /// The value of a query parameter (the first one with that name), percent-decoded.
    pub fn query(name: impl Into<String>) -> Self {
        Self::of(Source::Query(Arc::from(name.into())))
    }

    /// The `index`th segment of the path (0 is the segment after the first `/`):
    /// `path_segment(1)` of `/users/42/orders` is `42`. For a path parameter of a route.
    pub fn path_segment(index: usize) -> Self {
        Self::of(Source::PathSegment(index))
    }

    /// The client's IP address, from the connection's address that the server put in the
    /// request's extensions: axum's `ConnectInfo<SocketAddr>` (with this crate's `axum`
    /// feature; serve with `into_make_service_with_connect_info::<SocketAddr>()`) or a plain
    /// `SocketAddr`. Compared as a number, so it allocates nothing.
    pub fn peer_ip() -> Self {
        Self::of(Source::PeerIp)
    }

    /// A value computed from the request: a claim your authentication middleware put in the
    /// request's extensions, a cookie, a part of the body's metadata. Allocates the string it
    /// returns.
    pub fn from_fn<F>(f: F) -> Self
    where
        F: Fn(&RequestHead<'_>) -> Option<String> + Send + Sync + 'static,
    {
        Self::of(Source::Custom(Arc::new(f)))
    }

    /// The value read as an integer, so that it matches `long` exception items
    /// (`ParamFlowItem::long(42, 50)`): `"42"` becomes 42. Text that is not an integer stays
    /// text.
    pub fn as_int(mut self) -> Self {
        self.kind = Kind::Int;
        self
    }

    /// A request without this value takes `fallback`'s value instead (which may have a
    /// fallback of its own): `header("x-user-id").or(ParamSource::peer_ip())` limits a
    /// caller without the header by its address.
    pub fn or(mut self, fallback: ParamSource) -> Self {
        *self.last_missing() = Missing::Or(Box::new(fallback));
        self
    }

    /// A request without this value takes `value` instead (read as this source's kind, see
    /// [`as_int`](Self::as_int)): every such request shares that value's limit, so
    /// `or_value("anonymous")` gives the callers who do not say who they are one budget
    /// together.
    pub fn or_value(mut self, value: impl Into<String>) -> Self {
        *self.last_missing() = Missing::Value(Arc::from(value.into()));
        self
    }

    /// A request without this value is blocked before it enters the resource: the block
    /// handler gets a [`BlockError::ParamFlow`](sentinel_core::BlockError::ParamFlow) whose
    /// rule is made by the layer (this argument's index, concurrency grade, count 0, so no
    /// `Retry-After`: the caller must send the value, not wait). The request is not counted
    /// in the resource's statistics, as it never entered.
    pub fn or_block(mut self) -> Self {
        *self.last_missing() = Missing::Block;
        self
    }

    /// The end of the chain of fallbacks, where a new one goes.
    fn last_missing(&mut self) -> &mut Missing {
        match self.missing {
            Missing::Or(ref mut fallback) => fallback.last_missing(),
            ref mut last => last,
        }
    }

    /// This source's value of `request`, or its fallback's; `Err` when the request has none
    /// and the source requires one.
    pub(crate) fn value<'a, B>(
        &'a self,
        request: &'a Request<B>,
    ) -> Result<Option<Value<'a>>, Required> {
        if let Some(value) = self.read(request) {
            return Ok(Some(self.as_kind(value)));
        }
        match &self.missing {
            Missing::Pass => Ok(None),
            Missing::Block => Err(Required),
            Missing::Value(value) => Ok(Some(self.as_kind(Value::Text(Cow::Borrowed(value))))),
            Missing::Or(fallback) => fallback.value(request),
        }
    }

    fn as_kind<'a>(&self, value: Value<'a>) -> Value<'a> {
        match (self.kind, value) {
            (Kind::Int, Value::Text(text)) => match text.trim().parse::<i128>() {
                Ok(int) => Value::Int(int),
                Err(_) => Value::Text(text),
            },
            (_, value) => value,
        }
    }

    fn read<'r, B>(&self, request: &'r Request<B>) -> Option<Value<'r>> {
        match &self.source {
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
        if self.kind == Kind::Int {
            f.write_str("Int ")?;
        }
        match &self.source {
            Source::Header(name) => f.debug_tuple("Header").field(name).finish(),
            Source::Query(name) => f.debug_tuple("Query").field(name).finish(),
            Source::PathSegment(i) => f.debug_tuple("PathSegment").field(i).finish(),
            Source::PeerIp => f.write_str("PeerIp"),
            Source::Custom(_) => f.write_str("Custom"),
        }?;
        match &self.missing {
            Missing::Pass => Ok(()),
            Missing::Block => f.write_str(" or block"),
            Missing::Value(value) => write!(f, " or {value:?}"),
            Missing::Or(fallback) => write!(f, " or {fallback:?}"),
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

/// Enters `request` with `entry` (its resource, origin and direction already set) and the
/// arguments `sources` read from the request, without waiting: what the layer does with each
/// request, for adapters built on this crate (sentinel-tonic reads gRPC metadata this way).
///
/// `resource` is the name `entry` enters, for the block of a request without a value its
/// source requires ([`ParamSource::or_block`]). At most four sources are read; more are
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
    let sources = &sources[..sources.len().min(MAX_ARGS)];
    let mut read: [Option<Value<'_>>; MAX_ARGS] = std::array::from_fn(|_| None);
    for ((i, source), value) in sources.iter().enumerate().zip(&mut read) {
        match source.value(request) {
            Ok(found) => *value = found,
            Err(Required) => return Err(missing_argument(resource, i)),
        }
    }
    let args: [_; MAX_ARGS] =
        std::array::from_fn(|i| read[i].as_ref().map_or(MISSING, |v| v.param()));
    entry.args(&args[..sources.len()]).try_enter_owned()
}

/// The block of a request without argument `index`, which its source requires
/// ([`ParamSource::or_block`]): a param-flow block by a rule the layer makes for it.
#[cold]
fn missing_argument(resource: &str, index: usize) -> BlockError {
    let index = i32::try_from(index).unwrap_or(i32::MAX);
    BlockError::ParamFlow {
        resource: Arc::from(resource),
        rule: Arc::new(ParamFlowRule::thread(resource, index, 0.0)),
        value: None,
    }
}
