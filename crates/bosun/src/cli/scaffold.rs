//! `bosun init` and `bosun create api`: operator-sdk's verbs and flags over `bosun-scaffold`,
//! with this binary's registry deriving the CRDs and RBAC (what `bosun crd` and `bosun rbac`
//! print for the same watches file).
use std::path::{Path, PathBuf};

use bosun_scaffold::commands::{self, ApiOptions, InitOptions};
use bosun_scaffold::{Derive, Derived, Plugin};
use clap::{Args, Subcommand};

use serde::Deserialize;

#[derive(Args, Debug)]
pub struct InitArgs {
    /// Plugin to scaffold with (operator-sdk's key): helm, ansible, or rust (a Cargo project
    /// on bosun-runtime).
    #[arg(long)]
    pub plugins: String,
    /// Rust: a bosun checkout the generated Cargo.toml depends on by path. bosun's crates are
    /// not on crates.io: --plugins rust needs this or --bosun-git.
    #[arg(long)]
    pub bosun_source: Option<PathBuf>,
    /// Rust: a bosun git repository (https://, ssh://, git:// or file:// URL) the generated
    /// Cargo.toml depends on.
    #[arg(long, conflicts_with = "bosun_source")]
    pub bosun_git: Option<String>,
    /// Rust: the commit, tag or branch of --bosun-git (cargo's `rev`).
    #[arg(long, requires = "bosun_git")]
    pub bosun_rev: Option<String>,
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
    /// Scaffold a Kubernetes API backed by a Helm chart, an Ansible role or playbook, or code
    /// (rust).
    Api(ApiArgs),
    /// Scaffold webhooks for a Rust kind: defaulting, validating and/or conversion, served by
    /// the operator (kubebuilder's `create webhook`).
    Webhook(WebhookArgs),
}

#[derive(Args, Debug)]
pub struct WebhookArgs {
    /// Resource group (the first label), as `create api` was given it.
    #[arg(long)]
    pub group: Option<String>,
    /// Resource version: the kind's hub, its first version.
    #[arg(long)]
    pub version: Option<String>,
    /// Resource kind.
    #[arg(long)]
    pub kind: Option<String>,
    /// Scaffold a defaulting (mutating) webhook.
    #[arg(long)]
    pub defaulting: bool,
    /// Scaffold a validating webhook.
    #[arg(long)]
    pub programmatic_validation: bool,
    /// Scaffold the conversion webhook between the kind's versions.
    #[arg(long)]
    pub conversion: bool,
    /// With --conversion: the versions converted to and from the hub (default: all others).
    #[arg(long, value_delimiter = ',')]
    pub spoke: Vec<String>,
}

#[derive(Subcommand, Debug)]
pub enum GenerateCommand {
    /// Regenerate config/crd/bases and config/rbac from the project's watches.yaml (what
    /// `bosun crd` and `bosun rbac --watches` print), after a chart or role changed.
    Manifests,
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
    /// Helm: a chart directory or .tgz to back the kind, a chart in an OCI registry
    /// (`oci://HOST/PATH/CHART[:TAG|@DIGEST]`), or with --helm-chart-repo the chart's name in
    /// that repository (`name` or `repo/name`).
    #[arg(long)]
    pub helm_chart: Option<PathBuf>,
    /// Helm: the URL of a chart repository (its index.yaml, or `oci://HOST/PATH`) to fetch
    /// --helm-chart from.
    #[arg(long)]
    pub helm_chart_repo: Option<String>,
    /// Helm: the chart version (or a constraint such as ^1.2) to fetch; default: the latest
    /// stable one.
    #[arg(long)]
    pub helm_chart_version: Option<String>,
    /// Ansible: generate a role skeleton (the default when neither flag is given).
    #[arg(long)]
    pub generate_role: bool,
    /// Ansible: generate a playbook; it imports the role when --generate-role is given too.
    #[arg(long)]
    pub generate_playbook: bool,
}

/// `bosun crd` and `bosun rbac` themselves, run in the staged project: the generated files are
/// what they print there.
struct Registry;

impl Registry {
    fn bosun(
        dir: &Path,
        args: &[&str],
    ) -> Result<Vec<serde_json::Value>, Box<dyn std::error::Error + Send + Sync>> {
        let out = std::process::Command::new(std::env::current_exe()?)
            .args(args)
            .current_dir(dir)
            .output()?;
        if !out.status.success() {
            return Err(format!(
                "bosun {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )
            .into());
        }
        let text = String::from_utf8(out.stdout)?;
        let mut docs = Vec::new();
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let v = serde_json::Value::deserialize(doc)?;
            if !v.is_null() {
                docs.push(v);
            }
        }
        Ok(docs)
    }
}

impl Derive for Registry {
    fn derive(
        &self,
        dir: Option<&Path>,
        namespace: &str,
    ) -> Result<Derived, Box<dyn std::error::Error + Send + Sync>> {
        let ns = format!("--namespace={namespace}");
        match dir {
            Some(dir) => Ok(Derived {
                crds: Self::bosun(dir, &["crd", "--watches", "watches.yaml"])?,
                rbac: Self::bosun(dir, &["rbac", "--watches", "watches.yaml", &ns])?,
            }),
            // No kind yet: no coded operator either, the runtime's own rules only.
            None => Ok(Derived {
                crds: vec![],
                rbac: Self::bosun(Path::new("."), &["rbac", "--operators=", &ns])?,
            }),
        }
    }
}

fn print(lines: Vec<String>) {
    for l in lines {
        println!("{l}");
    }
}

pub fn init(args: InitArgs) -> anyhow::Result<()> {
    let plugin = Plugin::parse(&args.plugins)?;
    let opts = InitOptions {
        domain: args.domain,
        project_name: args.project_name,
        bosun_source: args.bosun_source,
        bosun_git: args.bosun_git,
        bosun_rev: args.bosun_rev,
    };
    let a = args.api;
    let then_api = a.group.is_some()
        || a.version.is_some()
        || a.kind.is_some()
        || a.helm_chart.is_some()
        || a.generate_role
        || a.generate_playbook;
    let lines = commands::init(Path::new("."), plugin, &opts, &Registry)?;
    if then_api {
        // operator-sdk prints init's lines but its "Next:" and runs create api.
        print(
            lines
                .into_iter()
                .filter(|l| !l.starts_with("Next:"))
                .collect(),
        );
        print(commands::create_api(
            Path::new("."),
            Some(plugin),
            &api_options(a),
            &Registry,
        )?);
    } else {
        print(lines);
    }
    Ok(())
}

pub fn create(cmd: CreateCommand) -> anyhow::Result<()> {
    let args = match cmd {
        CreateCommand::Api(args) => args,
        CreateCommand::Webhook(w) => {
            print(commands::create_webhook(
                Path::new("."),
                &commands::WebhookOptions {
                    group: w.group,
                    version: w.version,
                    kind: w.kind,
                    defaulting: w.defaulting,
                    programmatic_validation: w.programmatic_validation,
                    conversion: w.conversion,
                    spoke: w.spoke,
                },
            )?);
            return Ok(());
        }
    };
    let plugin = args.plugins.as_deref().map(Plugin::parse).transpose()?;
    print(commands::create_api(
        Path::new("."),
        plugin,
        &api_options(args.api),
        &Registry,
    )?);
    Ok(())
}

pub fn generate(cmd: GenerateCommand) -> anyhow::Result<()> {
    let GenerateCommand::Manifests = cmd;
    print(commands::generate_manifests(Path::new("."), &Registry)?);
    Ok(())
}

fn api_options(a: ApiFlags) -> ApiOptions {
    ApiOptions {
        group: a.group,
        version: a.version,
        kind: a.kind,
        helm_chart: a.helm_chart,
        helm_chart_repo: a.helm_chart_repo,
        helm_chart_version: a.helm_chart_version,
        generate_role: a.generate_role,
        generate_playbook: a.generate_playbook,
    }
}
