//! `bosun bundle run` and `bosun bundle cleanup` through the binary, on the test control
//! plane (no OLM): the coded MyOwnShell operator's bundle is installed into a namespace —
//! CRD, ServiceAccount, the CSV's RBAC, the metrics Service, the Deployment — and the command
//! returns once the Deployment is available (its pods are the test's simulated node's);
//! `cleanup` then removes exactly what the record lists and leaves what was there before. A
//! bundle whose objects exist already without its label is refused before anything is
//! written.
mod support;

use std::path::Path;

use bosun_testenv::{shared, test_namespace, NodeAgent, NodeAgentConfig};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use kube::api::{Api, DynamicObject, ObjectMeta, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::{self, Scope};
use serde_json::Value;
use support::{ok, run};

const PACKAGE: &str = "shell-run";

fn bundle(dir: &Path) {
    ok(
        dir,
        &[
            "bundle",
            "--operators=myownshell",
            &format!("--package={PACKAGE}"),
            "--created-at=2026-01-02T03:04:05Z",
        ],
    );
}

/// The record's objects (apiVersion, kind, namespace, name).
async fn recorded(client: &kube::Client, ns: &str) -> Vec<Value> {
    let cm = Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get(&format!("{PACKAGE}-bundle-run"))
        .await
        .expect("the install record");
    serde_json::from_str(&cm.data.expect("data")["objects"]).expect("json")
}

async fn exists(client: &kube::Client, r: &Value) -> bool {
    let (group, version) = r["apiVersion"]
        .as_str()
        .and_then(|a| a.split_once('/'))
        .unwrap_or(("", r["apiVersion"].as_str().unwrap_or_default()));
    let gvk = GroupVersionKind::gvk(group, version, r["kind"].as_str().unwrap_or_default());
    let (ar, caps) = discovery::pinned_kind(client, &gvk).await.expect("served");
    let api: Api<DynamicObject> = match (caps.scope, r["namespace"].as_str()) {
        (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &ar),
        _ => Api::all_with(client.clone(), &ar),
    };
    api.get_opt(r["name"].as_str().expect("name"))
        .await
        .expect("get")
        .is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_runs_without_olm_and_cleanup_removes_exactly_what_it_made() {
    let cp = shared().await.expect("control plane");
    let client = cp.client().await.expect("client");
    let kubeconfig = format!("--kubeconfig={}", cp.kubeconfig().display());
    let dir = tempfile::tempdir().expect("dir");
    bundle(dir.path());
    let bundle_dir = dir.path().join("bundle");
    let bundle_dir = bundle_dir.to_str().expect("utf8");

    // Refused where one of its objects exists already, installed another way.
    let taken = test_namespace(&client, "run-taken").await.expect("ns");
    let csv_text = std::fs::read_dir(dir.path().join("bundle/manifests"))
        .expect("ls")
        .flatten()
        .find(|e| {
            e.file_name()
                .to_string_lossy()
                .contains("clusterserviceversion")
        })
        .map(|e| std::fs::read_to_string(e.path()).expect("read"))
        .expect("the CSV");
    let csv: Value = serde_yaml::from_str(&csv_text).expect("yaml");
    let sa = csv["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]
        ["serviceAccountName"]
        .as_str()
        .expect("sa")
        .to_string();
    let accounts = Api::<ServiceAccount>::namespaced(client.clone(), &taken);
    let theirs = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(sa.clone()),
            ..Default::default()
        },
        ..Default::default()
    };
    accounts
        .create(&PostParams::default(), &theirs)
        .await
        .expect("sa");
    let out = run(
        dir.path(),
        &["bundle", "run", bundle_dir, "-n", &taken, &kubeconfig],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(&format!("ServiceAccount {taken}/{sa}")) && err.contains("exist already"),
        "{err}"
    );
    let none = Api::<ConfigMap>::namespaced(client.clone(), &taken)
        .get_opt(&format!("{PACKAGE}-bundle-run"))
        .await
        .expect("get");
    assert!(none.is_none(), "nothing written when refused");

    let ns = test_namespace(&client, "run-bundle").await.expect("ns");
    let keep = ConfigMap {
        metadata: ObjectMeta {
            name: Some("keep-me".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let cms = Api::<ConfigMap>::namespaced(client.clone(), &ns);
    cms.create(&PostParams::default(), &keep).await.expect("cm");
    let _node = NodeAgent::start(
        client.clone(),
        NodeAgentConfig {
            namespace: Some(ns.clone()),
            resize_needs_restart: false,
        },
    );
    let out = run(
        dir.path(),
        &[
            "bundle",
            "run",
            bundle_dir,
            "-n",
            &ns,
            &kubeconfig,
            "--timeout=120",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(&format!("bosun bundle cleanup {PACKAGE} -n {ns}")),
        "{said}"
    );
    // Returned once available: read, not waited for.
    let name = csv["spec"]["install"]["spec"]["deployments"][0]["name"]
        .as_str()
        .expect("deployment name");
    let d = Api::<Deployment>::namespaced(client.clone(), &ns)
        .get(name)
        .await
        .expect("deployment");
    let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    assert_eq!(
        d.status.and_then(|s| s.available_replicas),
        Some(want),
        "available when run returned"
    );
    let made = recorded(&client, &ns).await;
    let kinds: Vec<&str> = made.iter().filter_map(|r| r["kind"].as_str()).collect();
    for kind in [
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Service",
        "Deployment",
    ] {
        assert!(kinds.contains(&kind), "{kind} in {kinds:?}");
    }
    for r in &made {
        assert!(exists(&client, r).await, "{r} applied");
    }
    let out = run(
        dir.path(),
        &["bundle", "cleanup", PACKAGE, "-n", &ns, &kubeconfig],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for r in &made {
        assert!(!exists(&client, r).await, "{r} removed");
    }
    assert!(
        cms.get_opt("keep-me").await.expect("get").is_some(),
        "what was there before stays"
    );
    assert!(
        cms.get_opt(&format!("{PACKAGE}-bundle-run"))
            .await
            .expect("get")
            .is_none(),
        "the record goes last"
    );
    // The account that was not the bundle's is still there too.
    assert!(accounts.get_opt(&sa).await.expect("get").is_some());
}
