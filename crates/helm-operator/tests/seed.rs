//! Seed 000's Helm-based BookStore, unchanged: its `watches.yaml` and sample CR with the
//! book-store chart — install, upgrade on replicaCount/tag/service type, drift repaired, a
//! restart over the converged release that writes nothing, uninstall on delete; and the
//! release record, decoded and checked field by field.
mod support;

use bosun_helm_operator::release;
use bosun_helm_operator::Storage;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, Service};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::ResourceExt;
use serde_json::json;
use support::*;

const USER: &str = "system:serviceaccount:bosun-system:bosun-helm";

fn sample() -> String {
    std::fs::read_to_string(
        repo().join("examples/helm-bookstore/config/samples/charts_v1alpha1_bookstore.yaml"),
    )
    .expect("sample CR")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_chart_installs_upgrades_repairs_and_uninstalls() {
    let env = env("helm-seed").await;
    let ops = operators(
        &repo().join("examples/helm-bookstore/watches.yaml"),
        Storage::Secrets,
    );
    install_crds(&env.admin, &ops).await;
    grant(&env, &ops, USER).await;
    let op = start(&env, ops, USER).await;
    let ar = resource("charts.example.com", "v1alpha1", "BookStore");
    create(&env, &ar, &sample()).await;

    let bs = wait_for(
        &env,
        &ar,
        "bookstore-sample",
        90,
        "Deployed and Ready",
        |o| {
            has(o, "Deployed", "True", Some("InstallSuccessful"))
                && has(o, "Ready", "True", Some("AllReady"))
        },
    )
    .await;
    let notes = condition(&bs, "Deployed")
        .and_then(|c| c["message"].as_str())
        .unwrap_or("");
    assert!(
        notes.contains("release bookstore-sample"),
        "NOTES.txt is the message: {notes}"
    );
    assert!(has(&bs, "Initialized", "True", None));
    // Every object of the seed chart and its release record carry an owner reference: a
    // delete needs no uninstall pass, so no finalizer holds the custom resource (or its
    // namespace) for one.
    assert!(
        bs.finalizers().is_empty(),
        "no uninstall finalizer for a chart the garbage collector removes: {:?}",
        bs.finalizers()
    );
    assert_eq!(bs.data["status"]["deployedRelease"]["revision"], 1);
    assert_eq!(
        bs.data["status"]["deployedRelease"]["name"],
        "bookstore-sample"
    );

    // The seed's objects, owned by the custom resource, marked as Helm marks them.
    let deps: Api<Deployment> = Api::namespaced(env.admin.clone(), &env.ns);
    let svcs: Api<Service> = Api::namespaced(env.admin.clone(), &env.ns);
    for name in ["book-store", "mongodb-deployment"] {
        let d = deps.get(name).await.expect("deployment");
        assert_eq!(d.owner_references()[0].uid, bs.uid().expect("uid"));
        assert_eq!(d.labels()["app.kubernetes.io/managed-by"], "Helm");
        assert_eq!(
            d.annotations()["meta.helm.sh/release-name"],
            "bookstore-sample"
        );
    }
    assert_eq!(
        svcs.get("mongodb-service")
            .await
            .expect("the name the pyapp image expects")
            .name_any(),
        "mongodb-service"
    );
    assert_eq!(
        svcs.get("book-store")
            .await
            .expect("svc")
            .spec
            .and_then(|s| s.type_)
            .as_deref(),
        Some("LoadBalancer")
    );

    // The release record is Helm's.
    let secrets: Api<Secret> = Api::namespaced(env.admin.clone(), &env.ns);
    let s = secrets
        .get("sh.helm.release.v1.bookstore-sample.v1")
        .await
        .expect("release secret");
    assert_eq!(s.type_.as_deref(), Some("helm.sh/release.v1"));
    let l = s.labels();
    assert_eq!(
        (
            l["name"].as_str(),
            l["owner"].as_str(),
            l["status"].as_str(),
            l["version"].as_str()
        ),
        ("bookstore-sample", "helm", "deployed", "1")
    );
    assert!(l.contains_key("createdAt") || l.contains_key("modifiedAt"));
    assert_eq!(
        s.owner_references()[0].uid,
        bs.uid().expect("uid"),
        "history goes with the CR"
    );
    let data = String::from_utf8(s.data.expect("data")["release"].0.clone()).expect("base64 text");
    let rec = release::decode(&data).expect("decodes as Helm's encodeRelease");
    assert_eq!(
        (rec.name.as_str(), rec.version, rec.namespace.as_str()),
        ("bookstore-sample", 1, env.ns.as_str())
    );
    assert_eq!(rec.info.status, "deployed");
    assert_eq!(rec.info.description, "Install complete");
    assert_eq!(rec.info.notes, notes);
    assert_ne!(rec.info.first_deployed, release::ZERO_TIME);
    assert_eq!(rec.chart_name(), "book-store");
    assert_eq!(rec.chart["metadata"]["version"], "0.1.0");
    assert_eq!(
        rec.config["replicaCount"], 1,
        "the spec's values, int64 as the API server gave them"
    );
    assert!(
        rec.manifest
            .starts_with("---\n# Source: book-store/templates/"),
        "{}",
        rec.manifest
    );
    assert!(rec.manifest.contains("kind: Deployment"));

    // Upgrade: replicas, image tag and service type.
    let api = api(&env, &ar);
    api.patch(
        "bookstore-sample",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicaCount": 2, "image": {"app": {"tag": "v2"}}, "service": {"app": {"type": "NodePort"}}}})),
    )
    .await
    .expect("patch");
    let bs = wait_for(
        &env,
        &ar,
        "bookstore-sample",
        90,
        "upgraded and Ready",
        |o| has(o, "Deployed", "True", Some("UpgradeSuccessful")) && has(o, "Ready", "True", None),
    )
    .await;
    assert_eq!(bs.data["status"]["deployedRelease"]["revision"], 2);
    let d = deps.get("book-store").await.expect("deployment");
    let spec = d.spec.expect("spec");
    assert_eq!(spec.replicas, Some(2));
    assert_eq!(
        spec.template.spec.expect("pod").containers[0]
            .image
            .as_deref(),
        Some("akash125/pyapp:v2")
    );
    assert_eq!(
        svcs.get("book-store")
            .await
            .expect("svc")
            .spec
            .and_then(|s| s.type_)
            .as_deref(),
        Some("NodePort")
    );
    let label = |v: i64| {
        let secrets = secrets.clone();
        async move {
            secrets
                .get(&release::key("bookstore-sample", v))
                .await
                .ok()
                .map(|s| s.labels()["status"].clone())
        }
    };
    assert_eq!(label(1).await.as_deref(), Some("superseded"));
    assert_eq!(label(2).await.as_deref(), Some("deployed"));

    // Drift: a deleted Service comes back; a hand-scaled Deployment is set back.
    let ready_since = |o: &kube::core::DynamicObject| {
        condition(o, "Ready").and_then(|c| c["lastTransitionTime"].as_str().map(str::to_string))
    };
    let before = ready_since(&api.get("bookstore-sample").await.expect("cr"));
    svcs.delete("mongodb-service", &Default::default())
        .await
        .expect("delete");
    deps.patch(
        "book-store",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 5}})),
    )
    .await
    .expect("scale by hand");
    let repaired = eventually(60, || async {
        let svc = svcs.get_opt("mongodb-service").await.ok().flatten()?;
        let d = deps.get("book-store").await.ok()?;
        let st = d.status.clone()?;
        let settled = d.spec?.replicas == Some(2)
            && st.observed_generation == d.metadata.generation
            && st.replicas == Some(2)
            && st.ready_replicas == Some(2)
            && st.updated_replicas == Some(2);
        (svc.metadata.deletion_timestamp.is_none() && settled).then_some(())
    })
    .await;
    assert!(repaired.is_some(), "drift repaired and rolled out");
    // Ready went False when the Deployment was re-applied, and is True again.
    wait_for(
        &env,
        &ar,
        "bookstore-sample",
        90,
        "Ready again after the repair",
        |o| has(o, "Ready", "True", None) && ready_since(o) != before,
    )
    .await;

    // A restart over the converged release writes nothing.
    op.stop().await;
    let ops = operators(
        &repo().join("examples/helm-bookstore/watches.yaml"),
        Storage::Secrets,
    );
    let op = start(&env, ops, USER).await;
    op.ready().await;
    let before_status = api.get("bookstore-sample").await.expect("cr").data["status"].clone();
    // The restarted operator reconciles what it found, and sends no write doing so.
    let reconciled = eventually(60, || async { (op.reconciles() >= 1.0).then_some(()) }).await;
    assert!(
        reconciled.is_some(),
        "the restarted operator reconciled the release"
    );
    assert_eq!(
        op.writes.get(),
        0,
        "a restart over a converged release sent writes: {:?}; status before {before_status:#}, after {:#}",
        op.writes.list(),
        api.get("bookstore-sample").await.expect("cr").data["status"]
    );
    assert_eq!(
        api.get("bookstore-sample").await.expect("cr").data["status"],
        before_status
    );

    // Uninstall on delete: objects and records go, then the CR.
    api.delete("bookstore-sample", &Default::default())
        .await
        .expect("delete");
    let gone = eventually(90, || async {
        let cr = api.get_opt("bookstore-sample").await.ok()?;
        let d = deps.get_opt("book-store").await.ok()?;
        let recs = secrets
            .list(&ListParams::default().labels("owner=helm"))
            .await
            .ok()?;
        (cr.is_none() && d.is_none() && recs.items.is_empty()).then_some(())
    })
    .await;
    assert!(gone.is_some(), "uninstalled: CR, objects and records gone");
    op.stop().await;
}
