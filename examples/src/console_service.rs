//! The console service (`--bin console`): the axum service guarded by `sentinel-tower`, its
//! rules in etcd, with the sentinel console mounted at `/console`. Built here, as a library
//! function, so that the browser tests run the very service the binary serves.
//!
//! With the `transport` feature the service can also serve the Sentinel dashboard's commands
//! (`sentinel-transport`, read-only: rules are edited in the console, through etcd), and the
//! console's page shows every command the dashboard sent that the service refused.

use std::error::Error;
use std::sync::Arc;

use axum::http::{header, HeaderMap};
use axum::Router;
use sentinel_console::Console;
use sentinel_core::datasource::{CombinedJson, DataSource, Encoding};
use sentinel_core::Sentinel;
use sentinel_datasource_etcd::{EtcdConfig, EtcdRuleWriter, EtcdSource};

use crate::service_routes::{guarded_routes, DEFAULT_RULES};

/// The data source's name, as the console lists it.
pub const SOURCE_NAME: &str = "service-rules";

/// Where the console service reads its rules, and who may edit them.
#[derive(Debug, Clone)]
pub struct ConsoleServiceConfig {
    /// The etcd endpoint.
    pub etcd: String,
    /// The key holding the combined rule document.
    pub key: String,
    /// Editing is on for requests carrying `Authorization: Bearer <token>`; off when `None`.
    pub edit_token: Option<String>,
    /// With the `transport` feature: the Sentinel dashboard's command center to start (its
    /// metric series shared with the console), whose refused commands the page shows.
    /// `None` serves no dashboard.
    #[cfg(feature = "transport")]
    pub transport: Option<sentinel_transport::TransportConfig>,
}

/// The running pieces: the engine, the app to serve, the data source and the console.
#[derive(Debug)]
pub struct ConsoleService {
    /// The engine.
    pub sentinel: Sentinel,
    /// The routes: `GET /order/{id}`, `GET /flaky`, and the console under `/console`.
    pub app: Router,
    /// The etcd data source (close it on shutdown).
    pub source: DataSource,
    /// The console.
    pub console: Console,
    /// The dashboard's command center, when configured (shut it down on exit).
    #[cfg(feature = "transport")]
    pub transport: Option<sentinel_transport::Transport>,
}

/// Connects to etcd (storing [`DEFAULT_RULES`] if the key is missing), starts the data
/// source and builds the routes with the console mounted.
pub async fn console_service(
    config: &ConsoleServiceConfig,
) -> Result<ConsoleService, Box<dyn Error>> {
    let sentinel = Sentinel::new();
    let etcd = EtcdConfig::builder()
        .endpoints([config.etcd.as_str()])
        .build()?;
    let writer = EtcdRuleWriter::connect(etcd.clone()).await?;
    if writer.revision(&config.key).await?.is_none() {
        writer
            .put_bytes_if(&config.key, DEFAULT_RULES.as_bytes().to_vec(), None)
            .await?;
    }
    let source = DataSource::builder(
        EtcdSource::key(etcd.clone(), config.key.clone()),
        CombinedJson::new(),
    )
    .name(SOURCE_NAME)
    .start(&sentinel)
    .await?;

    let mut console = Console::builder(&sentinel)
        .source(source.status_watch())
        .writable(
            SOURCE_NAME,
            Arc::new(writer.at(config.key.clone())),
            Encoding::Combined,
        )
        // The editor starts from the key's text as stored, not the engine's normalised rules.
        .stored_text(SOURCE_NAME, EtcdSource::key(etcd, config.key.clone()));
    #[cfg(feature = "transport")]
    let transport = match config.transport.clone() {
        Some(transport) => {
            let transport =
                sentinel_transport::Transport::start(sentinel.clone(), transport).await?;
            // One metric series per process: the console reads the transport's.
            console = console
                .series(transport.series().clone())
                .transport(&transport);
            Some(transport)
        }
        None => None,
    };
    if let Some(token) = config.edit_token.clone() {
        let expected = format!("Bearer {token}");
        console = console.editing(move |headers: &HeaderMap| {
            headers
                .get(header::AUTHORIZATION)
                .is_some_and(|value| value.as_bytes() == expected.as_bytes())
        });
    }
    let console = console.build()?;

    let app = guarded_routes(&sentinel).merge(console.mount("/console"));
    Ok(ConsoleService {
        sentinel,
        app,
        source,
        console,
        #[cfg(feature = "transport")]
        transport,
    })
}
