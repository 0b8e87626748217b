//! The Ansible flavour's benchmark in this process (see `bosun_bench::ansible_flavour`; `bench/run
//! --only ansible` runs the same case): N seed BookStores to convergence, the raw write floor,
//! CPU per reconcile, RSS, and a restart.
//!
//! `cargo run --release -p bosun-bench --bin bosun-ansible-inprocess -- [--n N]
//!  [--concurrency C] [--foreign F] [--kubeconfig PATH]`
//!
//! Without `--kubeconfig`, a fresh test control plane is started (`scripts/setup-assets.sh`);
//! with one, the cluster it names is used (namespaces `bench-ansible-*` are created there
//! and deleted afterwards).
use std::path::{Path, PathBuf};

use bosun_bench::ansible_flavour::{run, BenchConfig};

// Live heap figures in the report (what the operator holds, without the allocator's
// fragmentation or the binary's pages that RSS adds).
#[global_allocator]
static ALLOC: bosun_runtime::heap::Counting = bosun_runtime::heap::Counting;

#[tokio::main(flavor = "multi_thread")]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut cfg = BenchConfig::seed(&repo, 100);
    let mut kubeconfig: Option<PathBuf> = None;
    while let Some(a) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| anyhow::anyhow!("{a} needs a value"))
        };
        match a.as_str() {
            "--n" => cfg.n = value()?.parse()?,
            "--concurrency" => cfg.concurrency = value()?.parse()?,
            "--foreign" => cfg.foreign = value()?.parse()?,
            "--kubeconfig" => kubeconfig = Some(PathBuf::from(value()?)),
            other => anyhow::bail!("unknown argument {other}"),
        }
    }
    let (_cp, config) = match &kubeconfig {
        Some(path) => {
            cfg.cleanup = true;
            let kc = kube::config::Kubeconfig::read_from(path)?;
            let config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
            (None, config)
        }
        None => {
            let cp = bosun_testenv::ControlPlane::start(Default::default()).await?;
            let config = cp.config().await?;
            (Some(cp), config)
        }
    };
    let admin = kube::Client::try_from(config.clone())?;
    let report = run(admin, config, &cfg).await?;
    println!("{report}");
    Ok(())
}
