//! Hostile input and a crashing operator: bad specs are refused by the schema or reported in
//! status, the operator stays up, and a valid BookStore beside them still converges; an
//! operator killed mid-convergence and restarted converges with no duplicates.
mod support;

use bosun_bookstore::reason::Reason;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::Service;
use kube::api::{ListParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::Api;
use serde_json::json;
use support::*;

/// What must happen to a hostile spec.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Expect {
    /// The CRD schema refuses it: the API server answers 422 and nothing is stored.
    Schema,
    /// One of the CRD's validation rules (CEL) refuses it, with a message containing this
    /// text; the reconcile's own check of the same rule is `validate.rs`'s unit tests.
    Rule(&'static str),
    /// It passes the schema and the BookStore reports it: Degraded with this reason, and an
    /// Event with the same reason.
    Reported(Reason),
}
use Expect::*;

/// (case, spec, outcome).
fn hostile_specs() -> Vec<(&'static str, serde_json::Value, Expect)> {
    let huge = "a".repeat(300_000);
    vec![
        (
            "replicas as string",
            json!({"bookApp": {"replicas": "three"}}),
            Schema,
        ),
        (
            "negative app replicas",
            json!({"bookApp": {"replicas": -1}}),
            Schema,
        ),
        (
            "negative db replicas",
            json!({"bookDB": {"replicas": -5}}),
            Schema,
        ),
        (
            "absurd replicas",
            json!({"bookApp": {"replicas": 1_000_000}}),
            Schema,
        ),
        (
            "replicas beyond int32",
            json!({"bookApp": {"replicas": 9_999_999_999i64}}),
            Schema,
        ),
        (
            "fractional replicas",
            json!({"bookApp": {"replicas": 1.5}}),
            Schema,
        ),
        ("port zero", json!({"bookApp": {"port": 0}}), Schema),
        ("port too high", json!({"bookApp": {"port": 70000}}), Schema),
        (
            "negative targetPort",
            json!({"bookApp": {"targetPort": -80}}),
            Schema,
        ),
        (
            "db port as object",
            json!({"bookDB": {"port": {"value": 1}}}),
            Schema,
        ),
        (
            "unknown pull policy",
            json!({"bookApp": {"imagePullPolicy": "Sometimes"}}),
            Schema,
        ),
        (
            "lowercase pull policy",
            json!({"bookDB": {"imagePullPolicy": "always"}}),
            Schema,
        ),
        (
            "unknown service type",
            json!({"bookApp": {"serviceType": "ExternalName"}}),
            Schema,
        ),
        (
            "service type number",
            json!({"bookApp": {"serviceType": 3}}),
            Schema,
        ),
        (
            "dbSize nonsense",
            json!({"bookDB": {"dbSize": "lots"}}),
            Schema,
        ),
        (
            "dbSize negative",
            json!({"bookDB": {"dbSize": "-1Gi"}}),
            Schema,
        ),
        (
            "dbSize wrong unit",
            json!({"bookDB": {"dbSize": "2GB"}}),
            Schema,
        ),
        (
            "dbSize tiny",
            json!({"bookDB": {"dbSize": "1Ki"}}),
            Rule("at least 64Mi"),
        ),
        (
            "dbSize zero",
            json!({"bookDB": {"dbSize": "0"}}),
            Rule("at least 64Mi"),
        ),
        ("dbSize as number", json!({"bookDB": {"dbSize": 2}}), Schema),
        (
            "empty repository",
            json!({"bookApp": {"repository": ""}}),
            Schema,
        ),
        (
            "repository with spaces",
            json!({"bookApp": {"repository": "evil image"}}),
            Schema,
        ),
        (
            "repository shell injection",
            json!({"bookDB": {"repository": "mongo;rm -rf /"}}),
            Schema,
        ),
        (
            "huge repository",
            json!({"bookApp": {"repository": huge.clone()}}),
            Schema,
        ),
        (
            "huge tag",
            json!({"bookApp": {"tag": "t".repeat(5000)}}),
            Schema,
        ),
        (
            "tag with unicode",
            json!({"bookApp": {"tag": "v1-\u{1F4A3}"}}),
            Schema,
        ),
        (
            "repository RTL override",
            json!({"bookApp": {"repository": "\u{202E}gpj.exe"}}),
            Schema,
        ),
        (
            "tag with NUL",
            json!({"bookDB": {"tag": "a\u{0000}b"}}),
            Schema,
        ),
        (
            "service name uppercase",
            json!({"bookDB": {"serviceName": "MongoDB"}}),
            Schema,
        ),
        (
            "service name too long",
            json!({"bookDB": {"serviceName": "m".repeat(64)}}),
            Schema,
        ),
        (
            "service name collides with app",
            json!({"bookDB": {"serviceName": "hostile-app"}}),
            Rule("collides with another Service"),
        ),
        (
            "storage class bad chars",
            json!({"bookDB": {"storageClassName": "fast/../../etc"}}),
            Schema,
        ),
        (
            "unknown data policy",
            json!({"bookDB": {"dataPolicy": "Shred"}}),
            Schema,
        ),
        ("bookApp as list", json!({"bookApp": [1, 2, 3]}), Schema),
        ("bookDB as string", json!({"bookDB": "mongo"}), Schema),
        (
            "resources bad quantity",
            json!({"bookApp": {"resources": {"limits": {"memory": "a lot"}}}}),
            Reported(Reason::InvalidResources),
        ),
        (
            "requests above limits",
            json!({"bookApp": {"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}}),
            Reported(Reason::ChildRejected),
        ),
        (
            "adoptClaims as string",
            json!({"bookDB": {"adoptClaims": "yes"}}),
            Schema,
        ),
        // A name valid for a Deployment (a DNS subdomain) but not for a Service.
        (
            "dotted name",
            json!({}),
            Rule("lower-case letters, digits and '-'"),
        ),
        ("name too long", json!({}), Rule("limited to 42 characters")),
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
    for (i, (case, spec, expect)) in cases.iter().enumerate() {
        // One of them shares a name with its own app Service name collision case.
        let name = match *case {
            "service name collides with app" => "hostile".to_string(),
            "dotted name" => format!("hostile.v{i}"),
            "name too long" => format!("hostile-{i}-{}", "x".repeat(40)),
            _ => format!("hostile-{i}"),
        };
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "charts.example.com/v1", "kind": "BookStore",
            "metadata": {"name": name}, "spec": spec
        }))
        .expect("object");
        match (dynamic.create(&PostParams::default(), &obj).await, expect) {
            (Err(kube::Error::Api(s)), Schema) => {
                assert!(
                    s.code == 422 || s.code == 400 || s.code == 413,
                    "{case}: unexpected {s:?}"
                );
                assert!(!s.message.is_empty(), "{case}: refusal has a message");
            }
            (Err(kube::Error::Api(s)), Rule(text)) => {
                assert_eq!(s.code, 422, "{case}: unexpected {s:?}");
                assert!(s.message.contains(text), "{case}: {:?}", s.message);
            }
            (Ok(_), Reported(reason)) => accepted.push((case, name, *reason)),
            (Err(e), Reported(_)) => panic!("{case}: expected to pass the schema, got {e}"),
            (Ok(_), Schema | Rule(_)) => {
                panic!("{case}: expected the schema to refuse it, it was stored")
            }
            (Err(e), Rule(_)) => panic!("{case}: {e}"),
            (Err(e), Schema) => panic!("{case}: {e}"),
        }
    }
    // A valid BookStore created after all of them still converges.
    env.create(&minimal("valid")).await;
    env.wait_condition("valid", "Ready", "True", None, 60).await;

    // Everything the schema let through is reported, with a reason and an Event.
    for (case, name, reason) in &accepted {
        let bs = env
            .wait_condition(name, "Degraded", "True", Some(reason.as_str()), 30)
            .await;
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
    // Nothing half-built: a spec refused by validation wrote no child.
    let deployments: Api<Deployment> = env.api();
    let names: Vec<String> = deployments
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|d| d.metadata.name)
        .collect();
    for (case, name, reason) in &accepted {
        if *reason != Reason::ChildRejected {
            assert!(
                !names.contains(&format!("{name}-app")),
                "{case}: a child was written: {names:?}"
            );
        }
    }
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
