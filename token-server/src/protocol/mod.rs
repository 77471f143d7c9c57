//! Sentinel 1.8's cluster protocol, as `sentinel-cluster-client-default` and
//! `sentinel-cluster-server-default` 1.8.9 speak it over TCP.
//!
//! # Frames
//!
//! Every message is a frame: a 2-byte big-endian length, then that many bytes (Netty's
//! `LengthFieldBasedFrameDecoder(1024, 0, 2, 0, 2)` and `LengthFieldPrepender(2)` on both
//! sides). A frame with its length field is at most 1 024 bytes, so a payload is at most
//! [`MAX_PAYLOAD`] (1 022) bytes. All integers are big-endian, as Java's `ByteBuf` writes them.
//!
//! A request payload is `xid: i32, type: i8`, then the type's data:
//!
//! | type | code | data |
//! |---|---|---|
//! | `PING` | 0 | `len: i32`, the namespace (`len` bytes); nothing when the namespace is blank |
//! | `FLOW` | 1 | `flowId: i64, count: i32, prioritized: bool (1 byte)` |
//! | `PARAM_FLOW` | 2 | `flowId: i64, count: i32, n: i32`, then `n` parameters, each a type byte and its value ([`ParamValue`]) |
//! | concurrent acquire / release | 3 / 4 | none defined in 1.8.9: neither side has a codec for them |
//!
//! A response payload is `xid: i32, type: i8, status: i8`, then: for `PING` the namespace's
//! connected clients (`i32`), nothing when the status is bad (-1); for `FLOW` and
//! `PARAM_FLOW`, `remaining: i32, waitInMs: i32`. The client matches a response to its
//! request by `xid` (its `PING` uses 0).
//!
//! # What Sentinel's server does with bad input, and so do we
//!
//! - a frame whose length field says more than [`MAX_PAYLOAD`]: discarded, unanswered, the
//!   connection kept (Netty's `TooLongFrameException` is logged and the bytes skipped);
//! - a payload shorter than its header, an unknown type (concurrent ones included), or data
//!   its type cannot decode: no answer (Sentinel drops the request or fails on it), the
//!   connection kept;
//! - a `PING` with a blank namespace: answered with the bad status (-1) and no data.
//!
//! The decoder reports each of these as [`Inbound::Rejected`] with a [`FrameError`]; only an
//! I/O error ends a connection.

mod codec;
#[cfg(test)]
mod tests;

pub use codec::{ClientCodec, Inbound, ServerCodec};

use std::fmt;

/// The largest payload a frame carries: 1 024 bytes with its 2-byte length field.
pub const MAX_PAYLOAD: usize = 1024 - 2;

/// The message types of the protocol (`ClusterConstants.MSG_TYPE_*`).
pub mod msg_type {
    /// A client's hello and keep-alive, carrying its namespace.
    pub const PING: u8 = 0;
    /// A token request for a cluster flow rule.
    pub const FLOW: u8 = 1;
    /// A token request for a cluster param-flow rule, with the call's parameters.
    pub const PARAM_FLOW: u8 = 2;
    /// A concurrency permit request: a type number with no codec in 1.8.9.
    pub const CONCURRENT_FLOW_ACQUIRE: u8 = 3;
    /// A concurrency permit release: a type number with no codec in 1.8.9.
    pub const CONCURRENT_FLOW_RELEASE: u8 = 4;
}

/// The parameter type bytes of a `PARAM_FLOW` request (`ClusterConstants.PARAM_TYPE_*`).
pub mod param_type {
    /// Java `int`, 4 bytes.
    pub const INTEGER: u8 = 0;
    /// Java `long`, 8 bytes.
    pub const LONG: u8 = 1;
    /// Java `byte`, 1 byte.
    pub const BYTE: u8 = 2;
    /// Java `double`, 8 bytes.
    pub const DOUBLE: u8 = 3;
    /// Java `float`, 4 bytes.
    pub const FLOAT: u8 = 4;
    /// Java `short`, 2 bytes.
    pub const SHORT: u8 = 5;
    /// Java `boolean`, 1 byte.
    pub const BOOLEAN: u8 = 6;
    /// Java `String`: `len: i32`, then its bytes.
    pub const STRING: u8 = 7;
}

/// The status byte of a response: a ping's [`RESPONSE_OK`](Self::RESPONSE_OK) or
/// [`RESPONSE_BAD`](Self::RESPONSE_BAD), or a token request's result
/// (`TokenResultStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Status(pub i8);

impl Status {
    /// A ping answered (`RESPONSE_STATUS_OK`); the same code as [`OK`](Self::OK).
    pub const RESPONSE_OK: Self = Self(0);
    /// A request the server cannot answer (`RESPONSE_STATUS_BAD`); the same code as
    /// [`FAIL`](Self::FAIL).
    pub const RESPONSE_BAD: Self = Self(-1);
    /// The request was malformed: a `flowId` or count not positive, no parameters.
    pub const BAD_REQUEST: Self = Self(-4);
    /// The namespace's request limit was reached.
    pub const TOO_MANY_REQUEST: Self = Self(-2);
    /// The server could not decide (for us: Redis is unreachable and the rule has no local
    /// fallback); the client then falls back as its rule says.
    pub const FAIL: Self = Self(-1);
    /// The tokens were granted.
    pub const OK: Self = Self(0);
    /// The limit is reached.
    pub const BLOCKED: Self = Self(1);
    /// A prioritized request may pass after `waitInMs`.
    pub const SHOULD_WAIT: Self = Self(2);
    /// The server has no rule with this `flowId`.
    pub const NO_RULE_EXISTS: Self = Self(3);
    /// A referenced rule is missing.
    pub const NO_REF_RULE_EXISTS: Self = Self(4);
    /// The server is not available.
    pub const NOT_AVAILABLE: Self = Self(5);
    /// A concurrency permit was released.
    pub const RELEASE_OK: Self = Self(6);
    /// A concurrency permit was already released.
    pub const ALREADY_RELEASE: Self = Self(7);

    /// A bounded label for metrics.
    pub fn label(self) -> &'static str {
        match self.0 {
            -4 => "bad_request",
            -2 => "too_many_request",
            -1 => "fail",
            0 => "ok",
            1 => "blocked",
            2 => "should_wait",
            3 => "no_rule_exists",
            4 => "no_ref_rule_exists",
            5 => "not_available",
            6 => "release_ok",
            7 => "already_release",
            _ => "other",
        }
    }
}

/// A parameter of a `PARAM_FLOW` request: one of the Java types the client can send.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ParamValue {
    /// Java `int`.
    Int(i32),
    /// Java `long`.
    Long(i64),
    /// Java `byte`.
    Byte(i8),
    /// Java `double`.
    Double(f64),
    /// Java `float`.
    Float(f32),
    /// Java `short`.
    Short(i16),
    /// Java `boolean`.
    Bool(bool),
    /// Java `String` (its bytes decoded as UTF-8, lossily).
    Str(String),
}

/// A `FLOW` request: `count` tokens of the rule `flow_id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowRequest {
    /// `clusterConfig.flowId` of the rule.
    pub flow_id: i64,
    /// Tokens asked for.
    pub count: i32,
    /// Whether the call may wait for the next window (`SphU.entryWithPriority`).
    pub prioritized: bool,
}

/// A `PARAM_FLOW` request: `count` tokens of the param-flow rule `flow_id` for these values.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamFlowRequest {
    /// `clusterConfig.flowId` of the param-flow rule.
    pub flow_id: i64,
    /// Tokens asked for.
    pub count: i32,
    /// The call's parameter values.
    pub params: Vec<ParamValue>,
}

/// What a request asks.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum RequestBody {
    /// `PING` with the client's namespace; `None` when it sent none (blank).
    Ping {
        /// The namespace (Sentinel's app name by default).
        namespace: Option<String>,
    },
    /// `FLOW`.
    Flow(FlowRequest),
    /// `PARAM_FLOW`.
    ParamFlow(ParamFlowRequest),
}

impl RequestBody {
    /// The message type code.
    pub fn msg_type(&self) -> u8 {
        match self {
            Self::Ping { .. } => msg_type::PING,
            Self::Flow(_) => msg_type::FLOW,
            Self::ParamFlow(_) => msg_type::PARAM_FLOW,
        }
    }
}

/// A request from a token client.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The client's request id (`xid`), echoed in the response.
    pub id: i32,
    /// What it asks.
    pub body: RequestBody,
}

/// The data of a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResponseBody {
    /// No data (a bad ping answer).
    Empty,
    /// A ping's answer: the clients connected in the namespace.
    Ping {
        /// Connected clients of the namespace, this one included.
        connected: i32,
    },
    /// A token answer (`FLOW` and `PARAM_FLOW`).
    Token {
        /// What the window has left, as far as the server knows.
        remaining: i32,
        /// For [`Status::SHOULD_WAIT`]: how long to wait, in ms.
        wait_in_ms: i32,
    },
}

/// A response to a token client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response {
    /// The request's id.
    pub id: i32,
    /// The request's type.
    pub msg_type: u8,
    /// The answer.
    pub status: Status,
    /// Its data.
    pub body: ResponseBody,
}

impl Response {
    /// A token answer to request `id` of type `msg_type`.
    pub fn token(id: i32, msg_type: u8, status: Status, remaining: i32, wait_in_ms: i32) -> Self {
        Self {
            id,
            msg_type,
            status,
            body: ResponseBody::Token {
                remaining,
                wait_in_ms,
            },
        }
    }
}

/// Why a frame was not decoded into a request. None of these ends the connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The length field says more than [`MAX_PAYLOAD`]; the frame was skipped.
    #[error("frame of {len} bytes is over the {MAX_PAYLOAD}-byte limit")]
    Oversized {
        /// The length the frame announced.
        len: usize,
    },
    /// A payload shorter than the 5-byte request header.
    #[error("payload of {len} bytes is shorter than a request header")]
    ShortHeader {
        /// Its length.
        len: usize,
    },
    /// A type with no codec (concurrent acquire and release included, as in 1.8.9).
    #[error("request {id}: unknown type {msg_type}")]
    UnknownType {
        /// The request id.
        id: i32,
        /// The type byte.
        msg_type: u8,
    },
    /// The data does not decode for its type.
    #[error("request {id} of type {msg_type}: {reason}")]
    BadData {
        /// The request id.
        id: i32,
        /// The type byte.
        msg_type: u8,
        /// What is wrong.
        reason: &'static str,
    },
}

impl FrameError {
    /// A bounded label for metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Oversized { .. } => "oversized",
            Self::ShortHeader { .. } => "short_header",
            Self::UnknownType { .. } => "unknown_type",
            Self::BadData { .. } => "bad_data",
        }
    }
}

/// An I/O error on a connection: the only decoding error that ends it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// The socket failed.
    #[error("connection i/o: {0}")]
    Io(#[from] std::io::Error),
    /// A message too large for one frame (only a request with oversized parameters, from
    /// [`ClientCodec`]).
    #[error("message of {len} bytes does not fit a frame")]
    TooLarge {
        /// The payload's length.
        len: usize,
    },
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "request {} of type {}", self.id, self.body.msg_type())
    }
}
