//! A tiny operator used to prove the runtime: each `Widget` gets a ConfigMap `<name>-w`
//! holding its value and the identity of the replica that applied it; status mirrors the
//! value. `spec.delayMs` makes a reconcile slow, to observe shutdown behaviour.
#![allow(dead_code)]
pub mod children;
pub mod layers;
pub mod linked;
pub mod replicas;
#[allow(unused_imports)]
pub use bosun_testenv::eventually;
#[allow(unused_imports)]
pub use children::*;
#[allow(unused_imports)]
pub use linked::*;
#[allow(unused_imports)]
pub use replicas::*;
use std::sync::Arc;
use std::time::Duration;

use bosun_runtime::apply::Applier;
use bosun_runtime::cache::{scoped_api, ChildCache};
use bosun_runtime::error::{Categorized, ErrorCategory};
use bosun_runtime::manager::{ControllerContext, Operator, OperatorError};
use bosun_runtime::rbac::Rbac;
use bosun_runtime::status::StatusWriter;
use bosun_runtime::{Primary, Wiring};
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ObjectMeta};
use kube::runtime::controller::Action;
use kube::{Client, CustomResource, CustomResourceExt, Resource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "test.bosun.dev",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct WidgetSpec {
    pub value: String,
    #[serde(default)]
    pub delay_ms: u64,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WidgetStatus {
    pub observed_generation: Option<i64>,
    pub value: String,
}

pub const MANAGER: &str = "bosun-test";
pub const LABEL: &str = "app.kubernetes.io/managed-by=bosun-test";

pub struct WidgetOperator {
    pub identity: String,
}

struct Ctx {
    client: Client,
    applier: Applier,
    status: StatusWriter,
    cms: ChildCache<ConfigMap>,
    identity: String,
}

#[derive(Debug, thiserror::Error)]
pub enum WidgetError {
    #[error("api: {0}")]
    Api(#[from] kube::Error),
}

impl Categorized for WidgetError {
    fn category(&self) -> ErrorCategory {
        ErrorCategory::Api
    }
}

pub fn desired_configmap(w: &Widget, identity: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("{}-w", w.name_any())),
            namespace: w.namespace(),
            labels: Some(
                [(
                    "app.kubernetes.io/managed-by".to_string(),
                    "bosun-test".to_string(),
                )]
                .into(),
            ),
            owner_references: w.controller_owner_ref(&()).map(|o| vec![o]),
            ..Default::default()
        },
        data: Some(
            [
                ("value".to_string(), w.spec.value.clone()),
                ("reconciledBy".to_string(), identity.to_string()),
            ]
            .into(),
        ),
        ..Default::default()
    }
}

async fn reconcile(w: Arc<Widget>, ctx: Arc<Ctx>) -> Result<Action, WidgetError> {
    if w.spec.delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(w.spec.delay_ms)).await;
    }
    let ns = w.namespace().unwrap_or_default();
    let cm = desired_configmap(&w, &ctx.identity);
    apply_child(&ctx.client, &ctx.applier, &ctx.cms, &cm).await?;
    let status = WidgetStatus {
        observed_generation: w.metadata.generation,
        value: w.spec.value.clone(),
    };
    let widgets: Api<Widget> = Api::namespaced(ctx.client.clone(), &ns);
    ctx.status
        .write_if_changed(&widgets, w.as_ref(), w.status.as_ref(), &status)
        .await?;
    Ok(Action::await_change())
}

impl Operator for WidgetOperator {
    fn name(&self) -> &str {
        "widget"
    }

    fn crds(&self) -> Vec<CustomResourceDefinition> {
        vec![Widget::crd()]
    }

    fn rbac(&self) -> Rbac {
        Rbac::default()
    }

    fn run(&self, ctx: ControllerContext) -> BoxFuture<'static, Result<(), OperatorError>> {
        let identity = self.identity.clone();
        Box::pin(async move {
            let client = ctx.client.clone();
            ctx.run_controller(
                |ns| {
                    let (cms, cm_stream) =
                        ChildCache::<ConfigMap>::watch(client.clone(), ns, LABEL, |c| {
                            c.data = None
                        });
                    let primary = widget_primary(&client, ns);
                    let state = Arc::new(Ctx {
                        client: client.clone(),
                        applier: Applier::new(MANAGER),
                        status: StatusWriter::new(MANAGER),
                        cms: cms.clone(),
                        identity: identity.clone(),
                    });
                    Wiring::new(primary, state).owns(cm_stream, cms.synced())
                },
                reconcile,
            )
            .await;
            Ok(())
        })
    }
}

/// An operator of one Widget controller, with no CRD or RBAC of its own: `wire` wires each
/// watched namespace with the operators' client, `reconcile` reconciles.
pub fn widget_controller<W, F, C, E, Fut>(
    name: &'static str,
    wire: W,
    reconcile: F,
) -> Arc<dyn Operator>
where
    W: Fn(&Client, Option<&str>) -> Wiring<Widget, C> + Clone + Send + Sync + 'static,
    F: Fn(Arc<Widget>, Arc<C>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Action, E>> + Send + 'static,
    C: Send + Sync + 'static,
    E: Categorized + std::error::Error + Send + Sync + 'static,
{
    Arc::new(WidgetController {
        name,
        wire,
        reconcile,
        // Names C, E and Fut, which only the bounds of `wire` and `reconcile` tie down.
        types: std::marker::PhantomData::<fn() -> (C, E, Fut)>,
    })
}

struct WidgetController<W, F, T> {
    name: &'static str,
    wire: W,
    reconcile: F,
    types: std::marker::PhantomData<T>,
}

impl<W, F, C, E, Fut> Operator for WidgetController<W, F, fn() -> (C, E, Fut)>
where
    W: Fn(&Client, Option<&str>) -> Wiring<Widget, C> + Clone + Send + Sync + 'static,
    F: Fn(Arc<Widget>, Arc<C>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Action, E>> + Send + 'static,
    C: Send + Sync + 'static,
    E: Categorized + std::error::Error + Send + Sync + 'static,
{
    fn name(&self) -> &str {
        self.name
    }

    fn crds(&self) -> Vec<CustomResourceDefinition> {
        Vec::new()
    }

    fn rbac(&self) -> Rbac {
        Rbac::default()
    }

    fn run(&self, ctx: ControllerContext) -> BoxFuture<'static, Result<(), OperatorError>> {
        let wire = self.wire.clone();
        let reconcile = self.reconcile.clone();
        Box::pin(async move {
            let client = ctx.client.clone();
            ctx.run_controller(|ns| wire(&client, ns), reconcile).await;
            Ok(())
        })
    }
}

/// The service a test's layer wraps in [`fenced_client`]: kube's default stack, bosun's fence
/// above it.
pub type FencedStack = bosun_runtime::fence::FenceService<
    tower::util::BoxService<
        http::Request<kube::client::Body>,
        http::Response<Box<kube::client::DynBody>>,
        tower::BoxError,
    >,
>;

/// A tower layer a test puts on the operators' client, above bosun's fence (an
/// [`layers::Observe`], a [`layers::HeldWatch`], …).
pub trait OverFence: Send + 'static {
    /// The operators' client as `bosun run` builds it, the fence right above the pool, this
    /// layer above the fence.
    fn fenced_client(&self, config: kube::Config, fence: &bosun_runtime::fence::Fence) -> Client;
}

impl<L> OverFence for L
where
    L: tower::Layer<FencedStack> + Send + 'static,
    L::Service: tower::Service<
            http::Request<kube::client::Body>,
            Response = http::Response<Box<kube::client::DynBody>>,
        > + Send
        + 'static,
    <L::Service as tower::Service<http::Request<kube::client::Body>>>::Future: Send + 'static,
    <L::Service as tower::Service<http::Request<kube::client::Body>>>::Error: Into<tower::BoxError>,
{
    fn fenced_client(&self, config: kube::Config, fence: &bosun_runtime::fence::Fence) -> Client {
        kube::client::ClientBuilder::try_from(config)
            .expect("builder")
            .with_layer(&fence.layer())
            .with_layer(self)
            .build()
    }
}

/// The operators' client as `bosun run` builds it, the fence right above the pool, with
/// `layer` above the fence.
pub fn fenced_client(
    config: kube::Config,
    fence: &bosun_runtime::fence::Fence,
    layer: &impl OverFence,
) -> Client {
    layer.fenced_client(config, fence)
}

/// The widgets of `ns` (all, for `None`), as a controller's primary watch.
pub fn widget_primary(client: &Client, ns: Option<&str>) -> Primary<Widget> {
    Primary::watch(scoped_api(client.clone(), ns), (), Default::default())
}

/// Runs `manager` in this process until its stop switch is used (or dropped); returns the
/// switch and the task.
pub fn run_until_stopped(
    manager: bosun_runtime::manager::Manager,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), bosun_runtime::manager::ManagerError>>,
) {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(manager.run(
        async move {
            let _ = stopped.await;
        },
        |_| {},
    ));
    (stop, run)
}

/// Creates the widgets `<prefix>0` … `<prefix>{n-1}` of value `value`, one after the other.
pub async fn create_widgets(widgets: &Api<Widget>, prefix: &str, value: &str, n: usize) {
    let ns = widgets.namespace().expect("a namespaced Api");
    for i in 0..n {
        widgets
            .create(
                &kube::api::PostParams::default(),
                &widget(ns, &format!("{prefix}{i}"), value, 0),
            )
            .await
            .expect("create");
    }
}

/// Creates widgets `<prefix>0`, `<prefix>1`, … as `make` shapes each from its name: at least
/// `n`, and more until the sharder's rendezvous hash puts at least one on each of `members`
/// (with few widgets every one can hash to the same member: with 6 and two members, 1 run in
/// 32). Returns their names, in order.
pub async fn create_widgets_spread(
    widgets: &Api<Widget>,
    n: usize,
    members: &[&str],
    make: impl Fn(String) -> Widget,
    prefix: &str,
) -> Vec<String> {
    let ring: Vec<String> = members.iter().map(|m| m.to_string()).collect();
    let mut on = std::collections::BTreeSet::new();
    let mut names = Vec::new();
    while names.len() < n || on.len() < ring.len() {
        assert!(
            names.len() < 64,
            "64 widgets and still a member of {members:?} without one"
        );
        let name = format!("{prefix}{}", names.len());
        let made = widgets
            .create(&kube::api::PostParams::default(), &make(name.clone()))
            .await
            .expect("create");
        let uid = made.metadata.uid.clone().expect("uid");
        if let Some(m) = bosun_runtime::shard::ring::owner(&uid, &ring) {
            on.insert(m.to_string());
        }
        names.push(name);
    }
    names
}

/// What a test of widgets starts from: the control plane, its admin client, and a namespace
/// of its own.
pub struct WidgetEnv {
    pub cp: &'static bosun_testenv::ControlPlane,
    pub admin: Client,
    pub ns: String,
}

/// The shared control plane with the Widget CRD served, and a new namespace `<prefix>-…`.
pub async fn widget_env(prefix: &str) -> WidgetEnv {
    let cp = bosun_testenv::shared().await.expect("control plane");
    let admin = cp.client().await.expect("client");
    install_crd(&admin).await.expect("crd");
    let ns = bosun_testenv::test_namespace(&admin, prefix)
        .await
        .expect("ns");
    WidgetEnv { cp, admin, ns }
}

/// Installs the Widget CRD and waits until it is served.
pub async fn install_crd(client: &Client) -> anyhow::Result<()> {
    bosun_testenv::kit::install_crds(client, [Widget::crd()]).await?;
    Ok(())
}

pub fn widget(ns: &str, name: &str, value: &str, delay_ms: u64) -> Widget {
    let mut w = Widget::new(
        name,
        WidgetSpec {
            value: value.into(),
            delay_ms,
        },
    );
    w.metadata.namespace = Some(ns.into());
    w
}

/// A minimal HTTP/1.0 GET on loopback: (status code, body).
pub async fn http_get(addr: std::net::SocketAddr, path: &str) -> anyhow::Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .await?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).await?;
    let code = buf
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = buf
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((code, body))
}

/// Applies the child ConfigMap `cm` in its namespace as a coded operator does: created when
/// `cache` does not show it (refused, 409, when it exists unseen), else written only when it
/// drifted.
pub async fn apply_child(
    client: &Client,
    applier: &Applier,
    cache: &ChildCache<ConfigMap>,
    cm: &ConfigMap,
) -> Result<bosun_runtime::apply::Outcome, kube::Error> {
    let ns = cm.namespace().unwrap_or_default();
    applier
        .apply(
            &Api::namespaced(client.clone(), &ns),
            cm,
            cache.meta(&ns, &cm.name_any()).as_ref(),
        )
        .await
}

/// Who reconciled `widget` last: the replica its ConfigMap names.
pub async fn reconciled_by(client: &Client, ns: &str, widget: &str) -> Option<String> {
    configmap_value(client, ns, &format!("{widget}-w"), "reconciledBy").await
}

/// Once `widget`'s ConfigMap names `who` as the replica that reconciled it last.
pub async fn reconciled_by_is(client: &Client, ns: &str, widget: &str, who: &str) -> Option<()> {
    (reconciled_by(client, ns, widget).await.as_deref() == Some(who)).then_some(())
}

pub async fn configmap_value(client: &Client, ns: &str, name: &str, key: &str) -> Option<String> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    api.get_opt(name)
        .await
        .ok()
        .flatten()?
        .data?
        .get(key)
        .cloned()
}

/// The value of one Prometheus series (a line starting with `series`), if present.
pub fn series_value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))?
        .rsplit(' ')
        .next()?
        .parse()
        .ok()
}

/// In the replica process: what [`spawn_replica`] handed it — the client configuration, the
/// namespace, the identity and the address.
pub async fn replica_spec(var: &str) -> (kube::Config, String, String, std::net::SocketAddr) {
    let spec = std::env::var(var).expect("started by its test only");
    // RUST_LOG reaches the replica (it inherits the test's environment). Its log goes to
    // BOSUN_TEST_LOG_DIR/<namespace>-<identity>.log when that is set, else to stderr.
    if std::env::var_os("RUST_LOG").is_some() {
        let parts: Vec<&str> = spec.split('|').collect();
        let name = format!(
            "{}-{}",
            parts.get(1).unwrap_or(&""),
            parts.get(2).unwrap_or(&"")
        );
        let filter = tracing_subscriber::EnvFilter::from_default_env();
        let builder = tracing_subscriber::fmt().with_env_filter(filter);
        let _ = match std::env::var_os("BOSUN_TEST_LOG_DIR") {
            Some(dir) => {
                let file =
                    std::fs::File::create(std::path::Path::new(&dir).join(format!("{name}.log")))
                        .expect("replica log file");
                builder
                    .with_ansi(false)
                    .with_writer(std::sync::Mutex::new(file))
                    .try_init()
            }
            None => builder.with_writer(std::io::stderr).try_init(),
        };
        tracing::info!(replica = %name, "replica started");
    }
    let [kubeconfig, ns, identity, addr]: [&str; 4] = spec
        .split('|')
        .collect::<Vec<_>>()
        .try_into()
        .expect("kubeconfig|ns|identity|addr");
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("config");
    (
        config,
        ns.into(),
        identity.into(),
        addr.parse().expect("addr"),
    )
}

/// Once the readiness probe says the replica stands by (`standby`), or leads (not `standby`).
pub async fn in_role(probe: std::net::SocketAddr, standby: bool) -> Option<()> {
    let (_, body) = http_get(probe, "/readyz").await.ok()?;
    (body.contains("standby") == standby).then_some(())
}

/// A loopback address nothing listens on now.
pub fn free_addr() -> std::net::SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
}

/// Sends `sig` (as kill(1) names it) to `pid`.
pub fn signal(pid: u32, sig: &str) {
    let ok = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("kill")
        .success();
    assert!(ok, "kill {sig} {pid}");
}

/// The holder of the Lease `lease`, once someone holds it.
pub async fn lease_holder(client: &Client, ns: &str, lease: &str) -> Option<String> {
    Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(client.clone(), ns)
        .get_opt(lease)
        .await
        .ok()
        .flatten()?
        .spec?
        .holder_identity
        .filter(|h| !h.is_empty())
}

/// A replica in a process of its own: this test binary started again on the ignored test
/// `test`, handed `kubeconfig|namespace|identity|addr` in the variable `var`, so that the
/// test can stop it whole (SIGSTOP, SIGTERM, `kill -9`) as a pod's node would. The caller
/// sets more on the command (a piped stdout, a variable of its own) and spawns it.
pub fn replica_command(
    test: &str,
    var: &str,
    kubeconfig: &std::path::Path,
    ns: &str,
    identity: &str,
    addr: std::net::SocketAddr,
) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(std::env::current_exe().expect("exe"));
    cmd.args([test, "--exact", "--ignored", "--nocapture"])
        .env(
            var,
            format!("{}|{ns}|{identity}|{addr}", kubeconfig.display()),
        )
        .kill_on_drop(true);
    cmd
}

/// The `writer` of each write of the ConfigMaps `selector` selects, in the order the API
/// server stored the writes; a re-list shows as `(list)`.
#[derive(Clone, Default)]
pub struct Writers(Arc<std::sync::Mutex<Vec<String>>>);

impl Writers {
    pub fn watch(&self, client: &Client, ns: &str, selector: &str) -> tokio::task::JoinHandle<()> {
        use futures::StreamExt;
        use kube::runtime::watcher;
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        let cfg = watcher::Config::default().labels(selector);
        let seen = self.0.clone();
        tokio::spawn(async move {
            let mut events = watcher(api, cfg).boxed();
            while let Some(ev) = events.next().await {
                match ev {
                    Ok(watcher::Event::Apply(cm)) => {
                        let by = cm
                            .data
                            .and_then(|d| d.get("writer").cloned())
                            .unwrap_or_default();
                        seen.lock().expect("lock").push(by);
                    }
                    // A re-list would hide writes: mark it, the test refuses to judge then.
                    Ok(watcher::Event::Init) => seen.lock().expect("lock").push("(list)".into()),
                    _ => {}
                }
            }
        })
    }

    pub fn snapshot(&self) -> Vec<String> {
        self.0.lock().expect("lock").clone()
    }

    pub fn count(&self, who: &str) -> usize {
        self.snapshot().iter().filter(|w| *w == who).count()
    }
}

/// The `resourceVersion` of the first write after which the object `name` of `api` carries
/// `label`, from a watch started now. One API server's versions come from one etcd revision
/// counter, so two objects' writes compare by it.
pub fn first_labelled<K>(
    api: Api<K>,
    name: &str,
    label: &str,
) -> tokio::task::JoinHandle<Option<u64>>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    use futures::StreamExt;
    use kube::runtime::watcher;
    let cfg = watcher::Config::default()
        .labels(label)
        .fields(&format!("metadata.name={name}"));
    tokio::spawn(async move {
        let mut events = watcher(api, cfg).boxed();
        while let Some(ev) = events.next().await {
            if let Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) = ev {
                return o.meta().resource_version.as_deref()?.parse().ok();
            }
        }
        None
    })
}

/// Runs of the same writer: `["(list)", "a", "b"]` for a…a b…b after the first list.
pub fn runs(writers: &[String]) -> Vec<String> {
    let mut runs: Vec<String> = Vec::new();
    for w in writers {
        if runs.last() != Some(w) {
            runs.push(w.clone());
        }
    }
    runs
}

/// The lines a replica process printed to its stdout behind `prefix` (without it), in order.
#[derive(Clone, Default)]
pub struct Report(Arc<std::sync::Mutex<Vec<String>>>);

impl Report {
    /// Reads `child`'s piped stdout until it closes.
    pub fn read(
        &self,
        child: &mut tokio::process::Child,
        prefix: &'static str,
    ) -> tokio::task::JoinHandle<()> {
        use tokio::io::AsyncBufReadExt;
        let out = child.stdout.take().expect("piped stdout");
        let lines = self.0.clone();
        tokio::spawn(async move {
            let mut reader = tokio::io::BufReader::new(out).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                if let Some(l) = line.strip_prefix(prefix) {
                    lines.lock().expect("lock").push(l.to_string());
                }
            }
        })
    }

    pub fn lines(&self) -> Vec<String> {
        self.0.lock().expect("lock").clone()
    }

    /// Where `line` first stands, once it does.
    pub fn position(&self, line: &str) -> Option<usize> {
        self.lines().iter().position(|l| l == line)
    }
}
