//! Subcommands.
mod crd;
mod dev;
pub mod manifests;
mod render;
mod run;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "bosun",
    version,
    about = "Kubernetes operators in Rust: smaller, faster, safer with data"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the operators against a cluster (in-cluster config, or KUBECONFIG / --kubeconfig).
    Run(run::RunArgs),
    /// Print every CustomResourceDefinition this binary serves, as YAML.
    Crd,
    /// Print the RBAC ClusterRole the operators need, as YAML.
    Rbac,
    /// Print the install manifests (CRDs, RBAC, Deployment, metrics Service) as YAML.
    Manifests(manifests::ManifestArgs),
    /// Try bosun locally: start a control plane (no cluster needed), run the operators, apply
    /// the sample BookStore and show the result. Ctrl-C stops and cleans up.
    Dev(dev::DevArgs),
    /// Render a Helm chart as `helm template` does, with bosun's own engine.
    Render(render::RenderArgs),
    /// Print the version.
    Version,
}

pub async fn dispatch(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Run(args) => run::run(args).await,
        Command::Crd => {
            print!("{}", crd::crds_yaml()?);
            Ok(())
        }
        Command::Rbac => {
            print!("{}", crd::cluster_role_yaml("bosun")?);
            Ok(())
        }
        Command::Manifests(args) => {
            print!("{}", manifests::yaml(&args)?);
            Ok(())
        }
        Command::Dev(args) => dev::dev(args).await,
        Command::Render(args) => render::run(args),
        Command::Version => {
            println!("bosun {}", env!("CARGO_PKG_VERSION"));
            Ok(())
        }
    }
}
