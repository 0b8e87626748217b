//! The CRD described from a role's defaults, on the real API server: it is structural and
//! established; values of each default's type, nulls, unknown keys and anything at all where
//! the default is a Jinja expression are stored as sent; a value of another type than its
//! default is refused. The seed's BookStore with an empty spec converges from its role's
//! defaults, its children in its own namespace (the defaults' Jinja `metadata.namespace`).
mod support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{json, Value};
use support::*;

fn write(dir: &std::path::Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, text).expect("write");
}

fn gadget(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(
        json!({"apiVersion": "schema.bosun.dev/v1alpha1", "kind": "Gadget",
                                  "metadata": {"name": name}, "spec": spec}),
    )
    .expect("object")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_crd_from_a_roles_defaults_is_accepted_and_types_the_spec() {
    let env = env("ao-crd").await;
    let dir = tempfile::tempdir().expect("dir");
    write(
        dir.path(),
        "roles/gadget/tasks/main.yml",
        "- debug: {msg: hi}\n",
    );
    write(
        dir.path(),
        "roles/gadget/defaults/main.yml",
        r#"---
replica_count: 1
ratio: 0.5
enabled: true
pull_policy: IfNotPresent
target_namespace: "{{ ansible_operator_meta.namespace }}"
image: {repository: nginx, tag: "1.25", extra_args: ["--a", "--b"]}
ports: [80, 443]
hosts: ["a", "{{ extra_host }}"]
labels: {}
nothing: null
"#,
    );
    let w = watches(
        dir.path(),
        "- {group: schema.bosun.dev, version: v1alpha1, kind: Gadget, role: gadget}\n",
    );
    let ops = operators(&w);
    install_crds(&env.admin, &ops).await;
    let ar = resource("schema.bosun.dev", "v1alpha1", "Gadget");
    let gadgets: Api<DynamicObject> = Api::namespaced_with(env.admin.clone(), &env.ns, &ar);

    let accepted = [
        json!({}),
        json!({"replicaCount": 3, "ratio": 2, "enabled": false, "pullPolicy": "Always",
               "image": {"repository": "r", "tag": "2", "extraArgs": ["--c"], "digest": "sha256:x"},
               "ports": [8080], "hosts": ["h", 1, {"x": 1}], "labels": {"a": "b"},
               "nothing": {"any": ["thing"]}, "notADefault": {"kept": true}}),
        // A Jinja default takes any type; every field takes null.
        json!({"targetNamespace": {"an": "object"}, "replicaCount": null, "image": null}),
        json!({"targetNamespace": 7}),
        json!({"targetNamespace": "x"}),
        // Names as the role reads them still reach it (ansible-operator snake-cases them).
        json!({"replica_count": "any type: not a spec property"}),
    ];
    for (i, spec) in accepted.iter().enumerate() {
        let name = format!("ok-{i}");
        gadgets
            .create(&PostParams::default(), &gadget(&name, spec.clone()))
            .await
            .unwrap_or_else(|e| panic!("{spec} refused: {e}"));
        let stored = gadgets.get(&name).await.expect("stored");
        assert_eq!(
            &stored.data["spec"], spec,
            "stored as sent, unknown keys kept"
        );
    }

    for (i, spec) in [
        json!({"replicaCount": "three"}),
        json!({"replicaCount": 1.5}),
        json!({"enabled": "yes"}),
        json!({"image": ["not", "a", "map"]}),
        json!({"image": {"tag": 1}}),
        json!({"image": {"extraArgs": [1]}}),
        json!({"ports": ["eighty"]}),
    ]
    .into_iter()
    .enumerate()
    {
        let err = gadgets
            .create(
                &PostParams::default(),
                &gadget(&format!("bad-{i}"), spec.clone()),
            )
            .await
            .err()
            .unwrap_or_else(|| panic!("{spec} accepted"));
        match err {
            kube::Error::Api(s) => assert_eq!(s.code, 422, "{spec}: {s:?}"),
            other => panic!("{spec}: {other}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bookstore_with_an_empty_spec_converges_from_the_roles_defaults() {
    let env = env("ao-defaults").await;
    let (op, ar) = start_bookstore(&env).await;
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "charts.example.com/v1alpha1", "kind": "BookStore",
        "metadata": {"name": "defaults"}, "spec": {}}))
    .expect("object");
    api(&env, &ar)
        .create(&PostParams::default(), &obj)
        .await
        .expect("create");
    wait_for(&env, &ar, "defaults", 60, "Successful", |o| {
        has(o, "Successful", "True", Some("Successful"))
    })
    .await;
    let deps: Api<Deployment> = Api::namespaced(env.admin.clone(), &env.ns);
    for (name, image) in [
        ("mongodb-deployment", "mongo:latest"),
        ("book-store", "akash125/pyapp:latest"),
    ] {
        let d = deps.get(name).await.expect("in the BookStore's namespace");
        let c = &d.spec.expect("spec").template.spec.expect("pod").containers[0];
        assert_eq!(c.image.as_deref(), Some(image));
        assert_eq!(c.image_pull_policy.as_deref(), Some("Always"));
    }
    let svcs: Api<Service> = Api::namespaced(env.admin.clone(), &env.ns);
    for name in ["mongodb-service", "book-store"] {
        let s = svcs.get(name).await.expect("in the BookStore's namespace");
        assert_eq!(s.spec.and_then(|s| s.type_).as_deref(), Some("ClusterIP"));
    }
    op.stop().await;
}
