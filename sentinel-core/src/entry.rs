//! Guarding a call: the entry builder, the RAII [`Entry`], and pre-resolved handles.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::block::BlockError;
use crate::circuit_breaker::{Admission, CircuitBreaker};
use crate::engine::{with_rules, ResourceNode, Sentinel};
use crate::flow::{plain_qps_passes, release_reserved, CheckContext};
use crate::stat::StatNode;

/// Whether a call comes into this service or goes out of it. System rules apply to inbound
/// calls only.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum EntryType {
    /// A call this service serves.
    Inbound,
    /// A call this service makes (the default).
    #[default]
    Outbound,
}

impl Sentinel {
    /// Starts guarding a call to `resource`.
    pub fn entry<'a>(&'a self, resource: &'a str) -> EntryBuilder<'a> {
        EntryBuilder::new(self, resource)
    }

    /// Resolves a resource once, so a hot loop skips the name lookup.
    pub fn resource(&self, resource: &str) -> ResourceHandle {
        ResourceHandle::new(self.clone(), self.node(resource))
    }
}

#[derive(Debug, Clone, Copy)]
enum Target<'a> {
    Name(&'a str),
    Handle(&'a ResourceHandle),
}

/// Describes one guarded call. Obtained from [`Sentinel::entry`] or
/// [`ResourceHandle::entry`]; finished by [`enter`](Self::enter) or one of the async helpers.
#[derive(Debug, Clone, Copy)]
#[must_use = "an entry builder does nothing until `enter` is called"]
pub struct EntryBuilder<'a> {
    sentinel: &'a Sentinel,
    target: Target<'a>,
    origin: Option<&'a str>,
    context: Option<&'a str>,
    entry_type: EntryType,
    batch: u32,
    prioritized: bool,
}

impl<'a> EntryBuilder<'a> {
    #[inline]
    pub(crate) fn new(sentinel: &'a Sentinel, resource: &'a str) -> Self {
        Self {
            sentinel,
            target: Target::Name(resource),
            origin: None,
            context: None,
            entry_type: EntryType::Outbound,
            batch: 1,
            prioritized: false,
        }
    }

    /// The caller's application name (`limitApp` and authority rules match it).
    pub fn origin(mut self, origin: &'a str) -> Self {
        self.origin = (!origin.is_empty()).then_some(origin);
        self
    }

    /// The entrance context name, for chain-strategy flow rules.
    pub fn context(mut self, context: &'a str) -> Self {
        self.context = (!context.is_empty()).then_some(context);
        self
    }

    /// Marks the call inbound (system rules apply).
    pub fn inbound(mut self) -> Self {
        self.entry_type = EntryType::Inbound;
        self
    }

    /// Marks the call outbound (the default).
    pub fn outbound(mut self) -> Self {
        self.entry_type = EntryType::Outbound;
        self
    }

    /// Sets the entry type.
    pub fn entry_type(mut self, entry_type: EntryType) -> Self {
        self.entry_type = entry_type;
        self
    }

    /// Marks the call prioritized (Sentinel's `entryWithPriority`): past a QPS limit with the
    /// reject behaviour, it may borrow a slot of a coming 500 ms bucket and wait for it (at
    /// most 500 ms) instead of being blocked. The borrowed pass counts in that bucket, and as
    /// an occupied pass now.
    pub fn prioritized(mut self) -> Self {
        self.prioritized = true;
        self
    }

    /// How many permits the call takes (default 1). A batch of 0 counts as 1: every call
    /// takes at least one permit.
    pub fn batch(mut self, count: u32) -> Self {
        self.batch = count.max(1);
        self
    }

    /// Checks every rule and, if none blocks, returns the guard. A rate-limiter rule may make
    /// this call sleep the calling thread while it queues; use
    /// [`enter_async`](Self::enter_async) in async code.
    ///
    /// A queued call is counted (as passed and in flight) when its wait ends, as in Sentinel.
    pub fn enter(self) -> Result<Entry<'a>, BlockError> {
        let mut wait = Duration::ZERO;
        // The result is returned as it is, so it is built in place.
        let mut result = self.check(&mut wait);
        if !wait.is_zero() {
            if !self.sentinel.clock().wait_virtually(wait) {
                std::thread::sleep(wait);
            }
            if let Ok(entry) = &mut result {
                entry.start();
            }
        }
        result
    }

    /// Like [`enter`](Self::enter), but queues with `tokio::time::sleep`. If the future is
    /// dropped while it queues, the call never started: nothing is counted for it (the rate
    /// limiter's slot stays taken, as a slept-through slot would).
    pub async fn enter_async(self) -> Result<Entry<'a>, BlockError> {
        let mut wait = Duration::ZERO;
        let mut result = self.check(&mut wait);
        if !wait.is_zero() {
            if !self.sentinel.clock().wait_virtually(wait) {
                tokio::time::sleep(wait).await;
            }
            if let Ok(entry) = &mut result {
                entry.start();
            }
        }
        result
    }

    /// Runs `future` under the guard: the entry exits when the future completes.
    ///
    /// A future dropped before it completes (a `tokio::time::timeout` around this call, a
    /// client gone away) exits the entry as an **error**, as does a panic in it: neither is a
    /// success a circuit breaker should count.
    pub async fn run<F: Future>(self, future: F) -> Result<F::Output, BlockError> {
        let entry = self.enter_async().await?;
        let mut guard = Unfinished(Some(entry));
        let output = future.await;
        guard.finish();
        Ok(output)
    }

    /// Runs a fallible `future` under the guard and records an `Err` as an error, which error
    /// ratio and error count circuit breakers count. A future dropped before it completes
    /// counts as an error too (see [`run`](Self::run)).
    pub async fn run_result<T, E, F>(self, future: F) -> Result<Result<T, E>, BlockError>
    where
        F: Future<Output = Result<T, E>>,
    {
        let entry = self.enter_async().await?;
        let mut guard = Unfinished(Some(entry));
        let output = future.await;
        if output.is_err() {
            if let Some(entry) = guard.0.as_mut() {
                entry.set_error();
            }
        }
        guard.finish();
        Ok(output)
    }

    #[inline(always)]
    /// Checks the rules and counts the call; `wait` receives how long the call must queue.
    fn check(&self, wait_out: &mut Duration) -> Result<Entry<'a>, BlockError> {
        // A handle lends its node; a name lookup owns a reference to it.
        let node_ref = match self.target {
            Target::Name(name) => self.sentinel.node(name).map(NodeRef::Owned),
            Target::Handle(handle) => handle.node.as_ref().map(NodeRef::Borrowed),
        };
        let Some(node_ref) = node_ref else {
            return Ok(Entry::untracked());
        };
        let node: &ResourceNode = &node_ref;
        let shared = &*node.shared;
        let now = shared.clock.now_ms();
        let origin_node = self.origin.and_then(|o| node.origin_node(o));
        let context_node = self.context.and_then(|c| node.context_node(c));
        let inbound = self.entry_type == EntryType::Inbound;
        let batch = u64::from(self.batch);

        // The closure reports through `blocked` and returns a register-sized verdict: moving
        // a large return value out of it costs more than the checks themselves.
        let mut blocked: Option<BlockError> = None;
        let verdict = with_rules(
            &node.shared,
            #[inline(always)]
            |snapshot| {
                let mut verdict = Verdict::default();
                let rules = node.rules_in(snapshot);
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
                            if let Err(b) =
                                thresholds.check(&shared.inbound, now, self.batch, || {
                                    shared.system_status()
                                })
                            {
                                break 'checks BlockError::System {
                                    resource: node.name.clone(),
                                    metric: b.metric,
                                    threshold: b.threshold,
                                    value: b.value,
                                };
                            }
                        }
                    }
                    let Some(rules) = rules else {
                        return verdict;
                    };
                    // The common single plain QPS rule, without reading the flow table.
                    let plain_pass = plain_qps_passes(
                        rules.plain_qps,
                        &node.stat,
                        now,
                        self.batch,
                        self.prioritized,
                    );
                    if let Some(flow) = rules.flow.as_ref().filter(|_| !plain_pass) {
                        let cx = CheckContext {
                            now_ms: now,
                            clock: shared.clock.as_dyn(),
                            stat: &node.stat,
                            origin: self.origin,
                            origin_node: origin_node.as_deref(),
                            context: self.context,
                            context_node: context_node.as_deref(),
                            batch: self.batch,
                            prioritized: self.prioritized,
                        };
                        match flow.check(&cx) {
                            Ok(pass) => {
                                verdict.wait_ns = pass.wait_ns;
                                verdict.borrowed = pass.borrowed;
                                verdict.reserved = pass.reserved;
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
                            if let Some(error) = check_breakers(list, now, node) {
                                break 'checks error;
                            }
                        }
                        verdict.breakers = true;
                    }
                    return verdict;
                };
                blocked = Some(error);
                verdict
            },
        );
        let Verdict {
            wait_ns,
            borrowed,
            breakers,
            reserved,
        } = verdict;
        if let Some(error) = blocked {
            if reserved != 0 {
                // The flow rules passed and reserved; a later check blocked.
                release_reserved(
                    reserved,
                    self.batch,
                    &node.stat,
                    origin_node.as_deref(),
                    context_node.as_deref(),
                );
            }
            record_block(
                node,
                origin_node.as_deref(),
                context_node.as_deref(),
                inbound,
                now,
                batch,
            );
            return Err(error);
        }
        if wait_ns != 0 {
            // A blocked call never queues. A queued one is counted when its wait ends.
            *wait_out = Duration::from_nanos(wait_ns);
        } else {
            count_pass(
                node,
                origin_node.as_deref(),
                context_node.as_deref(),
                inbound,
                now,
                batch,
                borrowed,
            );
        }
        Ok(Entry {
            node: Some(node_ref),
            origin_node,
            context_node,
            breakers,
            start_ms: now,
            batch: self.batch,
            inbound,
            error: false,
            pending: reserved
                | if wait_ns == 0 {
                    0
                } else {
                    queued_bits(borrowed)
                },
        })
    }
}

/// Counts a call that passed on its nodes: as passed (or, on a borrowed slot, only as in
/// flight) and in flight.
#[inline(always)]
fn count_pass(
    node: &ResourceNode,
    origin_node: Option<&StatNode>,
    context_node: Option<&StatNode>,
    inbound: bool,
    now: u64,
    batch: u64,
    borrowed: bool,
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
        node.stat.on_pass(now, batch);
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
    node.metrics.pass.increment(batch);
}

/// An entry whose guarded future has not finished: dropped as it is, the future was
/// cancelled or panicked, and the entry exits as an error.
struct Unfinished<'a>(Option<Entry<'a>>);

impl Unfinished<'_> {
    /// The future completed: the entry exits as it is.
    fn finish(&mut self) {
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
        if let Some(node) = self.node.as_deref() {
            release_reserved(
                pending & RESERVED_BITS,
                self.batch,
                &node.stat,
                self.origin_node.as_deref(),
                self.context_node.as_deref(),
            );
        }
        pending & QUEUED != 0
    }

    /// A queued call's wait is over: count it now.
    #[cold]
    fn start(&mut self) {
        let (queued, node) = (self.pending & QUEUED != 0, self.node.as_deref());
        let Some(node) = node.filter(|_| queued) else {
            return;
        };
        let borrowed = self.pending & QUEUED_BORROWED != 0;
        self.pending &= RESERVED_BITS;
        count_pass(
            node,
            self.origin_node.as_deref(),
            self.context_node.as_deref(),
            self.inbound,
            node.shared.clock.now_ms(),
            u64::from(self.batch),
            borrowed,
        );
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
    breakers: bool,
    /// Nodes a concurrency rule reserved a place on (see `flow::release_reserved`).
    reserved: u8,
}

/// `Entry::pending`: the call queues for its slot and is not counted yet.
const QUEUED: u8 = 0x80;
/// With [`QUEUED`]: the slot was borrowed from a coming bucket.
const QUEUED_BORROWED: u8 = 0x40;
/// `Entry::pending`: the `RESERVED_ON_*` bits of the flow rules.
const RESERVED_BITS: u8 = 0x0f;

fn queued_bits(borrowed: bool) -> u8 {
    if borrowed {
        QUEUED | QUEUED_BORROWED
    } else {
        QUEUED
    }
}

/// Checks each breaker in turn. When one blocks, the breakers before it that admitted this
/// call as their half-open probe go back to OPEN: the probe never ran.
#[inline(always)]
fn check_breakers(
    list: &[Arc<CircuitBreaker>],
    now: u64,
    node: &ResourceNode,
) -> Option<BlockError> {
    let events = &node.shared.events;
    for (i, breaker) in list.iter().enumerate() {
        let admission = breaker.try_pass(now, events);
        if admission != Admission::Pass {
            return finish_breakers(list, i, admission, now, node);
        }
    }
    None
}

/// The rest of [`check_breakers`] from `first`, the first breaker that did not simply pass
/// (it decided `admission`).
#[cold]
#[inline(never)]
fn finish_breakers(
    list: &[Arc<CircuitBreaker>],
    first: usize,
    admission: Admission,
    now: u64,
    node: &ResourceNode,
) -> Option<BlockError> {
    let events = &node.shared.events;
    // Probes admitted from `first` on, one bit each (the breakers before `first` passed).
    let mut probes: u64 = 0;
    let bit = |i: usize| 1u64.checked_shl((i - first) as u32).unwrap_or(0);
    for (i, breaker) in list.iter().enumerate().skip(first) {
        let decided = if i == first {
            admission
        } else {
            breaker.try_pass(now, events)
        };
        match decided {
            Admission::Pass => {}
            Admission::Probe => probes |= bit(i),
            Admission::Block => {
                for (j, earlier) in list.iter().enumerate().take(i).skip(first) {
                    if probes & bit(j) != 0 {
                        earlier.abort_probe(now, events);
                    }
                }
                return Some(BlockError::CircuitBreaker {
                    resource: node.name.clone(),
                    rule: breaker.rule.clone(),
                });
            }
        }
    }
    None
}

fn record_block(
    node: &ResourceNode,
    origin: Option<&StatNode>,
    context: Option<&StatNode>,
    inbound: bool,
    now: u64,
    batch: u64,
) {
    node.stat.on_block(now, batch);
    if let Some(n) = origin {
        n.on_block(now, batch);
    }
    if let Some(n) = context {
        n.on_block(now, batch);
    }
    if inbound {
        node.shared.inbound.on_block(now, batch);
    }
    #[cfg(feature = "metrics")]
    node.metrics.block.increment(batch);
}

/// The resource node an entry reports to: lent by a [`ResourceHandle`] (no reference-count
/// traffic on the hot path) or owned after a name lookup.
enum NodeRef<'a> {
    Borrowed(&'a Arc<ResourceNode>),
    Owned(Arc<ResourceNode>),
}

impl std::ops::Deref for NodeRef<'_> {
    type Target = ResourceNode;

    #[inline]
    fn deref(&self) -> &ResourceNode {
        match self {
            NodeRef::Borrowed(node) => node,
            NodeRef::Owned(node) => node,
        }
    }
}

/// A call that passed every check. Dropping it exits: it records the response time,
/// success or error, and releases its concurrency.
///
/// The lifetime is the borrow of the [`Sentinel`] or [`ResourceHandle`] it came from; use
/// [`into_owned`](Self::into_owned) to keep an entry past it (for example in a spawned task).
#[must_use = "dropping an entry exits it at once"]
pub struct Entry<'a> {
    node: Option<NodeRef<'a>>,
    origin_node: Option<Arc<StatNode>>,
    context_node: Option<Arc<StatNode>>,
    /// The resource had circuit breakers when the call entered: exit reports to them.
    breakers: bool,
    start_ms: u64,
    batch: u32,
    inbound: bool,
    error: bool,
    /// What the exit must undo or skip, one byte so a plain exit tests it once: the nodes a
    /// concurrency rule reserved a place on (given back on exit), and whether the call still
    /// queues for its slot ([`QUEUED`]: not counted yet; dropped before
    /// [`start`](Entry::start), it never started).
    pending: u8,
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
    fn untracked() -> Self {
        Self {
            node: None,
            origin_node: None,
            context_node: None,
            breakers: false,
            start_ms: 0,
            batch: 0,
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
        let node = self.node.take().map(|n| match n {
            NodeRef::Borrowed(node) => NodeRef::Owned(node.clone()),
            NodeRef::Owned(node) => NodeRef::Owned(node),
        });
        Entry {
            node,
            origin_node: self.origin_node.take(),
            context_node: self.context_node.take(),
            breakers: self.breakers,
            start_ms: self.start_ms,
            batch: self.batch,
            inbound: self.inbound,
            error: self.error,
            pending: std::mem::take(&mut self.pending),
        }
    }
}

impl Drop for Entry<'_> {
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
        let shared = &*node.shared;
        let now = shared.clock.now_ms();
        let rt = now.saturating_sub(self.start_ms);
        let batch = u64::from(self.batch);
        node.stat.on_complete(now, rt, batch, self.error);
        if let Some(n) = &self.origin_node {
            n.on_complete(now, rt, batch, self.error);
        }
        if let Some(n) = &self.context_node {
            n.on_complete(now, rt, batch, self.error);
        }
        if self.inbound {
            shared.inbound.on_complete(now, rt, batch, self.error);
        }
        if self.breakers {
            // As Sentinel's DegradeSlot does on exit: the resource's current breakers get the
            // completion. A reload keeps equal rules' breakers, so the probe's breaker is the
            // same object unless its rule changed.
            let (error, events) = (self.error, &shared.events);
            with_rules(
                &node.shared,
                #[inline(always)]
                |snapshot| {
                    let current = node.rules_in(snapshot);
                    if let Some(list) = current.and_then(|r| r.breakers.as_deref()) {
                        for breaker in list {
                            breaker.on_complete(now, rt, error, events);
                        }
                    }
                },
            );
        }
        #[cfg(feature = "metrics")]
        if self.error {
            node.metrics.error.increment(batch);
        }
    }
}

/// A pre-resolved resource: entries through it skip the name lookup.
///
/// ```
/// let sentinel = sentinel_core::Sentinel::new();
/// let handle = sentinel.resource("db.query");
/// for _ in 0..3 {
///     let _entry = handle.entry().enter().expect("no rules, never blocked");
/// }
/// assert_eq!(sentinel.resource_stats("db.query").unwrap().pass_qps, 3.0);
/// ```
#[derive(Clone)]
pub struct ResourceHandle {
    sentinel: Sentinel,
    node: Option<Arc<ResourceNode>>,
}

impl fmt::Debug for ResourceHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResourceHandle")
            .field("resource", &self.node.as_ref().map(|n| &n.name))
            .finish_non_exhaustive()
    }
}

impl ResourceHandle {
    pub(crate) fn new(sentinel: Sentinel, node: Option<Arc<ResourceNode>>) -> Self {
        Self { sentinel, node }
    }

    /// Starts guarding a call to this resource.
    #[inline]
    pub fn entry(&self) -> EntryBuilder<'_> {
        EntryBuilder {
            target: Target::Handle(self),
            ..EntryBuilder::new(&self.sentinel, "")
        }
    }
}

#[cfg(test)]
mod tests;
