//! Finding 8: a request the API server refuses reaches the BookStore's status (a condition
//! with the API's message) and an Event, and is retried with backoff.
use k8s_openapi::api::core::v1::{ResourceQuota, Service};
use kube::api::{DeleteParams, PostParams};
use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn a_quota_refusal_reaches_the_status() {
    let env = env("rel-api-quota", false).await;
    let quota: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": "no-load-balancers"},
        "spec": {"hard": {"services.loadbalancers": "0"}}
    }))
    .expect("quota");
    let quotas = env.api::<ResourceQuota>();
    quotas
        .create(&PostParams::default(), &quota)
        .await
        .expect("quota");
    // Admission enforces a quota once kube-controller-manager has computed its status.
    eventually(30, || async {
        let q = quotas.get("no-load-balancers").await.ok()?;
        q.status?.hard.map(|_| ())
    })
    .await
    .expect("quota computed");

    let op = env.start_operator().await;
    env.create("apiVersion: charts.example.com/v1\nkind: BookStore\nmetadata:\n  name: shop\nspec:\n  bookApp:\n    serviceType: LoadBalancer\n")
        .await;
    let bs = env
        .wait_condition("shop", "Degraded", "True", Some("Forbidden"), 30)
        .await;
    let degraded = bs
        .status
        .expect("status")
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Degraded")
        .expect("degraded");
    assert!(
        degraded.message.contains("exceeded quota") && degraded.message.contains("shop-app"),
        "{}",
        degraded.message
    );
    let events = env.events_for("shop").await;
    assert!(
        events
            .iter()
            .any(|(r, n)| r == "Forbidden" && n.contains("exceeded quota")),
        "{events:?}"
    );
    // Counted as an API error (backed off), not as a spec to fix.
    let metrics = op.metrics.encode();
    assert!(
        bosun_testenv::sum_series(
            &metrics,
            "bosun_reconcile_errors_total",
            &[("category", "api")]
        ) >= 1.0,
        "{metrics}"
    );

    // The quota goes: the next retry converges.
    quotas
        .delete("no-load-balancers", &DeleteParams::default())
        .await
        .expect("delete quota");
    env.wait_condition("shop", "Ready", "True", Some("AllReplicasReady"), 90)
        .await;
    let svc = env.api::<Service>().get("shop-app").await.expect("svc");
    assert_eq!(
        svc.spec.and_then(|s| s.type_).as_deref(),
        Some("LoadBalancer")
    );
    op.stop().await;
}
