//! The dashboard example (`--bin transport`), run as the README runs it: the service's route
//! is guarded, and its command center shows the route's resource and rule and takes a
//! memory-only edit from the dashboard.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use sentinel_test_support::{post_form, OutputLines};

const WAIT: Duration = Duration::from_secs(20);

/// The example, running; killed when dropped.
struct Example(Child);

impl Drop for Example {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_serves_the_dashboard_commands_for_its_route() {
    let (listen, command) = (free_port(), free_port());
    let mut child = Command::new(env!("CARGO_BIN_EXE_transport"))
        .args(["--listen", &format!("127.0.0.1:{listen}")])
        .args(["--command-port", &command.to_string()])
        .arg("--memory-only-edits")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the example starts");
    let mut output = OutputLines::read(child.stdout.take().expect("piped stdout"));
    let _example = Example(child);
    output.wait_for("listening on", WAIT);
    let line = output
        .seen()
        .iter()
        .find(|l| l.starts_with("command center on"))
        .cloned()
        .expect("the command center's line");
    let port = line
        .split(':')
        .nth(1)
        .and_then(|p| p.split_whitespace().next())
        .and_then(|p| p.parse::<u16>().ok())
        .expect("a port");
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("a client");
    let mut codes = Vec::new();
    for id in 0..8 {
        let response = client
            .get(format!("http://127.0.0.1:{listen}/order/{id}"))
            .send()
            .await
            .expect("the service answers");
        codes.push(response.status().as_u16());
    }
    assert_eq!(codes.iter().filter(|c| **c == 200).count(), 5, "{codes:?}");
    let ask = |path: String| {
        let client = client.clone();
        async move {
            client
                .get(format!("http://127.0.0.1:{port}/{path}"))
                .send()
                .await
                .expect("the command center answers")
                .text()
                .await
                .unwrap_or_default()
        }
    };
    let nodes = ask("clusterNode?type=notZero".into()).await;
    assert!(nodes.contains("GET:/order/{id}"), "{nodes}");
    let rules = ask("getRules?type=flow".into()).await;
    assert!(rules.contains("GET:/order/{id}"), "{rules}");
    let data = r#"[{"resource":"GET:/order/{id}","count":50.0,"grade":1,"limitApp":"default"}]"#;
    let url = format!("http://127.0.0.1:{port}/setRules");
    let answer = post_form(&client, &url, &[("type", "flow"), ("data", data)])
        .await
        .expect("the command center answers")
        .text()
        .await
        .unwrap_or_default();
    assert_eq!(answer, "success");
    assert!(ask("getRules?type=flow".into()).await.contains("50.0"));
}
