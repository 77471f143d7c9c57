//! Why a command failed, and the exit code each failure gives.

/// Why a command failed.
#[derive(Debug, Clone)]
pub(crate) enum Failure {
    /// Bad arguments or URL: exit 2.
    Usage(String),
    /// The store failed: exit 4.
    Store(String),
    /// `push --cas` lost a race: exit 5.
    Conflict(String),
    /// The store answered, and holds rules the services reject (they keep their last good
    /// rules): exit 6. `printed`: the command already printed the message (`get --json`).
    Rejected { message: String, printed: bool },
    /// Invalid rules: exit 1, already printed.
    Rules,
    /// `diff` found changes: exit 3, already printed.
    Differs,
}

impl Failure {
    /// A store error without a store to name (the store's own message names it).
    pub(crate) fn store(error: impl std::error::Error) -> Self {
        Failure::Store(chain(&error))
    }
}

/// An error and its root cause, each said once: the message, then the innermost cause when
/// the message does not already hold its text. The causes in between are wrappers that
/// repeat the root (a gRPC status around a transport error around an I/O error) and, for
/// some clients, print it in `Debug` form.
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut root = None;
    let mut cause = error.source();
    while let Some(e) = cause {
        root = Some(e);
        cause = e.source();
    }
    if let Some(root) = root {
        let root = root.to_string();
        if !root.is_empty() && !text.contains(&root) {
            text.push_str(": ");
            text.push_str(&root);
        }
    }
    text
}
