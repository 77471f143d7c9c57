//! The converters' fast path against their general path (a JSON document first, then the
//! family's decoder): on any input the fast path takes, both load the same rules. The
//! proptests below and the fuzz target in `fuzz/` (feature `fuzzing`) check it.

use super::java::{fast_path_accepts, java_converter};
use crate::rule_set::{decode_family, RuleSet, JAVA_FORMAT};
use crate::rules::{KeyPolicy, RuleFamily, Validation};
use crate::wire;

/// What the general path loads from `bytes` as `family`, strict.
fn general(bytes: &[u8], family: RuleFamily) -> Option<RuleSet> {
    let document = wire::parse_document(bytes, JAVA_FORMAT).ok()?;
    decode_family(family, document, Validation::Strict, KeyPolicy::Deny)
        .ok()
        .map(|loaded| loaded.set)
}

/// For every family whose fast path takes `bytes`: whether it loads what the general path
/// loads, or refuses what the general path refuses. The difference, when there is one.
///
/// For the fuzz target in `fuzz/`; not part of the API.
pub fn fast_and_general_agree(bytes: &[u8]) -> Result<(), String> {
    for &family in RuleFamily::ALL {
        if fast_path_accepts(bytes, family) {
            let fast = java_converter(family).convert(bytes).ok();
            let general = general(bytes, family);
            if fast != general {
                return Err(format!(
                    "{family}: the fast path loads {fast:?}, the general path {general:?}, from {:?}",
                    String::from_utf8_lossy(bytes)
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Rule-list-like text: keys of every family, escapes, odd numbers and strings.
    fn payload() -> impl Strategy<Value = String> {
        let key = prop::sample::select(vec![
            "resource",
            "count",
            "grade",
            "paramIdx",
            "\\u0070aramIdx",
            "app",
            "gmtCreate",
            "controlBehavior",
            "limitApp",
            "strategy",
            "timeWindow",
            "qps",
            "avgRt",
            "cuont",
            "durationInSec",
            "paramFlowItemList",
            "clusterConfig",
            "weird",
        ]);
        let value = prop::sample::select(vec![
            "0",
            "1",
            "-1",
            "1e400",
            "2.5",
            "\"a\"",
            "\"C:\\\\\"",
            "\"\\ud800\"",
            "null",
            "true",
            "[]",
            "{}",
            "{\"flowId\":1}",
            "\"\\\\\\\"\"",
        ]);
        let rule = prop::collection::vec((key, value), 0..6).prop_map(|pairs| {
            let body: Vec<String> = pairs.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
            format!("{{{}}}", body.join(","))
        });
        prop::collection::vec(rule, 0..4).prop_map(|rules| format!("[{}]", rules.join(",")))
    }

    proptest! {
        #[test]
        fn fast_and_general_paths_agree(text in payload()) {
            let agree = fast_and_general_agree(text.as_bytes());
            prop_assert!(agree.is_ok(), "{:?}", agree);
        }

        #[test]
        fn arbitrary_bytes_agree(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            let agree = fast_and_general_agree(&bytes);
            prop_assert!(agree.is_ok(), "{:?}", agree);
        }
    }
}
