//! The schemas of the YAML formats (features `schema` and `yaml`): one Kubernetes resource
//! (`apiVersion`, `kind`, `metadata`, `spec`) per YAML document, as `KubernetesYaml` reads
//! it. `k8s` accepts every kind that converter reads, sentinel-golang's and OpenSergo's;
//! `opensergo` only OpenSergo's fault-tolerance kinds.
//!
//! The kinds, the string enums and the rules' fields come from the converters' own tables
//! (`converter::kubernetes::KINDS`, `converter::opensergo`) and sentinel-golang's wire
//! types, so the schemas and the converters cannot drift apart.

use serde_json::{json, Map, Value};

use super::{any_case, any_case_pattern, go_rule_object};
use crate::datasource::converter::kubernetes::{self, Kind, Names};
use crate::datasource::converter::opensergo;

/// The schemas of the YAML formats, by file name: `k8s` and `opensergo`.
pub(crate) fn resource_schemas() -> Vec<(&'static str, Value)> {
    let golang: Vec<Value> = kubernetes::KINDS.iter().map(golang_resource).collect();
    let opensergo = opensergo_resources();
    let all = golang
        .into_iter()
        .chain(opensergo.iter().cloned())
        .collect();
    vec![
        (
            "k8s",
            resource_document(
                "A sentinel-golang (datasource.sentinel.io/v1alpha1) or OpenSergo \
                 (fault-tolerance.opensergo.io/v1alpha1) resource",
                all,
            ),
        ),
        (
            "opensergo",
            resource_document(
                "An OpenSergo fault-tolerance resource (fault-tolerance.opensergo.io/v1alpha1)",
                opensergo,
            ),
        ),
    ]
}

/// One YAML document: empty, or one of `resources` (each fixes its `kind`).
fn resource_document(title: &str, resources: Vec<Value>) -> Value {
    let mut choices = vec![json!({ "type": "null", "description": "an empty document" })];
    choices.extend(resources);
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": title,
        "oneOf": choices
    })
}

/// A resource of `kind` in `api_version`, whose `spec` is `spec`.
fn resource(api_version: &str, kind: &str, spec: Value) -> Value {
    json!({
        "type": "object",
        "title": kind,
        "required": ["apiVersion", "kind"],
        "properties": {
            "apiVersion": { "const": api_version },
            "kind": { "const": kind },
            "metadata": {
                "type": "object",
                "description": "Kubernetes object metadata; `name` names the resource in messages",
                "properties": { "name": { "type": "string" } }
            },
            "spec": spec,
            "status": { "description": "written by Kubernetes; ignored" }
        },
        "additionalProperties": false
    })
}

/// A sentinel-golang resource: `spec.rules`, each rule its Go JSON with the string enums.
fn golang_resource(kind: &Kind) -> Value {
    let mut rule = go_rule_object(kind.go_format);
    any_case(&mut rule);
    for (field, names) in kind.enums {
        string_enum(&mut rule, field, names);
    }
    for (list, field, names) in kind.item_enums {
        let pattern = any_case_pattern(list);
        if let Some(item) = rule
            .get_mut("patternProperties")
            .and_then(|p| p.get_mut(&pattern))
            .and_then(|l| l.get_mut("items"))
        {
            string_enum(item, field, names);
        }
    }
    let spec = json!({
        "type": "object",
        "properties": {
            "rules": { "type": ["array", "null"], "items": rule }
        },
        "additionalProperties": false
    });
    resource(kubernetes::API_VERSION, kind.name, spec)
}

/// Makes `field` of an object schema a string enum of `names`, matched in its exact case
/// (the converter maps only that spelling), instead of any case.
fn string_enum(object: &mut Value, field: &str, names: Names) {
    let Some(map) = object.as_object_mut() else {
        return;
    };
    if let Some(Value::Object(patterns)) = map.get_mut("patternProperties") {
        patterns.remove(&any_case_pattern(field));
    }
    let names: Vec<&str> = names.iter().map(|(name, _)| *name).collect();
    let properties = map
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(properties) = properties.as_object_mut() {
        properties.insert(field.to_owned(), json!({ "enum": names }));
    }
}

/// OpenSergo's kinds, each with the `spec` fields the converter reads.
fn opensergo_resources() -> Vec<Value> {
    let duration = |what: &str| {
        json!({
            "type": "string",
            "description": format!("{what}: a duration such as \"500ms\", \"1s\" or \"5min\"")
        })
    };
    let names = |list: &[&str]| json!({ "enum": list });
    let spec = |properties: Value, required: &[&str]| {
        json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false
        })
    };
    let mut all = Vec::new();
    for kind in opensergo::STRATEGIES {
        let spec = match *kind {
            "RateLimitStrategy" => spec(
                json!({
                    "metricType": names(opensergo::RATE_LIMIT_METRIC_TYPES),
                    "limitMode": names(opensergo::RATE_LIMIT_MODES),
                    "threshold": { "type": "number", "minimum": 0 },
                    "statDuration": duration("the window the threshold counts over (only \"1s\")"),
                }),
                &["limitMode", "threshold", "statDuration"],
            ),
            "ThrottlingStrategy" => spec(
                json!({
                    "minIntervalOfRequests": duration("the least time between two requests"),
                    "queueTimeout": duration("the longest a request waits"),
                }),
                &["minIntervalOfRequests", "queueTimeout"],
            ),
            "ConcurrencyLimitStrategy" => spec(
                json!({
                    "maxConcurrency": { "type": "number", "minimum": 0 },
                    "limitMode": names(opensergo::CONCURRENCY_LIMIT_MODES),
                }),
                &["maxConcurrency", "limitMode"],
            ),
            "CircuitBreakerStrategy" => {
                let mut breaker = spec(
                    json!({
                        "strategy": names(opensergo::BREAKER_STRATEGIES),
                        "triggerRatio": {
                            "type": ["string", "number"],
                            "description": "a percentage such as \"60%\" (or a number of percent)"
                        },
                        "statDuration": duration("the window the ratio is counted over"),
                        "recoveryTimeout": duration("how long the breaker stays open"),
                        "minRequestAmount": { "type": "integer", "minimum": 0 },
                        "slowConditions": {
                            "type": "object",
                            "properties": {
                                "maxAllowedRt": duration("a slower request is slow")
                            },
                            "required": ["maxAllowedRt"],
                            "additionalProperties": false
                        },
                        "errorConditions": { "description": "not read" },
                    }),
                    &[
                        "strategy",
                        "triggerRatio",
                        "statDuration",
                        "recoveryTimeout",
                    ],
                );
                if let Some(map) = breaker.as_object_mut() {
                    map.insert(
                        "if".into(),
                        json!({ "properties": { "strategy": { "const": "SlowRequestRatio" } } }),
                    );
                    map.insert("then".into(), json!({ "required": ["slowConditions"] }));
                }
                breaker
            }
            // A strategy without a schema here accepts any spec; tests/schemas.rs checks
            // that every strategy has one.
            _ => json!({ "type": "object" }),
        };
        all.push(resource(opensergo::API_VERSION, kind, spec));
    }
    let rule = spec(
        json!({
            "targets": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "properties": { "targetResourceName": { "type": "string" } },
                    "required": ["targetResourceName"]
                }
            },
            "strategies": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "properties": {
                        "name": { "type": "string" },
                        "kind": names(opensergo::STRATEGIES)
                    },
                    "required": ["name"],
                    "additionalProperties": false
                }
            },
            "fallbackAction": { "description": "the application's to carry out; not read" },
            "selector": { "description": "not read" },
        }),
        &["targets", "strategies"],
    );
    all.push(resource(opensergo::API_VERSION, opensergo::RULE_KIND, rule));
    for kind in opensergo::IGNORED {
        let spec = json!({ "type": "object", "description": "not read" });
        all.push(resource(opensergo::API_VERSION, kind, spec));
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every strategy the converter reads has its own `spec` schema (no catch-all).
    #[test]
    fn every_opensergo_strategy_has_a_spec_schema() {
        let all = opensergo_resources();
        for kind in opensergo::STRATEGIES.iter().chain([&opensergo::RULE_KIND]) {
            let found = all
                .iter()
                .find(|r| r["properties"]["kind"]["const"] == *kind)
                .map(|r| r["properties"]["spec"]["properties"].is_object());
            assert_eq!(found, Some(true), "{kind}");
        }
    }
}
