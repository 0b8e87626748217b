//! Ansible-based operators: a `watches.yaml` entry with a `role` or `playbook` runs it for
//! every custom resource of its kind — a drop-in for operator-sdk's ansible-operator, with
//! bosun's native role engine ([`bosun_ansible`]) in place of ansible-runner, on the shared
//! dynamic operator host ([`bosun_watches::host`]).
//!
//! * [`AnsibleFlavor::load`] loads the role or playbook (and the finalizer's) once per entry
//!   at startup: anything outside the engine's subset is refused there, with its file:line;
//! * [`reconcile`] runs it per custom resource, as ansible-operator's reconciler does;
//! * [`scan`] reads which kinds the role touches, for [`rbac`]; [`crd`] is the CRD, its spec
//!   described from the role's defaults ([`spec_schema`]).
//!
//! # Differences from ansible-operator, and why
//!
//! * **One status write per reconcile, none when nothing changed.** ansible-operator PUTs
//!   `Running` before every run and the result after it (two writes per reconcile, status
//!   stuck at `Running` when a play crashes). bosun writes once, after the run, with
//!   `k8s_status` requests on the CR merged into the same write, and only when the status
//!   differs; a successful run that changed nothing keeps the previous `Running` condition
//!   and its `ansibleResult` (see [`bosun_ansible::status`]). A restart over converged
//!   resources therefore writes nothing.
//! * **No PATCH for unchanged objects**: the engine's `k8s` skips a PATCH that would be a
//!   no-op (`changed` stays as Ansible reports it).
//! * **No read before creating what the dependent watch's cache lacks**: ansible-operator's
//!   proxy serves a role's reads of watched kinds from its cache; bosun's metadata caches
//!   answer "absent" (see `reconcile::ChildCaches`), and a `k8s` create goes out without its
//!   GET — a create that meets the object after all reads it and goes on as without a cache.
//! * **`requeue_after` does not skip the status write** (ansible-operator returns at once,
//!   leaving the status as `Running`). In a finalizer run it still means "not done yet":
//!   the finalizer is kept and the run repeated after that period.
//! * **No status write after a successful finalizer run**: the object is about to go.
//! * **A failure publishes a Warning Event** (reason `Failed`, the failed tasks' messages)
//!   once per distinct message, and is retried with exponential backoff; the `Failure`
//!   condition's message is capped at 8 KiB (a hostile spec can make a task fail with a
//!   message as large as the spec).
//! * **Dependent watches** are metadata-only caches of each kind the role manages, set up
//!   after the run (ansible-operator's proxy sets them up on create, and keeps full objects).
//!   They select children by owner reference (or the `operator-sdk/primary-resource`
//!   annotations), not by a label: objects created by ansible-operator carry no bosun label,
//!   and adding one would change every object a role creates. See [`AnsibleFlavor`].
//! * Roles are also looked for in the watches file's directory (after `ANSIBLE_ROLES_PATH`),
//!   so `bosun run --watches path/to/watches.yaml` works from any directory.
//! * `maxRunnerArtifacts` is accepted and has no effect on natively run entries (there is no
//!   runner directory).
//!
//! # Real Ansible as the fallback
//!
//! An entry whose role or playbook the native engine refuses (a construct outside its
//! subset) runs under real Ansible instead ([`bosun_ansible_runner`]), chosen per entry at
//! load by [`AnsibleOptions::engine`] (`--ansible-engine=auto|native|ansible`); the log says
//! which engine runs each entry and why. Without real Ansible installed such an entry fails
//! to load with the install hint.
pub mod crd;
pub mod engines;
pub mod error;
pub mod latest;
pub mod metrics;
pub mod rbac;
pub mod reconcile;
pub mod scan;
pub mod spec_schema;
pub mod writes;

use std::path::PathBuf;
use std::sync::Arc;

use bosun_ansible::{LoadOptions, Role};
use bosun_ansible_runner::{Engine, Fallback, Installation, Refusal};
use bosun_runtime::rbac::Rbac;
use bosun_watches::{Entry, Flavor, Host, Next, Runner, WatchOperator};
use futures::future::BoxFuture;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::core::{DynamicObject, GroupVersionKind};

pub use bosun_ansible_runner::EngineFlag;
pub use error::Error;
pub use scan::{Gap, Scan};

/// Options for every role and playbook entry of a watches file.
#[derive(Clone, Debug)]
pub struct AnsibleOptions {
    /// Where roles and collections are found: `ANSIBLE_ROLES_PATH`,
    /// `ANSIBLE_COLLECTIONS_PATH`, the working directory ([`LoadOptions::from_env`]).
    pub load: LoadOptions,
    /// The watches file's directory: roles are also found in `<dir>/roles/` (after
    /// `ANSIBLE_ROLES_PATH`; operator-sdk's images run from that directory).
    pub watches_dir: Option<PathBuf>,
    /// Which engine runs each entry (`--ansible-engine`).
    pub engine: EngineFlag,
    /// Real Ansible, when installed ([`Installation::find`]: `BOSUN_ANSIBLE_RUNNER`, else
    /// `ansible-runner` on `PATH`).
    pub ansible: Option<Installation>,
}

impl Default for AnsibleOptions {
    fn default() -> Self {
        AnsibleOptions {
            load: LoadOptions::from_env(),
            watches_dir: None,
            engine: EngineFlag::Auto,
            ansible: Installation::find(),
        }
    }
}

/// The finalizer of an entry, loaded.
pub struct FinalizerRun {
    pub name: String,
    /// None: the entry's own role or playbook runs, with `vars`.
    pub role: Option<Arc<Role>>,
    pub vars: serde_json::Map<String, serde_json::Value>,
}

/// A role or playbook entry, loaded.
///
/// Its child watches use no label selector ([`Flavor::child_selector`] is empty): each kind
/// the role manages is cached as metadata for every object of that kind in the watched
/// namespaces, and a child maps to its owner by owner reference or annotations. Measured
/// with the benchmark (`--n 100 --foreign 5000`): 5,000 unrelated headless Services beside
/// 100 seed BookStores raised the operator's RSS from 6.3 MB to 22.4 MB, about 3.3 KB per
/// unrelated object of a kind the role manages. A label selector would leave those out, but
/// would need a label written onto every object a role creates — objects then differ from
/// what Ansible makes, and children made by ansible-operator before a migration would each
/// need a write to be recognised. ansible-operator itself caches every object of those kinds
/// in full, so bosun stays below it either way.
pub struct AnsibleFlavor {
    pub role: Arc<Role>,
    pub finalizer: Option<FinalizerRun>,
    /// One discovery cache per entry, shared by all its runs.
    pub discovery: Arc<bosun_ansible::Discovery>,
    /// The writes the cache has not shown yet.
    pub latest: latest::Latest,
    /// What the role (and finalizer) touch, as read from their text.
    pub scan: Scan,
    watch_annotations: bool,
    crd: CustomResourceDefinition,
    rbac: Rbac,
    /// Set when the entry runs under real Ansible (then `role` is an empty stand-in).
    pub fallback: Option<Arc<Fallback>>,
    /// The `GVK` label of the entry's `ansible_operator_reconciles` series.
    gvk_label: Arc<str>,
    /// Set when no engine can run the entry (why): its custom resources are reported
    /// (`Failure` condition, a Warning Event) and the watches file's other entries run.
    pub refused: Option<Arc<str>>,
    /// The child kinds whose caches start with the controller ([`Flavor::warm_kinds`]).
    warm: Vec<GroupVersionKind>,
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The role or playbook cannot be run: not found, malformed, or outside the subset
    /// (the message names the file:line:col and the construct).
    #[error("{entry}: {what}: {source}")]
    Role {
        entry: String,
        what: String,
        source: bosun_ansible::Error,
    },
    #[error("{entry}: CRD: {source}")]
    Crd {
        entry: String,
        source: serde_json::Error,
    },
    #[error("{entry}: not a role or playbook entry (it runs {runner})")]
    NotAnsible { entry: String, runner: String },
    /// The entry needs real Ansible (`why`), which is not installed.
    #[error("{entry}: needs real Ansible ({why}); {hint}")]
    NeedsAnsible {
        entry: String,
        why: String,
        hint: &'static str,
    },
    /// The role or playbook for real Ansible was not found.
    #[error("{entry}: {what}")]
    Target { entry: String, what: String },
}

fn describe(r: &Runner) -> String {
    match r {
        Runner::Role(n) => format!("role {n}"),
        Runner::Playbook(p) => format!("playbook {}", p.display()),
        Runner::Chart(c) => format!("chart {}", c.display()),
    }
}

fn load_one(
    entry: &Entry,
    runner: &Runner,
    opts: &LoadOptions,
    what: &str,
) -> Result<Role, LoadError> {
    let spec = match runner {
        Runner::Role(n) => n.clone(),
        Runner::Playbook(p) => p.display().to_string(),
        Runner::Chart(_) => {
            return Err(LoadError::NotAnsible {
                entry: entry.describe(),
                runner: describe(runner),
            })
        }
    };
    Role::load(&spec, opts).map_err(|source| LoadError::Role {
        entry: entry.describe(),
        what: format!("{what}{}", describe(runner)),
        source,
    })
}

/// The role, finalizer and scan of a natively loaded entry.
type Native = (Arc<Role>, Option<FinalizerRun>, Scan);

impl AnsibleFlavor {
    /// Loads the entry's role or playbook and its finalizer's (once: every run reuses them),
    /// picks the engine that runs them, and derives the CRD and RBAC.
    pub fn load(entry: &Entry, opts: &AnsibleOptions) -> Result<AnsibleFlavor, LoadError> {
        let mut lo = opts.load.clone();
        if let Some(dir) = &opts.watches_dir {
            lo.roles_path.push(dir.clone());
        }
        let (native, refused) = match Self::load_native(entry, &lo) {
            Ok(n) => (Some(n), None),
            Err(e @ LoadError::Role { .. }) => (None, Some(e)),
            Err(e) => return Err(e),
        };
        let (source, what) = match &refused {
            Some(LoadError::Role { source, what, .. }) => (Some(source), what.as_str()),
            _ => (None, ""),
        };
        // "finalizer role x: the native engine does not support <file:line:col>: ..."
        let why = |why: String| match what {
            "" => why,
            w => format!("{w}: {why}"),
        };
        let installed = opts.ansible.as_ref();
        match (
            bosun_ansible_runner::choose(opts.engine, source, installed.is_some()),
            installed,
        ) {
            (Ok(Engine::Ansible { why: reason }), Some(install)) => {
                let fallback = Self::fallback(entry, &lo, install, why(reason))?;
                tracing::info!(entry = %entry.describe(), engine = "ansible", reason = %fallback.why, "real Ansible runs this entry");
                engines::Engines::global().set(
                    &metrics::gvk_label(&entry.gvk),
                    "ansible",
                    &fallback.why,
                );
                let n = native.unwrap_or_else(|| placeholder(entry, &fallback));
                Self::assemble(entry, n, Some(Arc::new(fallback)))
            }
            (Err(Refusal::NotInstalled { why: reason }), _) => Err(LoadError::NeedsAnsible {
                entry: entry.describe(),
                why: why(reason),
                hint: bosun_ansible_runner::INSTALL_HINT,
            }),
            // Native, or refused with the native loader's error.
            _ => match (native, refused) {
                (Some(n), _) => {
                    tracing::info!(entry = %entry.describe(), engine = "native", "the native engine runs this entry");
                    engines::Engines::global().set(&metrics::gvk_label(&entry.gvk), "native", "");
                    Self::assemble(entry, n, None)
                }
                (None, Some(e)) => Err(e),
                (None, None) => Err(LoadError::Target {
                    entry: entry.describe(),
                    what: "no engine can run it".into(),
                }),
            },
        }
    }

    fn fallback(
        entry: &Entry,
        lo: &LoadOptions,
        install: &Installation,
        why: String,
    ) -> Result<Fallback, LoadError> {
        let target = |r: &Runner| {
            bosun_ansible_runner::target::resolve(r, lo).map_err(|what| LoadError::Target {
                entry: entry.describe(),
                what,
            })
        };
        let main = target(&entry.runner)?;
        let finalizer = match entry
            .ansible
            .finalizer
            .as_ref()
            .and_then(|f| f.runner.as_ref())
        {
            Some(r) => Some(target(r)?),
            None => None,
        };
        let mut fallback = Fallback::new(
            install.clone(),
            main,
            finalizer,
            why,
            lo.collections_paths.clone(),
        );
        fallback.roles_paths = ansible_roles_path(lo);
        fallback.check().map_err(|what| LoadError::Target {
            entry: entry.describe(),
            what,
        })?;
        Ok(fallback)
    }

    fn load_native(entry: &Entry, lo: &LoadOptions) -> Result<Native, LoadError> {
        let lo = lo.clone();
        let role = Arc::new(load_one(entry, &entry.runner, &lo, "")?);
        let mut scan = Scan::of(&role, &entry.gvk.kind);
        let finalizer = match &entry.ansible.finalizer {
            None => None,
            Some(f) => {
                let role = match &f.runner {
                    Some(r) => Some(Arc::new(load_one(entry, r, &lo, "finalizer ")?)),
                    None => None,
                };
                if let Some(r) = &role {
                    scan = scan.merge(Scan::of(r, &entry.gvk.kind));
                }
                Some(FinalizerRun {
                    name: f.name.clone(),
                    role,
                    vars: f.vars.clone(),
                })
            }
        };
        Ok((role, finalizer, scan))
    }

    fn assemble(
        entry: &Entry,
        native: Native,
        fallback: Option<Arc<Fallback>>,
    ) -> Result<AnsibleFlavor, LoadError> {
        let (role, finalizer, scan) = native;
        for gap in &scan.gaps {
            tracing::warn!(
                entry = %entry.describe(),
                "RBAC: {gap}; grant what it needs with an extra Role bound to bosun's ServiceAccount"
            );
        }
        // A stand-in role (real Ansible runs the entry, the native engine refused it) has no
        // plays: its role is found as real Ansible finds it.
        let dirs = match &fallback {
            Some(f) if role.plays.is_empty() => {
                spec_schema::target_dirs(&f.main, &f.collections_paths)
            }
            _ => spec_schema::role_dirs(&role),
        };
        let spec = spec_schema::spec_schema(
            spec_schema::read_defaults(&dirs).as_ref(),
            entry.ansible.snake_case_parameters,
        );
        let crd = crd::crd(&entry.gvk, &describe(&entry.runner), spec).map_err(|source| {
            LoadError::Crd {
                entry: entry.describe(),
                source,
            }
        })?;
        let rbac = rbac::rbac(entry, &scan);
        let warm = warm_kinds(entry, &scan);
        Ok(AnsibleFlavor {
            warm,
            role,
            finalizer,
            discovery: Arc::new(bosun_ansible::Discovery::new()),
            latest: Default::default(),
            scan,
            watch_annotations: entry.ansible.watch_annotations_changes,
            crd,
            rbac,
            fallback,
            gvk_label: metrics::gvk_label(&entry.gvk).into(),
            refused: None,
        })
    }

    /// An entry no engine can run (`why`): it serves its CRD (open, as the scaffold's) and
    /// reports `why` on each of its custom resources; it runs nothing, adds no finalizer.
    pub fn refused(entry: &Entry, why: &LoadError) -> Result<AnsibleFlavor, LoadError> {
        let why = why.to_string();
        let spec = spec_schema::spec_schema(None, entry.ansible.snake_case_parameters);
        let crd = crd::crd(&entry.gvk, &describe(&entry.runner), spec).map_err(|source| {
            LoadError::Crd {
                entry: entry.describe(),
                source,
            }
        })?;
        let scan = Scan::default();
        Ok(AnsibleFlavor {
            role: Arc::new(Role {
                plays: Vec::new(),
                path: PathBuf::new(),
                templar: bosun_ansible::template::Templar::new(),
            }),
            finalizer: None,
            discovery: Arc::new(bosun_ansible::Discovery::new()),
            latest: Default::default(),
            rbac: rbac::rbac(entry, &scan),
            scan,
            watch_annotations: entry.ansible.watch_annotations_changes,
            crd,
            fallback: None,
            gvk_label: metrics::gvk_label(&entry.gvk).into(),
            refused: Some(why.into()),
            warm: Vec::new(),
        })
    }

    /// The entry as an operator.
    pub fn operator(
        entry: Entry,
        opts: &AnsibleOptions,
    ) -> Result<WatchOperator<AnsibleFlavor>, LoadError> {
        let flavor = AnsibleFlavor::load(&entry, opts)?;
        Ok(WatchOperator::new(entry, flavor))
    }

    /// Where the kinds the role touches could not be read from its text (the RBAC misses
    /// what they need).
    pub fn rbac_gaps(&self) -> impl Iterator<Item = &Gap> {
        self.scan.gaps.iter()
    }
}

impl Flavor for AnsibleFlavor {
    type Error = Error;
    const PERIOD_ANNOTATION: &'static str = reconcile::PERIOD_ANNOTATION;
    const MANAGER: &'static str = "bosun-ansible";
    /// What the roles' `osdk_metric` tasks record and ansible-operator's
    /// `ansible_operator_reconciles` ([`metrics`]), served with the runtime's metrics.
    fn metrics_text(&self) -> Option<(&'static str, bosun_runtime::metrics::TextSource)> {
        Some(("osdk_metric", || {
            let mut text = bosun_ansible::metrics::UserMetrics::global().encode_openmetrics();
            text.push_str(&metrics::Reconciles::global().encode_openmetrics());
            text.push_str(&engines::Engines::global().encode_openmetrics());
            text
        }))
    }

    /// ansible-operator's `--reconcile-period` default.
    const DEFAULT_PERIOD: Option<std::time::Duration> =
        Some(std::time::Duration::from_secs(10 * 3600));

    fn crd(&self) -> CustomResourceDefinition {
        self.crd.clone()
    }

    fn rbac(&self) -> Rbac {
        self.rbac.clone()
    }

    fn watches_annotations(&self) -> bool {
        self.watch_annotations
    }

    /// No label: children are matched by owner reference (see [`AnsibleFlavor`]).
    fn child_selector(&self, _entry: &Entry) -> String {
        String::new()
    }

    /// The kinds the role's `k8s` tasks create, as written in its text: a new leader (or a
    /// restarted replica) starts working with their caches listed, instead of each kind's
    /// first run listing every custom resource's children of it. Kinds only known at run
    /// time (templated, or a role under real Ansible) and custom kinds are still started by
    /// the first run that touches them.
    fn warm_kinds(&self) -> Vec<GroupVersionKind> {
        self.warm.clone()
    }

    /// ansible-operator's dependent predicate ignores creates: the run that created a child
    /// needs no second run when it appears (at 1000 CRs that second wave made convergence
    /// take 2.7 times the write floor instead of 1.2).
    fn child_creates_trigger(&self) -> bool {
        false
    }

    /// The custom resources are cached packed ([`bosun_watches::packed`]): spec and status as
    /// JSON text, which the reconcile parses back. Every annotation is kept: the role is
    /// given the whole object.
    fn slim_primary(&self) -> Option<fn(&mut DynamicObject)> {
        Some(bosun_watches::packed::pack_data)
    }

    fn reconcile(
        obj: Arc<DynamicObject>,
        host: Arc<Host<Self>>,
    ) -> BoxFuture<'static, Result<Next, Error>> {
        let timer = metrics::Reconciles::global().timer(host.flavor.gvk_label.clone());
        // The cache keeps it packed (see `slim_primary`).
        let obj = bosun_watches::packed::unpacked(obj);
        if let Some(why) = host.flavor.refused.clone() {
            return Box::pin(async move {
                let _timer = timer;
                reconcile::refused(obj, host, why).await
            });
        }
        if let Some(fb) = host.flavor.fallback.clone() {
            return Box::pin(async move {
                let _timer = timer;
                bosun_ansible_runner::reconcile::reconcile(obj, host, fb)
                    .await
                    .map_err(fallback_error)
            });
        }
        Box::pin(async move {
            let _timer = timer;
            reconcile::reconcile(obj, host).await
        })
    }
}

/// The kinds whose child caches start with the controller: the role's literal `k8s` kinds,
/// filtered as [`Host::watch_touched_kinds`] filters a run's (never the primary kind or a
/// blacklisted one, nothing without `watchDependentResources`, cluster-scoped kinds only
/// with `watchClusterScopedResources`) — the kinds [`rbac::rbac`] grants `watch` on. A kind's
/// scope takes discovery, which loading has not, so only Kubernetes' own kinds (whose scope
/// is known) are started here; a custom kind is left to the first run that touches it, as
/// before (its CRD may not even be served yet: roles often create it).
fn warm_kinds(entry: &Entry, scan: &Scan) -> Vec<GroupVersionKind> {
    use bosun_watches::kinds::{builtin_group, resource_of};
    if !entry.watch_dependent_resources {
        return Vec::new();
    }
    let a = &entry.ansible;
    scan.managed
        .iter()
        .filter_map(|(api_version, kind)| {
            let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
            let gvk = GroupVersionKind::gvk(group, version, kind);
            let own = group == entry.gvk.group && kind == &entry.gvk.kind;
            let blacklisted = a
                .blacklist
                .iter()
                .any(|b| b.group == group && &b.kind == kind);
            let builtin = builtin_group(kind) == Some(group);
            let namespaced = resource_of(&gvk).1;
            (!own && !blacklisted && builtin && (namespaced || a.watch_cluster_scoped_resources))
                .then_some(gvk)
        })
        .collect()
}

/// The roles path real Ansible is given: each place the native loader looks for roles, as a
/// directory of roles — `<p>` and, when it has one, `<p>/roles` (the watches file's
/// directory gives the project's `roles/`, as operator-sdk's image and `make run` do).
fn ansible_roles_path(lo: &LoadOptions) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for p in &lo.roles_path {
        out.push(p.clone());
        let sub = p.join("roles");
        if sub.is_dir() {
            out.push(sub);
        }
    }
    out
}

/// A fallback reconcile's error as this flavour's (same categories).
fn fallback_error(e: bosun_ansible_runner::Error) -> Error {
    use bosun_ansible_runner::Error as F;
    match e {
        F::Run(m) | F::Setup(m) => Error::Run(m),
        F::Annotation(m) => Error::Annotation(m),
        F::Kube(e) => Error::Kube(e),
    }
}

/// What stands for the native role of an entry the native engine cannot load: nothing to
/// run natively, and a scan that says the RBAC could not be read from the role.
fn placeholder(entry: &Entry, fallback: &Fallback) -> Native {
    let role = Role {
        plays: Vec::new(),
        path: PathBuf::from(fallback.main.describe()),
        templar: bosun_ansible::template::Templar::new(),
    };
    let mut scan = Scan::default();
    scan.gaps.insert(Gap {
        location: fallback.main.describe(),
        what: "runs under real Ansible: the kinds it touches are not read from its text".into(),
    });
    let finalizer = entry.ansible.finalizer.as_ref().map(|f| FinalizerRun {
        name: f.name.clone(),
        role: None,
        vars: f.vars.clone(),
    });
    (Arc::new(role), finalizer, scan)
}

/// Loads every role and playbook entry of a watches file (chart entries are skipped). One
/// entry's problem is that entry's: an entry no engine can run is logged once (error level,
/// with why), counted in `bosun_ansible_entry_engine` as `refused`, and becomes an operator
/// that reports why on its custom resources — the other entries run. Only an entry whose
/// CRD cannot even be described is an error.
pub fn operators(
    entries: &[Entry],
    opts: &AnsibleOptions,
) -> Result<Vec<WatchOperator<AnsibleFlavor>>, LoadError> {
    entries
        .iter()
        .filter(|e| matches!(e.runner, Runner::Role(_) | Runner::Playbook(_)))
        .map(|e| match AnsibleFlavor::operator(e.clone(), opts) {
            Ok(op) => Ok(op),
            Err(why) => {
                tracing::error!(entry = %e.describe(), error = %why, "this entry cannot run: its custom resources report why; the other entries run");
                engines::Engines::global().set(
                    &metrics::gvk_label(&e.gvk),
                    "refused",
                    &why.to_string(),
                );
                let flavor = AnsibleFlavor::refused(e, &why)?;
                Ok(WatchOperator::new(e.clone(), flavor))
            }
        })
        .collect()
}
