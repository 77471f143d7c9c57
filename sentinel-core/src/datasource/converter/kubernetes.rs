//! sentinel-golang's Kubernetes custom resources (`datasource.sentinel.io/v1alpha1`), read
//! from YAML: one or more documents, each a `FlowRules`, `CircuitBreakerRules`,
//! `HotspotRules`, `IsolationRules` or `SystemRules` resource whose `spec.rules` list is
//! mapped as sentinel-golang's Kubernetes data source maps it, then read by the matching
//! sentinel-golang JSON converter.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::opensergo;
use super::{
    converter_with_mode, Converted, Converter, GoCircuitBreakerJson, GoFlowJson, GoHotspotJson,
    GoIsolationJson, GoSystemJson,
};
use crate::rule_set::RuleSet;
use crate::rules::{KeyPolicy, RuleError, RuleFamily, RuleIssue, Validation};
use crate::wire::{self, Format};

/// The format named in errors.
const FORMAT: &str = "sentinel-golang Kubernetes resources (YAML)";
/// The API group and version of sentinel-golang's custom resources.
pub(crate) const API_VERSION: &str = "datasource.sentinel.io/v1alpha1";

converter_with_mode!(
    /// sentinel-golang's Kubernetes custom resources (`apiVersion:
    /// datasource.sentinel.io/v1alpha1`), as a mounted file, a ConfigMap's value or an etcd
    /// key holds them: one YAML document or several (`---`), each a `FlowRules`,
    /// `CircuitBreakerRules`, `HotspotRules`, `IsolationRules` or `SystemRules` resource.
    ///
    /// The rules of `spec.rules` are read as sentinel-golang's Kubernetes data source reads
    /// them, then as its JSON ([`GoFlowJson`] and its siblings):
    /// - enums are strings: `Direct`/`WarmUp`, `Reject`/`Throttling`,
    ///   `CurrentResource`/`AssociatedResource`, `SlowRequestRatio`/`ErrorRatio`/`ErrorCount`,
    ///   `Concurrency`/`QPS`, `KindInt`/`KindString`/`KindBool`/`KindFloat64`,
    ///   `Load`/`AvgRT`/`Concurrency`/`InboundQPS`/`CpuUsage`, `NoAdaptive`/`BBR`; an unknown
    ///   one is an issue naming the field (Go skips the rule);
    /// - ratios are integer percent: a circuit breaker's `threshold` with the
    ///   `SlowRequestRatio` or `ErrorRatio` strategy, and a system rule's `triggerCount` for
    ///   `Load` and `CpuUsage`, are divided by 100;
    /// - a flow rule's `statIntervalInMs` is not used, as in Go;
    /// - `IsolationRules` are concurrency limits, read as [`GoIsolationJson`] reads them.
    ///
    /// OpenSergo's fault-tolerance resources (`fault-tolerance.opensergo.io/v1alpha1`) in
    /// the same payload are read too: each `FaultToleranceRule` applies the strategies it
    /// names (`RateLimitStrategy`, `ThrottlingStrategy`, `ConcurrencyLimitStrategy`,
    /// `CircuitBreakerStrategy`) to its targets' resources; a `RateLimitStrategy` with
    /// `limitMode: Global` becomes a cluster rule with a global threshold.
    ///
    /// Messages name the document (`document #1 (FlowRules sentinel-go-flow-rules)`), the
    /// rule's index in its `spec.rules` and the field. Rules of several documents of one
    /// family are applied together.
    ///
    /// ```
    /// use sentinel_core::datasource::{Converter, KubernetesYaml};
    ///
    /// let yaml = b"apiVersion: datasource.sentinel.io/v1alpha1
    /// kind: FlowRules
    /// metadata:
    ///   name: orders
    /// spec:
    ///   rules:
    ///     - resource: GET:/order
    ///       threshold: 20
    ///       controlBehavior: Reject
    /// ";
    /// let set = KubernetesYaml::new().convert(&yaml[..]).unwrap();
    /// assert_eq!(set.flow.unwrap()[0].count, 20.0);
    /// ```
    KubernetesYaml,
    |self, source, validation| convert(source, validation, self.keys)
);

/// Problems found while mapping a rule: the field and what is wrong.
type Problems = Vec<(String, String)>;

/// Rewrites one rule of a resource into sentinel-golang's JSON beyond its string enums,
/// noting its problems.
type MapRule = fn(&mut Map<String, Value>, &mut Problems);

/// Reads sentinel-golang's JSON of one family.
type ConvertRules = fn(&[u8], Validation, KeyPolicy) -> Result<Converted<RuleSet>, RuleError>;

/// A string enum of a resource's rules: each name, and the code sentinel-golang's JSON
/// reads for it. The converter maps the names and the schema lists them, from this table.
pub(crate) type Names = &'static [(&'static str, i64)];

/// A flow rule's `tokenCalculateStrategy`.
const TOKEN_CALCULATE_STRATEGY: Names = &[("Direct", 0), ("WarmUp", 1), ("MemoryAdaptive", 2)];
/// A flow or hotspot rule's `controlBehavior`.
const CONTROL_BEHAVIOR: Names = &[("Reject", 0), ("Throttling", 1)];
/// A flow rule's `relationStrategy`.
const RELATION_STRATEGY: Names = &[("CurrentResource", 0), ("AssociatedResource", 1)];
/// A circuit-breaker rule's `strategy`.
const BREAKER_STRATEGY: Names = &[
    ("SlowRequestRatio", 0),
    ("ErrorRatio", 1),
    ("ErrorCount", 2),
];
/// A hotspot rule's `metricType`.
const HOTSPOT_METRIC_TYPE: Names = &[("Concurrency", 0), ("QPS", 1)];
/// A hotspot rule's `specificItems[].valKind`.
const VAL_KIND: Names = &[
    ("KindInt", 0),
    ("KindString", 1),
    ("KindBool", 2),
    ("KindFloat64", 3),
];
/// An isolation rule's `metricType`.
const ISOLATION_METRIC_TYPE: Names = &[("Concurrency", 0)];
/// A system rule's `metricType`.
const SYSTEM_METRIC_TYPE: Names = &[
    ("Load", 0),
    ("AvgRT", 1),
    ("Concurrency", 2),
    ("InboundQPS", 3),
    ("CpuUsage", 4),
];
/// A system rule's `strategy`.
const SYSTEM_STRATEGY: Names = &[("NoAdaptive", -1), ("BBR", 1)];

/// One resource kind: its family, its rules' string enums and other mapping, and its
/// converter.
pub(crate) struct Kind {
    /// The `kind` of the resource.
    pub(crate) name: &'static str,
    family: RuleFamily,
    /// The string enums of a rule, by field, in the order they are checked.
    pub(crate) enums: &'static [(&'static str, Names)],
    /// The string enums of the objects of a rule's list field: (list, field, names).
    pub(crate) item_enums: &'static [(&'static str, &'static str, Names)],
    map: MapRule,
    convert: ConvertRules,
    /// The sentinel-golang JSON its rules are read as (the schema starts from its rule).
    #[cfg_attr(not(feature = "schema"), allow(dead_code))]
    pub(crate) go_format: Format,
}

/// The kinds of sentinel-golang's resources.
pub(crate) const KINDS: &[Kind] = &[
    Kind {
        name: "FlowRules",
        family: RuleFamily::Flow,
        enums: &[
            ("tokenCalculateStrategy", TOKEN_CALCULATE_STRATEGY),
            ("controlBehavior", CONTROL_BEHAVIOR),
            ("relationStrategy", RELATION_STRATEGY),
        ],
        item_enums: &[],
        map: map_flow,
        convert: |b, v, k| GoFlowJson::new().keys(k).convert_with(b, v),
        go_format: Format::GoFlow,
    },
    Kind {
        name: "CircuitBreakerRules",
        family: RuleFamily::Degrade,
        enums: &[("strategy", BREAKER_STRATEGY)],
        item_enums: &[],
        map: map_breaker,
        convert: |b, v, k| GoCircuitBreakerJson::new().keys(k).convert_with(b, v),
        go_format: Format::GoBreaker,
    },
    Kind {
        name: "HotspotRules",
        family: RuleFamily::ParamFlow,
        enums: &[
            ("metricType", HOTSPOT_METRIC_TYPE),
            ("controlBehavior", CONTROL_BEHAVIOR),
        ],
        item_enums: &[("specificItems", "valKind", VAL_KIND)],
        map: |_, _| {},
        convert: |b, v, k| GoHotspotJson::new().keys(k).convert_with(b, v),
        go_format: Format::GoHotspot,
    },
    Kind {
        name: "IsolationRules",
        family: RuleFamily::Flow,
        enums: &[("metricType", ISOLATION_METRIC_TYPE)],
        item_enums: &[],
        map: |_, _| {},
        convert: |b, v, k| GoIsolationJson::new().keys(k).convert_with(b, v),
        go_format: Format::GoIsolation,
    },
    Kind {
        name: "SystemRules",
        family: RuleFamily::System,
        enums: &[
            ("metricType", SYSTEM_METRIC_TYPE),
            ("strategy", SYSTEM_STRATEGY),
        ],
        item_enums: &[],
        map: map_system,
        convert: |b, v, k| GoSystemJson::new().keys(k).convert_with(b, v),
        go_format: Format::GoSystem,
    },
];

impl Kind {
    /// Rewrites one rule into sentinel-golang's JSON: its string enums become codes, then
    /// the kind's own mapping runs.
    fn map_rule(&self, rule: &mut Map<String, Value>, problems: &mut Problems) {
        for (field, names) in self.enums {
            code(rule, field, names, problems);
        }
        for (list, field, names) in self.item_enums {
            if let Some(Value::Array(items)) = rule.get_mut(*list) {
                for (i, item) in items.iter_mut().enumerate() {
                    if let Some(item) = item.as_object_mut() {
                        let mut found = Vec::new();
                        code(item, field, names, &mut found);
                        problems.extend(
                            found
                                .into_iter()
                                .map(|(f, message)| (format!("{list}[{i}].{f}"), message)),
                        );
                    }
                }
            }
        }
        (self.map)(rule, problems);
    }
}

fn convert(
    source: &[u8],
    validation: Validation,
    keys: KeyPolicy,
) -> Result<Converted<RuleSet>, RuleError> {
    let text = std::str::from_utf8(source)
        .map_err(|e| wire::format_error(FORMAT, format!("not UTF-8: {e}")))?;
    let mut set = RuleSet::new();
    let mut issues = Vec::new();
    let mut skipped = Vec::new();
    let mut warnings = Vec::new();
    let mut opensergo = Vec::new();
    for (number, document) in serde_norway::Deserializer::from_str(text).enumerate() {
        let at =
            |message: String| wire::format_error(FORMAT, format!("document #{number}: {message}"));
        let value = Value::deserialize(document).map_err(|e| at(e.to_string()))?;
        let Value::Object(mut resource) = value else {
            if value.is_null() {
                continue; // an empty document (a trailing `---`)
            }
            return Err(at(format!(
                "expected a resource, found {}",
                wire::kind(&value)
            )));
        };
        let api = resource
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        if api == opensergo::API_VERSION {
            let kind = resource
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            if !opensergo::known_kind(&kind) {
                return Err(at(format!(
                    "`kind` is {kind:?}; expected one of {}",
                    opensergo::kinds()
                )));
            }
            let name = metadata_name(&resource);
            let spec = match resource.remove("spec") {
                Some(Value::Object(spec)) => spec,
                _ => return Err(at(format!("{kind} {name}: `spec` must be an object"))),
            };
            opensergo.push(opensergo::Resource {
                number,
                kind,
                name,
                spec,
            });
            continue;
        }
        if api != API_VERSION {
            return Err(at(format!(
                "`apiVersion` is {api:?}; expected {API_VERSION:?} (sentinel-golang's resources) \
                 or {:?} (OpenSergo's)",
                opensergo::API_VERSION
            )));
        }
        let kind_name = resource.get("kind").and_then(Value::as_str).unwrap_or("");
        let Some(kind) = KINDS.iter().find(|k| k.name == kind_name) else {
            let names: Vec<&str> = KINDS.iter().map(|k| k.name).collect();
            return Err(at(format!(
                "`kind` is {kind_name:?}; expected one of {}",
                names.join(", ")
            )));
        };
        let name = metadata_name(&resource);
        let label = format!("document #{number} ({} {name})", kind.name);
        let rules = match resource
            .remove("spec")
            .map(|mut spec| spec.get_mut("rules").map(Value::take))
        {
            None | Some(None) | Some(Some(Value::Null)) => Vec::new(),
            Some(Some(Value::Array(rules))) => rules,
            Some(Some(other)) => {
                return Err(at(format!(
                    "`spec.rules` must be a list, found {}",
                    wire::kind(&other)
                )))
            }
        };
        let mut mapped = Vec::with_capacity(rules.len());
        // Indexes in `spec.rules` of the rules given to the converter.
        let mut kept = Vec::with_capacity(rules.len());
        for (index, mut rule) in rules.into_iter().enumerate() {
            let mut problems = Vec::new();
            if let Some(object) = rule.as_object_mut() {
                kind.map_rule(object, &mut problems);
            }
            let resource = rule.get("resource").and_then(Value::as_str);
            for (field, message) in &problems {
                issues.push(RuleIssue::new(
                    kind.family,
                    index,
                    resource,
                    field.as_str(),
                    format!("{label}: {message}"),
                ));
            }
            // Strict: the rule still goes on, so its other problems are reported too.
            if problems.is_empty() || validation == Validation::Strict {
                mapped.push(rule);
                kept.push(index);
            }
        }
        let bytes = serde_json::to_vec(&mapped)
            .map_err(|e| at(format!("the rules cannot be encoded: {e}")))?;
        let relabel = |mut issue: RuleIssue| {
            issue.index = kept.get(issue.index).copied().unwrap_or(issue.index);
            issue.message = format!("{label}: {}", issue.message);
            issue
        };
        match (kind.convert)(&bytes, validation, keys) {
            Ok(converted) => {
                set.merge(converted.value);
                skipped.extend(converted.skipped.into_iter().map(relabel));
                warnings.extend(converted.warnings.into_iter().map(relabel));
            }
            Err(RuleError::Invalid { issues: found, .. }) => {
                issues.extend(found.into_iter().map(relabel));
            }
            Err(other) => return Err(at(other.to_string())),
        }
    }
    if !opensergo.is_empty() {
        let (part, mut found) = opensergo::rules(&opensergo);
        issues.append(&mut found);
        match part.checked(validation) {
            Ok((part, mut invalid)) => {
                skipped.append(&mut invalid);
                set.merge(part);
            }
            Err(mut invalid) => issues.append(&mut invalid),
        }
    }
    if validation == Validation::Lenient {
        skipped.append(&mut issues);
    }
    if !issues.is_empty() {
        return Err(wire::invalid(issues));
    }
    Ok(Converted::validated(set, skipped, warnings))
}

/// A resource's `metadata.name` (empty without one).
fn metadata_name(resource: &Map<String, Value>) -> String {
    resource
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

/// Replaces the string enum at `field` with its code, reporting an unknown one.
fn code(rule: &mut Map<String, Value>, field: &str, names: Names, problems: &mut Problems) {
    let Some(value) = rule.get(field) else {
        return;
    };
    let found = value
        .as_str()
        .and_then(|text| names.iter().find(|(name, _)| *name == text));
    match found {
        Some((_, code)) => {
            rule.insert(field.to_owned(), Value::from(*code));
        }
        None => {
            let expected: Vec<&str> = names.iter().map(|(name, _)| *name).collect();
            problems.push((
                field.to_owned(),
                format!(
                    "unknown value {value}; expected one of {}",
                    expected.join(", ")
                ),
            ));
            rule.remove(field);
        }
    }
}

/// Divides the integer percent at `field` by 100.
fn percent(rule: &mut Map<String, Value>, field: &str) {
    if let Some(value) = rule.get(field).and_then(Value::as_f64) {
        rule.insert(field.to_owned(), Value::from(value / 100.0));
    }
}

fn map_flow(rule: &mut Map<String, Value>, _: &mut Problems) {
    // In the resource, but not copied into Go's flow rule.
    rule.remove("statIntervalInMs");
}

/// The mapped code of the string enum at `field`, if it was a known name.
fn mapped(rule: &Map<String, Value>, field: &str) -> Option<i64> {
    rule.get(field).and_then(Value::as_i64)
}

fn map_breaker(rule: &mut Map<String, Value>, _: &mut Problems) {
    // SlowRequestRatio and ErrorRatio thresholds are percentages.
    if let Some(0 | 1) = mapped(rule, "strategy") {
        percent(rule, "threshold");
    }
}

fn map_system(rule: &mut Map<String, Value>, _: &mut Problems) {
    // Load and CpuUsage thresholds are percentages.
    if let Some(0 | 4) = mapped(rule, "metricType") {
        percent(rule, "triggerCount");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_document_the_rule_and_the_field() {
        let yaml = b"apiVersion: datasource.sentinel.io/v1alpha1
kind: FlowRules
metadata: {name: a}
spec:
  rules:
    - {resource: r, threshold: 1}
---
apiVersion: datasource.sentinel.io/v1alpha1
kind: FlowRules
metadata: {name: b}
spec:
  rules:
    - {resource: r, threshold: 1}
    - {resource: s, threshold: 1, controlBehavior: Throttle}
";
        let err = KubernetesYaml::new().convert(&yaml[..]).err();
        let issues = err.as_ref().map(RuleError::issues).unwrap_or_default();
        assert_eq!(issues.len(), 1, "{err:?}");
        assert_eq!(
            (issues[0].index, issues[0].field.as_str()),
            (1, "controlBehavior")
        );
        assert!(
            issues[0].message.starts_with("document #1 (FlowRules b)"),
            "{err:?}"
        );
        // Lenient: the rule is skipped, the others load.
        let out = KubernetesYaml::new()
            .convert_with(&yaml[..], Validation::Lenient)
            .ok();
        assert_eq!(out.map(|o| o.value.len()), Some(2));
        for (bad, says) in [
            (&b"apiVersion: v1\nkind: ConfigMap\n"[..], "apiVersion"),
            (
                b"apiVersion: datasource.sentinel.io/v1alpha1\nkind: Rules\n",
                "kind",
            ),
            (b"a: [", "document #0"),
        ] {
            let err = KubernetesYaml::new()
                .convert(bad)
                .err()
                .map(|e| e.to_string());
            assert!(err.as_deref().unwrap_or_default().contains(says), "{err:?}");
        }
    }
}
