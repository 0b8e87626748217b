//! Compatibility with Helm itself, proven with Helm's own library (helm-python-sdk, Helm v4)
//! against the same API server: Helm reads the releases bosun records (`status`, `history`,
//! `list`, `get values`), and a release Helm installed — as operator-sdk's helm-operator does,
//! through Helm's library — is taken over in place, with no object recreated.
mod support;

use bosun_helm_operator::Storage;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, Service};
use kube::api::{Api, Patch, PatchParams};
use kube::ResourceExt;
use serde_json::json;
use support::*;

const USER: &str = "system:serviceaccount:bosun-system:bosun-helm-compat";

fn seed_ops() -> Vec<std::sync::Arc<dyn bosun_runtime::manager::Operator>> {
    operators(
        &repo().join("examples/helm-bookstore/watches.yaml"),
        Storage::Secrets,
    )
}

fn sample_spec() -> serde_json::Value {
    let text = std::fs::read_to_string(
        repo().join("examples/helm-bookstore/config/samples/charts_v1alpha1_bookstore.yaml"),
    )
    .expect("sample");
    let json = bosun_yaml::goyaml::yaml_to_json(&text).expect("yaml");
    let v: serde_json::Value = serde_json::from_str(&json).expect("json");
    v["spec"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_reads_the_releases_bosun_records() {
    let env = env("helm-reads").await;
    let ops = seed_ops();
    install_crds(&env.admin, &ops).await;
    grant(&env, &ops, USER).await;
    let op = start(&env, ops, USER).await;
    let ar = resource("charts.example.com", "v1alpha1", "BookStore");
    let yaml = format!("apiVersion: charts.example.com/v1alpha1\nkind: BookStore\nmetadata:\n  name: shop\nspec: {}\n", sample_spec());
    create(&env, &ar, &yaml).await;
    wait_for(&env, &ar, "shop", 90, "Deployed", |o| {
        has(o, "Deployed", "True", Some("InstallSuccessful"))
    })
    .await;

    let status = helm(&env, "status", json!({"name": "shop"}));
    assert_eq!(status["name"], "shop");
    assert_eq!(status["revision"], 1);
    assert_eq!(status["status"], "deployed");
    assert_eq!(
        (
            status["chart_name"].as_str(),
            status["chart_version"].as_str()
        ),
        (Some("book-store"), Some("0.1.0"))
    );
    assert_eq!(status["labels"]["owner"], "helm");
    let secrets: Api<Secret> = Api::namespaced(env.admin.clone(), &env.ns);
    let s = secrets
        .get("sh.helm.release.v1.shop.v1")
        .await
        .expect("record");
    let rec = bosun_helm_operator::release::decode(
        &String::from_utf8(s.data.expect("data")["release"].0.clone()).expect("utf8"),
    )
    .expect("decode");
    assert_eq!(
        status["manifest"], rec.manifest,
        "helm get manifest shows what bosun applied"
    );
    assert_eq!(status["notes"], rec.info.notes);
    let values = helm(&env, "get_values", json!({"name": "shop"}));
    assert_eq!(values["image"]["app"]["repository"], "akash125/pyapp");

    api(&env, &ar)
        .patch(
            "shop",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicaCount": 3}})),
        )
        .await
        .expect("patch");
    wait_for(&env, &ar, "shop", 90, "upgraded", |o| {
        has(o, "Deployed", "True", Some("UpgradeSuccessful"))
    })
    .await;
    let history = helm(&env, "history", json!({"name": "shop"}));
    let states: Vec<(i64, String)> = history
        .as_array()
        .expect("list")
        .iter()
        .map(|r| {
            (
                r["revision"].as_i64().unwrap_or(0),
                r["status"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(
        states,
        vec![(1, "superseded".to_string()), (2, "deployed".to_string())]
    );
    let list = helm(&env, "list", json!({}));
    assert!(
        list.as_array()
            .expect("list")
            .iter()
            .any(|r| r["name"] == "shop" && r["revision"] == 2),
        "{list}"
    );
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_installed_by_helm_is_taken_over_in_place() {
    let env = env("helm-takeover").await;
    let chart = repo().join("examples/helm-bookstore/helm-charts/book-store");
    // What operator-sdk's helm-operator did: Helm's library installed release "legacy".
    let installed = helm(
        &env,
        "install",
        json!({"chart": chart, "name": "legacy", "values": sample_spec()}),
    );
    assert_eq!(installed["revision"], 1);
    let deps: Api<Deployment> = Api::namespaced(env.admin.clone(), &env.ns);
    let svcs: Api<Service> = Api::namespaced(env.admin.clone(), &env.ns);
    let uid = |name: &'static str| {
        let deps = deps.clone();
        async move {
            deps.get(name)
                .await
                .expect("deployment")
                .uid()
                .expect("uid")
        }
    };
    let (app_uid, db_uid) = (uid("book-store").await, uid("mongodb-deployment").await);
    let svc_uid = svcs
        .get("mongodb-service")
        .await
        .expect("svc")
        .uid()
        .expect("uid");

    // The image swap: bosun runs the same watches file; the CR of that name appears.
    let ops = seed_ops();
    install_crds(&env.admin, &ops).await;
    grant(&env, &ops, USER).await;
    let op = start(&env, ops, USER).await;
    let ar = resource("charts.example.com", "v1alpha1", "BookStore");
    let yaml = format!("apiVersion: charts.example.com/v1alpha1\nkind: BookStore\nmetadata:\n  name: legacy\nspec: {}\n", sample_spec());
    let cr = create(&env, &ar, &yaml).await;
    let done = wait_for(&env, &ar, "legacy", 90, "Deployed and Ready", |o| {
        has(o, "Deployed", "True", None) && has(o, "Ready", "True", None)
    })
    .await;
    assert_eq!(
        done.data["status"]["deployedRelease"]["revision"], 1,
        "the recorded revision was kept: nothing to upgrade"
    );
    assert_eq!(uid("book-store").await, app_uid, "no object recreated");
    assert_eq!(uid("mongodb-deployment").await, db_uid);
    assert_eq!(
        svcs.get("mongodb-service")
            .await
            .expect("svc")
            .uid()
            .expect("uid"),
        svc_uid
    );
    let d = deps.get("book-store").await.expect("deployment");
    assert_eq!(
        d.owner_references().first().map(|o| o.uid.clone()),
        cr.uid(),
        "now owned by the custom resource"
    );
    let history = helm(&env, "history", json!({"name": "legacy"}));
    assert_eq!(history.as_array().map(|h| h.len()), Some(1));

    // From then on it is bosun's release: an upgrade makes revision 2 over Helm's record.
    api(&env, &ar)
        .patch(
            "legacy",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicaCount": 2}})),
        )
        .await
        .expect("patch");
    wait_for(&env, &ar, "legacy", 90, "upgraded", |o| {
        has(o, "Deployed", "True", Some("UpgradeSuccessful"))
    })
    .await;
    assert_eq!(uid("book-store").await, app_uid);
    let history = helm(&env, "history", json!({"name": "legacy"}));
    let versions: Vec<i64> = history
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|r| r["revision"].as_i64())
        .collect();
    assert_eq!(versions, vec![1, 2]);
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_name_taken_by_another_chart_is_refused() {
    let env = env("helm-taken").await;
    let other = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/charts/lifecycle");
    helm(
        &env,
        "install",
        json!({"chart": other, "name": "shop", "values": {}}),
    );
    let ops = seed_ops();
    install_crds(&env.admin, &ops).await;
    grant(&env, &ops, USER).await;
    let op = start(&env, ops, USER).await;
    let ar = resource("charts.example.com", "v1alpha1", "BookStore");
    create(&env, &ar, "apiVersion: charts.example.com/v1alpha1\nkind: BookStore\nmetadata:\n  name: shop\nspec: {}\n").await;
    let o = wait_for(&env, &ar, "shop", 60, "ReleaseFailed", |o| {
        has(o, "ReleaseFailed", "True", Some("InstallError"))
    })
    .await;
    let msg = condition(&o, "ReleaseFailed")
        .and_then(|c| c["message"].as_str())
        .unwrap_or("");
    assert!(
        msg.contains("duplicate release name") && msg.contains("lifecycle"),
        "{msg}"
    );
    let deps: Api<Deployment> = Api::namespaced(env.admin.clone(), &env.ns);
    assert!(
        deps.get_opt("book-store").await.expect("get").is_none(),
        "nothing of the BookStore was written"
    );
    let history = helm(&env, "history", json!({"name": "shop"}));
    assert_eq!(
        history.as_array().map(|h| h.len()),
        Some(1),
        "the other chart's release is untouched"
    );
    op.stop().await;
}

/// Helm's rule for an object of the release's name that the release did not create: it is
/// never written over unless Helm's release annotations name this release (the way a
/// release installed by operator-sdk is taken over, above).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_of_the_same_name_made_by_someone_else_is_never_taken_over() {
    let env = env("helm-foreign").await;
    let services: Api<Service> = Api::namespaced(env.admin.clone(), &env.ns);
    let foreign: Service = serde_json::from_value(json!({
        "metadata": {"name": "mongodb-service", "labels": {"team": "db"}},
        "spec": {"selector": {"team": "db"}, "ports": [{"port": 5432}]}
    }))
    .expect("service");
    services
        .create(&Default::default(), &foreign)
        .await
        .expect("create the foreign Service");
    let ops = seed_ops();
    install_crds(&env.admin, &ops).await;
    grant(&env, &ops, USER).await;
    let op = start(&env, ops, USER).await;
    let ar = resource("charts.example.com", "v1alpha1", "BookStore");
    create(&env, &ar, "apiVersion: charts.example.com/v1alpha1\nkind: BookStore\nmetadata:\n  name: shop\nspec: {}\n").await;
    let o = wait_for(&env, &ar, "shop", 60, "ReleaseFailed", |o| {
        has(o, "ReleaseFailed", "True", Some("InstallError"))
    })
    .await;
    let msg = condition(&o, "ReleaseFailed")
        .and_then(|c| c["message"].as_str())
        .unwrap_or("");
    assert!(
        msg.contains("mongodb-service") && msg.contains("invalid ownership metadata"),
        "{msg}"
    );
    let live = services.get("mongodb-service").await.expect("get");
    assert!(
        live.owner_references().is_empty(),
        "no owner reference added"
    );
    assert_eq!(
        live.spec
            .as_ref()
            .and_then(|s| s.ports.as_ref())
            .map(|p| p[0].port),
        Some(5432),
        "the foreign Service keeps its spec"
    );
    assert_eq!(
        live.labels().get("team").map(String::as_str),
        Some("db"),
        "and its labels"
    );
    op.stop().await;
}
