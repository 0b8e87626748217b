//! Finding 1: nothing is written before every cache the pipeline reads has synced.
use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use kube::api::PostParams;
use kube::ResourceExt;
use serde_json::json;

use crate::support::perturb::Perturb;
use crate::support::*;

#[tokio::test]
async fn a_foreign_service_is_not_taken_over_while_the_service_cache_loads() {
    let env = env("rel-svc-late", false).await;
    let foreign: Service = serde_json::from_value(json!({
        "metadata": {"name": "shop-app"},
        "spec": {"ports": [{"name": "web", "port": 1, "protocol": "TCP"}]}
    }))
    .expect("svc");
    env.api::<Service>()
        .create(&PostParams::default(), &foreign)
        .await
        .expect("foreign svc");
    env.create(&minimal("shop")).await;

    // The Service cache syncs 3 s after every other one.
    let perturb = Perturb::default();
    perturb.delay_lists("services", Duration::from_secs(3));
    let op = env.start_operator_with(&perturb).await;
    env.wait_condition("shop", "Degraded", "True", Some("NameConflict"), 30)
        .await;
    let s = env.api::<Service>().get("shop-app").await.expect("svc");
    assert!(s.owner_references().is_empty(), "taken over: {s:?}");
    assert_eq!(s.spec.expect("spec").ports.expect("ports")[0].port, 1);
    op.stop().await;
}

#[tokio::test]
async fn a_restart_writes_nothing_while_a_child_cache_loads() {
    let env = env("rel-dep-late", false).await;
    let op = env.start_operator().await;
    env.create(&minimal("one")).await;
    // Every kind of field: a node port, resources, quantities in non-canonical spellings.
    env.create(
        "apiVersion: charts.example.com/v1\nkind: BookStore\nmetadata:\n  name: two\nspec:\n  bookApp:\n    serviceType: NodePort\n    replicas: 2\n    resources:\n      requests: {cpu: \"0.1\", memory: 64Mi}\n      limits: {memory: 0.125Gi}\n  bookDB:\n    dbSize: 1024Mi\n    storageClassName: standard\n",
    )
    .await;
    env.wait_converged("one", 60).await;
    env.wait_converged("two", 60).await;
    op.stop().await;

    // Restart with the Deployment cache syncing 3 s late: both BookStores are reconciled
    // (triggered by the BookStore list) and nothing is written, status included.
    let perturb = Perturb::default();
    perturb.delay_lists("deployments", Duration::from_secs(3));
    let op = env.start_operator_with(&perturb).await;
    op.wait_reconciles(2.0, 30).await;
    assert_eq!(
        perturb.all_writes(),
        Default::default(),
        "writes on a restart over converged BookStores"
    );
    for name in ["one", "two"] {
        let bs = env.bookstore(name).await;
        let ready = bs
            .status
            .expect("status")
            .conditions
            .into_iter()
            .find(|c| c.type_ == "Ready")
            .expect("ready");
        assert_eq!(ready.status, "True", "{name} stayed Ready");
    }
    op.stop().await;
}
