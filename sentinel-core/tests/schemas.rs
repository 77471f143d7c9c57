//! The JSON Schemas (the `schema` feature): the files shipped in `schemas/` are the ones the
//! wire types generate, and every payload of `shared/rules/` (copied into
//! `tests/data/rules/`) is judged by its format's schema as its converter judges it.

use sentinel_core::datasource::schema::rule_schemas;
use serde_json::Value;

fn shipped(name: &str) -> String {
    format!("{}/../schemas/{name}.json", env!("CARGO_MANIFEST_DIR"))
}

/// Regenerate with `SENTINEL_WRITE_SCHEMAS=1 cargo test -p sentinel-core --features schema
/// --test schemas`.
#[test]
fn the_shipped_schemas_are_the_generated_ones() {
    let write = std::env::var_os("SENTINEL_WRITE_SCHEMAS").is_some();
    for (name, schema) in rule_schemas() {
        let text = serde_json::to_string_pretty(&schema).expect("a schema encodes") + "\n";
        let path = shipped(name);
        if write {
            std::fs::write(&path, &text).unwrap_or_else(|e| panic!("{path}: {e}"));
        }
        let on_disk = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(
            on_disk, text,
            "{path} is stale: regenerate it with SENTINEL_WRITE_SCHEMAS=1"
        );
    }
}

/// Which schema a shared payload is in, and whether its converter accepts it (strictly,
/// unknown keys refused).
fn expected(name: &str) -> Option<(&'static str, bool)> {
    let table: &[(&str, &str, bool)] = &[
        ("authority__", "authority", true),
        ("circuitbreaker-go__", "go-circuit-breaker", true),
        ("degrade__", "degrade", true),
        ("flow-INVALID-content__", "flow", false),
        ("flow-dashboard-pushed__", "flow", true),
        ("flow-go__alibaba", "go-flow", true),
        (
            "flow__alibaba-Sentinel__sentinel-demo-dynamic-file-rule.json",
            "flow",
            true,
        ),
        ("flow__alibaba-spring-cloud-alibaba", "flow", true),
        ("hotspot-go__", "go-hotspot", true),
        ("isolation-go__", "go-isolation", true),
        ("param-flow__", "paramFlow", true),
        // `adaptiveStrategy` is no field of a Go system rule.
        (
            "system-go__alibaba-sentinel-golang__tests-testdata-extension",
            "go-system",
            false,
        ),
        (
            "system-go__alibaba-sentinel-golang__tests-testdata-helper",
            "go-system",
            true,
        ),
        ("system__", "system", true),
    ];
    table
        .iter()
        .find(|(prefix, _, _)| name.starts_with(prefix))
        .map(|(_, schema, ok)| (*schema, *ok))
}

#[test]
fn every_shared_json_payload_is_judged_by_its_schema() {
    let schemas = rule_schemas();
    let dir = format!("{}/tests/data/rules", env!("CARGO_MANIFEST_DIR"));
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).expect("the shared payloads") {
        let path = entry.expect("an entry").path();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if !name.ends_with(".json") {
            continue; // YAML: the CRDs and JSON embedded in YAML (see tests/converters.rs)
        }
        let bytes = std::fs::read(&path).expect("a payload");
        let Ok(payload) = serde_json::from_slice::<Value>(&bytes) else {
            assert!(name.contains("INVALID-syntax"), "{name} is not JSON");
            continue;
        };
        let (schema_name, valid) = expected(&name).unwrap_or_else(|| panic!("{name}: no schema"));
        let schema = &schemas
            .iter()
            .find(|(n, _)| *n == schema_name)
            .unwrap_or_else(|| panic!("no schema {schema_name}"))
            .1;
        let validator = jsonschema::validator_for(schema).expect("a valid schema");
        let errors: Vec<String> = validator
            .iter_errors(&payload)
            .map(|e| e.to_string())
            .collect();
        assert_eq!(
            errors.is_empty(),
            valid,
            "{name} against {schema_name}: {errors:?}"
        );
        checked += 1;
    }
    assert!(checked >= 15, "only {checked} payloads checked");
}

#[test]
fn a_misspelt_key_is_flagged_by_the_schema() {
    let schemas = rule_schemas();
    let flow = &schemas.iter().find(|(n, _)| *n == "flow").expect("flow").1;
    let validator = jsonschema::validator_for(flow).expect("a valid schema");
    let typo: Value = serde_json::json!([{ "resource": "GET:/order", "cuont": 5 }]);
    assert!(!validator.is_valid(&typo));
    let good: Value = serde_json::json!([{ "resource": "GET:/order", "count": 5, "app": "shop" }]);
    assert!(validator.is_valid(&good));
}
