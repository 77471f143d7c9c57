//! The ten checks of the data-source contract (DESIGN §4).

use std::time::{Duration, SystemTime};

use super::fixture::Fixture;
use super::observe::{flow_payload, status_within};
use super::snapshot_checks::TempDir;
use super::{CheckOutcome, ConformanceFailure, ConformanceHarness};
use crate::datasource::{DeletePolicy, StartMode};
use crate::rules::RuleFamily;

/// Point 1, initial load: `start` applies the current value before it returns, an absent key
/// starts with no rules, and with the server down `FailFast` fails.
pub async fn check_initial_load<H: ConformanceHarness>(
    harness: &H,
) -> Result<CheckOutcome, ConformanceFailure> {
    let fx = Fixture::new("initial_load", harness.timeout());
    harness.write(&flow_payload(1)).await;
    let source = fx.start(harness, |b| b).await?;
    fx.ensure(fx.seq() == Some(1), || {
        format!(
            "rules not applied when start returned: sequence {:?}",
            fx.seq()
        )
    })?;
    let status = source.status();
    fx.ensure(status.connected && status.applied_count == 1, || {
        format!("status after start: {status:?}")
    })?;
    source.close().await;

    let fx = Fixture::new("initial_load", harness.timeout());
    harness.delete().await;
    let source = fx.start(harness, |b| b).await?;
    fx.ensure(fx.seq().is_none(), || "an absent key loaded rules".into())?;
    harness.write(&flow_payload(2)).await;
    fx.wait_seq(Some(2)).await?;
    source.close().await;

    if harness.stop_server().await.is_err() {
        return Ok(CheckOutcome::Skipped {
            reason: "the harness cannot stop its server: FailFast with the server down not checked",
        });
    }
    {
        let fx = Fixture::new("initial_load", harness.timeout());
        let result = fx
            .start(harness, |b| b.start_mode(StartMode::FailFast))
            .await;
        let _ = harness.start_server().await;
        match result {
            Ok(source) => {
                source.close().await;
                return Err(fx.fail("FailFast started with the server down"));
            }
            Err(_) => fx.ensure(fx.seq().is_none(), || {
                "rules applied by a failed start".into()
            })?,
        }
    }
    Ok(CheckOutcome::Passed)
}

/// Point 2, ordered updates: ten writes, each waited for, are each applied, in order; then
/// after `writes` rapid writes (which a backend may coalesce) the applied sequence never went
/// backwards and ends at the last value written.
pub async fn check_ordered_updates<H: ConformanceHarness>(
    harness: &H,
    writes: u64,
) -> Result<CheckOutcome, ConformanceFailure> {
    let fx = Fixture::new("ordered_updates", harness.timeout());
    harness.write(&flow_payload(1)).await;
    let source = fx.start(harness, |b| b).await?;
    const PACED: u64 = 10;
    for seq in 2..=PACED {
        harness.write(&flow_payload(seq)).await;
        fx.wait_applied(seq).await?;
    }
    let applied = fx.applied();
    let every: Vec<Option<u64>> = (1..=PACED).map(Some).collect();
    fx.ensure(applied == every, || {
        format!("paced writes not each applied in order: {applied:?}")
    })?;
    let last = PACED + writes.max(2);
    for seq in PACED + 1..=last {
        harness.write(&flow_payload(seq)).await;
    }
    fx.wait_applied(last).await?;
    let applied = fx.applied();
    let ordered = applied.windows(2).all(|w| w[0] < w[1]);
    fx.ensure(ordered && applied.last() == Some(&Some(last)), || {
        format!("applied sequence not increasing or not ending at {last}: {applied:?}")
    })?;
    source.close().await;
    Ok(CheckOutcome::Passed)
}

/// Point 3, bad payload: a syntax error and an invalid rule are each rejected whole, the last
/// good rules stay, and status and an event say why; a good payload then applies.
pub async fn check_bad_payload<H: ConformanceHarness>(
    harness: &H,
) -> Result<CheckOutcome, ConformanceFailure> {
    let fx = Fixture::new("bad_payload", harness.timeout());
    harness.write(&flow_payload(1)).await;
    let source = fx.start(harness, |b| b).await?;

    harness
        .write(br#"[{"resource": "conformance", "count": }]"#)
        .await;
    let status = fx
        .wait_status(&source, "syntax error rejected", |s| s.rejected_count >= 1)
        .await?;
    let error = status.last_error.unwrap_or_default();
    fx.ensure(error.contains("line"), || {
        format!("error does not name a position: {error}")
    })?;
    fx.ensure(fx.seq() == Some(1), || {
        format!("rules changed to {:?}", fx.seq())
    })?;

    harness
        .write(br#"[{"controlBehavior": "test", "count": 1}]"#)
        .await;
    let status = fx
        .wait_status(&source, "invalid rule rejected", |s| s.rejected_count >= 2)
        .await?;
    let error = status.last_error.unwrap_or_default();
    fx.ensure(
        error.contains("controlBehavior") && error.contains("resource"),
        || format!("error does not name the fields: {error}"),
    )?;
    fx.ensure(fx.seq() == Some(1), || {
        format!("rules changed to {:?}", fx.seq())
    })?;
    let rejected = fx.recorder.rejections();
    fx.ensure(rejected == 2, || {
        format!("{rejected} rejection events, expected 2")
    })?;

    harness.write(&flow_payload(2)).await;
    fx.wait_seq(Some(2)).await?;
    let status = fx
        .wait_status(&source, "error cleared", |s| s.last_error.is_none())
        .await?;
    fx.ensure(status.applied_count == 2, || format!("status: {status:?}"))?;
    source.close().await;
    Ok(CheckOutcome::Passed)
}

/// Point 3 at start: a new instance started while the store holds a broken payload starts
/// by default, serving the local snapshot's rules (or none, without a snapshot); its status
/// says the stored payload is rejected, an event says why, and it applies the fix once
/// stored. [`StartMode::FailFast`], chosen explicitly, returns the rejection instead.
pub async fn check_bad_payload_at_start<H: ConformanceHarness>(
    harness: &H,
) -> Result<CheckOutcome, ConformanceFailure> {
    const CHECK: &str = "bad_payload_at_start";
    let dir = TempDir::new();
    let path = dir.0.join("rules.json");
    let fx = Fixture::new(CHECK, harness.timeout());
    harness.write(&flow_payload(1)).await;
    let p = path.clone();
    let earlier = fx.start(harness, move |b| b.snapshot_file(p)).await?;
    earlier.close().await;

    harness
        .write(br#"[{"resource": "conformance", "count": }]"#)
        .await;
    // A new instance with the snapshot the earlier one kept: its rules.
    let with = Fixture::new(CHECK, harness.timeout());
    let p = path.clone();
    let from_snapshot = with.start(harness, move |b| b.snapshot_file(p)).await?;
    with.ensure(with.seq() == Some(1), || {
        format!(
            "started with sequence {:?}, not the snapshot's 1",
            with.seq()
        )
    })?;
    let s = from_snapshot.status();
    with.ensure(
        s.connected && s.store_rejected && s.from_snapshot && s.rejected_count == 1,
        || format!("status after a start on a rejected payload: {s:?}"),
    )?;
    let error = s.last_error.unwrap_or_default();
    with.ensure(error.contains("line"), || {
        format!("the error does not name a position: {error}")
    })?;
    with.ensure(with.recorder.rejections() == 1, || {
        format!(
            "{} rejection events, expected 1",
            with.recorder.rejections()
        )
    })?;

    // A new instance with no snapshot: no rules from the source.
    let without = Fixture::new(CHECK, harness.timeout());
    let bare = without.start(harness, |b| b.without_snapshot()).await?;
    without.ensure(without.seq().is_none(), || {
        format!("started with sequence {:?}, not none", without.seq())
    })?;
    let s = bare.status();
    without.ensure(s.connected && s.store_rejected && !s.from_snapshot, || {
        format!("status after a start on a rejected payload: {s:?}")
    })?;

    // Failing fast is a choice.
    let strict = Fixture::new(CHECK, harness.timeout());
    let started = strict
        .start(harness, |b| {
            b.start_mode(StartMode::FailFast).without_snapshot()
        })
        .await;
    if let Ok(source) = started {
        source.close().await;
        return Err(strict.fail("FailFast started on a rejected payload"));
    }

    // The fix applies on both.
    harness.write(&flow_payload(2)).await;
    with.wait_seq(Some(2)).await?;
    without.wait_seq(Some(2)).await?;
    for (fx, source) in [(&with, &from_snapshot), (&without, &bare)] {
        let s = fx
            .wait_status(source, "the fix applied", |s| {
                !s.store_rejected && s.last_error.is_none()
            })
            .await?;
        fx.ensure(!s.from_snapshot, || format!("status after the fix: {s:?}"))?;
    }
    from_snapshot.close().await;
    bare.close().await;
    Ok(CheckOutcome::Passed)
}

/// Point 4, identical payload: the same bytes written again apply nothing. Each identical
/// write is waited for: a backend that delivers it has the driver count it unchanged
/// (`unchanged_count`); one that filters identical values itself (a file compared by
/// content) never delivers it. Either way the rules are applied once.
pub async fn check_identical_payload<H: ConformanceHarness>(
    harness: &H,
) -> Result<CheckOutcome, ConformanceFailure> {
    let fx = Fixture::new("identical_payload", harness.timeout());
    harness.write(&flow_payload(1)).await;
    let source = fx.start(harness, |b| b).await?;
    let version = fx.sentinel.rules_version();
    let settle = harness.timeout().min(Duration::from_secs(1));
    for round in 1..=2u64 {
        harness.write(&flow_payload(1)).await;
        // Delivered and counted unchanged, or (for a backend that filters) not at all.
        let _ = status_within(&source, settle, |s| s.unchanged_count >= round).await;
    }
    harness.write(&flow_payload(2)).await;
    fx.wait_applied(2).await?;
    let applied = fx.applied();
    fx.ensure(applied == vec![Some(1), Some(2)], || {
        format!("identical payload re-applied: applies {applied:?}")
    })?;
    let now = fx.sentinel.rules_version();
    fx.ensure(now == version + 1, || {
        format!("rule version went from {version} to {now}, expected one apply")
    })?;
    source.close().await;
    Ok(CheckOutcome::Passed)
}

/// Point 5, delete: a deleted key and an empty payload clear the rules; with
/// [`DeletePolicy::Keep`] a deletion keeps them.
pub async fn check_delete<H: ConformanceHarness>(
    harness: &H,
) -> Result<CheckOutcome, ConformanceFailure> {
    let fx = Fixture::new("delete", harness.timeout());
    harness.write(&flow_payload(1)).await;
    let source = fx.start(harness, |b| b).await?;
    harness.delete().await;
    fx.wait_seq(None).await?;
    harness.write(&flow_payload(2)).await;
    fx.wait_seq(Some(2)).await?;
    harness.write(b"").await;
    fx.wait_seq(None).await?;
    source.close().await;

    let fx = Fixture::new("delete", harness.timeout());
    harness.write(&flow_payload(3)).await;
    let source = fx
        .start(harness, |b| b.delete_policy(DeletePolicy::Keep))
        .await?;
    harness.delete().await;
    fx.wait_status(&source, "deletion kept", |s| s.kept_count >= 1)
        .await?;
    fx.ensure(fx.seq() == Some(3), || {
        format!("Keep lost the rules: {:?}", fx.seq())
    })?;
    harness.write(&flow_payload(4)).await;
    fx.wait_seq(Some(4)).await?;
    source.close().await;
    Ok(CheckOutcome::Passed)
}

/// Point 6, disconnect: with the server stopped the source reports disconnected; a value
/// written meanwhile is applied after the restart, by the re-read of the reconnect (the watch
/// could not see it). A harness that cannot write while its server is down writes after the
/// restart instead, and that part is reported skipped.
pub async fn check_disconnect<H: ConformanceHarness>(
    harness: &H,
) -> Result<CheckOutcome, ConformanceFailure> {
    let fx = Fixture::new("disconnect", harness.timeout());
    harness.write(&flow_payload(1)).await;
    let source = fx.start(harness, |b| b).await?;
    if harness.stop_server().await.is_err() {
        source.close().await;
        return Ok(CheckOutcome::Skipped {
            reason: "the harness cannot stop its server",
        });
    }
    let waited = fx
        .wait_status(&source, "disconnected", |s| {
            !s.connected && s.last_error.is_some()
        })
        .await;
    let wrote_while_down = harness.write_while_down(&flow_payload(2)).await.is_ok();
    let restarted = harness.start_server().await;
    waited?;
    fx.ensure(restarted.is_ok(), || {
        "the server could not be restarted".into()
    })?;
    if !wrote_while_down {
        fx.ensure(fx.seq() == Some(1), || {
            "rules lost while disconnected".into()
        })?;
        harness.write(&flow_payload(2)).await;
    }
    fx.wait_seq(Some(2)).await?;
    let status = fx
        .wait_status(&source, "connected", |s| s.connected)
        .await?;
    fx.ensure(status.disconnects >= 1, || format!("status: {status:?}"))?;
    source.close().await;
    if wrote_while_down {
        Ok(CheckOutcome::Passed)
    } else {
        Ok(CheckOutcome::Skipped {
            reason: "the harness cannot write while its server is down: the catch-up re-read \
                     after a reconnect was not shown",
        })
    }
}

/// Point 7, status: name, connection, revision or hash, time of the last apply, last error
/// and the counts.
pub async fn check_status<H: ConformanceHarness>(
    harness: &H,
) -> Result<CheckOutcome, ConformanceFailure> {
    let fx = Fixture::new("status", harness.timeout());
    harness.write(&flow_payload(1)).await;
    let before = SystemTime::now();
    let source = fx.start(harness, |b| b).await?;
    let s = source.status();
    let ok = s.name == fx.name
        && s.connected
        && !s.closed
        && s.last_hash.as_ref().is_some_and(|h| h.len() == 64)
        && s.last_applied_at.is_some_and(|t| t >= before)
        && s.rules_version == Some(fx.sentinel.rules_version())
        && s.last_error.is_none()
        && s.applied_count == 1
        && s.rejected_count == 0
        && s.families == vec![RuleFamily::Flow];
    fx.ensure(ok, || format!("status after start: {s:?}"))?;
    harness.write(b"{").await;
    let s = fx
        .wait_status(&source, "rejection counted", |s| s.rejected_count == 1)
        .await?;
    fx.ensure(s.last_error.is_some() && s.applied_count == 1, || {
        format!("status: {s:?}")
    })?;
    source.close().await;
    Ok(CheckOutcome::Passed)
}

/// Point 8, close: after `close` returns nothing is applied, and status says closed.
pub async fn check_close<H: ConformanceHarness>(
    harness: &H,
) -> Result<CheckOutcome, ConformanceFailure> {
    let fx = Fixture::new("close", harness.timeout());
    harness.write(&flow_payload(1)).await;
    let source = fx.start(harness, |b| b).await?;
    let rx = source.status_watch();
    source.close().await;
    fx.ensure(rx.borrow().closed && !rx.borrow().connected, || {
        format!("status after close: {:?}", *rx.borrow())
    })?;
    harness.write(&flow_payload(2)).await;
    tokio::time::sleep(harness.timeout().min(Duration::from_millis(300))).await;
    fx.ensure(fx.seq() == Some(1), || {
        format!("applied after close: {:?}", fx.seq())
    })?;
    let applies = fx.recorder.applied().len();
    fx.ensure(applies == 1, || format!("{applies} applies, expected 1"))?;
    Ok(CheckOutcome::Passed)
}
