//! Sentinel (Java) rule JSON: one converter per family, and the combined document.

use std::marker::PhantomData;

use serde::de::{self, SeqAccess, Visitor};
use serde_json::Value;

use super::{converter_with_mode, Converted, Converter};
use crate::authority::AuthorityRule;
use crate::circuit_breaker::DegradeRule;
use crate::family::Family;
use crate::flow::FlowRule;
use crate::param_flow::ParamFlowRule;
use crate::rule_set::{decode_family, InRuleSet, RuleSet, JAVA_FORMAT};
use crate::rules::{KeyPolicy, RuleError, RuleFamily, RuleIssue, Validation};
use crate::system::SystemRule;
use crate::wire;
use crate::wire::RuleWire as _;

/// Declares a Sentinel (Java) JSON converter for one rule family.
macro_rules! java_converter {
    ($(#[$meta:meta])* $name:ident, $rule:ty) => {
        converter_with_mode!($(#[$meta])* $name, |self, source, validation| {
            convert_java::<$rule>(source, validation, self.keys)
        });
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
    FlowRule
);

java_converter!(
    /// Sentinel (Java) degrade-rule JSON: a list of circuit-breaker rules. The legacy
    /// `passCount` key is ignored.
    DegradeJson,
    DegradeRule
);

java_converter!(
    /// Sentinel (Java) system-rule JSON: a list of system rules (or one object).
    SystemJson,
    SystemRule
);

java_converter!(
    /// Sentinel (Java) authority-rule JSON, flat or as the dashboard's nested
    /// `{"rule": {...}}` entity.
    AuthorityJson,
    AuthorityRule
);

java_converter!(
    /// Sentinel (Java) param-flow (hot-parameter) rule JSON, flat (`ParamFlowRule`) or as
    /// the dashboard's nested `{"rule": {...}}` entity (`ParamFlowRuleEntity`).
    ///
    /// ```
    /// use sentinel_core::datasource::{Converter, ParamFlowJson};
    ///
    /// let payload = br#"[{"app": "shop", "rule": {"resource": "GET:/order", "paramIdx": 0,
    ///     "count": 5, "paramFlowItemList": [{"object": "42", "classType": "long", "count": 50}]}}]"#;
    /// let set = ParamFlowJson::new().convert(&payload[..]).unwrap();
    /// assert_eq!(set.param_flow.unwrap()[0].param_flow_item_list[0].count, 50);
    /// ```
    ParamFlowJson,
    ParamFlowRule
);

/// Converts one family's Sentinel JSON, with a fast path for a plain list of valid rules.
fn convert_java<F: InRuleSet>(
    source: &[u8],
    validation: Validation,
    keys: KeyPolicy,
) -> Result<Converted<RuleSet>, RuleError> {
    let family = F::FAMILY;
    if let Some(rules) = fast_path::<F>(source) {
        return Ok(Converted::validated(
            RuleSet::of(rules),
            Vec::new(),
            Vec::new(),
        ));
    }
    let document = wire::parse_document(source, JAVA_FORMAT)?;
    match &document {
        Value::Null | Value::Array(_) => {}
        Value::Object(map) => {
            if let Some(hint) = combined_hint(map, family) {
                return Err(wire::format_error(JAVA_FORMAT, hint));
            }
        }
        // A scalar document is a format error, not an issue of a rule.
        _ => return Err(wire::not_a_rule_list(&document, family, JAVA_FORMAT)),
    }
    let loaded = decode_family(family, document, validation, keys).map_err(wire::invalid)?;
    Ok(Converted::validated(
        loaded.set,
        loaded.skipped,
        loaded.warnings,
    ))
}

/// A single object whose keys are all family names is a combined document, given to one
/// family's converter: say so (its rules would otherwise read as one blank rule).
fn combined_hint(map: &serde_json::Map<String, Value>, family: RuleFamily) -> Option<String> {
    let families = |key: &String| RuleFamily::ALL.iter().any(|f| f.as_str() == key);
    (!map.is_empty() && map.keys().all(families)).then(|| {
        format!(
            "this looks like a combined document (keys {}), not a list of {family} rules: \
             drop `--family` (or read it with CombinedJson)",
            map.keys().cloned().collect::<Vec<_>>().join(", ")
        )
    })
}

/// The common case, a JSON list of valid rules, decoded straight from the bytes. `None` on
/// anything else (another shape, a syntax or type error, an unknown key, an absent field
/// that decides what a rule does, an invalid, nested or duplicate rule): the general path
/// then reads the payload and reports every problem.
///
/// It agrees with the general path by construction: the wire structs read every value,
/// an unknown key's included, with the checks `serde_json::Value` makes, and collect the
/// unknown keys, decoded; any such key sends the payload to the general path, which runs
/// the one key check (see `wire::keys`).
fn fast_path<F: Family>(bytes: &[u8]) -> Option<Vec<F>> {
    let start = bytes.iter().position(|b| !b.is_ascii_whitespace())?;
    if bytes[start] != b'[' {
        return None;
    }
    // As `serde_json::from_slice` reads a list, but each rule is decoded and validated as it
    // is read: no list of wire structs, and the first rule the fast path refuses stops it.
    let mut reader = serde_json::Deserializer::from_slice(bytes);
    let rules =
        serde::Deserializer::deserialize_seq(&mut reader, FastList::<F>(PhantomData)).ok()?;
    reader.end().ok()?;
    let count = rules.len();
    let mut issues: Vec<RuleIssue> = Vec::new();
    let kept = F::keep_together(rules, &mut issues);
    (kept.len() == count).then_some(kept)
}

/// Reads a list of valid rules of family `F` for [`fast_path`]: an error (which sends the
/// payload to the general path) at the first element with an unknown key, an absent field
/// that decides what the rule does, or an issue of decoding or validation.
struct FastList<F>(PhantomData<F>);

impl<'de, F: Family> Visitor<'de> for FastList<F> {
    type Value = Vec<(usize, F)>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list of valid rules")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut rules = Vec::new();
        while let Some(wire) = seq.next_element::<F::Wire>()? {
            let index = rules.len();
            if !wire.unknown().is_empty() || !wire.missing().is_empty() {
                return Err(de::Error::custom("not for the fast path"));
            }
            let (rule, issues) = F::decode(wire, index);
            if !issues.is_empty() || !rule.validate(index).is_empty() {
                return Err(de::Error::custom("not for the fast path"));
            }
            rules.push((index, rule));
        }
        Ok(rules)
    }
}

/// Whether the fast path accepts `bytes` (for the differential tests and the fuzz target).
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn fast_path_accepts(bytes: &[u8], family: RuleFamily) -> bool {
    match family {
        RuleFamily::Flow => fast_path::<FlowRule>(bytes).is_some(),
        RuleFamily::Degrade => fast_path::<DegradeRule>(bytes).is_some(),
        RuleFamily::System => fast_path::<SystemRule>(bytes).is_some(),
        RuleFamily::Authority => fast_path::<AuthorityRule>(bytes).is_some(),
        RuleFamily::ParamFlow => fast_path::<ParamFlowRule>(bytes).is_some(),
    }
}

/// The Sentinel (Java) JSON converter of `family`.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn java_converter(family: RuleFamily) -> Box<dyn Converter<[u8], RuleSet>> {
    match family {
        RuleFamily::Flow => Box::new(FlowJson::new()),
        RuleFamily::Degrade => Box::new(DegradeJson::new()),
        RuleFamily::System => Box::new(SystemJson::new()),
        RuleFamily::Authority => Box::new(AuthorityJson::new()),
        RuleFamily::ParamFlow => Box::new(ParamFlowJson::new()),
    }
}

converter_with_mode!(
    /// The combined document: several rule families in one payload, applied together.
    ///
    /// ```json
    /// {"flow": [...], "degrade": [...], "system": [...], "authority": [...], "paramFlow": [...]}
    /// ```
    ///
    /// Each family key holds what [`FlowJson`] (or the family's own converter) accepts. A family
    /// that is absent is not carried by the resulting [`RuleSet`]; a family that is `null` or `[]`
    /// clears it. An empty or `null` document clears every family this build supports. A key that
    /// names no family is a format error, so that a typo (`"flows"`) cannot silently clear rules.
    ///
    /// A data source's snapshot file is written in this format.
    CombinedJson,
    |self, source, validation| {
        let loaded = RuleSet::from_combined_json(source, validation, self.keys)?;
        Ok(Converted::validated(loaded.set, loaded.skipped, loaded.warnings))
    }
);

#[cfg(test)]
mod tests;
