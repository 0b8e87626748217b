//! `upgradeCRDs: true` (bosun's watches.yaml extension, issue 34) on the real API server:
//! the chart's `crds/` are server-side applied on install and upgrade under their own field
//! manager; a CRD that drops a version still in `status.storedVersions` is refused (nothing of
//! the release applied, `ReleaseFailed` with reason `StoredVersionDropped` naming the CRD and
//! the version, an Event); no CRD is deleted, not on uninstall either. Beside it, an entry
//! without the flag keeps Helm's rule: `crds/` created once, never upgraded.
//!
//! A chart is loaded once per operator start, so each new chart version is a restart, as a
//! new operator image is.
mod support;

use std::path::Path;

use bosun_helm_operator::Storage;
use k8s_openapi::api::core::v1::{ConfigMap, Event};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;
use support::*;

const USER: &str = "system:serviceaccount:bosun-system:bosun-helm-upgrade-crds";
const GROUP: &str = "crdup.test.bosun.dev";

/// A chart named `name` whose `crds/` defines `kind` at `versions` (the first one stored),
/// and whose template writes `.Values.color` into a ConfigMap.
fn write_chart(dir: &Path, name: &str, kind: &str, versions: &[&str]) {
    let chart = dir.join(name);
    std::fs::create_dir_all(chart.join("crds")).expect("crds/");
    std::fs::create_dir_all(chart.join("templates")).expect("templates/");
    std::fs::write(
        chart.join("Chart.yaml"),
        format!("apiVersion: v2\nname: {name}\nversion: 0.1.0\n"),
    )
    .expect("Chart.yaml");
    std::fs::write(chart.join("values.yaml"), "color: red\n").expect("values.yaml");
    std::fs::write(
        chart.join("templates/cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cm\ndata:\n  color: {{ .Values.color | quote }}\n",
    )
    .expect("template");
    let plural = format!("{}s", kind.to_lowercase());
    let mut crd = format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: {plural}.{GROUP}\nspec:\n  group: {GROUP}\n  names:\n    kind: {kind}\n    plural: {plural}\n  scope: Namespaced\n  versions:\n"
    );
    for (i, v) in versions.iter().enumerate() {
        crd.push_str(&format!(
            "  - name: {v}\n    served: true\n    storage: {}\n    schema:\n      openAPIV3Schema:\n        type: object\n        x-kubernetes-preserve-unknown-fields: true\n",
            i == 0
        ));
    }
    std::fs::write(chart.join("crds/crd.yaml"), crd).expect("crd");
}

fn write_watches(dir: &Path) {
    std::fs::write(
        dir.join("watches.yaml"),
        "- group: test.bosun.dev\n  version: v1\n  kind: CrdFlagged\n  chart: gadgets\n  upgradeCRDs: true\n\
         - group: test.bosun.dev\n  version: v1\n  kind: CrdPlain\n  chart: gizmos\n",
    )
    .expect("watches.yaml");
}

async fn versions(crds: &Api<CustomResourceDefinition>, name: &str) -> Vec<String> {
    let crd = crds.get(name).await.expect("the CRD exists");
    crd.spec.versions.iter().map(|v| v.name.clone()).collect()
}

async fn color(env: &Env, name: &str) -> String {
    let cms: Api<ConfigMap> = Api::namespaced(env.admin.clone(), &env.ns);
    let cm = cms.get(name).await.expect("the release's ConfigMap");
    cm.data.expect("data")["color"].clone()
}

async fn set_color(env: &Env, ar: &kube::core::ApiResource, name: &str, color: &str) {
    api(env, ar)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"color": color}})),
        )
        .await
        .expect("patch");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crds_are_applied_on_upgrade_only_when_asked_and_a_stored_version_is_never_dropped() {
    let env = env("helm-upcrds").await;
    let dir = tempfile::tempdir().expect("dir");
    write_watches(dir.path());
    let gadgets = format!("gadgets.{GROUP}");
    let gizmos = format!("gizmos.{GROUP}");
    let crds: Api<CustomResourceDefinition> = Api::all(env.admin.clone());
    let flagged = resource("test.bosun.dev", "v1", "CrdFlagged");
    let plain = resource("test.bosun.dev", "v1", "CrdPlain");

    // Chart version 1: both CRDs at v1, created by the install.
    write_chart(dir.path(), "gadgets", "Gadget", &["v1"]);
    write_chart(dir.path(), "gizmos", "Gizmo", &["v1"]);
    let ops = operators(&dir.path().join("watches.yaml"), Storage::Secrets);
    install_crds(&env.admin, &ops).await;
    grant(&env, &ops, USER).await;
    let op = start(&env, ops, USER).await;
    // uninstall-wait puts the finalizer on, so the delete below goes through bosun's uninstall.
    create(
        &env,
        &flagged,
        "apiVersion: test.bosun.dev/v1\nkind: CrdFlagged\nmetadata:\n  name: f\n  annotations:\n    helm.sdk.operatorframework.io/uninstall-wait: \"true\"\nspec:\n  color: red\n",
    )
    .await;
    create(
        &env,
        &plain,
        "apiVersion: test.bosun.dev/v1\nkind: CrdPlain\nmetadata:\n  name: p\nspec:\n  color: red\n",
    )
    .await;
    for (ar, name) in [(&flagged, "f"), (&plain, "p")] {
        wait_for(&env, ar, name, 90, "installed", |o| {
            has(o, "Deployed", "True", Some("InstallSuccessful"))
        })
        .await;
    }
    assert_eq!(versions(&crds, &gadgets).await, ["v1"]);
    assert_eq!(versions(&crds, &gizmos).await, ["v1"]);
    op.stop().await;

    // Chart version 2 adds v2 to both CRDs; both releases are upgraded.
    write_chart(dir.path(), "gadgets", "Gadget", &["v1", "v2"]);
    write_chart(dir.path(), "gizmos", "Gizmo", &["v1", "v2"]);
    let op = start(
        &env,
        operators(&dir.path().join("watches.yaml"), Storage::Secrets),
        USER,
    )
    .await;
    set_color(&env, &flagged, "f", "blue").await;
    set_color(&env, &plain, "p", "blue").await;
    for (ar, name) in [(&flagged, "f"), (&plain, "p")] {
        wait_for(&env, ar, name, 90, "upgraded", |o| {
            has(o, "Deployed", "True", Some("UpgradeSuccessful"))
        })
        .await;
    }
    assert_eq!(
        versions(&crds, &gadgets).await,
        ["v1", "v2"],
        "upgradeCRDs applies the chart's CRD on upgrade"
    );
    let managers: Vec<String> = crds
        .get(&gadgets)
        .await
        .expect("crd")
        .metadata
        .managed_fields
        .unwrap_or_default()
        .iter()
        .filter(|m| m.operation.as_deref() == Some("Apply"))
        .filter_map(|m| m.manager.clone())
        .collect();
    assert_eq!(
        managers,
        [bosun_helm_operator::chart_crds::FIELD_MANAGER],
        "server-side applied under its own field manager"
    );
    assert_eq!(
        versions(&crds, &gizmos).await,
        ["v1"],
        "without the flag, Helm's rule: crds/ are never upgraded"
    );
    assert_eq!(color(&env, "p-cm").await, "blue");
    op.stop().await;

    // Chart version 3 drops v1, still the stored version of gadgets: refused, nothing applied.
    write_chart(dir.path(), "gadgets", "Gadget", &["v2"]);
    let op = start(
        &env,
        operators(&dir.path().join("watches.yaml"), Storage::Secrets),
        USER,
    )
    .await;
    set_color(&env, &flagged, "f", "green").await;
    let o = wait_for(&env, &flagged, "f", 90, "refused", |o| {
        has(o, "ReleaseFailed", "True", Some("StoredVersionDropped"))
    })
    .await;
    let msg = condition(&o, "ReleaseFailed").expect("condition")["message"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(
        msg.starts_with(&format!(
            "CustomResourceDefinition {gadgets}: the chart's CRD drops version v1, which its status.storedVersions still lists: nothing was applied."
        )),
        "{msg}"
    );
    assert_eq!(
        versions(&crds, &gadgets).await,
        ["v1", "v2"],
        "the CRD is left as it was"
    );
    assert_eq!(
        color(&env, "f-cm").await,
        "blue",
        "no object of the refused upgrade is applied"
    );
    let events = Api::<Event>::namespaced(env.admin.clone(), &env.ns)
        .list(&ListParams::default().fields("involvedObject.name=f"))
        .await
        .expect("events");
    assert!(
        events
            .items
            .iter()
            .any(|e| e.type_.as_deref() == Some("Warning")
                && e.message.as_deref() == Some(msg.as_str())),
        "an Event tells the refusal: {:?}",
        events
            .items
            .iter()
            .map(|e| (e.reason.clone(), e.message.clone()))
            .collect::<Vec<_>>()
    );

    // Uninstalling (through the finalizer) and deleting leave every CRD in place.
    for (ar, name) in [(&flagged, "f"), (&plain, "p")] {
        api(&env, ar)
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete");
    }
    for (ar, name) in [(&flagged, "f"), (&plain, "p")] {
        let a = api(&env, ar);
        eventually(90, || async {
            a.get_opt(name).await.ok()?.is_none().then_some(())
        })
        .await
        .unwrap_or_else(|| panic!("{name} is not deleted"));
    }
    assert_eq!(versions(&crds, &gadgets).await, ["v1", "v2"]);
    assert_eq!(versions(&crds, &gizmos).await, ["v1"]);
    op.stop().await;
}
