//! A child keeps its owner's current shard label through every write of the `k8s` module
//! (issue 37): created on one member, it is relabelled by the next run on the member the CR
//! moved to — strategic-merge and merge patches, client-side and server-side apply, replace,
//! a child owned through annotations — while an object the CR does not own is left alone.
mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use bosun_ansible::{Discovery, LoadOptions, Owner, Role, RunContext, TaskStatus};
use common::diff::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::json;

const LABEL: &str = "shard.bosun.dev/widgets";

/// The labels the runtime gives the children of a CR placed on `member`.
fn on(member: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(LABEL.to_string(), member.to_string())])
}

async fn label(client: &kube::Client, ns: &str, name: &str) -> Option<String> {
    let cm = Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .expect("configmap");
    cm.metadata.labels.unwrap_or_default().get(LABEL).cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_of_a_child_carries_its_owners_current_shard() {
    let cp = bosun_testenv::shared().await.expect("control plane");
    let client = cp.client().await.expect("client");
    ensure_crd(&client, "test.bosun.dev", "Widget").await;
    let ns = bosun_testenv::test_namespace(&client, "relabel")
        .await
        .expect("ns");
    let other = bosun_testenv::test_namespace(&client, "relabel-other")
        .await
        .expect("ns");
    // Not the CR's: the role updates it, it must not be placed with the CR.
    Api::<ConfigMap>::namespaced(client.clone(), &ns)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "shared"}})).expect("cm"),
        )
        .await
        .expect("shared");
    let case = Case {
        roles_dir: crate_dir().join("tests/roles"),
        role: "relabelled",
        group: "test.bosun.dev",
        kind: "Widget",
        spec: json!({"otherNamespace": other}),
        watch_vars: None,
        kinds: vec![],
    };
    let cr = create_cr(&client, &case, &ns).await;
    let role = Role::load(
        "relabelled",
        &LoadOptions {
            roles_path: vec![case.roles_dir.clone()],
            collections_paths: vec![],
            cwd: case.roles_dir.clone(),
        },
    )
    .expect("load");
    let run = |member: &str| {
        let ctx = RunContext::new(
            Some(client.clone()),
            Arc::new(Discovery::new()),
            Owner::from_object(&cr).map(|o| o.labelling(on(member))),
        );
        let vars = extra_vars(&case, &cr);
        let role = &role;
        async move { role.run(&ctx, &vars).await }
    };
    let children = [
        (ns.as_str(), "merged"),
        (ns.as_str(), "merge-typed"),
        (ns.as_str(), "applied"),
        (ns.as_str(), "server-applied"),
        (ns.as_str(), "replaced"),
        (other.as_str(), "annotated"),
    ];

    let first = run("a").await;
    assert!(first.succeeded(), "{:?}", first.failures);
    for (n, name) in children {
        assert_eq!(
            label(&client, n, name).await.as_deref(),
            Some("a"),
            "{name}"
        );
    }

    // The CR moved to b: its next run relabels every child in the writes it makes.
    let moved = run("b").await;
    assert!(moved.succeeded(), "{:?}", moved.failures);
    for (n, name) in children {
        assert_eq!(
            label(&client, n, name).await.as_deref(),
            Some("b"),
            "{name} keeps the label of the member that created it"
        );
    }
    assert_eq!(
        label(&client, &ns, "shared").await,
        None,
        "not the CR's child"
    );
    let owner_refs = Api::<ConfigMap>::namespaced(client.clone(), &ns)
        .get("server-applied")
        .await
        .expect("cm")
        .metadata
        .owner_references
        .unwrap_or_default();
    assert_eq!(
        owner_refs.len(),
        1,
        "the server-side apply keeps the owner reference it applied on create"
    );

    // Placed where its children are: nothing left to write but the forced replace and the
    // unowned object's (unchanged) update.
    let settled = run("b").await;
    assert!(settled.succeeded(), "{:?}", settled.failures);
    let changed: Vec<_> = settled
        .tasks
        .iter()
        .filter(|t| t.status == TaskStatus::Changed)
        .map(|t| t.name.clone())
        .collect();
    assert!(
        changed.iter().all(|n| n == "Replaced"),
        "changed on a settled run: {changed:?}"
    );
}
