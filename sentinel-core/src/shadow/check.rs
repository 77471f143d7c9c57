//! The shadow checks of one call that the enforced rules admitted, and the completion of
//! its shadow breakers. Nothing here can block: a shadow rule that would have blocked the
//! call counts it.

use std::sync::Arc;

use crate::circuit_breaker::{Admission, DegradeRule, Transition, Transitions};
use crate::engine::{ResourceNode, ShadowSnapshot};
use crate::events::EventBus;
use crate::flow::{plain_qps_passes, release_reserved, CheckContext};
use crate::param_flow::{CallArgs, Holds, Now};
use crate::rule_ref::RuleRef;

/// What the shadow checks read of a call.
pub(crate) struct ShadowCall<'c, 'a> {
    /// What the flow checks read (never prioritized: a shadow rule does not borrow).
    pub(crate) flow: CheckContext<'c>,
    pub(crate) inbound: bool,
    pub(crate) args: &'c CallArgs<'a>,
}

/// Runs `node`'s shadow rules on a call the enforced rules admitted, in Sentinel's slot
/// order; the first that would block counts the call and the rest are skipped, as they would
/// be if the shadow rules were enforced. Returns whether the resource has shadow breakers
/// (its exit then reports to them).
#[inline(never)]
pub(crate) fn check(
    shadow: &ShadowSnapshot,
    node: &ResourceNode,
    call: &ShadowCall<'_, '_>,
) -> bool {
    let slot = shadow.slot_of(node);
    let shared = &*node.shared;
    let (now, batch) = (call.flow.now_ms, call.flow.batch);
    let hit = |address: usize| {
        if let Some(counter) = shadow.counter(address) {
            counter.record(now, u64::from(batch), &node.name, &shared.events);
            #[cfg(feature = "metrics")]
            node.metrics
                .shadow_blocked(counter.reason, counter.kind, u64::from(batch));
        }
    };
    if let Some(rule) = slot.and_then(|s| s.authority.as_ref()) {
        if !rule.passes(call.flow.origin.unwrap_or("")) {
            hit(Arc::as_ptr(rule) as usize);
            return false;
        }
    }
    if call.inbound {
        if let Some(thresholds) = &shadow.tables.system.thresholds {
            match thresholds.check(&shared.inbound, now, batch, || shared.system_status()) {
                Ok(true) => shared.inbound.release(1),
                Ok(false) => {}
                Err(block) => {
                    if let Some(counter) = shadow.system_counter(block.metric) {
                        counter.record(now, u64::from(batch), &node.name, &shared.events);
                        #[cfg(feature = "metrics")]
                        node.metrics
                            .shadow_blocked(counter.reason, counter.kind, u64::from(batch));
                    }
                    return false;
                }
            }
        }
    }
    let Some(rules) = slot else {
        return false;
    };
    if let Some(param) = rules.param.as_deref() {
        if !call.args.is_empty() {
            // Shadow param rules are QPS-grade (thread-grade ones are refused): they take
            // no place to hold.
            let mut holds = Holds::None;
            let checked = param.check(
                call.args,
                &Now::new(now, shared.clock.as_dyn()),
                batch,
                &mut holds,
            );
            if let Err(hot) = checked {
                hit(Arc::as_ptr(hot.rule) as usize);
                return false;
            }
        }
    }
    // A shadow rule never borrows from a coming bucket (that would change the statistics
    // the enforced rules read).
    if !plain_qps_passes(rules.plain_qps, &node.stat, now, batch, false) {
        if let Some(flow) = rules.flow.as_ref() {
            match flow.check(&call.flow) {
                // A concurrency rule's place is the enforced call's: given back at once.
                Ok(pass) if pass.reserved != 0 => release_reserved(
                    pass.reserved,
                    &node.stat,
                    call.flow.origin_node,
                    call.flow.context_node,
                ),
                Ok(_) => {}
                Err(rule) => {
                    hit(RuleRef::address(rule));
                    return false;
                }
            }
        }
    }
    let Some(list) = rules.breakers.as_deref() else {
        return false;
    };
    let transitions = ShadowTransitions {
        shadow,
        events: &shared.events,
    };
    // Probes admitted by this call, one bit per breaker (the first 64).
    let mut probes: u64 = 0;
    for (i, breaker) in list.iter().enumerate() {
        match breaker.try_pass(now, &transitions) {
            Admission::Pass => {}
            Admission::Probe => probes |= 1u64.checked_shl(i as u32).unwrap_or(0),
            Admission::Block => {
                // The probes the earlier shadow breakers admitted never run.
                for (j, earlier) in list.iter().enumerate().take(i) {
                    if probes & 1u64.checked_shl(j as u32).unwrap_or(0) != 0 {
                        earlier.abort_probe(now, &transitions);
                    }
                }
                hit(Arc::as_ptr(&breaker.rule) as usize);
                return false;
            }
        }
    }
    true
}

/// Reports a completed call to `node`'s shadow breakers.
pub(crate) fn complete(
    shadow: &ShadowSnapshot,
    node: &ResourceNode,
    now: u64,
    rt: u64,
    error: bool,
    events: &EventBus,
) {
    let Some(list) = shadow.slot_of(node).and_then(|s| s.breakers.as_deref()) else {
        return;
    };
    let transitions = ShadowTransitions { shadow, events };
    for breaker in list {
        breaker.on_complete(now, rt, error, &transitions);
    }
}

/// Where a shadow breaker's would-be transitions go: its counter and
/// [`SentinelEvent::ShadowBreakerStateChanged`](crate::SentinelEvent::ShadowBreakerStateChanged).
struct ShadowTransitions<'s> {
    shadow: &'s ShadowSnapshot,
    events: &'s EventBus,
}

impl Transitions for ShadowTransitions<'_> {
    fn changed(&self, change: Transition<'_>) {
        let address = change.rule as *const DegradeRule as usize;
        if let Some(counter) = self.shadow.counter(address) {
            counter.transition(change.to);
        }
        self.events.emit(change.event(true));
    }
}
