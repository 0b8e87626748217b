//! The Helm flavour's safety promises on the real API server (issue 19, review H1, H4, M1, M8):
//! no value of a Secret-like key or of a rendered Secret reaches the operator's log, its Events
//! or the status; uninstall finishes in a namespace being deleted (delete hooks come from the
//! stored release, and a namespace that refuses new objects skips them); `uninstall-wait`
//! really waits for the release's objects, and delete hooks run once.
mod support;

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

use base64::Engine as _;
use bosun_helm_operator::Storage;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Secret};
use kube::api::{Api, Patch, PatchParams};
use kube::ResourceExt;
use serde_json::json;
use support::*;

const USER: &str = "system:serviceaccount:bosun-system:bosun-helm-safety";

fn watches() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/charts/safety-watches.yaml")
}

/// Everything the operator logs at the default level (info), as a person reading the log sees it.
fn captured() -> &'static Arc<Mutex<Vec<u8>>> {
    static LOG: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOG.get_or_init(|| {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let sink = buf.clone();
        let _ = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::INFO)
            .with_ansi(false)
            .with_writer(move || Sink(sink.clone()))
            .try_init();
        buf
    })
}

struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log buffer").extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The test's namespace, with the operators of the safety watches file running there.
async fn running(prefix: &str) -> (Env, Running) {
    captured();
    let env = env(prefix).await;
    let ops = operators(&watches(), Storage::Secrets);
    install_crds(&env.admin, &ops).await;
    grant(&env, &ops, USER).await;
    let op = start(&env, ops, USER).await;
    (env, op)
}

/// Waits until the custom resource's first install succeeded.
async fn installed(env: &Env, ar: &kube::core::ApiResource, name: &str, secs: u64) {
    wait_for(env, ar, name, secs, "installed", |o| {
        has(o, "Deployed", "True", Some("InstallSuccessful"))
    })
    .await;
}

fn log_text() -> String {
    String::from_utf8_lossy(&captured().lock().expect("log buffer")).into_owned()
}

/// The secret itself, base64-encoded, and base64 of the base64 (a Secret's `data` as stored).
fn forms(secret: &str) -> Vec<String> {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    vec![secret.to_string(), b64(secret), b64(&b64(secret))]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_value_in_logs_events_or_status() {
    let (env, op) = running("helm-secret").await;
    let sv = resource("test.bosun.dev", "v1", "Secretive");
    let (old, new, token) = (
        "0ld-pa55word-value",
        "n3w-pa55word-value",
        "0verride-t0ken-value",
    );
    create(&env, &sv, &format!("apiVersion: test.bosun.dev/v1\nkind: Secretive\nmetadata:\n  name: s\nspec:\n  auth:\n    password: {old}\n")).await;
    installed(&env, &sv, "s", 90).await;
    // A spec change: the release is rendered again and compared with the recorded one (the
    // comparison that logged both passwords' lines).
    api(&env, &sv)
        .patch(
            "s",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"auth": {"password": new}}})),
        )
        .await
        .expect("patch");
    let done = wait_for(&env, &sv, "s", 90, "upgraded", |o| {
        has(o, "Deployed", "True", Some("UpgradeSuccessful"))
            && o.data.pointer("/status/deployedRelease/revision") == Some(&json!(2))
    })
    .await;
    let stored = Api::<Secret>::namespaced(env.admin.clone(), &env.ns)
        .get("s-auth")
        .await
        .expect("the chart's Secret");
    let data = stored.data.expect("data");
    assert_eq!(
        data["password"].0,
        new.as_bytes(),
        "the upgrade took effect"
    );
    assert_eq!(
        data["token"].0,
        token.as_bytes(),
        "the override took effect"
    );

    let events = Api::<Event>::namespaced(env.admin.clone(), &env.ns)
        .list(&Default::default())
        .await
        .expect("events");
    let event_text: Vec<String> = events
        .items
        .iter()
        .map(|e| {
            format!(
                "{} {}",
                e.reason.as_deref().unwrap_or(""),
                e.message.as_deref().unwrap_or("")
            )
        })
        .collect();
    assert!(
        event_text
            .iter()
            .any(|e| e.contains("OverrideValuesInUse") && e.contains("auth.apiToken")),
        "the override is still announced: {event_text:?}"
    );
    let status = done.data["status"].to_string();
    let log = log_text();
    assert!(
        log.contains("Secretive") || log.contains("s-auth") || log.contains("release"),
        "the capture sees the operator's log"
    );
    for secret in [old, new, token] {
        for form in forms(secret) {
            assert!(!log.contains(&form), "the log holds {form:?}:\n{log}");
            assert!(
                !event_text.iter().any(|e| e.contains(&form)),
                "an Event holds {form:?}: {event_text:?}"
            );
            assert!(
                !status.contains(&form),
                "the status holds {form:?}: {status}"
            );
        }
    }
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uninstall_finishes_in_a_namespace_being_deleted() {
    let (env, op) = running("helm-nsdel").await;
    let lc = resource("test.bosun.dev", "v1", "Lifecycle");
    // The chart has a pre-delete hook: under a namespace being deleted, the API server
    // refuses to create it.
    create(
        &env,
        &lc,
        "apiVersion: test.bosun.dev/v1\nkind: Lifecycle\nmetadata:\n  name: doomed\nspec: {}\n",
    )
    .await;
    installed(&env, &lc, "doomed", 120).await;
    let namespaces: Api<Namespace> = Api::all(env.admin.clone());
    namespaces
        .delete(&env.ns, &Default::default())
        .await
        .expect("delete the namespace");
    let gone = eventually(180, || async {
        match namespaces.get_opt(&env.ns).await {
            Ok(None) => Some(()),
            _ => None,
        }
    })
    .await;
    if gone.is_none() {
        let cr = api(&env, &lc).get_opt("doomed").await.ok().flatten();
        panic!(
            "the namespace is still there (Terminating); the custom resource: {:#}",
            cr.map(|o| json!({"finalizers": o.finalizers(), "status": o.data["status"]}))
                .unwrap_or_default()
        );
    }
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uninstall_wait_waits_for_the_objects_and_runs_delete_hooks_once() {
    let (env, op) = running("helm-uwait").await;
    let lc = resource("test.bosun.dev", "v1", "Lifecycle");
    const HOLD: &str = "test.bosun.dev/hold";
    create(&env, &lc, &format!("apiVersion: test.bosun.dev/v1\nkind: Lifecycle\nmetadata:\n  name: held\n  annotations:\n    helm.sdk.operatorframework.io/uninstall-wait: \"true\"\nspec:\n  extra:\n    enabled: true\n    finalizers: [{HOLD}]\n")).await;
    installed(&env, &lc, "held", 120).await;
    let cms: Api<ConfigMap> = Api::namespaced(env.admin.clone(), &env.ns);
    let held = cms.get("held-extra").await.expect("the held object");
    assert!(held.finalizers().iter().any(|f| f == HOLD));

    api(&env, &lc)
        .delete("held", &Default::default())
        .await
        .expect("delete");
    let waiting = wait_for(&env, &lc, "held", 90, "waiting for the held object", |o| {
        condition(o, "Deployed")
            .and_then(|c| c["message"].as_str())
            .is_some_and(|m| m == "Waiting until all resources are deleted.")
    })
    .await;
    assert!(waiting
        .finalizers()
        .iter()
        .any(|f| f == "helm.sdk.operatorframework.io/uninstall-release"));
    let hook_uid = cms
        .get("held-goodbye")
        .await
        .expect("the pre-delete hook ran")
        .uid();
    // Several more passes while the object is held: the custom resource must stay, and the
    // delete hook must not run again (a re-run deletes and re-creates it: a new UID).
    let before = op.reconciles();
    eventually(60, || async {
        (op.reconciles() >= before + 3.0).then_some(())
    })
    .await
    .expect("three more passes");
    assert!(
        api(&env, &lc).get_opt("held").await.expect("get").is_some(),
        "the custom resource went while a release object still exists"
    );
    assert!(
        cms.get_opt("held-extra").await.expect("get").is_some(),
        "the held object is still there"
    );
    assert_eq!(
        cms.get("held-goodbye").await.expect("hook").uid(),
        hook_uid,
        "the pre-delete hook ran again"
    );

    cms.patch(
        "held-extra",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("release the hold");
    let a = api(&env, &lc);
    eventually(60, || async {
        matches!(a.get_opt("held").await, Ok(None)).then_some(())
    })
    .await
    .expect("the custom resource goes once the object is gone");
    assert_eq!(
        cms.get("held-goodbye").await.expect("hook").uid(),
        hook_uid,
        "the pre-delete hook ran once"
    );
    let left = Api::<Secret>::namespaced(env.admin.clone(), &env.ns)
        .list(&Default::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter(|s| s.name_any().starts_with("sh.helm.release.v1.held."))
        .count();
    assert_eq!(left, 0, "release records removed");
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_made_while_stopped_is_repaired_on_start_and_a_removed_finalizer_comes_back() {
    let (env, op) = running("helm-drift").await;
    let lc = resource("test.bosun.dev", "v1", "Lifecycle");
    create(&env, &lc, "apiVersion: test.bosun.dev/v1\nkind: Lifecycle\nmetadata:\n  name: drift\nspec:\n  greeting: hi\n").await;
    installed(&env, &lc, "drift", 120).await;
    const FINALIZER: &str = "helm.sdk.operatorframework.io/uninstall-release";
    // Someone removes the uninstall finalizer: without it a delete would skip the uninstall.
    // Guarded by the resourceVersion, so the operator's own writes (a status update as the
    // release's workloads become ready) are never undone: a conflict reads the object again.
    let crs = api(&env, &lc);
    eventually(60, || async {
        let cr = crs.get("drift").await.expect("cr");
        let others: Vec<String> = cr
            .finalizers()
            .iter()
            .filter(|f| *f != FINALIZER)
            .cloned()
            .collect();
        match crs
            .patch(
                "drift",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": others, "resourceVersion": cr.resource_version()}})),
            )
            .await
        {
            Ok(_) => Some(()),
            Err(kube::Error::Api(e)) if e.code == 409 => None,
            Err(e) => panic!("remove the finalizer: {e}"),
        }
    })
    .await
    .expect("remove the finalizer");
    wait_for(&env, &lc, "drift", 60, "the finalizer put back", |o| {
        o.finalizers().iter().any(|f| f == FINALIZER)
    })
    .await;
    op.stop().await;

    // While bosun is stopped, the release's ConfigMap is edited.
    let cms: Api<ConfigMap> = Api::namespaced(env.admin.clone(), &env.ns);
    cms.patch(
        "drift-config",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"greeting": "tampered"}})),
    )
    .await
    .expect("edit");
    let ops = operators(&watches(), Storage::Secrets);
    let op = start(&env, ops, USER).await;
    eventually(60, || async {
        let c = cms.get("drift-config").await.ok()?;
        (c.data?.get("greeting")? == "hi").then_some(())
    })
    .await
    .expect("the edit made while bosun was stopped is repaired on start");
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_random_override_is_one_value_not_an_upgrade_per_reconcile() {
    let (env, op) = running("helm-nonce").await;
    let noted = resource("test.bosun.dev", "v1", "Noted");
    create(
        &env,
        &noted,
        "apiVersion: test.bosun.dev/v1\nkind: Noted\nmetadata:\n  name: nonce\nspec: {}\n",
    )
    .await;
    installed(&env, &noted, "nonce", 90).await;
    // More reconciles: annotations trigger one each (the Helm flavour reads them).
    let a = api(&env, &noted);
    for i in 0..3 {
        let before = op.reconciles();
        a.patch(
            "nonce",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"test.bosun.dev/poke": i.to_string()}}}),
            ),
        )
        .await
        .expect("poke");
        eventually(60, || async { (op.reconciles() > before).then_some(()) })
            .await
            .expect("reconciled");
    }
    let cr = a.get("nonce").await.expect("cr");
    assert_eq!(
        cr.data.pointer("/status/deployedRelease/revision"),
        Some(&json!(1)),
        "the release was upgraded without a change: {:#}",
        cr.data["status"]
    );
    op.stop().await;
}

/// The names a failed revision added: a namespaced ConfigMap and a cluster-scoped ClusterRole.
async fn added_objects_exist(env: &Env, release: &str) -> (bool, bool) {
    let cms: Api<ConfigMap> = Api::namespaced(env.admin.clone(), &env.ns);
    let roles: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(env.admin.clone());
    (
        cms.get_opt(&format!("{release}-extra"))
            .await
            .expect("get")
            .is_some(),
        roles
            .get_opt(&format!("{}-{release}-extra", env.ns))
            .await
            .expect("get")
            .is_some(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_upgrade_then_a_revert_leaves_nothing_behind() {
    let (env, op) = running("helm-fail-up").await;
    let lc = resource("test.bosun.dev", "v1", "Lifecycle");
    create(&env, &lc, "apiVersion: test.bosun.dev/v1\nkind: Lifecycle\nmetadata:\n  name: up\nspec:\n  extra:\n    enabled: false\n").await;
    installed(&env, &lc, "up", 120).await;
    assert_eq!(added_objects_exist(&env, "up").await, (false, false));
    // Revision 2 adds a ConfigMap and a ClusterRole, and its post-upgrade hook fails.
    let a = api(&env, &lc);
    a.patch(
        "up",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"extra": {"enabled": true, "clusterRole": true}, "failPostHook": true}})),
    )
    .await
    .expect("upgrade");
    wait_for(&env, &lc, "up", 120, "the upgrade failed", |o| {
        has(o, "ReleaseFailed", "True", Some("UpgradeError"))
    })
    .await;
    // The user reverts the spec.
    a.patch(
        "up",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"extra": {"enabled": false, "clusterRole": false}, "failPostHook": false}})),
    )
    .await
    .expect("revert");
    wait_for(&env, &lc, "up", 120, "deployed again", |o| {
        has(o, "Deployed", "True", None) && condition(o, "ReleaseFailed").is_none()
    })
    .await;
    let left = eventually(30, || async {
        (added_objects_exist(&env, "up").await == (false, false)).then_some(())
    })
    .await;
    assert!(
        left.is_some(),
        "objects of the failed revision left behind (ConfigMap, ClusterRole): {:?}",
        added_objects_exist(&env, "up").await
    );
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_install_then_a_fix_leaves_nothing_behind() {
    let (env, op) = running("helm-fail-in").await;
    let lc = resource("test.bosun.dev", "v1", "Lifecycle");
    create(&env, &lc, "apiVersion: test.bosun.dev/v1\nkind: Lifecycle\nmetadata:\n  name: inst\nspec:\n  extra:\n    enabled: true\n    clusterRole: true\n  failPostHook: true\n").await;
    wait_for(&env, &lc, "inst", 120, "the install failed", |o| {
        has(o, "ReleaseFailed", "True", Some("InstallError"))
    })
    .await;
    // The fix no longer renders the extra objects.
    api(&env, &lc)
        .patch(
            "inst",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"extra": {"enabled": false, "clusterRole": false}, "failPostHook": false}})),
        )
        .await
        .expect("fix");
    wait_for(&env, &lc, "inst", 120, "installed", |o| {
        has(o, "Deployed", "True", Some("InstallSuccessful"))
            && condition(o, "ReleaseFailed").is_none()
    })
    .await;
    let left = eventually(30, || async {
        (added_objects_exist(&env, "inst").await == (false, false)).then_some(())
    })
    .await;
    assert!(
        left.is_some(),
        "objects of the failed install left behind: {:?}",
        added_objects_exist(&env, "inst").await
    );
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_scoped_custom_resource_is_refused_with_a_clear_condition() {
    captured();
    let env = env("helm-cluster").await;
    let watches =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/charts/cluster-watches.yaml");
    let ops = operators(&watches, Storage::Secrets);
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(env.admin.clone());
    for op in &ops {
        for mut crd in op.crds() {
            crd.spec.scope = "Cluster".into();
            crds.patch(
                &crd.name_any(),
                &PatchParams::apply("bosun-test").force(),
                &Patch::Apply(&crd),
            )
            .await
            .expect("cluster-scoped CRD");
            let name = crd.name_any();
            eventually(30, || async {
                let c = crds.get(&name).await.ok()?;
                c.status?
                    .conditions?
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
                    .then_some(())
            })
            .await
            .expect("established");
        }
    }
    grant(&env, &ops, USER).await;
    let op = start(&env, ops, USER).await;
    let ar = resource("test.bosun.dev", "v1", "Clustered");
    let all: Api<kube::core::DynamicObject> = Api::all_with(env.admin.clone(), &ar);
    let name = format!("{}-c", env.ns);
    let mut cr = kube::core::DynamicObject::new(&name, &ar);
    cr.data = json!({"spec": {}});
    all.create(&Default::default(), &cr).await.expect("create");
    let refused = eventually(60, || async {
        let o = all.get(&name).await.ok()?;
        let c = condition(&o, "Irreconcilable")?.clone();
        (c["status"] == "True").then_some((o, c))
    })
    .await;
    let (o, c) = refused.expect("a condition says why");
    assert_eq!(c["reason"], "ReconcileError");
    assert!(
        c["message"]
            .as_str()
            .is_some_and(|m| m.contains("cluster-scoped")),
        "{c}"
    );
    assert!(
        o.finalizers().is_empty(),
        "nothing to uninstall, nothing held"
    );
    all.delete(&name, &Default::default())
        .await
        .expect("delete");
    eventually(30, || async {
        matches!(all.get_opt(&name).await, Ok(None)).then_some(())
    })
    .await
    .expect("deleted at once");
    op.stop().await;
}

/// Pokes a custom resource (an annotation: the Helm flavour reconciles on annotation changes)
/// and waits until the operator has reconciled again.
async fn poke(env: &Env, ar: &kube::core::ApiResource, name: &str, op: &Running, i: usize) {
    let before = op.reconciles();
    api(env, ar)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"test.bosun.dev/poke": i.to_string()}}}),
            ),
        )
        .await
        .expect("poke");
    eventually(60, || async { (op.reconciles() > before).then_some(()) })
        .await
        .expect("reconciled");
}

fn password(s: &Secret) -> Vec<u8> {
    s.data.as_ref().expect("data")["password"].0.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookup_with_dry_run_server_reuses_a_generated_password() {
    let (env, op) = running("helm-lookup").await;
    let looker = resource("test.bosun.dev", "v1", "Looker");
    create(
        &env,
        &looker,
        "apiVersion: test.bosun.dev/v1\nkind: Looker\nmetadata:\n  name: db\nspec: {}\n",
    )
    .await;
    installed(&env, &looker, "db", 90).await;
    let secrets: Api<Secret> = Api::namespaced(env.admin.clone(), &env.ns);
    let first = password(&secrets.get("db-generated").await.expect("generated"));
    assert_eq!(first.len(), 20);
    for i in 0..3 {
        poke(&env, &looker, "db", &op, i).await;
    }
    // An upgrade keeps it too: lookup finds the stored one.
    api(&env, &looker)
        .patch(
            "db",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"greeting": "bonjour"}})),
        )
        .await
        .expect("upgrade");
    let cr = wait_for(&env, &looker, "db", 90, "upgraded", |o| {
        has(o, "Deployed", "True", Some("UpgradeSuccessful"))
    })
    .await;
    assert_eq!(
        cr.data.pointer("/status/deployedRelease/revision"),
        Some(&json!(2)),
        "one upgrade, for the one spec change: {:#}",
        cr.data["status"]
    );
    assert!(
        condition(&cr, "Nondeterministic").is_none(),
        "{:#}",
        cr.data["status"]
    );
    assert_eq!(
        password(&secrets.get("db-generated").await.expect("secret")),
        first,
        "the generated password is stable across reconciles and upgrades"
    );
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chart_that_renders_differently_every_time_does_not_loop() {
    let (env, op) = running("helm-unstable").await;
    let unstable = resource("test.bosun.dev", "v1", "Unstable");
    create(
        &env,
        &unstable,
        "apiVersion: test.bosun.dev/v1\nkind: Unstable\nmetadata:\n  name: rnd\nspec: {}\n",
    )
    .await;
    installed(&env, &unstable, "rnd", 90).await;
    let secrets: Api<Secret> = Api::namespaced(env.admin.clone(), &env.ns);
    let first = password(&secrets.get("rnd-generated").await.expect("generated"));
    for i in 0..3 {
        poke(&env, &unstable, "rnd", &op, i).await;
    }
    let cr = api(&env, &unstable).get("rnd").await.expect("cr");
    assert_eq!(
        cr.data.pointer("/status/deployedRelease/revision"),
        Some(&json!(1)),
        "upgraded without a change: {:#}",
        cr.data["status"]
    );
    let c = condition(&cr, "Nondeterministic").expect("the condition says why");
    assert_eq!(c["status"], "True");
    assert!(
        c["message"]
            .as_str()
            .is_some_and(|m| m.contains("randAlphaNum")),
        "{c}"
    );
    assert_eq!(
        password(&secrets.get("rnd-generated").await.expect("secret")),
        first,
        "the password was not rotated"
    );
    let events = Api::<Event>::namespaced(env.admin.clone(), &env.ns)
        .list(&Default::default())
        .await
        .expect("events");
    let told: i32 = events
        .items
        .iter()
        .filter(|e| e.reason.as_deref() == Some("NondeterministicRender"))
        .map(|e| e.count.unwrap_or(1))
        .sum();
    assert_eq!(told, 1, "reported once");
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capabilities_come_from_the_live_cluster_and_follow_crds() {
    let (env, op) = running("helm-caps").await;
    let looker = resource("test.bosun.dev", "v1", "Looker");
    create(&env, &looker, "apiVersion: test.bosun.dev/v1\nkind: Looker\nmetadata:\n  name: caps\nspec:\n  gadget: true\n").await;
    installed(&env, &looker, "caps", 90).await;
    let cms: Api<ConfigMap> = Api::namespaced(env.admin.clone(), &env.ns);
    let caps = cms
        .get("caps-caps")
        .await
        .expect("caps")
        .data
        .expect("data");
    let server = env.admin.apiserver_version().await.expect("version");
    assert_eq!(
        caps["kubeVersion"], server.git_version,
        "the server's version"
    );
    assert_eq!(caps["appsDeploymentKind"], "true", "g/v/Kind entries");
    assert_eq!(
        caps["removedExtensionsDeployment"], "false",
        "an API this server does not serve"
    );
    assert!(cms.get_opt("caps-gadget").await.expect("get").is_none());

    // The Gadget CRD comes: the gated object follows on a later reconcile.
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(env.admin.clone());
    let crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.test.bosun.dev"},
        "spec": {"group": "test.bosun.dev", "scope": "Namespaced",
                 "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .expect("crd");
    crds.patch(
        "gadgets.test.bosun.dev",
        &PatchParams::apply("bosun-test").force(),
        &Patch::Apply(&crd),
    )
    .await
    .expect("gadget CRD");
    let mut i = 0;
    let appeared = eventually(90, || {
        i += 1;
        let n = i;
        let env = &env;
        let looker = &looker;
        let op = &op;
        let cms = cms.clone();
        async move {
            poke(env, looker, "caps", op, 100 + n).await;
            cms.get_opt("caps-gadget").await.ok()?.map(|_| ())
        }
    })
    .await;
    assert!(
        appeared.is_some(),
        "the Gadget-gated object is rendered once the CRD is served"
    );
    op.stop().await;
}

/// Review L10: two kinds on one chart, two custom resources of the same name in one
/// namespace. The second is refused (the release name is taken), never written into the
/// first one's history; deleting it leaves the first one's records, so its next upgrade
/// goes on from its revision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_name_taken_by_another_kind_is_refused_and_its_records_kept() {
    let (env, op) = running("helm-l10").await;
    let sv = resource("test.bosun.dev", "v1", "Secretive");
    let noted = resource("test.bosun.dev", "v1", "Noted");
    create(
        &env,
        &sv,
        "apiVersion: test.bosun.dev/v1\nkind: Secretive\nmetadata:\n  name: same\nspec: {}\n",
    )
    .await;
    installed(&env, &sv, "same", 120).await;
    create(
        &env,
        &noted,
        "apiVersion: test.bosun.dev/v1\nkind: Noted\nmetadata:\n  name: same\nspec: {}\n",
    )
    .await;
    let refused = wait_for(&env, &noted, "same", 60, "refused", |o| {
        has(o, "ReleaseFailed", "True", None)
    })
    .await;
    let msg = condition(&refused, "ReleaseFailed").expect("condition")["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(msg.contains("in use by Secretive same"), "{msg}");
    let secrets: Api<Secret> = Api::namespaced(env.admin.clone(), &env.ns);
    let records = || async {
        let mut names: Vec<String> = secrets
            .list(&kube::api::ListParams::default().labels("owner=helm,name=same"))
            .await
            .expect("list")
            .items
            .iter()
            .map(|s| s.name_any())
            .collect();
        names.sort();
        names
    };
    assert_eq!(records().await, ["sh.helm.release.v1.same.v1"]);

    api(&env, &noted)
        .delete("same", &Default::default())
        .await
        .expect("delete");
    eventually(60, || async {
        api(&env, &noted)
            .get_opt("same")
            .await
            .ok()
            .flatten()
            .is_none()
            .then_some(())
    })
    .await
    .expect("the refused one is gone");
    assert_eq!(records().await, ["sh.helm.release.v1.same.v1"], "kept");
    api(&env, &sv)
        .patch(
            "same",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"note": "second"}})),
        )
        .await
        .expect("patch");
    wait_for(&env, &sv, "same", 120, "upgraded to revision 2", |o| {
        o.data["status"]["deployedRelease"]["revision"] == 2
    })
    .await;
    op.stop().await;
}

/// Review M12: a chart whose Role takes its rules from values cannot be used to grant what
/// the operator does not hold: the operator has no `escalate`, so the API server refuses
/// the Role and the custom resource reports it; rules it holds are fine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_from_values_cannot_grant_what_the_operator_does_not_hold() {
    let (env, op) = running("helm-m12").await;
    let lc = resource("test.bosun.dev", "v1", "Lifecycle");
    create(
        &env,
        &lc,
        "apiVersion: test.bosun.dev/v1\nkind: Lifecycle\nmetadata:\n  name: esc\nspec:\n  extraRules:\n  - apiGroups: ['*']\n    resources: ['*']\n    verbs: ['*']\n",
    )
    .await;
    let failed = wait_for(&env, &lc, "esc", 120, "refused", |o| {
        has(o, "ReleaseFailed", "True", None)
    })
    .await;
    let msg = condition(&failed, "ReleaseFailed").expect("condition")["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        msg.contains("esc-extra") && msg.contains("forbidden"),
        "{msg}"
    );
    let roles: Api<k8s_openapi::api::rbac::v1::Role> = Api::namespaced(env.admin.clone(), &env.ns);
    assert!(roles.get_opt("esc-extra").await.expect("get").is_none());
    // What the operator holds may be granted: it manages ConfigMaps.
    api(&env, &lc)
        .patch(
            "esc",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"extraRules": [
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}
            ]}})),
        )
        .await
        .expect("patch");
    installed(&env, &lc, "esc", 120).await;
    assert!(roles.get_opt("esc-extra").await.expect("get").is_some());
    op.stop().await;
}

/// Review L2: with a list of watched namespaces, a chart object in another watched namespace
/// than its custom resource's is outside the controller's child cache. It is read from the
/// API server instead: not rewritten on every reconcile, and its readiness seen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_in_another_watched_namespace_is_kept_without_rewrites_and_gets_ready() {
    let env = env("helm-l2a").await;
    let other = support::env("helm-l2b").await;
    let ops = operators(&watches(), Storage::Secrets);
    install_crds(&env.admin, &ops).await;
    grant(&env, &ops, USER).await;
    let scope = bosun_runtime::manager::Scope::Namespaces(vec![env.ns.clone(), other.ns.clone()]);
    let op = start_scoped(&env, ops, USER, scope).await;
    let lc = resource("test.bosun.dev", "v1", "Lifecycle");
    create(
        &env,
        &lc,
        &format!(
            "apiVersion: test.bosun.dev/v1\nkind: Lifecycle\nmetadata:\n  name: far\nspec:\n  webNamespace: {}\n",
            other.ns
        ),
    )
    .await;
    wait_for(&env, &lc, "far", 120, "Ready", |o| {
        has(o, "Ready", "True", None)
    })
    .await;
    let deploys: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(env.admin.clone(), &other.ns);
    assert!(deploys.get_opt("far-web").await.expect("get").is_some());
    op.stop().await;
}
