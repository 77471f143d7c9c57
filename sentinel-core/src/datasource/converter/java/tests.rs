//! Sentinel (Java) JSON read as Sentinel reads it: shape errors, type errors naming their
//! path, unknown and misspelt keys, the field that decides a rule, and the combined document.

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
    let out =
        FlowJson::lenient().convert_with(br#"[{"resource":"a","cuont":5}]"#, Validation::Lenient);
    assert_eq!(out.ok().map(|o| flow(o.value)), Some(vec![]));
    // Nested objects too.
    let err = FlowJson::new()
        .convert(br#"[{"resource":"a","count":1,"clusterMode":true,"clusterConfig":{"flowID":1}}]"#)
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
