//! The default controller: reject past the threshold.

use std::time::Duration;

use super::Decision;
use crate::flow::rule::FlowGrade;
use crate::stat::StatNode;

/// Sentinel's `DefaultController`: pass while the current QPS (or concurrency) plus the
/// request stays within `count`. Past it, a prioritized QPS call may borrow a slot of a
/// coming bucket and wait for it (up to 500 ms) instead of being rejected.
#[derive(Debug)]
pub(crate) struct Reject {
    count: f64,
    grade: FlowGrade,
}

impl Reject {
    pub(crate) fn new(count: f64, grade: FlowGrade) -> Self {
        Self { count, grade }
    }

    #[inline]
    pub(crate) fn check(
        &self,
        node: &StatNode,
        acquire: u32,
        now_ms: u64,
        prioritized: bool,
    ) -> Decision {
        let used = match self.grade {
            FlowGrade::Qps => node.pass_qps(now_ms),
            FlowGrade::Thread => node.concurrency() as f64,
        };
        if used + acquire as f64 <= self.count {
            return Decision::Pass;
        }
        if prioritized && self.grade == FlowGrade::Qps {
            return self.borrow_future(node, acquire, now_ms);
        }
        Decision::Block
    }

    /// Past the threshold, a prioritized QPS call may borrow a slot of a coming bucket.
    #[cold]
    #[inline(never)]
    fn borrow_future(&self, node: &StatNode, acquire: u32, now_ms: u64) -> Decision {
        match node.try_occupy_next(now_ms, acquire, self.count) {
            Some(wait) => {
                node.borrow_future(now_ms, now_ms + wait, u64::from(acquire));
                Decision::Borrowed(Duration::from_millis(wait))
            }
            None => Decision::Block,
        }
    }
}
