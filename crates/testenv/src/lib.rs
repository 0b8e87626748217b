//! bosun's test control plane: real etcd + kube-apiserver (+ kube-controller-manager on
//! request) on loopback ports, for tests that must prove API behaviour — kube-rs has no
//! envtest, and mocks prove nothing about the API server. Plus a simulated node agent, clearly
//! test support, standing in for the kubelet that does not run here — or, in its process mode
//! ([`procmode`]), running pods as real local processes. And vcsim, the vSphere
//! simulator, for the vSphere client and the VmGroup operator (`scripts/setup-vcsim.sh`).
//!
//! Binaries come from `scripts/setup-assets.sh`, built from upstream Go modules (cached under
//! `~/.cache/bosun/assets/<version>`; `BOSUN_KUBE_VERSION=floor` selects the oldest supported
//! release instead of the current one); `BOSUN_ASSETS` points at another directory with the
//! same file names, for instance an official envtest set.
mod assets;
mod controlplane;
pub mod kit;
mod nodeagent;
pub mod perturb;
mod process;
pub mod procmode;
mod vcsim;

pub use assets::{assets_dir, current_version, floor_version, selected_version, Assets};
pub use controlplane::{shared, sum_series, ControlPlane, Options, TestEnvError};
pub use nodeagent::{NodeAgent, NodeAgentConfig};
pub use procmode::{loopback_network, Image, ImageMap, ProcessConfig, ProcessError};
pub use vcsim::{vcsim_path, Vcsim, VcsimError, VCSIM_VERSION};

/// Creates a namespace with a unique name for one test.
pub async fn test_namespace(client: &kube::Client, prefix: &str) -> Result<String, kube::Error> {
    use k8s_openapi::api::core::v1::Namespace;
    use kube::api::{Api, PostParams};
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let name = format!("{prefix}-{}-{n}", std::process::id() % 100_000);
    // Pod Security admission enforces `baseline` on every test namespace, so every pod an
    // operator under test creates is proven at least baseline-admissible; `restricted` is
    // warned about (the API server's warnings show what a restricted namespace would refuse).
    let labels = [
        ("pod-security.kubernetes.io/enforce", "baseline"),
        ("pod-security.kubernetes.io/warn", "restricted"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let ns = Namespace {
        metadata: kube::api::ObjectMeta {
            name: Some(name.clone()),
            labels: Some(labels),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    Ok(name)
}

/// Polls `f` every 200 ms until it returns Some, for at most `secs` seconds.
pub async fn eventually<T, F, Fut>(secs: u64, mut f: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return Some(v);
        }
        if tokio::time::Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}
