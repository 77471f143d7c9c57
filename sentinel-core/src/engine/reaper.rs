//! Drops large replaced rule snapshots off the writer's thread.
//!
//! Dropping the snapshot a reload replaces frees every compiled rule, controller and map of
//! the old version: for 10 000 flow rules that is about 40 % of the reload's instructions,
//! spent after the new version is already published. A snapshot of at least [`MIN_RULES`]
//! rules that nothing else holds is handed to one process-wide thread, `sentinel-reaper`,
//! which drops it as soon as it receives it (it holds nothing longer than that drop takes).
//! The queue holds at most [`QUEUE`] snapshots; when it is full, or the thread cannot be
//! started, the snapshot is dropped in place, as a smaller one always is. So the memory of a
//! replaced version is freed at most a few drops later than before, and no more than
//! [`QUEUE`] + 1 old versions ever wait; a small reload (tests, most services) is not
//! affected at all.
//!
//! The thread is started on the first large reload and then parks on its queue for the life
//! of the process (no wake-up, no CPU while idle).

use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::{Arc, OnceLock};

use super::snapshot::RuleSnapshot;
use crate::rules::RuleFamily;

/// Below this many active rules a replaced snapshot is dropped in place: its drop costs
/// less than the hand-off is worth.
const MIN_RULES: usize = 1_000;

/// How many replaced snapshots may wait for the reaper.
const QUEUE: usize = 2;

/// The reaper's queue, `None` when its thread could not be started.
static REAPER: OnceLock<Option<SyncSender<Arc<RuleSnapshot>>>> = OnceLock::new();

/// Lets go of `old`, a snapshot the writer just replaced: a large one that nothing else
/// holds goes to the reaper, anything else is dropped here.
pub(crate) fn retire(old: Arc<RuleSnapshot>) {
    if Arc::strong_count(&old) > 1 || rules_in(&old) < MIN_RULES {
        return;
    }
    let Some(queue) = REAPER.get_or_init(start) else {
        return;
    };
    match queue.try_send(old) {
        Ok(()) => {}
        // Full, or the thread is gone: dropped here, as before.
        Err(TrySendError::Full(old) | TrySendError::Disconnected(old)) => drop(old),
    }
}

/// How many active rules `snapshot` has, over every enforced family.
fn rules_in(snapshot: &RuleSnapshot) -> usize {
    RuleFamily::ALL
        .iter()
        .map(|family| snapshot.tables.count(*family))
        .sum()
}

/// Starts the reaper thread; `None` when it cannot be started.
fn start() -> Option<SyncSender<Arc<RuleSnapshot>>> {
    let (queue, received) = sync_channel::<Arc<RuleSnapshot>>(QUEUE);
    std::thread::Builder::new()
        .name("sentinel-reaper".into())
        .spawn(move || {
            for snapshot in received {
                drop(snapshot);
            }
        })
        .ok()?;
    Some(queue)
}

#[cfg(test)]
mod tests {
    use std::sync::Weak;

    use super::*;
    use crate::flow::FlowRule;
    use crate::Sentinel;

    #[test]
    fn a_large_replaced_snapshot_is_freed_by_the_reaper_and_a_small_one_in_place() {
        let s = Sentinel::new();
        let many: Vec<FlowRule> = (0..MIN_RULES)
            .map(|i| FlowRule::qps(format!("r{i}"), 10.0))
            .collect();
        s.flow_rules().load_rules(many).expect("valid");
        let large: Weak<RuleSnapshot> = Arc::downgrade(&s.inner.shared.rules.load_full());
        s.flow_rules()
            .load_rules(vec![FlowRule::qps("r", 1.0)])
            .expect("valid");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while large.upgrade().is_some() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(large.upgrade().is_none(), "the reaper dropped it");

        let small: Weak<RuleSnapshot> = Arc::downgrade(&s.inner.shared.rules.load_full());
        s.flow_rules().load_rules(vec![]).expect("valid");
        assert!(
            small.upgrade().is_none(),
            "dropped by the writer, before it returned"
        );
    }
}
