//! The shipped JSON Schemas (`schemas/*.json`) judge a payload as the strict converters do
//! (`validate --strict-keys`): every JSON format's schema, against every payload of the
//! repository's copy of `shared/rules/`, the dashboard's payloads, the JSON the converters'
//! own tests feed them and a corpus of one payload per refusal, accepts exactly what its
//! converter accepts.

use sentinel_core::datasource::{
    AuthorityJson, CombinedJson, Converter, DegradeJson, FlowJson, GoCircuitBreakerJson,
    GoFlowJson, GoHotspotJson, GoIsolationJson, GoSystemJson, ParamFlowJson, SystemJson,
};
use sentinel_core::{KeyPolicy, RuleSet, Validation};
use serde_json::Value;

/// The JSON formats' schemas, by file name.
const SCHEMAS: &[&str] = &[
    "flow",
    "degrade",
    "system",
    "authority",
    "paramFlow",
    "combined",
    "go-flow",
    "go-circuit-breaker",
    "go-hotspot",
    "go-system",
    "go-isolation",
];

fn root() -> String {
    format!("{}/..", env!("CARGO_MANIFEST_DIR"))
}

/// Whether `schema`'s strict converter, unknown keys refused, accepts `bytes`.
fn converter_accepts(schema: &str, bytes: &[u8]) -> bool {
    fn strict<C: Converter<[u8], RuleSet>>(converter: C, bytes: &[u8]) -> bool {
        converter.convert_with(bytes, Validation::Strict).is_ok()
    }
    let deny = KeyPolicy::Deny;
    match schema {
        "flow" => strict(FlowJson::new().keys(deny), bytes),
        "degrade" => strict(DegradeJson::new().keys(deny), bytes),
        "system" => strict(SystemJson::new().keys(deny), bytes),
        "authority" => strict(AuthorityJson::new().keys(deny), bytes),
        "paramFlow" => strict(ParamFlowJson::new().keys(deny), bytes),
        "combined" => strict(CombinedJson::new().keys(deny), bytes),
        "go-flow" => strict(GoFlowJson::new().keys(deny), bytes),
        "go-circuit-breaker" => strict(GoCircuitBreakerJson::new().keys(deny), bytes),
        "go-hotspot" => strict(GoHotspotJson::new().keys(deny), bytes),
        "go-system" => strict(GoSystemJson::new().keys(deny), bytes),
        "go-isolation" => strict(GoIsolationJson::new().keys(deny), bytes),
        other => panic!("no converter for schema {other}"),
    }
}

struct Schemas(Vec<(&'static str, jsonschema::Validator)>);

impl Schemas {
    fn shipped() -> Self {
        Schemas(
            SCHEMAS
                .iter()
                .map(|name| {
                    let path = format!("{}/schemas/{name}.json", root());
                    let text =
                        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
                    let schema: Value = serde_json::from_str(&text).expect("a schema is JSON");
                    let validator = jsonschema::validator_for(&schema)
                        .unwrap_or_else(|e| panic!("{path} is no valid schema: {e}"));
                    (*name, validator)
                })
                .collect(),
        )
    }

    fn get(&self, name: &str) -> &jsonschema::Validator {
        &self
            .0
            .iter()
            .find(|(n, _)| *n == name)
            .unwrap_or_else(|| panic!("no schema {name}"))
            .1
    }

    /// Every disagreement between a schema and its converter on `bytes`, described.
    fn disagreements(&self, origin: &str, bytes: &[u8]) -> Vec<String> {
        let Ok(payload) = serde_json::from_slice::<Value>(bytes) else {
            return Vec::new(); // no JSON: no schema judges it
        };
        let twice = has_a_key_twice_in_any_case(&payload);
        self.0
            .iter()
            // A key written twice in two letter cases: sentinel-golang's converters read the
            // last one, a schema checks both (docs/cli.md).
            .filter(|(name, _)| !(twice && name.starts_with("go-")))
            .filter_map(|(name, validator)| {
                let schema = validator.is_valid(&payload);
                let converter = converter_accepts(name, bytes);
                (schema != converter).then(|| {
                    let errors: Vec<String> = validator
                        .iter_errors(&payload)
                        .take(3)
                        .map(|e| format!("{} at {}", e, e.instance_path()))
                        .collect();
                    format!(
                        "{origin} against {name}: schema {}, converter {} {errors:?}\n  {}",
                        verdict(schema),
                        verdict(converter),
                        String::from_utf8_lossy(bytes)
                    )
                })
            })
            .collect()
    }
}

/// Whether an object of `value` has two keys equal but for their letter case.
fn has_a_key_twice_in_any_case(value: &Value) -> bool {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<String> = map.keys().map(|k| k.to_lowercase()).collect();
            keys.sort();
            keys.windows(2).any(|w| w[0] == w[1]) || map.values().any(has_a_key_twice_in_any_case)
        }
        Value::Array(items) => items.iter().any(has_a_key_twice_in_any_case),
        _ => false,
    }
}

fn verdict(accepts: bool) -> &'static str {
    if accepts {
        "accepts"
    } else {
        "refuses"
    }
}

/// The JSON files of a directory of the repository.
fn json_files(dir: &str) -> Vec<(String, Vec<u8>)> {
    let dir = format!("{}/{dir}", root());
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|entry| entry.expect("an entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .map(|path| {
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
            (path.display().to_string(), bytes)
        })
        .collect();
    files.sort();
    files
}

/// The raw string literals (`r#"..."#`) of a Rust source that are a JSON array or object:
/// the payloads a converter test feeds its converter.
fn raw_json_literals(file: &str) -> Vec<(String, Vec<u8>)> {
    let path = format!("{}/{file}", root());
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut found = Vec::new();
    let mut rest = text.as_str();
    while let Some(start) = rest.find("r#\"") {
        let body = &rest[start + 3..];
        let Some(end) = body.find("\"#") else { break };
        let literal = &body[..end];
        if serde_json::from_str::<Value>(literal).is_ok_and(|v| v.is_array() || v.is_object()) {
            found.push((format!("{file}: {literal}"), literal.as_bytes().to_vec()));
        }
        rest = &body[end + 2..];
    }
    found
}

/// Every real payload (the copy of `shared/rules/` in sentinel-core's test data and the
/// dashboard's cluster rule) against every JSON schema.
#[test]
fn every_schema_judges_the_shared_payloads_as_its_converter() {
    let schemas = Schemas::shipped();
    let mut files = json_files("sentinel-core/tests/data/rules");
    files.extend(json_files("sentinel-core/tests/data/dashboard"));
    assert!(files.len() >= 17, "only {} payloads", files.len());
    let wrong: Vec<String> = files
        .iter()
        .flat_map(|(name, bytes)| schemas.disagreements(name, bytes))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Every JSON payload the converters' own tests feed them, against every JSON schema.
#[test]
fn every_schema_judges_the_converter_tests_payloads_as_its_converter() {
    let schemas = Schemas::shipped();
    let mut payloads = Vec::new();
    for file in [
        "sentinel-core/tests/converters.rs",
        "sentinel-core/src/datasource/converter/java/tests.rs",
        "sentinel-core/src/datasource/converter/java/mod.rs",
        "sentinel-core/src/datasource/converter/golang/tests.rs",
        "sentinel-core/src/datasource/converter/golang/mod.rs",
    ] {
        payloads.extend(raw_json_literals(file));
    }
    assert!(payloads.len() >= 40, "only {} payloads", payloads.len());
    let wrong: Vec<String> = payloads
        .iter()
        .flat_map(|(name, bytes)| schemas.disagreements(name, bytes))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// One payload per refusal of a strict converter (and the accepted payloads nearest to it):
/// the schema of its format gives the expected verdict, and every other schema agrees with
/// its own converter too.
const CORPUS: &[(&str, bool, &str)] = &[
    // flow: resource and count
    ("flow", true, r#"[{"resource":"a","count":5}]"#),
    ("flow", true, r#"{"resource":"a","count":0}"#),
    ("flow", true, "null"),
    ("flow", false, r#"[{"resource":"a","count":-1}]"#),
    ("flow", false, r#"[{"resource":"a","count":"-1"}]"#),
    ("flow", true, r#"[{"resource":"a","count":" 5.5 "}]"#),
    ("flow", true, r#"[{"resource":"a","count":"1e2"}]"#),
    ("flow", false, r#"[{"resource":"a","count":"five"}]"#),
    ("flow", false, r#"[{"resource":"a"}]"#),
    ("flow", false, r#"[{"resource":"a","count":null}]"#),
    ("flow", false, r#"[{"count":1}]"#),
    ("flow", false, r#"[{"resource":null,"count":1}]"#),
    ("flow", false, r#"[{"resource":"  ","count":1}]"#),
    ("flow", false, r#"[{"resource":"a","count":1,"cuont":1}]"#),
    // flow: codes
    ("flow", true, r#"[{"resource":"a","count":1,"grade":0}]"#),
    ("flow", true, r#"[{"resource":"a","count":1,"grade":"1"}]"#),
    ("flow", true, r#"[{"resource":"a","count":1,"grade":1.0}]"#),
    ("flow", true, r#"[{"resource":"a","count":1,"grade":null}]"#),
    ("flow", false, r#"[{"resource":"a","count":1,"grade":7}]"#),
    ("flow", false, r#"[{"resource":"a","count":1,"grade":"7"}]"#),
    ("flow", false, r#"[{"resource":"a","count":1,"grade":1.5}]"#),
    (
        "flow",
        false,
        r#"[{"resource":"a","count":1,"grade":"QPS"}]"#,
    ),
    (
        "flow",
        false,
        r#"[{"resource":"a","count":1,"strategy":3}]"#,
    ),
    (
        "flow",
        false,
        r#"[{"resource":"a","count":1,"controlBehavior":4}]"#,
    ),
    (
        "flow",
        false,
        r#"[{"resource":"a","count":1,"controlBehavior":-1}]"#,
    ),
    // flow: relate and chain
    (
        "flow",
        false,
        r#"[{"resource":"a","count":1,"strategy":1}]"#,
    ),
    (
        "flow",
        false,
        r#"[{"resource":"a","count":1,"strategy":"2","refResource":""}]"#,
    ),
    (
        "flow",
        false,
        r#"[{"resource":"a","count":1,"grade":0,"strategy":2}]"#,
    ),
    (
        "flow",
        true,
        r#"[{"resource":"a","count":1,"strategy":1,"refResource":"b"}]"#,
    ),
    (
        "flow",
        true,
        r#"[{"resource":"a","count":1,"strategy":2,"refResource":"ctx"}]"#,
    ),
    // flow: warm-up and rate limiter
    (
        "flow",
        true,
        r#"[{"resource":"a","count":10,"controlBehavior":1}]"#,
    ),
    (
        "flow",
        false,
        r#"[{"resource":"a","count":10,"controlBehavior":1,"warmUpPeriodSec":0}]"#,
    ),
    (
        "flow",
        false,
        r#"[{"resource":"a","count":10,"controlBehavior":"3","warmUpPeriodSec":"0"}]"#,
    ),
    (
        "flow",
        true,
        r#"[{"resource":"a","count":10,"grade":0,"controlBehavior":1,"warmUpPeriodSec":0}]"#,
    ),
    (
        "flow",
        false,
        r#"[{"resource":"a","count":10,"warmUpPeriodSec":-1}]"#,
    ),
    (
        "flow",
        false,
        r#"[{"resource":"a","count":10,"warmUpPeriodSec":4294967296}]"#,
    ),
    (
        "flow",
        false,
        r#"[{"resource":"a","count":10,"controlBehavior":2,"maxQueueingTimeMs":0}]"#,
    ),
    (
        "flow",
        true,
        r#"[{"resource":"a","count":10,"controlBehavior":2,"maxQueueingTimeMs":20}]"#,
    ),
    (
        "flow",
        true,
        r#"[{"resource":"a","count":10,"controlBehavior":1,"maxQueueingTimeMs":0}]"#,
    ),
    // flow: regex
    (
        "flow",
        true,
        r#"[{"resource":"GET:/a/.*","count":1,"regex":true}]"#,
    ),
    (
        "flow",
        false,
        r#"[{"resource":"a.*","count":1,"regex":true,"controlBehavior":1}]"#,
    ),
    (
        "flow",
        false,
        r#"[{"resource":"a.*","count":1,"regex":"true","strategy":1,"refResource":"b"}]"#,
    ),
    (
        "flow",
        false,
        r#"[{"resource":"a.*","count":1,"regex":1,"clusterMode":true,"clusterConfig":{"flowId":1}}]"#,
    ),
    (
        "flow",
        false,
        r#"[{"resource":"a","count":1,"regex":"yes"}]"#,
    ),
    ("flow", false, r#"[{"resource":"a","count":1,"regex":2}]"#),
    // flow: cluster mode
    (
        "flow",
        true,
        r#"[{"resource":"a","count":1,"clusterMode":true,"clusterConfig":{"flowId":1}}]"#,
    ),
    (
        "flow",
        true,
        r#"[{"resource":"a","count":1,"clusterMode":"true","clusterConfig":{"flowId":"7","thresholdType":1,"sampleCount":5,"windowIntervalMs":1000}}]"#,
    ),
    (
        "flow",
        true,
        r#"[{"resource":"a","count":1,"clusterMode":true,"clusterConfig":{"flowId":1,"resourceTimeout":2000,"resourceTimeoutStrategy":0,"acquireRefuseStrategy":0,"clientOfflineTime":2000}}]"#,
    ),
    (
        "flow",
        true,
        r#"[{"resource":"a","count":1,"clusterMode":false,"clusterConfig":{"thresholdType":5,"sampleCount":0}}]"#,
    ),
    (
        "flow",
        false,
        r#"[{"resource":"a","count":1,"clusterMode":true}]"#,
    ),
    (
        "flow",
        false,
        r#"[{"resource":"a","count":1,"clusterMode":true,"clusterConfig":null}]"#,
    ),
    (
        "flow",
        false,
        r#"[{"resource":"a","count":1,"clusterMode":true,"clusterConfig":{}}]"#,
    ),
    (
        "flow",
        false,
        r#"[{"resource":"a","count":1,"clusterMode":true,"clusterConfig":{"flowId":0}}]"#,
    ),
    (
        "flow",
        false,
        r#"[{"resource":"a","count":1,"clusterMode":true,"clusterConfig":{"flowId":"zz"}}]"#,
    ),
    (
        "flow",
        false,
        r#"[{"resource":"a","count":1,"clusterMode":true,"clusterConfig":{"flowId":1,"thresholdType":2}}]"#,
    ),
    (
        "flow",
        false,
        r#"[{"resource":"a","count":1,"clusterMode":true,"clusterConfig":{"flowId":1,"strategy":1}}]"#,
    ),
    (
        "flow",
        false,
        r#"[{"resource":"a","count":1,"clusterMode":true,"clusterConfig":{"flowId":1,"sampleCount":0}}]"#,
    ),
    (
        "flow",
        false,
        r#"[{"resource":"a","count":1,"clusterMode":true,"clusterConfig":{"flowId":1,"windowIntervalMs":-10}}]"#,
    ),
    (
        "flow",
        false,
        r#"[{"resource":"a","count":1,"clusterMode":true,"clusterConfig":{"flowId":1,"windowIntervalMs":1001}}]"#,
    ),
    (
        "flow",
        false,
        r#"[{"resource":"a","count":1,"clusterMode":true,"clusterConfig":{"flowId":1,"sampleCount":3}}]"#,
    ),
    (
        "flow",
        false,
        r#"[{"resource":"a","count":1,"clusterMode":true,"clusterConfig":{"flowId":1,"flowID":1}}]"#,
    ),
    (
        "flow",
        false,
        r#"[{"resource":"a","count":1,"clusterMode":"yes","clusterConfig":{"flowId":1}}]"#,
    ),
    // flow: the dashboard's entity
    (
        "flow",
        true,
        r#"[{"id":1,"app":"shop","rule":{"resource":"a","count":1}}]"#,
    ),
    (
        "flow",
        false,
        r#"[{"id":1,"app":"shop","rule":{"resource":"a","count":-1}}]"#,
    ),
    // degrade
    (
        "degrade",
        true,
        r#"[{"resource":"a","grade":0,"count":200,"timeWindow":10}]"#,
    ),
    (
        "degrade",
        true,
        r#"[{"resource":"a","grade":1,"count":0.5,"timeWindow":"10"}]"#,
    ),
    (
        "degrade",
        true,
        r#"[{"resource":"a","grade":2,"count":5,"timeWindow":10,"slowRatioThreshold":7}]"#,
    ),
    (
        "degrade",
        false,
        r#"[{"resource":"a","grade":0,"count":200}]"#,
    ),
    (
        "degrade",
        false,
        r#"[{"resource":"a","grade":0,"count":200,"timeWindow":0}]"#,
    ),
    (
        "degrade",
        false,
        r#"[{"resource":"a","count":200,"timeWindow":10}]"#,
    ),
    (
        "degrade",
        false,
        r#"[{"resource":"a","grade":3,"count":200,"timeWindow":10}]"#,
    ),
    (
        "degrade",
        false,
        r#"[{"resource":"a","grade":2,"count":-1,"timeWindow":10}]"#,
    ),
    (
        "degrade",
        false,
        r#"[{"resource":"a","grade":1,"count":1.5,"timeWindow":10}]"#,
    ),
    (
        "degrade",
        false,
        r#"[{"resource":"a","grade":"1","count":"2","timeWindow":10}]"#,
    ),
    (
        "degrade",
        false,
        r#"[{"resource":"a","grade":0,"count":200,"timeWindow":10,"slowRatioThreshold":1.5}]"#,
    ),
    (
        "degrade",
        false,
        r#"[{"resource":"a","grade":0,"count":200,"timeWindow":10,"slowRatioThreshold":"-0.1"}]"#,
    ),
    (
        "degrade",
        false,
        r#"[{"resource":"a","grade":2,"count":5,"timeWindow":10,"minRequestAmount":0}]"#,
    ),
    (
        "degrade",
        false,
        r#"[{"resource":"a","grade":2,"count":5,"timeWindow":10,"statIntervalMs":0}]"#,
    ),
    (
        "degrade",
        false,
        r#"[{"grade":2,"count":5,"timeWindow":10}]"#,
    ),
    // system
    (
        "system",
        true,
        r#"[{"highestSystemLoad":3,"qps":"100","avgRt":10,"maxThread":10}]"#,
    ),
    (
        "system",
        true,
        r#"[{"highestCpuUsage":0.8},{"highestCpuUsage":-1},{"highestCpuUsage":"1"}]"#,
    ),
    ("system", false, r#"[{"highestCpuUsage":1.5}]"#),
    ("system", false, r#"[{"highestCpuUsage":"80%"}]"#),
    ("system", false, r#"[{"qps":"many"}]"#),
    // authority
    (
        "authority",
        true,
        r#"[{"resource":"a","limitApp":"app1,app2","strategy":1}]"#,
    ),
    ("authority", false, r#"[{"resource":"a","strategy":1}]"#),
    (
        "authority",
        false,
        r#"[{"resource":"a","limitApp":" ","strategy":1}]"#,
    ),
    (
        "authority",
        false,
        r#"[{"resource":"a","limitApp":"app1","strategy":2}]"#,
    ),
    ("authority", false, r#"[{"limitApp":"app1"}]"#),
    // paramFlow
    (
        "paramFlow",
        true,
        r#"[{"resource":"a","paramIdx":0,"count":5}]"#,
    ),
    (
        "paramFlow",
        true,
        r#"[{"resource":"a","paramKey":"user","count":5,"durationInSec":2}]"#,
    ),
    ("paramFlow", false, r#"[{"resource":"a","count":5}]"#),
    (
        "paramFlow",
        false,
        r#"[{"resource":"a","paramIdx":null,"count":5}]"#,
    ),
    (
        "paramFlow",
        false,
        r#"[{"resource":"a","paramIdx":0,"paramKey":"user","count":5}]"#,
    ),
    (
        "paramFlow",
        false,
        r#"[{"resource":"a","paramKey":"","count":5}]"#,
    ),
    (
        "paramFlow",
        false,
        r#"[{"resource":"a","paramIdx":2147483648,"count":5}]"#,
    ),
    (
        "paramFlow",
        false,
        r#"[{"resource":"a","paramIdx":0,"count":-5}]"#,
    ),
    ("paramFlow", false, r#"[{"resource":"a","paramIdx":0}]"#),
    (
        "paramFlow",
        false,
        r#"[{"resource":"a","paramIdx":0,"count":5,"grade":2}]"#,
    ),
    (
        "paramFlow",
        false,
        r#"[{"resource":"a","paramIdx":0,"count":5,"controlBehavior":4}]"#,
    ),
    (
        "paramFlow",
        false,
        r#"[{"resource":"a","paramIdx":0,"count":5,"durationInSec":0}]"#,
    ),
    (
        "paramFlow",
        false,
        r#"[{"resource":"a","paramIdx":0,"count":5,"burstCount":-1}]"#,
    ),
    (
        "paramFlow",
        true,
        r#"[{"resource":"a","paramIdx":0,"count":5,"paramsMaxCapacity":1000000}]"#,
    ),
    (
        "paramFlow",
        false,
        r#"[{"resource":"a","paramIdx":0,"count":5,"paramsMaxCapacity":0}]"#,
    ),
    (
        "paramFlow",
        false,
        r#"[{"resource":"a","paramIdx":0,"count":5,"paramsMaxCapacity":"1000001"}]"#,
    ),
    (
        "paramFlow",
        true,
        r#"[{"resource":"a","paramIdx":0,"count":5,"paramFlowItemList":[{"object":"7","classType":"int","count":1},{"object":8,"classType":"java.lang.Long","count":"2"},{"object":"1.5","classType":"double","count":0},{"object":"T","classType":"boolean","count":1},{"object":"x","classType":"String","count":3},{"object":true,"count":3}]}]"#,
    ),
    (
        "paramFlow",
        false,
        r#"[{"resource":"a","paramIdx":0,"count":5,"paramFlowItemList":[{"object":"7","classType":"int","count":-1}]}]"#,
    ),
    (
        "paramFlow",
        false,
        r#"[{"resource":"a","paramIdx":0,"count":5,"paramFlowItemList":[{"classType":"int","count":1}]}]"#,
    ),
    (
        "paramFlow",
        false,
        r#"[{"resource":"a","paramIdx":0,"count":5,"paramFlowItemList":[{"object":"7","classType":"int"}]}]"#,
    ),
    (
        "paramFlow",
        false,
        r#"[{"resource":"a","paramIdx":0,"count":5,"paramFlowItemList":[{"object":"abc","classType":"int","count":1}]}]"#,
    ),
    (
        "paramFlow",
        false,
        r#"[{"resource":"a","paramIdx":0,"count":5,"paramFlowItemList":[{"object":"1.5","classType":"long","count":1}]}]"#,
    ),
    (
        "paramFlow",
        true,
        r#"[{"resource":"a","paramIdx":0,"count":5,"paramFlowItemList":[{"object":"yes","classType":"boolean","count":1}]}]"#,
    ),
    (
        "paramFlow",
        false,
        r#"[{"resource":"a","paramIdx":0,"count":5,"paramFlowItemList":[{"object":"x","classType":"double","count":1}]}]"#,
    ),
    (
        "paramFlow",
        true,
        r#"[{"resource":"a","paramIdx":0,"count":5,"clusterMode":true,"clusterConfig":{"flowId":3,"thresholdType":1}}]"#,
    ),
    (
        "paramFlow",
        false,
        r#"[{"resource":"a","paramIdx":0,"count":5,"clusterMode":true,"clusterConfig":{"thresholdType":1}}]"#,
    ),
    (
        "paramFlow",
        false,
        r#"[{"resource":"a","paramIdx":0,"count":5,"clusterMode":true}]"#,
    ),
    (
        "paramFlow",
        false,
        r#"[{"resource":"a","paramIdx":0,"count":5,"clusterMode":true,"clusterConfig":{"flowId":3,"windowIntervalMs":0}}]"#,
    ),
    (
        "paramFlow",
        false,
        r#"[{"resource":"a","paramIdx":0,"count":5,"clusterMode":true,"clusterConfig":{"flowId":3,"sampleCount":7}}]"#,
    ),
    (
        "paramFlow",
        false,
        r#"[{"resource":"a","paramIdx":0,"count":5,"clusterConfig":{"flowId":3,"strategy":0}}]"#,
    ),
    // combined
    (
        "combined",
        true,
        r#"{"flow":[{"resource":"a","count":1}],"degrade":null}"#,
    ),
    (
        "combined",
        false,
        r#"{"flow":[{"resource":"a","count":-1}]}"#,
    ),
    (
        "combined",
        false,
        r#"{"paramFlow":[{"resource":"a","count":1}]}"#,
    ),
    ("combined", false, r#"{"system":[{"highestCpuUsage":2}]}"#),
    // go-flow (keys in any letter case)
    ("go-flow", true, r#"[{"resource":"a","threshold":10}]"#),
    (
        "go-flow",
        true,
        r#"[{"Resource":"a","Threshold":"10","TokenCalculateStrategy":1,"WarmUpPeriodSec":10}]"#,
    ),
    (
        "go-flow",
        true,
        r#"[{"resource":"a","threshold":10,"relationStrategy":1,"refResource":"b"}]"#,
    ),
    ("go-flow", false, r#"[{"resource":"a","threshold":-1}]"#),
    ("go-flow", false, r#"[{"resource":"a"}]"#),
    ("go-flow", false, r#"[{"threshold":1}]"#),
    (
        "go-flow",
        false,
        r#"[{"resource":"a","threshold":10,"tokenCalculateStrategy":1}]"#,
    ),
    (
        "go-flow",
        false,
        r#"[{"resource":"a","threshold":10,"TOKENCALCULATESTRATEGY":"1","warmUpPeriodSec":0}]"#,
    ),
    (
        "go-flow",
        false,
        r#"[{"resource":"a","threshold":10,"tokenCalculateStrategy":2}]"#,
    ),
    (
        "go-flow",
        false,
        r#"[{"resource":"a","threshold":10,"controlBehavior":2}]"#,
    ),
    (
        "go-flow",
        false,
        r#"[{"resource":"a","threshold":10,"relationStrategy":1}]"#,
    ),
    (
        "go-flow",
        false,
        r#"[{"resource":"a","threshold":10,"statIntervalInMs":500}]"#,
    ),
    (
        "go-flow",
        false,
        r#"[{"resource":"a","threshold":10,"warmUpColdFactor":1}]"#,
    ),
    (
        "go-flow",
        false,
        r#"[{"resource":"a","threshold":10,"regex":true}]"#,
    ),
    (
        "go-flow",
        false,
        r#"[{"resource":"a","threshold":10,"maxQueueingTimeMs":-1}]"#,
    ),
    // go-isolation
    (
        "go-isolation",
        true,
        r#"[{"resource":"a","threshold":10,"metricType":0}]"#,
    ),
    (
        "go-isolation",
        false,
        r#"[{"resource":"a","threshold":-1}]"#,
    ),
    (
        "go-isolation",
        false,
        r#"[{"resource":"a","threshold":1.5}]"#,
    ),
    (
        "go-isolation",
        false,
        r#"[{"resource":"a","threshold":10,"metricType":1}]"#,
    ),
    // go-circuit-breaker
    (
        "go-circuit-breaker",
        true,
        r#"[{"resource":"a","strategy":0,"retryTimeoutMs":3000,"statIntervalMs":1000,"threshold":0.5,"maxAllowedRtMs":50}]"#,
    ),
    (
        "go-circuit-breaker",
        true,
        r#"[{"resource":"a","strategy":2,"retryTimeoutMs":3000,"statIntervalMs":1000,"threshold":5}]"#,
    ),
    (
        "go-circuit-breaker",
        false,
        r#"[{"resource":"a","strategy":2,"statIntervalMs":1000,"threshold":5}]"#,
    ),
    (
        "go-circuit-breaker",
        false,
        r#"[{"resource":"a","strategy":2,"retryTimeoutMs":3000,"statIntervalMs":0,"threshold":5}]"#,
    ),
    (
        "go-circuit-breaker",
        false,
        r#"[{"resource":"a","strategy":3,"retryTimeoutMs":3000,"statIntervalMs":1000,"threshold":5}]"#,
    ),
    (
        "go-circuit-breaker",
        false,
        r#"[{"resource":"a","strategy":1,"retryTimeoutMs":3000,"statIntervalMs":1000,"threshold":2}]"#,
    ),
    (
        "go-circuit-breaker",
        false,
        r#"[{"resource":"a","strategy":0,"retryTimeoutMs":3000,"statIntervalMs":1000,"threshold":0.5,"maxAllowedRtMs":-1}]"#,
    ),
    // go-hotspot
    (
        "go-hotspot",
        true,
        r#"[{"resource":"a","paramIndex":0,"threshold":5}]"#,
    ),
    (
        "go-hotspot",
        true,
        r#"[{"resource":"a","paramKey":"user","paramIndex":0,"threshold":5}]"#,
    ),
    (
        "go-hotspot",
        true,
        r#"[{"resource":"a","paramIndex":1,"threshold":5,"metricType":1,"durationInSec":1,"specificItems":[{"valKind":0,"valStr":"7","threshold":1},{"valKind":3,"valStr":"1.5","threshold":2},{"ValKind":2,"ValStr":"t","Threshold":0},{"valKind":1,"valStr":"x","threshold":1}]}]"#,
    ),
    ("go-hotspot", false, r#"[{"resource":"a","threshold":5}]"#),
    (
        "go-hotspot",
        false,
        r#"[{"resource":"a","paramKey":"","threshold":5}]"#,
    ),
    (
        "go-hotspot",
        false,
        r#"[{"resource":"a","paramKey":"user","paramIndex":1,"threshold":5}]"#,
    ),
    (
        "go-hotspot",
        false,
        r#"[{"resource":"a","paramIndex":0,"threshold":5,"metricType":1}]"#,
    ),
    (
        "go-hotspot",
        false,
        r#"[{"resource":"a","paramIndex":0,"threshold":5,"metricType":2}]"#,
    ),
    (
        "go-hotspot",
        false,
        r#"[{"resource":"a","paramIndex":0,"threshold":5,"paramsMaxCapacity":2000000}]"#,
    ),
    (
        "go-hotspot",
        false,
        r#"[{"resource":"a","paramIndex":0,"threshold":5,"specificItems":[{"valKind":4,"valStr":"7","threshold":1}]}]"#,
    ),
    (
        "go-hotspot",
        false,
        r#"[{"resource":"a","paramIndex":0,"threshold":5,"specificItems":[{"valKind":0,"valStr":"x","threshold":1}]}]"#,
    ),
    (
        "go-hotspot",
        false,
        r#"[{"resource":"a","paramIndex":0,"threshold":5,"specificItems":[{"valKind":0,"valStr":"7","threshold":-1}]}]"#,
    ),
    (
        "go-hotspot",
        false,
        r#"[{"resource":"a","paramIndex":0,"threshold":5,"specificItems":[{"valKind":1,"valStr":"x"}]}]"#,
    ),
    // go-system
    (
        "go-system",
        true,
        r#"[{"metricType":4,"triggerCount":0.8},{"metricType":0,"triggerCount":3,"strategy":1}]"#,
    ),
    (
        "go-system",
        false,
        r#"[{"metricType":4,"triggerCount":1.5}]"#,
    ),
    ("go-system", false, r#"[{"metricType":5,"triggerCount":1}]"#),
    (
        "go-system",
        false,
        r#"[{"metricType":3,"triggerCount":-1}]"#,
    ),
    ("go-system", false, r#"[{"triggerCount":1}]"#),
    // an item's object in its Java width, as written (its text bounded by its digits); a
    // boolean item reads any text
    (
        "paramFlow",
        false,
        r#"[{"resource":"a","paramIdx":0,"count":5,"paramFlowItemList":[{"object":"99999999999","classType":"int","count":1}]}]"#,
    ),
    (
        "paramFlow",
        false,
        r#"[{"resource":"a","paramIdx":0,"count":5,"paramFlowItemList":[{"object":200,"classType":"byte","count":1}]}]"#,
    ),
    (
        "paramFlow",
        false,
        r#"[{"resource":"a","paramIdx":0,"count":5,"paramFlowItemList":[{"object":" 7","classType":"Integer","count":1}]}]"#,
    ),
    (
        "paramFlow",
        true,
        r#"[{"resource":"a","paramIdx":0,"count":5,"paramFlowItemList":[{"object":"2147483648","classType":"long","count":1},{"object":"-32768","classType":"short","count":1}]}]"#,
    ),
    (
        "go-hotspot",
        false,
        r#"[{"resource":"a","paramIndex":0,"threshold":5,"specificItems":[{"valKind":2,"valStr":"tRuE","threshold":1}]}]"#,
    ),
    (
        "go-hotspot",
        true,
        r#"[{"resource":"a","paramIndex":0,"threshold":5,"specificItems":[{"valKind":2,"valStr":"FALSE","threshold":1}]}]"#,
    ),
];

#[test]
fn every_schema_refuses_what_its_converter_refuses() {
    let schemas = Schemas::shipped();
    let mut wrong = Vec::new();
    for (name, valid, payload) in CORPUS {
        let value: Value = serde_json::from_str(payload).expect("the corpus is JSON");
        let converter = converter_accepts(name, payload.as_bytes());
        let schema = schemas.get(name).is_valid(&value);
        if converter != *valid || schema != *valid {
            wrong.push(format!(
                "{name} {payload}: expected {}, converter {}, schema {}",
                verdict(*valid),
                verdict(converter),
                verdict(schema)
            ));
        }
        wrong.extend(schemas.disagreements(&format!("corpus {name}"), payload.as_bytes()));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// What no JSON Schema can say, which the strict converter still refuses: the schema accepts
/// these (`docs/cli.md` lists them). Only the schema's verdict is asserted: the converter's
/// is its own tests'.
#[test]
fn what_a_schema_cannot_express_it_accepts() {
    let schemas = Schemas::shipped();
    for (name, payload) in [
        // count x warmUpPeriodSec below 2 (a product of two fields)
        (
            "flow",
            r#"[{"resource":"a","count":0.1,"controlBehavior":1}]"#,
        ),
        // a regular expression the `regex` crate cannot read
        ("flow", r#"[{"resource":"(a","count":1,"regex":true}]"#),
        // windowIntervalMs a multiple of sampleCount, both given
        (
            "flow",
            r#"[{"resource":"a","count":1,"clusterMode":true,"clusterConfig":{"flowId":1,"sampleCount":3,"windowIntervalMs":1000}}]"#,
        ),
        // a number whose text overflows to infinity
        ("flow", r#"[{"resource":"a","count":"1e400"}]"#),
        // 1.0 where a boolean is read (JSON Schema cannot tell 1.0 from 1)
        ("flow", r#"[{"resource":"a","count":1,"regex":1.0}]"#),
        // two authority rules on one resource
        (
            "authority",
            r#"[{"resource":"a","limitApp":"x"},{"resource":"a","limitApp":"y","strategy":1}]"#,
        ),
        // a key twice, in two letter cases
        (
            "go-flow",
            r#"[{"resource":"a","threshold":1,"Threshold":2}]"#,
        ),
    ] {
        let value: Value = serde_json::from_str(payload).expect("JSON");
        assert!(schemas.get(name).is_valid(&value), "{name}: {payload}");
    }
}
