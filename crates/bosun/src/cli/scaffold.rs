//! `bosun init` and `bosun create api`: operator-sdk's verbs and flags over `bosun-scaffold`,
//! with this binary's registry deriving the CRDs and RBAC (what `bosun crd` and `bosun rbac`
//! print for the same watches file).
use std::path::{Path, PathBuf};

use bosun_scaffold::{helm, Derive, Derived, Plugin};
use clap::{Args, Subcommand};

use crate::manifests::{self, ManifestArgs};

#[derive(Args, Debug)]
pub struct InitArgs {
    /// Plugin to scaffold with (operator-sdk's key): helm.
    #[arg(long)]
    pub plugins: String,
    /// Domain for groups (kubebuilder's default: my.domain).
    #[arg(long)]
    pub domain: Option<String>,
    /// Name of the project (default: the directory's name).
    #[arg(long)]
    pub project_name: Option<String>,
    /// With any of --group, --version, --kind, --helm-chart: `create api` runs next with them,
    /// as operator-sdk's init does.
    #[command(flatten)]
    pub api: ApiFlags,
}

#[derive(Subcommand, Debug)]
pub enum CreateCommand {
    /// Scaffold a Kubernetes API backed by a Helm chart.
    Api(ApiArgs),
}

#[derive(Args, Debug)]
pub struct ApiArgs {
    /// Plugin (default: the project's layout).
    #[arg(long)]
    pub plugins: Option<String>,
    #[command(flatten)]
    pub api: ApiFlags,
}

#[derive(Args, Debug, Default)]
pub struct ApiFlags {
    /// Resource group (the first label; the domain is appended). Default with a chart: charts.
    #[arg(long)]
    pub group: Option<String>,
    /// Resource version. Default with a chart: v1alpha1.
    #[arg(long)]
    pub version: Option<String>,
    /// Resource kind. Default: the chart's name in UpperCamelCase.
    #[arg(long)]
    pub kind: Option<String>,
    /// A chart directory or .tgz to back the kind.
    #[arg(long)]
    pub helm_chart: Option<PathBuf>,
}

/// The registry's view of a watches file, as `bosun crd` and `bosun rbac` have it.
struct Registry;

impl Derive for Registry {
    fn derive(
        &self,
        watches: Option<&Path>,
        namespace: &str,
    ) -> Result<Derived, Box<dyn std::error::Error + Send + Sync>> {
        let args = ManifestArgs {
            namespace: namespace.to_string(),
            watches: watches.map(Path::to_path_buf),
            // No coded operator: the project's kinds only (none before `create api`).
            operators: Some(vec![]),
            ..Default::default()
        };
        let ops = args.operators().map_err(|e| e.into_boxed_dyn_error())?;
        let mut crds = Vec::new();
        for op in &ops {
            for crd in op.crds() {
                crds.push(serde_json::to_value(crd)?);
            }
        }
        let rbac = manifests::rbac::objects(&args, &ops).map_err(|e| e.into_boxed_dyn_error())?;
        Ok(Derived { crds, rbac })
    }
}

fn print(lines: Vec<String>) {
    for l in lines {
        println!("{l}");
    }
}

pub fn init(args: InitArgs) -> anyhow::Result<()> {
    match Plugin::parse(&args.plugins)? {
        Plugin::Helm => {
            let opts = helm::InitOptions {
                domain: args.domain,
                project_name: args.project_name,
            };
            let a = args.api;
            let then_api = a.group.is_some()
                || a.version.is_some()
                || a.kind.is_some()
                || a.helm_chart.is_some();
            let lines = helm::init(Path::new("."), &opts, &Registry)?;
            if then_api {
                // operator-sdk prints init's lines but its "Next:" and runs create api.
                print(
                    lines
                        .into_iter()
                        .filter(|l| !l.starts_with("Next:"))
                        .collect(),
                );
                print(helm::create_api(
                    Path::new("."),
                    &api_options(a),
                    &Registry,
                )?);
            } else {
                print(lines);
            }
        }
    }
    Ok(())
}

pub fn create(cmd: CreateCommand) -> anyhow::Result<()> {
    let CreateCommand::Api(args) = cmd;
    if let Some(p) = &args.plugins {
        Plugin::parse(p)?;
    }
    print(helm::create_api(
        Path::new("."),
        &api_options(args.api),
        &Registry,
    )?);
    Ok(())
}

fn api_options(a: ApiFlags) -> helm::ApiOptions {
    helm::ApiOptions {
        group: a.group,
        version: a.version,
        kind: a.kind,
        helm_chart: a.helm_chart,
    }
}
