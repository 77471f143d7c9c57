//! gRPC statuses: which codes count as errors for the circuit breakers, and the status a
//! blocked call gets.

use std::fmt;

use http::HeaderMap;
use sentinel_core::{BlockError, RuleFamily};
use sentinel_tower::BlockResponses;
use tonic::metadata::MetadataValue;
use tonic::{Code, Status};

/// The metadata key of the retry delay on a block answer: gRPC's retry pushback
/// ([gRFC A6](https://github.com/grpc/proposal/blob/master/A6-client-retries.md)), a
/// non-negative number of milliseconds. gRPC clients with a retry policy (grpc-java,
/// grpc-go, grpc-core) wait that long before their next attempt instead of their own backoff;
/// any other client can read it from the status's metadata.
pub const RETRY_PUSHBACK_KEY: &str = "grpc-retry-pushback-ms";

/// The set of gRPC status codes that count as errors of a call for the circuit breakers.
///
/// The default, [`server_errors`](Self::server_errors), is the codes a server or its
/// dependencies return when they fail (gRPC's counterparts of HTTP `5xx`): `UNKNOWN`,
/// `DEADLINE_EXCEEDED`, `INTERNAL`, `UNAVAILABLE` and `DATA_LOSS`. The caller's mistakes
/// (`INVALID_ARGUMENT`, `NOT_FOUND`, `PERMISSION_DENIED`, `UNAUTHENTICATED`,
/// `FAILED_PRECONDITION`, `OUT_OF_RANGE`, ...) are left out, and so are `CANCELLED` (a client
/// that ends a stream it no longer needs, or goes away) and `RESOURCE_EXHAUSTED` (a limit
/// answering, often this crate's own), and `UNIMPLEMENTED` (a deployment mismatch that no
/// amount of waiting cures).
///
/// ```
/// use sentinel_tonic::ErrorCodes;
/// use tonic::Code;
///
/// let codes = ErrorCodes::server_errors().with(Code::ResourceExhausted).without(Code::DeadlineExceeded);
/// assert!(codes.contains(Code::ResourceExhausted));
/// assert!(!codes.contains(Code::DeadlineExceeded));
/// assert!(!ErrorCodes::all().contains(Code::Ok));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ErrorCodes(u32);

const fn bit(code: Code) -> u32 {
    1 << (code as u32)
}

impl ErrorCodes {
    /// `UNKNOWN`, `DEADLINE_EXCEEDED`, `INTERNAL`, `UNAVAILABLE`, `DATA_LOSS`: the default.
    pub const fn server_errors() -> Self {
        Self(
            bit(Code::Unknown)
                | bit(Code::DeadlineExceeded)
                | bit(Code::Internal)
                | bit(Code::Unavailable)
                | bit(Code::DataLoss),
        )
    }

    /// Every code but `OK`.
    pub const fn all() -> Self {
        Self(((1 << 17) - 1) & !bit(Code::Ok))
    }

    /// No code: only transport errors count.
    pub const fn none() -> Self {
        Self(0)
    }

    /// This set and `code`.
    pub const fn with(self, code: Code) -> Self {
        Self(self.0 | bit(code))
    }

    /// This set without `code`.
    pub const fn without(self, code: Code) -> Self {
        Self(self.0 & !bit(code))
    }

    /// Whether `code` counts as an error.
    #[inline]
    pub const fn contains(self, code: Code) -> bool {
        self.0 & bit(code) != 0
    }
}

impl Default for ErrorCodes {
    fn default() -> Self {
        Self::server_errors()
    }
}

impl fmt::Debug for ErrorCodes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set()
            .entries((0..17).map(Code::from_i32).filter(|c| self.contains(*c)))
            .finish()
    }
}

/// The status a call blocked by `error` gets: `RESOURCE_EXHAUSTED` for flow and param-flow
/// rules, `UNAVAILABLE` for an open circuit breaker and system protection,
/// `PERMISSION_DENIED` for an authority rule; with [`RETRY_PUSHBACK_KEY`] in its metadata
/// when the block says how long to wait (sentinel-tower's
/// [`BlockResponses::wait_of`]: 1 s for a QPS limit, the time left until an open breaker
/// admits a probe, ...), in whole milliseconds rounded up. The message names no rule,
/// resource or origin.
///
/// ```
/// use sentinel_core::{flow::FlowRule, Sentinel};
/// use tonic::Code;
///
/// let sentinel = Sentinel::new();
/// sentinel.flow_rules().load_rules(vec![FlowRule::qps("/shop.Orders/Get", 0.0)]).unwrap();
/// let blocked = sentinel.entry("/shop.Orders/Get").enter().unwrap_err();
/// let status = sentinel_tonic::block_status(&blocked);
/// assert_eq!(status.code(), Code::ResourceExhausted);
/// assert_eq!(status.metadata().get("grpc-retry-pushback-ms").unwrap(), "1000");
/// ```
pub fn block_status(error: &BlockError) -> Status {
    let (code, message) = match error.family() {
        RuleFamily::Degrade | RuleFamily::System => (
            Code::Unavailable,
            "service temporarily unavailable, retry later",
        ),
        RuleFamily::Authority => (Code::PermissionDenied, "forbidden"),
        _ => (Code::ResourceExhausted, "too many requests, retry later"),
    };
    let mut status = Status::new(code, message);
    if let Some(wait) = BlockResponses::wait_of(error) {
        let millis = wait.as_nanos().div_ceil(1_000_000);
        let millis = u64::try_from(millis).unwrap_or(u64::MAX).max(1);
        status
            .metadata_mut()
            .insert(RETRY_PUSHBACK_KEY, MetadataValue::from(millis));
    }
    status
}

/// The code of a response head or trailers that carry `grpc-status`.
#[inline]
pub(crate) fn grpc_status(headers: &HeaderMap) -> Option<Code> {
    headers
        .get(Status::GRPC_STATUS)
        .map(|value| Code::from_bytes(value.as_bytes()))
}

/// The code gRPC's spec gives a response whose HTTP status is not 200 and that carries no
/// `grpc-status` (a proxy's answer): `http-grpc-status-mapping.md`.
pub(crate) fn code_of_http(status: http::StatusCode) -> Code {
    match status.as_u16() {
        400 => Code::Internal,
        401 => Code::Unauthenticated,
        403 => Code::PermissionDenied,
        404 => Code::Unimplemented,
        429 | 502 | 503 | 504 => Code::Unavailable,
        _ => Code::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_set_is_the_server_errors() {
        let codes = ErrorCodes::default();
        for code in [
            Code::Unknown,
            Code::DeadlineExceeded,
            Code::Internal,
            Code::Unavailable,
            Code::DataLoss,
        ] {
            assert!(codes.contains(code), "{code:?}");
        }
        for code in [
            Code::Ok,
            Code::Cancelled,
            Code::InvalidArgument,
            Code::NotFound,
            Code::ResourceExhausted,
            Code::PermissionDenied,
            Code::Unimplemented,
            Code::Unauthenticated,
        ] {
            assert!(!codes.contains(code), "{code:?}");
        }
        assert_eq!(format!("{:?}", ErrorCodes::none()), "{}");
        assert_eq!(format!("{:?}", ErrorCodes::all()).matches(',').count(), 15);
    }

    #[test]
    fn http_statuses_map_as_grpcs_spec_says() {
        assert_eq!(
            code_of_http(http::StatusCode::SERVICE_UNAVAILABLE),
            Code::Unavailable
        );
        assert_eq!(
            code_of_http(http::StatusCode::NOT_FOUND),
            Code::Unimplemented
        );
        assert_eq!(code_of_http(http::StatusCode::IM_A_TEAPOT), Code::Unknown);
    }
}
