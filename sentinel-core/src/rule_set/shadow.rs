//! Shadow rules on the wire: the `shadow` section of a combined document, and what a shadow
//! rule may not be (the shadow tables themselves are `crate::shadow`'s).

use serde_json::Value;

use super::{family_names, Decoded, Loaded, RuleSet, COMBINED_FORMAT, SHADOW_KEY};
use crate::family::Family;
use crate::rules::{KeyPolicy, RuleError, RuleFamily, RuleIssue, Validation};
use crate::wire;

/// Reads the value of a combined document's `shadow` key: an object keyed by family like the
/// document itself (`null` clears every shadow family). `Ok(Err(issues))`: invalid rules,
/// marked as shadow; `Err`: the section is not readable.
pub(crate) fn decode_section(
    value: Value,
    validation: Validation,
    keys: KeyPolicy,
) -> Result<Decoded, RuleError> {
    let map = match value {
        Value::Null => {
            return Ok(Ok(Loaded {
                set: RuleSet::cleared(RuleFamily::ALL),
                ..Loaded::default()
            }))
        }
        Value::Object(map) => map,
        other => {
            return Err(wire::format_error(
                COMBINED_FORMAT,
                format!(
                    "`{SHADOW_KEY}`: expected an object keyed by rule family ({}), found {}",
                    family_names(),
                    wire::kind(&other)
                ),
            ))
        }
    };
    if map.contains_key(SHADOW_KEY) {
        return Err(wire::format_error(
            COMBINED_FORMAT,
            format!("`{SHADOW_KEY}` holds another `{SHADOW_KEY}` section"),
        ));
    }
    let bytes = serde_json::to_vec(&Value::Object(map))
        .map_err(|e| wire::format_error(COMBINED_FORMAT, e.to_string()))?;
    match RuleSet::from_combined_json(&bytes, validation, keys) {
        Ok(mut loaded) => {
            let mut issues = Vec::new();
            loaded.set = refuse_unsupported(loaded.set, &mut issues);
            let issues: Vec<RuleIssue> = issues.into_iter().map(RuleIssue::in_shadow).collect();
            if validation == Validation::Strict && !issues.is_empty() {
                return Ok(Err(issues));
            }
            loaded.skipped.extend(issues);
            mark(&mut loaded.skipped);
            mark(&mut loaded.warnings);
            Ok(Ok(loaded))
        }
        Err(RuleError::Invalid { issues, .. }) => {
            Ok(Err(issues.into_iter().map(RuleIssue::in_shadow).collect()))
        }
        Err(RuleError::Format { message, .. }) => Err(wire::format_error(
            COMBINED_FORMAT,
            format!("`{SHADOW_KEY}`: {message}"),
        )),
    }
}

fn mark(issues: &mut [RuleIssue]) {
    for issue in issues {
        issue.shadow = true;
    }
}

/// The validation stage for a shadow set: the families' own checks, then what a shadow rule
/// cannot be. Issues are not yet marked as shadow (the caller does).
pub(crate) fn keep_valid(set: RuleSet, issues: &mut Vec<RuleIssue>) -> RuleSet {
    let set = refuse_unsupported(set, issues);
    let mut set = set.keep_valid(issues);
    set.shadow = None;
    set
}

/// Drops the rules a shadow table cannot hold, with an issue each:
/// - regex resources (a shadow rule names one resource);
/// - `clusterMode` rules (a cluster backend's tokens would be taken twice);
/// - thread-grade param rules (their places are held by the call, which a shadow rule does
///   not own);
/// - a shadow section inside a shadow section.
fn refuse_unsupported(mut set: RuleSet, issues: &mut Vec<RuleIssue>) -> RuleSet {
    fn keep<F: Family>(
        rules: &mut Option<Vec<F>>,
        issues: &mut Vec<RuleIssue>,
        resource: impl Fn(&F) -> &str,
    ) {
        let Some(list) = rules.take() else {
            return;
        };
        let mut kept = Vec::with_capacity(list.len());
        for (index, rule) in list.into_iter().enumerate() {
            match rule.shadow_unsupported() {
                Some((field, message)) => issues.push(RuleIssue::new(
                    F::FAMILY,
                    index,
                    Some(resource(&rule)),
                    field,
                    message,
                )),
                None => kept.push(rule),
            }
        }
        *rules = Some(kept);
    }
    keep(&mut set.flow, issues, |r| &r.resource);
    keep(&mut set.degrade, issues, |r| &r.resource);
    keep(&mut set.authority, issues, |r| &r.resource);
    keep(&mut set.param_flow, issues, |r| &r.resource);
    if set.shadow.take().is_some() {
        issues.push(RuleIssue::new(
            RuleFamily::Flow,
            0,
            None,
            SHADOW_KEY,
            "a shadow set cannot hold another shadow set",
        ));
    }
    set
}
