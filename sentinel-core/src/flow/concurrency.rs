//! Concurrency (thread-grade) flow rules: the exact check, by a place each call reserves on
//! the node it is counted on, and the giving back of those places.

use super::controller::Decision;
use crate::stat::StatNode;

/// The bit of the resource's own node in a call's concurrency reservations.
pub(crate) const RESERVED_ON_RESOURCE: u8 = 1;
/// The bit of the origin's node.
pub(crate) const RESERVED_ON_ORIGIN: u8 = 2;
/// The bit of the context's node.
pub(crate) const RESERVED_ON_CONTEXT: u8 = 4;

/// A concurrency (thread-grade) rule on `node`, exactly, with Sentinel's counting: a call
/// passes while the calls in flight plus its batch stay within `count`
/// (`curThreadNum + acquireCount > count` blocks), and takes one place whatever its batch
/// (count 10, batch 5: six calls inside). The call reserves its place on the node (once per
/// node, whatever the number of rules) before it compares, so racing calls each see the
/// others and the limit is exact. Calls already in flight without a reservation (entered
/// before the rule was loaded) count through the node's concurrency, as in Sentinel. On the
/// related resource of a relate rule nothing is reserved, and the check is Sentinel's
/// check-then-count.
#[cold]
pub(super) fn check_concurrency(
    node: &StatNode,
    bit: u8,
    count: f64,
    acquire: u32,
    reserved: &mut u8,
) -> Decision {
    let acquire = f64::from(acquire);
    if node.concurrency() as f64 + acquire > count {
        return Decision::Block;
    }
    if bit == 0 {
        return Decision::Pass;
    }
    let held = if *reserved & bit == 0 {
        *reserved |= bit;
        node.reserve(1)
    } else {
        node.reserved()
    };
    // The places of the other calls, and this call's batch.
    if held.saturating_sub(1) as f64 + acquire > count {
        Decision::Block
    } else {
        Decision::Pass
    }
}

/// Gives back the place a call reserved on each of its nodes (`reserved` holds
/// `RESERVED_ON_*` bits).
pub(crate) fn release_reserved(
    reserved: u8,
    resource: &StatNode,
    origin: Option<&StatNode>,
    context: Option<&StatNode>,
) {
    if reserved & RESERVED_ON_RESOURCE != 0 {
        resource.release(1);
    }
    if let Some(origin) = origin.filter(|_| reserved & RESERVED_ON_ORIGIN != 0) {
        origin.release(1);
    }
    if let Some(context) = context.filter(|_| reserved & RESERVED_ON_CONTEXT != 0) {
        context.release(1);
    }
}
