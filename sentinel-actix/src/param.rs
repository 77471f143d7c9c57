//! Request values for hot-parameter (param-flow) rules: which parts of a request become the
//! entry's arguments.

use std::borrow::Cow;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use actix_web::dev::ServiceRequest;
use actix_web::http::header::HeaderName;
use sentinel_core::param_flow::ParamValue;

/// One argument of a request's entry, as `sentinel-tower`'s `ParamSource`: the middleware's
/// [`arg`](crate::SentinelMiddleware::arg) calls give them in order (the first is
/// `paramIdx` 0).
///
/// A request **without the value passes unchecked** by default (its argument is empty,
/// which no param-flow rule checks, as in Sentinel). Choose otherwise per source:
/// [`or`](Self::or) another source, [`or_value`](Self::or_value) a fixed value shared by
/// every such request, or [`or_block`](Self::or_block): blocked before it enters, as a
/// param-flow block.
///
/// ```
/// use actix_web::http::header::HeaderName;
/// use sentinel_actix::{ParamSource, SentinelMiddleware};
///
/// // Argument 0: the user from a header, else the client's IP address.
/// let middleware = SentinelMiddleware::new(sentinel_core::Sentinel::new()).arg(
///     ParamSource::header(HeaderName::from_static("x-user-id")).or(ParamSource::peer_ip()),
/// );
/// # let _ = middleware;
/// ```
#[derive(Clone)]
pub struct ParamSource {
    source: Source,
    as_int: bool,
    missing: Missing,
}

#[derive(Clone)]
enum Missing {
    Pass,
    Block,
    Value(Arc<str>),
    Or(Box<ParamSource>),
}

#[derive(Clone)]
enum Source {
    Header(HeaderName),
    Query(Arc<str>),
    PathSegment(usize),
    PeerIp,
    Custom(Arc<ValueFn>),
}

type ValueFn = dyn Fn(&ServiceRequest) -> Option<String> + Send + Sync;

/// A request has no value for a source that requires one.
pub(crate) struct Required;

/// A value read from a request.
pub(crate) enum Value<'r> {
    Text(Cow<'r, str>),
    Int(i128),
}

impl Value<'_> {
    pub(crate) fn param(&self) -> ParamValue<'_> {
        match self {
            Value::Text(text) => ParamValue::Str(text),
            Value::Int(int) => ParamValue::Int(*int),
        }
    }
}

impl ParamSource {
    fn of(source: Source) -> Self {
        Self {
            source,
            as_int: false,
            missing: Missing::Pass,
        }
    }

    /// The value of a request header (its first value, if it is visible ASCII).
    pub fn header(name: HeaderName) -> Self {
        Self::of(Source::Header(name))
    }

    /// The value of a query parameter (the first with that name), percent-decoded.
    pub fn query(name: impl Into<String>) -> Self {
        Self::of(Source::Query(Arc::from(name.into())))
    }

    /// The `index`th segment of the path (0 is the segment after the first `/`):
    /// `path_segment(1)` of `/users/42/orders` is `42`.
    pub fn path_segment(index: usize) -> Self {
        Self::of(Source::PathSegment(index))
    }

    /// The client's IP address (the connection's peer address), compared as a number.
    pub fn peer_ip() -> Self {
        Self::of(Source::PeerIp)
    }

    /// A value computed from the request (a claim your authentication middleware put in
    /// the request's extensions, a cookie).
    pub fn from_fn<F>(f: F) -> Self
    where
        F: Fn(&ServiceRequest) -> Option<String> + Send + Sync + 'static,
    {
        Self::of(Source::Custom(Arc::new(f)))
    }

    /// The value read as an integer, so that it matches `long` exception items: `"42"` is
    /// 42. Text that is not an integer stays text.
    pub fn as_int(mut self) -> Self {
        self.as_int = true;
        self
    }

    /// A request without this value takes `fallback`'s.
    pub fn or(mut self, fallback: ParamSource) -> Self {
        *self.last_missing() = Missing::Or(Box::new(fallback));
        self
    }

    /// A request without this value takes `value`: every such request shares its limit.
    pub fn or_value(mut self, value: impl Into<String>) -> Self {
        *self.last_missing() = Missing::Value(Arc::from(value.into()));
        self
    }

    /// A request without this value is blocked before it enters the resource: the block
    /// answer is a param-flow block's (429) whose rule the middleware makes (this
    /// argument's index, concurrency grade, count 0, so no `Retry-After`); it is not counted
    /// in the resource's statistics.
    pub fn or_block(mut self) -> Self {
        *self.last_missing() = Missing::Block;
        self
    }

    fn last_missing(&mut self) -> &mut Missing {
        match self.missing {
            Missing::Or(ref mut fallback) => fallback.last_missing(),
            ref mut last => last,
        }
    }

    /// This source's value of `request`, or its fallback's.
    pub(crate) fn value<'a>(
        &'a self,
        request: &'a ServiceRequest,
    ) -> Result<Option<Value<'a>>, Required> {
        if let Some(value) = self.read(request) {
            return Ok(Some(value));
        }
        match &self.missing {
            Missing::Pass => Ok(None),
            Missing::Block => Err(Required),
            Missing::Value(value) => Ok(Some(self.typed(Cow::Borrowed(value)))),
            Missing::Or(fallback) => fallback.value(request),
        }
    }

    fn typed<'a>(&self, text: Cow<'a, str>) -> Value<'a> {
        match text.trim().parse::<i128>() {
            Ok(int) if self.as_int => Value::Int(int),
            _ => Value::Text(text),
        }
    }

    fn read<'r>(&self, request: &'r ServiceRequest) -> Option<Value<'r>> {
        let text = match &self.source {
            Source::Header(name) => request
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(Cow::Borrowed),
            Source::Query(name) => form_urlencoded::parse(request.query_string().as_bytes())
                .find(|(key, _)| key == &**name)
                .map(|(_, value)| value),
            Source::PathSegment(index) => request
                .path()
                .trim_start_matches('/')
                .split('/')
                .nth(*index)
                .filter(|s| !s.is_empty())
                .map(Cow::Borrowed),
            Source::PeerIp => {
                return request.peer_addr().map(|addr| match addr.ip() {
                    IpAddr::V4(ip) => Value::Int(u32::from(ip).into()),
                    IpAddr::V6(ip) => Value::Int(u128::from(ip) as i128),
                })
            }
            Source::Custom(f) => f(request).map(Cow::Owned),
        };
        text.map(|text| self.typed(text))
    }
}

impl fmt::Debug for ParamSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
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

/// The most arguments the middleware reads per request (kept on the stack).
pub(crate) const MAX_ARGS: usize = 4;

/// No value: an empty list, which no param-flow rule checks.
pub(crate) const MISSING: ParamValue<'static> = ParamValue::List(&[]);
