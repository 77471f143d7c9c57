//! The RAII [`Entry`] of a call that passed: counted when it starts, exited when dropped.

use std::fmt;
use std::mem::ManuallyDrop;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::engine::{with_rules, NodeRef, ResourceNode};
use crate::flow::release_reserved;
use crate::param_flow::Holds;
use crate::stat::StatNode;

/// Counts a call that passed on its nodes: as passed (or, on a borrowed slot, only as in
/// flight) and in flight. `folded`: the fast path's check already counted the resource's
/// passes (`stat::fold`), so the resource only counts it in flight.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) fn count_pass(
    node: &ResourceNode,
    origin_node: Option<&StatNode>,
    context_node: Option<&StatNode>,
    inbound: bool,
    now: u64,
    batch: u64,
    borrowed: bool,
    folded: bool,
) {
    if borrowed {
        // Sentinel's PriorityWaitException path: the pass is counted in the borrowed
        // bucket; only concurrency rises now.
        node.stat.on_pass_borrowed();
        for n in [origin_node, context_node].into_iter().flatten() {
            n.on_pass_borrowed();
        }
        if inbound {
            node.shared.inbound.on_pass_borrowed();
        }
    } else {
        if folded {
            node.stat.on_pass_folded();
        } else {
            node.stat.on_pass(now, batch);
        }
        if let Some(n) = origin_node {
            n.on_pass(now, batch);
        }
        if let Some(n) = context_node {
            n.on_pass(now, batch);
        }
        if inbound {
            node.shared.inbound.on_pass(now, batch);
        }
    }
    #[cfg(feature = "metrics")]
    {
        node.metrics.pass.increment(batch);
        node.metrics.concurrency.increment(1.0);
    }
}

/// An entry whose guarded future has not finished: dropped as it is, the future was
/// cancelled or panicked, and the entry exits as an error.
pub(super) struct Unfinished<'a>(pub(super) Option<Entry<'a>>);

impl Unfinished<'_> {
    /// The future completed: the entry exits as it is.
    pub(super) fn finish(&mut self) {
        drop(self.0.take());
    }
}

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        if let Some(entry) = self.0.as_mut() {
            entry.set_error();
        }
    }
}

impl Entry<'_> {
    /// The exit of an entry with something pending: gives back the places concurrency rules
    /// reserved for it. `true` when the call never started (it was dropped while it
    /// queued): nothing else was counted for it.
    #[cold]
    #[inline(never)]
    fn exit_pending(&mut self) -> bool {
        let pending = std::mem::take(&mut self.pending);
        if pending & PARAM_HOLDS != 0 {
            drop(std::mem::take(&mut *self.params));
        }
        if let Some(node) = self.node.as_deref() {
            give_back(
                pending & RESERVED_BITS,
                node,
                self.origin_node.as_deref(),
                self.context_node.as_deref(),
            );
            if pending & QUEUED_PROBE != 0 {
                abort_unstarted_probe(node, self.start_ms);
            }
            if pending & QUEUED != 0 && self.breakers & crate::shadow::SHADOW_STATE != 0 {
                // The shadow rules counted it when they checked it: its place goes back.
                let now = node.shared.clock.now_ms();
                crate::shadow::exit(node, self.breakers, now, 0, u64::from(self.batch), false);
            }
        }
        pending & QUEUED != 0
    }

    /// A queued call's wait is over: count it now.
    #[cold]
    pub(super) fn start(&mut self) {
        let (queued, node) = (self.pending & QUEUED != 0, self.node.as_deref());
        let Some(node) = node.filter(|_| queued) else {
            return;
        };
        let borrowed = self.pending & QUEUED_BORROWED != 0;
        self.pending &= RESERVED_BITS | PARAM_HOLDS;
        count_pass(
            node,
            self.origin_node.as_deref(),
            self.context_node.as_deref(),
            self.inbound,
            node.shared.clock.now_ms(),
            u64::from(self.batch),
            borrowed,
            false,
        );
    }
}

/// `Entry::pending`: the call queues for its slot and is not counted yet.
const QUEUED: u8 = 0x80;
/// With [`QUEUED`]: the slot was borrowed from a coming bucket.
const QUEUED_BORROWED: u8 = 0x40;
/// With [`QUEUED`]: a breaker admitted the call as its half-open probe.
const QUEUED_PROBE: u8 = 0x20;
/// `Entry::pending`: the place the system `maxThread` check reserved on the inbound node
/// (beside the flow rules' `RESERVED_ON_*` bits).
pub(super) const RESERVED_ON_INBOUND: u8 = 0x08;
/// `Entry::pending`: thread-grade param rules hold places for the call (`Entry::params`).
pub(super) const PARAM_HOLDS: u8 = 0x10;
/// `Entry::pending`: every reservation bit.
const RESERVED_BITS: u8 = 0x0f;

/// A call that a breaker admitted as its half-open probe was dropped while it queued: the
/// probe never ran, so the breaker goes back to OPEN with its retry due, as for a probe a
/// later check blocked (instead of staying HALF_OPEN for a whole `timeWindow`).
#[cold]
fn abort_unstarted_probe(node: &ResourceNode, admitted_ms: u64) {
    let events = &node.shared.events;
    with_rules(&node.shared, |snapshot| {
        if let Some(list) = node.rules_in(snapshot).and_then(|r| r.breakers.as_deref()) {
            for breaker in list {
                breaker.abort_probe_admitted_at(admitted_ms, events);
            }
        }
    });
}

/// Gives back the places a call reserved: the flow rules' on its nodes, the system check's
/// on the inbound node.
pub(super) fn give_back(
    reserved: u8,
    node: &ResourceNode,
    origin: Option<&StatNode>,
    context: Option<&StatNode>,
) {
    release_reserved(reserved, &node.stat, origin, context);
    if reserved & RESERVED_ON_INBOUND != 0 {
        node.shared.inbound.release(1);
    }
}

pub(super) fn queued_bits(borrowed: bool, probe: bool) -> u8 {
    QUEUED | if borrowed { QUEUED_BORROWED } else { 0 } | if probe { QUEUED_PROBE } else { 0 }
}

/// [`Entry::breakers`]: the resource's enforced circuit breakers get the completion.
pub(super) const BREAKERS: u8 = 1;
/// [`Entry::breakers`]: the call passed every shadow rule, and the resource's shadow
/// breakers get its completion. The other shadow bits (`crate::shadow::SHADOW_STATE`): its
/// completion in the shadow rules' counterfactual statistics.
pub(super) use crate::shadow::SHADOW_BREAKERS;

/// A call that passed every check. Dropping it exits: it records the response time,
/// success or error, and releases its concurrency.
///
/// The lifetime is the borrow of the [`Sentinel`](crate::Sentinel) or
/// [`ResourceHandle`](crate::ResourceHandle) it came from; use
/// [`into_owned`](Self::into_owned) to keep an entry past it (for example in a spawned task).
#[must_use = "dropping an entry exits it at once"]
pub struct Entry<'a> {
    pub(super) node: Option<NodeRef<'a>>,
    pub(super) origin_node: Option<Arc<StatNode>>,
    pub(super) context_node: Option<Arc<StatNode>>,
    /// Which circuit breakers exit reports to ([`BREAKERS`], [`SHADOW_BREAKERS`]).
    pub(super) breakers: u8,
    /// The places thread-grade param rules hold for the call, given back when it exits.
    /// Dropped by hand when `pending` has [`PARAM_HOLDS`].
    pub(super) params: ManuallyDrop<Holds>,
    pub(super) start_ms: u64,
    pub(super) batch: u32,
    /// The rule table's version (low 32 bits) when the call was checked. A call that did not
    /// pass under breakers ([`BREAKERS`] unset) and exits under another table reports its
    /// completion to the breakers loaded since, as Sentinel's `DegradeSlot.exit` reports to
    /// the breakers of the resource at exit.
    pub(super) version: u32,
    pub(super) inbound: bool,
    pub(super) error: bool,
    /// What the exit must undo or skip, one byte so a plain exit tests it once: the nodes a
    /// concurrency rule reserved a place on (given back on exit), and whether the call still
    /// queues for its slot ([`QUEUED`]: not counted yet; dropped before
    /// [`start`](Entry::start), it never started).
    pub(super) pending: u8,
}

impl fmt::Debug for Entry<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry")
            .field("resource", &self.node.as_deref().map(|n| &n.name))
            .field("start_ms", &self.start_ms)
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl<'a> Entry<'a> {
    pub(super) fn untracked() -> Self {
        Self {
            node: None,
            origin_node: None,
            context_node: None,
            breakers: 0,
            params: ManuallyDrop::new(Holds::None),
            start_ms: 0,
            batch: 0,
            version: 0,
            inbound: false,
            error: false,
            pending: 0,
        }
    }

    /// Marks the call as failed (Sentinel's `Tracer.trace`). Error ratio and error count
    /// circuit breakers count it when the entry exits.
    pub fn set_error(&mut self) {
        self.error = true;
    }

    /// Records `error` on the entry; returns it for chaining with `?`.
    pub fn trace<E>(&mut self, error: E) -> E {
        self.set_error();
        error
    }

    /// The resource, unless the call passed untracked (past the resource cap).
    pub fn resource(&self) -> Option<&str> {
        self.node.as_deref().map(|n| &*n.name)
    }

    /// Exits now. Same as dropping.
    pub fn exit(self) {}

    /// The same entry, independent of the handle or engine borrow it came from.
    pub fn into_owned(mut self) -> Entry<'static> {
        let node = self.node.take().map(|n| NodeRef::Owned(n.into_shared()));
        Entry {
            node,
            origin_node: self.origin_node.take(),
            context_node: self.context_node.take(),
            breakers: self.breakers,
            params: ManuallyDrop::new(std::mem::take(&mut *self.params)),
            start_ms: self.start_ms,
            batch: self.batch,
            version: self.version,
            inbound: self.inbound,
            error: self.error,
            pending: std::mem::take(&mut self.pending),
        }
    }
}

impl Entry<'_> {
    /// The exit's work past the resource's own statistics: the origin's and context's
    /// statistics, the inbound node, the circuit breakers.
    #[inline(never)]
    fn exit_more(&self, node: &ResourceNode, now: u64, rt: u64, late: bool) {
        let shared = &*node.shared;
        let batch = u64::from(self.batch);
        for n in [&self.origin_node, &self.context_node]
            .into_iter()
            .flatten()
        {
            n.on_complete(now, rt, batch, self.error);
        }
        if self.inbound {
            shared.inbound.on_complete(now, rt, batch, self.error);
        }
        if self.breakers & crate::shadow::SHADOW_STATE != 0 {
            crate::shadow::exit(node, self.breakers, now, rt, batch, self.error);
        }
        if late || self.breakers & (BREAKERS | SHADOW_BREAKERS) != 0 {
            // As Sentinel's DegradeSlot does on exit: the resource's current breakers get the
            // completion, those of a call entered before they were loaded (`late`) too. A
            // reload keeps equal rules' breakers, so the probe's breaker is the same object
            // unless its rule changed.
            let (error, events) = (self.error, &shared.events);
            let which = self.breakers | if late { BREAKERS } else { 0 };
            with_rules(
                &node.shared,
                #[inline(always)]
                |snapshot| {
                    let current = node.rules_in(snapshot);
                    if let Some(list) = current
                        .and_then(|r| r.breakers.as_deref())
                        .filter(|_| which & BREAKERS != 0)
                    {
                        for breaker in list {
                            breaker.on_complete(now, rt, error, events);
                        }
                    }
                    // Only a call every shadow rule would have let through reaches the
                    // shadow breakers' completions (the others would have been blocked).
                    if let Some(shadow) = snapshot
                        .shadow
                        .as_deref()
                        .filter(|_| which & SHADOW_BREAKERS != 0)
                    {
                        crate::shadow::complete(shadow, node, now, rt, error, events);
                    }
                },
            );
        }
    }
}

impl Drop for Entry<'_> {
    /// Small enough to inline where the entry is dropped: what a call with only resource
    /// statistics needs; the rest (`exit_more`) out of line.
    #[inline]
    fn drop(&mut self) {
        if self.pending != 0 && self.exit_pending() {
            // A queued call that never started was never counted.
            return;
        }
        // The node itself is released with the entry's fields, after this.
        let Some(node_ref) = &self.node else {
            return;
        };
        // A panic in the guarded code is a failed call, not a success.
        if std::thread::panicking() {
            self.error = true;
        }
        let node: &ResourceNode = node_ref;
        let now = node.shared.clock.now_ms();
        let rt = now.saturating_sub(self.start_ms);
        let batch = u64::from(self.batch);
        node.stat.on_complete(now, rt, batch, self.error);
        // Rules reloaded since the call was checked, which may have brought breakers.
        let late = self.breakers & BREAKERS == 0
            && node.shared.rules_version.load(Ordering::Acquire) as u32 != self.version;
        if self.origin_node.is_some()
            || self.context_node.is_some()
            || self.inbound
            || self.breakers != 0
            || late
        {
            self.exit_more(node, now, rt, late);
        }
        #[cfg(feature = "metrics")]
        {
            if self.error {
                node.metrics.error.increment(batch);
            }
            node.metrics.concurrency.decrement(1.0);
            node.metrics.rt.record(rt as f64 / 1000.0);
        }
    }
}
