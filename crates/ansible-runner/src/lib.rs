//! Real Ansible as the fallback engine of Ansible-based operators: a watches entry whose
//! role or playbook the native engine ([`bosun_ansible`]) does not fully support runs under
//! `ansible-runner` + `ansible-core` + `kubernetes.core`, as operator-sdk's ansible-operator
//! runs every entry.
//!
//! * [`engine`]: which engine runs an entry (`--ansible-engine=auto|native|ansible`), how
//!   real Ansible is found, and the install hint when it is needed and missing;
//! * [`target`]: the role or playbook as ansible-runner is given it;
//! * [`proxy`]: the loopback proxy the runs talk to the API server through (owner
//!   references injected on create, a token per run);
//! * [`run`]: one ansible-runner invocation in the CR's private data directory;
//! * [`events`]: its job events read into the native engine's [`bosun_ansible::Outcome`],
//!   so both engines write the same conditions;
//! * [`reconcile`]: the reconcile of a fallback entry, as ansible-operator's (finalizer,
//!   run, dependent watches, status, Events, requeue);
//! * [`preflight`]: the load-time check of the role by real Ansible (`--syntax-check`);
//! * [`collection`]: bosun's stand-in `operator_sdk.util` for the runs.
pub mod collection;
pub mod engine;
pub mod events;
pub mod preflight;
pub mod proxy;
pub mod reconcile;
pub mod run;
pub mod target;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub use engine::{choose, Engine, EngineFlag, Installation, Refusal, INSTALL_HINT};
pub use target::Target;

use bosun_runtime::error::{Categorized, ErrorCategory};
use bosun_watches::Entry;

/// The longest a run may take (ansible-runner's `job_timeout`).
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(30 * 60);

/// The environment variable naming the directory of the runs' data (default
/// `<temp dir>/bosun-ansible`).
pub const DIR_ENV: &str = "BOSUN_ANSIBLE_RUNNER_DIR";

/// A watches entry that runs under real Ansible.
pub struct Fallback {
    pub install: Installation,
    pub main: Target,
    /// The finalizer's own role or playbook (None: the main one, with the finalizer's vars).
    pub finalizer: Option<Target>,
    /// Why the entry runs under real Ansible (logged at load).
    pub why: String,
    /// The user's collections paths (the stand-in `operator_sdk.util` is added after them).
    pub collections_paths: Vec<PathBuf>,
    /// `ANSIBLE_ROLES_PATH` for the runs: the user's, then the project's `roles/` beside the
    /// watches file — as operator-sdk's image (`roles_path`) and its `make run` give it, so a
    /// playbook in `playbooks/` finds the roles in `roles/`.
    pub roles_paths: Vec<PathBuf>,
    /// Where the runs' data directories live.
    pub base: PathBuf,
    pub deadline: Duration,
    started: tokio::sync::OnceCell<Started>,
}

struct Started {
    proxy: proxy::Proxy,
    collections_paths: Vec<PathBuf>,
}

impl Fallback {
    pub fn new(
        install: Installation,
        main: Target,
        finalizer: Option<Target>,
        why: String,
        collections_paths: Vec<PathBuf>,
    ) -> Fallback {
        let base = std::env::var_os(DIR_ENV)
            .map(PathBuf::from)
            .unwrap_or_else(|| std::env::temp_dir().join("bosun-ansible"));
        Fallback {
            install,
            main,
            finalizer,
            why,
            collections_paths,
            roles_paths: Vec::new(),
            base,
            deadline: DEFAULT_DEADLINE,
            started: tokio::sync::OnceCell::new(),
        }
    }

    /// Checks with real Ansible that the runs can load the role or playbook and the
    /// finalizer's ([`preflight`]).
    pub fn check(&self) -> Result<(), String> {
        let ours = collection::install(&self.base)
            .map_err(|e| format!("writing the stand-in operator_sdk.util: {e}"))?;
        let mut paths = self.collections_paths.clone();
        paths.push(ours);
        let scratch = self.base.join("preflight");
        for t in std::iter::once(&self.main).chain(&self.finalizer) {
            preflight::check(&self.install, t, &paths, &self.roles_paths, &scratch)
                .map_err(|e| format!("{}: {e}", t.describe()))?;
        }
        Ok(())
    }

    /// The proxy and the collections paths, set up by the first run.
    async fn started(&self, client: &kube::Client) -> std::io::Result<&Started> {
        self.started
            .get_or_try_init(|| async {
                run::private_dir(&self.base)?;
                let ours = collection::install(&self.base)?;
                let mut paths = self.collections_paths.clone();
                paths.push(ours);
                let proxy = proxy::Proxy::start(client.clone()).await?;
                tracing::info!(proxy = %proxy.url(), "started the loopback API proxy for Ansible runs");
                Ok(Started {
                    proxy,
                    collections_paths: paths,
                })
            })
            .await
    }

    /// `<base>/runner/<group>/<version>/<kind>/<namespace>/<name>`, as ansible-operator
    /// lays it out.
    pub fn run_dir(&self, entry: &Entry, namespace: Option<&str>, name: &str) -> PathBuf {
        let clean = |s: &str| s.replace(['/', '\\'], "_").replace("..", "__");
        let g = &entry.gvk;
        let group = if g.group.is_empty() { "core" } else { &g.group };
        Path::new(&self.base)
            .join("runner")
            .join(clean(group))
            .join(clean(&g.version))
            .join(clean(&g.kind))
            .join(clean(namespace.unwrap_or("_cluster")))
            .join(clean(name))
    }
}

/// `ANSIBLE_ROLES_PATH` for a run of `target`: a role's own directory first (the role
/// ansible-runner is given), then `roles_paths`.
pub fn roles_path_env(target: &Target, roles_paths: &[PathBuf]) -> Option<std::ffi::OsString> {
    let mut all: Vec<&Path> = Vec::new();
    if let Target::Role { roles_path, .. } = target {
        all.push(roles_path);
    }
    all.extend(roles_paths.iter().map(PathBuf::as_path));
    if all.is_empty() {
        return None;
    }
    std::env::join_paths(all).ok()
}

/// What a fallback reconcile can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The run failed: the failed tasks' messages.
    #[error("{0}")]
    Run(String),
    /// The reconcile-period annotation does not parse.
    #[error("{0}")]
    Annotation(String),
    /// ansible-runner could not be started, or its directory prepared.
    #[error("{0}")]
    Setup(String),
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
}

impl Categorized for Error {
    fn category(&self) -> ErrorCategory {
        match self {
            Error::Run(_) | Error::Setup(_) => ErrorCategory::Transient,
            Error::Annotation(_) => ErrorCategory::InvalidSpec,
            Error::Kube(_) => ErrorCategory::Api,
        }
    }
}

/// Shares the fallback with a flavour's reconcile.
pub type Shared = Arc<Fallback>;
