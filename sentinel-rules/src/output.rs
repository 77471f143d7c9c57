//! What a command prints: text for a person, or JSON with `--json`.

use sentinel_core::{RuleError, RuleIssue};
use serde_json::{json, Value};

/// Prints why a rules file is invalid: each issue with its rule index, resource and field.
/// With `strict_keys`, an unknown key is an error, and its message says so instead of
/// calling it ignored.
pub(crate) fn print_invalid(error: &RuleError, json: bool, strict_keys: bool) {
    let issues: Vec<RuleIssue> = error
        .issues()
        .iter()
        .map(|issue| {
            if strict_keys {
                as_strict(issue)
            } else {
                issue.clone()
            }
        })
        .collect();
    if json {
        let issues: Vec<Value> = issues.iter().map(issue_json).collect();
        say!(
            "{}",
            json!({ "ok": false, "error": error.to_string(), "issues": issues })
        );
    } else if issues.is_empty() {
        say!("invalid: {error}");
    } else {
        for issue in &issues {
            say!("invalid: {issue}");
        }
    }
}

/// What sentinel-core says of an unknown key, written for the lenient reading (a warning).
const IGNORED: &str =
    ": ignored (not a field of this rule; `validate --strict-keys` makes it an error)";

/// `issue` as `--strict-keys` reports it: an unknown key is an error, not ignored.
fn as_strict(issue: &RuleIssue) -> RuleIssue {
    let mut issue = issue.clone();
    if let Some(key) = issue.message.strip_suffix(IGNORED) {
        issue.message = format!("{key}: not a field of this rule (an error with --strict-keys)");
    }
    issue
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

/// A stored value, pretty-printed when it is JSON, as it is stored otherwise.
pub(crate) fn pretty(bytes: &[u8]) -> String {
    serde_json::from_slice::<Value>(bytes)
        .ok()
        .and_then(|value| serde_json::to_string_pretty(&value).ok())
        .unwrap_or_else(|| String::from_utf8_lossy(bytes).into_owned())
}
