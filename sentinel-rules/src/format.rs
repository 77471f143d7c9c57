//! Payload formats, the converter each one takes, and what a rule set holds.

use sentinel_core::datasource::{
    AuthorityJson, CombinedJson, Converter, DegradeJson, FlowJson, GoCircuitBreakerJson,
    GoFlowJson, GoHotspotJson, GoSystemJson, ParamFlowJson, SystemJson,
};
use sentinel_core::RuleSet;
use serde_json::{json, Value};

use crate::{Failure, Shape};

/// A payload format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// Sentinel (Java) JSON: one family's list, as the dashboard stores it.
    Java,
    /// sentinel-golang JSON: one family's list.
    Go,
    /// The combined document: `{"flow": [...], "degrade": [...], ...}`.
    Combined,
}

/// A rule family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Family {
    Flow,
    Degrade,
    System,
    Authority,
    ParamFlow,
}

type Boxed = Box<dyn Converter<[u8], RuleSet>>;

impl Shape {
    /// Whether this shape is the combined document.
    pub(crate) fn is_combined(&self) -> bool {
        self.format == Some(Format::Combined) || (self.format.is_none() && self.family.is_none())
    }

    /// The converter of this shape.
    pub(crate) fn converter(&self) -> Result<Boxed, Failure> {
        let format = self.format.unwrap_or(match self.family {
            Some(_) => Format::Java,
            None => Format::Combined,
        });
        let converter: Boxed = match (format, self.family) {
            (Format::Combined, None) => Box::new(CombinedJson::new()),
            (Format::Combined, Some(_)) => {
                return Err(Failure::Usage(
                    "--family names one family's list: not with --format combined".into(),
                ))
            }
            (_, None) => return Err(Failure::Usage(
                "--format java and go need --family (flow, degrade, system, authority, param-flow)"
                    .into(),
            )),
            (Format::Java, Some(family)) => match family {
                Family::Flow => Box::new(FlowJson::new()),
                Family::Degrade => Box::new(DegradeJson::new()),
                Family::System => Box::new(SystemJson::new()),
                Family::Authority => Box::new(AuthorityJson::new()),
                Family::ParamFlow => Box::new(ParamFlowJson::new()),
            },
            (Format::Go, Some(family)) => match family {
                Family::Flow => Box::new(GoFlowJson::new()),
                Family::Degrade => Box::new(GoCircuitBreakerJson::new()),
                Family::System => Box::new(GoSystemJson::new()),
                Family::ParamFlow => Box::new(GoHotspotJson::new()),
                Family::Authority => {
                    return Err(Failure::Usage(
                        "sentinel-golang has no authority rules".into(),
                    ))
                }
            },
        };
        Ok(converter)
    }
}

/// A valid rule set read from a file.
#[derive(Debug)]
pub(crate) struct Rules {
    pub(crate) set: RuleSet,
}

impl Rules {
    /// How many rules of each family the set carries.
    pub(crate) fn counts(&self) -> Value {
        let families = families(&self.set);
        Value::Object(
            families
                .into_iter()
                .map(|(family, rules)| (family.to_owned(), json!(rules.len())))
                .collect(),
        )
    }

    /// "3 flow rules, 1 degrade rule".
    pub(crate) fn summary(&self) -> String {
        let parts: Vec<String> = families(&self.set)
            .into_iter()
            .map(|(family, rules)| {
                let s = if rules.len() == 1 { "" } else { "s" };
                format!("{} {family} rule{s}", rules.len())
            })
            .collect();
        if parts.is_empty() {
            "no rule family".to_owned()
        } else {
            parts.join(", ")
        }
    }
}

/// Each family the set carries, with its rules as JSON, in the combined document's order.
fn families(set: &RuleSet) -> Vec<(String, Vec<Value>)> {
    let document: Value = set
        .to_combined_json()
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or(Value::Null);
    let Value::Object(map) = document else {
        return Vec::new();
    };
    sentinel_core::RuleFamily::ALL
        .iter()
        .filter_map(|family| {
            let rules = map.get(family.as_str())?.as_array()?.clone();
            Some((family.as_str().to_owned(), rules))
        })
        .collect()
}

/// What writing `wanted` over `stored` changes: rules removed and added, per family (only
/// the families `wanted` carries).
pub(crate) fn diff(stored: &RuleSet, wanted: &RuleSet) -> Vec<Value> {
    let before = families(stored);
    let mut changes = Vec::new();
    for (family, rules) in families(wanted) {
        let old: Vec<Value> = before
            .iter()
            .find(|(f, _)| *f == family)
            .map(|(_, r)| r.clone())
            .unwrap_or_default();
        for rule in old.iter().filter(|r| !rules.contains(r)) {
            changes.push(json!({ "op": "-", "family": family, "rule": rule }));
        }
        for rule in rules.iter().filter(|r| !old.contains(r)) {
            changes.push(json!({ "op": "+", "family": family, "rule": rule }));
        }
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;
    use sentinel_core::flow::FlowRule;

    #[test]
    fn a_diff_lists_removed_then_added_rules() {
        let stored =
            RuleSet::new().with_flow(vec![FlowRule::qps("a", 1.0), FlowRule::qps("b", 2.0)]);
        let wanted =
            RuleSet::new().with_flow(vec![FlowRule::qps("a", 1.0), FlowRule::qps("b", 3.0)]);
        let changes = diff(&stored, &wanted);
        let ops: Vec<(&str, f64)> = changes
            .iter()
            .map(|c| {
                (
                    c["op"].as_str().unwrap_or(""),
                    c["rule"]["count"].as_f64().unwrap_or(0.0),
                )
            })
            .collect();
        assert_eq!(ops, vec![("-", 2.0), ("+", 3.0)]);
        assert!(diff(&stored, &stored).is_empty());
    }
}
