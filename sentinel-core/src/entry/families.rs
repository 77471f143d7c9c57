//! The checks of the families a call meets past the fast path, each with the `BlockError`
//! it builds: param-flow (out of line) and the circuit breakers (a half-open probe that a
//! later breaker blocks goes back to OPEN).

use std::sync::Arc;

use crate::block::BlockError;
use crate::circuit_breaker::{Admission, CircuitBreaker};
use crate::engine::ResourceNode;
use crate::param_flow::{CallArgs, Holds, Now, ResourceParamRules};

/// The param-flow check, out of line: it keeps the common paths' code small enough to inline.
/// `Ok` gives the wait in nanoseconds.
#[inline(never)]
pub(super) fn check_params(
    rules: &ResourceParamRules,
    args: &CallArgs<'_>,
    now: u64,
    batch: u32,
    holds: &mut Holds,
    node: &ResourceNode,
) -> Result<u64, BlockError> {
    match rules.check(
        args,
        &Now::new(now, node.shared.clock.as_dyn()),
        batch,
        holds,
    ) {
        Ok(wait_ns) => Ok(wait_ns),
        Err(hot) => Err(BlockError::ParamFlow {
            resource: node.name.clone(),
            rule: hot.rule.clone(),
            value: node
                .shared
                .param_values_in_errors
                .then(|| hot.value.to_string()),
        }),
    }
}

/// Checks each breaker in turn. When one blocks, the breakers before it that admitted this
/// call as their half-open probe go back to OPEN: the probe never ran. `Ok(true)` when a
/// breaker admitted the call as its probe.
#[inline(always)]
pub(super) fn check_breakers(
    list: &[Arc<CircuitBreaker>],
    now: u64,
    node: &ResourceNode,
) -> Result<bool, BlockError> {
    let events = &node.shared.events;
    for (i, breaker) in list.iter().enumerate() {
        let admission = breaker.try_pass(now, events);
        if admission != Admission::Pass {
            return finish_breakers(list, i, admission, now, node);
        }
    }
    Ok(false)
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
) -> Result<bool, BlockError> {
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
                return Err(BlockError::CircuitBreaker {
                    resource: node.name.clone(),
                    rule: breaker.rule.clone(),
                    retry_in: breaker.retry_in(now),
                });
            }
        }
    }
    Ok(probes != 0)
}
