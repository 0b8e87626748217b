//! The one list of operators a binary serves. Every command reads it: `bosun run`,
//! `crd`, `rbac`, `manifests`, `dev`, and the tests' ServiceAccount (through each operator's
//! [`Operator::rbac`]). The binary's `main` chooses the list once ([`crate::main`] takes an
//! [`Operators`]); bosun's own is [`builtin`].
//!
//! Two sources: the operators written in code (`--operators bookstore,myownshell,vmgroup,postgres`
//! for bosun's own), and the entries of an operator-sdk `watches.yaml` (`--watches FILE`): a
//! `chart` entry runs as a Helm-based operator, a `role` or `playbook` entry as an
//! Ansible-based one. With `--watches` and no `--operators`, only the watched kinds run; with
//! neither, the list's default ones (bosun's: the BookStore operator).
use std::path::Path;
use std::sync::{Arc, OnceLock};

use bosun_ansible_operator::{AnsibleOptions, EngineFlag};
use bosun_helm_operator::{HelmOptions, Storage};
use bosun_runtime::manager::Operator;
use bosun_watches::WatchesFile;

/// Reads one setting of the environment the operators are configured from.
pub type Lookup<'a> = &'a dyn Fn(&str) -> Option<String>;

type Build = dyn Fn(Lookup) -> Vec<Arc<dyn Operator>> + Send + Sync;

/// The operators written in code that a binary serves, and which of them run when no
/// `--operators` is given.
pub struct Operators {
    build: Box<Build>,
    default: Option<Vec<String>>,
}

impl Operators {
    /// The operators `build` returns, configured from the environment it is given (the
    /// process's for `run`, the Deployment's for `manifests`, so that the CRDs and RBAC printed
    /// are those of the pods). All of them run by default.
    pub fn new(build: impl Fn(Lookup) -> Vec<Arc<dyn Operator>> + Send + Sync + 'static) -> Self {
        Operators {
            build: Box::new(build),
            default: None,
        }
    }

    /// The names of those that run when neither `--operators` nor `--watches` is given.
    fn default_names(&self, get: Lookup) -> Vec<String> {
        match &self.default {
            Some(names) => names.clone(),
            None => (self.build)(get)
                .iter()
                .map(|o| o.name().to_string())
                .collect(),
        }
    }

    /// Only these run when neither `--operators` nor `--watches` is given.
    pub fn run_by_default(mut self, names: &[&str]) -> Self {
        self.default = Some(names.iter().map(|s| s.to_string()).collect());
        self
    }
}

static INSTALLED: OnceLock<Operators> = OnceLock::new();

/// Makes `ops` the list every command of this process reads; once per process.
pub fn install(ops: Operators) -> anyhow::Result<()> {
    INSTALLED
        .set(ops)
        .map_err(|_| anyhow::anyhow!("the operators of this process were already chosen"))
}

/// The installed list; bosun's own when none was installed (this crate's unit tests), or none
/// without them.
fn installed() -> &'static Operators {
    INSTALLED.get_or_init(fallback)
}

#[cfg(feature = "builtin")]
fn fallback() -> Operators {
    builtin()
}

#[cfg(not(feature = "builtin"))]
fn fallback() -> Operators {
    Operators::new(|_| Vec::new())
}

/// bosun's own operators (feature `builtin`, on by default); BookStore runs by default.
#[cfg(feature = "builtin")]
pub fn builtin() -> Operators {
    Operators::new(bosun_coded_with).run_by_default(&["bookstore"])
}

/// Every operator written in code, by name, configured from the process environment.
pub fn coded() -> Vec<Arc<dyn Operator>> {
    coded_with(&|k: &str| std::env::var(k).ok().filter(|v| !v.is_empty()))
}

/// Every operator written in code, configured from the environment `get` reads.
pub fn coded_with(get: Lookup) -> Vec<Arc<dyn Operator>> {
    (installed().build)(get)
}

/// The coded operators that run when neither `--operators` nor `--watches` is given.
pub fn default_names() -> Vec<String> {
    installed().default_names(&|k: &str| std::env::var(k).ok().filter(|v| !v.is_empty()))
}

#[cfg(feature = "builtin")]
fn bosun_coded_with(get: Lookup) -> Vec<Arc<dyn Operator>> {
    vec![
        // With the v1alpha1 ↔ v1 conversion webhook when BOSUN_BOOKSTORE_WEBHOOK_ADDR is set.
        bosun_bookstore::webhook::from_lookup(get),
        Arc::new(bosun_myownshell::MyOwnShellOperator),
        // Settings from BOSUN_VMGROUP_* (see bosun_vmgroup::operator); not run by default.
        Arc::new(bosun_vmgroup::VmGroupOperator::new(
            bosun_vmgroup::operator::Settings::from_lookup(get),
        )),
        // PostgresCluster (seed 003); its instances' pods run `bosun pg instance`.
        Arc::new(bosun_postgres::PostgresOperator),
    ]
}

/// The operators of `all` named in `names`, in that order; an unknown name is an error that
/// lists the known ones.
fn select_from(
    all: Vec<Arc<dyn Operator>>,
    names: &[String],
) -> anyhow::Result<Vec<Arc<dyn Operator>>> {
    let mut out = Vec::new();
    for n in names.iter().filter(|n| !n.is_empty()) {
        match all.iter().find(|o| o.name() == n) {
            Some(op) if !out.iter().any(|o: &Arc<dyn Operator>| o.name() == n) => {
                out.push(op.clone())
            }
            Some(_) => {}
            None => anyhow::bail!(
                "unknown operator {n:?} (available: {})",
                all.iter()
                    .map(|o| o.name().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
    Ok(out)
}

/// What selects the operators of a command.
#[derive(Clone, Debug, Default)]
pub struct Sources<'a> {
    /// `--operators`; None when not given.
    pub operators: Option<&'a [String]>,
    /// `--watches`.
    pub watches: Option<&'a Path>,
    /// `--release-storage` for chart entries.
    pub release_storage: Storage,
    /// `--suppress-override-values` for chart entries.
    pub suppress_override_values: bool,
    /// `--reconcile-period`: the period of entries that set none.
    pub reconcile_period: Option<std::time::Duration>,
    /// `--ansible-engine` for role and playbook entries.
    pub ansible_engine: EngineFlag,
    /// The environment the coded operators are configured from (None: the process's). The
    /// manifests pass the Deployment's, so that CRDs and RBAC match what the pod runs.
    pub env: Option<&'a std::collections::BTreeMap<String, String>>,
}

/// The operators a command runs or describes.
pub fn operators(src: &Sources) -> anyhow::Result<Vec<Arc<dyn Operator>>> {
    let all = match src.env {
        Some(env) => coded_with(&|k: &str| env.get(k).cloned()),
        None => coded(),
    };
    let mut ops = match (src.operators, src.watches) {
        (Some(names), _) => select_from(all, names)?,
        (None, Some(_)) => Vec::new(),
        (None, None) => select_from(all, &default_names())?,
    };
    if let Some(path) = src.watches {
        ops.extend(watched(path, src)?);
    }
    unique_crds(&ops)?;
    Ok(ops)
}

/// The operators of a watches file; its warnings are printed.
pub fn watched(path: &Path, src: &Sources) -> anyhow::Result<Vec<Arc<dyn Operator>>> {
    let mut file = WatchesFile::load(path)?;
    if let Some(p) = src.reconcile_period {
        for e in file
            .entries
            .iter_mut()
            .filter(|e| e.reconcile_period.is_none())
        {
            e.reconcile_period = Some(p);
        }
    }
    for w in &file.warnings {
        eprintln!("bosun: warning: {}", w.0);
    }
    let mut ops: Vec<Arc<dyn Operator>> = Vec::new();
    let helm = HelmOptions {
        storage: src.release_storage,
        suppress_override_values: src.suppress_override_values,
        ..Default::default()
    };
    for op in bosun_helm_operator::operators(&file.entries, &helm)? {
        for w in &op.flavor().warnings {
            eprintln!("bosun: warning: {}: {w}", op.entry().describe());
        }
        ops.push(Arc::new(op));
    }
    let ansible = AnsibleOptions {
        watches_dir: path.parent().map(Path::to_path_buf),
        engine: src.ansible_engine,
        ..Default::default()
    };
    for op in bosun_ansible_operator::operators(&file.entries, &ansible)? {
        ops.push(Arc::new(op));
    }
    Ok(ops)
}

/// Two operators may not serve the same CRD (the seed's chart BookStore is
/// `charts.example.com/v1alpha1`, the coded one `v1` of the same CRD name): they would
/// overwrite each other's definition and fight over the objects.
pub fn unique_crds(ops: &[Arc<dyn Operator>]) -> anyhow::Result<()> {
    let mut seen: Vec<(String, String, String)> = Vec::new();
    for op in ops {
        for crd in op.crds() {
            let name = crd.metadata.name.clone().unwrap_or_default();
            let versions = crd
                .spec
                .versions
                .iter()
                .map(|v| v.name.clone())
                .collect::<Vec<_>>()
                .join(",");
            if let Some((_, other, other_versions)) = seen.iter().find(|(n, _, _)| *n == name) {
                anyhow::bail!(
                    "two operators serve the CRD {name}: {other} ({other_versions}) and {} ({versions}). Run or print them separately (for instance --operators for the coded one, --watches alone for the watched one)",
                    op.name()
                );
            }
            seen.push((name, op.name().to_string(), versions));
        }
    }
    Ok(())
}

/// bosun's own operators are what these tests select, print and run.
#[cfg(all(test, feature = "builtin"))]
mod tests {
    use super::*;

    fn select(names: &[String]) -> anyhow::Result<Vec<Arc<dyn Operator>>> {
        select_from(coded(), names)
    }

    fn repo() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    #[test]
    fn names_are_unique_and_selectable() {
        let names: Vec<String> = coded().iter().map(|o| o.name().to_string()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len(), "operator names are unique");
        let picked = select(&names).expect("every listed operator is selectable");
        assert_eq!(picked.len(), names.len());
        assert_eq!(
            select(&["bookstore".into(), "bookstore".into()])
                .expect("ok")
                .len(),
            1
        );
    }

    #[test]
    fn a_list_runs_all_its_operators_by_default_and_bosuns_runs_bookstore() {
        let none = &|_: &str| None;
        let mine = Operators::new(|_| vec![Arc::new(bosun_myownshell::MyOwnShellOperator)]);
        assert_eq!(mine.default_names(none), ["myownshell"]);
        assert_eq!(builtin().default_names(none), ["bookstore"]);
        // The build reads the environment it is given (the Deployment's for `manifests`).
        let seen = Operators::new(|get| {
            assert_eq!(get("WHO").as_deref(), Some("deployment"));
            vec![]
        });
        assert!(seen
            .default_names(&|k: &str| (k == "WHO").then(|| "deployment".to_string()))
            .is_empty());
    }

    #[test]
    fn unknown_names_are_refused_with_the_list() {
        let err = select(&["nope".into()]).err().expect("refused").to_string();
        assert!(
            err.contains("nope") && err.contains("bookstore") && err.contains("myownshell"),
            "{err}"
        );
    }

    #[test]
    fn every_operator_serves_crds_and_needs_no_wildcard() {
        for op in coded() {
            assert!(!op.crds().is_empty(), "{} serves a CRD", op.name());
            let r = op.rbac();
            assert!(
                r.namespaced
                    .iter()
                    .chain(&r.cluster)
                    .all(|r| !bosun_runtime::rbac::has_wildcard(r)),
                "{} asks for a wildcard",
                op.name()
            );
        }
    }

    #[test]
    fn watches_alone_run_only_the_watched_kinds() {
        let w = repo().join("examples/helm-bookstore/watches.yaml");
        let ops = operators(&Sources {
            watches: Some(&w),
            ..Default::default()
        })
        .expect("ops");
        let names: Vec<&str> = ops.iter().map(|o| o.name()).collect();
        assert_eq!(names, ["bookstore.charts.example.com"]);
        let none = operators(&Sources::default()).expect("default");
        assert_eq!(
            none.iter().map(|o| o.name()).collect::<Vec<_>>(),
            ["bookstore"]
        );
    }

    #[test]
    fn the_coded_and_the_chart_bookstore_are_refused_together() {
        let w = repo().join("examples/helm-bookstore/watches.yaml");
        let names = vec!["bookstore".to_string()];
        let err = operators(&Sources {
            operators: Some(&names),
            watches: Some(&w),
            ..Default::default()
        })
        .err()
        .expect("refused")
        .to_string();
        assert!(
            err.contains("bookstores.charts.example.com")
                && err.contains("v1alpha1")
                && err.contains("(v1)"),
            "{err}"
        );
    }

    #[test]
    fn a_role_entry_runs_as_an_ansible_operator() {
        let w = repo().join("examples/ansible-bookstore/watches.yaml");
        let ops = operators(&Sources {
            watches: Some(&w),
            ..Default::default()
        })
        .expect("the seed's Ansible watches file loads");
        assert_eq!(
            ops.iter().map(|o| o.name()).collect::<Vec<_>>(),
            ["bookstore.charts.example.com"]
        );
        assert!(!ops[0].crds().is_empty() && !ops[0].rbac().namespaced.is_empty());
    }

    #[test]
    fn the_ansible_engine_flag_reaches_each_entry() {
        let dir = tempfile::tempdir().expect("dir");
        let tasks = dir.path().join("roles/shelly/tasks");
        std::fs::create_dir_all(&tasks).expect("mkdir");
        std::fs::write(tasks.join("main.yml"), "- command: echo hi\n").expect("role");
        let w = dir.path().join("watches.yaml");
        std::fs::write(
            &w,
            "- {group: test.bosun.dev, version: v1, kind: Shell, role: shelly}\n",
        )
        .expect("watches");
        // One entry's problem is that entry's: it loads as an operator that reports why on
        // its custom resources, and the reason is the native engine's, not a fallback.
        let ops = operators(&Sources {
            watches: Some(&w),
            ansible_engine: EngineFlag::Native,
            ..Default::default()
        })
        .expect("a refused entry does not stop the others");
        assert_eq!(ops.len(), 1);
        let metrics = bosun_ansible_operator::engines::Engines::global().encode_openmetrics();
        let line = metrics
            .lines()
            .find(|l| l.contains("Shell") && l.contains("engine=\"refused\""))
            .unwrap_or_else(|| panic!("no refused entry in:\n{metrics}"));
        assert!(
            line.contains("shelly/tasks/main.yml:1:") && line.contains("'command'"),
            "{line}"
        );
        assert!(!line.contains("real Ansible"), "{line}");
    }
}
