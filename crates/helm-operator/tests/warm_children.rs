//! The child caches of a chart's kinds start with the controller and count in its readiness
//! (issue 37). Started by the first reconcile that touched a kind, they made every reconcile
//! after a restart — a user's new object's included — wait for the list of every release's
//! children of that kind, one kind after another: 9.0 s for a new object at 10,000 releases.
mod support;

use bosun_helm_operator::Storage;
use support::*;

const USER: &str = "system:serviceaccount:bosun-system:bosun-helm-warm";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_charts_child_kinds_are_listed_before_the_operator_is_ready() {
    let env = env("helm-warm").await;
    let watches = repo().join("examples/helm-bookstore/watches.yaml");
    let ops = operators(&watches, Storage::Secrets);
    install_crds(&env.admin, &ops).await;
    grant(&env, &ops, USER).await;
    // No custom resource: no reconcile runs, so what the operator has read of the children
    // when it reports ready, it read to become ready.
    let op = start(&env, ops, USER).await;
    op.ready().await;
    let reads = op.writes.reads();
    let read = |path: String| reads.iter().any(|r| r.starts_with(&path));
    for path in [
        format!("/apis/apps/v1/namespaces/{}/deployments?", env.ns),
        format!("/api/v1/namespaces/{}/services?", env.ns),
    ] {
        assert!(
            read(path.clone()),
            "{path} not read before ready; reads: {reads:#?}"
        );
    }
    assert_eq!(op.reconciles(), 0.0, "no custom resource, no reconcile");
    op.stop().await;
}
