//! Authority rule tests.

use super::*;
use crate::{BlockError, FakeClock, RuleFamily, Sentinel};

#[test]
fn white_list_admits_only_listed_origins() {
    let s = Sentinel::new();
    s.authority_rules()
        .load_rules(vec![AuthorityRule::white_list("r", "app-a, app-b")])
        .unwrap();
    assert!(s.entry("r").origin("app-a").enter().is_ok());
    assert!(s.entry("r").origin("app-b").enter().is_ok());
    let err = s.entry("r").origin("app-c").enter().unwrap_err();
    assert!(matches!(&err, BlockError::Authority { origin, .. } if origin == "app-c"));
    assert_eq!(err.family(), RuleFamily::Authority);
    // A substring of a listed origin is not listed.
    assert!(s.entry("r").origin("app").enter().is_err());
    // No origin: not checked, as in Sentinel.
    assert!(s.entry("r").enter().is_ok());
}

#[test]
fn black_list_rejects_listed_origins() {
    let s = Sentinel::new();
    s.authority_rules()
        .load_rules(vec![AuthorityRule::black_list("r", "crawler")])
        .unwrap();
    assert!(s.entry("r").origin("crawler").enter().is_err());
    assert!(s.entry("r").origin("web").enter().is_ok());
}

#[test]
fn one_rule_per_resource() {
    let s = Sentinel::new();
    let rules = vec![
        AuthorityRule::white_list("r", "a"),
        AuthorityRule::black_list("r", "b"),
    ];
    let err = s.authority_rules().load_rules(rules.clone()).unwrap_err();
    assert_eq!(err.issues()[0].index, 1);
    let report = s.authority_rules().load_rules_lenient(rules).unwrap();
    assert_eq!(report.skipped.len(), 1);
    assert_eq!(
        s.authority_rules().rules(),
        vec![AuthorityRule::white_list("r", "a")]
    );
}

#[test]
fn skipped_rules_name_their_index_in_the_payload() {
    let s = Sentinel::new();
    let rules = vec![
        AuthorityRule::white_list("", "a"), // invalid: blank resource
        AuthorityRule::white_list("r", "a"),
        AuthorityRule::black_list("r", "b"), // a second rule for r
    ];
    let report = s.authority_rules().load_rules_lenient(rules).unwrap();
    let indexes: Vec<usize> = report.skipped.iter().map(|i| i.index).collect();
    assert_eq!(indexes, [0, 2]);
    assert_eq!(
        s.authority_rules().rules(),
        vec![AuthorityRule::white_list("r", "a")]
    );
}

#[test]
fn authority_is_checked_before_flow() {
    let clock = FakeClock::at_ms(10_000);
    let s = Sentinel::builder().clock(clock).build();
    s.flow_rules()
        .load_rules(vec![crate::flow::FlowRule::qps("r", 1.0)])
        .unwrap();
    s.authority_rules()
        .load_rules(vec![AuthorityRule::black_list("r", "bad")])
        .unwrap();
    assert!(matches!(
        s.entry("r").origin("bad").enter(),
        Err(BlockError::Authority { .. })
    ));
    // The authority block did not consume the flow budget, and was counted as a block.
    assert!(s.entry("r").origin("good").enter().is_ok());
    let stats = s.resource_stats("r").unwrap();
    assert_eq!((stats.pass_qps, stats.block_qps), (1.0, 1.0));
}
