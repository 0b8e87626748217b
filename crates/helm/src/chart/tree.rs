//! The effective chart tree: subcharts under their alias, as Helm's
//! `processDependencyEnabled` arranges them, with every template parsed once under its
//! full name (`parent/charts/sub/templates/x.yaml`). Which subcharts are enabled
//! depends on values and is decided per render (see [`super::deps`]).
use std::sync::{Arc, OnceLock};

use super::load::ChartNode;
use super::metadata::Dependency;
use crate::funcs::semver::{Constraints, Version};
use crate::template::node::Tree;
use crate::template::parse::parse;
use crate::value::shared::Defaults;

/// One template file, parsed on first use (or the parse error Go would report).
///
/// Parsing waits for the first render that includes the template, as Helm parses at
/// render time: loading a chart reads files only, and a subchart no render enables is
/// never parsed. The result is kept for every later render.
#[derive(Debug)]
pub struct Parsed {
    pub name: String,
    node: Arc<ChartNode>,
    /// Index of the source in `node.templates`.
    index: usize,
    trees: OnceLock<Result<Vec<Arc<Tree>>, String>>,
}

impl Parsed {
    /// The template's trees (its `define`s included), parsed once.
    pub fn trees(&self) -> &Result<Vec<Arc<Tree>>, String> {
        self.trees.get_or_init(|| {
            let text = self
                .node
                .templates
                .get(self.index)
                .map_or("", |(_, t)| &**t);
            parse(&self.name, &self.name, text)
                // A fresh copy, allocated in one go after the parser's scratch is freed,
                // keeps a template's nodes together in memory for the renders to come.
                .map(|ts| ts.iter().map(|t| Arc::new(t.clone())).collect())
                .map_err(|e| e.0)
        })
    }
}

#[derive(Debug, Clone)]
pub struct EffChart {
    /// The chart's name in this tree (its alias when it has one).
    pub name: String,
    pub node: Arc<ChartNode>,
    /// Chart defaults (`import-values` may replace them for one render).
    pub values: Arc<Defaults>,
    /// `parent/charts/name`.
    pub full_path: String,
    /// `Chart.yaml` dependencies as Helm leaves them (alias applied).
    pub reqs: Vec<Dependency>,
    pub deps: Vec<EffChart>,
    pub templates: Arc<Vec<Parsed>>,
}

/// Helm's `IsCompatibleRange`.
pub fn compatible(constraint: &str, version: &str) -> bool {
    match (Constraints::parse(constraint), Version::parse(version)) {
        (Ok(c), Ok(v)) => c.check(&v),
        _ => false,
    }
}

impl EffChart {
    pub fn build(node: Arc<ChartNode>, name: &str, parent: Option<&str>) -> EffChart {
        let full_path = match parent {
            Some(p) => format!("{p}/charts/{name}"),
            None => name.to_string(),
        };
        let library = node.meta.is_library();
        let templates: Vec<Parsed> = node
            .templates
            .iter()
            .enumerate()
            .filter(|(_, (n, _))| !library || n.rsplit('/').next().unwrap_or(n).starts_with('_'))
            .map(|(index, (n, _))| Parsed {
                name: format!("{full_path}/{n}"),
                node: node.clone(),
                index,
                trees: OnceLock::new(),
            })
            .collect();
        let mut deps = Vec::new();
        let mut reqs = Vec::new();
        if node.meta.dependencies.is_empty() {
            for d in &node.deps {
                deps.push(EffChart::build(d.clone(), &d.meta.name, Some(&full_path)));
            }
        } else {
            // Subcharts not named in Chart.yaml stay as they are.
            for d in &node.deps {
                let listed = node
                    .meta
                    .dependencies
                    .iter()
                    .any(|r| r.name == d.meta.name && compatible(&r.version, &d.meta.version));
                if !listed {
                    deps.push(EffChart::build(d.clone(), &d.meta.name, Some(&full_path)));
                }
            }
            for r in &node.meta.dependencies {
                let found = node
                    .deps
                    .iter()
                    .find(|d| d.meta.name == r.name && compatible(&r.version, &d.meta.version));
                let name = if r.alias.is_empty() {
                    r.name.clone()
                } else {
                    r.alias.clone()
                };
                if let Some(d) = found {
                    deps.push(EffChart::build(d.clone(), &name, Some(&full_path)));
                }
                let mut r = r.clone();
                r.name = name;
                reqs.push(r);
            }
        }
        EffChart {
            name: name.to_string(),
            values: Arc::new(Defaults::new(node.values.clone())),
            node,
            full_path,
            reqs,
            deps,
            templates: Arc::new(templates),
        }
    }

    pub fn is_root(&self) -> bool {
        !self.full_path.contains("/charts/")
    }
}
