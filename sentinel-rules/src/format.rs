//! Payload formats, the converter each one takes, and what a rule set holds.

use sentinel_core::datasource::{
    AuthorityJson, CombinedJson, Converter, DegradeJson, FlowJson, GoCircuitBreakerJson,
    GoFlowJson, GoHotspotJson, GoSystemJson, KubernetesYaml, ParamFlowJson, SystemJson,
};
use sentinel_core::{KeyPolicy, RuleFamily, RuleIssue, RuleSet};
use serde_json::{json, Value};

use crate::failure::Failure;

/// A payload format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// Sentinel (Java) JSON: one family's list, as the dashboard stores it.
    Java,
    /// sentinel-golang JSON: one family's list.
    Go,
    /// The combined document: `{"flow": [...], "degrade": [...], ...}`.
    Combined,
    /// sentinel-golang's Kubernetes resources (YAML: `FlowRules`, `CircuitBreakerRules`,
    /// `HotspotRules`, `IsolationRules`, `SystemRules`), one or more documents; no
    /// `--family` (each document's `kind` names it).
    K8s,
}

/// A rule family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Family {
    Flow,
    Degrade,
    System,
    Authority,
    /// Hot-parameter rules, named as in the combined document (`param-flow` is accepted too).
    #[value(name = "paramFlow", alias = "param-flow")]
    ParamFlow,
}

/// How the rules are written: the format and (for a per-family list) the family.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Shape {
    /// The payload format: Sentinel (Java) JSON of one family, sentinel-golang JSON of one
    /// family, or the combined document `{"flow": [...], ...}`. Default: `java` with a
    /// `--family`, `combined` without.
    #[arg(long, value_enum)]
    pub(crate) format: Option<Format>,
    /// The rule family of a per-family list.
    #[arg(long, value_enum)]
    pub(crate) family: Option<Family>,
}

/// A converter of stored bytes to rules.
pub(crate) type Boxed = Box<dyn Converter<[u8], RuleSet>>;

impl From<Family> for RuleFamily {
    fn from(family: Family) -> Self {
        match family {
            Family::Flow => RuleFamily::Flow,
            Family::Degrade => RuleFamily::Degrade,
            Family::System => RuleFamily::System,
            Family::Authority => RuleFamily::Authority,
            Family::ParamFlow => RuleFamily::ParamFlow,
        }
    }
}

impl Shape {
    /// Whether `--format` or `--family` was given.
    pub(crate) fn is_given(&self) -> bool {
        self.format.is_some() || self.family.is_some()
    }

    /// Whether this shape is the combined document.
    pub(crate) fn is_combined(&self) -> bool {
        self.format == Some(Format::Combined) || (self.format.is_none() && self.family.is_none())
    }

    /// The name of this shape's JSON Schema (`flow`, `combined`, `go-flow`...), as
    /// `sentinel_core::datasource::schema::rule_schemas` names them.
    pub(crate) fn schema_name(&self) -> Result<&'static str, Failure> {
        let format = self.format.unwrap_or(match self.family {
            Some(_) => Format::Java,
            None => Format::Combined,
        });
        Ok(match (format, self.family) {
            (Format::Combined, None) => "combined",
            (Format::Java, Some(family)) => RuleFamily::from(family).as_str(),
            (Format::Go, Some(Family::Flow)) => "go-flow",
            (Format::Go, Some(Family::Degrade)) => "go-circuit-breaker",
            (Format::Go, Some(Family::System)) => "go-system",
            (Format::Go, Some(Family::ParamFlow)) => "go-hotspot",
            // One YAML document of any kind the k8s format reads (sentinel-golang's CRDs and
            // OpenSergo's fault-tolerance kinds); `schemas/opensergo.json` is OpenSergo's alone.
            (Format::K8s, None) => "k8s",
            _ => {
                // The converter names what is wrong with the shape.
                self.converter()?;
                return Err(Failure::Usage(
                    "no schema for this format and family".into(),
                ));
            }
        })
    }

    /// The converter of this shape (unknown keys are warnings).
    pub(crate) fn converter(&self) -> Result<Boxed, Failure> {
        self.converter_with(KeyPolicy::Warn)
    }

    /// The converter of this shape, with what an unknown key is.
    pub(crate) fn converter_with(&self, keys: KeyPolicy) -> Result<Boxed, Failure> {
        let format = self.format.unwrap_or(match self.family {
            Some(_) => Format::Java,
            None => Format::Combined,
        });
        let converter: Boxed = match (format, self.family) {
            (Format::Combined, None) => Box::new(CombinedJson::new().keys(keys)),
            (Format::K8s, None) => Box::new(KubernetesYaml::new().keys(keys)),
            (Format::K8s, Some(_)) => {
                return Err(Failure::Usage(
                    "--format k8s takes no --family: each resource's `kind` names it".into(),
                ))
            }
            (Format::Combined, Some(_)) => {
                return Err(Failure::Usage(
                    "--family names one family's list: not with --format combined".into(),
                ))
            }
            (_, None) => return Err(Failure::Usage(
                "--format java and go need --family (flow, degrade, system, authority, paramFlow)"
                    .into(),
            )),
            (Format::Java, Some(family)) => match family {
                Family::Flow => Box::new(FlowJson::new().keys(keys)),
                Family::Degrade => Box::new(DegradeJson::new().keys(keys)),
                Family::System => Box::new(SystemJson::new().keys(keys)),
                Family::Authority => Box::new(AuthorityJson::new().keys(keys)),
                Family::ParamFlow => Box::new(ParamFlowJson::new().keys(keys)),
            },
            (Format::Go, Some(family)) => match family {
                Family::Flow => Box::new(GoFlowJson::new().keys(keys)),
                Family::Degrade => Box::new(GoCircuitBreakerJson::new().keys(keys)),
                Family::System => Box::new(GoSystemJson::new().keys(keys)),
                Family::ParamFlow => Box::new(GoHotspotJson::new().keys(keys)),
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

/// The Sentinel (Java) converter of one family's list (of a Nacos app's dataIds).
#[cfg(feature = "nacos")]
pub(crate) fn java(family: RuleFamily) -> Boxed {
    match family {
        RuleFamily::Degrade => Box::new(DegradeJson::new()),
        RuleFamily::System => Box::new(SystemJson::new()),
        RuleFamily::Authority => Box::new(AuthorityJson::new()),
        RuleFamily::ParamFlow => Box::new(ParamFlowJson::new()),
        _ => Box::new(FlowJson::new()),
    }
}

/// A valid rule set read from a file.
#[derive(Debug)]
pub(crate) struct Rules {
    pub(crate) set: RuleSet,
    /// What loaded but deserves a look (unknown keys).
    pub(crate) warnings: Vec<RuleIssue>,
}

impl Rules {
    /// How many rules of each family the set carries, shadow rules under `shadow`:
    /// `{"flow": 2, "shadow": {"flow": 1}}`.
    pub(crate) fn counts(&self) -> Value {
        let mut counts = serde_json::Map::new();
        let mut shadow = serde_json::Map::new();
        for (section, rules) in sections(&self.set) {
            let into = if section.shadow {
                &mut shadow
            } else {
                &mut counts
            };
            into.insert(section.family.as_str().to_owned(), json!(rules.len()));
        }
        if !shadow.is_empty() {
            counts.insert(SHADOW.to_owned(), Value::Object(shadow));
        }
        Value::Object(counts)
    }

    /// "3 flow rules, 1 degrade rule, 1 shadow flow rule".
    pub(crate) fn summary(&self) -> String {
        let parts: Vec<String> = sections(&self.set)
            .into_iter()
            .map(|(section, rules)| {
                let s = if rules.len() == 1 { "" } else { "s" };
                format!("{} {section} rule{s}", rules.len())
            })
            .collect();
        if parts.is_empty() {
            "no rule family".to_owned()
        } else {
            parts.join(", ")
        }
    }
}

/// The combined document's key of the shadow section.
const SHADOW: &str = "shadow";

/// One list of a combined document: an enforced family, or a family of the shadow section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Section {
    family: RuleFamily,
    shadow: bool,
}

impl Section {
    /// Every section, in the combined document's order: the enforced families, then the
    /// shadow ones.
    fn all() -> impl Iterator<Item = Section> {
        [false, true].into_iter().flat_map(|shadow| {
            RuleFamily::ALL
                .iter()
                .map(move |&family| Section { family, shadow })
        })
    }
}

impl std::fmt::Display for Section {
    /// `flow`, `shadow flow`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.shadow {
            write!(f, "{SHADOW} {}", self.family.as_str())
        } else {
            f.write_str(self.family.as_str())
        }
    }
}

/// Each list the set carries (the enforced families, then the shadow section's), with its
/// rules as JSON.
fn sections(set: &RuleSet) -> Vec<(Section, Vec<Value>)> {
    let document: Value = set
        .to_combined_json()
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or(Value::Null);
    Section::all()
        .filter_map(|section| {
            let list = if section.shadow {
                document.get(SHADOW)?
            } else {
                &document
            };
            let rules = list.get(section.family.as_str())?.as_array()?.clone();
            Some((section, rules))
        })
        .collect()
}

/// The rules of one family of `rules` (nothing when the set does not carry it), for a
/// Nacos app's dataIds.
#[cfg(feature = "nacos")]
pub(crate) fn only(rules: &RuleSet, family: RuleFamily) -> RuleSet {
    let mut one = RuleSet::new();
    match family {
        RuleFamily::Flow => one.flow.clone_from(&rules.flow),
        RuleFamily::Degrade => one.degrade.clone_from(&rules.degrade),
        RuleFamily::System => one.system.clone_from(&rules.system),
        RuleFamily::Authority => one.authority.clone_from(&rules.authority),
        RuleFamily::ParamFlow => one.param_flow.clone_from(&rules.param_flow),
        _ => {}
    }
    one
}

/// The rules the engine holds now, every family carried, and its shadow rules (a shadow
/// section when there are any).
pub(crate) fn active(sentinel: &sentinel_core::Sentinel) -> RuleSet {
    let rules = sentinel.active_rules();
    let mut set = RuleSet::new()
        .with_flow(rules.flow)
        .with_degrade(rules.degrade)
        .with_system(rules.system)
        .with_authority(rules.authority)
        .with_param_flow(rules.param_flow);
    let shadow = sentinel.shadow_rules();
    if !shadow.is_empty() {
        set.shadow = Some(Box::new(shadow));
    }
    set
}

/// What writing `wanted` over `stored` changes, in every family either carries, the shadow
/// section's included: a family the store holds and `wanted` does not is removed (`push`
/// replaces the document). Rules are paired by resource (the n-th rule of a resource with
/// the n-th), so a changed rule is one `~` change listing its fields; unpaired rules are `-`
/// (removed) and `+` (added). A shadow rule's change says `"shadow": true`.
pub(crate) fn diff(stored: &RuleSet, wanted: &RuleSet) -> Vec<Value> {
    let before = sections(stored);
    let after = sections(wanted);
    let mut changes = Vec::new();
    for section in Section::all() {
        let find = |list: &[(Section, Vec<Value>)]| {
            list.iter()
                .find(|(s, _)| *s == section)
                .map(|(_, rules)| rules.clone())
        };
        let (old, new) = match (find(&before), find(&after)) {
            (None, None) => continue,
            (old, new) => (old.unwrap_or_default(), new.unwrap_or_default()),
        };
        diff_family(section, &old, &new, &mut changes);
    }
    changes
}

fn resource(rule: &Value) -> String {
    rule.get("resource")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

fn diff_family(section: Section, old: &[Value], new: &[Value], changes: &mut Vec<Value>) {
    let family = section.family.as_str();
    // A change: the op, the family, and `"shadow": true` for a shadow rule's.
    let change = |op: &str, resource: String| {
        let mut change = json!({ "op": op, "family": family, "resource": resource });
        if section.shadow {
            change["shadow"] = json!(true);
        }
        change
    };
    let mut unpaired: Vec<Option<&Value>> = new.iter().map(Some).collect();
    let mut removed = Vec::new();
    let mut changed = Vec::new();
    for rule in old {
        let name = resource(rule);
        // The first wanted rule of this resource not yet paired: an identical one first.
        let slot = unpaired
            .iter()
            .position(|r| r.is_some_and(|r| r == rule))
            .or_else(|| {
                unpaired
                    .iter()
                    .position(|r| r.is_some_and(|r| resource(r) == name))
            });
        match slot {
            Some(i) => {
                let Some(other) = unpaired[i].take() else {
                    continue;
                };
                let fields = field_changes(rule, other);
                if !fields.is_empty() {
                    let mut c = change("~", name);
                    c["fields"] = json!(fields);
                    c["rule"] = other.clone();
                    changed.push(c);
                }
            }
            None => {
                let mut c = change("-", name);
                c["rule"] = rule.clone();
                removed.push(c);
            }
        }
    }
    changes.extend(removed);
    changes.extend(changed);
    for rule in unpaired.into_iter().flatten() {
        let mut c = change("+", resource(rule));
        c["rule"] = rule.clone();
        changes.push(c);
    }
}

/// The section a change is in: `flow`, `shadow flow`.
fn section_of(change: &Value) -> String {
    let family = change["family"].as_str().unwrap_or("?");
    if change["shadow"] == json!(true) {
        format!("{SHADOW} {family}")
    } else {
        family.to_owned()
    }
}

/// The fields whose values differ: `[{"field": "count", "from": 20, "to": 30}]`.
fn field_changes(old: &Value, new: &Value) -> Vec<Value> {
    let (Value::Object(old), Value::Object(new)) = (old, new) else {
        return vec![json!({ "field": "", "from": old, "to": new })];
    };
    let mut names: Vec<&String> = old.keys().chain(new.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter_map(|name| {
            let (from, to) = (old.get(name), new.get(name));
            (from != to).then(|| {
                json!({
                    "field": name,
                    "from": from.cloned().unwrap_or(Value::Null),
                    "to": to.cloned().unwrap_or(Value::Null),
                })
            })
        })
        .collect()
}

/// One line per change: `~ flow GET:/order: count: 20 -> 30`, `- degrade GET:/order: {...}`.
pub(crate) fn change_line(change: &Value) -> String {
    let op = change["op"].as_str().unwrap_or("?");
    let family = section_of(change);
    let resource = change["resource"].as_str().unwrap_or("");
    let what = if op == "~" {
        fields_text(change)
    } else {
        change["rule"].to_string()
    };
    if resource.is_empty() {
        format!("{op} {family}: {what}")
    } else {
        format!("{op} {family} {resource}: {what}")
    }
}

fn fields_text(change: &Value) -> String {
    change["fields"]
        .as_array()
        .map(|fields| {
            fields
                .iter()
                .map(|f| {
                    format!(
                        "{}: {} -> {}",
                        f["field"].as_str().unwrap_or("?"),
                        f["from"],
                        f["to"]
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

/// Per family: `degrade: 1 rule removed`, `flow: 1 rule changed, 2 added`, `shadow flow:
/// 1 rule added`.
pub(crate) fn summary_lines(changes: &[Value]) -> Vec<String> {
    let mut lines = Vec::new();
    for section in Section::all() {
        let name = section.to_string();
        let count = |op: &str| {
            changes
                .iter()
                .filter(|c| section_of(c) == name && c["op"] == op)
                .count()
        };
        let parts: Vec<String> = [("~", "changed"), ("-", "removed"), ("+", "added")]
            .iter()
            .filter_map(|(op, word)| {
                let n = count(op);
                (n > 0).then(|| format!("{n} {word}"))
            })
            .collect();
        if let Some((first, rest)) = parts.split_first() {
            let (n, word) = first.split_once(' ').unwrap_or((first, ""));
            let s = if n == "1" { "" } else { "s" };
            let mut line = format!("{name}: {n} rule{s} {word}");
            for part in rest {
                line.push_str(", ");
                line.push_str(part);
            }
            lines.push(line);
        }
    }
    lines
}

/// One line for `watch`: the per-family summary, and the field changes of up to three rules.
pub(crate) fn watch_text(changes: &[Value]) -> String {
    if changes.is_empty() {
        return "no rule changed".to_owned();
    }
    let mut text = summary_lines(changes).join("; ");
    let details: Vec<String> = changes
        .iter()
        .filter(|c| c["op"] == "~")
        .take(3)
        .map(|c| {
            format!(
                "{} {}",
                c["resource"].as_str().unwrap_or(""),
                fields_text(c)
            )
        })
        .collect();
    if !details.is_empty() {
        text.push_str(&format!(" ({})", details.join("; ")));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use sentinel_core::flow::FlowRule;

    #[test]
    fn a_diff_names_changed_fields_and_every_family_the_store_holds() {
        use sentinel_core::circuit_breaker::DegradeRule;
        let stored = RuleSet::new()
            .with_flow(vec![
                FlowRule::qps("a", 1.0),
                FlowRule::qps("GET:/order", 20.0),
            ])
            .with_degrade(vec![DegradeRule::error_count("GET:/order", 5.0, 10)]);
        let wanted = RuleSet::new().with_flow(vec![
            FlowRule::qps("a", 1.0),
            FlowRule::qps("GET:/order", 30.0),
            FlowRule::qps("GET:/pay", 5.0),
        ]);
        let changes = diff(&stored, &wanted);
        let lines: Vec<String> = changes.iter().map(change_line).collect();
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert_eq!(lines[0], "~ flow GET:/order: count: 20.0 -> 30.0");
        assert!(lines[1].starts_with("+ flow GET:/pay: {"), "{lines:?}");
        assert!(lines[2].starts_with("- degrade GET:/order: {"), "{lines:?}");
        assert_eq!(
            summary_lines(&changes),
            vec!["flow: 1 rule changed, 1 added", "degrade: 1 rule removed"]
        );
        assert!(watch_text(&changes).contains("GET:/order count: 20.0 -> 30.0"));
        assert!(diff(&stored, &stored).is_empty());
        // Nothing stored: every wanted rule is added.
        assert_eq!(diff(&RuleSet::new(), &wanted).len(), 3);
    }
}
