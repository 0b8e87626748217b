//! e. The Helm flavour: `bosun run --watches` with seed 000's book-store chart, N custom
//! resources (one per namespace: the seed chart's object names are fixed), against the raw
//! write floor of the same applies; restart writes; steady RSS; CPU while idle.
//! f. Render times of bosun's Helm engine against Helm's own (helm-python-sdk), through
//! `scripts/bench-helm-render.sh`.
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bosun_helm::render::manifest::sort_manifests;
use bosun_helm::render::{Chart, RenderOptions};
use bosun_helm::value::Data;
use bosun_testenv::{ControlPlane, Options};
use futures::{stream, StreamExt, TryStreamExt};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::Client;
use serde_json::{json, Value};

use crate::{Args, Row};
use bosun_bench::measure::{install_crd, wait_watched};
use bosun_bench::measure::{mutating, reads, server_cpu, Counts, Operator};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn watches() -> PathBuf {
    repo().join("examples/helm-bookstore/watches.yaml")
}

fn ns(i: usize) -> String {
    format!("bench-h-{i}")
}

pub(crate) fn sample_spec() -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(
        repo().join("examples/helm-bookstore/config/samples/charts_v1alpha1_bookstore.yaml"),
    )?;
    let v: Value = serde_json::from_str(&bosun_yaml::goyaml::yaml_to_json(&text)?)?;
    Ok(v["spec"].clone())
}

pub(crate) fn resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("charts.example.com", "v1alpha1", "BookStore"),
        "bookstores",
    )
}

pub(crate) const RESOURCES: [&str; 4] = ["deployments", "services", "secrets", "bookstores"];

/// N namespaces, the CRD, and one custom resource in each.
pub(crate) async fn populate(client: &Client, n: usize, conc: usize) -> anyhow::Result<()> {
    populate_spec(client, n, conc, sample_spec()?).await
}

/// [`populate`] with the custom resources' spec given.
pub(crate) async fn populate_spec(
    client: &Client,
    n: usize,
    conc: usize,
    spec: Value,
) -> anyhow::Result<()> {
    let file = bosun_watches::WatchesFile::load(&watches())?;
    let flavor = bosun_helm_operator::HelmFlavor::load(&file.entries[0], &Default::default())?;
    use bosun_watches::Flavor;
    install_crd(client, &flavor.crd()).await?;
    stream::iter(0..n)
        .map(|i| {
            let client = client.clone();
            let spec = spec.clone();
            async move {
                let nsobj: k8s_openapi::api::core::v1::Namespace =
                    serde_json::from_value(json!({"metadata": {"name": ns(i)}}))?;
                Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
                    .create(&PostParams::default(), &nsobj)
                    .await?;
                let cr: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": "charts.example.com/v1alpha1", "kind": "BookStore",
                    "metadata": {"name": "bookstore-sample", "namespace": ns(i)}, "spec": spec
                }))?;
                Api::<DynamicObject>::namespaced_with(client, &ns(i), &resource())
                    .create(&PostParams::default(), &cr)
                    .await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(conc)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// Installed: revision 1 deployed and the Deployed condition true.
fn is_deployed(o: &DynamicObject) -> bool {
    o.data["status"]["deployedRelease"]["revision"] == 1
        && o.data["status"]["conditions"].as_array().is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Deployed" && c["status"] == "True")
        })
}

pub async fn case_helm(args: &Args, n: usize) -> anyhow::Result<Vec<Row>> {
    let cp = ControlPlane::start(Options::default()).await?;
    let client = cp.client().await?;
    populate(&client, n, args.concurrency).await?;
    let extra = vec![format!("--watches={}", watches().display())];
    let before = Counts::read(&cp, &client).await?;
    let server0 = server_cpu(&cp);
    let t0 = Instant::now();
    let op = Operator::bosun_with(
        &args.bosun,
        cp.kubeconfig(),
        &extra,
        "helm",
        args.concurrency,
    )
    .await?;
    let ready_after = op.wait_ready().await;
    let crs = Api::<DynamicObject>::all_with(client.clone(), &resource());
    wait_watched(crs, n, Duration::from_secs(1200), is_deployed).await?;
    let from_start = t0.elapsed().as_secs_f64();
    let seconds = from_start - ready_after;
    let server_s = server_cpu(&cp) - server0;
    let after = Counts::read(&cp, &client).await?;
    let converge = Row {
        ratio: None,
        case: "helm chart converge (bosun)".into(),
        n,
        seconds,
        peak_rss_mb: op.peak_rss_mb(),
        cpu_seconds: op.cpu_seconds(),
        writes: mutating(&before, &after, &RESOURCES),
        note: format!(
            "seed book-store chart, one CR per namespace; from caches synced; {from_start:.2} s \
             from start; reads: {}; API server + etcd CPU from start {server_s:.2} s",
            reads(&before, &after)
        ),
    };
    let (steady, restart) =
        crate::steady::steady_then_restart(op, "helm", &extra, args, &cp, &client, n, &RESOURCES)
            .await?;
    drop(cp);

    // The floor: the chart's objects and a status per CR, server-side applied by a bare client.
    let cp = ControlPlane::start(Options::default()).await?;
    let client = cp.client().await?;
    populate(&client, n, args.concurrency).await?;
    let chart = Chart::load(&repo().join("examples/helm-bookstore/helm-charts/book-store"))?;
    let mut opts = RenderOptions::new("bookstore-sample", "x");
    opts.values = Data::from_json_k8s(&sample_spec()?.to_string())?;
    let mut writes: Vec<(String, ApiResource, String, Value, bool)> = Vec::new();
    for i in 0..n {
        opts.namespace = ns(i);
        let rendered = chart.render(&opts)?;
        let (manifests, _) = sort_manifests(&rendered)?;
        for m in manifests {
            let v: Value = serde_json::from_str(&bosun_yaml::goyaml::yaml_to_json(&m.content)?)?;
            let gvk = bosun_helm_operator::objects::gvk_of(&m.api_version, &m.kind);
            let (plural, _) = bosun_helm_operator::rbac::resource_of(&gvk);
            writes.push((
                ns(i),
                ApiResource::from_gvk_with_plural(&gvk, &plural),
                m.name.clone(),
                v,
                false,
            ));
        }
        let status = json!({"apiVersion": "charts.example.com/v1alpha1", "kind": "BookStore", "status": {"deployedRelease": {"name": "bookstore-sample", "revision": 1}}});
        writes.push((ns(i), resource(), "bookstore-sample".into(), status, true));
    }
    let before = Counts::read(&cp, &client).await?;
    let server0 = server_cpu(&cp);
    let t0 = Instant::now();
    let pp = PatchParams::apply("bench-floor").force();
    stream::iter(writes)
        .map(|(ns, ar, name, body, status)| {
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
            let pp = pp.clone();
            async move {
                if status {
                    api.patch_status(&name, &pp, &Patch::Apply(&body))
                        .await
                        .map(|_| ())
                } else {
                    api.patch(&name, &pp, &Patch::Apply(&body))
                        .await
                        .map(|_| ())
                }
            }
        })
        .buffer_unordered(args.concurrency)
        .try_collect::<Vec<()>>()
        .await?;
    let floor_s = t0.elapsed().as_secs_f64();
    let floor_server_s = server_cpu(&cp) - server0;
    let after = Counts::read(&cp, &client).await?;
    let floor = Row {
        case: "helm raw write floor".into(),
        n,
        seconds: floor_s,
        writes: mutating(&before, &after, &RESOURCES),
        ratio: Some(seconds / floor_s),
        note: format!(
            "the same object applies + a status each; bosun/floor = {:.2}; reads: {}; \
             API server + etcd CPU {floor_server_s:.2} s",
            seconds / floor_s,
            reads(&before, &after)
        ),
        ..Default::default()
    };
    Ok(vec![converge, floor, restart, steady])
}

/// f. Render times: bosun's engine and Helm's, per chart, through the repo's script.
pub fn case_render(bosun: &Path, quick: bool) -> anyhow::Result<Vec<Row>> {
    let script = repo().join("scripts/bench-helm-render.sh");
    let n = if quick { "20" } else { "100" };
    let out = std::process::Command::new("bash")
        .arg(&script)
        .arg(n)
        .env("BOSUN_BIN", bosun)
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "{}: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    Ok(vec![Row {
        case: "helm render: bosun vs Helm's engine".into(),
        note: text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect::<Vec<_>>()
            .join(" | "),
        ..Default::default()
    }])
}
