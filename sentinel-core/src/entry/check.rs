//! The checks of one call, in Sentinel's slot order (authority, system, flow, circuit
//! breaker), and the counting of its pass or block: the hot path.

use std::mem::ManuallyDrop;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::builder::{EntryBuilder, EntryType, Target};
use super::families::{check_breakers, check_params};
use super::fast::{plain_rule, Fast, LIMIT_CAP};
use super::guard::{
    count_pass, give_back, queued_bits, Entry, BREAKERS, PARAM_HOLDS, RESERVED_ON_INBOUND,
};
use crate::block::BlockError;
use crate::engine::{with_rules, NodeRef, ResourceNode, ResourceRules, RuleSnapshot};
use crate::flow::{plain_qps_passes, CheckContext, CONTEXT_DEFAULT_NAME};
use crate::param_flow::Holds;
use crate::shadow::ShadowCall;
use crate::stat::{StatNode, Trial};

impl<'a> EntryBuilder<'a> {
    #[inline(always)]
    /// Checks the rules and counts the call; `wait` receives how long the call must queue.
    pub(super) fn check(&self, wait_out: &mut Duration) -> Result<Entry<'a>, BlockError> {
        // A handle lends its node; a name lookup borrows it from the registry, or (when
        // idle nodes may be freed) owns a reference to it.
        let node_ref = match self.target {
            Target::Name(name) => self.sentinel.found(name),
            Target::Handle(handle) => handle.node.as_ref().map(NodeRef::Borrowed),
        };
        self.check_node(node_ref, wait_out)
    }

    #[inline(always)]
    /// [`check`](Self::check), with an entry that owns its node: by name that is what the
    /// lookup gives; a handle's node is shared (one more reference).
    pub(super) fn check_owned(
        &self,
        wait_out: &mut Duration,
    ) -> Result<Entry<'static>, BlockError> {
        let node = match self.target {
            Target::Name(name) => self.sentinel.node(name),
            Target::Handle(handle) => handle.node.clone(),
        };
        self.check_node(node.map(NodeRef::Owned), wait_out)
    }

    #[inline(always)]
    fn check_node<'e>(
        &self,
        node_ref: Option<NodeRef<'e>>,
        wait_out: &mut Duration,
    ) -> Result<Entry<'e>, BlockError> {
        let Some(node_ref) = node_ref else {
            return Ok(Entry::untracked());
        };
        let node: &ResourceNode = &node_ref;
        let shared = &*node.shared;
        if !shared.enabled.load(Ordering::Relaxed) {
            return Ok(Entry::untracked());
        }
        let now = shared.clock.now_ms();
        // The rule table's version the checks start from: an exit under a later one looks
        // for breakers loaded since (see `Entry::version`).
        let version = shared.rules_version.load(Ordering::Acquire);
        let origin_node = self.origin.and_then(|o| node.origin_node(o));
        let context_node = self.context.and_then(|c| node.context_node(c));
        let inbound = self.entry_type == EntryType::Inbound;
        let batch = u64::from(self.batch);
        // The common call, with nothing but (at most) one plain QPS rule to check, reads no
        // rule table: its node caches what the current one says of it. Every other call,
        // and one the QPS rule would block, takes the full checks, out of line (on the rule
        // table current then).
        let fast = if inbound {
            Fast::Full
        } else {
            match Fast::cached(node, version) {
                Some(fast) => fast,
                None => with_rules(&node.shared, |snapshot| Fast::refresh(snapshot, node)),
            }
        };
        // Each way out builds its entry with its own copy of `passed` (inlined), so the fast
        // path's constant verdict folds away.
        let trial = match fast {
            Fast::Pass => Trial::Fits,
            Fast::Qps(limit) if !self.prioritized => node.stat.try_pass(now, batch, limit),
            Fast::Qps(_) | Fast::Full => Trial::Over,
        };
        if trial != Trial::Over {
            let verdict = Verdict {
                folded: trial == Trial::Counted,
                ..Verdict::default()
            };
            return Ok(self.passed(
                node_ref,
                origin_node,
                context_node,
                (now, version as u32),
                verdict,
                ManuallyDrop::new(Holds::None),
                wait_out,
            ));
        }
        // Past the cap, a limit stands for a larger count: only the full checks know it.
        let plain_failed = matches!(fast, Fast::Qps(limit) if limit < LIMIT_CAP);
        let call = Call {
            node,
            now,
            inbound,
            plain_failed,
            origin_node: origin_node.as_deref(),
            context_node: context_node.as_deref(),
        };
        if let (Fast::Qps(limit), true, false) = (fast, plain_failed, self.prioritized) {
            // The plain QPS rule blocks the call (a prioritized one may borrow a coming slot:
            // the full checks decide): the rule, if the table still holds it alone.
            let rule = with_rules(&node.shared, |snapshot| {
                plain_rule(snapshot, node.rules_in(snapshot), limit)
            });
            if let Some(rule) = rule {
                let error = BlockError::Flow {
                    resource: node.name.clone(),
                    rule,
                };
                record_block(&call, batch, 0, &error);
                return Err(error);
            }
        }
        // The checks report through `blocked` and return a register-sized verdict: moving a
        // large return value out of them costs more than the checks. Places thread-grade
        // param rules take (given back if a later check blocks) are dropped by hand, so that
        // a call without any pays no drop glue.
        let mut blocked: Option<BlockError> = None;
        let mut holds = ManuallyDrop::new(Holds::None);
        // A call without a context is in the default one: it is counted there only when a
        // chain rule of the resource (enforced or shadow) names that context.
        let mut default_context: Option<Arc<StatNode>> = None;
        let verdict = with_rules(&node.shared, |snapshot| {
            let rules = node.rules_in(snapshot);
            if self.context.is_none() && on_default_context(snapshot, rules, node) {
                default_context = node.context_node(CONTEXT_DEFAULT_NAME);
                let call = Call {
                    context_node: default_context.as_deref(),
                    ..call
                };
                return self.checks(&call, snapshot, rules, &mut holds, &mut blocked);
            }
            self.checks(&call, snapshot, rules, &mut holds, &mut blocked)
        });
        let call = Call {
            context_node: call.context_node.or(default_context.as_deref()),
            ..call
        };
        if let Some(error) = blocked {
            record_block(&call, batch, verdict.reserved, &error);
            drop(ManuallyDrop::into_inner(holds));
            return Err(error);
        }
        Ok(self.passed(
            node_ref,
            origin_node,
            context_node.or(default_context),
            (now, version as u32),
            verdict,
            holds,
            wait_out,
        ))
    }

    /// Counts a call the checks let through (unless it queues: it is counted when its wait
    /// ends) and makes its entry.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn passed<'e>(
        &self,
        node_ref: NodeRef<'e>,
        origin_node: Option<Arc<StatNode>>,
        context_node: Option<Arc<StatNode>>,
        (now, version): (u64, u32),
        verdict: Verdict,
        holds: ManuallyDrop<Holds>,
        wait_out: &mut Duration,
    ) -> Entry<'e> {
        let Verdict {
            wait_ns,
            borrowed,
            breakers,
            probe,
            reserved,
            folded,
        } = verdict;
        let inbound = self.entry_type == EntryType::Inbound;
        if wait_ns != 0 {
            // A blocked call never queues. A queued one is counted when its wait ends.
            *wait_out = Duration::from_nanos(wait_ns);
        } else {
            count_pass(
                &node_ref,
                origin_node.as_deref(),
                context_node.as_deref(),
                inbound,
                now,
                u64::from(self.batch),
                borrowed,
                folded,
            );
        }
        Entry {
            node: Some(node_ref),
            origin_node,
            context_node,
            breakers,
            pending: reserved
                | if matches!(*holds, Holds::None) {
                    0
                } else {
                    PARAM_HOLDS
                }
                | if wait_ns == 0 {
                    0
                } else {
                    queued_bits(borrowed, probe)
                },
            params: holds,
            start_ms: now,
            batch: self.batch,
            version,
            inbound,
            error: false,
        }
    }
}

/// Whether a chain rule of `node`, enforced (`rules`) or shadow, names the default context
/// (calls entered without a context are in it).
#[inline]
fn on_default_context(
    snapshot: &RuleSnapshot,
    rules: Option<&ResourceRules>,
    node: &ResourceNode,
) -> bool {
    let names = |rules: Option<&ResourceRules>| {
        rules
            .and_then(|r| r.flow.as_ref())
            .is_some_and(|f| f.on_default_context())
    };
    names(rules)
        || snapshot
            .shadow
            .as_deref()
            .is_some_and(|shadow| names(shadow.slot_of(node)))
}

/// What [`EntryBuilder::checks`] reads of the call besides the builder.
struct Call<'c> {
    node: &'c ResourceNode,
    now: u64,
    inbound: bool,
    /// The fast path checked the plain QPS rule it found, and the call did not pass it.
    plain_failed: bool,
    origin_node: Option<&'c StatNode>,
    context_node: Option<&'c StatNode>,
}

impl EntryBuilder<'_> {
    /// Every check of a call, in Sentinel's slot order, then the shadow rules: what the
    /// common call's fast path (in [`check_node`](Self::check_node)) does not cover.
    #[inline(never)]
    fn checks(
        &self,
        call: &Call<'_>,
        snapshot: &RuleSnapshot,
        rules: Option<&ResourceRules>,
        holds: &mut Holds,
        blocked: &mut Option<BlockError>,
    ) -> Verdict {
        let Call {
            node,
            now,
            inbound,
            origin_node,
            context_node,
            ..
        } = *call;
        let shared = &*node.shared;
        let flow_context = || CheckContext {
            now_ms: now,
            clock: shared.clock.as_dyn(),
            stat: &node.stat,
            origin: self.origin,
            origin_node,
            context: self.context,
            context_node,
            batch: self.batch,
            prioritized: self.prioritized,
        };
        let mut verdict = Verdict::default();
        'passed: {
            let error = 'checks: {
                // Sentinel's slot order: authority, system, flow, circuit breaker.
                if let Some(rule) = rules.and_then(|r| r.authority.as_ref()) {
                    let origin = self.origin.unwrap_or("");
                    if !rule.passes(origin) {
                        break 'checks BlockError::Authority {
                            resource: node.name.clone(),
                            rule: rule.clone(),
                            origin: origin.to_owned(),
                        };
                    }
                }
                if inbound {
                    if let Some(thresholds) = &snapshot.tables.system.thresholds {
                        match thresholds
                            .check(&shared.inbound, now, self.batch, || shared.system_status())
                        {
                            Ok(true) => verdict.reserved |= RESERVED_ON_INBOUND,
                            Ok(false) => {}
                            Err(b) => {
                                break 'checks BlockError::System {
                                    resource: node.name.clone(),
                                    metric: b.metric,
                                    threshold: b.threshold,
                                    value: b.value,
                                };
                            }
                        }
                    }
                }
                let Some(rules) = rules else {
                    break 'passed;
                };
                // Hot parameters, before flow (Sentinel's slot order). A call without
                // arguments passes every param rule.
                if let Some(param) = rules.param.as_deref() {
                    if !self.args.is_empty() {
                        match check_params(param, &self.args, now, self.batch, holds, node) {
                            Ok(wait_ns) => verdict.wait_ns = wait_ns,
                            Err(error) => break 'checks error,
                        }
                    }
                }
                // The common single plain QPS rule, without reading the flow table (unless
                // the fast path just found it would not pass: the flow check decides).
                let plain_pass = !call.plain_failed
                    && plain_qps_passes(
                        rules.plain_qps,
                        &node.stat,
                        now,
                        self.batch,
                        self.prioritized,
                    );
                if let Some(flow) = rules.flow.as_ref().filter(|_| !plain_pass) {
                    match flow.check(&flow_context()) {
                        Ok(pass) => {
                            verdict.wait_ns = verdict.wait_ns.max(pass.wait_ns);
                            verdict.borrowed = pass.borrowed;
                            verdict.reserved |= pass.reserved;
                        }
                        Err(rule) => {
                            break 'checks BlockError::Flow {
                                resource: node.name.clone(),
                                rule: rule.clone(),
                            }
                        }
                    }
                }
                if let Some(list) = rules.breakers.as_ref() {
                    // A call on a borrowed slot skips the breakers' checks, as in Sentinel,
                    // but its completion is reported to them (Sentinel's DegradeSlot.exit).
                    if !verdict.borrowed {
                        match check_breakers(list, now, node) {
                            Ok(probe) => verdict.probe = probe,
                            Err(error) => break 'checks error,
                        }
                    }
                    verdict.breakers = BREAKERS;
                }
                break 'passed;
            };
            *blocked = Some(error);
            return verdict;
        }
        // Shadow rules see the calls the enforced ones admitted (`crate::shadow`).
        if let Some(shadow) = snapshot.shadow.as_deref() {
            let call = ShadowCall {
                flow: CheckContext {
                    prioritized: false,
                    ..flow_context()
                },
                inbound,
                args: &self.args,
            };
            verdict.breakers |= crate::shadow::check(shadow, node, &call);
        }
        verdict
    }
}

/// What the checks decided for a call that passed.
#[derive(Debug, Default, Clone, Copy)]
struct Verdict {
    /// How long the call queues (rate limiter), in nanoseconds: a `Duration` would make
    /// the verdict too large to return in registers.
    wait_ns: u64,
    /// It passed on a slot borrowed from a coming bucket.
    borrowed: bool,
    /// The resource has circuit breakers: exit reports to them.
    breakers: u8,
    /// A breaker admitted the call as its half-open probe.
    probe: bool,
    /// Nodes a concurrency rule reserved a place on (see `flow::release_reserved`).
    reserved: u8,
    /// The fast path's check counted the resource's passes (see `stat::fold`).
    folded: bool,
}

/// Counts a blocked call on its nodes, and gives back the places earlier checks reserved
/// for it.
fn record_block(call: &Call<'_>, batch: u64, reserved: u8, error: &BlockError) {
    let (node, now) = (call.node, call.now);
    if reserved != 0 {
        // Earlier checks passed and reserved; a later one blocked.
        give_back(reserved, node, call.origin_node, call.context_node);
    }
    node.stat.on_block(now, batch);
    for n in [call.origin_node, call.context_node].into_iter().flatten() {
        n.on_block(now, batch);
    }
    if call.inbound {
        node.shared.inbound.on_block(now, batch);
    }
    node.blocks.add(error, batch);
    #[cfg(feature = "metrics")]
    node.metrics.blocked(error, batch);
}
