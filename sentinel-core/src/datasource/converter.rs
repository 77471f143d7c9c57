//! Converters: the bytes a config store holds, turned into typed rules.
//!
//! Built in:
//! - [`FlowJson`], [`DegradeJson`], [`SystemJson`], [`AuthorityJson`]: Sentinel (Java) rule
//!   JSON, exactly as Sentinel and its dashboard write it;
//! - [`CombinedJson`]: one document carrying several families,
//!   `{"flow": [...], "degrade": [...], "system": [...], "authority": [...]}`;
//! - [`GoFlowJson`](super::GoFlowJson) and its siblings: sentinel-golang's JSON (`threshold`,
//!   `tokenCalculateStrategy`...), mapped onto Sentinel's rules;
//! - [`converter_fn`]: any closure, for a custom format.
//!
//! # Wire tolerance
//!
//! The JSON converters read what real payloads contain: unknown keys (`id`, `app`, `ip`,
//! `gmtCreate`...) are ignored, an explicit `null` means the default, a single object where a
//! list is expected is one rule, the dashboard's nested entity `{"rule": {...}, "app": ...}` is
//! unwrapped, and an empty, whitespace-only or `null` payload is an empty list (which clears
//! the family, as Sentinel does). Payloads written with single quotes, which Java's fastjson
//! accepts, are read through a JSON5 fallback.
//!
//! # Errors
//!
//! A syntax error is a [`RuleError::Format`] whose message names the line and column. A value
//! of the wrong type and an invalid rule are [`RuleError::Invalid`], with one [`RuleIssue`] per
//! problem naming the rule's index, its resource and the field. Conversion is strict by
//! default: one bad rule rejects the payload. In [`Validation::Lenient`] mode the bad rules are
//! skipped and returned in [`Converted::skipped`].

use std::fmt;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::authority::AuthorityRuleWire;
use crate::circuit_breaker::DegradeRuleWire;
use crate::engine::RuleSet;
use crate::flow::FlowRuleWire;
use crate::rules::{RuleError, RuleFamily, RuleIssue, Validation};
use crate::system::SystemRuleWire;

/// The payload name a converter puts in its errors. The driver renames it after the key.
const PAYLOAD: &str = "payload";
/// Deepest nesting the single-quote fallback parser is given (it recurses per level).
const FALLBACK_MAX_DEPTH: usize = 64;
/// How many wrongly typed fields of one rule are reported before giving up on that rule.
const MAX_TYPE_ISSUES_PER_RULE: usize = 16;

/// Turns a raw value of type `S` into `T`: bytes into a [`RuleSet`], for data sources.
///
/// Implement it for a custom format, or wrap a closure with [`converter_fn`].
pub trait Converter<S: ?Sized, T>: Send + Sync {
    /// Converts `source`, with the converter's own validation mode.
    fn convert(&self, source: &S) -> Result<T, RuleError>;

    /// Converts `source` with the given validation mode, reporting the rules skipped in
    /// lenient mode. The data-source driver calls this with its own mode.
    ///
    /// The default calls [`convert`](Self::convert) and reports nothing skipped, which is
    /// right for converters that do not validate (the engine validates every rule again).
    fn convert_with(&self, source: &S, validation: Validation) -> Result<Converted<T>, RuleError> {
        let _ = validation;
        self.convert(source).map(Converted::new)
    }
}

/// What a conversion produced, and what lenient mode skipped on the way.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Converted<T> {
    /// The converted value.
    pub value: T,
    /// Rules skipped because they are invalid (lenient mode only).
    pub skipped: Vec<RuleIssue>,
}

impl<T> Converted<T> {
    /// A conversion that skipped nothing.
    pub fn new(value: T) -> Self {
        Self {
            value,
            skipped: Vec::new(),
        }
    }
}

impl<S: ?Sized, T, C: Converter<S, T> + ?Sized> Converter<S, T> for Arc<C> {
    fn convert(&self, source: &S) -> Result<T, RuleError> {
        (**self).convert(source)
    }

    fn convert_with(&self, source: &S, validation: Validation) -> Result<Converted<T>, RuleError> {
        (**self).convert_with(source, validation)
    }
}

impl<S: ?Sized, T, C: Converter<S, T> + ?Sized> Converter<S, T> for Box<C> {
    fn convert(&self, source: &S) -> Result<T, RuleError> {
        (**self).convert(source)
    }

    fn convert_with(&self, source: &S, validation: Validation) -> Result<Converted<T>, RuleError> {
        (**self).convert_with(source, validation)
    }
}

/// A converter made from a closure. Built by [`converter_fn`].
#[derive(Clone, Copy)]
pub struct FnConverter<F> {
    f: F,
}

impl<F> fmt::Debug for FnConverter<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FnConverter").finish_non_exhaustive()
    }
}

/// Wraps a closure as a [`Converter`], for a custom payload format.
///
/// ```
/// use sentinel_core::datasource::{converter_fn, Converter};
/// use sentinel_core::{flow::FlowRule, RuleSet};
///
/// // One resource name per line, each limited to 10 QPS.
/// let lines = converter_fn(|bytes: &[u8]| {
///     let text = String::from_utf8_lossy(bytes);
///     let rules = text.lines().filter(|l| !l.trim().is_empty());
///     Ok(RuleSet::new().with_flow(rules.map(|r| FlowRule::qps(r.trim(), 10.0)).collect()))
/// });
/// let set = lines.convert(b"GET:/a\nGET:/b\n").unwrap();
/// assert_eq!(set.flow.map(|f| f.len()), Some(2));
/// ```
pub fn converter_fn<F>(f: F) -> FnConverter<F> {
    FnConverter { f }
}

impl<S: ?Sized, T, F> Converter<S, T> for FnConverter<F>
where
    F: Fn(&S) -> Result<T, RuleError> + Send + Sync,
{
    fn convert(&self, source: &S) -> Result<T, RuleError> {
        (self.f)(source)
    }
}

/// Declares a converter type that carries a validation mode (strict by default), with its
/// constructors.
macro_rules! converter_with_mode {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct $name {
            validation: Validation,
        }

        impl $name {
            /// A strict converter: one invalid rule rejects the payload.
            pub fn new() -> Self {
                Self::default()
            }

            /// A lenient converter: invalid rules are skipped and reported.
            pub fn lenient() -> Self {
                Self {
                    validation: Validation::Lenient,
                }
            }

            /// Sets the validation mode used by [`Converter::convert`].
            pub fn validation(mut self, validation: Validation) -> Self {
                self.validation = validation;
                self
            }
        }
    };
}

pub(super) use converter_with_mode;

/// Declares a Sentinel (Java) JSON converter for one rule family.
macro_rules! java_converter {
    ($(#[$meta:meta])* $name:ident, $family:expr) => {
        converter_with_mode!($(#[$meta])* $name);

        impl Converter<[u8], RuleSet> for $name {
            fn convert(&self, source: &[u8]) -> Result<RuleSet, RuleError> {
                self.convert_with(source, self.validation).map(|c| c.value)
            }

            fn convert_with(
                &self,
                source: &[u8],
                validation: Validation,
            ) -> Result<Converted<RuleSet>, RuleError> {
                convert_java($family, source, validation)
            }
        }
    };
}

java_converter!(
    /// Sentinel (Java) flow-rule JSON: a list of flow rules, as Sentinel's dashboard and the
    /// `FlowRule` bean write them.
    ///
    /// ```
    /// use sentinel_core::datasource::{Converter, FlowJson};
    ///
    /// let payload = br#"[{"resource": "GET:/order", "count": 20, "app": "shop", "id": 7}]"#;
    /// let set = FlowJson::new().convert(&payload[..]).unwrap();
    /// assert_eq!(set.flow.unwrap()[0].count, 20.0);
    /// ```
    FlowJson,
    RuleFamily::Flow
);

java_converter!(
    /// Sentinel (Java) degrade-rule JSON: a list of circuit-breaker rules. The legacy
    /// `passCount` key is ignored.
    DegradeJson,
    RuleFamily::Degrade
);

java_converter!(
    /// Sentinel (Java) system-rule JSON: a list of system rules (or one object).
    SystemJson,
    RuleFamily::System
);

java_converter!(
    /// Sentinel (Java) authority-rule JSON, flat or as the dashboard's nested
    /// `{"rule": {...}}` entity.
    AuthorityJson,
    RuleFamily::Authority
);

/// Converts one family's Sentinel JSON, with a fast path for a plain list of valid rules.
fn convert_java(
    family: RuleFamily,
    source: &[u8],
    validation: Validation,
) -> Result<Converted<RuleSet>, RuleError> {
    let fast = match family {
        RuleFamily::Flow => {
            fast_path(source, FlowRuleWire::into_rule).map(|r| RuleSet::new().with_flow(r))
        }
        RuleFamily::Degrade => {
            fast_path(source, DegradeRuleWire::into_rule).map(|r| RuleSet::new().with_degrade(r))
        }
        RuleFamily::System => {
            fast_path(source, SystemRuleWire::into_rule).map(|r| RuleSet::new().with_system(r))
        }
        RuleFamily::Authority => fast_path(source, AuthorityRuleWire::into_rule)
            .map(|r| RuleSet::new().with_authority(r)),
    };
    if let Some(set) = fast {
        return Ok(Converted::new(set));
    }
    let document = parse_document(source, JAVA_FORMAT)?;
    if !matches!(document, Value::Null | Value::Array(_) | Value::Object(_)) {
        return Err(not_a_rule_list(&document, family, JAVA_FORMAT));
    }
    let mut skipped = Vec::new();
    let set = family_rules(family, document, validation, &mut skipped).map_err(invalid)?;
    Ok(Converted {
        value: set,
        skipped,
    })
}

converter_with_mode!(
    /// The combined document: several rule families in one payload, applied together.
    ///
    /// ```json
    /// {"flow": [...], "degrade": [...], "system": [...], "authority": [...]}
    /// ```
    ///
    /// Each family key holds what [`FlowJson`] (or the family's own converter) accepts. A family
    /// that is absent is not carried by the resulting [`RuleSet`]; a family that is `null` or `[]`
    /// clears it. An empty or `null` document clears every family this build supports. A key that
    /// names no family is a format error, so that a typo (`"flows"`) cannot silently clear rules.
    ///
    /// A data source's snapshot file is written in this format.
    CombinedJson
);

impl Converter<[u8], RuleSet> for CombinedJson {
    fn convert(&self, source: &[u8]) -> Result<RuleSet, RuleError> {
        self.convert_with(source, self.validation).map(|c| c.value)
    }

    fn convert_with(
        &self,
        source: &[u8],
        validation: Validation,
    ) -> Result<Converted<RuleSet>, RuleError> {
        let map = match parse_document(source, COMBINED_FORMAT)? {
            Value::Null => {
                return Ok(Converted::new(RuleSet::cleared(&RuleFamily::ALL)));
            }
            Value::Object(map) => map,
            other => {
                return Err(format_error(
                    COMBINED_FORMAT,
                    format!(
                        "expected an object keyed by rule family (flow, degrade, system, \
                         authority), found {}",
                        kind(&other)
                    ),
                ))
            }
        };
        let mut set = RuleSet::new();
        let mut issues = Vec::new();
        let mut skipped = Vec::new();
        for (key, value) in map {
            let Some(family) = RuleFamily::ALL.iter().copied().find(|f| f.as_str() == key) else {
                return Err(format_error(
                    COMBINED_FORMAT,
                    format!(
                        "unknown key `{key}`; expected rule families: flow, degrade, system, \
                         authority"
                    ),
                ));
            };
            match family_rules(family, value, validation, &mut skipped) {
                Ok(part) => set.merge(part),
                Err(found) => issues.extend(found),
            }
        }
        if !issues.is_empty() {
            return Err(invalid(issues));
        }
        Ok(Converted {
            value: set,
            skipped,
        })
    }
}

const JAVA_FORMAT: &str = "Sentinel rule JSON";
const COMBINED_FORMAT: &str = "a combined Sentinel rule document";

/// Converts one family's part of a document (a list, one object, or `null`) into a set
/// carrying that family.
///
fn family_rules(
    family: RuleFamily,
    value: Value,
    validation: Validation,
    skipped: &mut Vec<RuleIssue>,
) -> Result<RuleSet, Vec<RuleIssue>> {
    let items = rule_list(value, family, JAVA_FORMAT).map_err(|e| vec![shape_issue(family, e)])?;
    let shape = WireShape::java(family);
    let shape = &shape;
    match family {
        RuleFamily::Flow => one_family(
            items,
            shape,
            FlowRuleWire::into_rule,
            validation,
            skipped,
            RuleSet::with_flow,
        ),
        RuleFamily::Degrade => one_family(
            items,
            shape,
            DegradeRuleWire::into_rule,
            validation,
            skipped,
            RuleSet::with_degrade,
        ),
        RuleFamily::System => one_family(
            items,
            shape,
            SystemRuleWire::into_rule,
            validation,
            skipped,
            RuleSet::with_system,
        ),
        RuleFamily::Authority => one_family(
            items,
            shape,
            AuthorityRuleWire::into_rule,
            validation,
            skipped,
            RuleSet::with_authority,
        ),
    }
}

/// [`parse_family`] into a rule set carrying that one family (`put` adds it); skipped rules
/// are appended to `skipped`.
fn one_family<W: DeserializeOwned, R>(
    items: Vec<Value>,
    shape: &WireShape,
    into_rule: impl Fn(W, usize) -> Result<R, Vec<RuleIssue>>,
    validation: Validation,
    skipped: &mut Vec<RuleIssue>,
    put: fn(RuleSet, Vec<R>) -> RuleSet,
) -> Result<RuleSet, Vec<RuleIssue>> {
    let (rules, mut skip) = parse_family(items, shape, into_rule, validation)?;
    skipped.append(&mut skip);
    Ok(put(RuleSet::new(), rules))
}

/// Turns a shape error (`"flow": 3`) into an issue of its family.
fn shape_issue(family: RuleFamily, error: RuleError) -> RuleIssue {
    let message = match error {
        RuleError::Format { message, .. } => message,
        other => other.to_string(),
    };
    RuleIssue::new(family, 0, None, family.as_str(), message)
}

/// How one family's rules are spelt on the wire.
pub(super) struct WireShape {
    pub(super) family: RuleFamily,
    /// Rewrites a rule object before it is decoded (for example lower-cases its keys).
    pub(super) prepare: fn(Value) -> Value,
    /// The field name to report for a decoded key path.
    pub(super) field_name: fn(&str) -> String,
}

impl WireShape {
    /// Sentinel's (Java) spelling: keys as written.
    fn java(family: RuleFamily) -> Self {
        Self {
            family,
            prepare: |v| v,
            field_name: str::to_owned,
        }
    }
}

/// The common case, a JSON list of valid rules, decoded straight from the bytes. `None` on
/// anything else (another shape, a syntax or type error, an invalid or nested rule): the
/// general path then reads the payload and reports every problem.
fn fast_path<W, R>(
    bytes: &[u8],
    into_rule: impl Fn(W, usize) -> Result<R, Vec<RuleIssue>>,
) -> Option<Vec<R>>
where
    W: DeserializeOwned,
{
    let start = bytes.iter().position(|b| !b.is_ascii_whitespace())?;
    if bytes[start] != b'[' {
        return None;
    }
    let wires: Vec<W> = serde_json::from_slice(bytes).ok()?;
    wires
        .into_iter()
        .enumerate()
        .map(|(index, wire)| into_rule(wire, index).ok())
        .collect()
}

/// Reads the payload as JSON (falling back to JSON5 for fastjson's single-quoted strings).
/// Empty and whitespace-only payloads are `null`.
pub(super) fn parse_document(bytes: &[u8], format: &str) -> Result<Value, RuleError> {
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
pub(super) fn rule_list(
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
fn not_a_rule_list(value: &Value, family: RuleFamily, format: &str) -> RuleError {
    format_error(
        format,
        format!(
            "expected a list of {family} rules or one rule object, found {}",
            kind(value)
        ),
    )
}

/// Decodes and validates every rule of one family.
///
/// Strict: any issue rejects the list (every issue is returned). Lenient: invalid rules are
/// left out and returned as the second value.
pub(super) fn parse_family<W, R>(
    items: Vec<Value>,
    shape: &WireShape,
    into_rule: impl Fn(W, usize) -> Result<R, Vec<RuleIssue>>,
    validation: Validation,
) -> Result<(Vec<R>, Vec<RuleIssue>), Vec<RuleIssue>>
where
    W: DeserializeOwned,
{
    let mut rules = Vec::with_capacity(items.len());
    let mut issues = Vec::new();
    for (index, item) in items.into_iter().enumerate() {
        match parse_rule(item, index, shape, &into_rule) {
            Ok(rule) => rules.push(rule),
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
    into_rule: &impl Fn(W, usize) -> Result<R, Vec<RuleIssue>>,
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
    let mut issues = Vec::new();
    for _ in 0..MAX_TYPE_ISSUES_PER_RULE {
        match serde_path_to_error::deserialize::<_, W>(&item) {
            Ok(wire) => {
                return match into_rule(wire, index) {
                    Ok(rule) if issues.is_empty() => Ok(rule),
                    Ok(_) => Err(issues),
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
pub(super) fn lowercase_keys(item: Value) -> Value {
    match item {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k.to_ascii_lowercase(), v))
                .collect(),
        ),
        other => other,
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn format_error(format: &str, message: String) -> RuleError {
    RuleError::Format {
        payload: PAYLOAD.to_owned(),
        format: format.to_owned(),
        message,
    }
}

pub(super) fn invalid(issues: Vec<RuleIssue>) -> RuleError {
    RuleError::Invalid {
        payload: PAYLOAD.to_owned(),
        issues,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::FlowRule;

    fn flow(set: RuleSet) -> Vec<FlowRule> {
        set.flow.unwrap_or_default()
    }

    #[test]
    fn java_tolerance() {
        let c = FlowJson::new();
        let one = c
            .convert(br#"{"resource":"a","count":5,"grade":null,"weird":{"x":1}}"#)
            .unwrap_or_default();
        assert_eq!(flow(one), vec![FlowRule::qps("a", 5.0)]);
        let nested = c
            .convert(br#"[{"app":"x","gmtCreate":1,"rule":{"resource":"b","count":1}}]"#)
            .unwrap_or_default();
        assert_eq!(flow(nested), vec![FlowRule::qps("b", 1.0)]);
        for empty in [&b""[..], b"   \n", b"null", b"[]", b"\xEF\xBB\xBF "] {
            let set = c.convert(empty).unwrap_or_default();
            assert_eq!(set.flow, Some(vec![]), "{empty:?}");
        }
    }

    #[test]
    fn single_quoted() {
        let set = FlowJson::new()
            .convert(b"[{'resource':'r','count':20.0,'grade':1}]")
            .unwrap_or_default();
        assert_eq!(flow(set), vec![FlowRule::qps("r", 20.0)]);
    }

    #[test]
    fn every_problem_of_a_rule_is_reported() {
        let err = FlowJson::new()
            .convert(br#"[{"controlBehavior":"test","grade":"x","count":1}]"#)
            .err();
        let Some(RuleError::Invalid { issues, .. }) = err else {
            panic!("expected Invalid, got {err:?}");
        };
        let fields: Vec<&str> = issues.iter().map(|i| i.field.as_str()).collect();
        assert!(fields.contains(&"controlBehavior"), "{fields:?}");
        assert!(fields.contains(&"grade"), "{fields:?}");
        assert!(fields.contains(&"resource"), "{fields:?}");
        assert!(issues.iter().all(|i| i.index == 0));
    }

    #[test]
    fn nested_type_error_names_the_path() {
        let err = FlowJson::new()
            .convert(br#"[{"resource":"a","clusterConfig":{"flowId":"zz"}}]"#)
            .err();
        let issues = err.as_ref().map(RuleError::issues).unwrap_or_default();
        assert_eq!(issues.len(), 1, "{err:?}");
        assert_eq!(issues[0].field, "clusterConfig.flowId");
        assert_eq!(issues[0].resource.as_deref(), Some("a"));
    }

    #[test]
    fn lenient_skips_and_reports() {
        let payload = br#"[{"resource":"a","count":1},{"count":-1},{"resource":"c","grade":7}]"#;
        let out = FlowJson::new()
            .convert_with(payload, Validation::Lenient)
            .ok();
        let Some(out) = out else {
            panic!("lenient failed")
        };
        assert_eq!(flow(out.value), vec![FlowRule::qps("a", 1.0)]);
        let indexes: Vec<usize> = out.skipped.iter().map(|i| i.index).collect();
        assert!(indexes.contains(&1) && indexes.contains(&2), "{indexes:?}");
        assert!(FlowJson::new().convert(payload).is_err());
        assert_eq!(
            FlowJson::lenient().convert(payload).map(flow).ok(),
            Some(vec![FlowRule::qps("a", 1.0)])
        );
    }

    #[test]
    fn shape_errors() {
        for bad in [&b"3"[..], b"\"x\"", b"[1]", b"[[]]"] {
            assert!(FlowJson::new().convert(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn combined_document() {
        let c = CombinedJson::new();
        let set = c
            .convert(br#"{"flow":[{"resource":"a","count":1}]}"#)
            .unwrap_or_default();
        assert_eq!(set.families(), vec![RuleFamily::Flow]);
        assert_eq!(c.convert(b"{}").unwrap_or_default().families(), vec![]);
        assert_eq!(
            c.convert(b"").unwrap_or_default().flow,
            Some(vec![]),
            "an empty document clears"
        );
        assert_eq!(
            c.convert(br#"{"flow":null}"#).unwrap_or_default().flow,
            Some(vec![])
        );
        assert!(matches!(
            c.convert(br#"{"flows":[]}"#),
            Err(RuleError::Format { .. })
        ));
        assert!(matches!(c.convert(b"[]"), Err(RuleError::Format { .. })));
        let both = c
            .convert(br#"{"flow":[],"degrade":[]}"#)
            .unwrap_or_default();
        assert_eq!(both.families(), vec![RuleFamily::Flow, RuleFamily::Degrade]);
        let err = c.convert(br#"{"flow":[{"count":1}]}"#).err();
        assert_eq!(
            err.as_ref().map(|e| e.issues()[0].field.as_str()),
            Some("resource")
        );
        let err = c.convert(br#"{"flow":7}"#).err();
        assert_eq!(err.as_ref().map(|e| e.issues().len()), Some(1), "{err:?}");
    }

    #[test]
    fn closures_convert() {
        let c = converter_fn(|bytes: &[u8]| {
            Ok(RuleSet::new().with_flow(vec![FlowRule::qps(
                String::from_utf8_lossy(bytes).into_owned(),
                1.0,
            )]))
        });
        let out = c.convert_with(b"x", Validation::Lenient).ok();
        assert_eq!(
            out.map(|o| flow(o.value)),
            Some(vec![FlowRule::qps("x", 1.0)])
        );
        let boxed: Box<dyn Converter<[u8], RuleSet>> = Box::new(FlowJson::new());
        assert!(boxed.convert(b"[]").is_ok());
    }
}
