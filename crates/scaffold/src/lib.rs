//! `bosun init` and `bosun create api`: operator-sdk's project layouts — same verbs, flags,
//! paths and names — generated offline, for projects that `bosun run` runs.
//!
//! Each command plans a [`files::Tree`] (path → bytes) from its options with pure functions,
//! stages it in a hidden directory inside the project, asks a [`Derive`] for the CRDs and RBAC
//! of the staged `watches.yaml` (the same code as `bosun crd` and `bosun rbac --watches`, so
//! the generated `config/crd` and `config/rbac` are fresh by construction), and only then moves
//! the files into place. Anything refused is refused before a file is written.
pub mod ansible;
pub mod bundle;
pub mod chart;
pub mod ci;
pub mod commands;
mod error;
pub mod files;
pub mod helm;
pub mod kustomize;
pub mod names;
mod net;
pub mod oci;
pub mod project;
pub mod repo;
pub mod rust;
pub mod scorecard;
pub mod top;
pub mod validate;
pub mod watches;

use std::path::Path;

pub use error::Error;

/// The plugins bosun scaffolds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plugin {
    Helm,
    Ansible,
    /// A Cargo project on `bosun-runtime` ([`rust`]).
    Rust,
}

impl Plugin {
    /// operator-sdk's plugin keys: `helm`, `helm.sdk.operatorframework.io/v1`, `ansible`,
    /// `ansible.sdk.operatorframework.io/v1`; bosun's own `rust` (`rust.bosun.dev/v1`).
    pub fn parse(s: &str) -> Result<Plugin, Error> {
        match s.trim() {
            "helm" | "helm/v1" | "helm.sdk.operatorframework.io/v1" => Ok(Plugin::Helm),
            "ansible" | "ansible/v1" | "ansible.sdk.operatorframework.io/v1" => Ok(Plugin::Ansible),
            "rust" | "rust/v1" | rust::LAYOUT => Ok(Plugin::Rust),
            other => Err(Error::UnknownPlugin(other.to_string())),
        }
    }

    /// The PROJECT file's `layout`.
    pub fn layout(self) -> &'static str {
        match self {
            Plugin::Helm => "helm.sdk.operatorframework.io/v1",
            Plugin::Ansible => "ansible.sdk.operatorframework.io/v1",
            Plugin::Rust => rust::LAYOUT,
        }
    }
}

/// What bosun derives from a watches file: its CRDs and the RBAC objects of an install.
#[derive(Debug, Clone, Default)]
pub struct Derived {
    /// As `bosun crd --watches watches.yaml` prints them, in order.
    pub crds: Vec<serde_json::Value>,
    /// As `bosun rbac --watches watches.yaml --namespace <namespace>` prints them, in order.
    pub rbac: Vec<serde_json::Value>,
}

/// The CLI's derivation (it owns the operator registry), for the `watches.yaml` in `dir` as
/// `bosun crd|rbac --watches watches.yaml` print it when run in `dir` (the paths of roles and
/// playbooks in the CRDs' descriptions are then the project's, not the staging directory's).
/// `dir` is None before any kind exists: the runtime's own rules only.
pub trait Derive {
    fn derive(
        &self,
        dir: Option<&Path>,
        namespace: &str,
    ) -> Result<Derived, Box<dyn std::error::Error + Send + Sync>>;
}
