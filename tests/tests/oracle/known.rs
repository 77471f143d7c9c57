//! The known differences from Sentinel 1.8 that generated scenarios keep out of the comparison.
//!
//! Each one is a row of the table in `docs/guarding.md` ("Deliberate and known differences from
//! Sentinel 1.8"), named by its first cell, and a hand scenario in `interop/scenarios/` shows it
//! (compared step by step, with `expect_deviation`). The generator does one of two things with
//! a known difference, and records it in the scenario's `known_differences`:
//!
//! - **rewrites** the Rust side's rules into what Sentinel makes of the Java side's (the Java
//!   runner gets the rule as generated, the Rust runner the rewrite, in the scenario's `rust`
//!   field): the decisions then show that the difference is exactly the one the row describes,
//!   and everything else in the scenario is still compared;
//! - or **avoids** it: the scenario never reaches it (batches of 0, the origin `other`,
//!   held calls leave before a param-flow reload with a thread-grade rule, ...).

use std::collections::BTreeMap;

use serde_json::Value;

/// A known difference, by its row in `docs/guarding.md`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Known {
    /// Rewritten: a warm-up rule with count x warmUpPeriodSec below 2 blocks every call in
    /// Java and a warm-up rate limiter passes every call; the Rust side gets a reject rule of
    /// count 0 or of a count no call reaches (the engine refuses both rules).
    WarmUpBelowTwo,
    /// Rewritten: an `int`/`long` item never matches a `long`/`int` argument in Java (nor a
    /// `float`/`double` item a `double`/`float` argument): the Rust side drops it.
    NumericTypesApart,
    /// Rewritten: an authority list entry with spaces matches no origin in Java; the Rust side
    /// drops it.
    AuthorityListTrimmed,
    /// Avoided: batches of 0.
    BatchZero,
    /// Avoided: the origin `other`.
    OriginOther,
    /// Avoided: a list repeating a value against a thread-grade param rule.
    ThreadListDuplicates,
    /// Avoided: calls of another arity than the first when `paramIdx` is negative.
    NegativeIndexRewritten,
    /// Rewritten: the Rust side loads the flow and param-flow rules in the order Sentinel
    /// checks them (a `HashSet`'s), as the Java runner reports it (`checkOrder`).
    TwoRulesCheckOrder,
    /// Avoided: a held call with breakers exits before a further `timeWindow` has passed.
    ProbeHeldPastTimeWindow,
    /// Avoided: only the first rules of a scenario name the default context in a chain rule
    /// (this engine counts that context's calls from the load of such a rule).
    DefaultContextCountedFromLoad,
    /// Avoided: every held call exits before a param-flow reload with a thread-grade rule
    /// (Java takes a value's thread back when a call entered before the rule exits).
    ParamThreadsLoadedInFlight,
}

impl Known {
    pub(crate) const ALL: [Known; 11] = [
        Known::WarmUpBelowTwo,
        Known::NumericTypesApart,
        Known::AuthorityListTrimmed,
        Known::BatchZero,
        Known::OriginOther,
        Known::ThreadListDuplicates,
        Known::NegativeIndexRewritten,
        Known::TwoRulesCheckOrder,
        Known::ProbeHeldPastTimeWindow,
        Known::DefaultContextCountedFromLoad,
        Known::ParamThreadsLoadedInFlight,
    ];

    /// The first cell of its row in docs/guarding.md's table.
    pub(crate) fn row(self) -> &'static str {
        match self {
            Known::WarmUpBelowTwo => "warm-up-below-2",
            Known::NumericTypesApart => "numeric-types-apart",
            Known::AuthorityListTrimmed => "authority-list-trimmed",
            Known::BatchZero => "batch-0",
            Known::OriginOther => "origin-other",
            Known::ThreadListDuplicates => "thread-list-duplicates",
            Known::NegativeIndexRewritten => "negative-index-rewritten",
            Known::TwoRulesCheckOrder => "two-rules-check-order",
            Known::ProbeHeldPastTimeWindow => "probe-held-past-time-window",
            Known::DefaultContextCountedFromLoad => "default-context-counted-from-load",
            Known::ParamThreadsLoadedInFlight => "param-threads-loaded-in-flight",
        }
    }
}

/// Records which known differences a scenario rewrote or avoided, and how often.
#[derive(Debug, Default)]
pub(crate) struct Used(pub(crate) BTreeMap<Known, usize>);

impl Used {
    pub(crate) fn note(&mut self, known: Known) {
        *self.0.entry(known).or_default() += 1;
    }

    pub(crate) fn to_json(&self) -> Value {
        Value::Array(
            self.0
                .keys()
                .map(|k| Value::String(k.row().to_owned()))
                .collect(),
        )
    }
}

/// The rows of the differences table in docs/guarding.md: each row's first cell (without
/// backticks) with the whole row's text.
pub(crate) fn table_rows(doc: &str) -> Vec<(String, String)> {
    let Some(start) = doc.find("## Deliberate and known differences from Sentinel 1.8") else {
        return Vec::new();
    };
    doc[start..]
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| {
            let first = l.split('|').nth(1)?.trim().trim_matches('`').to_owned();
            Some((first, l.to_owned()))
        })
        .collect()
}
