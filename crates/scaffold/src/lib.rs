//! `bosun init` and `bosun create api`: operator-sdk's project layouts — same verbs, flags,
//! paths and names — generated offline, for projects that `bosun run` runs.
//!
//! Each command plans a [`files::Tree`] (path → bytes) from its options with pure functions,
//! stages it in a hidden directory inside the project, asks a [`Derive`] for the CRDs and RBAC
//! of the staged `watches.yaml` (the same code as `bosun crd` and `bosun rbac --watches`, so
//! the generated `config/crd` and `config/rbac` are fresh by construction), and only then moves
//! the files into place. Anything refused is refused before a file is written.
pub mod chart;
mod error;
pub mod files;
pub mod helm;
pub mod names;
pub mod project;
pub mod watches;

use std::path::Path;

pub use error::Error;

/// The plugins bosun scaffolds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plugin {
    Helm,
}

impl Plugin {
    /// operator-sdk's plugin keys: `helm`, `helm.sdk.operatorframework.io/v1`.
    pub fn parse(s: &str) -> Result<Plugin, Error> {
        match s.trim() {
            "helm" | "helm/v1" | "helm.sdk.operatorframework.io/v1" => Ok(Plugin::Helm),
            other => Err(Error::UnknownPlugin(other.to_string())),
        }
    }
}

/// What bosun derives from a watches file: its CRDs and the RBAC objects of an install.
#[derive(Debug, Clone, Default)]
pub struct Derived {
    /// As `bosun crd --watches` prints them, in order.
    pub crds: Vec<serde_json::Value>,
    /// As `bosun rbac --watches --namespace` prints them, in order.
    pub rbac: Vec<serde_json::Value>,
}

/// The CLI's derivation (it owns the operator registry): `watches` is None before any kind
/// exists (the runtime's own rules only).
pub trait Derive {
    fn derive(
        &self,
        watches: Option<&Path>,
        namespace: &str,
    ) -> Result<Derived, Box<dyn std::error::Error + Send + Sync>>;
}
