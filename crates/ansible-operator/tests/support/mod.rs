//! Shared set-up for the Ansible operator's tests on the real API server: one control plane
//! per test binary (with kube-controller-manager, for garbage collection), a namespace per
//! test, and the operators of a watches file run as a ServiceAccount bound to exactly the
//! RBAC they declare, through a client that counts every write it sends.
#![allow(dead_code)]
mod requests;
pub use requests::Requests;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bosun_ansible_operator::writes::Writes;
use bosun_ansible_operator::AnsibleOptions;
use bosun_runtime::manager::{Manager, ManagerConfig, ManagerError, Operator, Scope};
pub use bosun_testenv::eventually;
use bosun_testenv::{shared, test_namespace, ControlPlane};
use bosun_watches::WatchesFile;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::Client;
use serde_json::Value;
use tokio::sync::oneshot;

pub const USER: &str = "system:serviceaccount:bosun-system:bosun-ansible";

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The engine's test roles, and this crate's.
pub fn roles_path() -> Vec<PathBuf> {
    vec![
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/roles"),
        repo().join("crates/ansible/tests/roles"),
    ]
}

pub struct Env {
    pub cp: &'static ControlPlane,
    pub admin: Client,
    pub ns: String,
}

pub async fn env(prefix: &str) -> Env {
    if std::env::var_os("RUST_LOG").is_some() {
        bosun_runtime::telemetry::init(Default::default());
    }
    let cp = shared().await.expect("control plane");
    let admin = cp.client().await.expect("client");
    let ns = test_namespace(&admin, prefix).await.expect("namespace");
    Env { cp, admin, ns }
}

/// Env for a fixed, existing namespace (the seed's sample names `default`).
pub async fn env_in(ns: &str) -> Env {
    let mut e = env("unused").await;
    e.ns = ns.to_string();
    e
}

fn options(watches: &Path) -> AnsibleOptions {
    let mut opts = AnsibleOptions {
        watches_dir: watches.parent().map(Path::to_path_buf),
        ..Default::default()
    };
    opts.load.roles_path.extend(roles_path());
    opts
}

/// The operators of a watches file (roles found beside it and in the test roles).
pub fn operators(watches: &Path) -> Vec<Arc<dyn Operator>> {
    let file = WatchesFile::load(watches).expect("watches file");
    bosun_ansible_operator::operators(&file.entries, &options(watches))
        .expect("roles load")
        .into_iter()
        .map(|o| Arc::new(o) as Arc<dyn Operator>)
        .collect()
}

/// The seed's BookStore (examples/ansible-bookstore), run in the test's namespace: its CRD
/// installed, its RBAC granted; and the resource of its kind.
pub async fn start_bookstore(env: &Env) -> (Running, ApiResource) {
    let ops = operators(&repo().join("examples/ansible-bookstore/watches.yaml"));
    install_crds(&env.admin, &ops).await;
    grant(env, &ops, USER).await;
    let op = start(env, ops, USER).await;
    (op, resource("charts.example.com", "v1alpha1", "BookStore"))
}

/// A watches file written for one test (its text may name the test's namespace).
pub fn watches(dir: &Path, text: &str) -> PathBuf {
    let p = dir.join("watches.yaml");
    std::fs::write(&p, text).expect("write watches.yaml");
    p
}

/// Installs the operators' CRDs and waits until they are served.
pub async fn install_crds(client: &Client, ops: &[Arc<dyn Operator>]) {
    install_crds_with(client, ops, |_| {}).await
}

/// [`install_crds`], each CRD changed by `edit` first (its scope, say): the test kit applies
/// them and waits until each kind answers a LIST.
pub async fn install_crds_with(
    client: &Client,
    ops: &[Arc<dyn Operator>],
    edit: impl Fn(&mut CustomResourceDefinition),
) {
    let crds: Vec<CustomResourceDefinition> = ops.iter().flat_map(|op| op.crds()).collect();
    bosun_testenv::kit::install_crds_with(client, crds, edit)
        .await
        .expect("CRDs installed and served");
}

/// A ServiceAccount-like user bound to exactly what the operators (and the runtime) need.
pub async fn grant(env: &Env, ops: &[Arc<dyn Operator>], user: &str) {
    let mut need = bosun_runtime::rbac::runtime_rules(false);
    for op in ops {
        need = need.merge(op.rbac());
    }
    for r in need.namespaced.iter().chain(&need.cluster) {
        assert!(
            !bosun_runtime::rbac::has_wildcard(r),
            "a wildcard rule: {r:?}"
        );
    }
    let mut rules = need.namespaced;
    rules.extend(need.cluster);
    let name = format!("bosun-ansible-test-{}", env.ns);
    let role: ClusterRole = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name}, "rules": rules
    }))
    .expect("role");
    let pp = PatchParams::apply("bosun-test").force();
    Api::<ClusterRole>::all(env.admin.clone())
        .patch(&name, &pp, &Patch::Apply(&role))
        .await
        .expect("role");
    let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}]
    }))
    .expect("binding");
    Api::<ClusterRoleBinding>::all(env.admin.clone())
        .patch(&name, &pp, &Patch::Apply(&binding))
        .await
        .expect("binding");
}

pub struct Running {
    stop: Option<oneshot::Sender<()>>,
    pub task: tokio::task::JoinHandle<Result<(), ManagerError>>,
    pub writes: Writes,
    pub health: bosun_runtime::http::Health,
    pub metrics: bosun_runtime::metrics::Metrics,
}

impl Running {
    /// Stops gracefully; fails the test when the manager errs or does not stop.
    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        match tokio::time::timeout(Duration::from_secs(30), &mut self.task).await {
            Err(_) => panic!("the manager did not stop within 30 s"),
            Ok(Err(e)) => panic!("the manager task failed: {e}"),
            Ok(Ok(Err(e))) => panic!("the manager stopped with an error: {e}"),
            Ok(Ok(Ok(()))) => {}
        }
    }

    /// Reconciles counted so far with this result (`success`, `error`).
    pub fn reconciles(&self, result: &str) -> f64 {
        bosun_testenv::sum_series(
            &self.metrics.encode(),
            "controller_runtime_reconcile_total",
            &[("result", result)],
        )
    }

    /// Waits until every cache of every operator has synced.
    pub async fn ready(&self) {
        let h = self.health.clone();
        eventually(60, || {
            let h = h.clone();
            async move { h.readiness().ok() }
        })
        .await
        .expect("operators ready");
    }
}

/// Runs the operators in the test's namespace as `user` (granted with [`grant`]).
pub async fn start(env: &Env, ops: Vec<Arc<dyn Operator>>, user: &str) -> Running {
    start_scoped(env, ops, user, Scope::Namespaces(vec![env.ns.clone()])).await
}

/// [`start`], watching `scope`.
pub async fn start_scoped(
    env: &Env,
    ops: Vec<Arc<dyn Operator>>,
    user: &str,
    scope: Scope,
) -> Running {
    let config = config_as(env, user).await;
    let writes = Writes::default();
    let client = writes.client(config).expect("client");
    let cfg = ManagerConfig {
        scope,
        ..Default::default()
    };
    let mut m = Manager::new(client, cfg);
    for op in ops {
        m = m.with_operator(op);
    }
    let health = m.health();
    let metrics = m.metrics();
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(m.run(
        async move {
            let _ = rx.await;
        },
        |_| {},
    ));
    Running {
        stop: Some(tx),
        task,
        writes,
        health,
        metrics,
    }
}

/// The control plane's client configuration, impersonating `user` (granted with [`grant`]).
pub async fn config_as(env: &Env, user: &str) -> kube::Config {
    let mut config = env.cp.config().await.expect("config");
    config.auth_info.impersonate = Some(user.to_string());
    config.auth_info.impersonate_groups = Some(vec!["system:authenticated".into()]);
    config
}

/// A replica that campaigns for a Lease: its stop switch, its task, its health.
pub struct Elected {
    pub stop: oneshot::Sender<()>,
    pub task: tokio::task::JoinHandle<Result<(), ManagerError>>,
    pub health: bosun_runtime::http::Health,
}

/// Runs `ops` in the test's namespace as replica `identity` of the Lease `lease` (written
/// with the admin client), on a client from `config` whose every request `seen` records.
pub fn start_elected(
    env: &Env,
    config: kube::Config,
    ops: Vec<Arc<dyn Operator>>,
    lease: &str,
    identity: &str,
    seen: &Requests,
) -> Elected {
    let client = kube::client::ClientBuilder::try_from(config)
        .expect("builder")
        .with_layer(seen)
        .build();
    let cfg = ManagerConfig {
        scope: Scope::Namespaces(vec![env.ns.clone()]),
        leader: Some(bosun_runtime::leader::LeaderConfig::new(
            lease, &env.ns, identity,
        )),
        ..Default::default()
    };
    let m = ops.into_iter().fold(
        Manager::new(client, cfg).with_leader_client(env.admin.clone()),
        |m, op| m.with_operator(op),
    );
    let health = m.health();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(m.run(
        async move {
            let _ = stopped.await;
        },
        |_| {},
    ));
    Elected { stop, task, health }
}

pub fn resource(group: &str, version: &str, kind: &str) -> ApiResource {
    let gvk = GroupVersionKind::gvk(group, version, kind);
    ApiResource::from_gvk_with_plural(&gvk, &bosun_watches::kinds::plural(kind))
}

pub fn widgets() -> ApiResource {
    resource("test.bosun.dev", "v1alpha1", "Widget")
}

pub fn api(env: &Env, ar: &ApiResource) -> Api<DynamicObject> {
    Api::namespaced_with(env.admin.clone(), &env.ns, ar)
}

/// Creates an object from JSON in the test's namespace.
pub async fn create_json(env: &Env, ar: &ApiResource, obj: Value) -> DynamicObject {
    let mut obj: DynamicObject = serde_json::from_value(obj).expect("object");
    obj.metadata.namespace = Some(env.ns.clone());
    api(env, ar)
        .create(&PostParams::default(), &obj)
        .await
        .expect("create")
}

/// A Widget named `name` with `spec`.
pub async fn widget(env: &Env, name: &str, spec: Value) -> DynamicObject {
    create_json(
        env,
        &widgets(),
        serde_json::json!({"apiVersion": "test.bosun.dev/v1alpha1", "kind": "Widget",
                           "metadata": {"name": name}, "spec": spec}),
    )
    .await
}

pub fn condition<'a>(obj: &'a DynamicObject, type_: &str) -> Option<&'a Value> {
    obj.data
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// True when the condition has that status (and reason, when given).
pub fn has(o: &DynamicObject, type_: &str, status: &str, reason: Option<&str>) -> bool {
    condition(o, type_)
        .is_some_and(|c| c["status"] == status && reason.is_none_or(|r| c["reason"] == r))
}

/// Waits until `pred` holds for the named object; panics with its status otherwise.
pub async fn wait_for(
    env: &Env,
    ar: &ApiResource,
    name: &str,
    secs: u64,
    what: &str,
    pred: impl Fn(&DynamicObject) -> bool,
) -> DynamicObject {
    let a = api(env, ar);
    let got = eventually(secs, || async {
        let o = a.get(name).await.ok()?;
        pred(&o).then_some(o)
    })
    .await;
    match got {
        Some(o) => o,
        None => panic!(
            "{name}: {what} not reached; status: {:#}",
            a.get(name)
                .await
                .map(|o| o.data["status"].clone())
                .unwrap_or_default()
        ),
    }
}

/// Waits until the Widget has run successfully.
pub async fn wait_successful(env: &Env, name: &str) -> DynamicObject {
    wait_for(env, &widgets(), name, 60, "Successful", |o| {
        has(o, "Successful", "True", Some("Successful"))
    })
    .await
}

/// A project whose entry is a playbook and whose finalizer is a playbook of its own with
/// `vars` (issue 34); the watches file, and the namespace the finalizer records into.
pub async fn finalizer_playbook_project(env: &Env, dir: &Path) -> (PathBuf, String) {
    let records = bosun_testenv::test_namespace(&env.admin, "ao-records-pb")
        .await
        .expect("namespace");
    let pb = dir.join("playbooks");
    std::fs::create_dir_all(&pb).expect("dir");
    std::fs::write(
        pb.join("main.yml"),
        "- hosts: localhost\n  gather_facts: false\n  roles: [finalizer]\n",
    )
    .expect("playbook");
    std::fs::write(
        pb.join("cleanup.yml"),
        "- hosts: localhost\n  gather_facts: false\n  vars: {state: from-the-play}\n  \
         tasks:\n    - include_role: {name: recorder}\n",
    )
    .expect("playbook");
    let w = watches(
        dir,
        &format!(
            "- group: test.bosun.dev\n  version: v1alpha1\n  kind: Widget\n  \
             playbook: playbooks/main.yml\n  vars: {{record_namespace: {records}}}\n  \
             finalizer: {{name: test.bosun.dev/cleanup, playbook: playbooks/cleanup.yml, \
             vars: {{state: absent}}}}\n"
        ),
    );
    (w, records)
}

/// The finalizer playbook runs before the object goes, given the finalizer's vars over the
/// play's, the watch's vars and the spec (the same under either engine).
pub async fn finalizer_playbook_runs(env: &Env, records: &str, ops: Vec<Arc<dyn Operator>>) {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::ResourceExt;
    install_crds(&env.admin, &ops).await;
    grant(env, &ops, USER).await;
    let op = start(env, ops, USER).await;
    widget(env, "kept", serde_json::json!({"size": 3})).await;
    let w = wait_for(env, &widgets(), "kept", 180, "Successful", |o| {
        has(o, "Successful", "True", Some("Successful"))
    })
    .await;
    assert_eq!(w.finalizers(), ["test.bosun.dev/cleanup"]);
    let cms: Api<ConfigMap> = Api::namespaced(env.admin.clone(), &env.ns);
    cms.get("kept-data").await.expect("the main playbook ran");
    let recorded = Api::<ConfigMap>::namespaced(env.admin.clone(), records);
    assert!(
        recorded
            .get_opt("finalized-kept")
            .await
            .expect("get")
            .is_none(),
        "the finalizer playbook ran before deletion"
    );
    api(env, &widgets())
        .delete("kept", &Default::default())
        .await
        .expect("delete");
    let gone = eventually(180, || async {
        api(env, &widgets())
            .get_opt("kept")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    assert!(gone.is_some(), "the finalizer was released");
    let data = recorded
        .get("finalized-kept")
        .await
        .expect("the finalizer playbook ran")
        .data
        .expect("data");
    assert_eq!(
        (
            data.get("state").map(String::as_str),
            data.get("name").map(String::as_str),
            data.get("size").map(String::as_str)
        ),
        (Some("absent"), Some("kept"), Some("3")),
        "the finalizer's vars win over the play's; the watch's vars and the spec reach it"
    );
    op.stop().await;
}
