//! Commands registered beside the built-in ones (what the token server answers the
//! dashboard's cluster page with): served with Java's parameters and status codes, listed by
//! `api`, read-only by default for the ones that write, and never shadowing a built-in
//! command but `getClusterMode`.

use std::sync::atomic::{AtomicU64, Ordering};

use sentinel_transport::{CommandRequest, CommandResponse, RefusalReason, TransportError};

use super::*;

/// A transport for `app` with a read command that echoes its parameter and caller, a write
/// command that counts its calls, and `getClusterMode` replaced.
fn with_commands(app: &str, writes: Arc<AtomicU64>) -> sentinel_transport::TransportConfigBuilder {
    config(app)
        .command(
            "cluster/server/info",
            "the token server's state",
            |request: &CommandRequest<'_>| match request.param("namespace") {
                Some(namespace) => CommandResponse::success(format!(
                    "{} {} {namespace}",
                    request.app(),
                    request.caller()
                )),
                None => CommandResponse::failure("failed: namespace cannot be empty"),
            },
        )
        .write_command(
            "cluster/server/modifyFlowConfig",
            "changes the token server's flow config",
            move |_: &CommandRequest<'_>| {
                writes.fetch_add(1, Ordering::SeqCst);
                CommandResponse::success("success")
            },
        )
        .command(
            "getClusterMode",
            "this process's cluster mode",
            |_: &CommandRequest<'_>| {
                CommandResponse::success(
                    r#"{"mode":1,"lastModified":1,"clientAvailable":false,"serverAvailable":true}"#,
                )
            },
        )
}

#[tokio::test]
async fn registered_commands_are_served_listed_and_write_ones_refused_while_read_only() {
    let sentinel = Sentinel::new();
    let events = refused_events(&sentinel);
    let writes = Arc::new(AtomicU64::new(0));
    let read_only = start(&sentinel, with_commands("registered-ro", writes.clone())).await;
    let dashboard = Dashboard::calling(local(&read_only));

    // A read command, with GET and POST parameters, told the app and the caller.
    let (status, body) = dashboard
        .get("cluster/server/info", &[("namespace", "orders")])
        .await;
    assert_eq!(
        (status, body.as_str()),
        (200, "registered-ro 127.0.0.1 orders")
    );
    let (status, body) = dashboard
        .post("cluster/server/info", &[("namespace", "pay")])
        .await;
    assert_eq!(
        (status, body.as_str()),
        (200, "registered-ro 127.0.0.1 pay")
    );
    // Its failure is Java's 400, not a refusal.
    let (status, body) = dashboard.get("cluster/server/info", &[]).await;
    assert_eq!(
        (status, body.as_str()),
        (400, "failed: namespace cannot be empty")
    );

    // The replaced getClusterMode answers what the component says.
    let (status, body) = dashboard.get("getClusterMode", &[]).await;
    assert_eq!(status, 200);
    let mode: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(mode["mode"], 1);
    assert_eq!(mode["serverAvailable"], true);

    // `api` lists them with their descriptions, getClusterMode once.
    let (_, body) = dashboard.get("api", &[]).await;
    let api: Vec<serde_json::Value> = serde_json::from_str(&body).expect("a JSON list");
    let urls: Vec<&str> = api.iter().filter_map(|c| c["url"].as_str()).collect();
    assert!(urls.contains(&"/cluster/server/info"), "{urls:?}");
    assert!(
        urls.contains(&"/cluster/server/modifyFlowConfig"),
        "{urls:?}"
    );
    assert_eq!(
        urls.iter().filter(|u| **u == "/getClusterMode").count(),
        1,
        "{urls:?}"
    );

    // A write command: refused while read-only, counted under its own name, an event.
    let (status, body) = dashboard
        .post("cluster/server/modifyFlowConfig", &[("data", "{}")])
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("read-only"), "{body}");
    assert_eq!(
        writes.load(Ordering::SeqCst),
        0,
        "the handler was not called"
    );
    let status = read_only.status();
    assert_eq!(
        status.refused_by_reason.get(&RefusalReason::ReadOnly),
        Some(&1)
    );
    assert_eq!(
        status.last_refused.map(|r| r.command).as_deref(),
        Some("cluster/server/modifyFlowConfig")
    );
    let seen = events.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert_eq!(seen.len(), 1, "{seen:#?}");
    assert!(
        seen[0].starts_with("transport cluster/server/modifyFlowConfig read_only "),
        "{seen:#?}"
    );
    read_only.shutdown().await;

    // Read-write: the write command runs.
    let writable = start(
        &sentinel,
        with_commands("registered-rw", writes.clone()).access(Access::ReadWrite),
    )
    .await;
    let dashboard = Dashboard::calling(local(&writable));
    let (status, body) = dashboard
        .post("cluster/server/modifyFlowConfig", &[("data", "{}")])
        .await;
    assert_eq!((status, body.as_str()), (200, "success"));
    assert_eq!(writes.load(Ordering::SeqCst), 1);
    assert_eq!(writable.status().refused, 0);
    writable.shutdown().await;
}

#[test]
fn a_registered_command_cannot_shadow_a_built_in_one_or_be_registered_twice() {
    let reply = |_: &CommandRequest<'_>| CommandResponse::success("x");
    for builder in [
        config("shadow").command("setRules", "no", reply),
        config("shadow").write_command("metric", "no", reply),
        config("twice")
            .command("cluster/server/info", "a", reply)
            .command("cluster/server/info", "b", reply),
        config("bad-name").command("/cluster/server/info", "no", reply),
    ] {
        match builder.build() {
            Err(TransportError::Config { setting, .. }) => assert_eq!(setting, "command"),
            other => panic!("expected a config error, got {other:?}"),
        }
    }
}
