//! Hostile specs through the whole operator: wrong types (refused by the CRD's schema where
//! the role's defaults type them), huge strings, deep nesting, templates injected into the
//! spec (loops, lookups, Python escapes, arithmetic bombs), attempts to read Secrets (the
//! operator holds no right to) or missing files. Each ends in a reported status —
//! `Successful` or `Failure` with a message — never a crash or a hang, and a well-formed
//! object created after them still converges.
mod support;

use kube::api::{Api, DynamicObject, PostParams};
use kube::ResourceExt;
use serde_json::{json, Value};
use support::*;

fn specs(ns: &str) -> Vec<Value> {
    let good_image = json!({"app": {"repository": "a", "tag": "1", "pullPolicy": "Always"},
                "mongodb": {"repository": "m", "tag": "1", "pullPolicy": "Always"}});
    let services = json!({"app": {"type": "ClusterIP"}, "mongodb": {"type": "ClusterIP"}});
    let with_image = |app_repo: Value| {
        let mut image = good_image.clone();
        image["app"]["repository"] = app_repo;
        json!({"metadata": {"namespace": ns}, "image": image, "service": services})
    };
    // Kubernetes before 1.25 (the test control plane runs 1.20) merges the managed fields of
    // an open subtree of a typed schema in time exponential in its depth
    // (kubernetes-sigs/structured-merge-diff#222): 16 levels take ~0.1 s, 60 never end. The
    // engine's own limits are tested deeper in crates/ansible.
    let deep = (0..16).fold(json!("x"), |acc, _| json!({ "a": acc }));
    vec![
        json!({}),
        json!({"metadata": null}),
        json!({"metadata": {"namespace": 5}}),
        json!({"metadata": {"namespace": ["a", "b"]}}),
        json!({"metadata": {"namespace": "{{ metadata }}"}}),
        json!({"metadata": {"namespace": "x".repeat(512 * 1024)}}),
        json!({"metadata": {"namespace": ns}, "image": ["not", "a", "map"], "service": services}),
        json!({"metadata": {"namespace": ns}, "image": good_image, "service": "ClusterIP"}),
        json!({"metadata": {"namespace": ns}, "image": deep, "service": services}),
        with_image(json!({"nested": {"deeper": [1, 2, {"x": null}]}})),
        with_image(json!("{% for i in range(10**9) %}x{% endfor %}")),
        with_image(json!("{{ range(999999999) | list }}")),
        with_image(json!("{{ 'a' * 999999999 }}")),
        with_image(json!("{{ [1] * 999999999 }}")),
        with_image(json!("{{ 9 ** 9 ** 9 }}")),
        with_image(json!("{{ 1 / 0 }}")),
        with_image(json!("{{ ().__class__.__bases__[0].__subclasses__() }}")),
        with_image(json!(
            "{{ q('k8s', kind='Secret', namespace='kube-system') }}"
        )),
        with_image(json!("{{ lookup('file', '/nonexistent/secret') }}")),
        with_image(json!("{{ image.app.repository }}")),
        with_image(json!("{{")),
        with_image(json!("\u{0}\u{ffff}{{ '\\x00' }}")),
        json!({"metadata": {"namespace": ns}, "image": {"app": {"repository": "{{ image.mongodb.repository }}", "tag": 1, "pullPolicy": true},
                                                      "mongodb": {"repository": "{{ image.app.repository }}", "tag": 1.5e300, "pullPolicy": null}},
               "service": services}),
        json!({"": 1, " ": 2, "x".repeat(5000): {"B": {"C": "{{"}}, "metadata": {"namespace": ns}}),
        json!({"metadata": {"namespace": ns}, "image": good_image, "service": {"app": {"type": "{{ 1/0 }}"}, "mongodb": {"type": "Bogus"}}}),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_specs_are_reported_never_a_crash() {
    let env = env("ao-hostile").await;
    let (op, ar) = start_bookstore(&env).await;
    let bookstores: Api<DynamicObject> = Api::namespaced_with(env.admin.clone(), &env.ns, &ar);
    let mut created = Vec::new();
    let mut refused = Vec::new();
    for (i, spec) in specs(&env.ns).into_iter().enumerate() {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "charts.example.com/v1alpha1", "kind": "BookStore",
            "metadata": {"name": format!("hostile-{i}")}, "spec": spec}))
        .expect("object");
        match bookstores.create(&PostParams::default(), &obj).await {
            Ok(o) => created.push(o.name_any()),
            Err(e) => {
                eprintln!("hostile-{i}: refused by the API server: {e}");
                refused.push(i);
            }
        }
    }
    // The CRD types the spec from the role's defaults: a value of another type than its
    // default never reaches the role (an array or a string for `image` or `service`, an
    // object for a repository, a number for a tag). The rest is the role's to report.
    assert_eq!(refused, [6, 7, 9, 22], "{} stored", created.len());

    for name in &created {
        let o = wait_for(&env, &ar, name, 120, "a reported outcome", |o| {
            has(o, "Successful", "True", None) || has(o, "Failure", "True", None)
        })
        .await;
        if let Some(f) = condition(&o, "Failure").filter(|c| c["status"] == "True") {
            let msg = f["message"].as_str().unwrap_or_default();
            eprintln!(
                "{name}: Failure: {}",
                msg.chars().take(160).collect::<String>()
            );
            assert!(!msg.is_empty(), "{name}: a failure says why");
            assert!(msg.len() <= 8 * 1024 + 32, "{name}: the message is capped");
        }
    }
    assert!(!op.task.is_finished(), "the manager is still running");

    // A well-formed object after all that converges.
    let calm = json!({"metadata": {"namespace": env.ns}, "image": {"app": {"repository": "a", "tag": "1", "pullPolicy": "Always"},
                      "mongodb": {"repository": "m", "tag": "1", "pullPolicy": "Always"}},
                      "service": {"app": {"type": "ClusterIP"}, "mongodb": {"type": "ClusterIP"}}});
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "charts.example.com/v1alpha1", "kind": "BookStore",
        "metadata": {"name": "calm"}, "spec": calm}))
    .expect("object");
    bookstores
        .create(&PostParams::default(), &obj)
        .await
        .expect("create");
    wait_for(&env, &ar, "calm", 60, "Successful", |o| {
        has(o, "Successful", "True", None)
    })
    .await;
    op.stop().await;
}
