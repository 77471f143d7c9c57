//! Commands beyond Sentinel's own, registered with
//! [`TransportConfigBuilder::command`](crate::TransportConfigBuilder::command) and
//! [`write_command`](crate::TransportConfigBuilder::write_command): what a component running
//! beside the engine answers the dashboard. The token server
//! (`sentinel-token-server`) registers the cluster server commands of Sentinel Java's
//! `sentinel-cluster-server-default` (`cluster/server/info`, `getClusterMode`...), so the
//! dashboard's cluster pages show it.
//!
//! A registered command is called as the built-in ones are: after the caller is admitted,
//! with the query's and the form's parameters. A read command answers whatever the access
//! is; a write command is refused (400, counted as a [`RefusalReason::ReadOnly`] refusal)
//! unless the transport is [`Access::ReadWrite`](crate::Access::ReadWrite).
//!
//! [`RefusalReason::ReadOnly`]: crate::RefusalReason::ReadOnly

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

/// Answers one registered command. Any `Fn(&CommandRequest<'_>) -> CommandResponse` is one.
///
/// It runs on the command center's task: answer from state at hand (a snapshot, counters),
/// without blocking.
pub trait CommandHandler: Send + Sync + 'static {
    /// The answer to `request`.
    fn handle(&self, request: &CommandRequest<'_>) -> CommandResponse;
}

impl<F> CommandHandler for F
where
    F: Fn(&CommandRequest<'_>) -> CommandResponse + Send + Sync + 'static,
{
    fn handle(&self, request: &CommandRequest<'_>) -> CommandResponse {
        self(request)
    }
}

/// A call of a registered command.
#[derive(Debug)]
pub struct CommandRequest<'a> {
    pub(crate) params: &'a HashMap<String, String>,
    pub(crate) caller: IpAddr,
    pub(crate) app: &'a str,
}

impl CommandRequest<'_> {
    /// A parameter, decoded as Java decodes them (query, then form; trimmed; empty ones
    /// left out).
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params.get(name).map(String::as_str)
    }

    /// Who called.
    pub fn caller(&self) -> IpAddr {
        self.caller
    }

    /// The transport's application name (what the dashboard lists the machine under).
    pub fn app(&self) -> &str {
        self.app
    }
}

/// A registered command's answer: Java's `CommandResponse.ofSuccess` (200) or
/// `ofFailure` (400), with a plain-text body.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CommandResponse {
    /// 200 with this body.
    Success(String),
    /// 400 with this message. Not counted as a refusal: a bad parameter of a read.
    Failure(String),
}

impl CommandResponse {
    /// 200 with `body`.
    pub fn success(body: impl Into<String>) -> Self {
        Self::Success(body.into())
    }

    /// 400 with `message`.
    pub fn failure(message: impl Into<String>) -> Self {
        Self::Failure(message.into())
    }
}

/// A command as registered.
#[derive(Clone)]
pub(crate) struct Registered {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) writes: bool,
    pub(crate) handler: Arc<dyn CommandHandler>,
}

impl fmt::Debug for Registered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registered")
            .field("name", &self.name)
            .field("writes", &self.writes)
            .finish_non_exhaustive()
    }
}

/// The built-in commands a registered one may replace: the ones that say which cluster role
/// the process has (a token server is Sentinel's mode 1, not the engine's -1).
pub(crate) const REPLACEABLE: &[&str] = &["getClusterMode"];

/// Why `name` cannot be registered, if it cannot.
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 128 {
        return Err(format!("{name:?}: a command name is 1 to 128 characters"));
    }
    if name.starts_with('/')
        || name.ends_with('/')
        || name
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '?' | '#' | '%' | '&'))
    {
        return Err(format!(
            "{name:?}: a command name is a path without a leading or trailing `/`, spaces, \
             `?`, `#`, `%` or `&` (such as `cluster/server/info`)"
        ));
    }
    let built_in = crate::server::COMMANDS.iter().any(|(n, _)| *n == name);
    if built_in && !REPLACEABLE.contains(&name) {
        return Err(format!(
            "{name:?} is a built-in command; only {REPLACEABLE:?} can be replaced"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_paths_that_do_not_shadow_built_in_commands() {
        assert!(check_name("cluster/server/info").is_ok());
        assert!(check_name("getClusterMode").is_ok());
        for bad in ["", "/api", "a/", "a b", "a?b", "setRules", "metric"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }
}
