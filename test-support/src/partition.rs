//! A TCP proxy that stands for a network partition.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use sentinel_core::datasource::testkit::Unsupported;
use tokio::task::AbortHandle;

use crate::servers::services;

/// A TCP proxy in front of a server, to cut a client off from a server that keeps running (a
/// network partition): writes made meanwhile reach the server directly.
#[derive(Debug)]
pub struct Partition {
    addr: String,
    open: Arc<AtomicBool>,
    connections: Arc<Mutex<Vec<AbortHandle>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Partition {
    /// A proxy on a free loopback port to `target` (`host:port`).
    ///
    /// # Panics
    ///
    /// When no loopback port can be bound.
    pub async fn start(target: &str) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy");
        let addr = listener.local_addr().expect("proxy address").to_string();
        let open = Arc::new(AtomicBool::new(true));
        let connections = Arc::new(Mutex::new(Vec::new()));
        let (target, is_open, conns) = (target.to_owned(), open.clone(), connections.clone());
        let accept = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if !is_open.load(Ordering::SeqCst) {
                    continue; // dropped: refused while cut
                }
                let target = target.clone();
                let task = tokio::spawn(async move {
                    if let Ok(mut server) = tokio::net::TcpStream::connect(&target).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                if let Ok(mut all) = conns.lock() {
                    all.push(task.abort_handle());
                }
            }
        });
        Self {
            addr,
            open,
            connections,
            accept,
        }
    }

    /// The `host:port` a client reaches the server through.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Cuts every connection and refuses new ones.
    pub fn cut(&self) {
        self.open.store(false, Ordering::SeqCst);
        if let Ok(mut all) = self.connections.lock() {
            for connection in all.drain(..) {
                connection.abort();
            }
        }
    }

    /// Lets connections through again.
    pub fn heal(&self) {
        self.open.store(true, Ordering::SeqCst);
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        self.cut();
        self.accept.abort();
    }
}

/// How a conformance harness stops and starts "its server": not at all, by restarting a
/// services-script instance, or by cutting a [`Partition`] in front of a server that keeps
/// running (so a write can still reach it while the source is cut off).
#[derive(Debug, Default)]
pub enum ServerControl {
    /// The harness cannot stop its server.
    #[default]
    Fixed,
    /// `scripts/services.sh stop|start <instance> --keep-data`.
    Restart(&'static str),
    /// Sources go through this proxy.
    Partition(Partition),
}

impl ServerControl {
    /// A partition in front of `target` (`host:port`).
    pub async fn partition(target: &str) -> Self {
        Self::Partition(Partition::start(target).await)
    }

    /// Where a source reaches `server`: through the proxy, when there is one.
    pub fn addr<'a>(&'a self, server: &'a str) -> &'a str {
        match self {
            Self::Partition(partition) => partition.addr(),
            _ => server,
        }
    }

    /// True when the server keeps running while "stopped", so it takes writes meanwhile.
    pub fn writable_while_down(&self) -> bool {
        matches!(self, Self::Partition(_))
    }

    /// What [`ConformanceHarness::stop_server`](sentinel_core::datasource::testkit::ConformanceHarness::stop_server) does.
    pub async fn stop(&self) -> Result<(), Unsupported> {
        match self {
            Self::Fixed => return Err(Unsupported),
            Self::Restart(instance) => {
                services(&["stop", instance, "--keep-data"]).await;
            }
            Self::Partition(partition) => partition.cut(),
        }
        Ok(())
    }

    /// What [`ConformanceHarness::start_server`](sentinel_core::datasource::testkit::ConformanceHarness::start_server) does.
    pub async fn start(&self) -> Result<(), Unsupported> {
        match self {
            Self::Fixed => return Err(Unsupported),
            Self::Restart(instance) => {
                services(&["start", instance, "--keep-data"]).await;
            }
            Self::Partition(partition) => partition.heal(),
        }
        Ok(())
    }
}
