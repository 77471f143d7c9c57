//! Turning etcd client errors into [`SourceError`]s, and deciding what the client must do next.

use sentinel_core::datasource::SourceError;
use tonic::Code;

/// What the caller does with its client after an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recovery {
    /// Keep the client.
    Keep,
    /// Drop the client; the next read connects again.
    Reconnect,
    /// The token was refused: authenticate again before the next request.
    Reauthenticate,
}

/// Maps an etcd client error. `op` names the operation for the message ("get /rules/flow").
///
/// The messages carry the server's own text and the gRPC code. They never contain the password:
/// it is only sent in the body of the Authenticate request, which no error echoes.
pub(crate) fn map_error(op: &str, err: etcd_client::Error) -> (SourceError, Recovery) {
    use etcd_client::Error as E;
    match err {
        E::GRpcStatus(status) => map_status(op, status),
        E::TransportError(_) | E::IoError(_) => (
            SourceError::connection(format!("{op}: cannot reach etcd"), err),
            Recovery::Reconnect,
        ),
        E::InvalidArgs(_) | E::InvalidUri(_) | E::EndpointError(_) => (
            SourceError::backend(format!("{op}: invalid request"), err),
            Recovery::Keep,
        ),
        other => (
            SourceError::backend(format!("{op}: etcd client error"), other),
            Recovery::Reconnect,
        ),
    }
}

fn map_status(op: &str, status: tonic::Status) -> (SourceError, Recovery) {
    let msg = status.message();
    let code = status.code();
    let text = format!("{op}: {msg} (grpc {code:?})");
    // etcd's texts, from api/v3rpc/rpctypes: "etcdserver: authentication failed, invalid user ID
    // or password", "etcdserver: user name is empty", "etcdserver: invalid auth token",
    // "etcdserver: permission denied", "etcdserver: revision of auth store is old".
    if msg.contains("authentication failed")
        || msg.contains("user name is empty")
        || msg.contains("user name not found")
        || msg.contains("authentication is not enabled")
    {
        return (SourceError::Auth { message: text }, Recovery::Reconnect);
    }
    if msg.contains("invalid auth token") || code == Code::Unauthenticated {
        return (
            SourceError::Auth { message: text },
            Recovery::Reauthenticate,
        );
    }
    if msg.contains("revision of auth store is old") {
        return (
            SourceError::Auth { message: text },
            Recovery::Reauthenticate,
        );
    }
    if code == Code::PermissionDenied || msg.contains("permission denied") {
        return (
            SourceError::PermissionDenied { message: text },
            Recovery::Keep,
        );
    }
    match code {
        Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled | Code::Aborted => (
            SourceError::Connection {
                message: text,
                source: Some(Box::new(status)),
            },
            Recovery::Reconnect,
        ),
        Code::Unknown if msg.contains("transport") || msg.contains("connection") => (
            SourceError::Connection {
                message: text,
                source: Some(Box::new(status)),
            },
            Recovery::Reconnect,
        ),
        _ => (
            SourceError::Backend {
                message: text,
                source: Some(Box::new(status)),
            },
            Recovery::Keep,
        ),
    }
}

/// The error for a request that did not finish within the request timeout.
pub(crate) fn timed_out(op: &str, timeout: std::time::Duration) -> SourceError {
    SourceError::Connection {
        message: format!("{op}: no answer from etcd within {timeout:?}"),
        source: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: Code, msg: &str) -> etcd_client::Error {
        etcd_client::Error::GRpcStatus(tonic::Status::new(code, msg))
    }

    #[test]
    fn auth_errors_are_classified() {
        let (e, r) = map_error(
            "get k",
            status(
                Code::InvalidArgument,
                "etcdserver: authentication failed, invalid user ID or password",
            ),
        );
        assert!(matches!(e, SourceError::Auth { .. }), "{e:?}");
        assert_eq!(r, Recovery::Reconnect);

        let (e, r) = map_error(
            "get k",
            status(Code::Unauthenticated, "etcdserver: invalid auth token"),
        );
        assert!(matches!(e, SourceError::Auth { .. }), "{e:?}");
        assert_eq!(r, Recovery::Reauthenticate);

        let (e, r) = map_error(
            "get k",
            status(Code::PermissionDenied, "etcdserver: permission denied"),
        );
        assert!(matches!(e, SourceError::PermissionDenied { .. }), "{e:?}");
        assert_eq!(r, Recovery::Keep);
    }

    #[test]
    fn unavailable_is_a_connection_error() {
        let (e, r) = map_error("get k", status(Code::Unavailable, "tcp connect error"));
        assert!(matches!(e, SourceError::Connection { .. }), "{e:?}");
        assert_eq!(r, Recovery::Reconnect);
        assert!(e.to_string().contains("get k"), "{e}");
    }
}
