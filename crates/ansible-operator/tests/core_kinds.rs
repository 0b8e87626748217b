//! A watches entry for a Kubernetes kind (`group: ""`, ConfigMaps) with a label selector and
//! `manageStatus: false`, as operators that act on users' ConfigMaps declare it: no CRD is
//! installed for it, only the ConfigMaps the selector picks run the role, and the role's
//! object is owned by the ConfigMap it mirrors.
mod support;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::json;
use support::*;

const ROLE: &str = "\
- name: mirror the chosen ConfigMap
  k8s:
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: \"{{ ansible_operator_meta.name }}-mirror\"
        namespace: \"{{ ansible_operator_meta.namespace }}\"
      data:
        source: \"{{ ansible_operator_meta.name }}\"
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_core_kind_entry_with_a_selector_runs_for_the_chosen_objects() {
    let env = env("ao-core").await;
    let dir = tempfile::tempdir().expect("dir");
    let tasks = dir.path().join("roles/mirror/tasks");
    std::fs::create_dir_all(&tasks).expect("dir");
    std::fs::write(tasks.join("main.yml"), ROLE).expect("role");
    let w = watches(
        dir.path(),
        "- {group: \"\", version: v1, kind: ConfigMap, role: mirror, manageStatus: false,\n   selector: {matchLabels: {bosun-test/mirror: \"yes\"}}}\n",
    );
    let ops = operators(&w);
    assert_eq!(ops.len(), 1);
    assert!(
        ops[0].crds().is_empty(),
        "no CRD for a kind the API server serves"
    );
    grant(&env, &ops, USER).await;
    let op = start(&env, ops, USER).await;
    let cms = Api::<ConfigMap>::namespaced(env.admin.clone(), &env.ns);
    let make = |name: &str, labelled: bool| {
        let mut cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": name}, "data": {"k": "v"}
        }))
        .expect("configmap");
        if labelled {
            cm.metadata.labels =
                Some([("bosun-test/mirror".to_string(), "yes".to_string())].into());
        }
        cm
    };
    cms.create(&PostParams::default(), &make("plain", false))
        .await
        .expect("create");
    let chosen = cms
        .create(&PostParams::default(), &make("chosen", true))
        .await
        .expect("create");
    let mirror = eventually(60, || async {
        cms.get_opt("chosen-mirror").await.ok().flatten()
    })
    .await
    .expect("the chosen ConfigMap is mirrored");
    assert_eq!(mirror.data.expect("data")["source"], "chosen");
    let owners = mirror.metadata.owner_references.unwrap_or_default();
    assert_eq!(owners.len(), 1);
    assert_eq!(Some(&owners[0].uid), chosen.metadata.uid.as_ref());
    // The selector left the other one out (the watch never showed it to the operator).
    assert!(cms.get_opt("plain-mirror").await.expect("get").is_none());
    op.stop().await;
}
