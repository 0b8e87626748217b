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
            print(helm::init(Path::new("."), &opts, &Registry)?);
        }
    }
    Ok(())
}

pub fn create(cmd: CreateCommand) -> anyhow::Result<()> {
    let CreateCommand::Api(args) = cmd;
    if let Some(p) = &args.plugins {
        Plugin::parse(p)?;
    }
    let opts = helm::ApiOptions {
        group: args.group,
        version: args.version,
        kind: args.kind,
        helm_chart: args.helm_chart,
    };
    print(helm::create_api(Path::new("."), &opts, &Registry)?);
    Ok(())
}
