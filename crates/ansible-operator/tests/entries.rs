//! One entry's problem is that entry's: a watches file with four kinds, one of which no
//! engine can run (its role is missing), loads; the three others converge on the real API
//! server, and each custom resource of the fourth reports why in its `Failure` condition and
//! a Warning Event. The third kind is a playbook in `playbooks/` using a role in `roles/`,
//! as operator-sdk lays out a project (`roles_path` = the project's `roles/`).
mod support;

use std::path::Path;

use bosun_ansible_operator::engines;
use k8s_openapi::api::core::v1::{ConfigMap, Event};
use kube::api::{Api, ListParams};
use serde_json::json;
use support::*;

const WATCHES: &str = "\
- {group: test.bosun.dev, version: v1alpha1, kind: Alpha, role: stamp, vars: {tag: alpha}}
- {group: test.bosun.dev, version: v1alpha1, kind: Beta, role: stamp, vars: {tag: beta}}
- {group: test.bosun.dev, version: v1alpha1, kind: Gamma, playbook: playbooks/gamma.yml}
- {group: test.bosun.dev, version: v1alpha1, kind: Delta, role: not_written_yet}
";

fn project(dir: &Path) -> std::path::PathBuf {
    let role = dir.join("roles/stamp/tasks");
    std::fs::create_dir_all(&role).expect("dir");
    std::fs::write(
        role.join("main.yml"),
        "- name: stamp\n  k8s:\n    definition:\n      apiVersion: v1\n      kind: ConfigMap\n      metadata:\n        name: \"{{ ansible_operator_meta.name }}-{{ tag }}\"\n        namespace: \"{{ ansible_operator_meta.namespace }}\"\n      data: {tag: \"{{ tag }}\"}\n",
    )
    .expect("role");
    std::fs::create_dir_all(dir.join("playbooks")).expect("dir");
    std::fs::write(
        dir.join("playbooks/gamma.yml"),
        "- hosts: localhost\n  gather_facts: false\n  vars: {tag: gamma}\n  roles: [stamp]\n",
    )
    .expect("playbook");
    watches(dir, WATCHES)
}

#[test]
fn an_entry_that_cannot_load_is_that_entrys_problem() {
    let dir = tempfile::tempdir().expect("dir");
    let w = project(dir.path());
    let file = bosun_watches::WatchesFile::load(&w).expect("watches file");
    let opts = bosun_ansible_operator::AnsibleOptions {
        watches_dir: w.parent().map(Path::to_path_buf),
        ansible: None,
        ..Default::default()
    };
    let ops = bosun_ansible_operator::operators(&file.entries, &opts).expect("the file loads");
    let refused: Vec<_> = ops
        .iter()
        .map(|o| o.flavor().refused.as_deref().map(String::from))
        .collect();
    assert_eq!(refused.len(), 4);
    assert!(refused[..3].iter().all(Option::is_none), "{refused:?}");
    let why = refused[3].as_deref().expect("Delta refused");
    assert!(why.contains("Delta.test.bosun.dev/v1alpha1"), "{why}");
    assert!(why.contains("'not_written_yet' was not found"), "{why}");
    let metric = engines::Engines::global().encode_openmetrics();
    assert!(
        metric.contains("GVK=\"test.bosun.dev/v1alpha1, Kind=Delta\",engine=\"refused\""),
        "{metric}"
    );
    assert!(
        metric.contains("GVK=\"test.bosun.dev/v1alpha1, Kind=Gamma\",engine=\"native\""),
        "{metric}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_kinds_converge_while_the_fourth_reports_why() {
    let env = env("ao-entries").await;
    let dir = tempfile::tempdir().expect("dir");
    let w = project(dir.path());
    let ops = operators(&w);
    install_crds(&env.admin, &ops).await;
    grant(&env, &ops, USER).await;
    let op = start(&env, ops, USER).await;
    for kind in ["Alpha", "Beta", "Gamma", "Delta"] {
        create_json(
            &env,
            &resource("test.bosun.dev", "v1alpha1", kind),
            json!({"apiVersion": "test.bosun.dev/v1alpha1", "kind": kind,
                   "metadata": {"name": "one"}, "spec": {}}),
        )
        .await;
    }
    for kind in ["Alpha", "Beta", "Gamma"] {
        wait_for(
            &env,
            &resource("test.bosun.dev", "v1alpha1", kind),
            "one",
            60,
            "Successful",
            |o| has(o, "Successful", "True", Some("Successful")),
        )
        .await;
        let tag = kind.to_lowercase();
        let cm = Api::<ConfigMap>::namespaced(env.admin.clone(), &env.ns)
            .get(&format!("one-{tag}"))
            .await
            .expect("the kind's ConfigMap");
        assert_eq!(cm.data.expect("data")["tag"], tag);
    }
    let delta = wait_for(
        &env,
        &resource("test.bosun.dev", "v1alpha1", "Delta"),
        "one",
        60,
        "Failure",
        |o| has(o, "Failure", "True", Some("Failed")),
    )
    .await;
    let msg = condition(&delta, "Failure").expect("Failure")["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(msg.contains("'not_written_yet' was not found"), "{msg}");
    let events = Api::<Event>::namespaced(env.admin.clone(), &env.ns);
    let warned = eventually(30, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items.into_iter().find(|e| {
            e.involved_object.kind.as_deref() == Some("Delta")
                && e.type_.as_deref() == Some("Warning")
                && e.message
                    .as_deref()
                    .is_some_and(|m| m.contains("not_written_yet"))
        })
    })
    .await;
    assert!(warned.is_some(), "a Warning Event on the Delta");
    op.stop().await;
}

/// Under real Ansible too: the playbook in `playbooks/` finds its role in the project's
/// `roles/` (ANSIBLE_ROLES_PATH, as operator-sdk's image gives it), loads (Ansible's own
/// syntax check) and converges.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_playbook_finds_the_projects_roles_under_real_ansible() {
    let out = std::process::Command::new("bash")
        .arg(repo().join("scripts/setup-ansible.sh"))
        .output()
        .expect("run scripts/setup-ansible.sh");
    assert!(out.status.success(), "setup-ansible.sh failed");
    let venv = std::path::PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let env = env("ao-playbook").await;
    let dir = tempfile::tempdir().expect("dir");
    project(dir.path());
    let w = watches(
        dir.path(),
        "- {group: test.bosun.dev, version: v1alpha1, kind: Gamma, playbook: playbooks/gamma.yml}\n",
    );
    let file = bosun_watches::WatchesFile::load(&w).expect("watches file");
    let opts = bosun_ansible_operator::AnsibleOptions {
        watches_dir: w.parent().map(Path::to_path_buf),
        engine: bosun_ansible_operator::EngineFlag::Ansible,
        ansible: Some(bosun_ansible_runner::Installation {
            runner: venv.join("bin/ansible-runner"),
        }),
        ..Default::default()
    };
    let ops: Vec<std::sync::Arc<dyn bosun_runtime::manager::Operator>> =
        bosun_ansible_operator::operators(&file.entries, &opts)
            .expect("loads")
            .into_iter()
            .map(|o| {
                assert!(o.flavor().refused.is_none(), "{:?}", o.flavor().refused);
                assert!(o.flavor().fallback.is_some(), "runs under real Ansible");
                std::sync::Arc::new(o) as _
            })
            .collect();
    install_crds(&env.admin, &ops).await;
    grant(&env, &ops, USER).await;
    let op = start(&env, ops, USER).await;
    let gammas = resource("test.bosun.dev", "v1alpha1", "Gamma");
    create_json(
        &env,
        &gammas,
        json!({"apiVersion": "test.bosun.dev/v1alpha1", "kind": "Gamma",
               "metadata": {"name": "two"}, "spec": {}}),
    )
    .await;
    wait_for(&env, &gammas, "two", 180, "Successful", |o| {
        has(o, "Successful", "True", Some("Successful"))
    })
    .await;
    let cm = Api::<ConfigMap>::namespaced(env.admin.clone(), &env.ns)
        .get("two-gamma")
        .await
        .expect("the playbook's ConfigMap");
    assert_eq!(cm.data.expect("data")["tag"], "gamma");
    op.stop().await;
}

/// Backup and restore kinds in real operators' shape: the Backup copies a ConfigMap and says
/// where in its status, the Restore reads that and writes the data back under another name,
/// and deleting the Backup runs its finalizer (the entry's role with `state: absent`), which
/// removes the copy before the Backup goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_and_restore_kinds_converge_and_the_finalizer_cleans_up() {
    let env = env("ao-backup").await;
    let dir = tempfile::tempdir().expect("dir");
    let w = watches(
        dir.path(),
        "- {group: test.bosun.dev, version: v1alpha1, kind: Backup, role: backup, vars: {state: present},\n   finalizer: {name: test.bosun.dev/backup, vars: {state: absent}}}\n- {group: test.bosun.dev, version: v1alpha1, kind: Restore, role: restore}\n",
    );
    let ops = operators(&w);
    install_crds(&env.admin, &ops).await;
    grant(&env, &ops, USER).await;
    let op = start(&env, ops, USER).await;
    let cms = Api::<ConfigMap>::namespaced(env.admin.clone(), &env.ns);
    let source: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "app-config"}, "data": {"db": "postgres", "replicas": "3"}
    }))
    .expect("configmap");
    cms.create(&kube::api::PostParams::default(), &source)
        .await
        .expect("create");
    let backups = resource("test.bosun.dev", "v1alpha1", "Backup");
    let restores = resource("test.bosun.dev", "v1alpha1", "Restore");
    create_json(
        &env,
        &backups,
        json!({"apiVersion": "test.bosun.dev/v1alpha1", "kind": "Backup",
               "metadata": {"name": "nightly"}, "spec": {"source": "app-config"}}),
    )
    .await;
    let b = wait_for(&env, &backups, "nightly", 60, "Successful", |o| {
        has(o, "Successful", "True", Some("Successful"))
    })
    .await;
    assert_eq!(b.data["status"]["backupConfigMap"], "backup-nightly");
    create_json(
        &env,
        &restores,
        json!({"apiVersion": "test.bosun.dev/v1alpha1", "kind": "Restore",
               "metadata": {"name": "back"}, "spec": {"backupName": "nightly", "target": "app-config-restored"}}),
    )
    .await;
    wait_for(&env, &restores, "back", 60, "Successful", |o| {
        has(o, "Successful", "True", Some("Successful"))
    })
    .await;
    let restored = cms.get("app-config-restored").await.expect("restored");
    assert_eq!(restored.data, source.data);
    // The finalizer runs the role with state: absent, then lets the Backup go.
    api(&env, &backups)
        .delete("nightly", &Default::default())
        .await
        .expect("delete");
    let gone = eventually(60, || async {
        let b = api(&env, &backups).get_opt("nightly").await.ok()?;
        let copy = cms.get_opt("backup-nightly").await.ok()?;
        (b.is_none() && copy.is_none()).then_some(())
    })
    .await;
    assert!(gone.is_some(), "the Backup and its copy are gone");
    op.stop().await;
}
