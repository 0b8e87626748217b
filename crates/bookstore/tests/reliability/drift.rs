//! Finding 2: drift is repaired whenever and however it happens — a child edited while bosun
//! is stopped, metadata edits (which move no `generation`), a same-name recreate.
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::Service;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::ResourceExt;
use serde_json::json;

use crate::support::perturb::Perturb;
use crate::support::*;

const IMAGE: &str = "akash125/pyapp:latest";

fn image(d: &Deployment) -> Option<String> {
    d.spec.as_ref()?.template.spec.as_ref()?.containers[0]
        .image
        .clone()
}

fn target_port(s: &Service) -> Option<i32> {
    match s.spec.as_ref()?.ports.as_ref()?[0].target_port.as_ref()? {
        k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(i) => Some(*i),
        _ => None,
    }
}

/// `kubectl set image` and `kubectl edit`: updates by another field manager.
async fn edit_as(env: &Env, manager: &str) {
    let pp = PatchParams {
        field_manager: Some(manager.into()),
        ..Default::default()
    };
    env.api::<Deployment>()
        .patch(
            "shop-app",
            &pp,
            &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [
                {"name": "bookstore", "image": "evil/pyapp:1"}]}}}})),
        )
        .await
        .expect("set image");
    env.api::<Service>()
        .patch(
            "shop-app",
            &pp,
            &Patch::<()>::Json(
                serde_json::from_value(json!([
                    {"op": "replace", "path": "/spec/ports/0/targetPort", "value": 9999}
                ]))
                .expect("json patch"),
            ),
        )
        .await
        .expect("edit service");
}

#[tokio::test]
async fn children_edited_while_bosun_is_stopped_are_restored() {
    let env = env("rel-drift-down", false).await;
    let op = env.start_operator().await;
    env.create(&minimal("shop")).await;
    env.wait_condition("shop", "Ready", "True", None, 60).await;
    op.stop().await;

    edit_as(&env, "kubectl-set").await;
    let op = env.start_operator().await;
    let restored = eventually(30, || async {
        let d = env.api::<Deployment>().get("shop-app").await.ok()?;
        let s = env.api::<Service>().get("shop-app").await.ok()?;
        (image(&d).as_deref() == Some(IMAGE) && target_port(&s) == Some(3000)).then_some(())
    })
    .await;
    let d = env.api::<Deployment>().get("shop-app").await.expect("dep");
    let s = env.api::<Service>().get("shop-app").await.expect("svc");
    assert!(
        restored.is_some(),
        "not restored: image {:?}, targetPort {:?}",
        image(&d),
        target_port(&s)
    );
    op.stop().await;
}

#[tokio::test]
async fn metadata_edits_are_repaired() {
    let env = env("rel-drift-meta", false).await;
    let op = env.start_operator().await;
    let bs = env.create(&minimal("shop")).await;
    env.wait_condition("shop", "Ready", "True", None, 60).await;
    let json_patch = |ops: serde_json::Value| {
        Patch::<()>::Json(serde_json::from_value(ops).expect("json patch"))
    };
    let pp = PatchParams {
        field_manager: Some("kubectl-edit".into()),
        ..Default::default()
    };
    // A label removed from the Deployment, the hash annotation from the StatefulSet, the
    // owner reference from a Service: none of these moves `generation`.
    env.api::<Deployment>()
        .patch(
            "shop-app",
            &pp,
            &json_patch(json!([
                {"op": "remove", "path": "/metadata/labels/app.kubernetes.io~1managed-by"},
            ])),
        )
        .await
        .expect("edit deployment");
    env.api::<StatefulSet>()
        .patch(
            "shop-mongodb",
            &pp,
            &json_patch(json!([
                {"op": "remove", "path": "/metadata/annotations/bosun.dev~1applied-hash"},
            ])),
        )
        .await
        .expect("edit statefulset");
    env.api::<Service>()
        .patch(
            "shop-mongodb-headless",
            &pp,
            &json_patch(json!([{"op": "remove", "path": "/metadata/ownerReferences"}])),
        )
        .await
        .expect("edit service");

    let uid = bs.uid().expect("uid");
    let repaired = eventually(30, || async {
        let d = env.api::<Deployment>().get("shop-app").await.ok()?;
        let st = env.api::<StatefulSet>().get("shop-mongodb").await.ok()?;
        let s = env
            .api::<Service>()
            .get("shop-mongodb-headless")
            .await
            .ok()?;
        let labelled = d.labels().contains_key("app.kubernetes.io/managed-by");
        let hashed = st.annotations().contains_key("bosun.dev/applied-hash");
        let owned = s
            .owner_references()
            .iter()
            .any(|o| o.uid == uid && o.controller == Some(true));
        (labelled && hashed && owned).then_some(())
    })
    .await;
    let d = env.api::<Deployment>().get("shop-app").await.expect("dep");
    let st = env
        .api::<StatefulSet>()
        .get("shop-mongodb")
        .await
        .expect("sts");
    let s = env
        .api::<Service>()
        .get("shop-mongodb-headless")
        .await
        .expect("svc");
    assert!(
        repaired.is_some(),
        "not repaired: Deployment labels {:?}, StatefulSet annotations {:?}, Service owners {:?}; BookStore status {:?}",
        d.labels(),
        st.annotations(),
        s.owner_references(),
        env.bookstore("shop").await.status
    );
    env.wait_condition("shop", "Ready", "True", None, 30).await;
    op.stop().await;
}

#[tokio::test]
async fn a_same_name_recreate_is_reapplied() {
    let env = env("rel-drift-recreate", false).await;
    let perturb = Perturb::default();
    let op = env.start_operator_with(&perturb).await;
    env.create(&minimal("shop")).await;
    env.wait_condition("shop", "Ready", "True", None, 60).await;

    // Someone deletes the Deployment and creates one of the same name from a copy (owner
    // reference and hash annotation included) with another image. The operator sees both
    // events only afterwards (its Deployment watch is held), as a slow watch would show them.
    let deployments = env.api::<Deployment>();
    let mut copy = deployments.get("shop-app").await.expect("dep");
    perturb.stale("deployments", true);
    deployments
        .delete("shop-app", &DeleteParams::background())
        .await
        .expect("delete");
    eventually(30, || async {
        deployments
            .get_opt("shop-app")
            .await
            .ok()
            .and_then(|d| d.is_none().then_some(()))
    })
    .await
    .expect("deleted");
    copy.metadata = kube::api::ObjectMeta {
        name: copy.metadata.name.clone(),
        labels: copy.metadata.labels.clone(),
        annotations: copy.metadata.annotations.clone(),
        owner_references: copy.metadata.owner_references.clone(),
        ..Default::default()
    };
    copy.status = None;
    if let Some(pod) = copy.spec.as_mut().and_then(|s| s.template.spec.as_mut()) {
        pod.containers[0].image = Some("evil/pyapp:1".into());
    }
    let created = deployments
        .create(&PostParams::default(), &copy)
        .await
        .expect("recreate");
    assert_eq!(created.metadata.generation, Some(1));
    perturb.stale("deployments", false);

    let restored = eventually(30, || async {
        let d = deployments.get("shop-app").await.ok()?;
        (image(&d).as_deref() == Some(IMAGE)).then_some(())
    })
    .await;
    let d = deployments.get("shop-app").await.expect("dep");
    assert!(restored.is_some(), "not restored: image {:?}", image(&d));
    op.stop().await;
}
