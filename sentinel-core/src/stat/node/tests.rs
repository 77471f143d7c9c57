//! `StatNode`'s own tests: borrowed passes, rates, the minute window, memory.

use super::*;

#[test]
fn a_later_borrow_keeps_earlier_borrowed_passes_in_the_window() {
    let node = StatNode::new();
    // Ten passes borrowed from the round [10 500, 11 000).
    node.borrow_future(10_100, 10_500, 10);
    assert_eq!(node.pass_qps(10_600), 10.0);
    // Half a second on, a borrow from [11 500, 12 000): that round must not take the
    // slot of [10 500, 11 000), which is still in the one-second window.
    node.borrow_future(11_100, 11_500, 1);
    assert_eq!(node.pass_qps(11_100), 10.0);
    assert_eq!(node.pass_qps(11_600), 1.0);
}

#[test]
fn pass_complete_and_rates() {
    let node = StatNode::new();
    node.on_pass(10_000, 1);
    node.on_pass(10_100, 2);
    assert_eq!(node.concurrency(), 2);
    assert_eq!(node.pass_qps(10_200), 3.0);
    node.on_complete(10_300, 40, 1, false);
    node.on_complete(10_400, 20, 2, true);
    assert_eq!(node.concurrency(), 0);
    assert_eq!(node.success_qps(10_400), 3.0);
    assert_eq!(node.error_qps(10_400), 2.0);
    assert_eq!(node.avg_rt(10_400), 20.0);
    assert_eq!(node.min_rt(10_400), Some(20));
    // The previous whole second.
    assert_eq!(node.previous_pass_qps(11_050), 3.0);
    assert_eq!(node.pass_qps(11_050), 0.0);
    let snap = node.snapshot(11_050);
    assert_eq!(snap.pass_minute, 3);
}

#[test]
fn minute_totals_roll_up_finished_rounds() {
    let node = StatNode::new();
    let mut now = 100_000;
    for _ in 0..40 {
        node.on_pass(now, 1);
        node.on_block(now, 2);
        now += 500;
    }
    // 40 rounds of 500 ms: 20 s of history, most of it rolled up.
    let (pass, block, _, _) = node.minute_totals(now - 1);
    assert_eq!((pass, block), (40, 80));
    // A minute later the early rounds have slid out; the last 30 s remain.
    now += 40_000;
    node.on_pass(now, 1);
    let (pass, _, _, _) = node.minute_totals(now);
    // Rounds from 101 s to 119.5 s (38) plus the new pass.
    assert_eq!(pass, 39);
}

#[test]
fn memory_is_allocated_as_it_is_needed() {
    let node = StatNode::new();
    assert_eq!(
        node.heap_bytes(),
        0,
        "a node nobody entered holds no window"
    );
    node.on_pass(100_000, 1);
    assert_eq!(node.heap_bytes(), 0, "the first thread's stripe is inline");
    node.on_complete(100_001, 1, 1, false);
    assert_eq!(node.heap_bytes(), 0, "the same thread, the same stripe");
    // Four rounds later the first bucket is reused: its round rolls up into the minute.
    node.on_pass(102_000, 1);
    let rolled = node.heap_bytes();
    assert_eq!(rolled, MinuteWindow::HEAP_BYTES);
    assert_eq!(MinuteWindow::HEAP_BYTES, 60 * 32);
    std::thread::scope(|s| {
        s.spawn(|| node.on_pass(102_001, 1));
    });
    let table = std::mem::size_of::<Others>() + std::mem::size_of::<HotStripe>();
    assert!(table <= 384, "{table}");
    assert_eq!(
        node.heap_bytes(),
        rolled + table,
        "another thread: the stripe table and one stripe"
    );
    assert_eq!(node.concurrency(), 2);
}
