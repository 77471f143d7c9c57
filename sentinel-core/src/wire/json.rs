//! The JSON plumbing of every rule-list format: reading a document (with fastjson's single
//! quotes), taking its rule list, and decoding each rule with every problem reported.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::formats::Format;
use super::keys::{classify, RuleWire};
use crate::rules::{KeyPolicy, RuleError, RuleFamily, RuleIssue, Validation};

/// The payload name a converter puts in its errors: none (the driver names it after the key,
/// a tool after its file).
const PAYLOAD: &str = "";
/// Deepest nesting the single-quote fallback parser is given (it recurses per level).
const FALLBACK_MAX_DEPTH: usize = 64;
/// How many wrongly typed fields of one rule are reported before giving up on that rule.
const MAX_TYPE_ISSUES_PER_RULE: usize = 16;

/// What one family's rule list gave: the rules that may load, each with its index in the
/// list, the issues of the rules a lenient pass left out, and the warnings (unknown keys;
/// in lenient mode, absent fields that decide what a rule does).
#[derive(Debug)]
pub(crate) struct Parsed<R> {
    pub(crate) rules: Vec<(usize, R)>,
    pub(crate) skipped: Vec<RuleIssue>,
    pub(crate) warnings: Vec<RuleIssue>,
}

/// A family's parse: [`Parsed`], or, strict, every issue.
pub(crate) type ParsedFamily<R> = Result<Parsed<R>, Vec<RuleIssue>>;

/// How one family's rules are spelt in one format, and how they are read.
pub(crate) struct WireShape {
    pub(crate) family: RuleFamily,
    /// The format: a rule with a key of another format is refused, naming it.
    pub(crate) format: Format,
    /// Strict or lenient.
    pub(crate) validation: Validation,
    /// Whether an unknown key is a warning or an error.
    pub(crate) keys: KeyPolicy,
}

impl WireShape {
    /// Sentinel's (Java) spelling of `family`.
    pub(crate) fn java(family: RuleFamily, validation: Validation, keys: KeyPolicy) -> Self {
        Self {
            family,
            format: Format::java(family),
            validation,
            keys,
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
            let mut message = error.to_string();
            if looks_like_yaml(bytes) {
                message.push_str(
                    ": this looks like YAML, not JSON. Rules kept as JSON inside YAML (a \
                     Spring or Eureka property, a Dapr component's metadata) must be taken out \
                     of it first; sentinel-golang's Kubernetes resources (FlowRules, \
                     CircuitBreakerRules...) are read by KubernetesYaml (the `yaml` feature; \
                     `sentinel-rules --format k8s`)",
                );
            }
            Err(format_error(format, message))
        }
    }
}

/// Whether a payload that is not JSON reads like YAML: its first line that is not blank or a
/// comment is a document marker, a list item or a `key:` of a mapping.
fn looks_like_yaml(bytes: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return false;
    };
    let Some(line) = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
    else {
        return false;
    };
    if line == "---" || line.starts_with("- ") {
        return true;
    }
    line.split_once(':').is_some_and(|(key, rest)| {
        !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
            && (rest.is_empty() || rest.starts_with(' '))
    })
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
/// Strict: any issue rejects the list (every issue is returned). Lenient: invalid rules are
/// left out and their issues returned in [`Parsed::skipped`].
pub(crate) fn parse_family<W, R>(
    items: Vec<Value>,
    shape: &WireShape,
    decode: impl Fn(W, usize) -> (R, Vec<RuleIssue>),
    validate: impl Fn(&R, usize) -> Vec<RuleIssue>,
) -> ParsedFamily<R>
where
    W: DeserializeOwned + RuleWire,
{
    parse_family_skipping(items, shape, decode, validate, |_, _, _| Vec::new())
}

/// [`parse_family`], where lenient loading first drops with `skip_parts` the parts of a rule
/// Sentinel skips while it keeps the rule (see [`Family::skip_parts`]); their issues are
/// returned as warnings.
///
/// [`Family::skip_parts`]: crate::family::Family::skip_parts
pub(crate) fn parse_family_skipping<W, R>(
    items: Vec<Value>,
    shape: &WireShape,
    decode: impl Fn(W, usize) -> (R, Vec<RuleIssue>),
    validate: impl Fn(&R, usize) -> Vec<RuleIssue>,
    skip_parts: impl Fn(&mut R, usize, &mut Vec<RuleIssue>) -> Vec<RuleIssue>,
) -> ParsedFamily<R>
where
    W: DeserializeOwned + RuleWire,
{
    let mut parsed = Parsed {
        rules: Vec::with_capacity(items.len()),
        skipped: Vec::new(),
        warnings: Vec::new(),
    };
    for (index, item) in items.into_iter().enumerate() {
        let checks = RuleChecks {
            decode: &decode,
            validate: &validate,
            skip_parts: &skip_parts,
        };
        let (rule, issues) = parse_rule(item, index, shape, &checks, &mut parsed.warnings);
        match rule {
            Some(rule) if issues.is_empty() => parsed.rules.push((index, rule)),
            _ => parsed.skipped.extend(issues),
        }
    }
    if shape.validation == Validation::Strict && !parsed.skipped.is_empty() {
        return Err(parsed.skipped);
    }
    Ok(parsed)
}

/// Decodes one rule, reporting every problem it has: a wrongly typed field is reported and
/// removed and decoding retried, then the keys it does not know are checked (see
/// `wire::keys`), the rule is built (an unknown code read as its default) and validated. A
/// problem of a field found early is not reported again by the later steps.
fn parse_rule<W, R, D, V, S>(
    item: Value,
    index: usize,
    shape: &WireShape,
    checks: &RuleChecks<'_, D, V, S>,
    warnings: &mut Vec<RuleIssue>,
) -> (Option<R>, Vec<RuleIssue>)
where
    W: DeserializeOwned + RuleWire,
    D: Fn(W, usize) -> (R, Vec<RuleIssue>),
    V: Fn(&R, usize) -> Vec<RuleIssue>,
    S: Fn(&mut R, usize, &mut Vec<RuleIssue>) -> Vec<RuleIssue>,
{
    let family = shape.family;
    let mut item = unwrap_entity(item);
    let Some(object) = item.as_object() else {
        let message = format!("expected a rule object, found {}", kind(&item));
        return (None, vec![RuleIssue::new(family, index, None, "", message)]);
    };
    let resource = object
        .iter()
        .find(|(key, _)| W::CASE.matches(key, "resource"))
        .and_then(|(_, value)| value.as_str())
        .map(str::to_owned);
    let resource = resource.as_deref();
    let mut issues = Vec::new();
    let mut wire = None;
    for _ in 0..MAX_TYPE_ISSUES_PER_RULE {
        match serde_path_to_error::deserialize::<_, W>(&item) {
            Ok(decoded) => {
                wire = Some(decoded);
                break;
            }
            Err(error) => {
                let field = error.path().to_string();
                issues.push(RuleIssue::new(
                    family,
                    index,
                    resource,
                    field,
                    error.inner().to_string(),
                ));
                if !remove_path(&mut item, error.path()) {
                    return (None, issues);
                }
            }
        }
    }
    let Some(wire) = wire else {
        return (None, issues);
    };
    for key in wire.unknown().iter() {
        let problem = classify(key, shape.format);
        let issue = RuleIssue::new(
            family,
            index,
            resource,
            &key.path,
            problem.message(&key.key),
        );
        if problem.is_error() || shape.keys == KeyPolicy::Deny {
            issues.push(issue);
        } else {
            warnings.push(issue);
        }
    }
    for field in wire.missing() {
        if shape.validation == Validation::Strict {
            issues.push(RuleIssue::new(
                family,
                index,
                resource,
                field,
                "is required: it decides what the rule does (lenient mode reads Sentinel's \
                 default)",
            ));
        } else {
            warnings.push(RuleIssue::new(
                family,
                index,
                resource,
                field,
                "is absent: read as Sentinel's default",
            ));
        }
    }
    let (mut rule, found) = (checks.decode)(wire, index);
    add_new(&mut issues, found);
    if shape.validation == Validation::Lenient {
        for mut issue in (checks.skip_parts)(&mut rule, index, &mut issues) {
            issue.field = as_written(&item, &issue.field);
            warnings.push(issue);
        }
    }
    add_new(&mut issues, (checks.validate)(&rule, index));
    for issue in &mut issues {
        issue.field = as_written(&item, &issue.field);
    }
    (Some(rule), issues)
}

/// What [`parse_rule`] does with a decoded rule (see [`parse_family`]).
struct RuleChecks<'a, D, V, S> {
    decode: &'a D,
    validate: &'a V,
    skip_parts: &'a S,
}

/// Adds the issues of `later` whose field has none in `issues` yet: a problem of a field
/// found early is not reported again by the later steps.
fn add_new(issues: &mut Vec<RuleIssue>, later: Vec<RuleIssue>) {
    let known = issues.len();
    for issue in later {
        if !issues[..known].iter().any(|i| i.field == issue.field) {
            issues.push(issue);
        }
    }
}

/// `field` (`specificItems[0].valStr`) spelt as the payload spells its keys, for formats
/// that match keys in any letter case.
fn as_written(item: &Value, field: &str) -> String {
    let mut node = Some(item);
    let mut parts = Vec::new();
    for segment in field.split('.') {
        let (name, rest) = match segment.find('[') {
            Some(at) => segment.split_at(at),
            None => (segment, ""),
        };
        let found = node
            .and_then(Value::as_object)
            .and_then(|map| map.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)));
        match found {
            Some((key, value)) => {
                parts.push(format!("{key}{rest}"));
                node = rest
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse::<usize>()
                    .ok()
                    .map_or(Some(value), |i| value.get(i));
            }
            None => {
                parts.push(segment.to_owned());
                node = None;
            }
        }
    }
    parts.join(".")
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
