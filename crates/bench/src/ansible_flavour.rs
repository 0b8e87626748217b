//! The benchmark of the Ansible flavour, for `bench/run`: N seed BookStores (the sample CR,
//! one per namespace — the seed role names its objects without the CR's name) run to
//! convergence by the operators of a watches file, in this process, against the cluster of
//! a kube config. Reports
//! * the time to convergence (every CR `Successful`) and the writes it took,
//! * the raw write floor: the same writes (the objects the role created, and the status)
//!   sent by a bare client at the same concurrency,
//! * the operator's CPU time (this process's, from /proc/self/stat, start to convergence: the
//!   harness's share is a watch of the CRs) per reconcile and per CR, and its RSS,
//! * the writes of a restart over the converged CRs (0 expected).
//!
//! Figures only: nothing here asserts a timing.
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bosun_runtime::manager::{Manager, ManagerConfig, Operator, Scope};
use bosun_watches::WatchesFile;
use futures::{stream, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::{Client, Resource, ResourceExt};
use serde_json::{json, Value};
use tokio::sync::oneshot;

use bosun_ansible_operator::writes::Writes;
use bosun_ansible_operator::{AnsibleOptions, LoadError};

#[derive(Clone, Debug)]
pub struct BenchConfig {
    pub n: usize,
    /// Reconciles at once (the operator's), and CRs at once for the floor.
    pub concurrency: u16,
    /// The seed's watches file and sample CR.
    pub watches: PathBuf,
    pub sample: PathBuf,
    /// Namespaces are `<prefix>-<i>` (and `<prefix>-floor-<i>` for the floor).
    pub prefix: String,
    /// Unrelated headless Services created beside the CRs first (spread over their
    /// namespaces): what the label-less child watches cost when the namespaces hold more
    /// than the operator's own objects.
    pub foreign: usize,
    /// Delete the namespaces afterwards.
    pub cleanup: bool,
    /// Longest wait for convergence.
    pub timeout: Duration,
}

impl BenchConfig {
    pub fn seed(repo: &std::path::Path, n: usize) -> BenchConfig {
        let ex = repo.join("examples/ansible-bookstore");
        BenchConfig {
            n,
            concurrency: 16,
            watches: ex.join("watches.yaml"),
            sample: ex.join("config/samples/charts_v1alpha1_bookstore.yaml"),
            prefix: "bench-ansible".into(),
            foreign: 0,
            cleanup: false,
            timeout: Duration::from_secs(1800),
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct BenchReport {
    pub n: usize,
    /// From the operator's caches synced to the last CR `Successful`.
    pub convergence_secs: f64,
    /// From the operator's start to its caches synced.
    pub ready_secs: f64,
    pub writes: u64,
    pub floor_secs: f64,
    pub floor_writes: u64,
    pub reconciles: f64,
    pub cpu_secs: f64,
    pub cpu_ms_per_reconcile: f64,
    pub cpu_ms_per_cr: f64,
    /// VmRSS of this process once converged and idle, after returning freed memory to the
    /// system (glibc's `malloc_trim`, as the `bosun` binary does when idle).
    pub rss_mb: f64,
    /// VmRSS the same way just before the operator started (the harness after set-up):
    /// `rss_mb - base_rss_mb` is the operator's share.
    pub base_rss_mb: f64,
    pub peak_rss_mb: f64,
    /// Live heap bytes (MB) once converged and idle, and before the operator started: 0
    /// unless the process counts its allocations (`bosun_runtime::heap::Counting`, as the
    /// `bench` example does).
    pub heap_mb: f64,
    pub base_heap_mb: f64,
    pub restart_writes: u64,
    pub restart_reconciles: f64,
}

impl std::fmt::Display for BenchReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "ansible seed BookStores: n={}", self.n)?;
        writeln!(
            f,
            "  convergence {:.2} s (after {:.2} s to caches synced), {} writes; floor {:.2} s, {} writes; ratio {:.2}",
            self.convergence_secs,
            self.ready_secs,
            self.writes,
            self.floor_secs,
            self.floor_writes,
            self.convergence_secs / self.floor_secs.max(1e-9)
        )?;
        writeln!(
            f,
            "  operator cpu {:.2} s: {:.2} ms/reconcile ({} reconciles), {:.2} ms/CR",
            self.cpu_secs, self.cpu_ms_per_reconcile, self.reconciles, self.cpu_ms_per_cr
        )?;
        writeln!(
            f,
            "  rss {:.1} MB, {:.1} MB before the operator started: operator {:.1} MB (peak {:.1} MB)",
            self.rss_mb,
            self.base_rss_mb,
            self.rss_mb - self.base_rss_mb,
            self.peak_rss_mb
        )?;
        if self.heap_mb > 0.0 {
            writeln!(
                f,
                "  live heap {:.1} MB, {:.1} MB before: operator {:.1} MB ({:.1} KB per CR)",
                self.heap_mb,
                self.base_heap_mb,
                self.heap_mb - self.base_heap_mb,
                (self.heap_mb - self.base_heap_mb) * 1024.0 / self.n.max(1) as f64
            )?;
        }
        write!(
            f,
            "  restart over converged CRs: {} writes, {} reconciles",
            self.restart_writes, self.restart_reconciles
        )
    }
}

#[derive(Debug)]
pub enum BenchError {
    Watches(bosun_watches::WatchesError),
    Load(LoadError),
    Kube(kube::Error),
    Setup(String),
}

impl std::fmt::Display for BenchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BenchError::Watches(e) => write!(f, "{e}"),
            BenchError::Load(e) => write!(f, "{e}"),
            BenchError::Kube(e) => write!(f, "kubernetes API: {e}"),
            BenchError::Setup(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for BenchError {}

impl From<bosun_watches::WatchesError> for BenchError {
    fn from(e: bosun_watches::WatchesError) -> Self {
        BenchError::Watches(e)
    }
}

impl From<LoadError> for BenchError {
    fn from(e: LoadError) -> Self {
        BenchError::Load(e)
    }
}

impl From<kube::Error> for BenchError {
    fn from(e: kube::Error) -> Self {
        BenchError::Kube(e)
    }
}

/// This process's CPU time (user + system), in seconds (to the clock tick: the figures are
/// seconds of convergence).
pub fn cpu_seconds() -> f64 {
    crate::measure::proc_cpu_seconds(std::process::id())
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
extern "C" {
    // glibc's; declared here rather than through the libc crate, which this crate does not
    // otherwise need.
    fn malloc_trim(pad: usize) -> i32;
}

/// Returns freed heap memory to the system, where the allocator can.
pub fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of glibc's allocator.
    unsafe {
        malloc_trim(0);
    }
}

fn heap_mb() -> f64 {
    bosun_runtime::heap::live() as f64 / (1024.0 * 1024.0)
}

/// A `/proc/self/status` figure in MB (`VmRSS`, `VmHWM`).
pub fn proc_mb(key: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

struct Running {
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
    metrics: bosun_runtime::metrics::Metrics,
    health: bosun_runtime::http::Health,
}

impl Running {
    fn reconciles(&self) -> f64 {
        let text = self.metrics.encode();
        text.lines()
            .filter(|l| l.starts_with("controller_runtime_reconcile_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

fn start(client: Client, ops: &[Arc<dyn Operator>], concurrency: u16) -> Running {
    let cfg = ManagerConfig {
        scope: Scope::All,
        concurrency,
        ..Default::default()
    };
    let mut m = Manager::new(client, cfg);
    for op in ops {
        m = m.with_operator(op.clone());
    }
    let metrics = m.metrics();
    let health = m.health();
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        if let Err(e) = m
            .run(
                async move {
                    let _ = rx.await;
                },
                |_| {},
            )
            .await
        {
            eprintln!("[bench] the manager stopped: {e}");
        }
    });
    Running {
        stop: tx,
        task,
        metrics,
        health,
    }
}

pub fn operators(cfg: &BenchConfig) -> Result<Vec<Arc<dyn Operator>>, BenchError> {
    let file = WatchesFile::load(&cfg.watches)?;
    let opts = AnsibleOptions {
        watches_dir: cfg.watches.parent().map(PathBuf::from),
        ..Default::default()
    };
    Ok(bosun_ansible_operator::operators(&file.entries, &opts)?
        .into_iter()
        .map(|o| Arc::new(o) as Arc<dyn Operator>)
        .collect())
}

async fn install_crds(client: &Client, ops: &[Arc<dyn Operator>]) -> Result<(), BenchError> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for op in ops {
        for crd in op.crds() {
            let name = crd.name_any();
            crds.patch(
                &name,
                &PatchParams::apply("bosun-bench").force(),
                &Patch::Apply(&crd),
            )
            .await?;
            let established = kube::runtime::wait::await_condition(
                crds.clone(),
                &name,
                kube::runtime::wait::conditions::is_crd_established(),
            );
            tokio::time::timeout(Duration::from_secs(60), established)
                .await
                .map_err(|_| BenchError::Setup(format!("CRD {name} not established")))?
                .map_err(|e| BenchError::Setup(e.to_string()))?;
        }
    }
    Ok(())
}

async fn ensure_namespace(client: &Client, name: &str) -> Result<(), BenchError> {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))
        .map_err(|e| BenchError::Setup(e.to_string()))?;
    match Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn resource(sample: &Value) -> ApiResource {
    let av = sample["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = av.split_once('/').unwrap_or(("", av));
    let kind = sample["kind"].as_str().unwrap_or_default();
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: av.into(),
        kind: kind.into(),
        plural: bosun_watches::kinds::plural(kind),
    }
}

/// The sample CR placed in `ns`, its objects there too.
fn cr_in(sample: &Value, ns: &str) -> Result<DynamicObject, BenchError> {
    let mut cr = sample.clone();
    cr["metadata"]["namespace"] = json!(ns);
    if cr.pointer("/spec/metadata/namespace").is_some() {
        cr["spec"]["metadata"]["namespace"] = json!(ns);
    }
    serde_json::from_value(cr).map_err(|e| BenchError::Setup(e.to_string()))
}

/// Whether a custom resource's last run succeeded (its `Successful` condition is true).
pub fn successful(o: &DynamicObject) -> bool {
    o.data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Successful" && c["status"] == "True")
        })
}

/// The CRD of the seed's entry, then one sample CR per namespace (`<prefix>-<i>`), and the
/// foreign Services: what the operator will find. Returns the CR kind and the namespaces.
pub async fn populate(
    admin: &Client,
    cfg: &BenchConfig,
    ops: &[Arc<dyn Operator>],
) -> Result<(ApiResource, Vec<String>), BenchError> {
    install_crds(admin, ops).await?;
    let admin = admin.clone();
    let text = std::fs::read_to_string(&cfg.sample)
        .map_err(|e| BenchError::Setup(format!("{}: {e}", cfg.sample.display())))?;
    let sample: Value = bosun_yaml::goyaml::yaml_to_json(&text)
        .ok()
        .and_then(|j| serde_json::from_str(&j).ok())
        .ok_or_else(|| BenchError::Setup(format!("{}: not a YAML object", cfg.sample.display())))?;
    let ar = resource(&sample);
    let conc = usize::from(cfg.concurrency.max(1));
    let names: Vec<String> = (0..cfg.n).map(|i| format!("{}-{i}", cfg.prefix)).collect();
    stream::iter(names.clone())
        .map(|ns| {
            let (admin, ar, sample) = (admin.clone(), ar.clone(), sample.clone());
            async move {
                ensure_namespace(&admin, &ns).await?;
                let api: Api<DynamicObject> = Api::namespaced_with(admin, &ns, &ar);
                match api
                    .create(&PostParams::default(), &cr_in(&sample, &ns)?)
                    .await
                {
                    Ok(_) => Ok(()),
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
                    Err(e) => Err(BenchError::from(e)),
                }
            }
        })
        .buffer_unordered(conc)
        .try_collect::<Vec<()>>()
        .await?;
    foreign_services(&admin, &names, cfg.foreign).await?;
    Ok((ar, names))
}

/// Runs the benchmark: `admin` sets up and checks, the operator's client is built from
/// `config` with its writes counted.
pub async fn run(
    admin: Client,
    config: kube::Config,
    cfg: &BenchConfig,
) -> Result<BenchReport, BenchError> {
    let ops = operators(cfg)?;
    let (ar, names) = populate(&admin, cfg, &ops).await?;

    // Convergence: from the operator's caches synced to the last CR `Successful`, as seen
    // by a watch of the CRs (one event per status write: cheap next to the operator's work).
    let writes = Writes::default();
    let client = writes.client(config.clone())?;
    let all: Api<DynamicObject> = Api::all_with(admin.clone(), &ar);
    let mut seen = std::collections::HashSet::new();
    let mut events = Box::pin(
        kube::runtime::watcher(all, kube::runtime::watcher::Config::default()).applied_objects(),
    );
    trim();
    let base_rss = proc_mb("VmRSS:");
    let base_heap = heap_mb();
    let cpu0 = cpu_seconds();
    let t0 = Instant::now();
    let op = start(client, &ops, cfg.concurrency);
    while op.health.readiness().is_err() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let ready = t0.elapsed().as_secs_f64();
    while seen.len() < cfg.n {
        let next = tokio::time::timeout_at((t0 + cfg.timeout).into(), events.next()).await;
        match next {
            Ok(Some(Ok(o))) => {
                if successful(&o) && o.namespace().is_some_and(|n| names.contains(&n)) {
                    seen.insert(o.namespace().unwrap_or_default());
                }
            }
            Ok(Some(Err(e))) => eprintln!("[bench] watch: {e}"),
            Ok(None) | Err(_) => {
                op.stop().await;
                return Err(BenchError::Setup(format!(
                    "{} of {} converged in {:?}",
                    seen.len(),
                    cfg.n,
                    cfg.timeout
                )));
            }
        }
    }
    drop(events);
    let convergence = t0.elapsed().as_secs_f64() - ready;
    // Let the last triggers settle before counting.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let cpu = cpu_seconds() - cpu0;
    trim();
    let mut report = BenchReport {
        n: cfg.n,
        convergence_secs: convergence,
        ready_secs: ready,
        writes: writes.get(),
        reconciles: op.reconciles(),
        cpu_secs: cpu,
        rss_mb: proc_mb("VmRSS:"),
        base_rss_mb: base_rss,
        peak_rss_mb: proc_mb("VmHWM:"),
        heap_mb: heap_mb(),
        base_heap_mb: base_heap,
        ..Default::default()
    };
    report.cpu_ms_per_reconcile = report.cpu_secs * 1e3 / report.reconciles.max(1.0);
    report.cpu_ms_per_cr = report.cpu_secs * 1e3 / cfg.n.max(1) as f64;
    op.stop().await;

    // Restart over the converged CRs.
    let restart = Writes::default();
    let op = start(restart.client(config.clone())?, &ops, cfg.concurrency);
    let t = Instant::now();
    let mut last = (0.0, Instant::now());
    while t.elapsed() < cfg.timeout {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let r = op.reconciles();
        if r != last.0 {
            last = (r, Instant::now());
        } else if r >= cfg.n as f64 && last.1.elapsed() > Duration::from_secs(3) {
            break;
        }
    }
    report.restart_writes = restart.get();
    report.restart_reconciles = op.reconciles();
    op.stop().await;

    let (secs, n) = floor(&admin, config, cfg, &ar, &names).await?;
    report.floor_secs = secs;
    report.floor_writes = n;
    if cfg.cleanup {
        for ns in names.iter().cloned().chain(
            names
                .iter()
                .map(|n| n.replacen(&cfg.prefix, &format!("{}-floor", cfg.prefix), 1)),
        ) {
            let _ = Api::<Namespace>::all(admin.clone())
                .delete(&ns, &Default::default())
                .await;
        }
    }
    Ok(report)
}

/// Headless Services with no owner, spread over the namespaces.
async fn foreign_services(admin: &Client, names: &[String], n: usize) -> Result<(), BenchError> {
    if names.is_empty() {
        return Ok(());
    }
    stream::iter(0..n)
        .map(|i| {
            let ns = names[i % names.len()].clone();
            let admin = admin.clone();
            async move {
                let svc = json!({"apiVersion": "v1", "kind": "Service",
                    "metadata": {"name": format!("foreign-{i}"), "namespace": ns, "labels": {"app": "foreign"}},
                    "spec": {"clusterIP": "None", "selector": {"app": "foreign"}, "ports": [{"port": 80}]}});
                let api: Api<DynamicObject> = Api::namespaced_with(
                    admin,
                    &ns,
                    &ApiResource::erase::<k8s_openapi::api::core::v1::Service>(&()),
                );
                let obj: DynamicObject =
                    serde_json::from_value(svc).map_err(|e| BenchError::Setup(e.to_string()))?;
                match api.create(&PostParams::default(), &obj).await {
                    Ok(_) => Ok(()),
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
                    Err(e) => Err(BenchError::from(e)),
                }
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// The raw write floor: for each converged CR, its objects (as the role left them) created
/// afresh in a floor namespace, and its status written — every request independent,
/// `concurrency` at once (as the typed BookStore's floor). Returns the time and the writes.
pub async fn floor(
    admin: &Client,
    config: kube::Config,
    cfg: &BenchConfig,
    ar: &ApiResource,
    names: &[String],
) -> Result<(f64, u64), BenchError> {
    let plan = floor_plan(admin, cfg, ar, names).await?;
    floor_send(plan, config, cfg).await
}

/// What the floor sends, read untimed from the converged custom resources.
pub struct FloorPlan(Vec<(String, ApiResource, Option<DynamicObject>, Value)>);

/// [`floor`]'s untimed half: the floor namespaces and custom resources, and the requests.
pub async fn floor_plan(
    admin: &Client,
    cfg: &BenchConfig,
    ar: &ApiResource,
    names: &[String],
) -> Result<FloorPlan, BenchError> {
    let kinds = [
        ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&()),
        ApiResource::erase::<k8s_openapi::api::core::v1::Service>(&()),
    ];
    // Untimed: what to send.
    let mut plans = Vec::new();
    for ns in names {
        let floor_ns = ns.replacen(&cfg.prefix, &format!("{}-floor", cfg.prefix), 1);
        ensure_namespace(admin, &floor_ns).await?;
        let crs: Api<DynamicObject> = Api::namespaced_with(admin.clone(), ns, ar);
        let Some(cr) = crs
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .next()
        else {
            continue;
        };
        let floor_crs: Api<DynamicObject> = Api::namespaced_with(admin.clone(), &floor_ns, ar);
        let mut copy = cr.clone();
        copy.metadata = kube::api::ObjectMeta {
            name: cr.metadata.name.clone(),
            namespace: Some(floor_ns.clone()),
            ..Default::default()
        };
        let floor_cr = match floor_crs.create(&PostParams::default(), &copy).await {
            Ok(c) => c,
            Err(kube::Error::Api(s)) if s.code == 409 => floor_crs.get(&cr.name_any()).await?,
            Err(e) => return Err(e.into()),
        };
        let mut objects = Vec::new();
        for k in &kinds {
            let api: Api<DynamicObject> = Api::namespaced_with(admin.clone(), ns, k);
            for mut o in api.list(&ListParams::default()).await?.items {
                if o.name_any().starts_with("foreign-") {
                    continue;
                }
                o.metadata = kube::api::ObjectMeta {
                    name: o.metadata.name.clone(),
                    namespace: Some(floor_ns.clone()),
                    labels: o.metadata.labels.clone(),
                    owner_references: floor_cr.controller_owner_ref(ar).map(|mut r| {
                        r.controller = None;
                        r.block_owner_deletion = None;
                        vec![r]
                    }),
                    ..Default::default()
                };
                if let Some(obj) = o.data.as_object_mut() {
                    obj.remove("status");
                    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
                        spec.remove("clusterIP");
                        spec.remove("clusterIPs");
                    }
                }
                objects.push((k.clone(), o));
            }
        }
        plans.push((
            floor_ns,
            floor_cr.name_any(),
            objects,
            cr.data["status"].clone(),
        ));
    }
    let mut requests = Vec::new();
    for (ns, name, objects, status) in plans {
        for (k, o) in objects {
            requests.push((ns.clone(), k, Some(o), Value::Null));
        }
        let patch = json!({"apiVersion": ar.api_version, "kind": ar.kind, "status": status});
        requests.push((ns, ar.clone(), None, json!({"name": name, "patch": patch})));
    }
    Ok(FloorPlan(requests))
}

/// [`floor`]'s timed half: every request of the plan, `concurrency` at once.
pub async fn floor_send(
    plan: FloorPlan,
    config: kube::Config,
    cfg: &BenchConfig,
) -> Result<(f64, u64), BenchError> {
    let requests = plan.0;
    let writes = Writes::default();
    let client = writes.client(config)?;
    let t = Instant::now();
    // Every request at once up to the concurrency, as the typed BookStore's floor does.
    stream::iter(requests)
        .map(|(ns, k, obj, status)| {
            let api = Api::<DynamicObject>::namespaced_with(client.clone(), &ns, &k);
            async move {
                match obj {
                    Some(o) => {
                        api.create(&PostParams::default(), &o).await?;
                    }
                    None => {
                        let name = status["name"].as_str().unwrap_or_default().to_string();
                        let pp = PatchParams::apply("bosun-ansible").force();
                        api.patch_status(&name, &pp, &Patch::Apply(&status["patch"]))
                            .await?;
                    }
                }
                Ok::<(), BenchError>(())
            }
        })
        .buffer_unordered(usize::from(cfg.concurrency.max(1)))
        .try_collect::<Vec<()>>()
        .await?;
    Ok((t.elapsed().as_secs_f64(), writes.get()))
}
