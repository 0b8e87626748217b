//! Roles beyond the seed, run by the operator on the real API server as a ServiceAccount
//! with only the RBAC the entry declares: a role using include_tasks, block/rescue, loops,
//! register, k8s_info, k8s_status, lookup('template') and requeue_after; finalizers (a
//! finalizer role, and the entry's own role with the finalizer's vars); a failing task.
//! A role in the shape of operator-sdk's memcached-molecule sample (stat, file, osdk_metric,
//! an optional-API probe, loops, block/rescue, k8s_status) converges natively.
mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::ResourceExt;
use serde_json::json;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_using_the_subset_converges_with_one_status_write() {
    let env = env("ao-features").await;
    let dir = tempfile::tempdir().expect("dir");
    let w = watches(
        dir.path(),
        "- {group: test.bosun.dev, version: v1alpha1, kind: Widget, role: features, vars: {service_enabled: true}}\n",
    );
    let ops = operators(&w);
    install_crds(&env.admin, &ops).await;
    grant(&env, &ops, USER).await;
    let op = start(&env, ops, USER).await;
    widget(
        &env,
        "shop",
        json!({"size": 3, "servicePort": 80, "tier": "backend", "greeting": "hi there",
               "settings": {"logLevel": "debug", "cache": "skip", "workers": 4}, "extraKeys": ["gamma"]}),
    )
    .await;
    let w = wait_successful(&env, "shop").await;
    // k8s_status on the CR itself, merged into the operator's own write.
    let status = &w.data["status"];
    assert_eq!(status["phase"], "Ready");
    assert_eq!(
        status["configMaps"],
        json!(["shop-app-alpha", "shop-app-beta", "shop-app-config"])
    );
    let ready = condition(&w, "Ready").expect("the role's own condition");
    assert_eq!(
        (&ready["status"], &ready["reason"], &ready["message"]),
        (
            &json!("True"),
            &json!("Reconciled"),
            &json!("3 config maps")
        )
    );
    let running = condition(&w, "Running").expect("Running");
    assert_eq!(running["ansibleResult"]["failures"], 0);
    assert!(has(&w, "Failure", "False", None));

    // What the tasks made: a templated ConfigMap, one per loop item, a Service.
    let cms: Api<ConfigMap> = Api::namespaced(env.admin.clone(), &env.ns);
    let cfg = cms
        .get("shop-app-config")
        .await
        .expect("templated config map");
    let data = cfg.data.clone().expect("data");
    assert_eq!(data["greeting"], "hi there");
    assert_eq!(data["keys"], "alpha,beta,gamma");
    assert_eq!(cfg.labels()["tier"], "backend");
    let alpha = cms.get("shop-app-alpha").await.expect("looped config map");
    assert_eq!(alpha.labels()["index"], "0");
    let svc: Api<Service> = Api::namespaced(env.admin.clone(), &env.ns);
    let port = svc
        .get("shop-app")
        .await
        .expect("service")
        .spec
        .expect("spec")
        .ports
        .expect("ports")[0]
        .port;
    assert_eq!(port, 80);

    // The children's first sightings trigger more runs: they change nothing and write
    // nothing. Writes: 3 ConfigMaps, 1 Service, 1 status.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(op.reconciles("success") >= 1.0);
    assert_eq!(op.writes.get(), 5, "creates and one status write");
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finalizer_role_runs_with_its_vars_before_the_object_goes() {
    let env = env("ao-final").await;
    let records = bosun_testenv::test_namespace(&env.admin, "ao-records")
        .await
        .expect("namespace");
    let dir = tempfile::tempdir().expect("dir");
    let w = watches(
        dir.path(),
        &format!(
            "- group: test.bosun.dev\n  version: v1alpha1\n  kind: Widget\n  role: finalizer\n  \
             vars: {{record_namespace: {records}}}\n  \
             finalizer: {{name: test.bosun.dev/cleanup, role: recorder, vars: {{state: absent}}}}\n"
        ),
    );
    let ops = operators(&w);
    install_crds(&env.admin, &ops).await;
    grant(&env, &ops, USER).await;
    let op = start(&env, ops, USER).await;
    widget(&env, "kept", json!({"size": 2})).await;
    let w = wait_successful(&env, "kept").await;
    assert_eq!(w.finalizers(), ["test.bosun.dev/cleanup"]);
    let cms: Api<ConfigMap> = Api::namespaced(env.admin.clone(), &env.ns);
    cms.get("kept-data").await.expect("the main role ran");

    api(&env, &widgets())
        .delete("kept", &Default::default())
        .await
        .expect("delete");
    let gone = eventually(60, || async {
        api(&env, &widgets())
            .get_opt("kept")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    assert!(gone.is_some(), "the finalizer was released");
    let record = Api::<ConfigMap>::namespaced(env.admin.clone(), &records)
        .get("finalized-kept")
        .await
        .expect("the finalizer role ran");
    let data = record.data.clone().expect("data");
    assert_eq!(
        (
            data["state"].as_str(),
            data["name"].as_str(),
            data["size"].as_str()
        ),
        ("absent", "kept", "2"),
        "finalizer vars, watch vars and the spec reach the finalizer run"
    );
    assert_eq!(
        record.annotations()["operator-sdk/primary-resource"],
        format!("{}/kept", env.ns)
    );
    op.stop().await;
}

/// Finalizer playbooks with `vars` (issue 34), natively; `fallback.rs` runs the same under
/// real Ansible with the same assertions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finalizer_playbook_runs_with_its_vars_before_the_object_goes() {
    let env = env("ao-final-pb").await;
    let dir = tempfile::tempdir().expect("dir");
    let (w, records) = finalizer_playbook_project(&env, dir.path()).await;
    finalizer_playbook_runs(&env, &records, operators(&w)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_finalizer_role_the_entry_role_runs_with_the_finalizer_vars() {
    let env = env("ao-final-vars").await;
    let dir = tempfile::tempdir().expect("dir");
    let w = watches(
        dir.path(),
        "- group: test.bosun.dev\n  version: v1alpha1\n  kind: Widget\n  role: finalizer\n  \
         finalizer: {name: test.bosun.dev/cleanup, vars: {state: absent}}\n",
    );
    let ops = operators(&w);
    install_crds(&env.admin, &ops).await;
    grant(&env, &ops, USER).await;
    let op = start(&env, ops, USER).await;
    // Another finalizer holds the object after ours is released: what ran is then visible
    // while the object (the owner of the ConfigMap) still exists.
    create_json(
        &env,
        &widgets(),
        json!({"apiVersion": "test.bosun.dev/v1alpha1", "kind": "Widget",
               "metadata": {"name": "held", "finalizers": ["test.bosun.dev/hold"]}, "spec": {}}),
    )
    .await;
    let w = wait_successful(&env, "held").await;
    assert_eq!(
        w.finalizers(),
        ["test.bosun.dev/hold", "test.bosun.dev/cleanup"]
    );
    let cms: Api<ConfigMap> = Api::namespaced(env.admin.clone(), &env.ns);
    cms.get("held-data").await.expect("created");
    api(&env, &widgets())
        .delete("held", &Default::default())
        .await
        .expect("delete");
    let finalized = eventually(60, || async {
        let w = api(&env, &widgets()).get("held").await.ok()?;
        let cm = cms.get_opt("held-data").await.ok()?;
        (cm.is_none() && w.finalizers() == ["test.bosun.dev/hold"]).then_some(())
    })
    .await;
    assert!(
        finalized.is_some(),
        "state=absent removed the ConfigMap before the owner went, then our finalizer left"
    );
    api(&env, &widgets())
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("release the hold");
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_task_is_reported_while_another_object_converges() {
    let env = env("ao-failing").await;
    let dir = tempfile::tempdir().expect("dir");
    let w = watches(
        dir.path(),
        "- {group: test.bosun.dev, version: v1alpha1, kind: Widget, role: failing}\n",
    );
    let ops = operators(&w);
    install_crds(&env.admin, &ops).await;
    grant(&env, &ops, USER).await;
    let op = start(&env, ops, USER).await;
    // One after the other: both create the role's fixed-name ConfigMap, and two runs racing
    // to create it would fail one of them (as kubernetes.core does) before the task under test.
    widget(&env, "bad", json!({"size": 5})).await;
    let bad = wait_for(&env, &widgets(), "bad", 60, "Failure", |o| {
        has(o, "Failure", "True", Some("Failed"))
    })
    .await;
    let failure = condition(&bad, "Failure").expect("Failure");
    assert_eq!(failure["message"], "size is 5", "{failure}");
    assert_eq!(failure["ansibleResult"]["failures"], 1);
    assert!(has(&bad, "Successful", "False", None));
    // Another object of the kind converges while this one fails and is retried.
    widget(&env, "good", json!({"size": 1})).await;
    wait_successful(&env, "good").await;

    // One Warning Event with the message.
    let events: Api<DynamicObject> = Api::namespaced_with(
        env.admin.clone(),
        &env.ns,
        &resource("events.k8s.io", "v1", "Event"),
    );
    let warned = eventually(30, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .into_iter()
            .find(|e| e.data["regarding"]["name"] == "bad" && e.data["reason"] == "Failed")
    })
    .await
    .expect("a Failed event");
    assert_eq!(warned.data["type"], "Warning");
    assert_eq!(warned.data["note"], "size is 5");

    // Retried with backoff: the runs fail again, and write nothing new.
    let (errors, writes) = (op.reconciles("error"), op.writes.get());
    let retried = eventually(30, || async {
        (op.reconciles("error") >= errors + 2.0).then_some(())
    })
    .await;
    assert!(retried.is_some(), "the failing object is retried");
    assert_eq!(op.writes.get(), writes, "a repeated failure writes nothing");

    // Fixing the spec recovers.
    api(&env, &widgets())
        .patch(
            "bad",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}})),
        )
        .await
        .expect("fix");
    let fixed = wait_successful(&env, "bad").await;
    assert!(has(&fixed, "Failure", "False", None));
    assert_eq!(
        condition(&fixed, "Running").expect("Running")["status"],
        "True"
    );
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_manage_status_only_the_role_writes_status() {
    let env = env("ao-unmanaged").await;
    let dir = tempfile::tempdir().expect("dir");
    let w = watches(
        dir.path(),
        "- {group: test.bosun.dev, version: v1alpha1, kind: Widget, role: features, manageStatus: false}\n",
    );
    let ops = operators(&w);
    install_crds(&env.admin, &ops).await;
    grant(&env, &ops, USER).await;
    let op = start(&env, ops, USER).await;
    widget(
        &env,
        "plain",
        json!({"size": 1, "servicePort": 8080, "settings": {}}),
    )
    .await;
    let w = wait_for(&env, &widgets(), "plain", 60, "the role's status", |o| {
        o.data["status"]["phase"] == "Ready"
    })
    .await;
    let types: Vec<&str> = w.data["status"]["conditions"]
        .as_array()
        .expect("the role's conditions")
        .iter()
        .filter_map(|c| c["type"].as_str())
        .collect();
    assert_eq!(types, ["Ready"], "no Running/Successful/Failure conditions");
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_molecule_shaped_role_converges_natively() {
    let env = env("ao-molecule").await;
    let dir = tempfile::tempdir().expect("dir");
    let w = watches(
        dir.path(),
        "- {group: test.bosun.dev, version: v1alpha1, kind: Widget, role: molecule}\n",
    );
    let ops = operators(&w);
    install_crds(&env.admin, &ops).await;
    grant(&env, &ops, USER).await;
    let op = start(&env, ops, USER).await;
    widget(&env, "cache", json!({"size": 2})).await;
    let w = wait_successful(&env, "cache").await;
    assert_eq!(
        w.data["status"]["routes"], false,
        "k8s_info on an unserved API: api_found false"
    );
    assert_eq!(w.data["status"]["seen"], json!(["a", "b", "c"]));
    assert_eq!(w.data["status"]["rescued"], true);
    let deploys: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(env.admin.clone(), &env.ns);
    let d = deploys.get("cache-memcached").await.expect("deployment");
    assert_eq!(d.spec.expect("spec").replicas, Some(2));
    assert_eq!(d.metadata.owner_references.expect("owner")[0].name, "cache");
    let metrics = bosun_ansible::metrics::UserMetrics::global();
    assert_eq!(metrics.value("molecule_counter_inc_test"), Some(1.0));
    assert_eq!(metrics.value("molecule_gauge_set_test"), Some(5.0));
    assert_eq!(metrics.value("molecule_histogram_observe_test"), Some(1.0));
    // Served with the operator's own metrics, under the names ansible-operator exposes.
    let served = op.metrics.encode();
    assert!(
        served.contains("\nmolecule_counter_inc_test 1\n"),
        "{served}"
    );
    assert!(served.contains("\nmolecule_gauge_set_test 5\n"), "{served}");
    assert!(
        served.contains("molecule_histogram_observe_test_count 1\n"),
        "{served}"
    );
    assert!(served.ends_with("# EOF\n"));
    assert!(std::path::Path::new(&format!("/tmp/metricsbumped-{}", env.ns)).exists());
    let _ = std::fs::remove_file(format!("/tmp/metricsbumped-{}", env.ns));
    op.stop().await;
}
