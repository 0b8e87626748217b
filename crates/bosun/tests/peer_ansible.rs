//! operator-sdk's ansible-operator as the oracle of bosun's Ansible flavour (issue 35): the
//! seed's Ansible BookStore (its watches.yaml, role and sample CR) run by ansible-operator
//! (built by `scripts/setup-peers.sh`, with Ansible and ansible-runner as its image has them)
//! and then by `bosun run --watches`, each in a namespace of its own on the same API server.
//! Both must leave the same objects and the same `status.conditions` (type, status, reason);
//! where bosun differs on purpose, the difference is asserted and named here.
mod peers;
use peers::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bosun_watches::Flavor;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::core::DynamicObject;
use kube::{Client, ResourceExt};
use serde_json::Value;

fn seed() -> PathBuf {
    repo().join("examples/ansible-bookstore")
}

/// The seed's sample CR, its objects asked for in `ns` (the sample names `default`).
fn sample(ns: &str) -> Value {
    let text =
        std::fs::read_to_string(seed().join("config/samples/charts_v1alpha1_bookstore.yaml"))
            .expect("sample CR");
    let mut v: Value = serde_yaml::from_str(&text).expect("sample CR is YAML");
    v["metadata"]["namespace"] = ns.into();
    v["spec"]["metadata"]["namespace"] = ns.into();
    v
}

fn successful(o: &DynamicObject) -> bool {
    conditions(o)
        .get("Successful")
        .is_some_and(|(s, _)| s == "True")
}

async fn wait_cr(client: &Client, ns: &str, what: &str, log: &Path) -> DynamicObject {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &bookstores());
    bosun_testenv::eventually(300, || {
        let api = api.clone();
        async move { api.get("bookstore-sample").await.ok().filter(successful) }
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "{ns}/bookstore-sample never {what}; the operator said:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        )
    })
}

/// An object with what the API server or the cluster decides removed: identities, times,
/// versions, allocated addresses, the namespace, the status other controllers write.
fn normalise(mut v: Value, ns: &str) -> Value {
    if let Some(m) = v["metadata"].as_object_mut() {
        for k in [
            "managedFields",
            "uid",
            "creationTimestamp",
            "resourceVersion",
            "generation",
            "namespace",
        ] {
            m.remove(k);
        }
        if let Some(a) = m.get_mut("annotations").and_then(Value::as_object_mut) {
            a.remove("deployment.kubernetes.io/revision");
            if a.is_empty() {
                m.remove("annotations");
            }
        }
        if let Some(refs) = m.get_mut("ownerReferences").and_then(Value::as_array_mut) {
            for r in refs {
                if let Some(r) = r.as_object_mut() {
                    r.remove("uid");
                }
            }
        }
    }
    if let Some(o) = v.as_object_mut() {
        o.remove("status");
    }
    if let Some(spec) = v["spec"].as_object_mut() {
        for k in ["clusterIP", "clusterIPs"] {
            spec.remove(k);
        }
    }
    serde_json::from_str(&v.to_string().replace(ns, "NAMESPACE")).expect("json")
}

async fn objects(client: &Client, ns: &str) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let deps: Api<Deployment> = Api::namespaced(client.clone(), ns);
    for d in deps
        .list(&ListParams::default())
        .await
        .expect("deployments")
    {
        let key = format!("Deployment/{}", d.name_any());
        out.insert(key, normalise(serde_json::to_value(d).expect("json"), ns));
    }
    let svcs: Api<Service> = Api::namespaced(client.clone(), ns);
    for s in svcs.list(&ListParams::default()).await.expect("services") {
        let key = format!("Service/{}", s.name_any());
        out.insert(key, normalise(serde_json::to_value(s).expect("json"), ns));
    }
    out
}

async fn create_sample(client: &Client, ns: &str) {
    let cr: DynamicObject = serde_json::from_value(sample(ns)).expect("sample CR");
    Api::<DynamicObject>::namespaced_with(client.clone(), ns, &bookstores())
        .create(&PostParams::default(), &cr)
        .await
        .expect("create the sample BookStore");
}

async fn delete_sample(client: &Client, ns: &str, log: &Path) {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &bookstores());
    api.delete("bookstore-sample", &DeleteParams::default())
        .await
        .expect("delete the CR");
    let gone = bosun_testenv::eventually(120, || async {
        api.get_opt("bookstore-sample")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    assert!(
        gone.is_some(),
        "{ns}: the CR is not gone after its delete; the operator said:\n{}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_role_same_objects_and_conditions_as_ansible_operator() {
    peer("ansible-operator");
    let sdk = bosun_testenv::kit::cluster("peer-ansible-sdk")
        .await
        .expect("test cluster");
    let bosun_ns = bosun_testenv::test_namespace(&sdk.admin, "peer-ansible-bosun")
        .await
        .expect("namespace");
    let client = sdk.admin.clone();
    let file = bosun_watches::WatchesFile::load(&seed().join("watches.yaml"))
        .expect("the seed's watches.yaml");
    let opts = bosun_ansible_operator::AnsibleOptions {
        watches_dir: Some(seed()),
        ..Default::default()
    };
    let flavor = bosun_ansible_operator::AnsibleFlavor::load(&file.entries[0], &opts)
        .expect("the seed's Ansible entry");
    // The same CRD for both: ansible-operator installs none (its scaffold's config/crd does).
    bosun_testenv::kit::install_crds(&client, [flavor.crd()])
        .await
        .expect("BookStore CRD served");
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = sdk.cp.kubeconfig();

    let log = dir.path().join("ansible-operator.log");
    let op = start_ansible_operator(
        &seed(),
        "watches.yaml",
        kubeconfig,
        &sdk.ns,
        &log,
        dir.path(),
    );
    create_sample(&client, &sdk.ns).await;
    let their_cr = wait_cr(&client, &sdk.ns, "succeeded", &log).await;
    let theirs = objects(&client, &sdk.ns).await;
    delete_sample(&client, &sdk.ns, &log).await;
    op.stop().await;

    let log = dir.path().join("bosun.log");
    let op = start_bosun_watches(&seed().join("watches.yaml"), kubeconfig, &bosun_ns, &log);
    create_sample(&client, &bosun_ns).await;
    let our_cr = wait_cr(&client, &bosun_ns, "succeeded", &log).await;
    let ours = objects(&client, &bosun_ns).await;
    delete_sample(&client, &bosun_ns, &log).await;
    op.stop().await;

    assert_eq!(
        theirs.keys().collect::<Vec<_>>(),
        [
            "Deployment/book-store",
            "Deployment/mongodb-deployment",
            "Service/book-store",
            "Service/mongodb-service"
        ],
        "ansible-operator made the seed role's four objects"
    );
    for (k, v) in &theirs {
        assert_eq!(
            Some(v),
            ours.get(k),
            "{k}: ansible-operator's, then bosun's"
        );
    }
    assert_eq!(theirs.len(), ours.len());
    let theirs_c = conditions(&their_cr);
    assert_eq!(
        theirs_c,
        BTreeMap::from([
            // Written False with no reason once a run succeeds (cleared, not removed).
            ("Failure".to_string(), ("False".to_string(), String::new())),
            (
                "Running".to_string(),
                ("True".to_string(), "Successful".to_string())
            ),
            (
                "Successful".to_string(),
                ("True".to_string(), "Successful".to_string())
            ),
        ]),
        "ansible-operator's conditions after a successful run"
    );
    assert_eq!(
        theirs_c,
        conditions(&our_cr),
        "conditions (type -> status, reason)"
    );
}
