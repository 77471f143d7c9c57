//! JSON Schemas of every rule format (the `schema` feature), generated from the wire types
//! the converters read, so that an editor completes fields and flags a misspelt key before a
//! push. The repository ships them in `schemas/`; `sentinel-rules schema` prints them.
//!
//! A schema accepts what its converter reads: a list of rules, one rule object or `null`;
//! integers, numbers and booleans also as text (fastjson's leniency); the keys real stores
//! add (`id`, `app`, `gmtCreate`...); the dashboard's nested entity `{"rule": {...}}`; and,
//! for sentinel-golang, keys in any letter case. Any other key is refused, as
//! `validate --strict-keys` refuses it, and so is every value the strict converter refuses
//! that JSON Schema can describe (codes, ranges, required fields, the checks that depend on
//! another field: see `values`). What a schema cannot say (a product of two fields, a
//! regular expression that must compile, one authority rule per resource...) the converter
//! still checks; `docs/cli.md` lists it.
//!
//! With the `yaml` feature too, `k8s` and `opensergo` describe one YAML document of
//! `KubernetesYaml`: a resource with `apiVersion`, `kind`, `metadata` and `spec`, its `kind`
//! one of sentinel-golang's (`FlowRules`...) or OpenSergo's (`RateLimitStrategy`...) for
//! `k8s`, one of OpenSergo's for `opensergo`. An editor applies it to each document of a
//! file (`# yaml-language-server: $schema=.../k8s.json`).

use schemars::generate::SchemaSettings;
use schemars::JsonSchema;
use serde_json::{json, Map, Value};

use crate::family::Family;
use crate::rules::RuleFamily;
use crate::wire::{Format, RuleWire, CARRIED_BY_STORES};

#[cfg(feature = "yaml")]
mod resources;
pub(crate) mod values;

/// Every rule format's schema, by file name (`flow`, `combined`, `go-flow`...; with the
/// `yaml` feature, `k8s` and `opensergo`).
pub fn rule_schemas() -> Vec<(&'static str, Value)> {
    let mut all = Vec::new();
    for &family in RuleFamily::ALL {
        all.push((family.as_str(), java_schema(family)));
    }
    all.push(("combined", combined_schema()));
    all.extend(go_schemas());
    #[cfg(feature = "yaml")]
    all.extend(resources::resource_schemas());
    all
}

/// The schema of one family's Sentinel (Java) list.
pub fn java_schema(family: RuleFamily) -> Value {
    let rule = match family {
        RuleFamily::Flow => java_rule::<crate::flow::FlowRule>(),
        RuleFamily::Degrade => java_rule::<crate::circuit_breaker::DegradeRule>(),
        RuleFamily::System => java_rule::<crate::system::SystemRule>(),
        RuleFamily::Authority => java_rule::<crate::authority::AuthorityRule>(),
        RuleFamily::ParamFlow => java_rule::<crate::param_flow::ParamFlowRule>(),
    };
    let mut rule = rule;
    values::constrain_java(family, &mut rule);
    // Written once, in `$defs`, and referred to: the list's items, the single rule and the
    // dashboard's entity are the same rule.
    let name = format!("{}Rule", family.as_str());
    let reference = json!({ "$ref": format!("#/$defs/{name}") });
    let entity = json!({
        "type": "object",
        "description": "the dashboard's entity: the rule nested under `rule`",
        "required": ["rule"],
        "properties": { "rule": reference.clone() }
    });
    let mut definitions = Map::new();
    definitions.insert(name, rule);
    document(
        &format!("Sentinel {family} rules"),
        definitions,
        json!({ "anyOf": [reference, entity] }),
    )
}

/// The combined document's schema.
pub fn combined_schema() -> Value {
    let mut properties = Map::new();
    let mut definitions = Map::new();
    for &family in RuleFamily::ALL {
        let mut list = java_schema(family);
        if let Some(map) = list.as_object_mut() {
            map.remove("$schema");
            // The rules' `$defs` move to the document's root, which their `$ref`s name.
            if let Some(Value::Object(defs)) = map.remove("$defs") {
                definitions.extend(defs);
            }
        }
        properties.insert(family.as_str().to_owned(), list);
    }
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "A combined Sentinel rule document",
        "type": ["object", "null"],
        "$defs": definitions,
        "properties": properties,
        "additionalProperties": false
    })
}

/// The schemas of sentinel-golang's JSON formats, by file name, from the Go wire shapes in
/// the families' folders.
fn go_schemas() -> Vec<(&'static str, Value)> {
    [
        ("go-flow", "sentinel-golang flow rules", Format::GoFlow),
        (
            "go-circuit-breaker",
            "sentinel-golang circuit-breaker rules",
            Format::GoBreaker,
        ),
        (
            "go-hotspot",
            "sentinel-golang hotspot rules",
            Format::GoHotspot,
        ),
        (
            "go-system",
            "sentinel-golang system rules",
            Format::GoSystem,
        ),
        (
            "go-isolation",
            "sentinel-golang isolation rules",
            Format::GoIsolation,
        ),
    ]
    .into_iter()
    .map(|(name, title, format)| {
        let mut rule = go_rule_object(format);
        any_case(&mut rule);
        values::constrain_go(format, &mut rule);
        let mut definitions = Map::new();
        definitions.insert("rule".to_owned(), rule);
        (
            name,
            document(title, definitions, json!({ "$ref": "#/$defs/rule" })),
        )
    })
    .collect()
}

/// The schema of one rule of a sentinel-golang JSON format, its keys as written (before
/// [`any_case`]); `null` for a Java format.
pub(crate) fn go_rule_object(format: Format) -> Value {
    match format {
        Format::GoFlow => rule_object::<crate::flow::GoFlowRuleWire>(),
        Format::GoBreaker => rule_object::<crate::circuit_breaker::GoBreakerRuleWire>(),
        Format::GoHotspot => rule_object::<crate::param_flow::GoHotspotRuleWire>(),
        Format::GoSystem => rule_object::<crate::system::GoSystemRuleWire>(),
        Format::GoIsolation => rule_object::<crate::flow::GoIsolationRuleWire>(),
        _ => Value::Null,
    }
}

fn java_rule<F: Family>() -> Value
where
    F::Wire: JsonSchema,
{
    let mut rule = rule_object::<F::Wire>();
    let mut required: Vec<&str> = F::Wire::REQUIRED.to_vec();
    if F::Wire::FIELDS.contains(&"resource") {
        required.insert(0, "resource");
    }
    if let Some(map) = rule.as_object_mut() {
        map.insert("required".into(), json!(required));
    }
    rule
}

/// The schema of one rule object of wire type `W`, inlined, with the keys stores carry.
pub(crate) fn rule_object<W: JsonSchema + RuleWire>() -> Value {
    let mut settings = SchemaSettings::draft2020_12();
    settings.inline_subschemas = true;
    let schema = settings.into_generator().into_root_schema_for::<W>();
    let mut value = schema.to_value();
    drop_object_descriptions(&mut value);
    if let Some(map) = value.as_object_mut() {
        map.remove("$schema");
        map.remove("title");
        if let Some(Value::Object(properties)) = map.get_mut("properties") {
            for key in CARRIED_BY_STORES {
                properties
                    .entry(*key)
                    .or_insert_with(|| json!({ "description": "carried by stores; ignored" }));
            }
        }
    }
    value
}

/// Removes the descriptions of objects, which are the wire structs' own docs (for this
/// crate's readers, not a payload's author).
fn drop_object_descriptions(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if map.contains_key("additionalProperties") {
                map.remove("description");
            }
            map.values_mut().for_each(drop_object_descriptions);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_object_descriptions),
        _ => {}
    }
}

/// A rule list's document: a list of `rule`, one `rule`, or `null`; `rule` refers to
/// `definitions`.
pub(crate) fn document(title: &str, definitions: Map<String, Value>, rule: Value) -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": title,
        "$defs": definitions,
        "anyOf": [
            { "type": "null" },
            { "type": "array", "items": rule.clone() },
            rule
        ]
    })
}

/// sentinel-golang's keys match in any letter case: every object's `properties` become
/// `patternProperties` that match a key in any case (JSON Schema's regular expressions have
/// no case flag), and nothing is required by name.
pub(crate) fn any_case(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if properties_in_any_case(map) {
                map.remove("required");
            }
            for child in map.values_mut() {
                any_case(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(any_case),
        _ => {}
    }
}

/// Turns an object schema's `properties` into `patternProperties` that match each key in any
/// letter case; whether it had any.
pub(crate) fn properties_in_any_case(map: &mut Map<String, Value>) -> bool {
    let Some(Value::Object(properties)) = map.remove("properties") else {
        return false;
    };
    let patterns: Map<String, Value> = properties
        .into_iter()
        .map(|(key, schema)| (any_case_pattern(&key), schema))
        .collect();
    map.insert("patternProperties".into(), Value::Object(patterns));
    true
}

/// A regular expression that matches `key` in any letter case.
pub(crate) fn any_case_pattern(key: &str) -> String {
    let mut pattern = String::from("^");
    for c in key.chars() {
        if c.is_ascii_alphabetic() {
            pattern.push('[');
            pattern.push(c.to_ascii_uppercase());
            pattern.push(c.to_ascii_lowercase());
            pattern.push(']');
        } else if c.is_ascii_alphanumeric() {
            pattern.push(c);
        } else {
            pattern.push('\\');
            pattern.push(c);
        }
    }
    pattern.push('$');
    pattern
}
