//! The health endpoint: `GET /health` answers 200 while decisions come from the shared
//! budget, 503 while starting or degraded, with a small JSON body.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::server::{stopped, Clients, ServerError};
use crate::service::{Health, TokenService};

/// The largest request head read.
const MAX_HEAD: usize = 4096;

pub(crate) async fn start(
    addr: SocketAddr,
    service: Arc<dyn TokenService>,
    clients: Arc<Clients>,
    mut stop: watch::Receiver<bool>,
) -> Result<SocketAddr, ServerError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind { addr, source })?;
    let local = listener
        .local_addr()
        .map_err(|source| ServerError::Bind { addr, source })?;
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = stopped(&mut stop) => break,
                accepted = listener.accept() => {
                    if let Ok((stream, _)) = accepted {
                        let (service, clients) = (service.clone(), clients.clone());
                        tokio::spawn(async move {
                            let _ = tokio::time::timeout(
                                Duration::from_secs(2),
                                respond(stream, service.as_ref(), &clients),
                            )
                            .await;
                        });
                    }
                }
            }
        }
    });
    Ok(local)
}

async fn respond(
    mut stream: TcpStream,
    service: &dyn TokenService,
    clients: &Clients,
) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(256);
    let mut buf = [0u8; 512];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = head.split(|b| *b == b'\n').next().unwrap_or(&[]);
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (code, body) = if method == "GET" && (path == "/health" || path.starts_with("/health?")) {
        let (code, status, reason) = match service.health() {
            Health::Up => (200, "UP", String::new()),
            Health::Starting => (503, "STARTING", String::new()),
            Health::Degraded(why) => (503, "DEGRADED", why),
        };
        let reason: String = reason
            .chars()
            .filter(|c| !c.is_control() && *c != '"' && *c != '\\')
            .collect();
        (
            code,
            format!(
                "{{\"status\":\"{status}\",\"clients\":{},\"reason\":\"{reason}\"}}",
                clients.total()
            ),
        )
    } else {
        (404, "{\"status\":\"NOT_FOUND\"}".to_owned())
    };
    let text = match code {
        200 => "OK",
        404 => "Not Found",
        _ => "Service Unavailable",
    };
    let response = format!(
        "HTTP/1.1 {code} {text}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}
