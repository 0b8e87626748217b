//! Apply and status helpers against the real API server: a write whose desired state is
//! already in place sends no request, counted by the API server itself.
mod common;

use std::sync::Arc;

use bosun_runtime::apply::{Applier, Outcome};
use bosun_runtime::manager::{Manager, ManagerConfig, Scope};
use bosun_testenv::{test_namespace, ControlPlane, Options};
use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};

fn cm(ns: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some("applied".into()),
            namespace: Some(ns.into()),
            ..Default::default()
        },
        data: Some([("k".to_string(), value.to_string())].into()),
        ..Default::default()
    }
}

async fn writes(
    cp: &ControlPlane,
    client: &kube::Client,
    resource: &str,
    subresource: Option<&str>,
) -> f64 {
    let mut total = 0.0;
    for verb in ["APPLY", "PATCH", "PUT", "POST"] {
        let mut labels = vec![("resource", resource), ("verb", verb)];
        if let Some(s) = subresource {
            labels.push(("subresource", s));
        }
        let n = cp.request_count(client, &labels).await.expect("metrics");
        // Series without a subresource label are the main resource.
        total += if subresource.is_none() {
            n - cp
                .request_count(
                    client,
                    &[
                        ("resource", resource),
                        ("verb", verb),
                        ("subresource", "status"),
                    ],
                )
                .await
                .expect("metrics")
        } else {
            n
        };
    }
    total
}

/// Waits (up to 10 s) until the write count reaches `at_least`, then returns the count.
async fn settled_writes(
    cp: &ControlPlane,
    client: &kube::Client,
    resource: &str,
    subresource: Option<&str>,
    at_least: f64,
) -> f64 {
    eventually(10, || async {
        let n = writes(cp, client, resource, subresource).await;
        (n >= at_least).then_some(n)
    })
    .await
    .unwrap_or(writes(cp, client, resource, subresource).await)
}

// One test, run in sequence: request counts are global to the API server.
#[tokio::test]
async fn writes_are_skipped_when_desired_state_is_in_place() {
    let cp = ControlPlane::start(Options::default())
        .await
        .expect("control plane");
    let client = cp.client().await.expect("client");
    let ns = test_namespace(&client, "apply").await.expect("namespace");
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);

    // --- apply helper ---
    let applier = Applier::new("bosun-test");
    let before = writes(&cp, &client, "configmaps", None).await;
    assert_eq!(
        applier
            .apply(&api, &cm(&ns, "a"), None)
            .await
            .expect("apply"),
        Outcome::Applied
    );
    // The API server counts a request just after answering it: wait for the count.
    let after_first = settled_writes(&cp, &client, "configmaps", None, before + 1.0).await;
    assert_eq!(after_first - before, 1.0, "the first apply is one request");

    let cached = api.get_metadata("applied").await.expect("meta").metadata;
    assert_eq!(
        applier
            .apply(&api, &cm(&ns, "a"), Some(&cached))
            .await
            .expect("apply"),
        Outcome::Unchanged
    );
    // A new applier (a restarted operator) trusts the hash it finds.
    let restarted = Applier::new("bosun-test");
    assert_eq!(
        restarted
            .apply(&api, &cm(&ns, "a"), Some(&cached))
            .await
            .expect("apply"),
        Outcome::Unchanged
    );
    assert_eq!(
        writes(&cp, &client, "configmaps", None).await,
        after_first,
        "no-op applies sent no request"
    );
    // A cache that does not show the object yet (it lags behind this applier's creation, or
    // behind a move that relabelled it): the create is refused, the live object read is this
    // applier's exact state, and nothing is written, so nothing is reported written.
    assert_eq!(
        applier
            .apply(&api, &cm(&ns, "a"), None)
            .await
            .expect("apply"),
        Outcome::Unchanged,
        "an object found in place after a refused create was reported written"
    );
    assert_eq!(
        api.get_metadata("applied")
            .await
            .expect("meta")
            .metadata
            .resource_version,
        cached.resource_version,
        "found in place, yet written"
    );

    // A changed desired state is written.
    assert_eq!(
        applier
            .apply(&api, &cm(&ns, "b"), Some(&cached))
            .await
            .expect("apply"),
        Outcome::Applied
    );
    let cached = api.get_metadata("applied").await.expect("meta").metadata;

    // Someone else edits the object: the resourceVersion moves, so the applier repairs it.
    let mut edited = api.get("applied").await.expect("get");
    edited.data = Some([("k".to_string(), "tampered".to_string())].into());
    edited.metadata.managed_fields = None;
    api.replace("applied", &PostParams::default(), &edited)
        .await
        .expect("edit");
    let moved = api.get_metadata("applied").await.expect("meta").metadata;
    assert_ne!(moved.resource_version, cached.resource_version);
    assert_eq!(
        applier
            .apply(&api, &cm(&ns, "b"), Some(&moved))
            .await
            .expect("apply"),
        Outcome::Applied
    );
    let repaired = api.get("applied").await.expect("get");
    assert_eq!(
        repaired.data.and_then(|d| d.get("k").cloned()).as_deref(),
        Some("b")
    );

    // --- status helper, through a running operator ---
    install_crd(&client).await.expect("crd");
    let cfg = ManagerConfig {
        scope: Scope::Namespaces(vec![ns.clone()]),
        ..Default::default()
    };
    let manager = Manager::new(client.clone(), cfg).with_operator(Arc::new(WidgetOperator {
        identity: "solo".into(),
    }));
    let metrics = manager.metrics();
    let (stop_tx, run) = run_until_stopped(manager);

    let widgets: Api<Widget> = Api::namespaced(client.clone(), &ns);
    widgets
        .create(&PostParams::default(), &widget(&ns, "w1", "one", 0))
        .await
        .expect("create");
    let status = eventually(20, || async {
        widgets
            .get("w1")
            .await
            .ok()
            .and_then(|w| w.status)
            .filter(|s| s.value == "one")
    })
    .await
    .expect("status written");
    assert_eq!(status.observed_generation, Some(1));
    let status_writes = settled_writes(&cp, &client, "widgets", Some("status"), 1.0).await;
    assert_eq!(status_writes, 1.0, "one status write for one change");

    // Metadata-only changes trigger reconciles that must not write status.
    let reconciles = |m: &bosun_runtime::metrics::Metrics| {
        bosun_testenv_sum(
            &m.encode(),
            r#"controller_runtime_reconcile_total{controller="widget",result="success"}"#,
        )
    };
    let r0 = reconciles(&metrics);
    for i in 0..3 {
        let patch = serde_json::json!({"metadata": {"labels": {"poke": format!("p{i}")}}});
        widgets
            .patch("w1", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("poke");
        let target = r0 + f64::from(i + 1);
        eventually(10, || async {
            (reconciles(&metrics) >= target).then_some(())
        })
        .await
        .expect("reconciled");
    }
    assert_eq!(
        writes(&cp, &client, "widgets", Some("status")).await,
        status_writes,
        "unchanged status not rewritten"
    );

    // A spec change writes status once more, with the new observedGeneration.
    let r_spec = reconciles(&metrics);
    let patch = serde_json::json!({"spec": {"value": "two"}});
    widgets
        .patch("w1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("edit spec");
    let status = eventually(20, || async {
        widgets
            .get("w1")
            .await
            .ok()
            .and_then(|w| w.status)
            .filter(|s| s.value == "two")
    })
    .await
    .expect("status updated");
    assert_eq!(status.observed_generation, Some(2));
    let after_edit =
        settled_writes(&cp, &client, "widgets", Some("status"), status_writes + 1.0).await;
    assert_eq!(
        after_edit,
        status_writes + 1.0,
        "one status write for the edit"
    );
    // The reconcile the status write itself triggers (the second since the edit) must not
    // write again.
    eventually(10, || async {
        (reconciles(&metrics) >= r_spec + 2.0).then_some(())
    })
    .await
    .expect("the status write triggered a reconcile");
    assert_eq!(
        writes(&cp, &client, "widgets", Some("status")).await,
        status_writes + 1.0,
        "no further status write"
    );

    let _ = stop_tx.send(());
    run.await.expect("join").expect("manager ran cleanly");

    own_writes_the_cache_has_not_shown_yet(&client, &ns).await;
}

/// The caches lag behind the operator's own writes: a reconcile that runs before the watch
/// delivered what the previous one wrote must neither take its own new object for someone
/// else's nor take the stale status for the current one. Seen in the benchmark: BookStores
/// reported a NameConflict for a Service their own reconcile had created a moment before,
/// and a restart rewrote statuses left wrong that way.
async fn own_writes_the_cache_has_not_shown_yet(client: &kube::Client, ns: &str) {
    // A create the cache does not show yet is this applier's own: not a conflict.
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let mut fresh = cm(ns, "mine");
    fresh.metadata.name = Some("created-a-moment-ago".into());
    let applier = Applier::new("bosun-test");
    assert_eq!(
        applier.apply(&api, &fresh, None).await.expect("create"),
        Outcome::Applied
    );
    let again = applier.apply(&api, &fresh, None).await;
    assert!(
        again.is_ok(),
        "its own object, not yet cached, was refused: {again:?}"
    );
    // Someone else's object of that name still is refused (409).
    let mut foreign = cm(ns, "theirs");
    foreign.metadata.name = Some("someone-elses".into());
    api.create(&PostParams::default(), &foreign)
        .await
        .expect("foreign create");
    match applier.apply(&api, &foreign, None).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 409, "{s:?}"),
        other => panic!("a foreign object was written over: {other:?}"),
    }

    // Status: the cached status is the first one written, the server holds the second; the
    // desired status is the first again, so it must be written.
    let widgets: Api<Widget> = Api::namespaced(client.clone(), ns);
    let w = widgets
        .create(&PostParams::default(), &widget(ns, "lagging", "x", 0))
        .await
        .expect("create widget");
    let status = |v: &str| WidgetStatus {
        observed_generation: Some(1),
        value: v.into(),
    };
    let writer = bosun_runtime::status::StatusWriter::new("bosun-test");
    assert!(writer
        .write_if_changed(&widgets, &w, None, &status("first"))
        .await
        .expect("first"));
    assert!(writer
        .write_if_changed(&widgets, &w, Some(&status("first")), &status("second"))
        .await
        .expect("second"));
    writer
        .write_if_changed(&widgets, &w, Some(&status("first")), &status("first"))
        .await
        .expect("back to first");
    let live = widgets.get_status("lagging").await.expect("get");
    assert_eq!(
        live.status.as_ref().map(|s| s.value.as_str()),
        Some("first"),
        "a stale cached status hid that the server holds another"
    );
    // The writer tells a reconcile that its object predates the last write (and so does
    // its status), and that the live object does not.
    assert!(
        writer.behind(&w),
        "the object as created predates the writes"
    );
    assert!(!writer.behind(&live), "the live object is the last write's");
    let other = bosun_runtime::status::StatusWriter::new("bosun-test");
    assert!(
        !other.behind(&w),
        "a writer that wrote nothing knows nothing"
    );
}

fn bosun_testenv_sum(text: &str, series: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// Repeats of an event become one event's series (count and last time patched); an event
/// about another related object is its own.
#[tokio::test]
async fn repeated_events_are_one_series() {
    let cp = bosun_testenv::shared().await.expect("control plane");
    let client = cp.client().await.expect("client");
    let ns = test_namespace(&client, "events").await.expect("namespace");
    let events = bosun_runtime::events::Events::new(client.clone(), "bosun-events-test");
    let regarding = k8s_openapi::api::core::v1::ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("ConfigMap".into()),
        name: Some("subject".into()),
        namespace: Some(ns.clone()),
        ..Default::default()
    };
    for _ in 0..3 {
        events
            .publish(&regarding, true, "Stuck", "Reconcile", "still stuck")
            .await;
    }
    let other = k8s_openapi::api::core::v1::ObjectReference {
        name: Some("other".into()),
        ..regarding.clone()
    };
    events
        .publish_related(
            &regarding,
            Some(other),
            false,
            "Stuck",
            "Reconcile",
            "about other",
        )
        .await;
    let api: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), &ns);
    let list = api.list(&Default::default()).await.expect("events");
    let mut seen: Vec<(Option<String>, Option<i32>, Option<String>)> = list
        .items
        .iter()
        .map(|e| {
            (
                e.type_.clone(),
                e.series.as_ref().map(|s| s.count),
                e.related.as_ref().and_then(|r| r.name.clone()),
            )
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        vec![
            (Some("Normal".into()), None, Some("other".into())),
            (Some("Warning".into()), Some(3), None),
        ]
    );
    assert_eq!(events.open_series(), 2);
}
