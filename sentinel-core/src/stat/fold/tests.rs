use super::*;
use crate::test_support::on_owned_stripe;

/// A node with two passes and a stripe table (as when a second thread writes).
fn shared_node(now: u64) -> StatNode {
    let node = StatNode::new();
    node.on_pass(now, 2);
    node.share();
    assert!(node.others.get().is_some());
    node
}

#[test]
fn folded_passes_are_checked_and_counted_exactly() {
    let node = shared_node(10_000);
    for _ in 0..3 {
        assert_eq!(node.try_pass(10_100, 1, 5), Trial::Counted);
        node.on_pass_folded();
    }
    assert_eq!(node.try_pass(10_200, 1, 5), Trial::Over);
    assert_eq!(node.passes(10_200), 5);
    assert_eq!(node.pass_qps(10_200), 5.0);
    assert_eq!(node.concurrency(), 1 + 3);
    // Past the caps, the stripes' check: it counts nothing.
    assert_eq!(node.try_pass(10_200, 1, FOLD_MAX_LIMIT + 1), Trial::Fits);
    assert_eq!(
        node.try_pass(10_200, FOLD_MAX_BATCH + 1, u32::MAX.into()),
        Trial::Fits
    );
    assert_eq!(node.passes(10_200), 5);
}

#[test]
fn a_batch_that_does_not_fit_is_taken_back() {
    let node = shared_node(10_000);
    assert_eq!(node.try_pass(10_000, 4, 5), Trial::Over);
    assert_eq!(node.passes(10_000), 2);
    assert_eq!(node.try_pass(10_000, 3, 5), Trial::Counted);
    assert_eq!(node.passes(10_000), 5);
}

#[test]
fn the_window_slides_over_folded_rounds_and_the_minute_keeps_them() {
    // A limit under 64: no quotas, every pass is added to the fold.
    let node = shared_node(10_000);
    assert_eq!(node.try_pass(10_000, 3, 15), Trial::Counted);
    // The next round: the previous one is still in the second.
    assert_eq!(node.try_pass(10_600, 4, 15), Trial::Counted);
    assert_eq!(node.passes(10_600), 2 + 3 + 4);
    // A second later the first round has left the window.
    assert_eq!(node.try_pass(11_100, 1, 15), Trial::Counted);
    assert_eq!(node.passes(11_100), 4 + 1);
    // Four rounds on, the first round's bucket restarts: its passes move to the minute.
    assert_eq!(node.try_pass(12_000, 1, 15), Trial::Counted);
    let (pass, ..) = node.minute_totals(12_000);
    assert_eq!(pass, 2 + 3 + 4 + 1 + 1);
}

#[test]
fn racing_threads_never_admit_more_than_the_limit_and_then_fill_it_exactly() {
    let node = shared_node(10_000);
    // A limit of 1 000: threads that own their stripes take quotas of 15.
    let counted: u64 = std::thread::scope(|s| {
        let workers: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    (0..1_000)
                        .filter(|_| node.try_pass(10_000, 1, 1_000) == Trial::Counted)
                        .count() as u64
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap_or(0)).sum()
    });
    assert!(counted <= 1_000 - 2, "{counted} passes over a limit of 998");
    // Passes the racing threads took ahead and did not use go to the next calls.
    let drained =
        std::iter::from_fn(|| (node.try_pass(10_000, 1, 1_000) == Trial::Counted).then_some(()))
            .count() as u64;
    assert_eq!(counted + drained, 1_000 - 2);
    assert_eq!(node.passes(10_000), 1_000);
    assert_eq!(node.unused_quota(10_000, 10_500), 0);
}

#[test]
fn a_thread_takes_passes_ahead_and_the_published_numbers_leave_them_out() {
    on_owned_stripe(|| {
        let node = shared_node(10_000);
        // A limit of 640: quotas of 10.
        assert_eq!(node.try_pass(10_100, 1, 640), Trial::Counted);
        assert_eq!(
            node.passes(10_100),
            2 + 1 + 10,
            "a check counts a quota as taken"
        );
        assert_eq!(node.unused_quota(10_000, 10_500), 10);
        assert_eq!(node.snapshot(10_100).pass_qps, 3.0);
        // The next ten calls use the quota: the count does not change.
        for _ in 0..10 {
            assert_eq!(node.try_pass(10_100, 1, 640), Trial::Counted);
        }
        assert_eq!(node.passes(10_100), 13);
        assert_eq!(node.unused_quota(10_000, 10_500), 0);
        assert_eq!(node.snapshot(10_100).pass_qps, 13.0);
        // The one after takes a new quota.
        assert_eq!(node.try_pass(10_200, 1, 640), Trial::Counted);
        assert_eq!(node.passes(10_200), 14 + 10);
        // The next round's first call hands the old round's quota back, then takes one.
        assert_eq!(node.try_pass(10_600, 1, 640), Trial::Counted);
        assert_eq!(node.passes(10_600), 14 + 1 + 10);
        assert_eq!(node.snapshot(10_600).pass_qps, 15.0);
        let (pass, ..) = node.minute_totals(10_600);
        assert_eq!(pass, 15);
        assert_eq!(node.second_counts(10_000).pass, 15);
    })
}

#[test]
fn a_refused_call_takes_back_the_quotas_of_other_threads() {
    on_owned_stripe(|| {
        let node = shared_node(10_000);
        // A limit of 128: quotas of 2. Another thread passes once and keeps 2 ahead.
        on_owned_stripe(|| assert_eq!(node.try_pass(10_000, 1, 128), Trial::Counted));
        assert_eq!(node.unused_quota(10_000, 10_500), 2);
        // This thread gets the rest of the window, that quota included.
        let passed = (0..200)
            .filter(|_| node.try_pass(10_000, 1, 128) == Trial::Counted)
            .count();
        assert_eq!(passed, 128 - 2 - 1);
        assert_eq!(node.passes(10_000), 128);
        assert_eq!(node.unused_quota(10_000, 10_500), 0);
        assert_eq!(node.snapshot(10_000).pass_qps, 128.0);
    })
}

#[test]
fn quotas_taken_under_another_limit_are_not_used() {
    on_owned_stripe(|| {
        let node = shared_node(10_000);
        // A limit of 6 400: quotas of 64, taken by this thread and another.
        assert_eq!(node.try_pass(10_000, 1, 6_400), Trial::Counted);
        on_owned_stripe(|| assert_eq!(node.try_pass(10_000, 1, 6_400), Trial::Counted));
        assert_eq!(node.unused_quota(10_000, 10_500), 2 * 64);
        // A reload lowers the limit to the calls that passed: neither quota is used.
        assert_eq!(node.try_pass(10_100, 1, 4), Trial::Over);
        on_owned_stripe(|| assert_eq!(node.try_pass(10_100, 1, 4), Trial::Over));
        assert_eq!(node.unused_quota(10_000, 10_500), 0);
        assert_eq!(node.passes(10_100), 2 + 1 + 1);
    })
}

#[test]
fn a_check_outside_the_fast_path_takes_the_quotas_back() {
    on_owned_stripe(|| {
        let node = shared_node(10_000);
        assert_eq!(node.try_pass(10_000, 1, 6_400), Trial::Counted);
        on_owned_stripe(|| assert_eq!(node.try_pass(10_000, 1, 6_400), Trial::Counted));
        assert_eq!(node.passes(10_000), 2 + 2 * 65, "the quotas count as taken");
        // The full checks (a prioritized call, say) count the calls that passed.
        assert_eq!(node.pass_qps(10_000), 4.0);
        assert_eq!(node.unused_quota(10_000, 10_500), 0);
        // The fast path's next call takes a quota again.
        assert_eq!(node.try_pass(10_000, 1, 6_400), Trial::Counted);
        assert_eq!(node.unused_quota(10_000, 10_500), 64);
        assert_eq!(node.passes(10_000), 5 + 64);
    })
}
