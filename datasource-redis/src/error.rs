//! Turning Redis client errors into [`SourceError`]s.

use std::time::Duration;

use redis::{ErrorKind, RedisError, ServerErrorKind};
use sentinel_core::datasource::SourceError;

/// Maps a Redis client error. `op` names the operation for the message ("get rules:flow").
///
/// - Refused credentials (`WRONGPASS`, `NOAUTH`, a failed AUTH) are [`SourceError::Auth`];
///   an ACL refusal (`NOPERM`) is [`SourceError::PermissionDenied`].
/// - A broken or refused connection, and the answers of a server that cannot serve the key
///   right now (`READONLY` from a demoted master, `LOADING`, `MASTERDOWN`, `CLUSTERDOWN`,
///   `TRYAGAIN`), are [`SourceError::Connection`]: the caller drops its connections and the
///   next read connects again (asking Redis Sentinel for the master anew).
/// - Anything else is [`SourceError::Backend`].
///
/// The password is only ever sent in AUTH, which no server error echoes; `password` is still
/// scrubbed from the message in case a client error ever quotes it.
pub(crate) fn map_error(op: &str, err: RedisError, password: Option<&str>) -> SourceError {
    let text = redact(&format!("{op}: {err}"), password);
    let code = err.code().unwrap_or_default();
    if code == "WRONGPASS" || code == "NOAUTH" || err.kind() == ErrorKind::AuthenticationFailed {
        return SourceError::Auth { message: text };
    }
    if err.kind() == ErrorKind::Server(ServerErrorKind::NoPerm) || code == "NOPERM" {
        return SourceError::PermissionDenied { message: text };
    }
    if is_connection_error(&err) {
        return SourceError::Connection {
            message: text,
            source: Some(Box::new(err)),
        };
    }
    SourceError::Backend {
        message: text,
        source: Some(Box::new(err)),
    }
}

/// True when the connection must be dropped and made again.
fn is_connection_error(err: &RedisError) -> bool {
    if err.is_io_error()
        || err.is_connection_dropped()
        || err.is_connection_refusal()
        || err.is_timeout()
    {
        return true;
    }
    matches!(
        err.kind(),
        ErrorKind::Server(
            ServerErrorKind::ReadOnly
                | ServerErrorKind::BusyLoading
                | ServerErrorKind::MasterDown
                | ServerErrorKind::ClusterDown
                | ServerErrorKind::TryAgain
                | ServerErrorKind::Moved
                | ServerErrorKind::Ask
        ) | ErrorKind::MasterNameNotFoundBySentinel
            | ErrorKind::NoValidReplicasFoundBySentinel
            | ErrorKind::ClusterConnectionNotFound
    )
}

/// Replaces every occurrence of the password by `<redacted>`.
pub(crate) fn redact(text: &str, password: Option<&str>) -> String {
    match password {
        Some(p) if !p.is_empty() && text.contains(p) => text.replace(p, "<redacted>"),
        _ => text.to_owned(),
    }
}

/// The error for a request that did not finish within the request timeout.
pub(crate) fn timed_out(op: &str, timeout: Duration) -> SourceError {
    SourceError::Connection {
        message: format!("{op}: no answer from Redis within {timeout:?}"),
        source: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(code: &'static str, detail: &'static str) -> RedisError {
        RedisError::from((ErrorKind::Extension, code, detail.to_owned()))
    }

    #[test]
    fn refusals_are_classified() {
        let e = map_error(
            "get k",
            RedisError::from((
                ErrorKind::AuthenticationFailed,
                "Password authentication failed",
            )),
            None,
        );
        assert!(matches!(e, SourceError::Auth { .. }), "{e:?}");
        let e = map_error(
            "get k",
            RedisError::from((
                ErrorKind::Server(ServerErrorKind::NoPerm),
                "NOPERM",
                "this user has no permissions to access one of the keys".to_owned(),
            )),
            None,
        );
        assert!(matches!(e, SourceError::PermissionDenied { .. }), "{e:?}");
        // NOAUTH and WRONGPASS are extension codes the client only builds from a server's
        // reply; `tests/backend/access.rs` checks them against a real server.
    }

    #[test]
    fn a_demoted_master_and_broken_sockets_mean_reconnect() {
        let e = map_error(
            "get k",
            RedisError::from((
                ErrorKind::Server(ServerErrorKind::ReadOnly),
                "READONLY",
                "You can't write against a read only replica.".to_owned(),
            )),
            None,
        );
        assert!(matches!(e, SourceError::Connection { .. }), "{e:?}");
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let e = map_error("connect", RedisError::from(io), None);
        assert!(matches!(e, SourceError::Connection { .. }), "{e:?}");
        assert!(e.to_string().contains("connect"), "{e}");
    }

    #[test]
    fn the_password_is_scrubbed_from_messages() {
        let e = map_error("get k", server("ERR", "echo s3cret"), Some("s3cret"));
        assert!(!e.to_string().contains("s3cret"), "{e}");
        assert_eq!(redact("a b", Some("")), "a b");
    }
}
