//! The shadow checks of one call that the enforced rules admitted, and the completion of
//! its shadow breakers. Nothing here can block: a shadow rule that would have blocked the
//! call counts it.

use std::sync::Arc;

use crate::circuit_breaker::{Admission, DegradeRule, Transition, Transitions};
use crate::engine::{ResourceNode, ShadowSnapshot};
use crate::events::EventBus;
use crate::flow::{plain_qps_passes, release_reserved, CheckContext, RESERVED_ON_RESOURCE};
use crate::param_flow::{CallArgs, Holds, Now};
use crate::rule_ref::RuleRef;

/// What the shadow checks read of a call.
pub(crate) struct ShadowCall<'c, 'a> {
    /// What the flow checks read (never prioritized: a shadow rule does not borrow).
    pub(crate) flow: CheckContext<'c>,
    pub(crate) inbound: bool,
    pub(crate) args: &'c CallArgs<'a>,
}

/// [`Entry`](crate::Entry)'s exit bits: the call passed every shadow rule, and the
/// resource's shadow breakers get its completion.
pub(crate) const SHADOW_BREAKERS: u8 = 2;
/// The call counts as a pass in the resource's counterfactual statistics (exit completes it).
pub(crate) const SHADOW_COUNTED: u8 = 4;
/// The call counts as a pass in the counterfactual inbound statistics.
pub(crate) const SHADOW_COUNTED_INBOUND: u8 = 8;
/// A shadow concurrency rule holds a place for the call on the counterfactual statistics.
pub(crate) const SHADOW_HELD: u8 = 16;
/// The shadow system `maxThread` holds a place on the counterfactual inbound statistics.
pub(crate) const SHADOW_HELD_INBOUND: u8 = 32;
/// Any of the counterfactual bits.
pub(crate) const SHADOW_STATE: u8 =
    SHADOW_COUNTED | SHADOW_COUNTED_INBOUND | SHADOW_HELD | SHADOW_HELD_INBOUND;

/// Runs `node`'s shadow rules on a call the enforced rules admitted, in Sentinel's slot
/// order; the first that would block counts the call and the rest are skipped, as they would
/// be if the shadow rules were enforced. Returns what the call's exit owes the shadow rules
/// (`SHADOW_*` bits).
///
/// The rules that read statistics (QPS, warm-up, concurrency, system) read the
/// counterfactual ones: the calls that passed every shadow rule, not the resource's real
/// window (which also holds the calls a shadow rule would have blocked, because they really
/// passed). A call that passes the whole shadow chain is counted there, and its exit
/// completes it there; so each shadow rule decides as the same rule, enforced, would have.
#[inline(never)]
pub(crate) fn check(shadow: &ShadowSnapshot, node: &ResourceNode, call: &ShadowCall<'_, '_>) -> u8 {
    let slot = shadow.slot_of(node);
    let shared = &*node.shared;
    let (now, batch) = (call.flow.now_ms, call.flow.batch);
    let system = call.inbound && shadow.tables.system.thresholds.is_some();
    if slot.is_none() && !system {
        return 0;
    }
    let hit = |address: usize| {
        if let Some(counter) = shadow.counter(address) {
            counter.record(now, u64::from(batch), &node.name, &shared.events);
            #[cfg(feature = "metrics")]
            node.metrics
                .shadow_blocked(counter.reason, counter.kind, u64::from(batch));
        }
    };
    let counterfactual = slot.map(|_| &**node.shadow_stat.get_or_init(Box::default));
    // The places held so far, given back when a later shadow rule would block.
    let mut held = 0u8;
    let give_back = |held: u8| {
        if let Some(cf) = counterfactual.filter(|_| held & SHADOW_HELD != 0) {
            cf.release(1);
        }
        if held & SHADOW_HELD_INBOUND != 0 {
            shared.shadow_inbound.release(1);
        }
    };
    if let Some(rule) = slot.and_then(|s| s.authority.as_ref()) {
        if !rule.passes(call.flow.origin.unwrap_or("")) {
            hit(Arc::as_ptr(rule) as usize);
            return 0;
        }
    }
    if system {
        if let Some(thresholds) = &shadow.tables.system.thresholds {
            match thresholds.check(&shared.shadow_inbound, now, batch, || {
                shared.system_status()
            }) {
                Ok(true) => held |= SHADOW_HELD_INBOUND,
                Ok(false) => {}
                Err(block) => {
                    if let Some(counter) = shadow.system_counter(block.metric) {
                        counter.record(now, u64::from(batch), &node.name, &shared.events);
                        #[cfg(feature = "metrics")]
                        node.metrics
                            .shadow_blocked(counter.reason, counter.kind, u64::from(batch));
                    }
                    return 0;
                }
            }
        }
    }
    let mut owed = held;
    if system {
        owed |= SHADOW_COUNTED_INBOUND;
    }
    let (Some(rules), Some(cf)) = (slot, counterfactual) else {
        shared.shadow_inbound.on_pass(now, u64::from(batch));
        return owed;
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
                give_back(held);
                hit(Arc::as_ptr(hot.rule) as usize);
                return 0;
            }
        }
    }
    // A shadow rule never borrows from a coming bucket (that would change the statistics
    // the enforced rules read).
    let mut wait_ns = 0;
    if !plain_qps_passes(rules.plain_qps, cf, now, batch, false) {
        if let Some(flow) = rules.flow.as_ref() {
            let cx = CheckContext {
                stat: cf,
                ..call.flow
            };
            match flow.check(&cx) {
                Ok(pass) => {
                    wait_ns = pass.wait_ns;
                    if pass.reserved & RESERVED_ON_RESOURCE != 0 {
                        held |= SHADOW_HELD;
                    }
                    // A place on an origin's or context's node is the enforced call's:
                    // given back at once (those nodes are the real ones).
                    release_reserved(
                        pass.reserved & !RESERVED_ON_RESOURCE,
                        cf,
                        cx.origin_node,
                        cx.context_node,
                    );
                }
                Err(rule) => {
                    give_back(held);
                    hit(RuleRef::address(rule));
                    return 0;
                }
            }
        }
    }
    if let Some(list) = rules.breakers.as_deref() {
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
                    give_back(held);
                    hit(Arc::as_ptr(&breaker.rule) as usize);
                    return 0;
                }
            }
        }
        owed |= SHADOW_BREAKERS;
    }
    // Every shadow rule would have let the call through: it counts where they read, when it
    // would have started (a shadow rate limiter would have queued it).
    if wait_ns == 0 {
        cf.on_pass(now, u64::from(batch));
    } else {
        cf.borrow_future(now, now + wait_ns / 1_000_000, u64::from(batch));
        cf.on_pass_borrowed();
    }
    if system {
        shared.shadow_inbound.on_pass(now, u64::from(batch));
    }
    owed | held | SHADOW_COUNTED
}

/// The exit of a call that passed every shadow rule: its completion in the counterfactual
/// statistics it was counted in, and the places it held there given back.
pub(crate) fn exit(node: &ResourceNode, owed: u8, now: u64, rt: u64, batch: u64, error: bool) {
    let shared = &*node.shared;
    if let Some(cf) = node.shadow_stat.get() {
        if owed & SHADOW_COUNTED != 0 {
            cf.on_complete(now, rt, batch, error);
        }
        if owed & SHADOW_HELD != 0 {
            cf.release(1);
        }
    }
    if owed & SHADOW_COUNTED_INBOUND != 0 {
        shared.shadow_inbound.on_complete(now, rt, batch, error);
    }
    if owed & SHADOW_HELD_INBOUND != 0 {
        shared.shadow_inbound.release(1);
    }
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
