//! What `init` and `create api` refuse, each message naming the fix.
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("unknown plugin {0:?}: bosun scaffolds --plugins helm, ansible or rust")]
    UnknownPlugin(String),
    #[error("invalid {what} {value:?}: use {rule}")]
    BadName {
        what: String,
        value: String,
        rule: String,
    },
    #[error("{dir} is not empty (found {found}): run `bosun init` in an empty directory")]
    NotEmpty { dir: PathBuf, found: String },
    #[error("no PROJECT file in {0}: run `bosun init --plugins helm` (or ansible) there first, or change to the project's directory")]
    NoProject(PathBuf),
    #[error("{path}: {message}")]
    BadProject { path: PathBuf, message: String },
    #[error("this project's layout is {layout}, not {plugin}: run `bosun create api` with the project's own plugin (or none)")]
    WrongPlugin { layout: String, plugin: String },
    #[error("the API resource {0} already exists: choose another --kind (or --version)")]
    Duplicate(String),
    #[error("multiple groups are not allowed by default (the project serves {existing}, not {wanted}): set 'multigroup: true' in the PROJECT file, or pass --group {short}")]
    SecondGroup {
        existing: String,
        wanted: String,
        short: String,
    },
    #[error("--group, --version and --kind are needed for an Ansible-based or a Rust API: pass them (for example --group cache --version v1alpha1 --kind Memcached)")]
    MissingGvk,
    #[error("either --kind or --helm-chart is needed: pass --helm-chart DIR|CHART.tgz (the kind is then the chart's name), or --kind to start a new chart")]
    NothingToCreate,
    #[error("the chart {path} does not load: {message}. Fix the chart (`helm lint` shows the same problems) or pass another --helm-chart")]
    Chart { path: PathBuf, message: String },
    /// Fetching a chart from a repository (`--helm-chart-repo`); the message names the fix.
    #[error("{0}")]
    Repo(String),
    #[error("{0} already exists in this project: remove it, or choose another --kind")]
    RunnerExists(String),
    #[error("watches.yaml has no '# +kubebuilder:scaffold:watch' marker: add that line where `bosun create api` should add entries")]
    NoMarker,
    /// A flag of another plugin; the message names the right one.
    #[error("{0}")]
    Flag(String),
    #[error("src/lib.rs has no '{0}' line: add it where `bosun create api` should register the new kind")]
    NoRustMarker(String),
    #[error("--bosun-source {0}: no crates/bosun/Cargo.toml there; pass the root of a bosun checkout, or --bosun-git URL")]
    BadBosunSource(PathBuf),
    /// `init --plugins rust` with no source of bosun's crates; the message names the ways out.
    #[error("{0}")]
    NoBosunSource(String),
    #[error("writing {what} as YAML: {source}")]
    Yaml {
        what: String,
        #[source]
        source: serde_yaml::Error,
    },
    #[error("deriving the CRDs and RBAC: {0}")]
    Derive(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    pub(crate) fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
        move |source| Error::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}
