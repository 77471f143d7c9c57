//! Which rule format a payload is in, told by the keys only one format uses: a payload of one
//! family given to another family's converter fails naming the family it looks like, instead
//! of loading as something else (a param-flow rule as a plain QPS limit, a Go isolation rule
//! as a flow rule).

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
            JavaParamFlow => "Sentinel paramFlow (hot-parameter)",
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

/// The keys of the wire shapes that [`KEYS`] leaves out because they tell nothing about the
/// format: shared by too many formats. A test (`family.rs`) checks that every key of every
/// wire shape is in one list or the other.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) const TELLS_NOTHING: &[&str] = &["resource", "strategy", "regex"];

/// The message for `key` when `own` does not use it but another format does: the payload
/// looks like another family's. Run on the keys a wire struct did not read, decoded, by
/// every path (see `wire::keys`).
pub(crate) fn foreign_key_message(key: &str, own: Format) -> Option<String> {
    let formats = formats_of(key.as_bytes()).filter(|f| !f.contains(&own))?;
    let names: Vec<&str> = formats.iter().map(|f| f.name()).collect();
    Some(format!(
        "`{key}` is a key of {} rules, not of {} rules: this looks like another family's \
         payload, given to the wrong converter",
        names.join(" or "),
        own.name()
    ))
}

/// The formats that use `key` (any letter case), if it is in [`KEYS`].
pub(crate) fn formats_of(key: &[u8]) -> Option<&'static [Format]> {
    KEYS.iter()
        .find(|(k, _)| k.len() == key.len() && k.as_bytes().eq_ignore_ascii_case(key))
        .map(|(_, formats)| *formats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_of_another_format_is_named() {
        assert!(foreign_key_message("paramIdx", JavaFlow).is_some());
        assert!(foreign_key_message("paramIdx", JavaParamFlow).is_none());
        let message = foreign_key_message("MetricType", GoFlow).unwrap_or_default();
        assert!(message.contains("isolation"), "{message}");
        assert!(foreign_key_message("app", JavaFlow).is_none());
    }
}
