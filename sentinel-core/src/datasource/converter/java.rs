//! Sentinel (Java) rule JSON: one converter per family, and the combined document.

use serde_json::Value;

use super::{converter_with_mode, Converted, Converter};
use crate::authority::AuthorityRule;
use crate::circuit_breaker::DegradeRule;
use crate::family::Family;
use crate::flow::FlowRule;
use crate::param_flow::ParamFlowRule;
use crate::rule_set::{decode_family, InRuleSet, RuleSet, JAVA_FORMAT};
use crate::rules::{RuleError, RuleIssue, Validation};
use crate::system::SystemRule;
use crate::wire;

/// Declares a Sentinel (Java) JSON converter for one rule family.
macro_rules! java_converter {
    ($(#[$meta:meta])* $name:ident, $rule:ty) => {
        converter_with_mode!($(#[$meta])* $name, |source, validation| {
            convert_java::<$rule>(source, validation)
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
) -> Result<Converted<RuleSet>, RuleError> {
    let family = F::FAMILY;
    let fast = !wire::may_hold_foreign_key(source, wire::Format::java(family));
    if let Some(rules) = fast.then(|| fast_path::<F>(source)).flatten() {
        return Ok(Converted::validated(RuleSet::of(rules), Vec::new()));
    }
    let document = wire::parse_document(source, JAVA_FORMAT)?;
    if !matches!(document, Value::Null | Value::Array(_) | Value::Object(_)) {
        // A scalar document is a format error, not an issue of a rule.
        return Err(wire::not_a_rule_list(&document, family, JAVA_FORMAT));
    }
    let (set, skipped) = decode_family(family, document, validation).map_err(wire::invalid)?;
    Ok(Converted::validated(set, skipped))
}

/// The common case, a JSON list of valid rules, decoded straight from the bytes. `None` on
/// anything else (another shape, a syntax or type error, an invalid, nested or duplicate
/// rule): the general path then reads the payload and reports every problem.
fn fast_path<F: Family>(bytes: &[u8]) -> Option<Vec<F>> {
    let start = bytes.iter().position(|b| !b.is_ascii_whitespace())?;
    if bytes[start] != b'[' {
        return None;
    }
    let wires: Vec<F::Wire> = serde_json::from_slice(bytes).ok()?;
    let rules: Vec<(usize, F)> = wires
        .into_iter()
        .enumerate()
        .map(|(index, wire)| {
            let rule = F::decode(wire, index).ok()?;
            rule.validate(index).is_empty().then_some((index, rule))
        })
        .collect::<Option<_>>()?;
    let count = rules.len();
    let mut issues: Vec<RuleIssue> = Vec::new();
    let kept = F::keep_together(rules, &mut issues);
    (kept.len() == count).then_some(kept)
}

macro_rules! family_converters {
    ($($(#[$doc:meta])* $variant:ident, $field:ident, $name:literal, $rule:ty, $json:ty;)*) => {
        /// The Sentinel (Java) JSON converter of `family`.
        #[cfg(test)]
        pub(crate) fn java_converter(
            family: crate::rules::RuleFamily,
        ) -> Box<dyn Converter<[u8], RuleSet>> {
            match family {
                $(crate::rules::RuleFamily::$variant => Box::new(<$json>::new()),)*
            }
        }
    };
}

for_each_family!(family_converters);

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
    |source, validation| {
        let (set, skipped) = RuleSet::from_combined_json(source, validation)?;
        Ok(Converted::validated(set, skipped))
    }
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::FlowRule;
    use crate::RuleFamily;

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
    fn another_familys_rules_are_refused_naming_what_they_look_like() {
        // The dashboard's param-flow entity, and the same rule flat: never a QPS limit.
        for payload in [
            &br#"[{"app":"x","rule":{"resource":"aa","count":0,"paramIdx":0}}]"#[..],
            br#"[{"resource":"aa","count":0,"grade":1,"paramIdx":0}]"#,
        ] {
            let err = FlowJson::new().convert(payload).err();
            let message = err.map(|e| e.to_string()).unwrap_or_default();
            assert!(message.contains("param-flow"), "{message}");
        }
        let err = DegradeJson::new()
            .convert(br#"[{"resource":"a","count":5,"controlBehavior":0}]"#)
            .err();
        assert!(err.is_some_and(|e| e.to_string().contains("Sentinel flow")));
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
        // Converted, carrying nothing (not a rejection read as an empty default).
        assert_eq!(
            c.convert(b"{}").ok().map(|set| set.families()),
            Some(vec![])
        );
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
}
