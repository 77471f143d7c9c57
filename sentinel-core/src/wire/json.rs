//! The JSON plumbing of every rule-list format: reading a document (with fastjson's single
//! quotes), taking its rule list, and decoding each rule with every problem reported.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::formats::{foreign_key, Format};
use crate::rules::{RuleError, RuleFamily, RuleIssue, Validation};

/// The payload name a converter puts in its errors. The driver renames it after the key.
const PAYLOAD: &str = "payload";
/// Deepest nesting the single-quote fallback parser is given (it recurses per level).
const FALLBACK_MAX_DEPTH: usize = 64;
/// How many wrongly typed fields of one rule are reported before giving up on that rule.
const MAX_TYPE_ISSUES_PER_RULE: usize = 16;

/// The rules of a list that may load, each with its index in the list, and the issues of the
/// rules a lenient pass left out; or, strict, every issue.
pub(crate) type ParsedFamily<R> = Result<(Vec<(usize, R)>, Vec<RuleIssue>), Vec<RuleIssue>>;

/// How one family's rules are spelt in one format.
pub(crate) struct WireShape {
    pub(crate) family: RuleFamily,
    /// The format: a rule with a key of another format is refused, naming it.
    pub(crate) format: Format,
    /// Rewrites a rule object before it is decoded (for example lower-cases its keys).
    pub(crate) prepare: fn(Value) -> Value,
    /// The field name to report for a decoded key path.
    pub(crate) field_name: fn(&str) -> String,
}

impl WireShape {
    /// Sentinel's (Java) spelling: keys as written.
    pub(crate) fn java(family: RuleFamily) -> Self {
        Self {
            family,
            format: Format::java(family),
            prepare: |v| v,
            field_name: str::to_owned,
        }
    }
}

/// Reads the payload as JSON (falling back to JSON5 for fastjson's single-quoted strings).
/// Empty and whitespace-only payloads are `null`.
pub(crate) fn parse_document(bytes: &[u8], format: &str) -> Result<Value, RuleError> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Null);
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(value) => Ok(value),
        Err(error) => {
            if error.is_syntax() || error.is_eof() {
                if let Some(value) = single_quoted_fallback(bytes) {
                    return Ok(value);
                }
            }
            Err(format_error(format, error.to_string()))
        }
    }
}

/// fastjson accepts single-quoted strings; JSON5 reads them too. Used only when strict JSON
/// failed and the payload has a single quote, and only on shallow input, because the JSON5
/// parser recurses once per nesting level.
fn single_quoted_fallback(bytes: &[u8]) -> Option<Value> {
    if !bytes.contains(&b'\'') {
        return None;
    }
    let text = std::str::from_utf8(bytes).ok()?;
    let mut depth = 0usize;
    let mut deepest = 0usize;
    for b in bytes {
        match b {
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    if deepest > FALLBACK_MAX_DEPTH {
        return None;
    }
    json5::from_str::<Value>(text).ok()
}

/// A document's rule list: a list, one object (one rule), or `null` (no rules).
pub(crate) fn rule_list(
    value: Value,
    family: RuleFamily,
    format: &str,
) -> Result<Vec<Value>, RuleError> {
    match value {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => Ok(items),
        Value::Object(_) => Ok(vec![value]),
        other => Err(not_a_rule_list(&other, family, format)),
    }
}

/// The format error for a document that is neither a list of rules nor one rule object.
pub(crate) fn not_a_rule_list(value: &Value, family: RuleFamily, format: &str) -> RuleError {
    format_error(
        format,
        format!(
            "expected a list of {family} rules or one rule object, found {}",
            kind(value)
        ),
    )
}

/// Decodes every rule of one family with `decode`, then checks each decoded rule with
/// `validate` (the rule's own validity checks), so one message lists every problem.
///
/// Each rule comes with its index in the list. Strict: any issue rejects the list (every
/// issue is returned). Lenient: invalid rules are left out and returned as the second value.
pub(crate) fn parse_family<W, R>(
    items: Vec<Value>,
    shape: &WireShape,
    decode: impl Fn(W, usize) -> Result<R, Vec<RuleIssue>>,
    validate: impl Fn(&R, usize) -> Vec<RuleIssue>,
    validation: Validation,
) -> ParsedFamily<R>
where
    W: DeserializeOwned,
{
    let mut rules = Vec::with_capacity(items.len());
    let mut issues = Vec::new();
    for (index, item) in items.into_iter().enumerate() {
        match parse_rule(item, index, shape, &decode, &validate) {
            Ok(rule) => rules.push((index, rule)),
            Err(found) => issues.extend(found),
        }
    }
    if validation == Validation::Strict && !issues.is_empty() {
        return Err(issues);
    }
    Ok((rules, issues))
}

/// Decodes one rule. A wrongly typed field is reported and removed, and decoding is retried,
/// so one message lists every problem of the rule (a bad `controlBehavior` and a missing
/// `resource` together).
fn parse_rule<W, R>(
    item: Value,
    index: usize,
    shape: &WireShape,
    decode: &impl Fn(W, usize) -> Result<R, Vec<RuleIssue>>,
    validate: &impl Fn(&R, usize) -> Vec<RuleIssue>,
) -> Result<R, Vec<RuleIssue>>
where
    W: DeserializeOwned,
{
    let family = shape.family;
    let mut item = (shape.prepare)(unwrap_entity(item));
    if !item.is_object() {
        return Err(vec![RuleIssue::new(
            family,
            index,
            None,
            "",
            format!("expected a rule object, found {}", kind(&item)),
        )]);
    }
    let resource = item
        .get("resource")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let resource = resource.as_deref();
    if let Some((key, message)) = item.as_object().and_then(|o| foreign_key(o, shape.format)) {
        return Err(vec![RuleIssue::new(family, index, resource, key, message)]);
    }
    let mut issues = Vec::new();
    for _ in 0..MAX_TYPE_ISSUES_PER_RULE {
        match serde_path_to_error::deserialize::<_, W>(&item) {
            Ok(wire) => {
                return match decode(wire, index) {
                    Ok(rule) => {
                        issues.extend(validate(&rule, index));
                        if issues.is_empty() {
                            Ok(rule)
                        } else {
                            Err(issues)
                        }
                    }
                    Err(mut more) => {
                        issues.append(&mut more);
                        Err(issues)
                    }
                };
            }
            Err(error) => {
                let path = error.path().to_string();
                let field = (shape.field_name)(&path);
                issues.push(RuleIssue::new(
                    family,
                    index,
                    resource,
                    field,
                    error.inner().to_string(),
                ));
                if !remove_path(&mut item, error.path()) {
                    return Err(issues);
                }
            }
        }
    }
    Err(issues)
}

/// Removes the value at `path`, so decoding can go on past it. False if it cannot.
fn remove_path(value: &mut Value, path: &serde_path_to_error::Path) -> bool {
    use serde_path_to_error::Segment;
    let segments: Vec<&Segment> = path.iter().collect();
    let Some((last, parents)) = segments.split_last() else {
        return false;
    };
    let mut node = value;
    for segment in parents {
        node = match (segment, node) {
            (Segment::Map { key }, Value::Object(map)) => match map.get_mut(key.as_str()) {
                Some(child) => child,
                None => return false,
            },
            (Segment::Seq { index }, Value::Array(items)) => match items.get_mut(*index) {
                Some(child) => child,
                None => return false,
            },
            _ => return false,
        };
    }
    match (last, node) {
        (Segment::Map { key }, Value::Object(map)) => map.remove(key.as_str()).is_some(),
        (Segment::Seq { index }, Value::Array(items)) if *index < items.len() => {
            items.remove(*index);
            true
        }
        _ => false,
    }
}

/// Unwraps the dashboard's entity shape `{"rule": {...}, "app": ..., "gmtCreate": ...}`.
fn unwrap_entity(item: Value) -> Value {
    match item {
        Value::Object(mut map)
            if !map.contains_key("resource") && map.get("rule").is_some_and(Value::is_object) =>
        {
            map.remove("rule").unwrap_or(Value::Object(Map::new()))
        }
        other => other,
    }
}

/// Lower-cases the keys of a rule object, for Go's case-insensitive matching.
pub(crate) fn lowercase_keys(item: Value) -> Value {
    match item {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k.to_ascii_lowercase(), v))
                .collect(),
        ),
        other => other,
    }
}

/// What a JSON value is, for messages.
pub(crate) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// A payload that is not readable as `format`.
pub(crate) fn format_error(format: &str, message: String) -> RuleError {
    RuleError::Format {
        payload: PAYLOAD.to_owned(),
        format: format.to_owned(),
        message,
    }
}

/// A payload with invalid rules.
pub(crate) fn invalid(issues: Vec<RuleIssue>) -> RuleError {
    RuleError::Invalid {
        payload: PAYLOAD.to_owned(),
        issues,
    }
}
