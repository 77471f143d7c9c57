//! The shadow rules panel: what each shadow rule would have blocked (`GET api/shadow`, and the
//! `shadow` field of a snapshot).

use serde::Serialize;

use crate::state::State;

/// One shadow rule and its would-blocks (see `sentinel_core::shadow`).
#[derive(Debug, Clone, Serialize)]
pub struct ShadowRow {
    /// The rule's family (`flow`, `degrade`, `system`, `authority`, `paramFlow`).
    pub family: String,
    /// The rule's resource; `None` for system rules.
    pub resource: Option<String>,
    /// What would block (`qps`, `concurrency`, `slow_ratio`...).
    pub kind: String,
    /// The rule as JSON.
    pub rule: String,
    /// Would-blocks in the current second.
    pub this_second: u64,
    /// Would-blocks in the second before.
    pub last_second: u64,
    /// Would-blocks since the rule was loaded.
    pub total: u64,
    /// A shadow breaker's state.
    pub breaker_state: Option<String>,
    /// A shadow breaker's would-be transitions to OPEN, HALF_OPEN and CLOSED.
    pub transitions: [u64; 3],
}

impl State {
    /// Every shadow rule's would-blocks, most in the last second first.
    pub(crate) fn shadow(&self) -> Vec<ShadowRow> {
        let mut rows: Vec<ShadowRow> = self
            .sentinel
            .shadow_stats()
            .into_iter()
            .map(|s| ShadowRow {
                family: s.family.to_string(),
                resource: s.resource,
                kind: s.kind.to_owned(),
                rule: s.rule,
                this_second: s.blocked_this_second,
                last_second: s.blocked_last_second,
                total: s.total,
                breaker_state: s.breaker_state.map(|b| b.to_string()),
                transitions: s.transitions,
            })
            .collect();
        rows.sort_by(|a, b| {
            (b.last_second, b.total)
                .cmp(&(a.last_second, a.total))
                .then_with(|| a.resource.cmp(&b.resource))
        });
        rows
    }
}
