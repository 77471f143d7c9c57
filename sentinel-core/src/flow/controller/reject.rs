//! The default controller: reject past the threshold.

use super::Decision;
use crate::flow::rule::FlowGrade;
use crate::stat::StatNode;

/// Sentinel's `DefaultController`: pass while the current QPS (or concurrency) plus the
/// request stays within `count`.
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
    pub(crate) fn check(&self, node: &StatNode, acquire: u32, now_ms: u64) -> Decision {
        let used = match self.grade {
            FlowGrade::Qps => node.pass_qps(now_ms),
            FlowGrade::Thread => node.concurrency() as f64,
        };
        if used + acquire as f64 > self.count {
            Decision::Block
        } else {
            Decision::Pass
        }
    }
}
