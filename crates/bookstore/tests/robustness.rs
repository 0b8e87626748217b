//! Hostile input and a crashing operator: bad specs are refused by the schema or reported in
//! status, the operator stays up, and a valid BookStore beside them still converges; an
//! operator killed mid-convergence and restarted converges with no duplicates.
mod support;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::Service;
use kube::api::{ListParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::Api;
use serde_json::json;
use support::*;

/// (case, spec) pairs; each must be refused by the API server or end Degraded.
fn hostile_specs() -> Vec<(&'static str, serde_json::Value)> {
    let huge = "a".repeat(300_000);
    vec![
        (
            "replicas as string",
            json!({"bookApp": {"replicas": "three"}}),
        ),
        (
            "negative app replicas",
            json!({"bookApp": {"replicas": -1}}),
        ),
        ("negative db replicas", json!({"bookDB": {"replicas": -5}})),
        (
            "absurd replicas",
            json!({"bookApp": {"replicas": 1_000_000}}),
        ),
        (
            "replicas beyond int32",
            json!({"bookApp": {"replicas": 9_999_999_999i64}}),
        ),
        ("fractional replicas", json!({"bookApp": {"replicas": 1.5}})),
        ("port zero", json!({"bookApp": {"port": 0}})),
        ("port too high", json!({"bookApp": {"port": 70000}})),
        (
            "negative targetPort",
            json!({"bookApp": {"targetPort": -80}}),
        ),
        (
            "db port as object",
            json!({"bookDB": {"port": {"value": 1}}}),
        ),
        (
            "unknown pull policy",
            json!({"bookApp": {"imagePullPolicy": "Sometimes"}}),
        ),
        (
            "lowercase pull policy",
            json!({"bookDB": {"imagePullPolicy": "always"}}),
        ),
        (
            "unknown service type",
            json!({"bookApp": {"serviceType": "ExternalName"}}),
        ),
        (
            "service type number",
            json!({"bookApp": {"serviceType": 3}}),
        ),
        ("dbSize nonsense", json!({"bookDB": {"dbSize": "lots"}})),
        ("dbSize negative", json!({"bookDB": {"dbSize": "-1Gi"}})),
        ("dbSize wrong unit", json!({"bookDB": {"dbSize": "2GB"}})),
        ("dbSize tiny", json!({"bookDB": {"dbSize": "1Ki"}})),
        ("dbSize zero", json!({"bookDB": {"dbSize": "0"}})),
        ("dbSize as number", json!({"bookDB": {"dbSize": 2}})),
        ("empty repository", json!({"bookApp": {"repository": ""}})),
        (
            "repository with spaces",
            json!({"bookApp": {"repository": "evil image"}}),
        ),
        (
            "repository shell injection",
            json!({"bookDB": {"repository": "mongo;rm -rf /"}}),
        ),
        (
            "huge repository",
            json!({"bookApp": {"repository": huge.clone()}}),
        ),
        ("huge tag", json!({"bookApp": {"tag": "t".repeat(5000)}})),
        (
            "tag with unicode",
            json!({"bookApp": {"tag": "v1-\u{1F4A3}"}}),
        ),
        (
            "repository RTL override",
            json!({"bookApp": {"repository": "\u{202E}gpj.exe"}}),
        ),
        ("tag with NUL", json!({"bookDB": {"tag": "a\u{0000}b"}})),
        (
            "service name uppercase",
            json!({"bookDB": {"serviceName": "MongoDB"}}),
        ),
        (
            "service name too long",
            json!({"bookDB": {"serviceName": "m".repeat(64)}}),
        ),
        (
            "service name collides with app",
            json!({"bookDB": {"serviceName": "hostile-app"}}),
        ),
        (
            "storage class bad chars",
            json!({"bookDB": {"storageClassName": "fast/../../etc"}}),
        ),
        (
            "unknown data policy",
            json!({"bookDB": {"dataPolicy": "Shred"}}),
        ),
        ("bookApp as list", json!({"bookApp": [1, 2, 3]})),
        ("bookDB as string", json!({"bookDB": "mongo"})),
        (
            "resources bad quantity",
            json!({"bookApp": {"resources": {"limits": {"memory": "a lot"}}}}),
        ),
        (
            "requests above limits",
            json!({"bookApp": {"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}}),
        ),
        (
            "adoptClaims as string",
            json!({"bookDB": {"adoptClaims": "yes"}}),
        ),
    ]
}

#[tokio::test]
async fn hostile_specs_are_refused_or_reported_and_never_stop_the_operator() {
    let env = env("bs-hostile", false).await;
    let op = env.start_operator().await;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("charts.example.com", "v1", "BookStore"),
        "bookstores",
    );
    let dynamic: Api<DynamicObject> = Api::namespaced_with(env.admin.clone(), &env.ns, &ar);

    let cases = hostile_specs();
    assert!(cases.len() >= 30);
    let mut accepted = Vec::new();
    let mut refused = 0;
    for (i, (case, spec)) in cases.iter().enumerate() {
        // One of them shares a name with its own app Service name collision case.
        let name = if *case == "service name collides with app" {
            "hostile".to_string()
        } else {
            format!("hostile-{i}")
        };
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "charts.example.com/v1", "kind": "BookStore",
            "metadata": {"name": name}, "spec": spec
        }))
        .expect("object");
        match dynamic.create(&PostParams::default(), &obj).await {
            Err(kube::Error::Api(s)) => {
                assert!(
                    s.code == 422 || s.code == 400 || s.code == 413,
                    "{case}: unexpected {s:?}"
                );
                assert!(!s.message.is_empty(), "{case}: refusal has a message");
                refused += 1;
            }
            Err(e) => panic!("{case}: {e}"),
            Ok(_) => accepted.push((case, name)),
        }
    }
    // A valid BookStore created after all of them still converges.
    env.create(&minimal("valid")).await;
    env.wait_condition("valid", "Ready", "True", None, 60).await;

    // Everything the schema let through is reported, with a reason and an Event.
    for (case, name) in &accepted {
        let bs = env.wait_condition(name, "Degraded", "True", None, 30).await;
        let c = bs
            .status
            .expect("status")
            .conditions
            .into_iter()
            .find(|c| c.type_ == "Degraded")
            .expect("degraded");
        assert!(!c.reason.is_empty() && !c.message.is_empty(), "{case}");
        let events = env.events_for(name).await;
        assert!(
            events.iter().any(|(r, _)| *r == c.reason),
            "{case}: event {} missing in {events:?}",
            c.reason
        );
    }
    println!(
        "{refused} refused by the schema, {} reported in status",
        accepted.len()
    );
    assert!(refused > 20 && !accepted.is_empty());
    assert!(!op.task.is_finished(), "the operator is still running");
    env.patch_spec("valid", json!({"bookApp": {"replicas": 2}}))
        .await;
    let bs = env.wait_condition("valid", "Ready", "True", None, 60).await;
    assert_eq!(bs.status.expect("status").app, "2/2");
    op.stop().await;
}

#[tokio::test]
async fn an_operator_killed_mid_convergence_converges_after_restart_without_duplicates() {
    let env = env("bs-crash", false).await;
    let op = env.start_operator().await;
    for i in 0..6 {
        env.create(&minimal(&format!("store-{i}"))).await;
    }
    // Kill it as soon as it has started writing.
    eventually(30, || async {
        let n = env
            .api::<Deployment>()
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .len();
        (n >= 1).then_some(())
    })
    .await
    .expect("started writing");
    op.kill();

    let op = env.start_operator().await;
    for i in 0..6 {
        env.wait_condition(&format!("store-{i}"), "Ready", "True", None, 90)
            .await;
    }
    let deps = env
        .api::<Deployment>()
        .list(&ListParams::default())
        .await
        .expect("deps")
        .items;
    let sets = env
        .api::<StatefulSet>()
        .list(&ListParams::default())
        .await
        .expect("sets")
        .items;
    let svcs = env
        .api::<Service>()
        .list(&ListParams::default())
        .await
        .expect("svcs")
        .items;
    assert_eq!(
        (deps.len(), sets.len(), svcs.len()),
        (6, 6, 18),
        "one of each child per BookStore"
    );
    let claims = env
        .api::<k8s_openapi::api::core::v1::PersistentVolumeClaim>()
        .list(&ListParams::default())
        .await
        .expect("claims")
        .items;
    assert_eq!(
        claims.len(),
        6,
        "one claim per MongoDB replica, nothing lost or doubled"
    );
    op.stop().await;
}
