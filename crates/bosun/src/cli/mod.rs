//! Subcommands.
mod bundle;
mod crd;
#[cfg(feature = "dev")]
mod dev;
mod manager_flags;
#[cfg(feature = "builtin")]
mod pg;
mod render;
mod rest;
mod run;
mod scaffold;
mod scorecard;
#[cfg(feature = "dev")]
mod verify;

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
    /// Print the CustomResourceDefinitions of the operators, as YAML.
    Crd(crd::CrdArgs),
    /// Print the RBAC objects the install manifests hold for the same flags, as YAML.
    Rbac(crate::manifests::ManifestArgs),
    /// Print the install manifests (CRDs, RBAC, Deployment, metrics Service) as YAML.
    Manifests(crate::manifests::ManifestArgs),
    #[cfg(feature = "dev")]
    /// Try bosun locally: start a control plane (no cluster needed), run the operators, apply
    /// the sample BookStore and show the result. Ctrl-C stops and cleans up.
    Dev(dev::DevArgs),
    /// Render a Helm chart as `helm template` does, with bosun's own engine.
    Render(render::RenderArgs),
    /// Initialize a new operator project (operator-sdk's `init`): `--plugins helm|ansible|rust`.
    Init(scaffold::InitArgs),
    /// Scaffold an API in the current project (operator-sdk's `create api`).
    #[command(subcommand)]
    Create(scaffold::CreateCommand),
    /// Generate files of the current project: `manifests` (config/crd and config/rbac).
    #[command(subcommand)]
    Generate(scaffold::GenerateCommand),
    /// Write an OLM bundle (bundle/, bundle.Dockerfile) for the operators; `bundle validate`
    /// checks one as operator-sdk does.
    Bundle(Box<bundle::BundleArgs>),
    /// Run operator-sdk's six built-in scorecard tests on a bundle, in-process.
    Scorecard(scorecard::ScorecardArgs),
    #[cfg(feature = "dev")]
    /// Test an operator for the bugs operators have: a local control plane, faults (kill -9,
    /// API server restart, stale watches, drift, a second spec) and invariant checks.
    Verify(Box<verify::VerifyArgs>),
    /// Print the version.
    Version,
    /// PostgresCluster instance pods' entry point (`bosun pg instance`).
    #[cfg(feature = "builtin")]
    #[command(hide = true)]
    Pg(pg::PgArgs),
}

pub async fn dispatch(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Run(args) => run::run(args).await,
        Command::Crd(args) => {
            print!("{}", crd::crds_yaml(&args)?);
            Ok(())
        }
        Command::Rbac(args) => {
            print!("{}", crd::rbac_yaml(&args)?);
            Ok(())
        }
        Command::Manifests(args) => {
            let ops = args.operators()?;
            print!(
                "{}",
                crate::manifests::to_yaml(&crate::manifests::objects(&args, &ops)?)?
            );
            Ok(())
        }
        #[cfg(feature = "dev")]
        Command::Dev(args) => dev::dev(args).await,
        #[cfg(feature = "dev")]
        Command::Verify(args) => verify::run(*args).await,
        Command::Render(args) => render::run(args),
        Command::Init(args) => scaffold::init(args),
        Command::Create(cmd) => scaffold::create(cmd),
        Command::Generate(cmd) => scaffold::generate(cmd),
        #[cfg(feature = "builtin")]
        Command::Pg(args) => pg::run(args).await,
        Command::Bundle(args) => bundle::run(*args).await,
        Command::Scorecard(args) => scorecard::run(args),
        Command::Version => {
            use bosun_runtime::kubeversion::{MAX_TESTED_MINOR, MIN_MINOR};
            println!("bosun {}", env!("CARGO_PKG_VERSION"));
            println!("Kubernetes: 1.{MIN_MINOR} to 1.{MAX_TESTED_MINOR} (an older API server is refused at start)");
            Ok(())
        }
    }
}
