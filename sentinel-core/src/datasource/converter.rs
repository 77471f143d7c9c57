//! Converters: the bytes a config store holds, turned into typed rules.
//!
//! Built in:
//! - [`FlowJson`]: Sentinel (Java) flow-rule JSON, exactly as Sentinel and its dashboard write
//!   it;
//! - [`CombinedJson`]: one document carrying several families,
//!   `{"flow": [...], "degrade": [...], "system": [...], "authority": [...]}`;
//! - [`GoFlowJson`]: sentinel-golang's flow-rule JSON (`threshold`,
//!   `tokenCalculateStrategy`...), mapped onto Sentinel's flow rule;
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
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::engine::RuleSet;
use crate::flow::{
    u32_field, ControlBehavior, FlowGrade, FlowRule, FlowRuleWire, FlowStrategy, LIMIT_APP_DEFAULT,
};
use crate::rules::{RuleError, RuleFamily, RuleIssue, Validation};
use crate::wire::{self, Bool, Float, Int};

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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowJson {
    validation: Validation,
}

impl FlowJson {
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

impl Converter<[u8], RuleSet> for FlowJson {
    fn convert(&self, source: &[u8]) -> Result<RuleSet, RuleError> {
        self.convert_with(source, self.validation).map(|c| c.value)
    }

    fn convert_with(
        &self,
        source: &[u8],
        validation: Validation,
    ) -> Result<Converted<RuleSet>, RuleError> {
        if let Some(rules) = fast_path(source, FlowRuleWire::into_rule) {
            return Ok(Converted::new(RuleSet::new().with_flow(rules)));
        }
        let document = parse_document(source, JAVA_FORMAT)?;
        if !matches!(document, Value::Null | Value::Array(_) | Value::Object(_)) {
            return Err(rule_list(document, RuleFamily::Flow, JAVA_FORMAT)
                .err()
                .unwrap_or_else(|| {
                    format_error(JAVA_FORMAT, "expected a list of flow rules".to_owned())
                }));
        }
        let mut skipped = Vec::new();
        let set =
            family_rules(RuleFamily::Flow, document, validation, &mut skipped).map_err(invalid)?;
        Ok(Converted {
            value: set,
            skipped,
        })
    }
}

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
/// Families this build does not support yet are rejected with an issue naming them. A data
/// source's snapshot file is written in this format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CombinedJson {
    validation: Validation,
}

impl CombinedJson {
    /// A strict converter: one invalid rule in any family rejects the payload.
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

/// The families the converters of this build can turn into rules.
///
/// Extension point: a family is supported once [`RuleSet`] carries it and
/// [`family_rules`] has an arm for it.
pub(crate) const SUPPORTED_FAMILIES: &[RuleFamily] = &[RuleFamily::Flow];

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
                return Ok(Converted::new(RuleSet::cleared(SUPPORTED_FAMILIES)));
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

/// sentinel-golang's flow-rule JSON, mapped onto Sentinel's [`FlowRule`].
///
/// Keys match case-insensitively, as Go's `encoding/json` matches them. The mapping:
///
/// | Go | Sentinel |
/// |---|---|
/// | `threshold` (per `statIntervalInMs`, which must be 0 or 1000) | `count` (QPS) |
/// | `tokenCalculateStrategy` 0 direct, 1 warm-up | `controlBehavior` reject / warm-up |
/// | `controlBehavior` 1 throttling | rate limiter (warm-up + rate limiter with warm-up) |
/// | `relationStrategy` 0 current, 1 associated + `refResource` | `strategy` direct / relate |
/// | `warmUpPeriodSec`, `maxQueueingTimeMs` | same names |
///
/// Decisions, where the two engines differ:
/// - Go's throttling with `maxQueueingTimeMs: 0` admits a call only at its exact slot.
///   Sentinel's rate limiter needs a positive queueing time, so 0 becomes 1 ms, the closest
///   behaviour it has (a call waits at most 1 ms).
/// - `tokenCalculateStrategy: 2` (MemoryAdaptive) has no Sentinel equivalent: an issue.
/// - A `statIntervalInMs` other than 0 or 1000 would change what `threshold` means: an issue.
/// - `warmUpColdFactor` must be absent, 0 or 3 (Sentinel's fixed cold factor): otherwise an
///   issue.
/// - `refResource` is kept only with the associated strategy, where it means something.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GoFlowJson {
    validation: Validation,
}

impl GoFlowJson {
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

impl Converter<[u8], RuleSet> for GoFlowJson {
    fn convert(&self, source: &[u8]) -> Result<RuleSet, RuleError> {
        self.convert_with(source, self.validation).map(|c| c.value)
    }

    fn convert_with(
        &self,
        source: &[u8],
        validation: Validation,
    ) -> Result<Converted<RuleSet>, RuleError> {
        let document = parse_document(source, GO_FORMAT)?;
        let items = rule_list(document, RuleFamily::Flow, GO_FORMAT)?;
        let shape = WireShape {
            family: RuleFamily::Flow,
            prepare: lowercase_keys,
            field_name: go_flow_field_name,
        };
        let (rules, skipped) =
            parse_family(items, &shape, into_go_flow_rule, validation).map_err(invalid)?;
        Ok(Converted {
            value: RuleSet::new().with_flow(rules),
            skipped,
        })
    }
}

const JAVA_FORMAT: &str = "Sentinel flow-rule JSON";
const COMBINED_FORMAT: &str = "a combined Sentinel rule document";
const GO_FORMAT: &str = "sentinel-golang flow-rule JSON";

/// Converts one family's part of a document (a list, one object, or `null`) into a set
/// carrying that family.
///
/// Extension point: a new family adds an arm that calls [`parse_family`] with its wire type's
/// `into_rule`, and stores the result in its `RuleSet` field.
fn family_rules(
    family: RuleFamily,
    value: Value,
    validation: Validation,
    skipped: &mut Vec<RuleIssue>,
) -> Result<RuleSet, Vec<RuleIssue>> {
    match family {
        RuleFamily::Flow => {
            let items =
                rule_list(value, family, JAVA_FORMAT).map_err(|e| vec![shape_issue(family, e)])?;
            let (rules, mut skip) = parse_family(
                items,
                &WireShape::java(family),
                FlowRuleWire::into_rule,
                validation,
            )?;
            skipped.append(&mut skip);
            Ok(RuleSet::new().with_flow(rules))
        }
        RuleFamily::Degrade | RuleFamily::System | RuleFamily::Authority => {
            Err(vec![RuleIssue::new(
                family,
                0,
                None,
                family.as_str(),
                format!("{family} rules are not supported by this build yet"),
            )])
        }
    }
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
struct WireShape {
    family: RuleFamily,
    /// Rewrites a rule object before it is decoded (for example lower-cases its keys).
    prepare: fn(Value) -> Value,
    /// The field name to report for a decoded key path.
    field_name: fn(&str) -> String,
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
fn parse_document(bytes: &[u8], format: &str) -> Result<Value, RuleError> {
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
fn rule_list(value: Value, family: RuleFamily, format: &str) -> Result<Vec<Value>, RuleError> {
    match value {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => Ok(items),
        Value::Object(_) => Ok(vec![value]),
        other => Err(format_error(
            format,
            format!(
                "expected a list of {family} rules or one rule object, found {}",
                kind(&other)
            ),
        )),
    }
}

/// Decodes and validates every rule of one family.
///
/// Strict: any issue rejects the list (every issue is returned). Lenient: invalid rules are
/// left out and returned as the second value.
fn parse_family<W, R>(
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
fn lowercase_keys(item: Value) -> Value {
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

fn invalid(issues: Vec<RuleIssue>) -> RuleError {
    RuleError::Invalid {
        payload: PAYLOAD.to_owned(),
        issues,
    }
}

/// sentinel-golang's flow rule on the wire, keys lower-cased.
#[derive(Debug, Default, Deserialize)]
struct GoFlowRuleWire {
    resource: Option<String>,
    #[serde(rename = "tokencalculatestrategy")]
    token_calculate_strategy: Option<Int>,
    #[serde(rename = "controlbehavior")]
    control_behavior: Option<Int>,
    threshold: Option<Float>,
    #[serde(rename = "relationstrategy")]
    relation_strategy: Option<Int>,
    #[serde(rename = "refresource")]
    ref_resource: Option<String>,
    #[serde(rename = "maxqueueingtimems")]
    max_queueing_time_ms: Option<Int>,
    #[serde(rename = "warmupperiodsec")]
    warm_up_period_sec: Option<Int>,
    #[serde(rename = "warmupcoldfactor")]
    warm_up_cold_factor: Option<Int>,
    #[serde(rename = "statintervalinms")]
    stat_interval_in_ms: Option<Int>,
    regex: Option<Bool>,
}

/// Go's camelCase spelling of a lower-cased key, for messages.
fn go_flow_field_name(path: &str) -> String {
    const NAMES: &[&str] = &[
        "resource",
        "tokenCalculateStrategy",
        "controlBehavior",
        "threshold",
        "relationStrategy",
        "refResource",
        "maxQueueingTimeMs",
        "warmUpPeriodSec",
        "warmUpColdFactor",
        "statIntervalInMs",
        "regex",
    ];
    NAMES
        .iter()
        .find(|name| name.eq_ignore_ascii_case(path))
        .map_or_else(|| path.to_owned(), |name| (*name).to_owned())
}

/// Maps a Go flow rule onto Sentinel's, then validates it.
fn into_go_flow_rule(wire: GoFlowRuleWire, index: usize) -> Result<FlowRule, Vec<RuleIssue>> {
    let fam = RuleFamily::Flow;
    let resource = wire.resource.unwrap_or_default();
    let res = Some(resource.as_str());
    let mut issues = Vec::new();
    let mut issue = |field: &str, message: String| {
        issues.push(RuleIssue::new(fam, index, res, field, message));
    };

    let warm_up = match wire::int(wire.token_calculate_strategy).unwrap_or(0) {
        0 => false,
        1 => true,
        2 => {
            issue(
                "tokenCalculateStrategy",
                "2 (MemoryAdaptive) is not supported; use 0 (Direct) or 1 (WarmUp)".into(),
            );
            false
        }
        other => {
            issue(
                "tokenCalculateStrategy",
                format!("unknown value {other}; expected 0 (Direct) or 1 (WarmUp)"),
            );
            false
        }
    };
    let throttling = match wire::int(wire.control_behavior).unwrap_or(0) {
        0 => false,
        1 => true,
        other => {
            issue(
                "controlBehavior",
                format!("unknown value {other}; expected 0 (Reject) or 1 (Throttling)"),
            );
            false
        }
    };
    let strategy = match wire::int(wire.relation_strategy).unwrap_or(0) {
        0 => FlowStrategy::Direct,
        1 => FlowStrategy::Relate,
        other => {
            issue(
                "relationStrategy",
                format!(
                    "unknown value {other}; expected 0 (CurrentResource) or 1 (AssociatedResource)"
                ),
            );
            FlowStrategy::Direct
        }
    };
    match wire::int(wire.stat_interval_in_ms) {
        None | Some(0) | Some(1000) => {}
        Some(other) => issue(
            "statIntervalInMs",
            format!("only 0 or 1000 (a per-second threshold) is supported, got {other}"),
        ),
    }
    match wire::int(wire.warm_up_cold_factor) {
        None | Some(0) | Some(3) => {}
        Some(1) => issue("warmUpColdFactor", "must not be 1".into()),
        Some(other) => issue(
            "warmUpColdFactor",
            format!("only the default cold factor 3 is supported, got {other}"),
        ),
    }
    if wire::boolean(wire.regex) == Some(true) {
        issue(
            "regex",
            "regular-expression resources are not supported".into(),
        );
    }
    let warm_up_period_sec = u32_field(
        &mut issues,
        fam,
        index,
        res,
        "warmUpPeriodSec",
        wire::int(wire.warm_up_period_sec),
        0,
    );
    let max_queueing_time_ms = u32_field(
        &mut issues,
        fam,
        index,
        res,
        "maxQueueingTimeMs",
        wire::int(wire.max_queueing_time_ms),
        0,
    );
    let control_behavior = match (warm_up, throttling) {
        (false, false) => ControlBehavior::Reject,
        (true, false) => ControlBehavior::WarmUp,
        (false, true) => ControlBehavior::RateLimiter,
        (true, true) => ControlBehavior::WarmUpRateLimiter,
    };
    let defaults = FlowRule::qps("", 0.0);
    let rule = FlowRule {
        resource: resource.clone(),
        limit_app: LIMIT_APP_DEFAULT.to_owned(),
        grade: FlowGrade::Qps,
        count: wire::float(wire.threshold).unwrap_or(0.0),
        strategy,
        ref_resource: match strategy {
            FlowStrategy::Relate => wire.ref_resource.filter(|r| !r.is_empty()),
            _ => None,
        },
        control_behavior,
        warm_up_period_sec: if warm_up {
            warm_up_period_sec
        } else {
            defaults.warm_up_period_sec
        },
        max_queueing_time_ms: if throttling {
            max_queueing_time_ms.max(1)
        } else {
            defaults.max_queueing_time_ms
        },
        cluster_mode: false,
        cluster_config: None,
    };
    issues.extend(rule.validate(index));
    if issues.is_empty() {
        Ok(rule)
    } else {
        Err(issues)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let err = c.convert(br#"{"flow":[],"degrade":[]}"#).err();
        assert_eq!(
            err.as_ref().map(|e| e.issues()[0].family),
            Some(RuleFamily::Degrade),
            "{err:?}"
        );
        let err = c.convert(br#"{"flow":[{"count":1}]}"#).err();
        assert_eq!(
            err.as_ref().map(|e| e.issues()[0].field.as_str()),
            Some("resource")
        );
        let err = c.convert(br#"{"flow":7}"#).err();
        assert_eq!(err.as_ref().map(|e| e.issues().len()), Some(1), "{err:?}");
    }

    #[test]
    fn go_mapping() {
        let c = GoFlowJson::new();
        let rules = c
            .convert(
                br#"[{"Resource":"a","THRESHOLD":10,"tokenCalculateStrategy":1,"warmUpPeriodSec":5},
                    {"resource":"b","threshold":2,"controlBehavior":1,"maxQueueingTimeMs":0},
                    {"resource":"c","threshold":3,"relationStrategy":1,"refResource":"d",
                     "controlBehavior":1,"tokenCalculateStrategy":1,"warmUpPeriodSec":3,
                     "maxQueueingTimeMs":20,"statIntervalInMs":1000,"warmUpColdFactor":3}]"#,
            )
            .map(flow)
            .unwrap_or_default();
        assert_eq!(
            rules,
            vec![
                FlowRule::qps("a", 10.0)
                    .control_behavior(ControlBehavior::WarmUp)
                    .warm_up_period_sec(5),
                FlowRule::qps("b", 2.0)
                    .control_behavior(ControlBehavior::RateLimiter)
                    .max_queueing_time_ms(1),
                FlowRule::qps("c", 3.0)
                    .relate("d")
                    .control_behavior(ControlBehavior::WarmUpRateLimiter)
                    .warm_up_period_sec(3)
                    .max_queueing_time_ms(20),
            ]
        );
        for (payload, field) in [
            (
                &br#"{"resource":"a","tokenCalculateStrategy":2}"#[..],
                "tokenCalculateStrategy",
            ),
            (
                br#"{"resource":"a","statIntervalInMs":500}"#,
                "statIntervalInMs",
            ),
            (
                br#"{"resource":"a","relationStrategy":2}"#,
                "relationStrategy",
            ),
            (br#"{"resource":"a","relationStrategy":1}"#, "refResource"),
            (
                br#"{"resource":"a","tokenCalculateStrategy":1}"#,
                "warmUpPeriodSec",
            ),
            (
                br#"{"resource":"a","warmUpColdFactor":1}"#,
                "warmUpColdFactor",
            ),
            (
                br#"{"resource":"a","maxQueueingTimeMs":-1}"#,
                "maxQueueingTimeMs",
            ),
            (br#"{"resource":"a","threshold":"lots"}"#, "threshold"),
            (br#"{"threshold":1}"#, "resource"),
        ] {
            let err = c.convert(payload).err();
            let fields: Vec<String> = err
                .as_ref()
                .map(|e| e.issues().iter().map(|i| i.field.clone()).collect())
                .unwrap_or_default();
            assert!(fields.iter().any(|f| f == field), "{field}: {err:?}");
        }
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
