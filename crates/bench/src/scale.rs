//! j. A new object during a restart's re-list (issue 37): N converged objects, bosun
//! restarted, and — as soon as its caches are synced, while the re-list's backlog is being
//! worked — one new object created; the figure is the time from its create to its status
//! written by bosun, for the coded BookStore, the Helm and the Ansible flavours. The note says
//! how much of the backlog was done when the new object was, read from bosun's own metrics:
//! a figure taken after the backlog drained shows nothing about the queue.
//!
//! Run only when named: `--only scale` (N from `--n`), or one flavour: `--only scale-coded`,
//! `scale-helm`, `scale-ansible`.
use std::time::{Duration, Instant};

use bosun_bench::ansible_flavour::{self as ansible, BenchConfig};
use bosun_bench::measure::{install_crd, wait_watched, Operator};
use bosun_bookstore::BookStore;
use bosun_testenv::{ControlPlane, Options};
use kube::api::{Api, ListParams, PostParams};
use kube::core::{ApiResource, DynamicObject};
use kube::{Client, CustomResourceExt};
use serde_json::{json, Value};

use crate::{Args, Row};

fn repo() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[derive(Clone, Copy)]
enum Flavour {
    Coded,
    Helm,
    Ansible,
}

impl Flavour {
    fn name(self) -> &'static str {
        match self {
            Flavour::Coded => "coded BookStore",
            Flavour::Helm => "helm",
            Flavour::Ansible => "ansible",
        }
    }
}

/// What a flavour's run needs: bosun's flags, the custom resource's kind, and whether an
/// object's status says bosun reconciled it.
struct Setup {
    flags: Vec<String>,
    resource: ApiResource,
    done: fn(&DynamicObject) -> bool,
}

/// The status names the object's current generation (the coded BookStore).
fn observed(o: &DynamicObject) -> bool {
    let generation = o.metadata.generation;
    generation.is_some() && o.data["status"]["observedGeneration"].as_i64() == generation
}

/// Installed: the Deployed condition true (the Helm flavour).
fn deployed(o: &DynamicObject) -> bool {
    o.data["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == "Deployed" && c["status"] == "True")
    })
}

async fn ensure_namespace(client: &Client, name: &str) -> anyhow::Result<()> {
    let ns: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(json!({"metadata": {"name": name}}))?;
    match Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The sample's spec with its app Service a ClusterIP one. The sample asks for a LoadBalancer,
/// which takes a node port from the API server's range (30000-32767 by default: 2,768 ports):
/// release 2,769 and every later one fail to install ("failed to allocate a nodePort: range is
/// full"), so at N = 10,000 the flavour never converged (issue 37's finding). What the case
/// measures is the queue, not the port allocator.
fn helm_spec() -> anyhow::Result<Value> {
    let mut spec = crate::helm::sample_spec()?;
    let kind = spec
        .pointer_mut("/service/app/type")
        .ok_or_else(|| anyhow::anyhow!("the Helm sample has no service.app.type"))?;
    *kind = json!("ClusterIP");
    Ok(spec)
}

/// N custom resources of the flavour, as the flavour's own cases create them.
async fn populate(
    client: &Client,
    args: &Args,
    flavour: Flavour,
    n: usize,
) -> anyhow::Result<Setup> {
    Ok(match flavour {
        Flavour::Coded => {
            ensure_namespace(client, crate::NS).await?;
            install_crd(client, &BookStore::crd()).await?;
            let ar = ApiResource::erase::<BookStore>(&());
            crate::create_many(client, &ar, n, args.concurrency, crate::bookstore).await?;
            Setup {
                flags: vec!["--operators=bookstore".into()],
                resource: ar,
                done: observed,
            }
        }
        Flavour::Helm => {
            crate::helm::populate_spec(client, n, args.concurrency, helm_spec()?).await?;
            Setup {
                flags: vec![format!(
                    "--watches={}",
                    repo()
                        .join("examples/helm-bookstore/watches.yaml")
                        .display()
                )],
                resource: crate::helm::resource(),
                done: deployed,
            }
        }
        Flavour::Ansible => {
            let mut cfg = BenchConfig::seed(&repo(), n);
            cfg.concurrency = u16::try_from(args.concurrency).unwrap_or(u16::MAX);
            let ops = ansible::operators(&cfg)?;
            let (ar, _) = ansible::populate(client, &cfg, &ops).await?;
            Setup {
                flags: vec![
                    format!("--watches={}", cfg.watches.display()),
                    "--ansible-engine=native".into(),
                ],
                resource: ar,
                done: ansible::successful,
            }
        }
    })
}

/// A copy of one existing object (its kind and spec) named for namespace `ns`.
async fn new_object(client: &Client, ar: &ApiResource, ns: &str) -> anyhow::Result<DynamicObject> {
    let any = Api::<DynamicObject>::all_with(client.clone(), ar)
        .list(&ListParams::default().limit(1))
        .await?
        .items
        .into_iter()
        .next()
        .ok_or_else(|| anyhow::anyhow!("no {} to copy", ar.kind))?;
    let name = any.metadata.name.clone().unwrap_or_default();
    let spec = any.data.get("spec").cloned().unwrap_or(Value::Null);
    Ok(serde_json::from_value(json!({
        "apiVersion": ar.api_version, "kind": ar.kind,
        "metadata": {"name": name, "namespace": ns}, "spec": spec,
    }))?)
}

/// One flavour: converge N, restart, create one more as soon as the caches are synced.
async fn case(args: &Args, flavour: Flavour, n: usize) -> anyhow::Result<Row> {
    let cp = ControlPlane::start(Options::default()).await?;
    let client = cp.client().await?;
    let setup = populate(&client, args, flavour, n).await?;
    let log = format!("scale-{}", flavour.name().replace(' ', "-"));
    let op = Operator::bosun_with(
        &args.bosun,
        cp.kubeconfig(),
        &setup.flags,
        &log,
        args.concurrency,
    )
    .await?;
    op.wait_ready().await;
    let all = Api::<DynamicObject>::all_with(client.clone(), &setup.resource);
    wait_watched(all, n, Duration::from_secs(3600), setup.done).await?;
    op.stop().await;

    // The new object's namespace exists before the restart: only the object is timed.
    let new_ns = "bench-scale-new";
    ensure_namespace(&client, new_ns).await?;
    let fresh = new_object(&client, &setup.resource, new_ns).await?;
    let op = Operator::bosun_with(
        &args.bosun,
        cp.kubeconfig(),
        &setup.flags,
        &log,
        args.concurrency,
    )
    .await?;
    let ready = op.wait_ready().await;
    let api = Api::<DynamicObject>::namespaced_with(client.clone(), new_ns, &setup.resource);
    let t0 = Instant::now();
    api.create(&PostParams::default(), &fresh).await?;
    wait_watched(api, 1, Duration::from_secs(600), setup.done).await?;
    let latency = t0.elapsed().as_secs_f64();
    let reconciled = op
        .metric("controller_runtime_reconcile_total{")
        .await
        .unwrap_or(-1.0);
    let backlog = op.metric("workqueue_depth{").await.unwrap_or(-1.0);
    op.wait_idle(Duration::from_secs(3)).await;
    let drained = op.uptime() - ready;
    op.stop().await;
    Ok(Row {
        case: format!("new object during re-list ({})", flavour.name()),
        n,
        seconds: latency,
        note: format!(
            "create → status by bosun, created once caches synced ({ready:.2} s after start); \
             when it was reconciled: {reconciled:.0} reconciles done since the restart, \
             {backlog:.0} keys still queued; re-list idle {drained:.2} s after caches synced; \
             concurrency {}",
            args.concurrency
        ),
        ..Default::default()
    })
}

/// The flavours `--only` names (`scale-coded`, `scale-helm`, `scale-ansible`), all three for
/// `scale`.
fn flavours(args: &Args) -> Vec<Flavour> {
    let all = [Flavour::Coded, Flavour::Helm, Flavour::Ansible];
    if args.only.iter().any(|o| o == "scale") {
        return all.to_vec();
    }
    all.into_iter()
        .filter(|f| {
            let key = match f {
                Flavour::Coded => "scale-coded",
                Flavour::Helm => "scale-helm",
                Flavour::Ansible => "scale-ansible",
            };
            args.only.iter().any(|o| o == key)
        })
        .collect()
}

/// Whether `--only` names the case or one of its flavours.
pub fn named(args: &Args) -> bool {
    !flavours(args).is_empty()
}

/// The flavours `--only` names at N.
pub async fn case_scale(args: &Args, n: usize) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    for flavour in flavours(args) {
        eprintln!("[bench]   {}", flavour.name());
        let row = case(args, flavour, n).await?;
        eprintln!("[bench]   {:.3} s: {}", row.seconds, row.note);
        rows.push(row);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bosun_helm::render::{Chart, RenderOptions};

    /// Every Service of the case's releases is a ClusterIP one: a LoadBalancer or NodePort
    /// Service takes a node port, and the API server has 2,768 of them.
    #[test]
    fn helm_releases_take_no_node_port() {
        let chart = Chart::load(&repo().join("examples/helm-bookstore/helm-charts/book-store"))
            .expect("the sample chart loads");
        let mut opts = RenderOptions::new("bookstore-sample", "bench-h-0");
        opts.values = bosun_helm::value::Data::from(&helm_spec().expect("the sample's spec"));
        let out = chart.render(&opts).expect("the sample chart renders");
        let mut types = Vec::new();
        for (path, text) in out.manifests() {
            let json = bosun_yaml::goyaml::yaml_to_json(text).expect("rendered YAML");
            let o: Value = serde_json::from_str(&json).expect("rendered JSON");
            if o["kind"] == "Service" {
                types.push((path.clone(), o["spec"]["type"].clone()));
            }
        }
        assert_eq!(types.len(), 2, "the chart renders two Services: {types:?}");
        for (path, kind) in &types {
            assert_eq!(kind, "ClusterIP", "{path}");
        }
    }
}
