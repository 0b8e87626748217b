//! Shared set-up for the Helm operator's tests on the real API server: one control plane per
//! test binary (with kube-controller-manager), a namespace and a node agent per test, and the
//! operators of a watches file run as a ServiceAccount bound to exactly the RBAC they declare,
//! through a client that counts every write it sends.
#![allow(dead_code)]
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bosun_helm_operator::{HelmOptions, Storage};
use bosun_runtime::manager::{Manager, ManagerConfig, ManagerError, Operator, Scope};
pub use bosun_testenv::eventually;
use bosun_testenv::{shared, test_namespace, ControlPlane, NodeAgent, NodeAgentConfig};
use bosun_watches::WatchesFile;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::Client;
use tokio::sync::oneshot;

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub struct Env {
    pub cp: &'static ControlPlane,
    pub admin: Client,
    pub ns: String,
    _agent: NodeAgent,
}

pub async fn env(prefix: &str) -> Env {
    if std::env::var_os("RUST_LOG").is_some() {
        bosun_runtime::telemetry::init(Default::default());
    }
    let cp = shared().await.expect("control plane");
    let admin = cp.client().await.expect("client");
    let ns = test_namespace(&admin, prefix).await.expect("namespace");
    let agent = NodeAgent::start(
        admin.clone(),
        NodeAgentConfig {
            namespace: Some(ns.clone()),
            resize_needs_restart: false,
        },
    );
    Env {
        cp,
        admin,
        ns,
        _agent: agent,
    }
}

/// The operators of a watches file.
pub fn operators(watches: &Path, storage: Storage) -> Vec<Arc<dyn Operator>> {
    let file = WatchesFile::load(watches).expect("watches file");
    let opts = HelmOptions {
        storage,
        ..Default::default()
    };
    bosun_helm_operator::operators(&file.entries, &opts)
        .expect("charts load")
        .into_iter()
        .map(|o| Arc::new(o) as Arc<dyn Operator>)
        .collect()
}

/// Installs the operators' CRDs and waits until they are served (the test kit's one call).
pub async fn install_crds(client: &Client, ops: &[Arc<dyn Operator>]) {
    bosun_testenv::kit::install_crds(client, ops.iter().flat_map(|op| op.crds()))
        .await
        .expect("CRDs served");
}

/// A ServiceAccount-like user bound to exactly what the operators (and the runtime) need.
pub async fn grant(env: &Env, ops: &[Arc<dyn Operator>], user: &str) {
    let mut need = bosun_runtime::rbac::runtime_rules(false);
    for op in ops {
        need = need.merge(op.rbac());
    }
    let mut rules = need.namespaced;
    rules.extend(need.cluster);
    let name = format!("bosun-helm-test-{}", env.ns);
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

/// Counts the writes (anything but GET) a client sends, and remembers them, with when each
/// was sent and when its answer came; and the reads (GET: path and query) it sent.
#[derive(Clone, Default)]
pub struct Writes(
    Arc<AtomicU64>,
    Arc<std::sync::Mutex<Vec<String>>>,
    Arc<std::sync::Mutex<Vec<(bool, String)>>>,
    Arc<std::sync::Mutex<Vec<String>>>,
);

impl Writes {
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }

    /// `METHOD path` of every write so far.
    pub fn list(&self) -> Vec<String> {
        self.1.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Every write's sending (`true`) and answer (`false`), as `METHOD path`, in order.
    pub fn timeline(&self) -> Vec<(bool, String)> {
        self.2.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// The path and query of every GET sent so far (lists and watches included).
    pub fn reads(&self) -> Vec<String> {
        self.3.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

#[derive(Clone)]
struct CountLayer(Writes);

impl<S> tower::Layer<S> for CountLayer {
    type Service = CountService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        CountService {
            inner,
            writes: self.0.clone(),
        }
    }
}

#[derive(Clone)]
struct CountService<S> {
    inner: S,
    writes: Writes,
}

impl<S, B> tower::Service<http::Request<B>> for CountService<S>
where
    S: tower::Service<http::Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = futures::future::BoxFuture<'static, Result<S::Response, S::Error>>;
    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }
    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let mut answered = None;
        if req.method() != http::Method::GET {
            let what = format!("{} {}", req.method(), req.uri().path());
            self.writes.0.fetch_add(1, Ordering::SeqCst);
            if let Ok(mut l) = self.writes.1.lock() {
                l.push(what.clone());
            }
            if let Ok(mut t) = self.writes.2.lock() {
                t.push((true, what.clone()));
            }
            answered = Some((self.writes.2.clone(), what));
        } else if let Ok(mut r) = self.writes.3.lock() {
            r.push(req.uri().to_string());
        }
        let fut = self.inner.call(req);
        Box::pin(async move {
            let res = fut.await;
            if let Some((timeline, what)) = answered {
                if let Ok(mut t) = timeline.lock() {
                    t.push((false, what));
                }
            }
            res
        })
    }
}

/// The admin's client, counting the writes it sends.
pub async fn counting_admin(env: &Env) -> (Client, Writes) {
    let config = env.cp.config().await.expect("config");
    let writes = Writes::default();
    let client = kube::client::ClientBuilder::try_from(config)
        .expect("builder")
        .with_layer(&CountLayer(writes.clone()))
        .build();
    (client, writes)
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

    /// Successful reconciles counted so far.
    pub fn reconciles(&self) -> f64 {
        bosun_testenv::sum_series(
            &self.metrics.encode(),
            "controller_runtime_reconcile_total",
            &[("result", "success")],
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
    let mut config = env.cp.config().await.expect("config");
    config.auth_info.impersonate = Some(user.to_string());
    config.auth_info.impersonate_groups = Some(vec!["system:authenticated".into()]);
    let writes = Writes::default();
    let client = kube::client::ClientBuilder::try_from(config)
        .expect("builder")
        .with_layer(&CountLayer(writes.clone()))
        .build();
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

pub fn resource(group: &str, version: &str, kind: &str) -> ApiResource {
    let gvk = GroupVersionKind::gvk(group, version, kind);
    ApiResource::from_gvk_with_plural(&gvk, &bosun_helm_operator::crd::plural(kind))
}

pub fn api(env: &Env, ar: &ApiResource) -> Api<DynamicObject> {
    Api::namespaced_with(env.admin.clone(), &env.ns, ar)
}

/// Creates a custom resource from YAML (its namespace set to the test's).
pub async fn create(env: &Env, ar: &ApiResource, yaml: &str) -> DynamicObject {
    let json = bosun_yaml::goyaml::yaml_to_json(yaml).expect("yaml");
    let mut obj: DynamicObject = serde_json::from_str(&json).expect("object");
    obj.metadata.namespace = Some(env.ns.clone());
    api(env, ar)
        .create(&PostParams::default(), &obj)
        .await
        .expect("create")
}

pub fn condition<'a>(obj: &'a DynamicObject, type_: &str) -> Option<&'a serde_json::Value> {
    obj.data
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
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

/// True when the condition has that status (and reason, when given) for the current spec.
pub fn has(o: &DynamicObject, type_: &str, status: &str, reason: Option<&str>) -> bool {
    let current = o
        .data
        .pointer("/status/observedGeneration")
        .and_then(|g| g.as_i64())
        == o.metadata.generation;
    condition(o, type_)
        .is_some_and(|c| c["status"] == status && reason.is_none_or(|r| c["reason"] == r))
        && current
}

/// Runs Helm's own library (helm-python-sdk) against the test cluster: `command` with `args`.
pub fn helm(env: &Env, command: &str, args: serde_json::Value) -> serde_json::Value {
    let venv = std::env::var("BOSUN_HELM_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/bosun/helm-venv")
        });
    let python = venv.join("bin/python");
    assert!(
        python.exists(),
        "Helm's engine is missing: run `bash scripts/setup-helm.sh`"
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle/helm_cluster.py");
    let out = std::process::Command::new(python)
        .arg(script)
        .arg(env.cp.kubeconfig())
        .arg(&env.ns)
        .arg(command)
        .arg(args.to_string())
        .output()
        .expect("run the oracle");
    assert!(
        out.status.success(),
        "helm {command} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json from the oracle")
}
