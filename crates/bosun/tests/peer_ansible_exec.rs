//! The exec-and-copy role of backup operators (issue 34): find the database's pod, write a
//! dump inside it with `k8s_exec`, copy it out with `k8s_cp`, keep it in a ConfigMap. The
//! same project run by operator-sdk's ansible-operator v1.42.2 in one namespace and by
//! `bosun run --watches` (which sends the entry whole to real Ansible: `k8s_exec` is outside
//! the native subset) in another, at once, against pods the process-mode node agent runs —
//! its exec endpoint stands in for the kubelet's behind the API server's `pods/exec`.
//! Both converge, with the same dump, the same exit code of a failing command, the same
//! status.
//!
//! Needs root and `scripts/setup-postgres.sh`'s user (process mode), `scripts/setup-peers.sh`
//! (ansible-operator) and `scripts/setup-ansible.sh` (real Ansible for bosun).
mod peers;
use peers::*;
use std::path::Path;

use bosun_testenv::{Image, ImageMap, NodeAgent, ProcessConfig};
use bosun_watches::Flavor;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::Client;
use serde_json::{json, Value};

fn dumps() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("test.bosun.dev", "v1alpha1", "Dump"),
        "dumps",
    )
}

fn write_project(project: &Path) {
    let role = repo().join("crates/ansible-operator/tests/roles/dump");
    for sub in ["tasks", "defaults"] {
        let to = project.join("roles/dump").join(sub);
        std::fs::create_dir_all(&to).expect("role dir");
        std::fs::copy(role.join(sub).join("main.yml"), to.join("main.yml")).expect("role file");
    }
    std::fs::write(
        project.join("watches.yaml"),
        "- {group: test.bosun.dev, version: v1alpha1, kind: Dump, role: dump}\n",
    )
    .expect("watches");
}

async fn database_pod(client: &Client, ns: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "app-0", "labels": {"app": "app"}},
        "spec": {"terminationGracePeriodSeconds": 1, "containers": [{"name": "db",
                 "image": "busybox:1", "command": ["sleep", "3600"]}]}
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("pod");
    let running = bosun_testenv::eventually(120, || {
        let pods = pods.clone();
        async move {
            let p = pods.get("app-0").await.ok()?;
            (p.status?.phase.as_deref() == Some("Running")).then_some(())
        }
    })
    .await;
    assert!(running.is_some(), "{ns}: the database pod is not running");
}

async fn wait_done(client: &Client, ns: &str, log: &Path) -> DynamicObject {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &dumps());
    bosun_testenv::eventually(300, || {
        let api = api.clone();
        async move {
            api.get("nightly")
                .await
                .ok()
                .filter(|o| condition(o, "Successful").is_some_and(|(s, _, _)| s == "True"))
        }
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "{ns}/nightly never succeeded; the operator said:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        )
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_and_copy_role_converges_as_under_ansible_operator() {
    peer("ansible-operator");
    let dir = tempfile::tempdir().expect("tempdir");
    let project = dir.path().join("project");
    write_project(&project);
    let sdk = bosun_testenv::kit::cluster_with("peer-dump-sdk", None)
        .await
        .expect("test cluster");
    let client = sdk.admin.clone();
    let ours_ns = bosun_testenv::test_namespace(&client, "peer-dump-bosun")
        .await
        .expect("namespace");
    let theirs_ns = sdk.ns.clone();
    let file = bosun_watches::WatchesFile::load(&project.join("watches.yaml")).expect("watches");
    // The entry loads (for its CRD) only with real Ansible at hand; this binary's one test.
    std::env::set_var(
        "BOSUN_ANSIBLE_RUNNER",
        ansible_venv().join("bin/ansible-runner"),
    );
    let opts = bosun_ansible_operator::AnsibleOptions {
        watches_dir: Some(project.clone()),
        ..Default::default()
    };
    let flavor = bosun_ansible_operator::AnsibleFlavor::load(&file.entries[0], &opts)
        .expect("the Dump entry");
    bosun_testenv::kit::install_crds(&client, [flavor.crd()])
        .await
        .expect("Dump CRD served");
    // One process-mode agent per namespace (an agent runs every pod of its namespace).
    let mut agents = Vec::new();
    for ns in [&theirs_ns, &ours_ns] {
        agents.push(
            NodeAgent::process_mode(
                client.clone(),
                ProcessConfig {
                    namespace: Some(ns.clone()),
                    images: ImageMap::empty()
                        .repository("busybox", Image::program("/shell", "/bin/sh")),
                    ..Default::default()
                },
            )
            .expect("the process-mode node agent (root, scripts/setup-postgres.sh's user)"),
        );
        database_pod(&client, ns).await;
    }

    let kubeconfig = sdk.cp.kubeconfig();
    let their_log = dir.path().join("ansible-operator.log");
    let our_log = dir.path().join("bosun.log");
    let tmp = dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).expect("tmp");
    let theirs_op = start_ansible_operator(
        &project,
        "watches.yaml",
        kubeconfig,
        &theirs_ns,
        &their_log,
        &tmp,
    );
    let ours_op = start_bosun_with_ansible(
        &project.join("watches.yaml"),
        kubeconfig,
        &ours_ns,
        &our_log,
    );
    let mut results: Vec<(Value, Value)> = Vec::new();
    for (ns, log) in [(&theirs_ns, &their_log), (&ours_ns, &our_log)] {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &dumps());
        let cr: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "test.bosun.dev/v1alpha1", "kind": "Dump",
            "metadata": {"name": "nightly"}, "spec": {"table": "orders"}
        }))
        .expect("cr");
        api.create(&PostParams::default(), &cr)
            .await
            .expect("create");
        let done = wait_done(&client, ns, log).await;
        let cm = Api::<ConfigMap>::namespaced(client.clone(), ns)
            .get("nightly-dump")
            .await
            .expect("the dump's ConfigMap");
        let status = json!({"phase": done.data["status"]["phase"],
                            "failingRc": done.data["status"]["failingRc"]});
        results.push((json!(cm.data), status));
    }
    theirs_op.stop().await;
    ours_op.stop().await;
    drop(agents);
    let (theirs, ours) = (&results[0], &results[1]);
    assert_eq!(
        theirs.0,
        json!({"dump.sql": "-- dump of orders on app-0\nINSERT INTO orders VALUES (1);",
               "lines": "2", "rc": "0"}),
        "ansible-operator's run"
    );
    assert_eq!(ours, theirs, "bosun's run against ansible-operator's");
}
