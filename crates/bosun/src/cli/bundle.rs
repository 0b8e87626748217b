//! `bosun bundle` and `bosun bundle validate`: an OLM bundle from the install manifests bosun
//! derives (`bosun manifests` for the same operators), and operator-framework's checks on a
//! bundle directory.
use std::path::{Path, PathBuf};

use anyhow::Context;
use bosun_scaffold::bundle::{self, BundleInput};
use bosun_scaffold::files::Stage;
use bosun_scaffold::validate::{self, Level, Options};
use clap::{Args, Subcommand};
use serde::Deserialize;
use serde_json::Value;

use crate::manifests::{self, ManifestArgs, NAME};

mod install;

/// The Kubernetes version bosun's tests run on (the test control plane's kube-apiserver).
const MIN_KUBE_VERSION: &str = "1.20.0";

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BundleArgs {
    #[command(subcommand)]
    pub command: Option<BundleCommand>,
    #[command(flatten)]
    pub generate: GenerateArgs,
}

#[derive(Subcommand, Debug)]
pub enum BundleCommand {
    /// Check a bundle directory as `operator-sdk bundle validate` does; exit 1 on any error.
    Validate(ValidateArgs),
    /// Install a bundle directory onto the current cluster without OLM (operator-sdk's `run
    /// bundle`): its CRDs, the CSV's RBAC and Deployments into --namespace; waits until the
    /// Deployments are available.
    Run(RunBundleArgs),
    /// Remove what `bosun bundle run` installed for a package (operator-sdk's `cleanup`).
    Cleanup(CleanupArgs),
}

#[derive(Args, Debug)]
pub struct RunBundleArgs {
    /// The bundle directory (holding manifests/ and metadata/).
    #[arg(default_value = "bundle")]
    pub dir: PathBuf,
    /// The namespace the operator is installed into (it must exist).
    #[arg(long, short = 'n', default_value = "default")]
    pub namespace: String,
    /// AllNamespaces, OwnNamespace or SingleNamespace=<namespace>. Default: AllNamespaces
    /// when the CSV supports it, else OwnNamespace.
    #[arg(long)]
    pub install_mode: Option<String>,
    /// Seconds to wait for the Deployments to be available.
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
    /// Kubeconfig file (default: in-cluster, KUBECONFIG or ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct CleanupArgs {
    /// The package `bosun bundle run` installed.
    pub package: String,
    #[arg(long, short = 'n', default_value = "default")]
    pub namespace: String,
    /// Seconds to wait for each object to be gone.
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct ValidateArgs {
    /// The bundle directory (holding manifests/ and metadata/).
    #[arg(default_value = "bundle")]
    pub dir: PathBuf,
    /// Optional checks: suite=operatorframework, name=operatorhub (operatorhubv2,
    /// capabilities, categories), name=good-practices, name=alpha-deprecated-apis, and bosun's
    /// name=olmv1 (would OLM v1's operator-controller install it). The
    /// OPERATOR_BUNDLE_CATEGORIES file ({"categories": [...]}) replaces the standard categories.
    #[arg(long)]
    pub select_optional: Vec<String>,
    /// `k8s-version=1.25`: APIs removed by that version are errors, not warnings.
    #[arg(long)]
    pub optional_values: Vec<String>,
}

#[derive(Args, Debug)]
pub struct GenerateArgs {
    /// The bundle's semantic version.
    #[arg(long, default_value = "0.0.1")]
    pub version: String,
    /// Channels (comma-separated). Default: alpha.
    #[arg(long, value_delimiter = ',')]
    pub channels: Vec<String>,
    /// The default channel. Default: the first channel.
    #[arg(long)]
    pub default_channel: Option<String>,
    /// The OLM package. Default: the PROJECT file's projectName beside --watches, else bosun.
    #[arg(long)]
    pub package: Option<String>,
    /// Where bundle/ and bundle.Dockerfile are written.
    #[arg(long, default_value = ".")]
    pub output_dir: PathBuf,
    /// The CSV this version replaces (e.g. bosun.v0.0.1).
    #[arg(long)]
    pub replaces: Option<String>,
    /// `createdAt` (e.g. 2026-01-02T03:04:05Z); omitted when not given, so bundles are
    /// reproducible.
    #[arg(long)]
    pub created_at: Option<String>,
    /// Example custom resources (files or directories of YAML) for `alm-examples`. Default:
    /// config/samples beside --watches.
    #[arg(long)]
    pub samples: Vec<PathBuf>,
    /// The hand-written base CSV. Default:
    /// config/manifests/bases/<package>.clusterserviceversion.yaml, when it exists.
    #[arg(long)]
    pub base: Option<PathBuf>,
    /// Images the operator deploys, `name=image`, listed in `relatedImages`.
    #[arg(long)]
    pub related_image: Vec<String>,
    #[command(flatten)]
    pub install: ManifestArgs,
}

pub async fn run(args: BundleArgs) -> anyhow::Result<()> {
    match args.command {
        Some(BundleCommand::Validate(v)) => validate(v),
        Some(BundleCommand::Run(r)) => {
            let client = super::run::client(r.kubeconfig.as_deref(), 0.0, 0).await?;
            let timeout = std::time::Duration::from_secs(r.timeout);
            let mode = r.install_mode.as_deref();
            let package = install::run(&client, &r.dir, &r.namespace, mode, timeout).await?;
            println!(
                "installed {package} into {}; `bosun bundle cleanup {package} -n {}` removes it",
                r.namespace, r.namespace
            );
            Ok(())
        }
        Some(BundleCommand::Cleanup(c)) => {
            let client = super::run::client(c.kubeconfig.as_deref(), 0.0, 0).await?;
            let timeout = std::time::Duration::from_secs(c.timeout);
            let n = install::cleanup(&client, &c.package, &c.namespace, timeout).await?;
            println!("removed {n} objects of {}", c.package);
            Ok(())
        }
        None => generate(args.generate),
    }
}

fn validate(v: ValidateArgs) -> anyhow::Result<()> {
    let mut opts = Options::default();
    for s in &v.select_optional {
        opts.select(s).map_err(anyhow::Error::msg)?;
    }
    for o in &v.optional_values {
        match o.split_once('=') {
            Some(("k8s-version", ver)) => {
                let mut it = ver.trim_start_matches('v').split('.');
                let major = it.next().and_then(|m| m.parse().ok());
                let minor = it.next().and_then(|m| m.parse().ok());
                match (major, minor) {
                    (Some(a), Some(b)) => opts.k8s_version = Some((a, b)),
                    _ => anyhow::bail!("--optional-values {o}: use k8s-version=1.25"),
                }
            }
            _ => anyhow::bail!("unknown --optional-values {o:?}: use k8s-version=<version>"),
        }
    }
    if let Some(path) = std::env::var_os("OPERATOR_BUNDLE_CATEGORIES") {
        opts.categories = Some(custom_categories(Path::new(&path))?);
    }
    let findings = validate::validate_dir(&v.dir, &opts);
    for f in &findings {
        let mut f = f.clone();
        f.file = v.dir.join(&f.file).display().to_string();
        eprintln!("{f}");
    }
    let errors = findings.iter().filter(|f| f.level == Level::Error).count();
    if errors > 0 {
        eprintln!(
            "{}: {errors} error(s): the bundle fails validation",
            v.dir.display()
        );
        // operator-sdk's exit code for a bundle that fails validation.
        std::process::exit(1);
    }
    println!("All validation tests have completed successfully");
    Ok(())
}

/// operator-framework's custom categories file: `{"categories": ["A", "B"]}`.
fn custom_categories(path: &Path) -> anyhow::Result<Vec<String>> {
    #[derive(Deserialize)]
    struct File {
        categories: Vec<String>,
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("OPERATOR_BUNDLE_CATEGORIES={}", path.display()))?;
    let f: File = serde_json::from_str(&text).with_context(|| {
        format!(
            "OPERATOR_BUNDLE_CATEGORIES={}: use {{\"categories\": [\"A\", \"B\"]}}",
            path.display()
        )
    })?;
    Ok(f.categories)
}

fn generate(g: GenerateArgs) -> anyhow::Result<()> {
    let project = g
        .install
        .watches
        .as_deref()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let package = match &g.package {
        Some(p) => p.clone(),
        None => project_name(&project).unwrap_or_else(|| NAME.to_string()),
    };
    let base_path = g.base.clone().or_else(|| {
        let p = project.join(format!(
            "config/manifests/bases/{package}.clusterserviceversion.yaml"
        ));
        p.exists().then_some(p)
    });
    let base = base_path
        .as_deref()
        .map(|p| read_yaml(p).map(|mut d| d.swap_remove(0)))
        .transpose()?;
    let sample_paths = if g.samples.is_empty() && g.install.watches.is_some() {
        vec![project.join("config/samples")]
    } else {
        g.samples.clone()
    };
    let mut samples = Vec::new();
    for p in &sample_paths {
        samples.extend(read_samples(p)?);
    }
    let mut install = g.install.clone();
    // OLM decides which namespaces through WATCH_NAMESPACE; the bundle grants cluster-wide.
    install.watch_namespaces.clear();
    // OLM installs every AllNamespaces operator into one namespace: objects named after the
    // package (operator-sdk's namePrefix) keep two bosun operators from replacing each other.
    if install.name.is_none() {
        install.name = Some(package.clone());
    }
    let ops = install.operators()?;
    // A directory of samples may hold examples of operators this bundle leaves out (the
    // repo's deploy/samples): an example of a kind the CSV does not own is invalid there.
    let owned: Vec<(String, String)> = ops
        .iter()
        .flat_map(|o| o.crds())
        .map(|c| (c.spec.group.clone(), c.spec.names.kind.clone()))
        .collect();
    samples.retain(|s| {
        let api_version = s["apiVersion"].as_str().unwrap_or_default();
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        let kind = s["kind"].as_str().unwrap_or_default();
        let keep = owned.iter().any(|(g, k)| g == group && k == kind);
        if !keep {
            eprintln!(
                "bundle: the sample {api_version} {kind} is of a kind these operators do not \
                 serve; left out of alm-examples"
            );
        }
        keep
    });
    let objects = manifests::objects(&install, &ops).with_context(|| {
        format!(
            "the install's objects are named after the package {:?}: pass --name",
            install.name()
        )
    })?;
    // A bundle's webhooks are the CSV's webhookdefinitions: OLM makes their certificate,
    // Service and configurations, and the objects bosun's own install uses for them are kinds
    // OLM refuses in a bundle.
    let (objects, webhook_definitions) = if install.webhooks.is_empty() {
        (objects, Vec::new())
    } else {
        let deployment = objects
            .iter()
            .find(|o| o["kind"] == "Deployment")
            .and_then(|d| d["metadata"]["name"].as_str())
            .unwrap_or(install.name())
            .to_string();
        let f = bundle::webhooks::for_olm(objects, &deployment)?;
        (f.objects, f.definitions)
    };
    let mut input = BundleInput {
        webhook_definitions,
        package,
        version: g.version.trim_start_matches('v').to_string(),
        channels: g.channels.clone(),
        default_channel: g.default_channel.clone(),
        replaces: g.replaces.clone(),
        created_at: g.created_at.clone(),
        image: install.image.clone(),
        related_images: Vec::new(),
        min_kube_version: MIN_KUBE_VERSION.into(),
        project_layout: project_layout(&project),
        builder: format!("bosun-v{}", env!("CARGO_PKG_VERSION")),
        samples,
        base,
        ..Default::default()
    };
    if let Some(w) = &install.watches {
        input.related_images = chart_images(w, &input.samples)?;
    }
    for r in &g.related_image {
        let (name, image) = r
            .split_once('=')
            .with_context(|| format!("--related-image {r}: use name=image"))?;
        input.related_images.push((name.into(), image.into()));
    }
    let lease_role = format!("{}-leader-election", install.name());
    for o in objects {
        let name = o["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        match o["kind"].as_str().unwrap_or_default() {
            "CustomResourceDefinition" => input.crds.push(o),
            "ClusterRole" if name == install.name() => input.cluster_rules = rules(&o),
            "Role" if name == lease_role => input.namespaced_rules = rules(&o),
            "Deployment" => input.deployment = o,
            // OLM creates the account and binds the CSV's permissions itself.
            "Namespace" | "ServiceAccount" | "ClusterRoleBinding" | "RoleBinding" => {}
            // The metrics Service and the unbound metrics-reader role ship beside the CSV.
            _ => input.extra.push(o),
        }
    }
    let manager = project.join("config/manager/manager.yaml");
    if install.watches.is_some() && manager.exists() {
        let docs = read_yaml(&manager)?;
        if let Some(d) = docs.iter().find(|d| d["kind"] == "Deployment") {
            overlay_manager(&mut input.deployment, d);
        }
    }
    for op in &ops {
        let rbac = op.rbac();
        let rules: Vec<Value> = rbac
            .namespaced
            .iter()
            .chain(&rbac.cluster)
            .map(serde_json::to_value)
            .collect::<Result<_, _>>()?;
        for crd in op.crds() {
            input
                .operator_rules
                .insert(crd.metadata.name.clone().unwrap_or_default(), rules.clone());
        }
    }
    let tree = bundle::generate(&input)?;
    let out = &g.output_dir;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let stage = Stage::new(out)?;
    stage.write(&tree)?;
    // A CRD dropped since the last run must not linger in the bundle.
    let old = out.join("bundle/manifests");
    if old.exists() {
        std::fs::remove_dir_all(&old).with_context(|| format!("removing {}", old.display()))?;
    }
    stage.commit(&tree)?;
    println!(
        "Bundle {} v{} written to {}",
        input.package,
        input.version,
        out.join("bundle").display()
    );
    Ok(())
}

/// Pod fields of `config/manager/manager.yaml` a user edits for where and how the operator
/// runs; its `env`, `resources` and `imagePullPolicy` are the manager container's.
const POD_FIELDS: &[&str] = &[
    "imagePullSecrets",
    "nodeSelector",
    "tolerations",
    "affinity",
    "priorityClassName",
    "topologySpreadConstraints",
];

/// What `make deploy` runs (config/manager/manager.yaml, as the user edited it) carried onto
/// the bundle's Deployment, so OLM runs the same (operator-sdk builds its bundle from
/// `config/`): the manager container's env (added or changed variables; WATCH_NAMESPACE
/// stays OLM's), resources and pull policy, and the pod's placement and pull secrets. Names,
/// labels, arguments and the image stay bosun's: the bundle's objects are named after the
/// package and the image is --image.
fn overlay_manager(deployment: &mut Value, manager: &Value) {
    let from_pod = &manager["spec"]["template"]["spec"];
    let pod = &mut deployment["spec"]["template"]["spec"];
    for f in POD_FIELDS {
        if !from_pod[f].is_null() {
            pod[f] = from_pod[f].clone();
        }
    }
    let Some(from) = from_pod["containers"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == "manager").or(cs.first()))
    else {
        return;
    };
    let Some(container) = pod["containers"].get_mut(0) else {
        return;
    };
    for f in ["resources", "imagePullPolicy"] {
        if !from[f].is_null() {
            container[f] = from[f].clone();
        }
    }
    for e in from["env"].as_array().into_iter().flatten() {
        let name = e["name"].as_str().unwrap_or_default();
        if name.is_empty() || name == "WATCH_NAMESPACE" {
            continue;
        }
        if !container["env"].is_array() {
            container["env"] = Value::Array(vec![]);
        }
        if let Some(env) = container["env"].as_array_mut() {
            match env.iter_mut().find(|x| x["name"] == name) {
                Some(x) => *x = e.clone(),
                None => env.push(e.clone()),
            }
        }
    }
}

fn rules(o: &Value) -> Vec<Value> {
    o["rules"].as_array().cloned().unwrap_or_default()
}

fn project_name(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("PROJECT")).ok()?;
    let v: Value = serde_yaml::from_str(&text).ok()?;
    v["projectName"].as_str().map(str::to_string)
}

fn project_layout(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("PROJECT"))
        .ok()
        .and_then(|t| serde_yaml::from_str::<Value>(&t).ok())
        .and_then(|v| match &v["layout"] {
            Value::Array(l) => l.first().and_then(Value::as_str).map(str::to_string),
            Value::String(s) => Some(s.clone()),
            _ => None,
        })
        .unwrap_or_else(|| "bosun.dev/v1".into())
}

fn read_yaml(p: &Path) -> anyhow::Result<Vec<Value>> {
    let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
    let mut out = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let v = Value::deserialize(doc).with_context(|| format!("{}: not YAML", p.display()))?;
        if !v.is_null() {
            out.push(v);
        }
    }
    if out.is_empty() {
        anyhow::bail!("{}: no YAML document", p.display());
    }
    Ok(out)
}

/// Custom resources in a file or a directory: the resources its kustomization.yaml lists (the
/// samples a user chose for the CSV, as operator-sdk reads them), else its YAML files in name
/// order.
fn read_samples(p: &Path) -> anyhow::Result<Vec<Value>> {
    if !p.exists() {
        return Ok(Vec::new());
    }
    let kustomization = p.join("kustomization.yaml");
    let files = if kustomization.exists() {
        let k = read_yaml(&kustomization)
            .ok()
            .and_then(|mut d| d.drain(..).next())
            .unwrap_or_default();
        k["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(|r| p.join(r))
            .collect()
    } else if p.is_dir() {
        let mut f: Vec<PathBuf> = std::fs::read_dir(p)
            .with_context(|| format!("reading {}", p.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|f| f.extension().is_some_and(|x| x == "yaml" || x == "yml"))
            .collect();
        f.sort();
        f
    } else {
        vec![p.to_path_buf()]
    };
    let mut out = Vec::new();
    for f in files {
        out.extend(
            read_yaml(&f)?
                .into_iter()
                .filter(|d| d["kind"] != "Kustomization"),
        );
    }
    Ok(out)
}

/// The images a chart's workloads run, rendered at the values of its kind's first sample (the
/// chart's defaults when there is none): the operands of `relatedImages`, named
/// `<kind>-<container>`. Roles and playbooks decide images at run time: none are listed.
fn chart_images(watches: &Path, samples: &[Value]) -> anyhow::Result<Vec<(String, String)>> {
    use bosun_helm::render::{Chart, RenderOptions};
    let file = bosun_watches::WatchesFile::load(watches)
        .map_err(|e| anyhow::anyhow!("{}: {e}", watches.display()))?;
    let mut out: Vec<(String, String)> = Vec::new();
    for entry in &file.entries {
        let bosun_watches::Runner::Chart(path) = &entry.runner else {
            continue;
        };
        let chart = Chart::load(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let api = format!("{}/{}", entry.gvk.group, entry.gvk.version);
        let spec = samples
            .iter()
            .find(|s| s["kind"] == entry.gvk.kind.as_str() && s["apiVersion"] == api.as_str())
            .map(|s| s["spec"].clone())
            .filter(Value::is_object)
            .unwrap_or_else(|| Value::Object(Default::default()));
        let mut opts = RenderOptions::new("sample", "default");
        opts.values = bosun_helm::value::Data::from_json_float(&spec.to_string())
            .map_err(|e| anyhow::anyhow!("{}'s sample: {e}", entry.gvk.kind))?;
        let rendered = chart
            .render(&opts)
            .map_err(|e| anyhow::anyhow!("rendering {}: {e}", path.display()))?;
        let kind = entry.gvk.kind.to_lowercase();
        for text in rendered.files.values() {
            for doc in serde_yaml::Deserializer::from_str(text) {
                // NOTES.txt and other non-manifests are not YAML: the rest of that file is
                // skipped (after an error the stream would repeat it forever).
                let Ok(v) = Value::deserialize(doc) else {
                    break;
                };
                containers(&v, &mut |name, image| {
                    if !out.iter().any(|(_, i)| i == image) {
                        out.push((format!("{kind}-{name}"), image.to_string()));
                    }
                });
            }
        }
    }
    Ok(out)
}

/// Every `containers` / `initContainers` entry with an image, anywhere in `v`.
fn containers(v: &Value, found: &mut dyn FnMut(&str, &str)) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                if k == "containers" || k == "initContainers" {
                    for c in child.as_array().into_iter().flatten() {
                        if let Some(image) = c["image"].as_str() {
                            found(c["name"].as_str().unwrap_or("container"), image);
                        }
                    }
                }
                containers(child, found);
            }
        }
        Value::Array(a) => a.iter().for_each(|c| containers(c, found)),
        _ => {}
    }
}
