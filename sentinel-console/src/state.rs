//! What the console's handlers share: the engine, its metric series, the sources' status,
//! the editing setup and the recorder of events.

use std::sync::Arc;

use sentinel_core::datasource::SourceStatus;
use sentinel_core::series::MetricSeries;
use sentinel_core::Sentinel;
use tokio::sync::watch;

use crate::edit::Editing;
use crate::guard::Guard;
use crate::record::Recorder;

/// The console's shared state, one per [`Console`](crate::Console).
pub(crate) struct State {
    pub(crate) sentinel: Sentinel,
    pub(crate) series: Arc<MetricSeries>,
    pub(crate) sources: Vec<watch::Receiver<SourceStatus>>,
    pub(crate) editing: Option<Editing>,
    pub(crate) recorder: Arc<Recorder>,
    pub(crate) max_rows: usize,
    /// The host check, the read check and the security headers.
    pub(crate) guard: Guard,
    /// The dashboard transport's refusals, if the console was given a transport.
    pub(crate) refusals: Option<crate::model::ReadRefusals>,
    /// The resources of the newest collected second, shared by the viewers.
    pub(crate) table: std::sync::Mutex<Option<Arc<crate::model::Table>>>,
    /// True once the application began to shut down: event streams end.
    pub(crate) closing: watch::Sender<bool>,
}
