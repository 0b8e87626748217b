//! What ansible-operator's proxy adds to objects a role creates, reproduced in-process: an
//! owner reference `{apiVersion, kind, name, uid}` when the CR is in the object's namespace,
//! the `operator-sdk/primary-resource` annotations otherwise (other namespace, cluster-scoped
//! object); and the kinds touched, for the host's dependent watches.
mod common;

use std::sync::Arc;

use bosun_ansible::{Discovery, LoadOptions, Owner, Role, RunContext};
use common::diff::*;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::Api;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn created_objects_are_owned_like_ansible_operator_does() {
    let cp = bosun_testenv::shared().await.expect("control plane");
    let client = cp.client().await.expect("client");
    ensure_crd(&client, "test.bosun.dev", "Widget").await;
    let ns = bosun_testenv::test_namespace(&client, "owner")
        .await
        .expect("ns");
    let other = bosun_testenv::test_namespace(&client, "other")
        .await
        .expect("ns");
    let case = Case {
        roles_dir: crate_dir().join("tests/roles"),
        role: "owned",
        group: "test.bosun.dev",
        kind: "Widget",
        spec: json!({"otherNamespace": other}),
        watch_vars: None,
        kinds: vec![],
    };
    let cr = create_cr(&client, &case, &ns).await;
    let role = Role::load(
        "owned",
        &LoadOptions {
            roles_path: vec![case.roles_dir.clone()],
            collections_paths: vec![],
            cwd: case.roles_dir.clone(),
        },
    )
    .expect("load");
    let ctx = RunContext::new(
        Some(client.clone()),
        Arc::new(Discovery::new()),
        Owner::from_object(&cr),
    );
    let o = role.run(&ctx, &extra_vars(&case, &cr)).await;
    assert!(o.succeeded(), "{:?}", o.failures);
    assert!(
        o.touched
            .contains(&("v1".to_string(), "ConfigMap".to_string()))
            && o.touched
                .contains(&("v1".to_string(), "Namespace".to_string()))
    );

    let owned = Api::<ConfigMap>::namespaced(client.clone(), &ns)
        .get("owned")
        .await
        .expect("owned");
    let refs =
        serde_json::to_value(owned.metadata.owner_references.expect("owner refs")).expect("json");
    assert_eq!(
        refs,
        json!([{"apiVersion": "test.bosun.dev/v1alpha1", "kind": "Widget", "name": "sample", "uid": cr["metadata"]["uid"]}])
    );

    let want = json!({"operator-sdk/primary-resource": format!("{ns}/sample"), "operator-sdk/primary-resource-type": "Widget.test.bosun.dev"});
    let annotated = Api::<ConfigMap>::namespaced(client.clone(), &other)
        .get("annotated")
        .await
        .expect("annotated");
    assert!(annotated.metadata.owner_references.is_none());
    assert_eq!(
        serde_json::to_value(annotated.metadata.annotations).expect("json"),
        want
    );
    let child = Api::<Namespace>::all(client.clone())
        .get(&format!("{other}-child"))
        .await
        .expect("namespace");
    assert!(child.metadata.owner_references.is_none());
    assert_eq!(
        serde_json::to_value(child.metadata.annotations).expect("json"),
        want
    );

    // A second run changes nothing (owner references are only added on create).
    let again = role.run(&ctx, &extra_vars(&case, &cr)).await;
    assert!(
        again.succeeded() && again.stats.changed == 0,
        "{:?}",
        again.stats
    );
}
