//! Driver tests over the in-memory backend: `pipeline` (a payload's way through the
//! driver), `lifecycle` (starting, stopping, the snapshot), `backoff` (reconnecting),
//! `confirm` (a deletion right after a reconnect).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::testkit::{
    self, applied_seq, flow_payload, wait_status, wait_until, CheckOutcome, MemoryHarness,
};
use super::*;
use crate::flow::FlowRule;
use crate::{RuleFamily, Sentinel, SentinelEvent, Validation};

fn flow_count(sentinel: &Sentinel) -> usize {
    sentinel.flow_rules().rules().len()
}

mod backoff;
mod confirm;
mod lifecycle;
mod pipeline;
