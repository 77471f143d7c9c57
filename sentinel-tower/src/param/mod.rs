//! Request values for hot-parameter (param-flow) rules: which parts of a request become the
//! entry's arguments, so that "5 requests a second per user" holds through the layer.
//!
//! The sources are generic over the framework whose requests they read
//! ([`ParamRequest`]): [`ParamSource`] reads `http` requests (this layer's, and
//! sentinel-tonic's metadata); sentinel-actix reads actix-web's with the same code.

mod http_request;

use std::borrow::Cow;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use sentinel_core::param_flow::{ParamFlowRule, ParamValue};
use sentinel_core::{Admission, BlockError, EntryBuilder};

pub use self::http_request::{try_enter_request, HttpRequest, ParamSource, RequestHead};

/// A framework's request as [`ParamSourceOf`] reads it: how a header, the query string, the
/// path and the client's address are found. Implemented by a type that names the framework
/// ([`HttpRequest`] here; sentinel-actix has one for actix-web), never instantiated.
pub trait ParamRequest: 'static {
    /// The header names of the framework's `http` version.
    type HeaderName: Clone + fmt::Debug + Send + Sync + 'static;
    /// What the sources read, and what a [`ParamSourceOf::from_fn`] closure gets.
    type Request<'r>: ?Sized;

    /// The first value of header `name`, if it is visible ASCII.
    fn header<'a>(request: &'a Self::Request<'_>, name: &Self::HeaderName) -> Option<&'a str>;
    /// The query string, without the `?`.
    fn query<'a>(request: &'a Self::Request<'_>) -> Option<&'a str>;
    /// The path.
    fn path<'a>(request: &'a Self::Request<'_>) -> &'a str;
    /// The client's IP address, where the server gave it.
    fn peer_ip(request: &Self::Request<'_>) -> Option<IpAddr>;
}

/// One argument of a request's entry: where its value comes from, for requests of the
/// framework `R` (see [`ParamSource`] for `http` requests).
///
/// The adapter's `arg` calls give the arguments in order (the first is `paramIdx` 0).
/// Values are read while the request is checked and borrowed from it: nothing is
/// allocated, except a query value with escapes, which is decoded, and the value of a
/// [`from_fn`](Self::from_fn) closure.
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
pub struct ParamSourceOf<R: ParamRequest> {
    source: Source<R>,
    kind: Kind,
    missing: Missing<R>,
}

/// What a request without the value gets.
enum Missing<R: ParamRequest> {
    /// An empty argument: no rule checks it.
    Pass,
    /// Blocked before it enters.
    Block,
    /// This value (read as the source's kind).
    Value(Arc<str>),
    /// The value of another source.
    Or(Box<ParamSourceOf<R>>),
}

/// A request has no value for a source that requires one ([`ParamSourceOf::or_block`]).
#[derive(Debug)]
struct Required;

/// How a text value is handed to the rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Text,
    Int,
}

enum Source<R: ParamRequest> {
    Header(R::HeaderName),
    Query(Arc<str>),
    PathSegment(usize),
    PeerIp,
    Custom(Arc<ValueFn<R>>),
}

/// A [`ParamSourceOf::from_fn`] closure.
type ValueFn<R> =
    dyn for<'a, 'r> Fn(&'a <R as ParamRequest>::Request<'r>) -> Option<String> + Send + Sync;

impl<R: ParamRequest> ParamSourceOf<R> {
    fn of(source: Source<R>) -> Self {
        Self {
            source,
            kind: Kind::Text,
            missing: Missing::Pass,
        }
    }

    /// The value of a request header (its first value, if it is visible ASCII).
    pub fn header(name: R::HeaderName) -> Self {
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

    /// The client's IP address, compared as a number, so it allocates nothing. Where it
    /// comes from depends on the framework: see [`ParamSource::peer_ip`] for `http`
    /// requests; actix-web's is the connection's peer address.
    pub fn peer_ip() -> Self {
        Self::of(Source::PeerIp)
    }

    /// A value computed from the request: a claim your authentication middleware put in the
    /// request's extensions, a cookie, a part of the body's metadata. Allocates the string it
    /// returns.
    pub fn from_fn<F>(f: F) -> Self
    where
        F: for<'a, 'r> Fn(&'a R::Request<'r>) -> Option<String> + Send + Sync + 'static,
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
    pub fn or(mut self, fallback: Self) -> Self {
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
    /// rule is made by the adapter (this argument's index, concurrency grade, count 0, so no
    /// `Retry-After`: the caller must send the value, not wait). The request is not counted
    /// in the resource's statistics, as it never entered.
    pub fn or_block(mut self) -> Self {
        *self.last_missing() = Missing::Block;
        self
    }

    /// The end of the chain of fallbacks, where a new one goes.
    fn last_missing(&mut self) -> &mut Missing<R> {
        match self.missing {
            Missing::Or(ref mut fallback) => fallback.last_missing(),
            ref mut last => last,
        }
    }

    /// This source's value of `request`, or its fallback's; `Err` when the request has none
    /// and the source requires one.
    fn value<'a>(&'a self, request: &'a R::Request<'_>) -> Result<Option<Value<'a>>, Required> {
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

    fn read<'a>(&self, request: &'a R::Request<'_>) -> Option<Value<'a>> {
        match &self.source {
            Source::Header(name) => R::header(request, name).map(|v| Value::Text(Cow::Borrowed(v))),
            Source::Query(name) => form_urlencoded::parse(R::query(request)?.as_bytes())
                .find(|(key, _)| key == &**name)
                .map(|(_, value)| Value::Text(value)),
            Source::PathSegment(index) => R::path(request)
                .trim_start_matches('/')
                .split('/')
                .nth(*index)
                .filter(|s| !s.is_empty())
                .map(|s| Value::Text(Cow::Borrowed(s))),
            Source::PeerIp => R::peer_ip(request).map(Value::Ip),
            Source::Custom(f) => f(request).map(|s| Value::Text(Cow::Owned(s))),
        }
    }
}

impl<R: ParamRequest> Clone for ParamSourceOf<R> {
    fn clone(&self) -> Self {
        Self {
            source: match &self.source {
                Source::Header(name) => Source::Header(name.clone()),
                Source::Query(name) => Source::Query(Arc::clone(name)),
                Source::PathSegment(index) => Source::PathSegment(*index),
                Source::PeerIp => Source::PeerIp,
                Source::Custom(f) => Source::Custom(Arc::clone(f)),
            },
            kind: self.kind,
            missing: match &self.missing {
                Missing::Pass => Missing::Pass,
                Missing::Block => Missing::Block,
                Missing::Value(value) => Missing::Value(Arc::clone(value)),
                Missing::Or(fallback) => Missing::Or(fallback.clone()),
            },
        }
    }
}

impl<R: ParamRequest> fmt::Debug for ParamSourceOf<R> {
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

/// A value read from a request.
#[derive(Debug)]
enum Value<'r> {
    Text(Cow<'r, str>),
    Int(i128),
    Ip(IpAddr),
}

impl Value<'_> {
    fn param(&self) -> ParamValue<'_> {
        match self {
            Value::Text(text) => ParamValue::Str(text),
            Value::Int(int) => ParamValue::Int(*int),
            Value::Ip(IpAddr::V4(ip)) => ParamValue::Int(u32::from(*ip).into()),
            Value::Ip(IpAddr::V6(ip)) => ParamValue::Int(u128::from(*ip) as i128),
        }
    }
}

/// The most arguments an adapter reads per request (kept on the stack).
pub const MAX_ARGS: usize = 4;

/// Adds `source` to an adapter's list of arguments `args`, up to [`MAX_ARGS`]: a fifth is
/// ignored, with a warning.
pub fn push_arg<R: ParamRequest>(args: &mut Vec<ParamSourceOf<R>>, source: ParamSourceOf<R>) {
    if args.len() < MAX_ARGS {
        args.push(source);
    } else {
        tracing::warn!(?source, "at most {MAX_ARGS} arguments are read; ignored");
    }
}

/// No value: an empty list, which no param-flow rule checks.
const MISSING: ParamValue<'static> = ParamValue::List(&[]);

/// Enters `request` with `entry` (its resource, origin and direction already set) and the
/// arguments `sources` read from the request, without waiting: what an adapter does with
/// each request. [`try_enter_request`] is this for `http` requests.
///
/// `resource` is the name `entry` enters, for the block of a request without a value its
/// source requires ([`ParamSourceOf::or_block`]). At most [`MAX_ARGS`] sources are read;
/// more are ignored. Values are borrowed from the request while the rules check them, so
/// nothing is allocated but a decoded query value.
#[inline]
pub fn try_enter_with_args<R: ParamRequest>(
    entry: EntryBuilder<'_>,
    resource: &str,
    sources: &[ParamSourceOf<R>],
    request: &R::Request<'_>,
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
        std::array::from_fn(|i| read[i].as_ref().map_or(MISSING, Value::param));
    entry.args(&args[..sources.len()]).try_enter_owned()
}

/// The block of a request without argument `index`, which its source requires
/// ([`ParamSourceOf::or_block`]): a param-flow block by a rule the adapter makes for it.
#[cold]
fn missing_argument(resource: &str, index: usize) -> BlockError {
    let index = i32::try_from(index).unwrap_or(i32::MAX);
    BlockError::ParamFlow {
        resource: Arc::from(resource),
        rule: Arc::new(ParamFlowRule::thread(resource, index, 0.0)),
        value: None,
    }
}
