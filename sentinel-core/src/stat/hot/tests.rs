//! Tests of the round-tagged stripe: every event, caps, reuse of a bucket, the tag wrap,
//! and a model of the pass sum.

use super::*;
use proptest::prelude::*;

fn none(_: Retired) {}

#[test]
fn counts_slide_out_after_the_second() {
    for owned in [true, false] {
        let s = HotStripe::new();
        s.pass(round_of(100), 3, owned, none);
        s.pass(round_of(600), 4, owned, none);
        assert_eq!(s.passes_at(round_of(999)), 7);
        assert_eq!(s.passes_at(round_of(1000)), 4);
        assert_eq!(s.passes_at(round_of(1500)), 0);
        s.pass(round_of(1200), 1, owned, none);
        assert_eq!(s.sum_at(round_of(1200), Event::Pass), 5);
        assert_eq!(s.sum_range(1000, 1500, Event::Pass), 1);
        assert_eq!(s.sum_range(0, 1000, Event::Pass), 7, "four rounds retained");
    }
}

#[test]
fn every_event_and_the_minimum_rt() {
    for owned in [true, false] {
        let s = HotStripe::new();
        let r = round_of(10_000);
        s.pass(r, 2, owned, none);
        s.block(r, 3, owned, none);
        s.occupied(r, 1, owned, none);
        s.complete(r, 1, 30, false, owned, none);
        s.complete(r, 2, 10, true, owned, none);
        s.complete(r + 1, 1, 20, false, owned, none);
        let sums: Vec<u64> = Event::ALL.iter().map(|e| s.sum_at(r + 1, *e)).collect();
        assert_eq!(sums, [2, 3, 4, 2, 60, 1]);
        assert_eq!(s.min_rt_at(r + 1), Some(10));
        assert_eq!(s.min_rt_at(r + 2), Some(20));
        assert_eq!(s.min_rt_at(r + 3), None);
        s.complete(r + 4, 1, u64::MAX, false, owned, none);
        assert_eq!(s.min_rt_at(r + 4), Some(MIN_RT_CAP));
        assert_eq!(s.sum_at(r + 4, Event::Rt), RT_CAP);
    }
}

#[test]
fn caps_saturate_instead_of_spilling() {
    for owned in [true, false] {
        let s = HotStripe::new();
        s.pass(7, u64::MAX, owned, none);
        s.pass(7, 5, owned, none);
        assert_eq!(s.passes_at(7), PASS_CAP);
        s.block(7, u64::MAX, owned, none);
        s.complete(7, u64::MAX, 1, true, owned, none);
        s.complete(7, 1, 1, true, owned, none);
        assert_eq!(s.sum_at(7, Event::Block), LOW);
        assert_eq!(s.sum_at(7, Event::Error), LOW);
        assert_eq!(s.passes_at(7), PASS_CAP, "no spill into the tag");
    }
}

#[test]
fn a_reused_bucket_hands_its_round_over() {
    for owned in [true, false] {
        let s = HotStripe::new();
        s.pass(10, 1, owned, none);
        s.block(10, 2, owned, none);
        s.complete(10, 3, 40, true, owned, none);
        s.occupied(10, 4, owned, none);
        let retired = std::cell::Cell::new(None);
        s.pass(14, 9, owned, |r| retired.set(Some(r)));
        assert_eq!(retired.get(), Some((10 * ROUND_MS, [1, 2, 3, 3, 40, 4])));
        assert_eq!(
            s.sum_at(14, Event::Block),
            0,
            "the other counters start at 0"
        );
        assert_eq!(s.min_rt_at(14), None);
        assert_eq!(s.passes_at(14), 9);
        // A bucket that holds a newer round (the clock went back) is counted into.
        s.pass(10, 1, owned, |_| panic!("nothing retires"));
        assert_eq!(s.passes_at(14), 10);
        assert_eq!(s.newest_end(14 * ROUND_MS), Some(15 * ROUND_MS));
    }
}

#[test]
fn rounds_are_read_across_the_tag_wrap() {
    let s = HotStripe::new();
    let r = (1u64 << 32) - 1;
    s.pass(r, 1, true, none);
    s.pass(r + 1, 2, true, none);
    assert_eq!(s.passes_at(r + 1), 3);
    let start = (r + 1) * ROUND_MS;
    assert_eq!(s.sum_range(start - ROUND_MS, start, Event::Pass), 1);
    assert_eq!(s.newest_end(start), Some(start + ROUND_MS));
}

proptest! {
    /// Whatever the sequence of times, the sum holds exactly the passes of the current
    /// and the previous round, owned or shared.
    #[test]
    fn sum_matches_a_naive_model(
        steps in proptest::collection::vec((0u64..400, 1u64..5), 1..200),
        owned in any::<bool>(),
    ) {
        let s = HotStripe::new();
        let mut now = 5_000u64;
        let mut log: Vec<(u64, u64)> = Vec::new();
        for (dt, n) in steps {
            now += dt;
            s.pass(round_of(now), n, owned, none);
            log.push((now, n));
            let oldest = (now - now % ROUND_MS).saturating_sub(ROUND_MS);
            let expected: u64 = log.iter().filter(|(t, _)| *t >= oldest).map(|(_, n)| n).sum();
            prop_assert_eq!(s.passes_at(round_of(now)), expected);
            prop_assert_eq!(s.sum_at(round_of(now), Event::Pass), expected);
        }
    }
}

#[test]
fn the_heads_have_a_cache_line_of_their_own() {
    // Another thread's QPS check reads only the heads: the exit's counters are elsewhere.
    assert_eq!(std::mem::size_of::<Heads>(), 64);
    assert_eq!(std::mem::offset_of!(HotStripe, heads), 0);
    assert_eq!(std::mem::offset_of!(HotStripe, bodies), 64);
    assert_eq!(std::mem::size_of::<HotStripe>(), 192);
}
