//! Which rule format a payload is in, told by the keys only one format uses: a payload of one
//! family given to another family's converter fails naming the family it looks like, instead
//! of loading as something else (a param-flow rule as a plain QPS limit, a Go isolation rule
//! as a flow rule).

use serde_json::{Map, Value};

use crate::rules::RuleFamily;

/// A rule format the converters read or recognise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    JavaFlow,
    JavaDegrade,
    JavaSystem,
    JavaAuthority,
    JavaParamFlow,
    GoFlow,
    GoBreaker,
    GoSystem,
    GoHotspot,
    GoIsolation,
}

use Format::*;

impl Format {
    /// The Sentinel (Java) format of `family`.
    pub(crate) fn java(family: RuleFamily) -> Self {
        match family {
            RuleFamily::Flow => JavaFlow,
            RuleFamily::Degrade => JavaDegrade,
            RuleFamily::System => JavaSystem,
            RuleFamily::Authority => JavaAuthority,
            RuleFamily::ParamFlow => JavaParamFlow,
        }
    }

    fn name(self) -> &'static str {
        match self {
            JavaFlow => "Sentinel flow",
            JavaDegrade => "Sentinel degrade",
            JavaSystem => "Sentinel system",
            JavaAuthority => "Sentinel authority",
            JavaParamFlow => "Sentinel param-flow (hot parameter)",
            GoFlow => "sentinel-golang flow",
            GoBreaker => "sentinel-golang circuit-breaker",
            GoSystem => "sentinel-golang system",
            GoHotspot => "sentinel-golang hotspot",
            GoIsolation => "sentinel-golang isolation",
        }
    }
}

/// Keys, as Sentinel (Java) and sentinel-golang spell them, and the formats that use them.
/// (Go matches keys case-insensitively.) A key missing here is shared too widely
/// (`resource`, `strategy`) or unknown (`id`, `app`), and tells nothing.
const KEYS: &[(&str, &[Format])] = &[
    ("count", &[JavaFlow, JavaDegrade, JavaParamFlow]),
    ("grade", &[JavaFlow, JavaDegrade, JavaParamFlow]),
    (
        "limitApp",
        &[JavaFlow, JavaDegrade, JavaAuthority, JavaParamFlow],
    ),
    (
        "controlBehavior",
        &[JavaFlow, JavaParamFlow, GoFlow, GoHotspot],
    ),
    ("refResource", &[JavaFlow, GoFlow]),
    ("warmUpPeriodSec", &[JavaFlow, GoFlow]),
    (
        "maxQueueingTimeMs",
        &[JavaFlow, JavaParamFlow, GoFlow, GoHotspot],
    ),
    ("clusterMode", &[JavaFlow, JavaParamFlow]),
    ("clusterConfig", &[JavaFlow, JavaParamFlow]),
    ("timeWindow", &[JavaDegrade]),
    ("slowRatioThreshold", &[JavaDegrade]),
    ("passCount", &[JavaDegrade]),
    ("minRequestAmount", &[JavaDegrade, GoBreaker]),
    ("statIntervalMs", &[JavaDegrade, GoBreaker]),
    ("highestSystemLoad", &[JavaSystem]),
    ("highestCpuUsage", &[JavaSystem]),
    ("avgRt", &[JavaSystem]),
    ("maxThread", &[JavaSystem]),
    ("qps", &[JavaSystem]),
    ("paramIdx", &[JavaParamFlow]),
    ("paramFlowItemList", &[JavaParamFlow]),
    ("burstCount", &[JavaParamFlow, GoHotspot]),
    ("durationInSec", &[JavaParamFlow, GoHotspot]),
    ("tokenCalculateStrategy", &[GoFlow]),
    ("relationStrategy", &[GoFlow]),
    ("statIntervalInMs", &[GoFlow]),
    ("warmUpColdFactor", &[GoFlow]),
    ("threshold", &[GoFlow, GoBreaker, GoHotspot, GoIsolation]),
    ("retryTimeoutMs", &[GoBreaker]),
    ("maxAllowedRtMs", &[GoBreaker]),
    ("probeNum", &[GoBreaker]),
    ("statSlidingWindowBucketCount", &[GoBreaker]),
    ("metricType", &[GoSystem, GoHotspot, GoIsolation]),
    ("triggerCount", &[GoSystem]),
    ("paramIndex", &[GoHotspot]),
    // This crate writes them in Java-shaped param-flow rules too.
    ("paramKey", &[GoHotspot, JavaParamFlow]),
    ("specificItems", &[GoHotspot]),
    ("paramsMaxCapacity", &[GoHotspot, JavaParamFlow]),
];

/// The first key of `object` that `own` does not use but another format does, with the
/// message to report for it.
pub(crate) fn foreign_key(object: &Map<String, Value>, own: Format) -> Option<(String, String)> {
    object.keys().find_map(|key| {
        let formats = formats_of(key.as_bytes()).filter(|f| !f.contains(&own))?;
        let names: Vec<&str> = formats.iter().map(|f| f.name()).collect();
        Some((
            key.clone(),
            format!(
                "`{key}` is a key of {} rules, not of {} rules: this looks like another \
                 family's payload, given to the wrong converter",
                names.join(" or "),
                own.name()
            ),
        ))
    })
}

/// Whether `bytes` may hold a key that `own` does not use. The Java converters' fast path,
/// which skips the per-rule check, leaves such a payload to the general path. A false
/// alarm (a resource named `qps`) only costs the general path.
///
/// Keys are looked for as Java spells them and capitalized, as Go structs spell them.
///
/// One pass: every quoted string followed by `:` (a key) is looked up, in any letter case.
pub(crate) fn may_hold_foreign_key(bytes: &[u8], own: Format) -> bool {
    let mut quotes = memchr::memchr_iter(b'"', bytes);
    while let (Some(open), Some(mut close)) = (quotes.next(), quotes.next()) {
        // An escaped quote does not end the string.
        while bytes.get(close.wrapping_sub(1)) == Some(&b'\\') {
            match quotes.next() {
                Some(next) => close = next,
                None => return false,
            }
        }
        let Some(key) = bytes.get(open + 1..close) else {
            continue;
        };
        let is_key = bytes
            .get(close + 1..)
            .and_then(|rest| rest.iter().find(|b| !b.is_ascii_whitespace()))
            == Some(&b':');
        if is_key && (3..=LONGEST_KEY).contains(&key.len()) && is_foreign(key, own) {
            return true;
        }
    }
    false
}

/// The longest key of [`KEYS`].
const LONGEST_KEY: usize = 28;

fn is_foreign(key: &[u8], own: Format) -> bool {
    formats_of(key).is_some_and(|formats| !formats.contains(&own))
}

/// The formats that use `key` (any letter case), if it is in [`KEYS`].
fn formats_of(key: &[u8]) -> Option<&'static [Format]> {
    KEYS.iter()
        .find(|(k, _)| k.len() == key.len() && k.as_bytes().eq_ignore_ascii_case(key))
        .map(|(_, formats)| *formats)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(json: &str) -> Map<String, Value> {
        match serde_json::from_str(json) {
            Ok(Value::Object(map)) => map,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_key_of_another_format_is_named() {
        let param = object(r#"{"resource":"aa","count":0,"paramIdx":0}"#);
        let found = foreign_key(&param, JavaFlow).map(|(key, _)| key);
        assert_eq!(found.as_deref(), Some("paramIdx"));
        assert!(foreign_key(&param, JavaParamFlow).is_none());
        let isolation = object(r#"{"Resource":"abc","MetricType":0,"Threshold":100}"#);
        let (key, message) = foreign_key(&isolation, GoFlow).unwrap_or_default();
        assert_eq!(key, "MetricType");
        assert!(message.contains("isolation"), "{message}");
        assert!(may_hold_foreign_key(br#"[{"paramIdx":0}]"#, JavaFlow));
        assert!(!may_hold_foreign_key(
            br#"[{"resource":"a","count":1}]"#,
            JavaFlow
        ));
    }
}
