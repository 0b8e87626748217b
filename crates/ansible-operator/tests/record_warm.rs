//! A kind a role names only at run time (a templated `kind:`) is not among the kinds that
//! start warm with the controller ([`bosun_watches::Flavor::warm_kinds`] reads the role's
//! text): only the replica whose run met it watched it. The leader now writes it in the
//! record of child kinds on its Lease, and a standby lists it before it leads — after a
//! failover the new leader's reconcile lists nothing of it.
mod support;

use bosun_watches::Flavor;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::json;
use support::*;

const LEASE: &str = "bosun-ansible-record";

/// A role whose only child's kind comes from a variable.
fn project(dir: &std::path::Path) -> std::path::PathBuf {
    let role = dir.join("roles/templated");
    std::fs::create_dir_all(role.join("tasks")).expect("mkdir");
    std::fs::create_dir_all(role.join("defaults")).expect("mkdir");
    std::fs::write(role.join("defaults/main.yml"), "child_kind: ConfigMap\n").expect("defaults");
    std::fs::write(
        role.join("tasks/main.yml"),
        "- k8s:\n    definition:\n      apiVersion: v1\n      kind: \"{{ child_kind }}\"\n      \
         metadata:\n        name: \"{{ ansible_operator_meta.name }}-child\"\n        \
         namespace: \"{{ ansible_operator_meta.namespace }}\"\n      data:\n        \
         size: \"{{ size | default(1) | string }}\"\n",
    )
    .expect("tasks");
    watches(
        dir,
        "- version: v1alpha1\n  group: test.bosun.dev\n  kind: Widget\n  role: templated\n",
    )
}

/// Replica `identity` of the operators of `watches`, its requests recorded in `seen`.
fn replica(
    env: &Env,
    watches: &std::path::Path,
    config: &kube::Config,
    identity: &str,
    seen: &Requests,
) -> Elected {
    start_elected(
        env,
        config.clone(),
        operators(watches),
        LEASE,
        identity,
        seen,
    )
}

/// Once the ConfigMap `name` exists.
async fn exists(configmaps: &Api<ConfigMap>, name: &str) -> Option<()> {
    configmaps.get_opt(name).await.ok().flatten().map(|_| ())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_warms_a_kind_the_role_names_only_at_run_time() {
    let env = env("ans-record").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let watches = project(dir.path());
    let file = bosun_watches::WatchesFile::load(&watches).expect("watches");
    let opts = bosun_ansible_operator::AnsibleOptions {
        watches_dir: Some(dir.path().to_path_buf()),
        ansible: None,
        ..Default::default()
    };
    let loaded = bosun_ansible_operator::operators(&file.entries, &opts).expect("loads");
    assert!(
        loaded[0].flavor().warm_kinds().is_empty(),
        "the templated kind is not known from the role's text"
    );
    let ops = operators(&watches);
    install_crds(&env.admin, &ops).await;
    let config = env.cp.config().await.expect("config");
    let path = format!("/api/v1/namespaces/{}/configmaps", env.ns);
    let configmaps: Api<ConfigMap> = Api::namespaced(env.admin.clone(), &env.ns);

    let a_seen = Requests::default();
    let a = replica(&env, &watches, &config, "a", &a_seen);
    widget(&env, "w1", json!({"size": 1})).await;
    eventually(90, || exists(&configmaps, "w1-child"))
        .await
        .expect("a leads and its run creates the templated ConfigMap");
    eventually(30, || async { (a_seen.lists(&path) >= 1).then_some(()) })
        .await
        .expect("a watches the kind its run met");

    let b_seen = Requests::default();
    let b = replica(&env, &watches, &config, "b", &b_seen);
    eventually(60, || async { (b_seen.lists(&path) >= 1).then_some(()) })
        .await
        .expect("standby b lists the ConfigMaps a's run met, before it leads (a cold standby never does)");
    let warmed = b_seen.lists(&path);

    let _ = a.stop.send(());
    a.task.await.expect("join").expect("a stopped cleanly");
    widget(&env, "w2", json!({"size": 2})).await;
    eventually(90, || exists(&configmaps, "w2-child"))
        .await
        .expect("b leads and its run creates the next ConfigMap");
    assert_eq!(
        b_seen.lists(&path),
        warmed,
        "the new leader listed the ConfigMaps once it led: its cache was cold"
    );
    let _ = b.stop.send(());
    b.task.await.expect("join").expect("b stopped cleanly");
}
