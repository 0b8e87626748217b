//! Real Ansible as the fallback: the engine each entry runs on (chosen at load, forced by
//! the flag, refused with the install hint when real Ansible is missing), and a role only
//! real Ansible runs (`command`), run by the operator on the real API server through
//! ansible-runner and bosun's loopback proxy: the ConfigMap it creates carries the owner
//! reference, the CR gets `Successful`, a failing task reports `Failure` with its message
//! and a Warning Event, and deletion goes through the finalizer.
//!
//! Needs `scripts/setup-ansible.sh` (the venv with ansible-runner).
mod support;

use std::path::{Path, PathBuf};
use std::time::Instant;

use bosun_ansible_operator::{AnsibleFlavor, AnsibleOptions};
use bosun_ansible_runner::{EngineFlag, Installation};
use bosun_runtime::manager::Operator;
use bosun_watches::{WatchOperator, WatchesFile};
use k8s_openapi::api::core::v1::{ConfigMap, Event};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::ResourceExt;
use serde_json::json;
use std::sync::Arc;
use support::*;

fn venv() -> PathBuf {
    let out = std::process::Command::new("bash")
        .arg(repo().join("scripts/setup-ansible.sh"))
        .output()
        .expect("run scripts/setup-ansible.sh");
    assert!(
        out.status.success(),
        "scripts/setup-ansible.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

fn real_ansible() -> Installation {
    Installation {
        runner: venv().join("bin/ansible-runner"),
    }
}

fn load(
    w: &Path,
    engine: EngineFlag,
    ansible: Option<Installation>,
) -> Result<Vec<WatchOperator<AnsibleFlavor>>, String> {
    let file = WatchesFile::load(w).expect("watches file");
    let mut opts = AnsibleOptions {
        watches_dir: w.parent().map(Path::to_path_buf),
        engine,
        ansible,
        ..Default::default()
    };
    opts.load.roles_path.extend(roles_path());
    let ops = bosun_ansible_operator::operators(&file.entries, &opts).map_err(|e| e.to_string())?;
    // An entry no engine runs is that entry's refusal (the file's other entries still run).
    match ops.iter().find_map(|o| o.flavor().refused.clone()) {
        Some(why) => Err(why.to_string()),
        None => Ok(ops),
    }
}

const ENTRY: &str = "- {group: test.bosun.dev, version: v1alpha1, kind: Widget, role: real_only, vars: {from_watch: yes-it-is}, finalizer: {name: test.bosun.dev/cleanup, vars: {state: absent}}}\n";

#[test]
fn each_entry_gets_the_engine_it_needs() {
    let dir = tempfile::tempdir().expect("dir");
    let w = watches(dir.path(), ENTRY);
    // auto: the native engine refuses `command`, real Ansible runs the entry.
    let ops = load(&w, EngineFlag::Auto, Some(real_ansible())).expect("loads");
    let fb = ops[0]
        .flavor()
        .fallback
        .as_ref()
        .expect("runs under real Ansible");
    assert!(fb.why.contains("real_only/tasks/main.yml:4:"), "{}", fb.why);
    assert!(fb.why.contains("'command'"), "{}", fb.why);
    // Without real Ansible: refused at load with the construct and the install hint.
    let e = load(&w, EngineFlag::Auto, None)
        .err()
        .expect("refused")
        .to_string();
    assert!(e.contains("Widget.test.bosun.dev/v1alpha1"), "{e}");
    assert!(e.contains("real_only/tasks/main.yml:4:"), "{e}");
    assert!(e.contains(bosun_ansible_runner::INSTALL_HINT), "{e}");
    // native: refused, naming the construct, even with real Ansible installed.
    let e = load(&w, EngineFlag::Native, Some(real_ansible()))
        .err()
        .expect("refused")
        .to_string();
    assert!(
        e.contains("real_only/tasks/main.yml:4:") && e.contains("'command'"),
        "{e}"
    );
    assert!(!e.contains("pip install"), "{e}");
    // A role the native engine runs: native under auto, real Ansible when forced.
    let seed = watches(
        dir.path(),
        "- {group: test.bosun.dev, version: v1alpha1, kind: Widget, role: recorder}\n",
    );
    let ops = load(&seed, EngineFlag::Auto, None).expect("loads natively");
    assert!(ops[0].flavor().fallback.is_none());
    let ops = load(&seed, EngineFlag::Ansible, Some(real_ansible())).expect("loads");
    let fb = ops[0].flavor().fallback.as_ref().expect("forced");
    assert!(fb.why.contains("--ansible-engine=ansible"), "{}", fb.why);
    // Its RBAC still comes from the role's text.
    assert_eq!(ops[0].flavor().rbac_gaps().count(), 0);
    let e = load(&seed, EngineFlag::Ansible, None)
        .err()
        .expect("refused")
        .to_string();
    assert!(e.contains(bosun_ansible_runner::INSTALL_HINT), "{e}");
    // A missing role is refused whatever the engine.
    let missing = watches(
        dir.path(),
        "- {group: test.bosun.dev, version: v1alpha1, kind: Widget, role: nowhere}\n",
    );
    for engine in [EngineFlag::Auto, EngineFlag::Ansible] {
        let e = load(&missing, engine, Some(real_ansible()))
            .err()
            .expect("refused")
            .to_string();
        assert!(e.contains("'nowhere' was not found"), "{engine}: {e}");
    }
}

/// An entry the native engine refuses still gets its CRD from its role's defaults, the role
/// found as ansible-runner finds it.
#[test]
fn a_role_real_ansible_runs_describes_its_crd_from_its_defaults() {
    let dir = tempfile::tempdir().expect("dir");
    let role = dir.path().join("roles/shelly");
    std::fs::create_dir_all(role.join("tasks")).expect("mkdir");
    std::fs::create_dir_all(role.join("defaults")).expect("mkdir");
    std::fs::write(
        role.join("tasks/main.yml"),
        "- command: echo {{ line_count }}\n",
    )
    .expect("tasks");
    std::fs::write(role.join("defaults/main.yml"), "line_count: 3\n").expect("defaults");
    let w = watches(
        dir.path(),
        "- {group: test.bosun.dev, version: v1alpha1, kind: Shell, role: shelly}\n",
    );
    let ops = load(&w, EngineFlag::Auto, Some(real_ansible())).expect("loads");
    assert!(
        ops[0].flavor().fallback.is_some(),
        "runs under real Ansible"
    );
    let crd = serde_json::to_value(bosun_watches::Flavor::crd(ops[0].flavor())).expect("json");
    let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    assert_eq!(spec["properties"]["lineCount"]["type"], "integer", "{spec}");
}

/// The fallback's RBAC is the entry's own kind only (the role's text is not read): the
/// test grants the ConfigMaps the role manages, as a user would with an extra Role.
async fn grant_config_maps(env: &Env) {
    let name = format!("bosun-fallback-test-{}", env.ns);
    let pp = PatchParams::apply("bosun-test").force();
    let role: k8s_openapi::api::rbac::v1::ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": name},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                   "verbs": ["get", "list", "watch", "create", "patch", "delete"]}]
    }))
    .expect("role");
    Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(env.admin.clone())
        .patch(&name, &pp, &Patch::Apply(&role))
        .await
        .expect("role");
    let binding: k8s_openapi::api::rbac::v1::ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "User", "name": USER, "apiGroup": "rbac.authorization.k8s.io"}]
    }))
    .expect("binding");
    Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(env.admin.clone())
        .patch(&name, &pp, &Patch::Apply(&binding))
        .await
        .expect("binding");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_only_real_ansible_runs_converges_with_owner_references() {
    let env = env("ao-fallback").await;
    let dir = tempfile::tempdir().expect("dir");
    let w = watches(dir.path(), ENTRY);
    let ops: Vec<Arc<dyn Operator>> = load(&w, EngineFlag::Auto, Some(real_ansible()))
        .expect("loads")
        .into_iter()
        .map(|o| Arc::new(o) as Arc<dyn Operator>)
        .collect();
    install_crds(&env.admin, &ops).await;
    grant(&env, &ops, USER).await;
    grant_config_maps(&env).await;
    let op = start(&env, ops, USER).await;

    let t0 = Instant::now();
    let alpha = widget(&env, "alpha", json!({"size": 3, "someValue": "snake"})).await;
    let done = wait_for(&env, &widgets(), "alpha", 180, "Successful", |o| {
        has(o, "Successful", "True", Some("Successful"))
    })
    .await;
    eprintln!(
        "fallback: first reconcile of alpha converged {} ms after its creation",
        t0.elapsed().as_millis()
    );
    // What the role made, through the proxy: the owner reference injected on create.
    let cms: Api<ConfigMap> = Api::namespaced(env.admin.clone(), &env.ns);
    let cm = cms.get("alpha-cm").await.expect("the role's ConfigMap");
    let refs = cm.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(refs.len(), 1, "{refs:?}");
    assert_eq!(
        (
            refs[0].kind.as_str(),
            refs[0].name.as_str(),
            Some(refs[0].uid.as_str())
        ),
        ("Widget", "alpha", alpha.uid().as_deref())
    );
    assert_eq!(refs[0].api_version, "test.bosun.dev/v1alpha1");
    // ansible-operator's extra vars: a command's output, the CR, a snake-cased spec key and
    // the watch's vars.
    let data = cm.data.clone().unwrap_or_default();
    assert_eq!(data.get("computed").map(String::as_str), Some("size-3"));
    assert_eq!(data.get("kind").map(String::as_str), Some("Widget"));
    assert_eq!(data.get("snake").map(String::as_str), Some("snake"));
    assert_eq!(
        data.get("from_watch").map(String::as_str),
        Some("yes-it-is")
    );
    // k8s_status through the proxy, kept by the operator's own status write.
    assert_eq!(done.data["status"]["phase"], "Ready");
    let running = condition(&done, "Running").expect("Running");
    assert_eq!(running["reason"], "Successful");
    assert_eq!(running["ansibleResult"]["failures"], 0);
    assert!(
        running["ansibleResult"]["ok"].as_u64().unwrap_or(0) >= 3,
        "{running}"
    );
    assert!(has(&done, "Failure", "False", None));
    assert!(done
        .finalizers()
        .contains(&"test.bosun.dev/cleanup".to_string()));

    // A failing task: Failure with its message, and a Warning Event.
    widget(&env, "beta", json!({"size": 1, "failWith": "boom"})).await;
    let failed = wait_for(&env, &widgets(), "beta", 180, "Failure", |o| {
        has(o, "Failure", "True", Some("Failed"))
    })
    .await;
    assert_eq!(
        condition(&failed, "Failure").expect("Failure")["message"],
        "asked to fail: boom"
    );
    assert!(has(&failed, "Successful", "False", None));
    let events: Api<Event> = Api::namespaced(env.admin.clone(), &env.ns);
    let warned = eventually(60, || {
        let events = events.clone();
        async move {
            let l = events.list(&ListParams::default()).await.ok()?;
            l.items.into_iter().find(|e| {
                e.involved_object.name.as_deref() == Some("beta")
                    && e.type_.as_deref() == Some("Warning")
                    && e.message.as_deref() == Some("asked to fail: boom")
            })
        }
    })
    .await;
    assert!(warned.is_some(), "a Warning Event for the failed run");

    // The run's ConfigMap is watched (its kind was recorded by the proxy): deleted, it is
    // made again.
    let before = cm.uid();
    let runs = op.reconciles("success");
    cms.delete("alpha-cm", &DeleteParams::default())
        .await
        .expect("delete alpha-cm");
    let repaired = eventually(120, || {
        let cms = cms.clone();
        let before = before.clone();
        async move {
            let cm = cms.get_opt("alpha-cm").await.ok()??;
            (cm.uid() != before).then_some(cm)
        }
    })
    .await
    .expect("alpha-cm made again");
    assert_eq!(
        repaired.metadata.owner_references.unwrap_or_default().len(),
        1
    );
    // The repairing run is over before the operator stops.
    let finished = eventually(180, || async {
        (op.reconciles("success") > runs).then_some(())
    })
    .await;
    assert!(finished.is_some(), "the repairing run did not finish");

    // A restart over the converged CR: it runs again (real Ansible cannot tell it needs
    // not), and neither the CR's status nor its ConfigMap is written.
    op.stop().await;
    let (cr_before, cm_before) = (
        api(&env, &widgets()).get("alpha").await.expect("alpha"),
        cms.get("alpha-cm").await.expect("alpha-cm"),
    );
    let ops: Vec<Arc<dyn Operator>> = load(&w, EngineFlag::Auto, Some(real_ansible()))
        .expect("loads")
        .into_iter()
        .map(|o| Arc::new(o) as Arc<dyn Operator>)
        .collect();
    let op = start(&env, ops, USER).await;
    let reconciled = eventually(180, || async {
        (op.reconciles("success") >= 1.0).then_some(())
    })
    .await;
    assert!(reconciled.is_some(), "the restarted operator ran alpha");
    let (cr_after, cm_after) = (
        api(&env, &widgets()).get("alpha").await.expect("alpha"),
        cms.get("alpha-cm").await.expect("alpha-cm"),
    );
    assert_eq!(
        cr_before.resource_version(),
        cr_after.resource_version(),
        "the restart wrote alpha"
    );
    assert_eq!(
        cm_before.resource_version(),
        cm_after.resource_version(),
        "the restart wrote alpha-cm"
    );
    eprintln!(
        "fallback: restart sent {} write requests (kubernetes.core PATCHes unchanged objects), none changed an object",
        op.writes.get()
    );

    // Deletion runs the finalizer (the role with state: absent) before the CR goes.
    api(&env, &widgets())
        .delete("alpha", &DeleteParams::default())
        .await
        .expect("delete");
    let gone = eventually(180, || {
        let a = api(&env, &widgets());
        async move {
            a.get_opt("alpha")
                .await
                .ok()
                .filter(|o| o.is_none())
                .map(|_| ())
        }
    })
    .await;
    assert!(gone.is_some(), "alpha was not released by its finalizer");
    let cm_gone = eventually(60, || {
        let cms = cms.clone();
        async move {
            cms.get_opt("alpha-cm")
                .await
                .ok()
                .filter(|o| o.is_none())
                .map(|_| ())
        }
    })
    .await;
    assert!(cm_gone.is_some(), "alpha-cm still exists");
    op.stop().await;
}

/// What must be equal between engines: the object without server-set fields and times.
fn comparable(v: &serde_json::Value) -> serde_json::Value {
    let mut v = v.clone();
    if let Some(m) = v.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        for k in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "managedFields",
            "namespace",
        ] {
            m.remove(k);
        }
        if let Some(refs) = m.get_mut("ownerReferences").and_then(|r| r.as_array_mut()) {
            for r in refs {
                if let Some(r) = r.as_object_mut() {
                    r.remove("uid");
                }
            }
        }
    }
    if let Some(s) = v.get_mut("spec").and_then(|s| s.as_object_mut()) {
        for k in ["clusterIP", "clusterIPs"] {
            s.remove(k);
        }
    }
    if let Some(conds) = v
        .pointer_mut("/status/conditions")
        .and_then(|c| c.as_array_mut())
    {
        for c in conds {
            if let Some(c) = c.as_object_mut() {
                c.remove("lastTransitionTime");
                if let Some(r) = c.get_mut("ansibleResult").and_then(|r| r.as_object_mut()) {
                    r.remove("completion");
                }
            }
        }
    }
    v
}

async fn children(env: &Env, ns: &str, app: &str) -> Vec<serde_json::Value> {
    let lp = ListParams::default().labels(&format!("app={app}"));
    let mut out = Vec::new();
    let cms: Api<ConfigMap> = Api::namespaced(env.admin.clone(), ns);
    for c in cms.list(&lp).await.expect("config maps").items {
        out.push(comparable(&serde_json::to_value(c).expect("json")));
    }
    let svcs: Api<k8s_openapi::api::core::v1::Service> = Api::namespaced(env.admin.clone(), ns);
    for s in svcs.list(&lp).await.expect("services").items {
        out.push(comparable(&serde_json::to_value(s).expect("json")));
    }
    out.sort_by_key(|v| {
        v["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    });
    out
}

/// The same role (inside the native subset: include_tasks, loops, block/rescue, k8s_info,
/// lookup('template'), k8s_status, requeue_after) run by the native engine in one namespace
/// and forced onto real Ansible in another: the same children, status and conditions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_engines_give_the_same_objects_status_and_conditions() {
    let native_env = env("ao-diff-native").await;
    let ansible_ns = bosun_testenv::test_namespace(&native_env.admin, "ao-diff-ansible")
        .await
        .expect("namespace");
    let ansible_env = Env {
        cp: native_env.cp,
        admin: native_env.admin.clone(),
        ns: ansible_ns.clone(),
    };
    let dir = tempfile::tempdir().expect("dir");
    let w = watches(
        dir.path(),
        "- {group: test.bosun.dev, version: v1alpha1, kind: Widget, role: features, vars: {service_enabled: true}}\n",
    );
    let as_ops = |ops: Vec<WatchOperator<AnsibleFlavor>>| -> Vec<Arc<dyn Operator>> {
        ops.into_iter()
            .map(|o| Arc::new(o) as Arc<dyn Operator>)
            .collect()
    };
    let native = as_ops(load(&w, EngineFlag::Native, None).expect("native"));
    let ansible = as_ops(load(&w, EngineFlag::Ansible, Some(real_ansible())).expect("ansible"));
    install_crds(&native_env.admin, &native).await;
    grant(&native_env, &native, USER).await;
    let op_native = start(&native_env, native, USER).await;
    let op_ansible = start(&ansible_env, ansible, USER).await;
    let spec = json!({"size": 3, "servicePort": 80, "tier": "backend", "greeting": "hi there",
                      "settings": {"logLevel": "debug", "cache": "skip", "workers": 4},
                      "extraKeys": ["gamma"]});
    widget(&native_env, "shop", spec.clone()).await;
    widget(&ansible_env, "shop", spec).await;
    let n = wait_successful(&native_env, "shop").await;
    let a = wait_for(&ansible_env, &widgets(), "shop", 180, "Successful", |o| {
        has(o, "Successful", "True", Some("Successful"))
    })
    .await;
    let running = condition(&a, "Running").expect("Running");
    assert!(
        running["ansibleResult"]["ok"].as_u64().unwrap_or(0) > 10,
        "{running}"
    );
    assert_eq!(a.data["status"]["phase"], "Ready");
    assert_eq!(
        comparable(&n.data)["status"],
        comparable(&a.data)["status"],
        "status: native (left) and real Ansible (right)"
    );
    let (cn, ca) = (
        children(&native_env, &native_env.ns, "shop-app").await,
        children(&ansible_env, &ansible_ns, "shop-app").await,
    );
    assert!(cn.len() >= 4, "{cn:#?}");
    assert_eq!(cn, ca, "children: native (left) and real Ansible (right)");
    op_native.stop().await;
    op_ansible.stop().await;
}

/// `requeue_after` runs the CR again; `maxRunnerArtifacts` bounds the runs kept on disk;
/// `manageStatus: false` leaves the status to the role; no credentials or spec stay on disk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requeue_retention_and_unmanaged_status() {
    use std::os::unix::fs::PermissionsExt;
    let env = env("ao-fallback-rq").await;
    let dir = tempfile::tempdir().expect("dir");
    let w = watches(
        dir.path(),
        "- {group: test.bosun.dev, version: v1alpha1, kind: Widget, role: real_requeue, manageStatus: false, maxRunnerArtifacts: 2, watchDependentResources: false}\n",
    );
    let loaded = load(&w, EngineFlag::Auto, Some(real_ansible())).expect("loads");
    let fb = loaded[0].flavor().fallback.clone().expect("real Ansible");
    let entry = loaded[0].entry().clone();
    let ops: Vec<Arc<dyn Operator>> = loaded
        .into_iter()
        .map(|o| Arc::new(o) as Arc<dyn Operator>)
        .collect();
    install_crds(&env.admin, &ops).await;
    grant(&env, &ops, USER).await;
    grant_config_maps(&env).await;
    let op = start(&env, ops, USER).await;
    widget(&env, "tick", json!({})).await;
    // Three runs, without any change to the CR or a watch on its children: each writes a
    // new stamp.
    three_runs(&env, "tick").await;
    let tick = api(&env, &widgets()).get("tick").await.expect("tick");
    assert_eq!(tick.data["status"]["phase"], "Ready", "{}", tick.data);
    assert!(
        tick.data["status"].get("conditions").is_none(),
        "manageStatus: false writes no conditions: {}",
        tick.data["status"]
    );
    op.stop().await;
    let run_dir = fb.run_dir(&entry, Some(&env.ns), "tick");
    let runs = std::fs::read_dir(run_dir.join("artifacts"))
        .expect("artifacts")
        .count();
    assert!(
        (1..=2).contains(&runs),
        "{runs} runs kept, maxRunnerArtifacts is 2"
    );
    for gone in ["kubeconfig", "env/extravars"] {
        assert!(!run_dir.join(gone).exists(), "{gone} left on disk");
    }
    let mode = std::fs::metadata(&run_dir)
        .expect("dir")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o700);
}

/// Real Ansible checks a fallback role at load: a module of a collection that is not
/// installed is refused there, naming the file and the fix.
#[test]
fn a_missing_collection_is_refused_at_load() {
    let dir = tempfile::tempdir().expect("dir");
    let tasks = dir.path().join("roles/uses_missing/tasks");
    std::fs::create_dir_all(&tasks).expect("mkdir");
    std::fs::write(
        tasks.join("main.yml"),
        "---\n- name: a module nobody installed\n  notinstalled.anywhere.frobnicate: {level: 3}\n",
    )
    .expect("role");
    let w = watches(
        dir.path(),
        "- {group: test.bosun.dev, version: v1alpha1, kind: Widget, role: uses_missing}\n",
    );
    let e = load(&w, EngineFlag::Auto, Some(real_ansible()))
        .err()
        .expect("refused")
        .to_string();
    assert!(e.contains("Widget.test.bosun.dev/v1alpha1"), "{e}");
    assert!(e.contains("notinstalled.anywhere.frobnicate"), "{e}");
    assert!(e.contains("uses_missing/tasks/main.yml"), "{e}");
    assert!(e.contains("ansible-galaxy collection install"), "{e}");
}

/// A role in the shape of operator-sdk's memcached-molecule sample (file, stat,
/// osdk_metric, a k8s_info probe of an unserved API, a loop of k8s, block/rescue with
/// k8s_event) plus `template` to a file: it converges under real Ansible.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_molecule_shaped_role_converges_under_real_ansible() {
    use std::os::unix::fs::PermissionsExt;
    let env = env("ao-fallback-mol").await;
    let dir = tempfile::tempdir().expect("dir");
    let work = tempfile::tempdir().expect("work dir");
    let w = watches(
        dir.path(),
        &format!(
            "- {{group: test.bosun.dev, version: v1alpha1, kind: Widget, role: molecule_shape, vars: {{work_dir: {}}}}}\n",
            work.path().display()
        ),
    );
    let loaded = load(&w, EngineFlag::Auto, Some(real_ansible())).expect("loads");
    let fb = loaded[0].flavor().fallback.as_ref().expect("real Ansible");
    assert!(
        fb.why.contains("molecule_shape/tasks/main.yml:"),
        "{}",
        fb.why
    );
    let ops: Vec<Arc<dyn Operator>> = loaded
        .into_iter()
        .map(|o| Arc::new(o) as Arc<dyn Operator>)
        .collect();
    install_crds(&env.admin, &ops).await;
    grant(&env, &ops, USER).await;
    grant_config_maps(&env).await;
    let name = format!("bosun-fallback-events-{}", env.ns);
    let pp = PatchParams::apply("bosun-test").force();
    let role: k8s_openapi::api::rbac::v1::ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": name},
        "rules": [{"apiGroups": [""], "resources": ["events"], "verbs": ["get", "create", "patch"]}]
    }))
    .expect("role");
    Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(env.admin.clone())
        .patch(&name, &pp, &Patch::Apply(&role))
        .await
        .expect("role");
    let binding: k8s_openapi::api::rbac::v1::ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "User", "name": USER, "apiGroup": "rbac.authorization.k8s.io"}]
    }))
    .expect("binding");
    Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(env.admin.clone())
        .patch(&name, &pp, &Patch::Apply(&binding))
        .await
        .expect("binding");
    let op = start(&env, ops, USER).await;
    let mol = widget(&env, "mol", json!({"size": 2})).await;
    let done = wait_for(&env, &widgets(), "mol", 180, "Successful", |o| {
        has(o, "Successful", "True", Some("Successful"))
    })
    .await;
    let running = condition(&done, "Running").expect("Running");
    assert_eq!(running["ansibleResult"]["failures"], 0, "{running}");
    // The template, on the operator's filesystem.
    let conf = work.path().join("mol/settings.conf");
    let text = std::fs::read_to_string(&conf).expect("templated file");
    assert_eq!(text, "# mol\nsize=2\nworker0=on\nworker1=on\n");
    let mode = std::fs::metadata(&conf).expect("meta").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    // The loop's ConfigMaps, owned by the CR; the probe saw no API.
    let cms: Api<ConfigMap> = Api::namespaced(env.admin.clone(), &env.ns);
    for i in 0..2 {
        let cm = cms.get(&format!("mol-{i}")).await.expect("config map");
        let refs = cm.metadata.owner_references.unwrap_or_default();
        assert_eq!(refs.first().map(|r| r.uid.clone()), mol.uid(), "mol-{i}");
        let data = cm.data.unwrap_or_default();
        assert_eq!(data.get("api_found").map(String::as_str), Some("False"));
        assert_eq!(data.get("index"), Some(&i.to_string()));
    }
    // k8s_event in the rescue section, through the proxy (owner reference injected).
    let events: Api<Event> = Api::namespaced(env.admin.clone(), &env.ns);
    let ev = events.get("mol-rescued").await.expect("the role's Event");
    assert_eq!(ev.reason.as_deref(), Some("Rescued"));
    assert_eq!(ev.involved_object.name.as_deref(), Some("mol"));
    op.stop().await;
}

/// Waits for three runs of `real_requeue` on `name` (each writes a new stamp).
async fn three_runs(env: &Env, name: &str) {
    let cms: Api<ConfigMap> = Api::namespaced(env.admin.clone(), &env.ns);
    let cm = format!("{name}-stamp");
    let mut seen: Option<String> = None;
    for run in 1..=3 {
        let prev = seen.clone();
        let stamp = eventually(120, || {
            let cms = cms.clone();
            let prev = prev.clone();
            let cm = cm.clone();
            async move {
                let got = cms.get_opt(&cm).await.ok()??;
                let s = got.data?.get("stamp")?.clone();
                (Some(&s) != prev.as_ref()).then_some(s)
            }
        })
        .await;
        assert!(stamp.is_some(), "run {run} of {name} did not happen");
        seen = stamp;
    }
}

/// `reconcilePeriod` runs the CR again when the role asks for no requeue (`requeue_after`
/// of 0s means none).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reconcile_period_runs_the_role_again() {
    let env = env("ao-fallback-period").await;
    let dir = tempfile::tempdir().expect("dir");
    let w = watches(
        dir.path(),
        "- {group: test.bosun.dev, version: v1alpha1, kind: Widget, role: real_requeue, reconcilePeriod: 1s, watchDependentResources: false, vars: {requeue_time: 0s}}\n",
    );
    let ops: Vec<Arc<dyn Operator>> = load(&w, EngineFlag::Auto, Some(real_ansible()))
        .expect("loads")
        .into_iter()
        .map(|o| Arc::new(o) as Arc<dyn Operator>)
        .collect();
    install_crds(&env.admin, &ops).await;
    grant(&env, &ops, USER).await;
    grant_config_maps(&env).await;
    let op = start(&env, ops, USER).await;
    widget(&env, "period", json!({})).await;
    three_runs(&env, "period").await;
    op.stop().await;
}

/// A role that generates a password once (the `password` lookup, outside the native subset:
/// the whole entry runs under real Ansible) and keeps it: a later run, after a spec change,
/// finds the Secret and leaves the password as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_generated_once_is_kept() {
    let env = env("ao-password").await;
    let dir = tempfile::tempdir().expect("dir");
    let w = watches(
        dir.path(),
        "- {group: test.bosun.dev, version: v1alpha1, kind: Widget, role: keeps_password}\n",
    );
    let ops = load(&w, EngineFlag::Auto, Some(real_ansible())).expect("loads");
    let why = &ops[0].flavor().fallback.as_ref().expect("real Ansible").why;
    assert!(why.contains("lookup plugin 'password'"), "{why}");
    let ops: Vec<Arc<dyn Operator>> = ops
        .into_iter()
        .map(|o| Arc::new(o) as Arc<dyn Operator>)
        .collect();
    install_crds(&env.admin, &ops).await;
    grant(&env, &ops, USER).await;
    grant_resources(&env, "secrets").await;
    let op = start(&env, ops, USER).await;
    widget(&env, "app", json!({"size": 1})).await;
    let seen = |n: i64| move |o: &kube::api::DynamicObject| o.data["status"]["seenSize"] == n;
    wait_for(&env, &widgets(), "app", 180, "first run", seen(1)).await;
    let secrets = Api::<k8s_openapi::api::core::v1::Secret>::namespaced(env.admin.clone(), &env.ns);
    let password =
        |s: k8s_openapi::api::core::v1::Secret| s.data.expect("data")["password"].0.clone();
    let first = password(secrets.get("app-admin").await.expect("the Secret"));
    assert_eq!(first.len(), 24);
    api(&env, &widgets())
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}})),
        )
        .await
        .expect("patch");
    wait_for(&env, &widgets(), "app", 180, "second run", seen(2)).await;
    let second = password(secrets.get("app-admin").await.expect("the Secret"));
    assert_eq!(first, second, "the password is generated once");
    op.stop().await;
}

/// Grants the operator's user every verb a role uses on `resource` (core group).
async fn grant_resources(env: &Env, resource: &str) {
    let name = format!(
        "bosun-fallback-test-{}-{}",
        resource.replace('/', "-"),
        env.ns
    );
    let pp = PatchParams::apply("bosun-test").force();
    let role: k8s_openapi::api::rbac::v1::ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": name},
        "rules": [{"apiGroups": [""], "resources": [resource],
                   "verbs": ["get", "list", "watch", "create", "patch", "delete"]}]
    }))
    .expect("role");
    Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(env.admin.clone())
        .patch(&name, &pp, &Patch::Apply(&role))
        .await
        .expect("role");
    let binding: k8s_openapi::api::rbac::v1::ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "User", "name": USER, "apiGroup": "rbac.authorization.k8s.io"}]
    }))
    .expect("binding");
    Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(env.admin.clone())
        .patch(&name, &pp, &Patch::Apply(&binding))
        .await
        .expect("binding");
}

/// Every construct of issue 34 the native engine does not run exactly (modules that reach
/// outside the cluster API or into pods, fact gathering, the pipe and password lookups,
/// to_datetime) sends its entry whole to real Ansible, the construct and its place named in
/// the reason (logged once, and the `bosun_ansible_entry_engine` label) — never a
/// half-native run. (`k8s_cp` and `k8s_cluster_info` by their full names: ansible-core
/// routes only some short `k8s_*` names to kubernetes.core, and real Ansible refuses
/// these two short ones at load.)
#[test]
fn constructs_outside_the_native_subset_run_the_whole_entry_under_real_ansible() {
    let cases = [
        ("module 'command'", "- command: echo hi\n"),
        ("module 'shell'", "- shell: echo hi\n"),
        ("module 'copy'", "- copy: {content: x, dest: /tmp/x}\n"),
        ("module 'tempfile'", "- tempfile: {state: directory}\n"),
        ("module 'uri'", "- uri: {url: 'http://127.0.0.1:8080/'}\n"),
        (
            "module 'kubernetes.core.k8s_exec'",
            "- kubernetes.core.k8s_exec: {namespace: a, pod: b, command: ls}\n",
        ),
        (
            "module 'kubernetes.core.k8s_cp'",
            "- kubernetes.core.k8s_cp: {namespace: a, pod: b, remote_path: /x, local_path: /y, state: from_pod}\n",
        ),
        (
            "module 'kubernetes.core.k8s_cluster_info'",
            "- kubernetes.core.k8s_cluster_info: {}\n",
        ),
        (
            "module 'setup'",
            "- setup: {gather_subset: ['!all', 'network']}\n",
        ),
        (
            "lookup plugin 'pipe'",
            "- debug: {msg: \"{{ lookup('pipe', 'date') }}\"}\n",
        ),
        (
            "lookup plugin 'password'",
            "- debug: {msg: \"{{ lookup('password', '/tmp/p length=8') }}\"}\n",
        ),
        (
            "filter 'to_datetime'",
            "- debug: {msg: \"{{ ('2020-01-01 00:00:00' | to_datetime).year }}\"}\n",
        ),
    ];
    let ansible = real_ansible();
    for (i, (what, task)) in cases.iter().enumerate() {
        let dir = tempfile::tempdir().expect("dir");
        let tasks = dir.path().join("roles/probe/tasks");
        std::fs::create_dir_all(&tasks).expect("role dir");
        // A native task first: the entry is still run whole by real Ansible.
        std::fs::write(
            tasks.join("main.yml"),
            format!("- debug: {{msg: native}}\n{task}"),
        )
        .expect("tasks");
        let w = watches(
            dir.path(),
            &format!(
                "- {{group: test.bosun.dev, version: v1alpha1, kind: Probe{i}, role: probe}}\n"
            ),
        );
        let ops = load(&w, EngineFlag::Auto, Some(ansible.clone()))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let fb = ops[0]
            .flavor()
            .fallback
            .as_ref()
            .unwrap_or_else(|| panic!("{what}: run natively"));
        assert!(
            fb.why.contains("probe/tasks/main.yml:2:") && fb.why.contains(what),
            "{what}: {}",
            fb.why
        );
        let metric = bosun_ansible_operator::engines::Engines::global().encode_openmetrics();
        assert!(
            metric
                .lines()
                .any(|l| l.contains(&format!("Kind=Probe{i}\""))
                    && l.contains("engine=\"ansible\"")
                    && l.contains(what)),
            "{what}: {metric}"
        );
    }
}

/// The exec-and-copy role of backup operators (`roles/dump`): find the database's pod, write
/// a dump inside it with `k8s_exec`, copy it out with `k8s_cp`, keep it in a ConfigMap.
/// `k8s_exec` and `k8s_cp` are outside the native subset, so kubernetes.core runs them under
/// real Ansible, through the operator's proxy (a WebSocket upgrade passed through) and the
/// API server to the process-mode node agent standing in for the pod's kubelet: the command
/// really runs in the container (its hostname is the pod's), a failing command's exit code
/// comes back, and the copied file is what the pod wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_and_copy_role_converges_under_real_ansible() {
    use bosun_testenv::{Image, ImageMap, NodeAgent, ProcessConfig};
    let env = env("ao-dump").await;
    let _agent = NodeAgent::process_mode(
        env.admin.clone(),
        ProcessConfig {
            namespace: Some(env.ns.clone()),
            // The database's stand-in: the host's programs, a shell's entrypoint.
            images: ImageMap::empty().repository("busybox", Image::program("/shell", "/bin/sh")),
            ..Default::default()
        },
    )
    .expect("the process-mode node agent (root, and scripts/setup-postgres.sh's user)");
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(env.admin.clone(), &env.ns);
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
        "metadata": {"name": "app-0", "labels": {"app": "app"}},
        "spec": {"terminationGracePeriodSeconds": 1, "containers": [{"name": "db",
                 "image": "busybox:1", "command": ["sleep", "3600"]}]}
    }))
    .expect("pod");
    pods.create(&Default::default(), &pod).await.expect("pod");
    let running = eventually(120, || {
        let pods = pods.clone();
        async move {
            let p = pods.get("app-0").await.ok()?;
            (p.status?.phase.as_deref() == Some("Running")).then_some(())
        }
    })
    .await;
    assert!(running.is_some(), "the database pod is not running");

    let dir = tempfile::tempdir().expect("dir");
    let w = watches(
        dir.path(),
        "- {group: test.bosun.dev, version: v1alpha1, kind: Dump, role: dump}\n",
    );
    let ops = load(&w, EngineFlag::Auto, Some(real_ansible())).expect("loads");
    let why = &ops[0].flavor().fallback.as_ref().expect("real Ansible").why;
    assert!(why.contains("k8s_exec"), "{why}");
    let ops: Vec<Arc<dyn Operator>> = ops
        .into_iter()
        .map(|o| Arc::new(o) as Arc<dyn Operator>)
        .collect();
    install_crds(&env.admin, &ops).await;
    grant(&env, &ops, USER).await;
    grant_resources(&env, "pods").await;
    grant_resources(&env, "pods/exec").await;
    grant_config_maps(&env).await;
    let op = start(&env, ops, USER).await;
    let dumps = resource("test.bosun.dev", "v1alpha1", "Dump");
    create_json(
        &env,
        &dumps,
        json!({"apiVersion": "test.bosun.dev/v1alpha1", "kind": "Dump",
               "metadata": {"name": "nightly"}, "spec": {"table": "orders"}}),
    )
    .await;
    let done = wait_for(&env, &dumps, "nightly", 240, "Successful", |o| {
        has(o, "Successful", "True", Some("Successful"))
    })
    .await;
    assert_eq!(done.data["status"]["phase"], "Done");
    assert_eq!(
        done.data["status"]["failingRc"], "3",
        "{:#}",
        done.data["status"]
    );
    let cm = Api::<ConfigMap>::namespaced(env.admin.clone(), &env.ns)
        .get("nightly-dump")
        .await
        .expect("the dump's ConfigMap");
    let data = cm.data.unwrap_or_default();
    assert_eq!(
        data.get("dump.sql").map(String::as_str),
        Some("-- dump of orders on app-0\nINSERT INTO orders VALUES (1);"),
        "{data:?}"
    );
    assert_eq!(data.get("lines").map(String::as_str), Some("2"));
    assert_eq!(data.get("rc").map(String::as_str), Some("0"));
    op.stop().await;
}

/// Finalizer playbooks with `vars` under real Ansible: what `roles.rs` asserts of the native
/// engine holds here too (the finalizer's vars over the play's, the watch's vars, the spec).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finalizer_playbook_runs_with_its_vars_under_real_ansible() {
    let env = env("ao-final-pb-real").await;
    let dir = tempfile::tempdir().expect("dir");
    let (w, records) = finalizer_playbook_project(&env, dir.path()).await;
    let ops: Vec<Arc<dyn Operator>> = load(&w, EngineFlag::Ansible, Some(real_ansible()))
        .expect("loads")
        .into_iter()
        .map(|o| Arc::new(o) as Arc<dyn Operator>)
        .collect();
    grant_config_maps(&env).await;
    finalizer_playbook_runs(&env, &records, ops).await;
}
