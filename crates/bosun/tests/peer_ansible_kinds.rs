//! Roles in the shapes real operators have (issue 34), against operator-sdk's ansible-operator
//! v1.42.2: one project with several kinds — a Backup with its finalizer (the entry's role with
//! `state: absent`), a Restore that reads what the Backup made, and a Widget whose role
//! generates an admin password once and keeps it (the `password` lookup: bosun sends that
//! entry whole to real Ansible). ansible-operator runs it in one namespace and
//! `bosun run --watches` in another, both at once, the same CRs applied to each. Both must
//! leave the same objects and the same conditions, keep the password across a second run, and
//! run the finalizer (the copy removed while the Backup is still held) before the Backup goes.
//!
//! Needs `scripts/setup-peers.sh` (ansible-operator) and `scripts/setup-ansible.sh` (real
//! Ansible for bosun).
mod peers;
use peers::*;
use std::collections::BTreeMap;
use std::path::Path;

use bosun_watches::Flavor;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::{Client, ResourceExt};
use serde_json::{json, Value};

const WATCHES: &str = "\
- {group: test.bosun.dev, version: v1alpha1, kind: Backup, role: backup, vars: {state: present},
   finalizer: {name: test.bosun.dev/backup, vars: {state: absent}}}
- {group: test.bosun.dev, version: v1alpha1, kind: Restore, role: restore}
- {group: test.bosun.dev, version: v1alpha1, kind: Widget, role: keeps_password}
";

/// Holds a deleted Backup after the operator's finalizer is released, so that what the
/// finalizer did is seen while its owner still exists (no garbage collection can have done it).
const HOLD: &str = "test.bosun.dev/hold";

fn kind(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("test.bosun.dev", "v1alpha1", kind),
        plural,
    )
}

fn write_project(project: &Path) {
    for role in ["backup", "restore", "keeps_password"] {
        let from = repo()
            .join("crates/ansible-operator/tests/roles")
            .join(role);
        let to = project.join("roles").join(role).join("tasks");
        std::fs::create_dir_all(&to).expect("role dir");
        std::fs::copy(from.join("tasks/main.yml"), to.join("main.yml")).expect("role file");
    }
    std::fs::write(project.join("watches.yaml"), WATCHES).expect("watches");
}

/// One namespace's run as its operator left it.
struct Outcome {
    objects: BTreeMap<String, Value>,
    conditions: BTreeMap<String, BTreeMap<String, (String, String)>>,
    backup_status: Value,
    widget_status: Value,
    finalizers: Vec<String>,
    /// The admin password after the first run and after the second.
    passwords: (Vec<u8>, Vec<u8>),
}

fn log_of(log: &Path) -> String {
    std::fs::read_to_string(log).unwrap_or_default()
}

async fn wait_for(
    api: &Api<DynamicObject>,
    name: &str,
    what: &str,
    log: &Path,
    done: impl Fn(&DynamicObject) -> bool,
) -> DynamicObject {
    bosun_testenv::eventually(120, || async { api.get(name).await.ok().filter(&done) })
        .await
        .unwrap_or_else(|| {
            panic!(
                "{}/{name} never {what}; the operator said:\n{}",
                api.resource_url(),
                log_of(log)
            )
        })
}

/// The end of a successful run: `Running` left with reason `Successful` (a run in progress
/// has reason `Running`).
fn run_done(o: &DynamicObject) -> bool {
    conditions(o)
        .get("Running")
        .is_some_and(|(s, r)| s == "True" && r == "Successful")
}

async fn create(api: &Api<DynamicObject>, v: Value) {
    let o: DynamicObject = serde_json::from_value(v).expect("a CR");
    api.create(&PostParams::default(), &o)
        .await
        .expect("create the CR");
}

/// The ConfigMaps and Secrets the roles made, normalised; the password (random on each side)
/// stands as its length.
async fn objects(client: &Client, ns: &str) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    for c in cms.list(&ListParams::default()).await.expect("configmaps") {
        if c.name_any() == "kube-root-ca.crt" {
            continue;
        }
        let key = format!("ConfigMap/{}", c.name_any());
        out.insert(key, normalise(serde_json::to_value(c).expect("json"), ns));
    }
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    for s in secrets.list(&ListParams::default()).await.expect("secrets") {
        let key = format!("Secret/{}", s.name_any());
        let mut v = normalise(serde_json::to_value(&s).expect("json"), ns);
        if let Some(p) = s.data.as_ref().and_then(|d| d.get("password")) {
            v["data"]["password"] = format!("<{} bytes>", p.0.len()).into();
        }
        out.insert(key, v);
    }
    out
}

async fn password(client: &Client, ns: &str) -> Vec<u8> {
    let s = Api::<Secret>::namespaced(client.clone(), ns)
        .get("app-admin")
        .await
        .expect("the admin Secret");
    s.data.expect("the Secret's data")["password"].0.clone()
}

/// The same CRs, in the same order, in `ns`; what its operator left.
async fn drive(client: &Client, ns: &str, log: &Path) -> Outcome {
    let backups =
        Api::<DynamicObject>::namespaced_with(client.clone(), ns, &kind("Backup", "backups"));
    let restores =
        Api::<DynamicObject>::namespaced_with(client.clone(), ns, &kind("Restore", "restores"));
    let widgets =
        Api::<DynamicObject>::namespaced_with(client.clone(), ns, &kind("Widget", "widgets"));
    let source: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "app-config"}, "data": {"db": "postgres", "replicas": "3"}
    }))
    .expect("configmap");
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &source)
        .await
        .expect("the source ConfigMap");

    create(
        &backups,
        json!({"apiVersion": "test.bosun.dev/v1alpha1", "kind": "Backup",
               "metadata": {"name": "nightly"}, "spec": {"source": "app-config"}}),
    )
    .await;
    let backup = wait_for(&backups, "nightly", "finished a run", log, |o| {
        run_done(o) && o.data["status"]["backupConfigMap"] == "backup-nightly"
    })
    .await;
    create(
        &restores,
        json!({"apiVersion": "test.bosun.dev/v1alpha1", "kind": "Restore",
               "metadata": {"name": "back"},
               "spec": {"backupName": "nightly", "target": "app-config-restored"}}),
    )
    .await;
    let restore = wait_for(&restores, "back", "finished a run", log, run_done).await;

    create(
        &widgets,
        json!({"apiVersion": "test.bosun.dev/v1alpha1", "kind": "Widget",
               "metadata": {"name": "app"}, "spec": {"size": 1}}),
    )
    .await;
    wait_for(&widgets, "app", "finished its first run", log, |o| {
        run_done(o) && o.data["status"]["seenSize"] == 1
    })
    .await;
    let first = password(client, ns).await;
    widgets
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}})),
        )
        .await
        .expect("change the Widget's spec");
    let widget = wait_for(&widgets, "app", "finished its second run", log, |o| {
        run_done(o) && o.data["status"]["seenSize"] == 2
    })
    .await;
    let second = password(client, ns).await;
    let objects = objects(client, ns).await;

    // Delete the Backup with a second finalizer holding it: the operator's run with
    // `state: absent` must remove the copy and release its own finalizer only.
    let finalizers = backup.finalizers().to_vec();
    let held = [finalizers.clone(), vec![HOLD.to_string()]].concat();
    backups
        .patch(
            "nightly",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": held}})),
        )
        .await
        .expect("hold the Backup");
    backups
        .delete("nightly", &DeleteParams::default())
        .await
        .expect("delete the Backup");
    let cms = Api::<ConfigMap>::namespaced(client.clone(), ns);
    let finalized = bosun_testenv::eventually(120, || async {
        let b = backups.get("nightly").await.ok()?;
        let copy = cms.get_opt("backup-nightly").await.ok()?;
        (copy.is_none() && b.finalizers() == [HOLD]).then_some(())
    })
    .await;
    assert!(
        finalized.is_some(),
        "{ns}: the Backup's finalizer did not remove the copy and release itself; the operator \
         said:\n{}",
        log_of(log)
    );
    backups
        .patch(
            "nightly",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("release the hold");
    let gone = bosun_testenv::eventually(60, || async {
        backups
            .get_opt("nightly")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    assert!(gone.is_some(), "{ns}: the Backup is not gone");

    Outcome {
        objects,
        conditions: BTreeMap::from([
            ("Backup".to_string(), conditions(&backup)),
            ("Restore".to_string(), conditions(&restore)),
            ("Widget".to_string(), conditions(&widget)),
        ]),
        backup_status: backup.data["status"]["backupConfigMap"].clone(),
        widget_status: widget.data["status"]["seenSize"].clone(),
        finalizers,
        passwords: (first, second),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_kinds_with_finalizer_and_kept_password_converge_as_under_ansible_operator() {
    peer("ansible-operator");
    let dir = tempfile::tempdir().expect("tempdir");
    let project = dir.path().join("project");
    write_project(&project);
    let sdk = bosun_testenv::kit::cluster_with("peer-kinds-sdk", None)
        .await
        .expect("test cluster");
    let client = sdk.admin.clone();
    let ours_ns = bosun_testenv::test_namespace(&client, "peer-kinds-bosun")
        .await
        .expect("namespace");
    let theirs_ns = sdk.ns.clone();
    let file = bosun_watches::WatchesFile::load(&project.join("watches.yaml")).expect("watches");
    // The Widget entry loads (for its CRD) only with real Ansible at hand; this binary's one
    // test.
    std::env::set_var(
        "BOSUN_ANSIBLE_RUNNER",
        ansible_venv().join("bin/ansible-runner"),
    );
    let opts = bosun_ansible_operator::AnsibleOptions {
        watches_dir: Some(project.clone()),
        ..Default::default()
    };
    let crds = file.entries.iter().map(|e| {
        bosun_ansible_operator::AnsibleFlavor::load(e, &opts)
            .unwrap_or_else(|err| panic!("{}: {err}", e.gvk.kind))
            .crd()
    });
    bosun_testenv::kit::install_crds(&client, crds)
        .await
        .expect("the three CRDs served");

    let kubeconfig = sdk.cp.kubeconfig();
    let their_log = dir.path().join("ansible-operator.log");
    let our_log = dir.path().join("bosun.log");
    let tmp = dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).expect("tmp");
    let theirs_op = start_ansible_operator(
        &project,
        "watches.yaml",
        kubeconfig,
        &theirs_ns,
        &their_log,
        &tmp,
    );
    let ours_op = start_bosun_with_ansible(
        &project.join("watches.yaml"),
        kubeconfig,
        &ours_ns,
        &our_log,
    );
    let (theirs, ours) = tokio::join!(
        drive(&client, &theirs_ns, &their_log),
        drive(&client, &ours_ns, &our_log)
    );
    theirs_op.stop().await;
    ours_op.stop().await;

    // ansible-operator's run, as the roles mean it.
    assert_eq!(theirs.finalizers, ["test.bosun.dev/backup"]);
    assert_eq!(theirs.backup_status, "backup-nightly");
    assert_eq!(theirs.widget_status, 2);
    assert_eq!(theirs.passwords.0.len(), 24, "ansible-operator's password");
    assert_eq!(
        theirs.passwords.0, theirs.passwords.1,
        "ansible-operator kept the password"
    );
    assert_eq!(
        theirs.objects.keys().collect::<Vec<_>>(),
        [
            "ConfigMap/app-config",
            "ConfigMap/app-config-restored",
            "ConfigMap/backup-nightly",
            "Secret/app-admin"
        ],
        "ansible-operator's objects"
    );
    assert_eq!(
        theirs.objects["ConfigMap/app-config-restored"]["data"],
        json!({"db": "postgres", "replicas": "3"})
    );

    // bosun's, against it.
    assert_eq!(
        ours.finalizers, theirs.finalizers,
        "the Backup's finalizers"
    );
    assert_eq!(ours.backup_status, theirs.backup_status);
    assert_eq!(ours.widget_status, theirs.widget_status);
    assert_eq!(ours.passwords.0.len(), 24, "bosun's password");
    assert_eq!(
        ours.passwords.0, ours.passwords.1,
        "bosun kept the password"
    );
    for (k, v) in &theirs.objects {
        assert_eq!(
            Some(v),
            ours.objects.get(k),
            "{k}: ansible-operator's, then bosun's"
        );
    }
    assert_eq!(
        theirs.objects.keys().collect::<Vec<_>>(),
        ours.objects.keys().collect::<Vec<_>>()
    );
    assert_eq!(
        theirs.conditions, ours.conditions,
        "conditions (kind -> type -> status, reason)"
    );
}
