//! `--release-storage=configmap`: the release records are Helm's ConfigMaps driver's, on the
//! real API server — Helm's own library (its `configmap` driver) reads bosun's history, and no
//! record Secret is written.
mod support;

use bosun_helm_operator::Storage;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;
use support::*;

const USER: &str = "system:serviceaccount:bosun-system:bosun-helm-configmaps";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_in_configmaps_are_the_ones_helms_configmap_driver_reads() {
    let env = env("helm-cmstore").await;
    let dir = tempfile::tempdir().expect("dir");
    let chart = dir.path().join("colors");
    std::fs::create_dir_all(chart.join("templates")).expect("templates/");
    std::fs::write(
        chart.join("Chart.yaml"),
        "apiVersion: v2\nname: colors\nversion: 0.1.0\n",
    )
    .expect("Chart.yaml");
    std::fs::write(chart.join("values.yaml"), "color: red\n").expect("values.yaml");
    std::fs::write(
        chart.join("templates/cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-color\ndata:\n  color: {{ .Values.color | quote }}\n",
    )
    .expect("template");
    let watches = dir.path().join("watches.yaml");
    std::fs::write(
        &watches,
        "- {group: test.bosun.dev, version: v1, kind: Current, chart: colors}\n",
    )
    .expect("watches.yaml");
    let ops = operators(&watches, Storage::ConfigMaps);
    install_crds(&env.admin, &ops).await;
    grant(&env, &ops, USER).await;
    let op = start(&env, ops, USER).await;
    let current = resource("test.bosun.dev", "v1", "Current");
    create(
        &env,
        &current,
        "apiVersion: test.bosun.dev/v1\nkind: Current\nmetadata:\n  name: now\nspec: {}\n",
    )
    .await;
    wait_for(&env, &current, "now", 90, "installed", |o| {
        has(o, "Deployed", "True", Some("InstallSuccessful"))
    })
    .await;
    api(&env, &current)
        .patch(
            "now",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"color": "blue"}})),
        )
        .await
        .expect("patch");
    wait_for(&env, &current, "now", 90, "upgraded", |o| {
        has(o, "Deployed", "True", Some("UpgradeSuccessful"))
    })
    .await;

    let records = ListParams::default().labels("owner=helm,name=now");
    let cms: Vec<String> = Api::<ConfigMap>::namespaced(env.admin.clone(), &env.ns)
        .list(&records)
        .await
        .expect("configmaps")
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert_eq!(
        cms,
        ["sh.helm.release.v1.now.v1", "sh.helm.release.v1.now.v2"]
    );
    let secrets = Api::<Secret>::namespaced(env.admin.clone(), &env.ns)
        .list(&records)
        .await
        .expect("secrets");
    assert!(secrets.items.is_empty(), "no record Secret");

    let history = helm(
        &env,
        "history",
        json!({"name": "now", "driver": "configmap"}),
    );
    let seen: Vec<(i64, String)> = history
        .as_array()
        .expect("a list of revisions")
        .iter()
        .map(|r| {
            (
                r["revision"].as_i64().unwrap_or(0),
                r["status"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [(1, "superseded".to_string()), (2, "deployed".to_string())],
        "Helm's configmap driver reads bosun's history: {history:#}"
    );
    op.stop().await;
}
