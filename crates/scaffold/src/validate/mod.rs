//! `bosun bundle validate`: the checks of operator-framework's validation library
//! (`operator-sdk bundle validate`), written here from its documented rules. The default set
//! (bundle, CSV, CRD, object) always runs; `--select-optional suite=operatorframework` adds the
//! OperatorHub (capabilities, categories included), good-practices and deprecated-API checks.
//! Every finding names the file and the field; errors fail (exit 1), warnings do not.
mod default;
mod olmv1;
mod optional;

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Warning,
    Error,
}

/// One result: which check, where, what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub level: Level,
    /// The check's name (e.g. `bundle`, `csv`, `operatorhub`).
    pub check: &'static str,
    /// The file, relative to the bundle directory.
    pub file: String,
    /// The field, as a path (`spec.version`); empty for a whole file.
    pub field: String,
    pub message: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let level = match self.level {
            Level::Error => "ERROR",
            Level::Warning => "WARN",
        };
        if self.field.is_empty() {
            write!(
                f,
                "{level} [{}] {}: {}",
                self.check, self.file, self.message
            )
        } else {
            write!(
                f,
                "{level} [{}] {}: {}: {}",
                self.check, self.file, self.field, self.message
            )
        }
    }
}

/// Which checks to run.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `--select-optional suite=operatorframework` (or `name=operatorhub`, …).
    pub operatorhub: bool,
    pub good_practices: bool,
    pub deprecated_apis: bool,
    /// `--select-optional name=olmv1`: whether OLM v1 (operator-controller) would install it.
    pub olmv1: bool,
    /// `--optional-values k8s-version=1.25`: APIs removed by this version are errors.
    pub k8s_version: Option<(u64, u64)>,
    /// OperatorHub categories replacing the standard list (operator-framework's
    /// `OPERATOR_BUNDLE_CATEGORIES` file).
    pub categories: Option<Vec<String>>,
}

impl Options {
    /// operator-sdk's selectors: `suite=operatorframework`, `name=operatorhub`,
    /// `name=good-practices`, `name=alpha-deprecated-apis`.
    pub fn select(&mut self, selector: &str) -> Result<(), String> {
        match selector.trim() {
            "suite=operatorframework" => {
                self.operatorhub = true;
                self.good_practices = true;
                self.deprecated_apis = true;
            }
            // capabilities and categories are parts of the operatorhub checks, run whole.
            "name=operatorhub" | "suite=operatorhub" | "name=operatorhubv2"
            | "name=capabilities" | "name=categories" => self.operatorhub = true,
            "name=good-practices" => self.good_practices = true,
            "name=alpha-deprecated-apis" => self.deprecated_apis = true,
            "name=olmv1" | "suite=olmv1" => self.olmv1 = true,
            other => {
                return Err(format!(
                "unknown selector {other:?}: use suite=operatorframework, name=operatorhub (or operatorhubv2, capabilities, categories), name=good-practices, name=alpha-deprecated-apis or name=olmv1"
            ))
            }
        }
        Ok(())
    }
}

/// A manifest of the bundle.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// Relative to the bundle directory (`manifests/x.yaml`).
    pub file: String,
    pub object: Value,
}

/// A bundle directory as read from disk.
#[derive(Debug, Clone, Default)]
pub struct Bundle {
    pub manifests: Vec<Manifest>,
    /// `metadata/annotations.yaml`'s `annotations`, when the file exists.
    pub annotations: Option<Value>,
}

impl Bundle {
    pub fn csv(&self) -> Option<&Manifest> {
        self.manifests
            .iter()
            .find(|m| m.object["kind"] == "ClusterServiceVersion")
    }

    pub fn crds(&self) -> impl Iterator<Item = &Manifest> {
        self.manifests
            .iter()
            .filter(|m| m.object["kind"] == "CustomResourceDefinition")
    }
}

/// Reads `dir/manifests/*.yaml|yml|json` and `dir/metadata/annotations.yaml`. A file that is
/// not YAML is a finding, not a failure of the whole run.
pub fn load(dir: &Path) -> (Bundle, Vec<Finding>) {
    let mut bundle = Bundle::default();
    let mut findings = Vec::new();
    let mut err = |file: &str, message: String| {
        findings.push(Finding {
            level: Level::Error,
            check: "bundle",
            file: file.to_string(),
            field: String::new(),
            message,
        })
    };
    let manifests = dir.join("manifests");
    match std::fs::read_dir(&manifests) {
        Err(e) => err(
            "manifests/",
            format!("cannot read the manifests directory: {e}"),
        ),
        Ok(entries) => {
            let mut paths: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.extension()
                        .is_some_and(|x| x == "yaml" || x == "yml" || x == "json")
                })
                .collect();
            paths.sort();
            for p in paths {
                let file = format!(
                    "manifests/{}",
                    p.file_name().unwrap_or_default().to_string_lossy()
                );
                match read_docs(&p) {
                    Ok(docs) => bundle
                        .manifests
                        .extend(docs.into_iter().map(|object| Manifest {
                            file: file.clone(),
                            object,
                        })),
                    Err(e) => err(&file, e),
                }
            }
        }
    }
    let ann = dir.join("metadata/annotations.yaml");
    if ann.exists() {
        match read_docs(&ann) {
            Ok(docs) => bundle.annotations = docs.into_iter().next(),
            Err(e) => err("metadata/annotations.yaml", e),
        }
    }
    (bundle, findings)
}

fn read_docs(p: &Path) -> Result<Vec<Value>, String> {
    let text = std::fs::read_to_string(p).map_err(|e| format!("cannot read: {e}"))?;
    let mut out = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let v = Value::deserialize(doc).map_err(|e| format!("not valid YAML: {e}"))?;
        if !v.is_null() {
            out.push(v);
        }
    }
    Ok(out)
}

/// Every selected check on a loaded bundle, errors first, each group in file order.
pub fn validate(bundle: &Bundle, opts: &Options) -> Vec<Finding> {
    let mut out = Vec::new();
    default::run(bundle, &mut out);
    optional::run(bundle, opts, &mut out);
    out.sort_by_key(|f| std::cmp::Reverse(f.level));
    out
}

/// Load and validate a directory.
pub fn validate_dir(dir: &Path, opts: &Options) -> Vec<Finding> {
    let (bundle, mut findings) = load(dir);
    findings.extend(validate(&bundle, opts));
    if opts.olmv1 {
        olmv1::run(dir, &bundle, &mut findings);
    }
    findings.sort_by_key(|f| std::cmp::Reverse(f.level));
    findings
}

/// Collects findings for one file.
pub(crate) struct At<'a> {
    pub out: &'a mut Vec<Finding>,
    pub check: &'static str,
    pub file: &'a str,
}

impl At<'_> {
    pub fn error(&mut self, field: &str, message: impl Into<String>) {
        self.push(Level::Error, field, message.into());
    }
    pub fn warn(&mut self, field: &str, message: impl Into<String>) {
        self.push(Level::Warning, field, message.into());
    }
    fn push(&mut self, level: Level, field: &str, message: String) {
        self.out.push(Finding {
            level,
            check: self.check,
            file: self.file.to_string(),
            field: field.to_string(),
            message,
        });
    }
}

/// `1.2.3` (a leading `v` accepted, pre-release and build ignored) → (1, 2, 3).
pub(crate) fn semver(s: &str) -> Option<(u64, u64, u64)> {
    let core = s.trim_start_matches('v');
    let core = core.split(['-', '+']).next()?;
    let mut it = core.split('.');
    let (a, b, c) = (it.next()?, it.next()?, it.next()?);
    if it.next().is_some() {
        return None;
    }
    Some((a.parse().ok()?, b.parse().ok()?, c.parse().ok()?))
}

pub(crate) fn str_of<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    path.iter()
        .fold(v, |v, k| &v[*k])
        .as_str()
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
