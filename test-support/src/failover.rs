//! A TCP proxy in front of several servers that fails over: what a TCP load balancer with
//! health checks (or a Kubernetes Service) does for clients that reach "one address".

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};

/// A TCP proxy on a free loopback port in front of `upstreams`: each new connection goes to
/// the first upstream that accepts it within 500 ms, and is then relayed both ways until
/// either side closes. A client whose server died reconnects through it to the next live
/// one. Dropping it stops accepting (relayed connections end with their sides).
///
/// ```no_run
/// # async fn demo(a: std::net::SocketAddr, b: std::net::SocketAddr) {
/// let proxy = sentinel_test_support::FailoverProxy::start(vec![a, b]).await;
/// // clients connect to proxy.addr(); kill `a` and new connections reach `b`
/// # let _ = proxy.addr();
/// # }
/// ```
#[derive(Debug)]
pub struct FailoverProxy {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl FailoverProxy {
    /// How long a connection to one upstream may take before the next is tried.
    pub const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

    /// Binds the proxy and starts relaying. Panics if no loopback port can be bound (a test
    /// helper).
    pub async fn start(upstreams: Vec<SocketAddr>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let upstreams = Arc::new(upstreams);
        let task = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let upstreams = upstreams.clone();
                tokio::spawn(async move {
                    for upstream in upstreams.iter() {
                        let connect = tokio::time::timeout(
                            Self::CONNECT_TIMEOUT,
                            TcpStream::connect(upstream),
                        );
                        if let Ok(Ok(mut server)) = connect.await {
                            let _ = server.set_nodelay(true);
                            let _ = client.set_nodelay(true);
                            let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                            return;
                        }
                    }
                });
            }
        });
        Self { addr, task }
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for FailoverProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// An upstream that answers each connection with `name` and closes.
    async fn upstream(name: &'static str) -> (SocketAddr, tokio::task::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let task = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let _ = stream.write_all(name.as_bytes()).await;
            }
        });
        (addr, task)
    }

    async fn read_through(proxy: &FailoverProxy) -> String {
        let mut stream = TcpStream::connect(proxy.addr()).await.expect("connect");
        let mut text = String::new();
        tokio::time::timeout(Duration::from_secs(10), stream.read_to_string(&mut text))
            .await
            .expect("an answer in time")
            .expect("read");
        text
    }

    #[tokio::test]
    async fn connections_go_to_the_first_live_upstream() {
        let (first, first_task) = upstream("first").await;
        let (second, second_task) = upstream("second").await;
        let proxy = FailoverProxy::start(vec![first, second]).await;
        assert_eq!(read_through(&proxy).await, "first");
        first_task.abort();
        let _ = first_task.await;
        assert_eq!(read_through(&proxy).await, "second", "fails over");
        second_task.abort();
    }
}
