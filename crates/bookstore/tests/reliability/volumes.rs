//! Findings 3-7: volume claims and their resize, whatever state the StatefulSet is in.
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::ResourceExt;
use serde_json::json;

use crate::support::perturb::Perturb;
use crate::support::*;

fn requested(c: &PersistentVolumeClaim) -> Option<String> {
    Some(
        c.spec.as_ref()?.resources.as_ref()?.requests.as_ref()?["storage"]
            .0
            .clone(),
    )
}

async fn claim(env: &Env, name: &str) -> PersistentVolumeClaim {
    env.api::<PersistentVolumeClaim>()
        .get(name)
        .await
        .expect("claim")
}

/// Deletes the StatefulSet leaving its pods and claims (what bosun's resize does, or an
/// admin's `kubectl delete --cascade=orphan`), and waits until it is gone.
async fn orphan_statefulset(env: &Env, name: &str) {
    let sets = env.api::<StatefulSet>();
    let dp = DeleteParams {
        propagation_policy: Some(kube::api::PropagationPolicy::Orphan),
        ..Default::default()
    };
    sets.delete(name, &dp).await.expect("delete");
    eventually(30, || async {
        sets.get_opt(name)
            .await
            .ok()
            .and_then(|s| s.is_none().then_some(()))
    })
    .await
    .expect("statefulset gone");
}

fn bookstore(name: &str, db: &str) -> String {
    format!("apiVersion: charts.example.com/v1\nkind: BookStore\nmetadata:\n  name: {name}\nspec:\n  bookDB:\n{db}")
}

/// Finding 3: a dbSize raised while the StatefulSet is absent still grows the claims.
#[tokio::test]
async fn claims_grow_when_the_statefulset_is_recreated_meanwhile() {
    let env = env("rel-vol-grow", false).await;
    let op = env.start_operator().await;
    env.create(&bookstore("shop", "    dbSize: 2Gi\n")).await;
    env.wait_condition("shop", "Ready", "True", None, 60).await;
    op.stop().await;

    orphan_statefulset(&env, "shop-mongodb").await;
    env.patch_spec("shop", json!({"bookDB": {"dbSize": "3Gi"}}))
        .await;
    let op = env.start_operator().await;
    let grown = eventually(30, || async {
        let c = env
            .api::<PersistentVolumeClaim>()
            .get("data-shop-mongodb-0")
            .await
            .ok()?;
        (requested(&c).as_deref() == Some("3Gi")).then_some(())
    })
    .await;
    let c = claim(&env, "data-shop-mongodb-0").await;
    assert!(
        grown.is_some(),
        "claim not grown: requests {:?}; BookStore status {:?}",
        requested(&c),
        env.bookstore("shop").await.status.map(|s| s.conditions)
    );
    let bs = env
        .wait_condition("shop", "Ready", "True", Some("AllReplicasReady"), 60)
        .await;
    assert_eq!(
        bs.status.expect("status").volume_size.as_deref(),
        Some("3Gi")
    );
    op.stop().await;
}

/// Finding 4a: the pod that cannot get ready (its disk is full) is the one whose restart
/// finishes the resize.
#[tokio::test]
async fn an_unready_pod_waiting_for_its_volume_is_restarted() {
    let env = env("rel-vol-unready", true).await;
    let op = env.start_operator().await;
    env.create(&bookstore("shop", "    dbSize: 2Gi\n")).await;
    env.wait_condition("shop", "Ready", "True", None, 60).await;
    let held = env
        .agent
        .hold_unready(&env.ns, "shop-mongodb-0")
        .await
        .expect("hold");
    env.wait_condition("shop", "Ready", "False", None, 30).await;

    env.patch_spec("shop", json!({"bookDB": {"dbSize": "3Gi"}}))
        .await;
    let bs = env
        .wait_condition("shop", "Ready", "True", Some("AllReplicasReady"), 60)
        .await;
    assert_eq!(
        bs.status.expect("status").volume_size.as_deref(),
        Some("3Gi")
    );
    let pod = env.api::<Pod>().get("shop-mongodb-0").await.expect("pod");
    assert_ne!(pod.uid().as_deref(), Some(held.as_str()), "restarted");
    op.stop().await;
}

/// Finding 4b: claims left by a scale-down are not grown (nobody mounts them, so they would
/// wait for a restart forever).
#[tokio::test]
async fn claims_of_removed_replicas_are_left_alone() {
    let env = env("rel-vol-scaled", true).await;
    let op = env.start_operator().await;
    env.create(&bookstore("shop", "    replicas: 2\n    dbSize: 2Gi\n"))
        .await;
    env.wait_condition("shop", "Ready", "True", None, 90).await;
    env.patch_spec("shop", json!({"bookDB": {"replicas": 1}}))
        .await;
    env.wait_condition("shop", "Ready", "True", None, 60).await;

    env.patch_spec("shop", json!({"bookDB": {"dbSize": "3Gi"}}))
        .await;
    let bs = env
        .wait_condition("shop", "Ready", "True", Some("AllReplicasReady"), 60)
        .await;
    assert_eq!(
        bs.status.expect("status").volume_size.as_deref(),
        Some("3Gi")
    );
    assert_eq!(
        requested(&claim(&env, "data-shop-mongodb-1").await).as_deref(),
        Some("2Gi")
    );
    op.stop().await;
}

/// Finding 5: with the StatefulSet gone, the claims say what the volumes are: no shrink, no
/// class change. Naming the default class explicitly is no change.
#[tokio::test]
async fn shrink_and_class_change_are_refused_from_the_claims() {
    let env = env("rel-vol-refuse", false).await;
    let op = env.start_operator().await;
    env.create(&bookstore("shop", "    dbSize: 2Gi\n")).await;
    env.wait_condition("shop", "Ready", "True", None, 60).await;

    // The default class, named.
    env.patch_spec("shop", json!({"bookDB": {"storageClassName": "standard"}}))
        .await;
    env.wait_condition("shop", "Ready", "True", Some("AllReplicasReady"), 60)
        .await;
    env.patch_spec("shop", json!({"bookDB": {"storageClassName": null}}))
        .await;
    env.wait_condition("shop", "Ready", "True", Some("AllReplicasReady"), 60)
        .await;
    op.stop().await;

    orphan_statefulset(&env, "shop-mongodb").await;
    env.patch_spec("shop", json!({"bookDB": {"dbSize": "1Gi"}}))
        .await;
    let op = env.start_operator().await;
    env.wait_condition("shop", "Degraded", "True", Some("ShrinkRefused"), 30)
        .await;
    env.patch_spec(
        "shop",
        json!({"bookDB": {"dbSize": "2Gi", "storageClassName": "fixed"}}),
    )
    .await;
    env.wait_condition(
        "shop",
        "Degraded",
        "True",
        Some("StorageClassChangeRefused"),
        30,
    )
    .await;
    assert!(
        env.api::<StatefulSet>()
            .get_opt("shop-mongodb")
            .await
            .expect("get")
            .is_none(),
        "recreated over claims it does not fit"
    );
    env.patch_spec("shop", json!({"bookDB": {"storageClassName": null}}))
        .await;
    env.wait_condition("shop", "Ready", "True", Some("AllReplicasReady"), 60)
        .await;
    op.stop().await;
}

/// Finding 6: a BookStore deleted while its StatefulSet is being recreated leaves no pod
/// behind, and its claims (dataPolicy: Delete) go.
#[tokio::test]
async fn a_bookstore_deleted_mid_resize_leaves_no_pods() {
    let env = env("rel-vol-deleted", false).await;
    let perturb = Perturb::default();
    let op = env.start_operator_with(&perturb).await;
    env.create(&bookstore(
        "shop",
        "    replicas: 2\n    dbSize: 2Gi\n    dataPolicy: Delete\n",
    ))
    .await;
    env.wait_condition("shop", "Ready", "True", None, 90).await;

    // The StatefulSet is deleted (orphaning its pods) and cannot come back.
    perturb.fail(http::Method::PATCH, "statefulsets");
    env.patch_spec("shop", json!({"bookDB": {"dbSize": "3Gi"}}))
        .await;
    let pods = env.api::<Pod>();
    let lp = ListParams::default().labels("app.kubernetes.io/component=mongodb");
    eventually(30, || async {
        let gone = env
            .api::<StatefulSet>()
            .get_opt("shop-mongodb")
            .await
            .ok()?
            .is_none();
        let orphans = pods.list(&lp).await.ok()?.items.iter().all(|p| {
            !p.owner_references()
                .iter()
                .any(|o| o.controller == Some(true))
        });
        (gone && orphans).then_some(())
    })
    .await
    .expect("pods orphaned");

    env.api::<bosun_bookstore::BookStore>()
        .delete("shop", &DeleteParams::default())
        .await
        .expect("delete");
    let clean = eventually(60, || async {
        let pods = pods.list(&lp).await.ok()?.items;
        let claims = env
            .api::<PersistentVolumeClaim>()
            .list(&ListParams::default())
            .await
            .ok()?
            .items;
        (pods.is_empty() && claims.is_empty()).then_some(())
    })
    .await;
    let left: Vec<String> = pods
        .list(&lp)
        .await
        .expect("pods")
        .items
        .iter()
        .map(|p| p.name_any())
        .collect();
    let claims: Vec<String> = env
        .api::<PersistentVolumeClaim>()
        .list(&ListParams::default())
        .await
        .expect("claims")
        .items
        .iter()
        .map(|c| c.name_any())
        .collect();
    assert!(
        clean.is_some(),
        "left behind: pods {left:?}, claims {claims:?}"
    );
    op.kill();
}

/// Finding 7: a claim with the name the StatefulSet would use, not made for this BookStore
/// (no labels), is never mounted silently.
#[tokio::test]
async fn an_unlabelled_claim_with_the_name_is_not_mounted() {
    let env = env("rel-vol-foreign", false).await;
    let foreign: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "data-shop-mongodb-0"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    }))
    .expect("claim");
    env.api::<PersistentVolumeClaim>()
        .create(&PostParams::default(), &foreign)
        .await
        .expect("foreign claim");
    let op = env.start_operator().await;
    env.create(&minimal("shop")).await;
    let bs = env
        .wait_condition("shop", "Degraded", "True", Some("ForeignClaims"), 30)
        .await;
    let msg = bs
        .status
        .expect("status")
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Degraded")
        .expect("degraded")
        .message;
    assert!(msg.contains("data-shop-mongodb-0"), "{msg}");
    assert!(
        env.api::<StatefulSet>()
            .get_opt("shop-mongodb")
            .await
            .expect("get")
            .is_none(),
        "StatefulSet created over a foreign claim"
    );
    // Taken on purpose.
    env.patch_spec("shop", json!({"bookDB": {"adoptClaims": true}}))
        .await;
    env.wait_condition("shop", "Ready", "True", Some("AllReplicasReady"), 60)
        .await;
    let c = claim(&env, "data-shop-mongodb-0").await;
    assert_eq!(
        c.labels().get("bookstore.bosun.dev/owner-uid"),
        env.bookstore("shop").await.uid().as_ref()
    );
    op.stop().await;
}
