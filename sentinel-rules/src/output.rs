//! What a command prints: text for a person, or JSON with `--json`.

use sentinel_core::{RuleError, RuleIssue};
use serde_json::{json, Value};

/// Prints why a rules file is invalid: each issue with its rule index, resource and field.
pub(crate) fn print_invalid(error: &RuleError, json: bool) {
    if json {
        let issues: Vec<Value> = error.issues().iter().map(issue_json).collect();
        say!(
            "{}",
            json!({ "ok": false, "error": error.to_string(), "issues": issues })
        );
    } else if error.issues().is_empty() {
        say!("invalid: {error}");
    } else {
        for issue in error.issues() {
            say!("invalid: {issue}");
        }
    }
}

/// One rule's problem, as `--json` prints it.
pub(crate) fn issue_json(issue: &RuleIssue) -> Value {
    json!({
        "family": issue.family.to_string(),
        "index": issue.index,
        "resource": issue.resource,
        "field": issue.field,
        "message": issue.message,
    })
}

/// Prints `value` with `--json`, `text` without.
pub(crate) fn report(json: bool, value: Value, text: impl FnOnce() -> String) {
    if json {
        say!("{value}");
    } else {
        say!("{}", text());
    }
}

/// A stored value as JSON when it is JSON, as a string otherwise.
pub(crate) fn as_json(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned()))
}

/// A stored value, pretty-printed when it is JSON.
pub(crate) fn pretty(bytes: &[u8]) -> String {
    serde_json::to_string_pretty(&as_json(bytes))
        .unwrap_or_else(|_| String::from_utf8_lossy(bytes).into_owned())
}
