//! One conformance check's engine, source name and event record, with bounded waits that
//! fail the check instead of panicking.

use std::time::Duration;

use super::observe::{applied_seq, status_within, until_within, EventRecorder};
use super::{ConformanceFailure, ConformanceHarness};
use crate::datasource::{DataSource, DataSourceBuilder, FlowJson, SourceStatus};
use crate::engine::Sentinel;
use crate::flow::FlowRule;

/// One check's engine, source name and event record.
pub(super) struct Fixture {
    check: &'static str,
    pub(super) sentinel: Sentinel,
    pub(super) name: String,
    pub(super) recorder: EventRecorder,
    timeout: Duration,
}

impl Fixture {
    pub(super) fn new(check: &'static str, timeout: Duration) -> Self {
        let sentinel = Sentinel::new();
        let name = format!("conformance-{check}");
        let recorder = EventRecorder::attach(&sentinel, &name);
        Self {
            check,
            sentinel,
            name,
            recorder,
            timeout,
        }
    }

    pub(super) fn fail(&self, message: impl Into<String>) -> ConformanceFailure {
        ConformanceFailure {
            check: self.check,
            message: message.into(),
        }
    }

    pub(super) fn ensure(
        &self,
        ok: bool,
        message: impl FnOnce() -> String,
    ) -> Result<(), ConformanceFailure> {
        if ok {
            Ok(())
        } else {
            Err(self.fail(message()))
        }
    }

    /// The flow sequence active now.
    pub(super) fn seq(&self) -> Option<u64> {
        applied_seq::<FlowRule>(&self.sentinel)
    }

    /// The flow sequence after each apply so far.
    pub(super) fn applied(&self) -> Vec<Option<u64>> {
        self.recorder.seqs::<FlowRule>()
    }

    fn builder<H: ConformanceHarness>(&self, harness: &H) -> DataSourceBuilder {
        // No snapshot in the default place (the user's home): the checks that need one name
        // a file of their own.
        let builder = DataSource::builder(harness.make_source(), FlowJson::new())
            .name(self.name.clone())
            .backoff(Duration::from_millis(20), Duration::from_millis(500))
            .without_snapshot();
        harness.configure(builder)
    }

    pub(super) async fn start<H: ConformanceHarness>(
        &self,
        harness: &H,
        tune: impl FnOnce(DataSourceBuilder) -> DataSourceBuilder,
    ) -> Result<DataSource, ConformanceFailure> {
        tune(self.builder(harness))
            .start(&self.sentinel)
            .await
            .map_err(|e| self.fail(format!("start failed: {e:?}")))
    }

    /// Polls `condition` until it holds or the timeout passes.
    pub(super) async fn wait(
        &self,
        what: &str,
        condition: impl FnMut() -> bool,
    ) -> Result<(), ConformanceFailure> {
        if until_within(self.timeout, condition).await {
            Ok(())
        } else {
            Err(self.fail(format!(
                "timed out after {:?} waiting for {what}",
                self.timeout
            )))
        }
    }

    pub(super) async fn wait_seq(&self, seq: Option<u64>) -> Result<(), ConformanceFailure> {
        let what = format!("applied sequence {seq:?} (now {:?})", self.seq());
        self.wait(&what, || self.seq() == seq).await
    }

    /// Waits for the `RulesApplied` event of sequence `seq`. The engine publishes a table
    /// before its event reaches listeners, so checks that read the event record wait on it.
    pub(super) async fn wait_applied(&self, seq: u64) -> Result<(), ConformanceFailure> {
        let what = format!("the event applying sequence {seq}");
        self.wait(&what, || self.applied().last() == Some(&Some(seq)))
            .await
    }

    pub(super) async fn wait_status(
        &self,
        source: &DataSource,
        what: &str,
        condition: impl Fn(&SourceStatus) -> bool,
    ) -> Result<SourceStatus, ConformanceFailure> {
        status_within(source, self.timeout, condition)
            .await
            .map_err(|status| {
                self.fail(format!(
                    "timed out after {:?} waiting for status: {what}; status is {status:?}",
                    self.timeout
                ))
            })
    }
}
