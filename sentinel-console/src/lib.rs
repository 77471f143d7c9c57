//! An embedded live page for sentinel-rs, served by the application itself: resources with
//! pass / block / success / exception QPS, RT, concurrency, a 60 s sparkline and block
//! reasons by family; circuit breakers and a timeline of their transitions; the rules in
//! force with the source each came from; the data sources' status; system and cluster
//! readings; and, when the application turns it on behind its own auth check, rule edits
//! written to the source's store with compare-and-set.
//!
//! Mount it on the application's axum router, and let it end its event streams when the
//! application shuts down:
//!
//! ```no_run
//! # async fn run(
//! #     sentinel: sentinel_core::Sentinel,
//! #     ctrl_c: impl std::future::Future<Output = ()> + Send + 'static,
//! # ) -> Result<(), Box<dyn std::error::Error>> {
//! let console = sentinel_console::Console::builder(&sentinel).build()?;
//! let app = axum::Router::new().merge(console.mount("/console"));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! // ctrl_c: `async { let _ = tokio::signal::ctrl_c().await; }`
//! axum::serve(listener, app)
//!     .with_graceful_shutdown(console.shutdown_signal(ctrl_c))
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! or serve it on its own port with [`Console::serve`] (bind it to 127.0.0.1, as
//! [`DEFAULT_ADDR`] does).
//!
//! # The page
//! One HTML document with its CSS and JavaScript inline (no framework, no build step), served
//! from the binary at the mount point, under 200 KB ([`PAGE_BYTES`]), gzipped when the
//! browser accepts it (as is every JSON answer). It opens one server-sent event stream
//! (`api/stream`) that sends a full [`Snapshot`] first, then `update` events with only what
//! changed: once a second, right after each second is collected, and at once (at most every
//! 250 ms) when a breaker changes state, rules are applied or rejected, or a command is
//! refused. The timeline is
//! sent once, then only its new transitions; a row already shown gets only its new
//! sparkline point. Sorting, search and the row count are query parameters of that
//! stream: the server sorts and cuts the table (top-N), so a service with 10 000 resources
//! sends only the rows shown. The stream ends when the application begins to shut down
//! ([`Console::shutdown_signal`], [`Console::close_streams`]), so an open page never holds
//! a graceful shutdown up.
//!
//! # Security
//! Every answer carries a Content-Security-Policy that admits only the page's own inline
//! script and style (by hash) and `frame-ancestors 'none'`. A request whose `Host` is not
//! a loopback name, an IP address or one of [`ConsoleBuilder::allowed_hosts`] is refused
//! with 421 (DNS rebinding). [`ConsoleBuilder::read_auth`] puts reads behind the
//! application's own check, as [`ConsoleBuilder::editing`] does for edits: use it whenever
//! the console is on a port others than the operators reach.
//!
//! # The JSON API
//! Every path is relative to the mount point; every answer is JSON.
//!
//! | request | answer |
//! | --- | --- |
//! | `GET api/snapshot?q=&sort=pass&desc=true&limit=50` | [`Snapshot`]: everything the page shows |
//! | `GET api/stream?...` (same query) | `text/event-stream` of `snapshot` events |
//! | `GET api/resources?...` | [`Resources`]: the top-N table |
//! | `GET api/breakers` | [`Breaker`]s |
//! | `GET api/timeline` | [`Transition`]s, newest first |
//! | `GET api/rules` | [`Rules`]: per family and per source, as combined documents |
//! | `GET api/sources` | [`Source`]s: status, the applied revision and hash, last apply, the last rejected revision and hash |
//! | `GET api/system` | [`System`] |
//! | `GET api/cluster` | [`Cluster`] |
//! | `GET api/sources/{name}/edit` | [`EditView`]: the store revision and the source's rules |
//! | `PUT api/sources/{name}/rules`, body [`EditRequest`] (`text` or `document`) | [`EditOutcome`]: 200 written, 422 invalid (nothing stored), 409 conflict (with the newer revision), 502 store failed |
//!
//! `sort` is one of `resource`, `pass`, `block`, `success`, `error`, `rt`, `concurrency`,
//! `blocked` ([`SortKey`]). The two editing requests answer 404 while editing is off and
//! 403 when the application's [`AuthHook`] says no; the editor's view answers 409 for a
//! store that keeps no revisions (a file: a save could not compare-and-set, so the page
//! does not offer it and says why, [`Source::not_editable`]).
//!
//! # Cost
//! The console reads what the engine already keeps (its windows, breaker states, rule
//! tables) and listens to its events; nothing is added to a call's path. The resources of
//! the newest second are read once a second and shared by every viewer; each viewer then
//! picks its top rows (a selection, not a sort of every resource) and reads their
//! sparklines. Measured with 10 000 resources (release, the `viewer_cost` example): one
//! viewer about 0.7 % of a core, 0.2 % each with ten.
//!
//! # The dashboard transport
//! With the `transport` feature, `ConsoleBuilder::transport` shows what a
//! `sentinel_transport::Transport` refused (the stock Sentinel dashboard shows "success" for
//! some edits the service refused): counts per reason and the latest refusals with their
//! command, reason, message, caller and time ([`DashboardRefusals`]).
//!
//! # Refused commands as engine events
//! Every `SentinelEvent::CommandRefused` the engine reports (`Sentinel::report_command_refused`:
//! the dashboard transport reports each refusal so, and any other component taking commands
//! can) is kept in a ring beside the rule events ([`CommandRefusal`], the snapshot's
//! `commands_refused`, newest first), sent to open pages at once, and listed on the page with
//! the rule applies and rejections. This needs no feature and no transport handle.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod edit;
mod guard;
mod model;
mod record;
mod shadow;
mod state;
mod stream;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State as AxumState};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use sentinel_core::datasource::{Encoding, ReadableDataSource, SourceStatus, WritableDataSource};
use sentinel_core::series::MetricSeries;
use sentinel_core::{Sentinel, SentinelEvent, WeakSentinel};
use tokio::sync::watch;

pub use edit::{AuthHook, EditOutcome, EditRequest, EditView};
pub use model::{
    Blocks, Breaker, Cluster, ClusterFlow, DashboardRefusals, RefusedCommand, ResourceQuery,
    ResourceRow, Resources, Rules, Snapshot, SortKey, Source, SourceRules, System, SPARK_SECONDS,
};
pub use record::{ClusterState, CommandRefusal, Issue, RuleEvent, Transition};
pub use shadow::ShadowRow;

use edit::{Editing, Writer};
use guard::{AllowedHosts, Guard};
use record::Recorder;
use state::State;

/// The page, with its CSS and JavaScript inline.
static PAGE: &[u8] = include_bytes!("../assets/index.html");

/// The size of everything the page loads, in bytes (one document).
pub const PAGE_BYTES: usize = PAGE.len();

// Everything the page loads stays under 200 KB: checked when the crate compiles.
const _: () = assert!(
    PAGE_BYTES < 200 * 1024,
    "the console page must stay under 200 KB"
);

/// Where [`Console::serve`] callers usually bind: loopback only.
pub const DEFAULT_ADDR: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 8721);

/// Why a console could not be built or served.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConsoleError {
    /// No metric series was given, and there is no Tokio runtime to run the one the console
    /// makes (its one-second collect task).
    #[error("sentinel console: no Tokio runtime to collect the metric series on; build it inside one or pass .series(...)")]
    NoRuntime,
    /// A writer was given for a source the console does not know.
    #[error(
        "sentinel console: writer for unknown data source {name:?}; add it with .source(...) first"
    )]
    UnknownSource {
        /// The name given to `.writable(...)`.
        name: String,
    },
    /// Binding or serving failed.
    #[error("sentinel console: serving on {addr} failed")]
    Serve {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Builds a [`Console`]. From [`Console::builder`].
pub struct ConsoleBuilder {
    sentinel: Sentinel,
    series: Option<Arc<MetricSeries>>,
    sources: Vec<watch::Receiver<SourceStatus>>,
    writers: BTreeMap<String, Writer>,
    auth: Option<AuthHook>,
    read_auth: Option<AuthHook>,
    hosts: AllowedHosts,
    timeline_capacity: usize,
    max_rows: usize,
    #[cfg(feature = "transport")]
    transport: Option<watch::Receiver<sentinel_transport::TransportStatus>>,
}

impl std::fmt::Debug for ConsoleBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleBuilder")
            .field("sources", &self.sources.len())
            .field("writers", &self.writers.keys().collect::<Vec<_>>())
            .field("editing", &self.auth.is_some())
            .field("read_auth", &self.read_auth.is_some())
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

impl ConsoleBuilder {
    /// Lets a request read the console (the page, the API, the event stream) only when
    /// `auth` says yes for its headers: the application's own check (a session cookie, a
    /// header its auth middleware or proxy sets). Off by default: anyone who reaches the
    /// mount point reads it. Turn it on whenever the console is mounted on a port that
    /// others than the operators can reach. An editing request must pass this check and
    /// the [`editing`](Self::editing) one.
    pub fn read_auth(mut self, auth: impl Fn(&HeaderMap) -> bool + Send + Sync + 'static) -> Self {
        self.read_auth = Some(Arc::new(auth));
        self
    }

    /// Also answers requests whose `Host` header names one of `hosts` (a name, without
    /// port: `console.example.com`). By default the console answers only loopback names
    /// (`localhost`, `*.localhost`) and IP addresses, and refuses any other name with 421:
    /// a web page on a name its owner points at this machine (DNS rebinding) cannot read
    /// or edit it.
    pub fn allowed_hosts<I, H>(mut self, hosts: I) -> Self
    where
        I: IntoIterator<Item = H>,
        H: Into<String>,
    {
        let extra = hosts
            .into_iter()
            .map(|h| h.into().trim_end_matches('.').to_ascii_lowercase());
        match &mut self.hosts {
            AllowedHosts::Names(names) => names.extend(extra),
            AllowedHosts::Any => {}
        }
        self
    }

    /// Answers any `Host`: for a console behind a proxy that checks the host itself.
    pub fn allow_any_host(mut self) -> Self {
        self.hosts = AllowedHosts::Any;
        self
    }

    /// Reads per-second rows from this series, shared with the dashboard transport (one per
    /// process). Without it the console makes its own and collects it once a second.
    pub fn series(mut self, series: Arc<MetricSeries>) -> Self {
        self.series = Some(series);
        self
    }

    /// Shows a data source's status: pass [`DataSource::status_watch`].
    ///
    /// [`DataSource::status_watch`]: sentinel_core::datasource::DataSource::status_watch
    pub fn source(mut self, status: watch::Receiver<SourceStatus>) -> Self {
        self.sources.push(status);
        self
    }

    /// Lets the page edit the rules of data source `name` by writing to `writer`, the store
    /// that source reads (the same etcd key, Redis key, file...), with compare-and-set.
    /// `encoding` is how that source's converter reads it ([`Encoding::Combined`] for a
    /// [`CombinedJson`](sentinel_core::datasource::CombinedJson) source). Edits stay off
    /// until [`editing`](Self::editing) is given an auth hook.
    pub fn writable(
        mut self,
        name: impl Into<String>,
        writer: Arc<dyn WritableDataSource>,
        encoding: Encoding,
    ) -> Self {
        self.writers.insert(
            name.into(),
            Writer {
                writer,
                encoding,
                reader: None,
                revisions: Arc::default(),
            },
        );
        self
    }

    /// Lets the editor start from the document as stored for data source `name` (given to
    /// [`writable`](Self::writable) first), read through `reader`: another instance of the
    /// source's backend on the same key. Without it the editor starts from the engine's
    /// rules, every default spelled out, and a save replaces the hand-written document
    /// with them. A save of stored text keeps it as written (for [`Encoding::Combined`]).
    pub fn stored_text(mut self, name: &str, reader: impl ReadableDataSource + 'static) -> Self {
        if let Some(writer) = self.writers.get_mut(name) {
            writer.reader = Some(tokio::sync::Mutex::new(Box::new(reader)));
        }
        self
    }

    /// Turns editing on: a request may read the editor's document and write rules when
    /// `auth` says yes for its headers. Off by default.
    pub fn editing(mut self, auth: impl Fn(&HeaderMap) -> bool + Send + Sync + 'static) -> Self {
        self.auth = Some(Arc::new(auth));
        self
    }

    /// Shows what the dashboard transport refused (the stock dashboard shows "success" for
    /// some refused edits): counts per reason and the latest refusals with their command,
    /// reason, message, caller and time, in the page's "Dashboard commands refused" card
    /// and the snapshot's `transport`. Open pages update at once on a refusal.
    #[cfg(feature = "transport")]
    #[cfg_attr(docsrs, doc(cfg(feature = "transport")))]
    pub fn transport(mut self, transport: &sentinel_transport::Transport) -> Self {
        self.transport = Some(transport.status_watch());
        self
    }

    /// How many breaker transitions, rule events and refused commands the console keeps (256
    /// of each by default).
    pub fn timeline_capacity(mut self, capacity: usize) -> Self {
        self.timeline_capacity = capacity;
        self
    }

    /// The most rows one resources query returns (500 by default).
    pub fn max_rows(mut self, rows: usize) -> Self {
        self.max_rows = rows.max(1);
        self
    }

    /// Builds the console and starts listening to the engine's events. Without a
    /// [`series`](Self::series), it spawns the collect task on the current Tokio runtime.
    pub fn build(self) -> Result<Console, ConsoleError> {
        for name in self.writers.keys() {
            if !self.sources.iter().any(|s| &s.borrow().name == name) {
                return Err(ConsoleError::UnknownSource { name: name.clone() });
            }
        }
        let series = match self.series {
            Some(series) => series,
            None => {
                let handle =
                    tokio::runtime::Handle::try_current().map_err(|_| ConsoleError::NoRuntime)?;
                let series = Arc::new(MetricSeries::new());
                handle.spawn(collect(self.sentinel.downgrade(), Arc::downgrade(&series)));
                series
            }
        };
        let recorder = Recorder::new(&self.sentinel, self.timeline_capacity);
        let listening = Arc::downgrade(&recorder);
        let engine = self.sentinel.downgrade();
        self.sentinel.add_listener(move |event: &SentinelEvent| {
            if let (Some(recorder), Some(sentinel)) = (listening.upgrade(), engine.upgrade()) {
                recorder.on_event(event, sentinel.clock().now_ms());
            }
        });
        #[cfg(feature = "transport")]
        let refusals = self
            .transport
            .map(|status| model::watch_refusals(status, &recorder));
        #[cfg(not(feature = "transport"))]
        let refusals = None;
        let editing = self.auth.map(|auth| Editing {
            auth,
            writers: self.writers,
        });
        Ok(Console {
            state: Arc::new(State {
                sentinel: self.sentinel,
                series,
                sources: self.sources,
                editing,
                recorder,
                max_rows: self.max_rows,
                guard: Guard {
                    hosts: self.hosts,
                    read: self.read_auth,
                },
                refusals,
                table: std::sync::Mutex::default(),
                closing: watch::Sender::new(false),
            }),
        })
    }
}

/// Collects `series` once a second, just after each second ends, until the engine or the
/// series is gone.
async fn collect(sentinel: WeakSentinel, series: std::sync::Weak<MetricSeries>) {
    loop {
        let Some(wait) = sentinel.upgrade().map(|s| until_next_second(&s)) else {
            return;
        };
        tokio::time::sleep(wait).await;
        let (Some(sentinel), Some(series)) = (sentinel.upgrade(), series.upgrade()) else {
            return;
        };
        series.collect(&sentinel);
    }
}

/// The time until 5 ms past the end of the engine clock's current second, when that second
/// can be collected.
fn until_next_second(sentinel: &Sentinel) -> Duration {
    let now = sentinel.clock().now_ms();
    Duration::from_millis(1005 - now % 1000)
}

/// The console: a router to mount, or a server of its own. Cheap to clone.
#[derive(Clone)]
pub struct Console {
    state: Arc<State>,
}

impl std::fmt::Debug for Console {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Console")
            .field("sources", &self.state.sources.len())
            .field("editing", &self.state.editing.is_some())
            .finish_non_exhaustive()
    }
}

impl Console {
    /// A builder for a console over `sentinel`.
    pub fn builder(sentinel: &Sentinel) -> ConsoleBuilder {
        ConsoleBuilder {
            sentinel: sentinel.clone(),
            series: None,
            sources: Vec::new(),
            writers: BTreeMap::new(),
            auth: None,
            read_auth: None,
            hosts: AllowedHosts::Names(BTreeSet::new()),
            timeline_capacity: 256,
            max_rows: 500,
            #[cfg(feature = "transport")]
            transport: None,
        }
    }

    /// The series the console reads (shared with the transport, or its own).
    pub fn series(&self) -> &Arc<MetricSeries> {
        &self.state.series
    }

    /// Everything the page shows now, as `GET api/snapshot` answers it.
    pub fn snapshot(&self, query: &ResourceQuery) -> Snapshot {
        self.state.snapshot(query)
    }

    /// The page and the API, to mount with `Router::nest("/console", console.router())` (or
    /// `merge` at the root).
    pub fn router<S>(&self) -> Router<S>
    where
        S: Clone + Send + Sync + 'static,
    {
        let routes =
            Router::new()
                .route("/", get(page))
                .route("/index.html", get(page))
                .route("/api/snapshot", get(snapshot))
                .route("/api/stream", get(stream))
                .route("/api/resources", get(resources))
                .route(
                    "/api/breakers",
                    get(|s: AxumState<Arc<State>>| async move { Json(s.breakers()) }),
                )
                .route(
                    "/api/timeline",
                    get(|s: AxumState<Arc<State>>| async move {
                        Json(s.recorder.transitions(usize::MAX))
                    }),
                )
                .route(
                    "/api/rules",
                    get(|s: AxumState<Arc<State>>| async move { Json(s.rules()) }),
                )
                .route(
                    "/api/sources",
                    get(|s: AxumState<Arc<State>>| async move { Json(s.sources()) }),
                )
                .route(
                    "/api/system",
                    get(|s: AxumState<Arc<State>>| async move { Json(s.system()) }),
                )
                .route(
                    "/api/cluster",
                    get(|s: AxumState<Arc<State>>| async move { Json(s.cluster()) }),
                )
                .route(
                    "/api/shadow",
                    get(|s: AxumState<Arc<State>>| async move { Json(s.shadow()) }),
                )
                .route("/api/sources/{name}/edit", get(edit_view))
                .route("/api/sources/{name}/rules", axum::routing::put(edit_rules));
        self.guarded(routes)
    }

    /// The console mounted at `path` (`/console`): the page at `/console` and at
    /// `/console/` (a nested router alone answers only the first), the API under
    /// `/console/api/`. Merge it into the application's router:
    /// `app.merge(console.mount("/console"))`.
    pub fn mount<S>(&self, path: &str) -> Router<S>
    where
        S: Clone + Send + Sync + 'static,
    {
        let path = format!("/{}", path.trim_matches('/'));
        let slash = self.guarded(Router::new().route(&format!("{path}/"), get(page)));
        Router::new().nest(&path, self.router()).merge(slash)
    }

    /// `routes` with compression, the host and read checks and the security headers.
    fn guarded<S>(&self, routes: Router<Arc<State>>) -> Router<S>
    where
        S: Clone + Send + Sync + 'static,
    {
        routes
            .layer(tower_http::compression::CompressionLayer::new())
            .layer(axum::middleware::from_fn_with_state(
                self.state.clone(),
                guard::check,
            ))
            .with_state(self.state.clone())
    }

    /// Ends every open event stream now, and every stream opened from now on at once.
    /// Call it when the application begins to shut down: an open page keeps its stream
    /// open for ever otherwise, and axum's graceful shutdown waits for it.
    pub fn close_streams(&self) {
        self.state.closing.send_replace(true);
    }

    /// `signal`, for `with_graceful_shutdown`, that also ends the console's event streams
    /// when it resolves: `axum::serve(listener, app).with_graceful_shutdown(console.shutdown_signal(ctrl_c))`.
    /// Without it an open page holds the service up until the browser closes it.
    pub fn shutdown_signal<F>(
        &self,
        signal: F,
    ) -> impl std::future::Future<Output = ()> + Send + 'static
    where
        F: std::future::Future + Send + 'static,
    {
        let console = self.clone();
        async move {
            signal.await;
            console.close_streams();
        }
    }

    /// Serves the console alone on `addr` until `shutdown` resolves. Bind it to loopback
    /// ([`DEFAULT_ADDR`]) unless something in front of it checks who asks.
    pub async fn serve(
        self,
        addr: SocketAddr,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<(), ConsoleError> {
        let serve_error = |source| ConsoleError::Serve { addr, source };
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(serve_error)?;
        let shutdown = self.shutdown_signal(shutdown);
        axum::serve(listener, self.router::<()>())
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(serve_error)
    }
}

async fn page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        PAGE,
    )
        .into_response()
}

async fn snapshot(
    AxumState(state): AxumState<Arc<State>>,
    Query(query): Query<ResourceQuery>,
) -> Json<Snapshot> {
    Json(state.snapshot(&query))
}

async fn resources(
    AxumState(state): AxumState<Arc<State>>,
    Query(query): Query<ResourceQuery>,
) -> Json<Resources> {
    state.series.collect(&state.sentinel);
    Json(state.resources(&query))
}

async fn stream(
    AxumState(state): AxumState<Arc<State>>,
    Query(query): Query<ResourceQuery>,
) -> Response {
    stream::stream(state, query).into_response()
}

fn refused(status: StatusCode, message: &str) -> Response {
    (status, Json(serde_json::json!({ "error": message }))).into_response()
}

/// The writer of `name` if editing is on and `headers` pass the application's check; else
/// the refusal's status and message.
fn authorized<'a>(
    state: &'a State,
    name: &str,
    headers: &HeaderMap,
) -> Result<&'a Writer, (StatusCode, &'static str)> {
    let Some(editing) = &state.editing else {
        return Err((StatusCode::NOT_FOUND, "editing is off"));
    };
    if !(editing.auth)(headers) {
        return Err((StatusCode::FORBIDDEN, "not allowed to edit rules"));
    }
    editing
        .writers
        .get(name)
        .ok_or((StatusCode::NOT_FOUND, "this source is not editable"))
}

async fn edit_view(
    AxumState(state): AxumState<Arc<State>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    let writer = match authorized(&state, &name, &headers) {
        Ok(writer) => writer,
        Err((status, message)) => return refused(status, message),
    };
    let revision = match writer.writer.revision().await {
        Ok(revision) => revision,
        Err(e) => return refused(StatusCode::BAD_GATEWAY, &e.to_string()),
    };
    let stored = state.sources.iter().any(|s| {
        let status = s.borrow();
        status.name == name && model::store_has_rules(&status)
    });
    if revision.is_none() && stored {
        writer
            .revisions
            .store(edit::NONE, std::sync::atomic::Ordering::Release);
        return refused(StatusCode::CONFLICT, edit::NO_REVISIONS);
    }
    let text = match writer.stored_text().await {
        None => None,
        Some(Ok(text)) => Some(text),
        Some(Err(e)) => return refused(StatusCode::BAD_GATEWAY, &e),
    };
    let document = state
        .rules()
        .sources
        .into_iter()
        .find(|s| s.source == name)
        .map_or_else(|| serde_json::json!({}), |s| s.document);
    Json(EditView {
        source: name,
        writer: writer.writer.describe(),
        revision,
        document,
        text,
    })
    .into_response()
}

async fn edit_rules(
    AxumState(state): AxumState<Arc<State>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    Json(request): Json<EditRequest>,
) -> Response {
    let writer = match authorized(&state, &name, &headers) {
        Ok(writer) => writer,
        Err((status, message)) => return refused(status, message),
    };
    let outcome = edit::apply(&name, writer, &request).await;
    (outcome.status(), Json(outcome)).into_response()
}
