//! The JSON Schemas (the `schema` feature): the files shipped in `schemas/` are the ones the
//! wire types generate, and every payload of `shared/rules/` (copied into
//! `tests/data/rules/`) is judged by its format's schema as its converter judges it.

use sentinel_core::datasource::schema::rule_schemas;
use serde_json::Value;

fn shipped(name: &str) -> String {
    format!("{}/../schemas/{name}.json", env!("CARGO_MANIFEST_DIR"))
}

/// Regenerate with `SENTINEL_WRITE_SCHEMAS=1 cargo test -p sentinel-core --features schema,yaml
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

#[test]
fn the_dashboard_cluster_flow_rule_passes_the_flow_schema() {
    let schemas = rule_schemas();
    let flow = &schemas.iter().find(|(n, _)| *n == "flow").expect("flow").1;
    let validator = jsonschema::validator_for(flow).expect("a valid schema");
    let path = format!(
        "{}/tests/data/dashboard/flow-cluster-rule.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let payload: Value = serde_json::from_slice(&bytes).expect("JSON");
    let errors: Vec<String> = validator
        .iter_errors(&payload)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
}

/// The YAML documents of a file, each as a JSON value.
#[cfg(feature = "yaml")]
fn yaml_documents(text: &str) -> Result<Vec<Value>, String> {
    use serde::Deserialize;
    serde_norway::Deserializer::from_str(text)
        .map(|document| Value::deserialize(document).map_err(|e| e.to_string()))
        .collect()
}

#[cfg(feature = "yaml")]
fn schema_named(name: &str) -> Value {
    rule_schemas()
        .into_iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no schema {name}"))
        .1
}

/// Every YAML sample (the sentinel-golang CRDs and the other YAML of `shared/rules/`, and
/// OpenSergo's resources in `tests/data/opensergo/`) is judged by the `k8s` schema, one
/// document at a time, as a lenient `KubernetesYaml` judges the file's shape (a rule the
/// schema cannot judge, such as a QPS hotspot rule without `durationInSec`, is the strict
/// converter's to refuse); OpenSergo's also by `opensergo`.
#[cfg(feature = "yaml")]
#[test]
fn every_yaml_sample_is_judged_by_the_resource_schemas() {
    use sentinel_core::datasource::{Converter, KubernetesYaml};
    let k8s = jsonschema::validator_for(&schema_named("k8s")).expect("a valid schema");
    let opensergo = jsonschema::validator_for(&schema_named("opensergo")).expect("a valid schema");
    let root = env!("CARGO_MANIFEST_DIR");
    let mut files = Vec::new();
    for dir in ["tests/data/rules", "tests/data/opensergo"] {
        for entry in std::fs::read_dir(format!("{root}/{dir}")).expect("the samples") {
            let path = entry.expect("an entry").path();
            let name = path.to_string_lossy().into_owned();
            if name.ends_with(".yaml") || name.ends_with(".yml") {
                files.push(path);
            }
        }
    }
    let (mut valid, mut refused) = (0, 0);
    for path in files {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(&path).expect("a sample");
        let documents = yaml_documents(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let errors: Vec<String> = documents
            .iter()
            .flat_map(|d| {
                k8s.iter_errors(d)
                    .map(|e| e.to_string())
                    .collect::<Vec<_>>()
            })
            .collect();
        let converted = KubernetesYaml::lenient().convert(text.as_bytes());
        assert_eq!(
            errors.is_empty(),
            converted.is_ok(),
            "{name}: schema {errors:?}, converter {converted:?}"
        );
        if name.contains("/opensergo/") {
            for document in &documents {
                assert!(opensergo.is_valid(document), "{name}: {document}");
            }
        }
        if name.contains("k8s-crd-") || name.contains("/opensergo/") {
            assert!(errors.is_empty(), "{name}: {errors:?}");
            valid += 1;
        } else {
            refused += 1;
        }
    }
    assert_eq!(
        valid, 6,
        "the five sentinel-golang CRD samples and OpenSergo's"
    );
    assert!(refused >= 1, "the YAML that is no resource is refused");
}

/// A misspelt key, in `spec`, in a rule or in an enum's value, is refused by the schema.
#[cfg(feature = "yaml")]
#[test]
fn a_misspelt_resource_key_is_refused_by_the_schema() {
    let k8s = jsonschema::validator_for(&schema_named("k8s")).expect("a valid schema");
    let opensergo = jsonschema::validator_for(&schema_named("opensergo")).expect("a valid schema");
    let flow = |spec: &str| {
        let text = format!(
            "apiVersion: datasource.sentinel.io/v1alpha1\nkind: FlowRules\n\
             metadata: {{name: orders}}\nspec: {spec}\n"
        );
        yaml_documents(&text).expect("YAML").remove(0)
    };
    let good = flow("{rules: [{resource: r, Threshold: 5, controlBehavior: Throttling}]}");
    assert!(k8s.is_valid(&good));
    for bad in [
        "{rulse: [{resource: r, threshold: 5}]}",
        "{rules: [{resource: r, treshold: 5}]}",
        "{rules: [{resource: r, threshold: 5, controlBehavior: Throttle}]}",
        "{rules: [{resource: r, threshold: 5, ControlBehavior: Throttling}]}",
        "{rules: [{resource: r, threshold: 5, controlBehavior: 1}]}",
    ] {
        assert!(!k8s.is_valid(&flow(bad)), "{bad}");
    }
    let hotspot = yaml_documents(
        "apiVersion: datasource.sentinel.io/v1alpha1\nkind: HotspotRules\nspec:\n  rules:\n  \
         - {resource: r, paramIndex: 0, threshold: 1, specificItems: [{valKind: Int, valStr: '1', threshold: 2}]}\n",
    )
    .expect("YAML");
    assert!(!k8s.is_valid(&hotspot[0]), "valKind: Int is no kind");
    let rate = |spec: &str| {
        let text = format!(
            "apiVersion: fault-tolerance.opensergo.io/v1alpha1\nkind: RateLimitStrategy\n\
             metadata: {{name: r}}\nspec: {spec}\n"
        );
        yaml_documents(&text).expect("YAML").remove(0)
    };
    let good =
        rate("{metricType: RequestAmount, limitMode: Local, threshold: 5, statDuration: 1s}");
    assert!(k8s.is_valid(&good) && opensergo.is_valid(&good));
    let bad =
        rate("{metricType: RequestAmount, limitMode: Local, threshhold: 5, statDuration: 1s}");
    assert!(!k8s.is_valid(&bad) && !opensergo.is_valid(&bad));
    // A sentinel-golang resource is no OpenSergo one.
    assert!(!opensergo.is_valid(&flow("{rules: []}")));
}
