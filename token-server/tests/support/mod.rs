//! What the token server's tests share: a protocol client, the Redis and Java checks and the
//! Java harness's processes (the fail-over TCP proxy is `sentinel_test_support::FailoverProxy`).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use sentinel_core::flow::{ClusterFlowConfig, FlowRule};
use sentinel_test_support::OutputLines;
use sentinel_token_server::protocol::{
    ClientCodec, FlowRequest, ParamValue, Request, RequestBody, Response, Status,
};
use sentinel_token_server::{Health, ServedFlow, TokenResult, TokenService};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::codec::Framed;

pub(crate) use sentinel_test_support::addresses::redis::{addr as redis_addr, START_HINT};

/// Flow 1 passes (9 left), flow 2 is blocked, anything else has no rule; `degraded` flips the
/// health. It serves flows 1 and 2, both for resource `GET:/orders`, with 9 passed and 2
/// blocked, and 0 passed and 4 blocked, in the last second.
#[derive(Debug, Default)]
pub(crate) struct Fake {
    pub(crate) degraded: AtomicBool,
}

impl TokenService for Fake {
    fn request_token(&self, flow_id: i64, _count: i32, _prioritized: bool) -> TokenResult {
        match flow_id {
            1 => TokenResult {
                status: Status::OK,
                remaining: 9,
                wait_in_ms: 0,
            },
            2 => TokenResult::of(Status::BLOCKED),
            _ => TokenResult::of(Status::NO_RULE_EXISTS),
        }
    }

    fn request_param_token(&self, _: i64, _: i32, params: &[ParamValue]) -> TokenResult {
        TokenResult {
            status: Status::OK,
            remaining: i32::try_from(params.len()).unwrap_or(0),
            wait_in_ms: 77,
        }
    }

    fn health(&self) -> Health {
        if self.degraded.load(Ordering::SeqCst) {
            Health::Degraded("redis down".into())
        } else {
            Health::Up
        }
    }

    fn served_flows(&self) -> Vec<ServedFlow> {
        let rule = |flow_id: i64, count: f64| {
            FlowRule::qps("GET:/orders", count)
                .cluster(ClusterFlowConfig::new(flow_id).global(true))
        };
        vec![
            ServedFlow::new(1, rule(1, 10.0)).with_qps(9, 2),
            ServedFlow::new(2, rule(2, 3.0)).with_qps(0, 4),
        ]
    }
}

/// A bound on every wait of these tests.
pub(crate) const WAIT: Duration = Duration::from_secs(10);

/// A token client speaking the protocol with the Rust codec.
pub(crate) struct Client {
    framed: Framed<TcpStream, ClientCodec>,
    next_id: i32,
}

impl Client {
    pub(crate) async fn connect(addr: SocketAddr) -> Self {
        let stream = tokio::time::timeout(WAIT, TcpStream::connect(addr))
            .await
            .expect("connect in time")
            .expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        Self {
            framed: Framed::new(stream, ClientCodec::default()),
            next_id: 1,
        }
    }

    /// Sends `body` with a fresh id and returns the answer.
    pub(crate) async fn call(&mut self, body: RequestBody) -> Response {
        let id = self.next_id;
        self.next_id += 1;
        self.send(Request { id, body }).await;
        let response = self.recv().await.expect("an answer");
        assert_eq!(
            response.id, id,
            "answers come in order, with the request's id"
        );
        response
    }

    pub(crate) async fn flow(&mut self, flow_id: i64, count: i32) -> Response {
        self.call(RequestBody::Flow(FlowRequest {
            flow_id,
            count,
            prioritized: false,
        }))
        .await
    }

    pub(crate) async fn send(&mut self, request: Request) {
        self.framed.send(request).await.expect("send");
    }

    /// Raw bytes, for frames the codec would not write.
    pub(crate) async fn send_raw(&mut self, bytes: &[u8]) {
        use tokio::io::AsyncWriteExt;
        self.framed.get_mut().write_all(bytes).await.expect("write");
    }

    /// The next answer; `None` when the server closed (or reset) the connection.
    pub(crate) async fn recv(&mut self) -> Option<Response> {
        let item = tokio::time::timeout(WAIT, self.framed.next())
            .await
            .expect("an answer or a close in time")?;
        Some(item.ok()?.expect("a well-formed answer"))
    }

    /// Whether anything arrives within `within`.
    pub(crate) async fn silent_for(&mut self, within: Duration) -> bool {
        tokio::time::timeout(within, self.framed.next())
            .await
            .is_err()
    }
}

/// A plain HTTP GET (the connection closed after it); the whole answer.
pub(crate) async fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .expect("write");
    let mut text = String::new();
    tokio::time::timeout(WAIT, stream.read_to_string(&mut text))
        .await
        .expect("answer in time")
        .expect("read");
    text
}

/// Fails the test, naming the script, unless the shared Redis answers.
pub(crate) async fn require_redis() -> String {
    let addr = redis_addr();
    let up = tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(&addr))
        .await
        .is_ok_and(|c| c.is_ok());
    assert!(up, "no Redis at {addr}: {START_HINT}");
    addr
}

/// The workspace root.
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_owned()
}

/// The script that builds the Java harness.
pub(crate) const JAVA_BUILD_SCRIPT: &str = "interop/token-server/build.sh";

/// The Java harness's classpath (its classes and Sentinel's jars), or a failure that names
/// the script that builds it.
pub(crate) fn java_classpath(interop: &Path) -> Result<String, String> {
    let missing = |what: &str| {
        format!(
            "the Java harness is not built ({what}): run `{JAVA_BUILD_SCRIPT}` (needs java and mvn; \
             fetches sentinel-cluster-client-default 1.8.9 from Maven Central once)"
        )
    };
    let classes = interop.join("target/classes");
    if !classes.join("tokenserver/TokenClientLoad.class").is_file() {
        return Err(missing(&format!("no {}", classes.display())));
    }
    let jars = std::fs::read_to_string(interop.join("target/classpath.txt"))
        .map_err(|e| missing(&format!("target/classpath.txt: {e}")))?;
    if Command::new("java").arg("-version").output().is_err() {
        return Err(missing("no `java` on PATH"));
    }
    Ok(format!("{}:{}", classes.display(), jars.trim()))
}

/// The classpath, or panics with the message naming the script.
pub(crate) fn require_java() -> String {
    java_classpath(&root().join("interop/token-server")).unwrap_or_else(|e| panic!("{e}"))
}

/// A Java process of the harness, its stdout read line by line.
pub(crate) struct Java {
    pub(crate) child: Child,
    pub(crate) out: OutputLines,
}

impl Java {
    /// Starts `main` with `args`, Sentinel's logs in a temporary directory.
    pub(crate) fn start(
        classpath: &str,
        main: &str,
        namespace: &str,
        args: &[String],
        logs: &Path,
    ) -> Self {
        let mut child = Command::new("java")
            .arg("-Xss512k")
            .arg("-XX:+UseSerialGC")
            .arg("-XX:TieredStopAtLevel=1")
            .arg(format!("-Dproject.name={namespace}"))
            .arg(format!("-Dcsp.sentinel.log.dir={}", logs.display()))
            .arg("-cp")
            .arg(classpath)
            .arg(main)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start java");
        let out = OutputLines::read(child.stdout.take().expect("piped"));
        Self { child, out }
    }

    /// The per-second lines (`second <s> pass <n> block <n> fail <n>`) once it is done.
    pub(crate) fn seconds(&mut self, timeout: Duration) -> BTreeMap<u64, (u64, u64, u64)> {
        self.out.wait_for("done", timeout);
        let mut all = BTreeMap::new();
        for line in self.out.seen() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if let ["second", s, "pass", p, "block", b, "fail", x] = f.as_slice() {
                let n = |v: &str| v.parse::<u64>().expect("a count");
                all.insert(n(s), (n(p), n(b), n(x)));
            }
        }
        all
    }
}

impl Drop for Java {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `sentinel-token-server` process (this crate's binary) on a free loopback port.
pub(crate) struct ServerProcess {
    pub(crate) child: Child,
    pub(crate) addr: SocketAddr,
    pub(crate) out: OutputLines,
}

impl ServerProcess {
    /// Starts the binary on `redis` with key prefix `prefix` and the rules file `rules`.
    pub(crate) fn start(redis: &str, prefix: &str, rules: &Path) -> Self {
        Self::start_with(redis, prefix, rules, &[])
    }

    /// [`start`](Self::start) with more arguments.
    pub(crate) fn start_with(redis: &str, prefix: &str, rules: &Path, more: &[&str]) -> Self {
        Self::start_on(&["--redis", redis], prefix, rules, more)
    }

    /// Starts the binary on the Redis that `target` names (`--redis ...`, `--redis-cluster
    /// ...`), with more arguments.
    pub(crate) fn start_on(target: &[&str], prefix: &str, rules: &Path, more: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sentinel-token-server"))
            .args(["--bind", "127.0.0.1:0", "--prefix", prefix])
            .args(target)
            .arg("--rules")
            .arg(rules)
            .args(more)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start sentinel-token-server");
        let mut out = OutputLines::read(child.stdout.take().expect("piped"));
        out.wait_for("listening on", WAIT);
        let addr = out
            .seen()
            .iter()
            .find_map(|l| l.strip_prefix("listening on "))
            .expect("the address line")
            .parse()
            .expect("an address");
        Self { child, addr, out }
    }

    /// SIGKILL: no graceful anything (its lease is lost).
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A rules file with one global cluster flow rule for the harness's resource.
pub(crate) fn write_rules(dir: &Path, flow_id: i64, count: u64) -> PathBuf {
    let path = dir.join("cluster-flow-rules.json");
    std::fs::write(
        &path,
        format!(
            r#"[{{"resource":"token-server-interop","count":{count},"clusterMode":true,
               "clusterConfig":{{"flowId":{flow_id},"thresholdType":1,"fallbackToLocalWhenFail":true}}}}]"#
        ),
    )
    .expect("write rules");
    path
}

/// A `flowId` and key prefix no other run uses.
pub(crate) fn unique_flow(test: &str) -> (i64, String) {
    let prefix = sentinel_test_support::unique_key("sentinel:token-server:test", test);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.subsec_nanos());
    (i64::from(nanos % 1_000_000) + 1, prefix)
}

impl Java {
    /// Tells a ready harness to start its run at `second` (Unix seconds).
    pub(crate) fn go(&mut self, second: u64) {
        use std::io::Write;
        let stdin = self.child.stdin.as_mut().expect("stdin piped");
        writeln!(stdin, "go {second}").expect("write go");
        stdin.flush().expect("flush");
    }
}

/// Unix seconds now.
pub(crate) fn unix_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Sums the per-second series of several harness processes: second -> (pass, block, fail).
pub(crate) fn sum_seconds(
    all: &[BTreeMap<u64, (u64, u64, u64)>],
) -> BTreeMap<u64, (u64, u64, u64)> {
    let mut total = BTreeMap::new();
    for series in all {
        for (s, (p, b, f)) in series {
            let e = total.entry(*s).or_insert((0, 0, 0));
            e.0 += p;
            e.1 += b;
            e.2 += f;
        }
    }
    total
}
