//! Sentinel (Java) rule JSON: one converter per family, and the combined document.

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
    let wires: Vec<F::Wire> = serde_json::from_slice(bytes).ok()?;
    let rules: Vec<(usize, F)> = wires
        .into_iter()
        .enumerate()
        .map(|(index, wire)| {
            if !wire.unknown().is_empty() || !wire.missing().is_empty() {
                return None;
            }
            let (rule, issues) = F::decode(wire, index);
            (issues.is_empty() && rule.validate(index).is_empty()).then_some((index, rule))
        })
        .collect::<Option<_>>()?;
    let count = rules.len();
    let mut issues: Vec<RuleIssue> = Vec::new();
    let kept = F::keep_together(rules, &mut issues);
    (kept.len() == count).then_some(kept)
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

macro_rules! family_converters {
    ($($(#[$doc:meta])* $variant:ident, $field:ident, $name:literal, $rule:ty, $json:ty;)*) => {
        /// The Sentinel (Java) JSON converter of `family`.
        #[cfg(any(test, feature = "fuzzing"))]
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
    |self, source, validation| {
        let loaded = RuleSet::from_combined_json(source, validation, self.keys)?;
        Ok(Converted::validated(loaded.set, loaded.skipped, loaded.warnings))
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
            assert!(message.contains("paramFlow"), "{message}");
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
            .convert(br#"[{"resource":"a","count":1,"clusterConfig":{"flowId":"zz"}}]"#)
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

    fn fields(err: Option<RuleError>) -> Vec<String> {
        err.map(|e| e.issues().iter().map(|i| i.field.clone()).collect())
            .unwrap_or_default()
    }

    #[test]
    fn a_key_close_to_a_field_is_an_error_naming_both() {
        let err = FlowJson::new()
            .convert(br#"[{"resource":"GET:/order","cuont":5}]"#)
            .err();
        let message = err.as_ref().map(ToString::to_string).unwrap_or_default();
        assert!(
            message.contains(r#"unknown field "cuont" (did you mean "count"?)"#),
            "{message}"
        );
        // Lenient mode skips the rule (a typo is always an error), so nothing blocks.
        let out = FlowJson::lenient()
            .convert_with(br#"[{"resource":"a","cuont":5}]"#, Validation::Lenient);
        assert_eq!(out.ok().map(|o| flow(o.value)), Some(vec![]));
        // Nested objects too.
        let err = FlowJson::new()
            .convert(
                br#"[{"resource":"a","count":1,"clusterMode":true,"clusterConfig":{"flowID":1}}]"#,
            )
            .err();
        assert!(fields(err).contains(&"clusterConfig.flowID".to_owned()));
    }

    #[test]
    fn keys_stores_carry_are_ignored_and_other_keys_are_warnings() {
        let dashboard = br#"[{"id":7,"app":"shop","ip":"10.0.0.1","port":8719,"gmtCreate":1,
            "gmtModified":null,"resource":"a","count":1}]"#;
        let out = FlowJson::new()
            .convert_with(dashboard, Validation::Strict)
            .ok();
        assert_eq!(
            out.map(|o| (o.warnings.len(), flow(o.value).len())),
            Some((0, 1))
        );
        let unknown = br#"[{"resource":"a","count":1,"owner":"team-a"}]"#;
        let out = FlowJson::new()
            .convert_with(unknown, Validation::Strict)
            .ok();
        let warnings = out.map(|o| o.warnings).unwrap_or_default();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert_eq!(warnings[0].field, "owner");
        let denied = FlowJson::new().keys(KeyPolicy::Deny).convert(unknown).err();
        assert_eq!(fields(denied), vec!["owner".to_owned()]);
    }

    #[test]
    fn a_rule_without_the_field_that_decides_it_is_an_error_in_strict_mode() {
        for (converter, payload, missing) in [
            (
                java_converter(RuleFamily::Flow),
                &br#"[{"resource":"a"}]"#[..],
                &["count"][..],
            ),
            (
                java_converter(RuleFamily::ParamFlow),
                br#"[{"resource":"a","paramIdx":0}]"#,
                &["count"],
            ),
            (
                java_converter(RuleFamily::Degrade),
                br#"[{"resource":"a","timeWindow":5}]"#,
                &["grade", "count"],
            ),
        ] {
            let found = fields(converter.convert(payload).err());
            for field in missing {
                assert!(found.contains(&(*field).to_owned()), "{field}: {found:?}");
            }
            // Lenient mode keeps Java's defaults, and warns.
            let out = converter.convert_with(payload, Validation::Lenient).ok();
            let out = out.unwrap_or_else(|| panic!("lenient refused {payload:?}"));
            assert_eq!(out.value.len(), 1);
            assert_eq!(out.warnings.len(), missing.len(), "{:?}", out.warnings);
        }
    }

    #[test]
    fn decode_problems_do_not_hide_validation_problems() {
        let found = fields(
            ParamFlowJson::new()
                .convert(br#"[{"resource":"p","count":-1}]"#)
                .err(),
        );
        assert!(found.contains(&"paramIdx".to_owned()), "{found:?}");
        assert!(found.contains(&"count".to_owned()), "{found:?}");
        let found = fields(
            ParamFlowJson::new()
                .convert(br#"[{"resource":"p","count":1,"paramIdx":0,"controlBehavior":9,"durationInSec":0}]"#)
                .err(),
        );
        assert!(found.contains(&"controlBehavior".to_owned()), "{found:?}");
        assert!(found.contains(&"durationInSec".to_owned()), "{found:?}");
    }

    /// The three classes a fuzzer found where the fast path loaded what the general path
    /// refuses.
    #[test]
    fn an_escaped_backslash_before_a_foreign_key_does_not_hide_it() {
        let payload = br#"[{"resource":"C:\\","count":0,"grade":1,"paramIdx":0}]"#;
        let message = FlowJson::new()
            .convert(payload)
            .err()
            .map(|e| e.to_string());
        assert!(message.unwrap_or_default().contains("paramFlow"));
    }

    #[test]
    fn a_foreign_key_spelt_with_an_escape_or_long_keys_is_found() {
        let escaped = br#"[{"resource":"a","count":0,"\u0070aramIdx":0}]"#;
        assert!(FlowJson::new().convert(escaped).is_err());
        let long = format!(
            r#"[{{"resource":"a","count":0,"{}":1,"paramIdx":0}}]"#,
            "k".repeat(29)
        );
        assert!(FlowJson::new().convert(long.as_bytes()).is_err());
    }

    #[test]
    fn an_ignored_field_gets_the_checks_of_any_json() {
        let deep = format!("{}1{}", "[".repeat(130), "]".repeat(130));
        for value in ["1e400".to_owned(), "\"\\ud800\"".to_owned(), deep] {
            let payload = format!(r#"[{{"resource":"a","count":1,"app":{value}}}]"#);
            for bytes in [
                payload.clone().into_bytes(),
                [&b"\xEF\xBB\xBF"[..], payload.as_bytes()].concat(),
            ] {
                assert!(
                    matches!(
                        FlowJson::new().convert(&bytes),
                        Err(RuleError::Format { .. })
                    ),
                    "{value}"
                );
            }
        }
        let mut utf8 = br#"[{"resource":"a","count":1,"app":""#.to_vec();
        utf8.extend_from_slice(b"\xff\"}]");
        assert!(FlowJson::new().convert(&utf8).is_err());
    }

    #[test]
    fn a_combined_document_given_to_one_family_says_so() {
        let message = FlowJson::new()
            .convert(br#"{"flow":[{"resource":"a","count":1}]}"#)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            message.contains("combined document") && message.contains("--family"),
            "{message}"
        );
        let message = CombinedJson::new()
            .convert(br#"[{"resource":"a","count":1}]"#)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(message.contains("--family"), "{message}");
        // A converter does not name the payload ("payload payload: ...").
        assert!(
            !message.contains("payload payload") && !message.starts_with("payload"),
            "{message}"
        );
    }
}
