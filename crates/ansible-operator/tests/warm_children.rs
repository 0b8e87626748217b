//! The child caches of the kinds a role creates start with the controller, so a standby has
//! them listed before it leads (issue 37). Started by the first run that touched a kind,
//! they made a new leader's first reconciles — a user's new object's included — wait for the
//! list of every custom resource's children of that kind, one kind after another.
mod support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use support::*;

const LEASE: &str = "bosun-ansible-warm";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_has_the_roles_child_kinds_listed_before_it_leads() {
    let env = env("ans-warm").await;
    let ops = operators(&repo().join("examples/ansible-bookstore/watches.yaml"));
    install_crds(&env.admin, &ops).await;
    grant(&env, &ops, USER).await;

    // Another replica holds the lease (renewed now, for an hour): this one stands by until
    // the test releases it.
    let leases: Api<Lease> = Api::namespaced(env.admin.clone(), &env.ns);
    let held: Lease = serde_json::from_value(json!({
        "metadata": {"name": LEASE, "namespace": env.ns},
        "spec": {
            "holderIdentity": "another-replica",
            "leaseDurationSeconds": 3600,
            "acquireTime": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            "renewTime": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        }
    }))
    .expect("lease");
    leases
        .create(&PostParams::default(), &held)
        .await
        .expect("lease held by another replica");

    let config = config_as(&env, USER).await;
    let seen = Requests::default();
    let Elected { stop, task, health } = start_elected(&env, config, ops, LEASE, "standby", &seen);

    eventually(60, || async {
        health
            .readiness()
            .ok()
            .filter(|s| s.contains("standby: caches synced"))
    })
    .await
    .expect("the standby's caches synced while another replica holds the lease");
    let deployments = format!("/apis/apps/v1/namespaces/{}/deployments", env.ns);
    let services = format!("/api/v1/namespaces/{}/services", env.ns);
    for path in [&deployments, &services] {
        assert!(
            seen.lists(path) >= 1,
            "{path} not listed before leading; requests: {:#?}",
            seen.all()
        );
    }
    assert_eq!(
        seen.writes(),
        Vec::<String>::new(),
        "a standby writes nothing"
    );
    let listed = (seen.lists(&deployments), seen.lists(&services));

    // The other replica leaves: this one leads and works a new BookStore from the caches it
    // kept, without listing the children's kinds again.
    leases
        .delete(LEASE, &DeleteParams::default())
        .await
        .expect("release the lease");
    let stores = api(
        &env,
        &resource("charts.example.com", "v1alpha1", "BookStore"),
    );
    let store = serde_json::from_value(json!({
        "apiVersion": "charts.example.com/v1alpha1",
        "kind": "BookStore",
        "metadata": {"name": "warm", "namespace": env.ns},
        "spec": {}
    }))
    .expect("bookstore");
    let created = stores
        .create(&PostParams::default(), &store)
        .await
        .expect("create BookStore");
    let uid = created.metadata.uid.clone().expect("uid");
    let deploys: Api<Deployment> = Api::namespaced(env.admin.clone(), &env.ns);
    eventually(60, || async {
        let list = deploys.list(&Default::default()).await.ok()?;
        list.items
            .iter()
            .any(|d| {
                d.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.uid == uid)
            })
            .then_some(())
    })
    .await
    .expect("the new leader created the BookStore's Deployment");
    assert_eq!(
        (seen.lists(&deployments), seen.lists(&services)),
        listed,
        "the leader listed a child kind again after taking the lease; requests: {:#?}",
        seen.all()
    );

    let _ = stop.send(());
    task.await
        .expect("join")
        .expect("the manager stopped cleanly");
}

/// Which kinds start warm, from the role's text alone: its literal `k8s` kinds the entry
/// would watch after a run — Kubernetes' own kinds, whose scope is known without discovery.
#[test]
fn the_warm_kinds_are_the_watched_built_in_kinds_the_role_names() {
    use bosun_ansible_operator::AnsibleOptions;
    use bosun_watches::{Flavor, WatchesFile};
    let dir = tempfile::tempdir().expect("tempdir");
    let tasks = dir.path().join("roles/warm/tasks");
    std::fs::create_dir_all(&tasks).expect("mkdir");
    let k8s = |api: &str, kind: &str, extra: &str| {
        format!(
            "- k8s:\n    {extra}definition:\n      apiVersion: {api}\n      kind: {kind}\n      metadata:\n        name: x\n        namespace: \"{{{{ ansible_operator_meta.namespace }}}}\"\n"
        )
    };
    let role = [
        k8s("apps/v1", "Deployment", ""),
        k8s("v1", "ConfigMap", ""),
        k8s("v1", "Secret", "state: absent\n    "),
        k8s("v1", "Namespace", ""),
        k8s("example.com/v1", "Gadget", ""),
        k8s("test.bosun.dev/v1alpha1", "Widget", ""),
        "- k8s_info:\n    api_version: batch/v1\n    kind: Job\n".to_string(),
    ]
    .concat();
    std::fs::write(tasks.join("main.yml"), role).expect("role");
    let kinds = |extra: &str| {
        let w = watches(
            dir.path(),
            &format!("- version: v1alpha1\n  group: test.bosun.dev\n  kind: Widget\n  role: warm\n{extra}"),
        );
        let file = WatchesFile::load(&w).expect("watches");
        let opts = AnsibleOptions {
            watches_dir: Some(dir.path().to_path_buf()),
            ansible: None,
            ..Default::default()
        };
        let ops = bosun_ansible_operator::operators(&file.entries, &opts).expect("loads");
        let mut got: Vec<String> = ops[0]
            .flavor()
            .warm_kinds()
            .iter()
            .map(|g| format!("{}/{}/{}", g.group, g.version, g.kind))
            .collect();
        got.sort();
        got
    };
    // Not the deleted Secret, the read Job, the custom Gadget (scope unknown, maybe not
    // served yet), the entry's own kind, or the cluster-scoped Namespace.
    assert_eq!(kinds(""), vec!["/v1/ConfigMap", "apps/v1/Deployment"]);
    assert_eq!(
        kinds("  watchClusterScopedResources: true\n"),
        vec!["/v1/ConfigMap", "/v1/Namespace", "apps/v1/Deployment"]
    );
    assert_eq!(
        kinds("  blacklist:\n  - group: apps\n    version: v1\n    kind: Deployment\n"),
        vec!["/v1/ConfigMap"]
    );
    assert!(kinds("  watchDependentResources: false\n").is_empty());
}
