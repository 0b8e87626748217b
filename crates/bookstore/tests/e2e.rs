//! The BookStore operator end to end on a real API server with kube-controller-manager
//! (garbage collection, Deployment and StatefulSet controllers) and the simulated node agent.
mod support;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::ResourceExt;
use serde_json::json;
use support::*;

#[tokio::test]
async fn seed_sample_converges_to_ready_with_columns_filled() {
    let env = env("bs-seed", false).await;
    let op = env.start_operator().await;
    let created = env.create(SEED_SAMPLE).await;
    let uid = created.uid().expect("uid");

    let bs = env
        .wait_condition(
            "bookstore-sample",
            "Ready",
            "True",
            Some("AllReplicasReady"),
            60,
        )
        .await;
    let st = bs.status.expect("status");
    assert_eq!((st.app.as_str(), st.db.as_str()), ("1/1", "1/1"));
    assert_eq!(st.volume_size.as_deref(), Some("2Gi"));

    // Children with the right specs and owner references.
    let dep = env
        .api::<Deployment>()
        .get("bookstore-sample-app")
        .await
        .expect("deployment");
    let c = &dep
        .spec
        .as_ref()
        .expect("spec")
        .template
        .spec
        .as_ref()
        .expect("pod")
        .containers[0];
    assert_eq!(c.image.as_deref(), Some("akash125/pyapp:latest"));
    assert_eq!(c.image_pull_policy.as_deref(), Some("Always"));
    assert_eq!(c.ports.as_ref().expect("ports")[0].container_port, 3000);
    let env_vars: Vec<(String, String)> = c
        .env
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|e| (e.name, e.value.unwrap_or_default()))
        .collect();
    assert!(env_vars.contains(&("MONGODB_HOST".into(), "bookstore-sample-mongodb".into())));
    let sts = env
        .api::<StatefulSet>()
        .get("bookstore-sample-mongodb")
        .await
        .expect("statefulset");
    let vct = &sts
        .spec
        .as_ref()
        .expect("spec")
        .volume_claim_templates
        .as_ref()
        .expect("vct")[0];
    assert_eq!(
        vct.spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .expect("req")["storage"]
            .0,
        "2Gi"
    );
    for svc in [
        "bookstore-sample-app",
        "bookstore-sample-mongodb",
        "bookstore-sample-mongodb-headless",
    ] {
        let s = env.api::<Service>().get(svc).await.expect(svc);
        let owner = &s.owner_references()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("BookStore", uid.as_str(), Some(true))
        );
    }
    assert_eq!(dep.owner_references()[0].uid, uid);
    assert_eq!(sts.owner_references()[0].uid, uid);
    let headless = env
        .api::<Service>()
        .get("bookstore-sample-mongodb-headless")
        .await
        .expect("headless");
    assert_eq!(
        headless.spec.and_then(|s| s.cluster_ip).as_deref(),
        Some("None")
    );
    // Claims carry no owner reference: data outlives its BookStore.
    let pvc = env
        .api::<PersistentVolumeClaim>()
        .get("data-bookstore-sample-mongodb-0")
        .await
        .expect("claim");
    assert!(pvc.owner_references().is_empty());

    // `kubectl get bs` columns, as the API server's table rendering fills them.
    let req = http::Request::get(format!(
        "/apis/charts.example.com/v1/namespaces/{}/bookstores",
        env.ns
    ))
    .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
    .body(Vec::new())
    .expect("request");
    let table: serde_json::Value = env.admin.request(req).await.expect("table");
    let cols: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .expect("cols")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(cols, ["Name", "Ready", "App", "DB", "DB-Size", "Age"]);
    let row = &table["rows"][0]["cells"];
    assert_eq!(row[0], "bookstore-sample");
    assert_eq!(
        (
            row[1].as_str(),
            row[2].as_str(),
            row[3].as_str(),
            row[4].as_str()
        ),
        (Some("True"), Some("1/1"), Some("1/1"), Some("2Gi"))
    );
    op.stop().await;
}

#[tokio::test]
async fn every_update_path_reaches_the_children() {
    let env = env("bs-update", false).await;
    let op = env.start_operator().await;
    env.create(&minimal("shop")).await;
    env.wait_condition("shop", "Ready", "True", None, 60).await;

    env.patch_spec("shop", json!({
        "bookApp": {"replicas": 3, "repository": "example/pyapp", "tag": "v2", "imagePullPolicy": "Never",
                    "port": 8080, "targetPort": 5000, "serviceType": "NodePort",
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}}},
        "bookDB": {"replicas": 2, "tag": "6.0", "port": 27018, "imagePullPolicy": "Always"}
    }))
    .await;
    let bs = env.wait_condition("shop", "Ready", "True", None, 90).await;
    assert_eq!(bs.status.as_ref().map(|s| s.app.as_str()), Some("3/3"));
    let dep = env.api::<Deployment>().get("shop-app").await.expect("dep");
    let spec = dep.spec.expect("spec");
    assert_eq!(spec.replicas, Some(3));
    let c = &spec.template.spec.expect("pod").containers[0];
    assert_eq!(c.image.as_deref(), Some("example/pyapp:v2"));
    assert_eq!(c.image_pull_policy.as_deref(), Some("Never"));
    assert_eq!(c.ports.as_ref().expect("ports")[0].container_port, 5000);
    assert_eq!(
        c.resources
            .as_ref()
            .and_then(|r| r.limits.as_ref())
            .expect("limits")["memory"]
            .0,
        "128Mi"
    );
    assert!(c
        .env
        .as_ref()
        .expect("env")
        .iter()
        .any(|e| e.name == "MONGODB_PORT" && e.value.as_deref() == Some("27018")));
    let svc = env
        .api::<Service>()
        .get("shop-app")
        .await
        .expect("svc")
        .spec
        .expect("spec");
    assert_eq!(svc.type_.as_deref(), Some("NodePort"));
    assert_eq!(svc.ports.as_ref().expect("ports")[0].port, 8080);
    let sts = env
        .api::<StatefulSet>()
        .get("shop-mongodb")
        .await
        .expect("sts")
        .spec
        .expect("spec");
    assert_eq!(sts.replicas, Some(2));
    let db = &sts.template.spec.expect("pod").containers[0];
    assert_eq!(db.image.as_deref(), Some("mongo:6.0"));
    let client_svc = env
        .api::<Service>()
        .get("shop-mongodb")
        .await
        .expect("svc")
        .spec
        .expect("spec");
    assert_eq!(client_svc.ports.expect("ports")[0].port, 27018);

    // And back to ClusterIP (a NodePort Service must drop its node port).
    env.patch_spec("shop", json!({"bookApp": {"serviceType": "ClusterIP"}}))
        .await;
    let svc = eventually(30, || async {
        let s = env.api::<Service>().get("shop-app").await.ok()?.spec?;
        (s.type_.as_deref() == Some("ClusterIP")).then_some(s)
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "service type not reverted: {:#?}",
            futures::executor::block_on(async { None::<()> })
        )
    });
    assert_eq!(svc.ports.expect("ports")[0].node_port, None);

    // Scale subresource: `kubectl scale bs/shop --replicas=2`.
    let scale = json!({"spec": {"replicas": 2}});
    env.api::<bosun_bookstore::BookStore>()
        .patch_scale("shop", &PatchParams::default(), &Patch::Merge(&scale))
        .await
        .expect("scale");
    let got = eventually(30, || async {
        let d = env.api::<Deployment>().get("shop-app").await.ok()?;
        (d.spec?.replicas == Some(2)).then_some(())
    })
    .await;
    assert!(got.is_some(), "scale reached the Deployment");
    let s = env
        .api::<bosun_bookstore::BookStore>()
        .get_scale("shop")
        .await
        .expect("get scale");
    assert!(s
        .status
        .expect("scale status")
        .selector
        .expect("selector")
        .contains("app.kubernetes.io/instance=shop"));
    op.stop().await;
}

#[tokio::test]
async fn drift_is_repaired() {
    let env = env("bs-drift", false).await;
    let op = env.start_operator().await;
    env.create(&minimal("drift")).await;
    env.wait_condition("drift", "Ready", "True", None, 60).await;

    env.api::<Service>()
        .delete("drift-app", &DeleteParams::default())
        .await
        .expect("delete svc");
    let back = eventually(30, || async {
        env.api::<Service>()
            .get_opt("drift-app")
            .await
            .ok()
            .flatten()
    })
    .await;
    assert!(back.is_some(), "deleted Service recreated");

    let patch = json!({"spec": {"replicas": 7}});
    env.api::<Deployment>()
        .patch(
            "drift-app",
            &PatchParams::apply("someone-else").force(),
            &Patch::Apply(&json!({
                "apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 7}
            })),
        )
        .await
        .or(env
            .api::<Deployment>()
            .patch("drift-app", &PatchParams::default(), &Patch::Merge(&patch))
            .await)
        .expect("edit");
    let fixed = eventually(30, || async {
        let d = env.api::<Deployment>().get("drift-app").await.ok()?;
        (d.spec?.replicas == Some(1)).then_some(())
    })
    .await;
    assert!(fixed.is_some(), "edited replicas restored");

    env.api::<StatefulSet>()
        .delete("drift-mongodb", &DeleteParams::default())
        .await
        .expect("delete sts");
    let back = eventually(30, || async {
        let s = env
            .api::<StatefulSet>()
            .get_opt("drift-mongodb")
            .await
            .ok()
            .flatten()?;
        s.metadata.deletion_timestamp.is_none().then_some(s)
    })
    .await;
    assert!(back.is_some(), "deleted StatefulSet recreated");
    // kube-controller-manager scales the 7 drifted pods back down; under a loaded CI machine
    // that can take a while.
    env.wait_condition("drift", "Ready", "True", None, 120)
        .await;
    op.stop().await;
}

#[tokio::test]
async fn delete_keeps_claims_unless_asked() {
    let env = env("bs-delete", false).await;
    let op = env.start_operator().await;
    env.create(&minimal("keep")).await;
    env.create("apiVersion: charts.example.com/v1\nkind: BookStore\nmetadata:\n  name: drop\nspec:\n  bookDB:\n    dataPolicy: Delete\n").await;
    env.wait_condition("keep", "Ready", "True", None, 60).await;
    let dropped = env.wait_condition("drop", "Ready", "True", None, 60).await;
    assert!(dropped
        .finalizers()
        .iter()
        .any(|f| f == bosun_bookstore::reconcile::FINALIZER));
    let keep = env.bookstore("keep").await;
    assert!(
        keep.finalizers().is_empty(),
        "no finalizer when nothing needs cleaning up"
    );

    let bss = env.api::<bosun_bookstore::BookStore>();
    bss.delete("keep", &DeleteParams::default())
        .await
        .expect("delete");
    bss.delete("drop", &DeleteParams::default())
        .await
        .expect("delete");
    let gone = eventually(60, || async {
        let deps = env
            .api::<Deployment>()
            .list(&ListParams::default())
            .await
            .ok()?
            .items;
        let sets = env
            .api::<StatefulSet>()
            .list(&ListParams::default())
            .await
            .ok()?
            .items;
        let svcs = env
            .api::<Service>()
            .list(&ListParams::default())
            .await
            .ok()?
            .items;
        (deps.is_empty() && sets.is_empty() && svcs.is_empty()).then_some(())
    })
    .await;
    assert!(gone.is_some(), "children removed by garbage collection");
    let claims = eventually(30, || async {
        let c: Vec<String> = env
            .api::<PersistentVolumeClaim>()
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .iter()
            .map(|c| c.name_any())
            .collect();
        (!c.iter().any(|n| n.contains("drop"))).then_some(c)
    })
    .await
    .expect("drop's claims deleted");
    assert_eq!(
        claims,
        vec!["data-keep-mongodb-0".to_string()],
        "keep's claim kept"
    );
    assert!(
        bss.get_opt("drop").await.expect("get").is_none(),
        "finalizer released"
    );

    // A new BookStore with the old name does not silently reuse (or touch) the old claim.
    env.create(&minimal("keep")).await;
    let bs = env
        .wait_condition(
            "keep",
            "Degraded",
            "True",
            Some("ClaimsFromPreviousOwner"),
            30,
        )
        .await;
    assert!(bs
        .status
        .expect("status")
        .conditions
        .iter()
        .any(|c| c.message.contains("data-keep-mongodb-0")));
    let old = env
        .api::<PersistentVolumeClaim>()
        .get("data-keep-mongodb-0")
        .await
        .expect("claim");
    assert_ne!(
        old.labels().get("bookstore.bosun.dev/owner-uid"),
        env.bookstore("keep").await.uid().as_ref()
    );
    assert!(env
        .events_for("keep")
        .await
        .iter()
        .any(|(r, _)| r == "ClaimsFromPreviousOwner"));
    // Adopting on purpose.
    env.patch_spec("keep", json!({"bookDB": {"adoptClaims": true}}))
        .await;
    env.wait_condition("keep", "Ready", "True", None, 60).await;
    let old = env
        .api::<PersistentVolumeClaim>()
        .get("data-keep-mongodb-0")
        .await
        .expect("claim");
    assert_eq!(
        old.labels().get("bookstore.bosun.dev/owner-uid"),
        env.bookstore("keep").await.uid().as_ref()
    );
    op.stop().await;
}

#[tokio::test]
async fn two_bookstores_share_a_namespace_and_names_are_never_taken_over() {
    let env = env("bs-two", false).await;
    let op = env.start_operator().await;
    env.create("apiVersion: charts.example.com/v1\nkind: BookStore\nmetadata:\n  name: alpha\nspec:\n  bookDB:\n    serviceName: mongodb-service\n").await;
    env.create(&minimal("beta")).await;
    env.wait_condition("alpha", "Ready", "True", None, 60).await;
    env.wait_condition("beta", "Ready", "True", None, 60).await;
    for name in ["alpha-app", "beta-app"] {
        env.api::<Deployment>().get(name).await.expect(name);
    }

    // gamma asks for the Service alpha holds.
    env.create("apiVersion: charts.example.com/v1\nkind: BookStore\nmetadata:\n  name: gamma\nspec:\n  bookDB:\n    serviceName: mongodb-service\n").await;
    let gamma = env
        .wait_condition("gamma", "Degraded", "True", Some("NameConflict"), 30)
        .await;
    let msg = &gamma
        .status
        .expect("status")
        .conditions
        .iter()
        .find(|c| c.type_ == "Degraded")
        .expect("c")
        .message
        .clone();
    assert!(
        msg.contains("mongodb-service") && msg.contains("alpha"),
        "{msg}"
    );
    let svc = env
        .api::<Service>()
        .get("mongodb-service")
        .await
        .expect("svc");
    assert_eq!(svc.owner_references()[0].name, "alpha", "not taken over");
    assert!(
        env.api::<Deployment>()
            .get_opt("gamma-app")
            .await
            .expect("get")
            .is_none(),
        "nothing of gamma written"
    );
    assert!(env
        .events_for("gamma")
        .await
        .iter()
        .any(|(r, _)| r == "NameConflict"));

    // An object bosun did not create is never taken over either.
    let foreign: Service = serde_json::from_value(json!({
        "metadata": {"name": "delta-app"},
        "spec": {"ports": [{"port": 1, "protocol": "TCP"}]}
    }))
    .expect("svc");
    env.api::<Service>()
        .create(&PostParams::default(), &foreign)
        .await
        .expect("foreign svc");
    env.create(&minimal("delta")).await;
    env.wait_condition("delta", "Degraded", "True", Some("NameConflict"), 30)
        .await;
    let s = env.api::<Service>().get("delta-app").await.expect("svc");
    assert!(
        s.owner_references().is_empty() && s.spec.expect("spec").ports.expect("p")[0].port == 1
    );

    // Resolving the conflict lets gamma converge.
    env.patch_spec("gamma", json!({"bookDB": {"serviceName": "gamma-db"}}))
        .await;
    env.wait_condition("gamma", "Ready", "True", None, 60).await;
    op.stop().await;
}

#[tokio::test]
async fn volume_expansion_grows_every_claim_and_restarts_pods_one_by_one() {
    let env = env("bs-resize", true).await;
    let op = env.start_operator().await;
    env.create("apiVersion: charts.example.com/v1\nkind: BookStore\nmetadata:\n  name: big\nspec:\n  bookDB:\n    replicas: 3\n    dbSize: 2Gi\n").await;
    env.wait_condition("big", "Ready", "True", None, 90).await;
    let pods_before: Vec<(String, String)> = env
        .api::<Pod>()
        .list(&ListParams::default().labels("app.kubernetes.io/component=mongodb"))
        .await
        .expect("pods")
        .items
        .iter()
        .map(|p| (p.name_any(), p.uid().unwrap_or_default()))
        .collect();
    assert_eq!(pods_before.len(), 3);
    let sts_uid = env
        .api::<StatefulSet>()
        .get("big-mongodb")
        .await
        .expect("sts")
        .uid();

    env.patch_spec("big", json!({"bookDB": {"dbSize": "3Gi"}}))
        .await;
    let bs = env
        .wait_condition("big", "Ready", "True", Some("AllReplicasReady"), 120)
        .await;
    let bs_status = bs.status.expect("status");
    assert_eq!(bs_status.volume_size.as_deref(), Some("3Gi"));
    for i in 0..3 {
        let c = env
            .api::<PersistentVolumeClaim>()
            .get(&format!("data-big-mongodb-{i}"))
            .await
            .expect("claim");
        assert_eq!(
            c.spec
                .and_then(|s| s.resources)
                .and_then(|r| r.requests)
                .expect("req")["storage"]
                .0,
            "3Gi"
        );
        assert_eq!(
            c.status.and_then(|s| s.capacity).expect("cap")["storage"].0,
            "3Gi"
        );
    }
    let sts = env
        .api::<StatefulSet>()
        .get("big-mongodb")
        .await
        .expect("sts");
    assert_ne!(sts.uid(), sts_uid, "StatefulSet recreated");
    let vct = &sts.spec.expect("spec").volume_claim_templates.expect("vct")[0];
    assert_eq!(
        vct.spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .expect("req")["storage"]
            .0,
        "3Gi"
    );
    let pods_after = env
        .api::<Pod>()
        .list(&ListParams::default().labels("app.kubernetes.io/component=mongodb"))
        .await
        .expect("pods")
        .items;
    let events = env.events_for("big").await;
    for (name, uid) in &pods_before {
        let p = pods_after
            .iter()
            .find(|p| &p.name_any() == name)
            .unwrap_or_else(|| {
                let seen: Vec<_> = pods_after
                    .iter()
                    .map(|p| {
                        (
                            p.name_any(),
                            p.uid(),
                            p.metadata.deletion_timestamp.is_some(),
                        )
                    })
                    .collect();
                panic!("pod {name} not back: {seen:?}; status {bs_status:?}; events {events:?}")
            });
        assert_ne!(p.uid().as_ref(), Some(uid), "{name} restarted");
    }
    let restarts: Vec<&String> = events
        .iter()
        .filter(|(r, _)| r == "PodRestarted")
        .map(|(_, n)| n)
        .collect();
    assert_eq!(restarts.len(), 3, "one restart per pod: {events:?}");
    assert!(events.iter().any(|(r, _)| r == "VolumeExpansionStarted"));

    // Shrinking is refused and touches nothing. (The StatefulSet controller still writes
    // its status, so the resourceVersion is no measure: what bosun writes is the spec and
    // metadata.)
    let written = |s: StatefulSet| {
        (
            s.uid(),
            s.metadata.generation,
            s.metadata.labels.clone(),
            s.metadata.annotations.clone(),
            s.metadata.owner_references.clone(),
        )
    };
    let sts_before = written(
        env.api::<StatefulSet>()
            .get("big-mongodb")
            .await
            .expect("sts"),
    );
    env.patch_spec("big", json!({"bookDB": {"dbSize": "1Gi"}}))
        .await;
    let bs = env
        .wait_condition("big", "Degraded", "True", Some("ShrinkRefused"), 30)
        .await;
    assert!(bs
        .status
        .expect("s")
        .conditions
        .iter()
        .any(|c| c.message.contains("never shrink")));
    assert_eq!(
        written(
            env.api::<StatefulSet>()
                .get("big-mongodb")
                .await
                .expect("sts")
        ),
        sts_before
    );
    let c = env
        .api::<PersistentVolumeClaim>()
        .get("data-big-mongodb-0")
        .await
        .expect("claim");
    assert_eq!(
        c.spec
            .and_then(|s| s.resources)
            .and_then(|r| r.requests)
            .expect("req")["storage"]
            .0,
        "3Gi"
    );
    assert!(env
        .events_for("big")
        .await
        .iter()
        .any(|(r, _)| r == "ShrinkRefused"));
    // Setting it back recovers.
    env.patch_spec("big", json!({"bookDB": {"dbSize": "3Gi"}}))
        .await;
    env.wait_condition("big", "Degraded", "False", None, 30)
        .await;
    op.stop().await;
}

#[tokio::test]
async fn expansion_on_a_fixed_class_or_a_class_change_is_refused() {
    let env = env("bs-fixed", false).await;
    let op = env.start_operator().await;
    env.create("apiVersion: charts.example.com/v1\nkind: BookStore\nmetadata:\n  name: fixed\nspec:\n  bookDB:\n    storageClassName: fixed\n").await;
    env.wait_condition("fixed", "Ready", "True", None, 60).await;
    env.patch_spec("fixed", json!({"bookDB": {"dbSize": "5Gi"}}))
        .await;
    let bs = env
        .wait_condition(
            "fixed",
            "Degraded",
            "True",
            Some("ExpansionNotSupported"),
            30,
        )
        .await;
    assert!(bs
        .status
        .expect("s")
        .conditions
        .iter()
        .any(|c| c.message.contains("fixed")));
    let c = env
        .api::<PersistentVolumeClaim>()
        .get("data-fixed-mongodb-0")
        .await
        .expect("claim");
    assert_eq!(
        c.spec
            .and_then(|s| s.resources)
            .and_then(|r| r.requests)
            .expect("req")["storage"]
            .0,
        "1Gi"
    );

    env.patch_spec(
        "fixed",
        json!({"bookDB": {"dbSize": "1Gi", "storageClassName": "standard"}}),
    )
    .await;
    env.wait_condition(
        "fixed",
        "Degraded",
        "True",
        Some("StorageClassChangeRefused"),
        30,
    )
    .await;
    op.stop().await;
}
