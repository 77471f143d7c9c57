//! An edit derived from an older view than the store's current value is refused and
//! changes nothing, whoever read the rules in between, across a restart of the service,
//! and with two dashboards editing one family (issue #46, point 1). etcd.

use super::*;

/// The refusal a stale edit answers.
fn assert_stale(result: Result<(), (u16, String)>) {
    let (status, body) = result.expect_err("a stale edit is refused");
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("changed since the page loaded") && body.contains("reload"),
        "{body}"
    );
    assert!(
        !body.contains("Some("),
        "revisions print as numbers: {body}"
    );
}

/// The page adds a rule to the list it was shown before the direct write of `GET:/direct`:
/// refused, the store still at `revision` and the engine enforcing the direct write.
async fn add_is_refused_and_the_direct_write_kept(
    page: &Dashboard,
    shown: &Shown,
    store: &Arc<dyn WritableDataSource>,
    revision: Option<u64>,
    sentinel: &Sentinel,
) {
    assert_stale(
        page.set_rules("flow", &shown.adding("GET:/added", 2.0))
            .await,
    );
    assert_unchanged(
        store,
        revision,
        sentinel,
        &[("GET:/a", 1.0), ("GET:/direct", 9.0)],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_direct_store_write_between_a_page_read_and_its_edit_is_refused_whoever_read_since() {
    let (store, sentinel, source) = etcd_with("stale-reader", &[("GET:/a", 1.0)]).await;
    let transport = start(&sentinel, store_config("stale-reader-app", store.clone())).await;
    let page = Dashboard::calling(local(&transport));
    let shown = Shown::read(&page).await;

    // Someone changes the key directly; then a second reader (a script, from the same
    // address) reads the rules: today's single "last read" revision moved with it.
    write_directly(&store, &sentinel, &[("GET:/a", 1.0), ("GET:/direct", 9.0)]).await;
    let revision = store.revision().await.expect("a revision");
    let script = Dashboard::calling(local(&transport));
    let (_, listed) = script.get("getRules", &[("type", "flow")]).await;
    assert!(listed.contains("GET:/direct"), "{listed}");

    // The page adds a rule to what it showed: refused, the direct write kept.
    add_is_refused_and_the_direct_write_kept(&page, &shown, &store, revision, &sentinel).await;

    // After a reload, the same change goes through on top of the direct write.
    let shown = Shown::read(&page).await;
    page.set_rules("flow", &shown.adding("GET:/added", 2.0))
        .await
        .expect("an edit of the rules in force");
    assert_eq!(
        flow_of(&sentinel),
        pairs(&[("GET:/a", 1.0), ("GET:/added", 2.0), ("GET:/direct", 9.0)])
    );
    transport.shutdown().await;
    source.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_between_a_page_read_and_its_edit_refuses_the_edit() {
    let (store, sentinel, source) = etcd_with("stale-restart", &[("GET:/a", 1.0)]).await;
    let before = start(&sentinel, store_config("restart-app", store.clone())).await;
    let shown = Shown::read(&Dashboard::calling(local(&before))).await;
    before.shutdown().await;

    // While the service is down the key changes; the service starts again and nobody
    // reads the rules before the page (loaded before the restart) sends its edit.
    write_directly(&store, &sentinel, &[("GET:/a", 1.0), ("GET:/direct", 9.0)]).await;
    let revision = store.revision().await.expect("a revision");
    let after = start(&sentinel, store_config("restart-app", store.clone())).await;
    let page = Dashboard::calling(local(&after));
    add_is_refused_and_the_direct_write_kept(&page, &shown, &store, revision, &sentinel).await;
    after.shutdown().await;
    source.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_dashboards_editing_the_same_family_never_overwrite_each_other() {
    let (store, sentinel, source) = etcd_with("stale-two", &[("GET:/a", 1.0)]).await;
    // Two dashboards at two addresses: one on loopback, one calling this host's outward
    // address (admitted as this host).
    let transport = start(
        &sentinel,
        store_config("two-dashboards-app", store.clone())
            .bind_ip(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
    )
    .await;
    let first = Dashboard::calling(local(&transport));
    let second = Dashboard::calling(SocketAddr::new(outward_ip(), transport.port()));
    let first_shown = Shown::read(&first).await;
    let second_shown = Shown::read(&second).await;
    second
        .set_rules("flow", &second_shown.adding("GET:/b", 2.0))
        .await
        .expect("the second dashboard adds a rule");
    // The first one adds another rule to the list it showed, which lacks the second's.
    assert_stale(
        first
            .set_rules("flow", &first_shown.adding("GET:/c", 3.0))
            .await,
    );
    assert_eq!(
        flow_of(&sentinel),
        pairs(&[("GET:/a", 1.0), ("GET:/b", 2.0)])
    );
    // Reloaded, it adds its rule beside the second's.
    let first_shown = Shown::read(&first).await;
    first
        .set_rules("flow", &first_shown.adding("GET:/c", 3.0))
        .await
        .expect("the first dashboard adds after a reload");
    // The second one, not reloaded, deletes the rule it added, from its own list (which
    // lacks the first one's): refused.
    let own = second_shown.adding("GET:/b", 2.0);
    let own = Shown(serde_json::from_str(&own).expect("JSON"));
    assert_stale(second.set_rules("flow", &own.deleting("GET:/b")).await);
    assert_eq!(
        flow_of(&sentinel),
        pairs(&[("GET:/a", 1.0), ("GET:/b", 2.0), ("GET:/c", 3.0)])
    );
    // Reloaded, it adds a rule and then edits the rule it just added (its own write is
    // its view): both go through.
    let second_shown = Shown::read(&second).await;
    second
        .set_rules("flow", &second_shown.adding("GET:/d", 4.0))
        .await
        .expect("an add");
    let second_shown = Shown::read(&second).await;
    second
        .set_rules("flow", &second_shown.editing("GET:/d", 5.0))
        .await
        .expect("an edit of the rule just added");
    assert_eq!(
        flow_of(&sentinel),
        pairs(&[
            ("GET:/a", 1.0),
            ("GET:/b", 2.0),
            ("GET:/c", 3.0),
            ("GET:/d", 5.0)
        ])
    );
    transport.shutdown().await;
    source.close().await;
}
