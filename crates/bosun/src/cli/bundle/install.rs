//! `bosun bundle run` and `bosun bundle cleanup`: a bundle installed onto the current
//! cluster without OLM — operator-sdk's `run bundle` / `cleanup` for testing a bundle end to
//! end (the test control plane has no OLM and no registry to pull a bundle image from).
//!
//! `run` applies what OLM would make ([`bosun_scaffold::bundle::install::plan`]) and waits
//! until the CSV's Deployments are available. Before anything else it writes a record (the
//! ConfigMap `<package>-bundle-run` in the install namespace) of every object it is about to
//! apply, so `cleanup <package>` removes exactly those — even after a run that failed half
//! way — and nothing else. An object of the plan that already exists without this bundle's
//! label (installed another way, or by another bundle) is refused before anything is written.
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context};
use bosun_scaffold::bundle::install::{self, InstallMode, LABEL};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, DynamicObject, ObjectMeta, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{self, ApiResource, Scope};
use kube::Client;
use serde_json::{json, Value};

const FIELD_MANAGER: &str = "bosun-bundle-run";
const RECORD_KEY: &str = "objects";

/// The record's name for `package`.
pub fn record_name(package: &str) -> String {
    format!("{package}-bundle-run")
}

/// One object as recorded: enough to find and delete it.
fn reference(o: &Value) -> Value {
    json!({
        "apiVersion": o["apiVersion"],
        "kind": o["kind"],
        "namespace": o["metadata"]["namespace"],
        "name": o["metadata"]["name"],
    })
}

async fn resource(client: &Client, r: &Value) -> anyhow::Result<(ApiResource, bool)> {
    let api_version = r["apiVersion"].as_str().unwrap_or_default();
    let kind = r["kind"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (ar, caps) = discovery::pinned_kind(client, &gvk)
        .await
        .with_context(|| format!("the cluster does not serve {api_version} {kind}"))?;
    Ok((ar, caps.scope == Scope::Namespaced))
}

async fn api_for(client: &Client, r: &Value) -> anyhow::Result<Api<DynamicObject>> {
    let (ar, namespaced) = resource(client, r).await?;
    Ok(match (namespaced, r["namespace"].as_str()) {
        (true, Some(ns)) => Api::namespaced_with(client.clone(), ns, &ar),
        _ => Api::all_with(client.clone(), &ar),
    })
}

fn describe(r: &Value) -> String {
    let name = r["name"].as_str().unwrap_or_default();
    match r["namespace"].as_str() {
        Some(ns) => format!("{} {ns}/{name}", r["kind"].as_str().unwrap_or_default()),
        None => format!("{} {name}", r["kind"].as_str().unwrap_or_default()),
    }
}

/// The package of the bundle in `dir`: metadata/annotations.yaml's, else the CSV name's
/// part before `.v`.
fn package(bundle: &bosun_scaffold::validate::Bundle, csv: &str) -> String {
    bundle
        .annotations
        .as_ref()
        .and_then(|a| {
            a["annotations"]["operators.operatorframework.io.bundle.package.v1"]
                .as_str()
                .map(str::to_string)
        })
        .unwrap_or_else(|| csv.split(".v").next().unwrap_or(csv).to_string())
}

/// Installs the bundle in `dir` into `namespace` and waits up to `timeout` for its
/// Deployments. Returns the package (what `cleanup` takes).
pub async fn run(
    client: &Client,
    dir: &Path,
    namespace: &str,
    mode: Option<&str>,
    timeout: Duration,
) -> anyhow::Result<String> {
    let (bundle, findings) = bosun_scaffold::validate::load(dir);
    if let Some(f) = findings.first() {
        bail!("{}: {}: {}", dir.display(), f.file, f.message);
    }
    let mode = match mode {
        Some(m) => InstallMode::parse(m).map_err(anyhow::Error::msg)?,
        // operator-sdk's choice: AllNamespaces when the CSV supports it, else OwnNamespace.
        None => {
            let all = install::plan(&bundle, namespace, &InstallMode::AllNamespaces);
            if all.is_ok() {
                InstallMode::AllNamespaces
            } else {
                InstallMode::OwnNamespace
            }
        }
    };
    let mut plan = install::plan(&bundle, namespace, &mode).map_err(anyhow::Error::msg)?;
    let package = package(&bundle, &plan.csv);
    // A namespaced kind the plan did not place goes into the install namespace, as OLM does.
    for o in &mut plan.objects {
        if o["metadata"]["namespace"].is_null() && resource(client, &reference(o)).await?.1 {
            o["metadata"]["namespace"] = json!(namespace);
        }
    }
    let refs: Vec<Value> = plan.objects.iter().map(reference).collect();
    let mut taken = Vec::new();
    for r in &refs {
        let api = api_for(client, r).await?;
        let name = r["name"].as_str().unwrap_or_default();
        if let Some(found) = api.get_opt(name).await? {
            let mine = found
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL))
                .is_some_and(|v| *v == plan.csv);
            if !mine {
                taken.push(describe(r));
            }
        }
    }
    if !taken.is_empty() {
        bail!(
            "not installed: these exist already and are not {}'s: {} (installed another way? \
             remove them, or install into another namespace)",
            plan.csv,
            taken.join(", ")
        );
    }
    let records = Api::<ConfigMap>::namespaced(client.clone(), namespace);
    let record = ConfigMap {
        metadata: ObjectMeta {
            name: Some(record_name(&package)),
            labels: Some([(LABEL.to_string(), plan.csv.clone())].into()),
            ..Default::default()
        },
        data: Some([(RECORD_KEY.to_string(), serde_json::to_string(&refs)?)].into()),
        ..Default::default()
    };
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    records
        .patch(&record_name(&package), &pp, &Patch::Apply(&record))
        .await
        .context("writing the install record")?;
    for (o, r) in plan.objects.iter().zip(&refs) {
        let api = api_for(client, r).await?;
        let name = r["name"].as_str().unwrap_or_default();
        api.patch(name, &pp, &Patch::Apply(o))
            .await
            .with_context(|| format!("applying {}", describe(r)))?;
        eprintln!("applied {}", describe(r));
    }
    for (ns, name) in &plan.deployments {
        wait_available(client, ns, name, timeout).await?;
        eprintln!("deployment {ns}/{name} is available");
    }
    Ok(package)
}

async fn wait_available(
    client: &Client,
    ns: &str,
    name: &str,
    timeout: Duration,
) -> anyhow::Result<()> {
    let api = Api::<Deployment>::namespaced(client.clone(), ns);
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let d = api.get(name).await?;
        let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        let status = d.status.clone().unwrap_or_default();
        let current = status.observed_generation >= d.metadata.generation;
        if current && status.available_replicas.unwrap_or(0) >= want {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            let conditions: Vec<String> = status
                .conditions
                .unwrap_or_default()
                .into_iter()
                .map(|c| format!("{}={} {}", c.type_, c.status, c.message.unwrap_or_default()))
                .collect();
            bail!(
                "deployment {ns}/{name} not available after {timeout:?} ({} of {want} \
                 replicas available; {}); `bosun bundle cleanup` removes what was applied",
                status.available_replicas.unwrap_or(0),
                conditions.join("; ")
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Removes what `run` recorded for `package` in `namespace`, newest first, each waited for
/// until gone (a CRD's deletion removes its objects first), then the record.
pub async fn cleanup(
    client: &Client,
    package: &str,
    namespace: &str,
    timeout: Duration,
) -> anyhow::Result<usize> {
    let records = Api::<ConfigMap>::namespaced(client.clone(), namespace);
    let name = record_name(package);
    let Some(record) = records.get_opt(&name).await? else {
        bail!("no bundle {package} was installed into {namespace} by bosun bundle run (no ConfigMap {name})");
    };
    let refs: Vec<Value> = record
        .data
        .as_ref()
        .and_then(|d| d.get(RECORD_KEY))
        .map(|s| serde_json::from_str(s))
        .transpose()?
        .unwrap_or_default();
    let mut removed = 0;
    for r in refs.iter().rev() {
        let api = api_for(client, r).await?;
        let n = r["name"].as_str().unwrap_or_default();
        match api.delete(n, &DeleteParams::foreground()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => continue,
            Err(e) => return Err(e).with_context(|| format!("deleting {}", describe(r))),
        }
        let deadline = tokio::time::Instant::now() + timeout;
        while api.get_opt(n).await?.is_some() {
            if tokio::time::Instant::now() >= deadline {
                bail!("{} still exists after {timeout:?}", describe(r));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        removed += 1;
        eprintln!("deleted {}", describe(r));
    }
    records
        .delete(&name, &DeleteParams::default())
        .await
        .context("deleting the install record")?;
    Ok(removed)
}
