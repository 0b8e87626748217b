//! A chart with hooks, a value that turns a template off, a kept object, a cluster-scoped
//! object and a workload, run beside the seed's BookStore chart from one watches file (two
//! entries at once): hooks run in Helm's order and are cleaned up by their policies, objects
//! a revision no longer renders are pruned but kept ones stay, a deleted cluster-scoped
//! child comes back, a template error is reported with its file:line while the other entry's
//! custom resources converge, and uninstall runs the pre-delete hook.
mod support;

use bosun_helm_operator::{release, Storage};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, Patch, PatchParams};
use kube::ResourceExt;
use serde_json::json;
use support::*;

const USER: &str = "system:serviceaccount:bosun-system:bosun-helm-lifecycle";

fn watches() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/charts/watches.yaml")
}

fn record(secret: &Secret) -> release::Release {
    let data =
        String::from_utf8(secret.data.clone().expect("data")["release"].0.clone()).expect("utf8");
    release::decode(&data).expect("decode")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_prune_keep_cluster_scoped_and_two_entries() {
    let env = env("helm-life").await;
    let ops = operators(&watches(), Storage::Secrets);
    assert_eq!(ops.len(), 2, "two entries, two operators");
    install_crds(&env.admin, &ops).await;
    grant(&env, &ops, USER).await;
    let op = start(&env, ops, USER).await;
    let lc = resource("test.bosun.dev", "v1", "Lifecycle");
    let bs = resource("charts.example.com", "v1alpha1", "BookStore");
    create(&env, &lc, "apiVersion: test.bosun.dev/v1\nkind: Lifecycle\nmetadata:\n  name: lc\nspec:\n  greeting: hi\n").await;
    create(&env, &bs, "apiVersion: charts.example.com/v1alpha1\nkind: BookStore\nmetadata:\n  name: shop\nspec: {}\n").await;

    let done = wait_for(&env, &lc, "lc", 120, "Deployed and Ready", |o| {
        has(o, "Deployed", "True", Some("InstallSuccessful")) && has(o, "Ready", "True", None)
    })
    .await;
    assert!(condition(&done, "Deployed")
        .and_then(|c| c["message"].as_str())
        .is_some_and(|m| m.starts_with("Greeting hi from release lc")));
    wait_for(
        &env,
        &bs,
        "shop",
        120,
        "the other entry's CR Deployed",
        |o| has(o, "Deployed", "True", None),
    )
    .await;

    let cms: Api<ConfigMap> = Api::namespaced(env.admin.clone(), &env.ns);
    let data = |name: &'static str| {
        let cms = cms.clone();
        async move { cms.get_opt(name).await.expect("get").and_then(|c| c.data) }
    };
    assert_eq!(data("lc-config").await.expect("config")["greeting"], "hi");
    assert!(data("lc-extra").await.is_some());
    // Hooks: pre-install hooks ran by weight; hook-succeeded cleaned one up; the Job hook
    // completed before the release was recorded; the test hook never ran.
    assert_eq!(
        data("lc-pre-early").await.expect("pre hook")["revision"],
        "1"
    );
    assert!(
        data("lc-pre-late").await.is_none(),
        "hook-succeeded deleted it"
    );
    let jobs: Api<Job> = Api::namespaced(env.admin.clone(), &env.ns);
    let job = jobs.get("lc-post").await.expect("post-install job");
    assert!(
        job.status.and_then(|s| s.succeeded).unwrap_or(0) >= 1,
        "the Job hook finished"
    );
    let pods: Api<Pod> = Api::namespaced(env.admin.clone(), &env.ns);
    assert!(
        pods.get_opt("lc-test").await.expect("get").is_none(),
        "test hooks are helm test's"
    );
    let secrets: Api<Secret> = Api::namespaced(env.admin.clone(), &env.ns);
    let rec = record(
        &secrets
            .get("sh.helm.release.v1.lc.v1")
            .await
            .expect("record"),
    );
    let run = |name: &str| {
        rec.hooks
            .iter()
            .find(|h| h.name == name)
            .map(|h| h.last_run.clone())
            .expect("hook recorded")
    };
    let (early, late, post) = (run("lc-pre-early"), run("lc-pre-late"), run("lc-post"));
    assert_eq!(
        (
            early.phase.as_str(),
            late.phase.as_str(),
            post.phase.as_str()
        ),
        ("Succeeded", "Succeeded", "Succeeded")
    );
    let t = |s: &str| {
        s.parse::<k8s_openapi::jiff::Timestamp>()
            .expect("a Go time")
    };
    assert!(
        t(&early.completed_at) <= t(&late.started_at),
        "weight -5 ran before weight 5: {early:?} {late:?}"
    );
    assert!(
        t(&late.completed_at) <= t(&post.started_at),
        "pre-install before post-install"
    );
    assert!(run("lc-goodbye").phase.is_empty(), "pre-delete has not run");
    // A cluster-scoped object names its owner by annotation (no owner reference).
    let roles: Api<ClusterRole> = Api::all(env.admin.clone());
    let role_name = format!("{}-lc-reader", env.ns);
    let role = roles.get(&role_name).await.expect("cluster role");
    assert!(role.owner_references().is_empty());
    assert_eq!(
        role.annotations()["operator-sdk/primary-resource"],
        format!("{}/lc", env.ns)
    );
    assert_eq!(
        role.annotations()["operator-sdk/primary-resource-type"],
        "Lifecycle.test.bosun.dev"
    );

    // A deleted cluster-scoped child comes back (its annotation triggers the owner).
    roles
        .delete(&role_name, &Default::default())
        .await
        .expect("delete");
    let back = eventually(60, || async {
        roles
            .get_opt(&role_name)
            .await
            .ok()
            .flatten()
            .filter(|r| r.metadata.deletion_timestamp.is_none())
    })
    .await;
    assert!(back.is_some(), "cluster-scoped child repaired");

    // Upgrade turning two templates off: the extra ConfigMap is pruned, the kept one stays.
    let lcs = api(&env, &lc);
    lcs.patch("lc", &PatchParams::default(), &Patch::Merge(json!({"spec": {"extra": {"enabled": false}, "kept": {"enabled": false}, "replicas": 2}})))
        .await
        .expect("patch");
    wait_for(&env, &lc, "lc", 120, "upgraded and Ready", |o| {
        has(o, "Deployed", "True", Some("UpgradeSuccessful")) && has(o, "Ready", "True", None)
    })
    .await;
    assert!(data("lc-extra").await.is_none(), "pruned");
    assert!(
        data("lc-kept").await.is_some(),
        "helm.sh/resource-policy: keep"
    );
    assert_eq!(
        data("lc-pre-early").await.expect("pre-upgrade hook")["revision"],
        "2",
        "recreated before the upgrade"
    );

    // A template error: reported with its file:line; the objects of revision 2 stay; the
    // other entry's CRs are unaffected.
    lcs.patch(
        "lc",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"broken": true}})),
    )
    .await
    .expect("patch");
    let failed = wait_for(&env, &lc, "lc", 60, "ReleaseFailed", |o| {
        has(o, "ReleaseFailed", "True", Some("UpgradeError"))
    })
    .await;
    let msg = condition(&failed, "ReleaseFailed")
        .and_then(|c| c["message"].as_str())
        .unwrap_or("")
        .to_string();
    assert!(
        msg.contains("lifecycle/templates/config.yaml:2"),
        "file:line in {msg:?}"
    );
    assert!(msg.contains("this release is broken on purpose"), "{msg}");
    assert!(has(&failed, "Ready", "False", None));
    assert!(
        data("lc-config").await.is_some(),
        "no rollback, no deletion: the last good objects stay"
    );
    create(&env, &bs, "apiVersion: charts.example.com/v1alpha1\nkind: BookStore\nmetadata:\n  name: shop2\nspec: {}\n").await;
    wait_for(&env, &bs, "shop2", 60, "reported", |o| {
        condition(o, "ReleaseFailed").is_some()
    })
    .await;
    // (The seed chart names its objects without the release name: a second BookStore in
    // the namespace finds them taken and says so, rather than taking them over.)
    let shop2 = api(&env, &bs).get("shop2").await.expect("shop2");
    let conflict = condition(&shop2, "ReleaseFailed")
        .and_then(|c| c["message"].as_str())
        .unwrap_or("");
    assert!(
        conflict.contains("cannot be imported") || conflict.contains("owned by"),
        "{conflict}"
    );
    assert!(
        has(
            &api(&env, &bs).get("shop").await.expect("shop"),
            "Deployed",
            "True",
            None
        ),
        "the first BookStore is untouched"
    );
    lcs.patch(
        "lc",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"broken": false}})),
    )
    .await
    .expect("patch");
    let fixed = wait_for(&env, &lc, "lc", 60, "recovered", |o| {
        has(o, "Deployed", "True", None) && condition(o, "ReleaseFailed").is_none()
    })
    .await;
    assert!(has(&fixed, "Ready", "True", None));

    // Uninstall: the pre-delete hook runs; the release's objects and records go; kept stays.
    lcs.delete("lc", &Default::default()).await.expect("delete");
    let gone = eventually(90, || async {
        let cr = lcs.get_opt("lc").await.ok()?;
        let cfg = cms.get_opt("lc-config").await.ok()?;
        let role = roles.get_opt(&role_name).await.ok()?;
        (cr.is_none() && cfg.is_none() && role.is_none()).then_some(())
    })
    .await;
    assert!(
        gone.is_some(),
        "uninstalled, the cluster-scoped object included"
    );
    assert!(
        data("lc-goodbye").await.is_some(),
        "the pre-delete hook ran"
    );
    assert!(
        data("lc-kept").await.is_some(),
        "kept objects outlive the release"
    );
    let left = secrets
        .list(&Default::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter(|s| s.name_any().starts_with("sh.helm.release.v1.lc."))
        .count();
    assert_eq!(left, 0, "release records removed");
    op.stop().await;
}

/// Helm's order with Helm's concurrency: the objects of one kind are sent together (Helm's
/// `batchPerform`), and every object of a kind is in place before the next kind's are sent.
/// The seed chart renders two Services, then two Deployments.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kinds_objects_are_sent_together_and_kind_after_kind() {
    const ORDER_USER: &str = "system:serviceaccount:bosun-system:bosun-helm-order";
    let env = env("helm-order").await;
    let ops = operators(
        &repo().join("examples/helm-bookstore/watches.yaml"),
        Storage::Secrets,
    );
    install_crds(&env.admin, &ops).await;
    grant(&env, &ops, ORDER_USER).await;
    let op = start(&env, ops, ORDER_USER).await;
    let bs = resource("charts.example.com", "v1alpha1", "BookStore");
    create(&env, &bs, "apiVersion: charts.example.com/v1alpha1\nkind: BookStore\nmetadata:\n  name: shop\nspec: {}\n").await;
    wait_for(&env, &bs, "shop", 120, "Deployed", |o| {
        has(o, "Deployed", "True", None)
    })
    .await;
    let timeline = op.writes.timeline();
    op.stop().await;
    let of = |kind: &str, what: &str| what.contains(&format!("/{kind}/"));
    let answer = |i: usize| -> usize {
        let what = &timeline[i].1;
        timeline[i..]
            .iter()
            .position(|(sent, w)| !*sent && w == what)
            .map(|j| i + j)
            .expect("every write was answered")
    };
    let first_deployment = timeline
        .iter()
        .position(|(sent, w)| *sent && of("deployments", w))
        .expect("a Deployment was written");
    let services: Vec<usize> = (0..first_deployment)
        .filter(|&i| timeline[i].0 && of("services", &timeline[i].1))
        .collect();
    let mut names: Vec<&String> = services.iter().map(|&i| &timeline[i].1).collect();
    names.dedup();
    names.sort();
    names.dedup();
    assert_eq!(
        names.len(),
        2,
        "both Services before any Deployment: {timeline:?}"
    );
    assert!(
        services.iter().all(|&i| answer(i) < first_deployment),
        "no Deployment was sent while a Service write was in flight: {timeline:?}"
    );
    let second = services
        .iter()
        .copied()
        .find(|&i| timeline[i].1 != timeline[services[0]].1)
        .expect("the other Service");
    assert!(
        second < answer(services[0]),
        "the second Service was sent before the first one's answer came: {timeline:?}"
    );
}
