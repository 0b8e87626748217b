//! The public entry point: load a chart once, render it many times.
//!
//! ```no_run
//! use bosun_helm::render::{Chart, RenderOptions};
//! let chart = Chart::load("charts/book-store".as_ref()).unwrap();
//! let out = chart.render(&RenderOptions::new("bookstore-sample", "default")).unwrap();
//! for (path, text) in out.manifests() { println!("{path}: {} bytes", text.len()); }
//! ```
//!
//! A render follows Helm's `install --dry-run` / `helm template` path: dependencies
//! enabled by tags and conditions, import-values, values coalesced over the chart
//! defaults, schema validation, then every template executed in Helm's order (deepest
//! paths first, so later definitions of a `define` name — the parent chart's — win, and
//! side effects of `set` reach later templates as they do in Helm).
pub mod lookup;
pub mod manifest;
pub mod strvals;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use crate::chart::capabilities::{
    Capabilities, KubeVersion, DEFAULT_API_VERSIONS, DEFAULT_KUBE_VERSION,
};
use crate::chart::coalesce::coalesce;
use crate::chart::deps;
use crate::chart::load::{load, LoadError};
use crate::chart::tree::EffChart;
use crate::template::error::{ErrorKind, HELM_ERR_END, HELM_ERR_START};
use crate::template::exec::{execute, Limits, Runtime};
use crate::template::set::{Layer, TemplateSet};
use crate::template::tpl_cache::TplCache;
use crate::value::{Data, Map, MapKind, Str, Value};

/// A loaded chart: parsed once, shared by renders on any thread.
pub struct Chart {
    root: EffChart,
    sets: Mutex<HashMap<Vec<String>, SetResult>>,
    /// `tpl` texts parsed by this chart's renders.
    tpl_cache: Arc<TplCache>,
}

/// A render's template set, or the first parse error Helm would report.
type SetResult = Arc<Result<Arc<TemplateSet>, String>>;

/// What one render needs besides the chart.
#[derive(Clone, Debug)]
pub struct RenderOptions {
    pub release_name: String,
    pub namespace: String,
    pub revision: i64,
    pub is_install: bool,
    pub is_upgrade: bool,
    /// `.Capabilities.KubeVersion`, e.g. `v1.31.0`; Helm's default when None.
    pub kube_version: Option<String>,
    /// The API versions the cluster serves, as Helm reads them from discovery
    /// (`action.GetVersionSet`): every `group/version` and every `group/version/Kind`
    /// (see [`version_set`](crate::chart::capabilities::version_set)). `Some` replaces
    /// Helm's default list, as a render against a cluster does; `None` keeps the default
    /// list (`helm template`).
    pub cluster_api_versions: Option<Vec<String>>,
    /// Extra API versions appended to the list above (`helm template --api-versions`);
    /// `group/version` or `group/version/Kind`.
    pub api_versions: Vec<String>,
    /// Cluster reads for `lookup`; None gives every `lookup` an empty map, as
    /// `helm template` does.
    pub lookup: Option<lookup::SharedLookup>,
    /// User values (int64 and float64 kept apart).
    pub values: Data,
    /// `missingkey=error`.
    pub strict: bool,
    pub limits: Limits,
}

impl RenderOptions {
    pub fn new(release_name: &str, namespace: &str) -> RenderOptions {
        RenderOptions {
            release_name: release_name.to_string(),
            namespace: namespace.to_string(),
            revision: 1,
            is_install: true,
            is_upgrade: false,
            kube_version: None,
            cluster_api_versions: None,
            api_versions: Vec::new(),
            lookup: None,
            values: Data::Map(BTreeMap::new()),
            strict: false,
            limits: Limits::default(),
        }
    }
}

/// The result of a render.
#[derive(Debug, Clone, Default)]
pub struct Rendered {
    /// Every rendered template (partials excluded, NOTES.txt included), by path.
    pub files: BTreeMap<String, String>,
    /// The root chart's rendered `NOTES.txt`, if any.
    pub notes: Option<String>,
    /// `crds/` files of the chart and enabled subcharts: (path, content), not templated.
    pub crds: Vec<(String, String)>,
    /// The functions this render called whose result changes from one render to the
    /// next (random values, keys and certificates, the clock, random salts and IVs),
    /// sorted: a chart whose output uses them renders differently every time.
    pub nondeterministic: Vec<&'static str>,
}

impl Rendered {
    /// The rendered manifests (NOTES files excluded), by path.
    pub fn manifests(&self) -> impl Iterator<Item = (&String, &String)> {
        self.files.iter().filter(|(k, _)| !k.ends_with("NOTES.txt"))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RenderErrorKind {
    Load,
    Values,
    Schema,
    Parse,
    Exec,
    /// A hard limit on hostile templates.
    Limit,
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct RenderError {
    pub kind: RenderErrorKind,
    /// The message as Helm prints it.
    pub message: String,
}

impl RenderError {
    fn new(kind: RenderErrorKind, message: String) -> RenderError {
        RenderError { kind, message }
    }

    /// `file:line[:col]` of the error, as Helm names it.
    pub fn position(&self) -> Option<String> {
        for prefix in ["execution error at (", "parse error at ("] {
            if let Some(rest) = self.message.strip_prefix(prefix) {
                return rest.split_once("):").map(|(p, _)| p.to_string());
            }
        }
        self.message
            .strip_prefix("template: ")
            .and_then(|r| r.split_once(": "))
            .map(|(p, _)| p.to_string())
    }
}

impl From<LoadError> for RenderError {
    fn from(e: LoadError) -> RenderError {
        RenderError::new(RenderErrorKind::Load, e.to_string())
    }
}

/// User values as `helm template -f a.yaml -f b.yaml --set x=1 --set-string y=2` builds
/// them: files merged in order (maps recursively, later wins), then `--set` (typed:
/// integers are int64) and `--set-string` (strings).
pub fn user_values(files: &[&str], set: &[&str], set_string: &[&str]) -> Result<Data, RenderError> {
    let vals = Map::new(MapKind::Iface);
    for (i, text) in files.iter().enumerate() {
        let d = crate::funcs::helm::yaml_data(text).map_err(|e| {
            RenderError::new(
                RenderErrorKind::Values,
                format!("values file {}: {e}", i + 1),
            )
        })?;
        if let Value::Map(m) = d.to_value() {
            crate::chart::coalesce::merge_maps(&vals, &m);
        }
    }
    let mut d = Data::from_value(&Value::Map(vals));
    for s in set {
        strvals::parse_into(s, &mut d, false).map_err(|e| {
            RenderError::new(
                RenderErrorKind::Values,
                format!("failed parsing --set data: {e}"),
            )
        })?;
    }
    for s in set_string {
        strvals::parse_into(s, &mut d, true).map_err(|e| {
            RenderError::new(
                RenderErrorKind::Values,
                format!("failed parsing --set-string data: {e}"),
            )
        })?;
    }
    Ok(d)
}

/// A loaded chart is shared by renders on many threads.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Chart>();
};

/// Helm's `sortTemplates`: more path separators first, then reverse lexical order.
fn helm_order(names: &mut [String]) {
    names.sort_by(|a, b| {
        let (ca, cb) = (a.matches('/').count(), b.matches('/').count());
        cb.cmp(&ca).then_with(|| b.cmp(a))
    });
}

/// Helm's `cleanupParseError`.
fn parse_error(msg: &str) -> String {
    let tokens: Vec<&str> = msg.split(": ").collect();
    if tokens.len() < 2 {
        return format!("parse error in: {msg}");
    }
    format!(
        "parse error at ({}): {}",
        tokens[1],
        tokens[tokens.len() - 1]
    )
}

/// Helm's `cleanupExecError`: `required`/`fail` messages alone with their position;
/// a single-level evaluator error laid out on three lines as Helm v4 does.
fn exec_error(msg: &str) -> String {
    let tokens: Vec<&str> = msg.splitn(3, ": ").collect();
    if tokens.len() == 3 {
        if let Some(start) = tokens[2].find(HELM_ERR_START) {
            let rest = &tokens[2][start + HELM_ERR_START.len()..];
            if let Some(end) = rest.rfind(HELM_ERR_END) {
                return format!("execution error at ({}): {}", tokens[1], &rest[..end]);
            }
        }
    }
    if let Some(body) = msg.strip_prefix("template: ") {
        if let Some((loc, rest)) = body.split_once(": executing ") {
            if let Some((what, detail)) = rest.split_once(">: ") {
                if !detail.contains("template: ") && !detail.starts_with("error calling ") {
                    return format!("{loc}\n  executing {what}>:\n    {detail}");
                }
                if let Some(inner) =
                    detail.strip_prefix("error calling include: template: no template")
                {
                    return format!("{loc}\n  executing {what}>:\n    error calling include:\ntemplate: no template{inner}");
                }
            }
        }
    }
    msg.to_string()
}

impl Chart {
    /// Helm's install and upgrade check of the chart's `kubeVersion` constraint against the
    /// cluster's version (`None`: Helm's default), which its template engine does not make:
    /// the error is Helm's message, naming the version as the cluster reports it.
    pub fn check_kube_version(&self, kube_version: Option<&str>) -> Result<(), RenderError> {
        let constraint = &self.root.node.meta.kube_version;
        if constraint.is_empty() {
            return Ok(());
        }
        let kube = KubeVersion::parse(kube_version.unwrap_or(DEFAULT_KUBE_VERSION))
            .map_err(|e| RenderError::new(RenderErrorKind::Values, e))?;
        // Helm compares the numeric version (`String()`), so a provider's suffix
        // (`-gke.1245000`, `+k3s1`) does not make it a pre-release.
        if crate::chart::tree::compatible(constraint, &kube.normalized) {
            return Ok(());
        }
        Err(RenderError::new(
            RenderErrorKind::Values,
            format!(
                "chart requires kubeVersion: {constraint} which is incompatible with Kubernetes {}",
                kube.version
            ),
        ))
    }

    /// Loads a chart directory or `.tgz` and parses all its templates.
    pub fn load(path: &Path) -> Result<Chart, RenderError> {
        let node = Arc::new(load(path)?);
        let name = node.meta.name.clone();
        Ok(Chart {
            root: EffChart::build(node, &name, None),
            sets: Mutex::new(HashMap::new()),
            tpl_cache: Arc::default(),
        })
    }

    pub fn name(&self) -> &str {
        &self.root.name
    }

    /// The chart's default values.
    pub fn default_values(&self) -> &Data {
        self.root.values.data()
    }

    /// The template set for the charts taking part in a render, cached by that set.
    fn template_set(&self, tree: &EffChart) -> SetResult {
        let mut parsed = Vec::new();
        collect_parsed(tree, &mut parsed);
        let mut names: Vec<String> = parsed.iter().map(|p| p.name.clone()).collect();
        names.sort();
        if let Ok(cache) = self.sets.lock() {
            if let Some(s) = cache.get(&names) {
                return s.clone();
            }
        }
        let mut order: Vec<String> = names.clone();
        helm_order(&mut order);
        let by_name: HashMap<&str, &crate::chart::tree::Parsed> =
            parsed.iter().map(|p| (p.name.as_str(), *p)).collect();
        let mut set = TemplateSet::new();
        let mut result = Ok(());
        for n in &order {
            if let Some(p) = by_name.get(n.as_str()) {
                match p.trees() {
                    Ok(trees) => set.add_trees(trees),
                    Err(e) => {
                        result = Err(parse_error(e));
                        break;
                    }
                }
            }
        }
        let r = Arc::new(result.map(|_| Arc::new(set)));
        if let Ok(mut cache) = self.sets.lock() {
            cache.insert(names, r.clone());
        }
        r
    }

    /// Renders the chart.
    pub fn render(&self, opts: &RenderOptions) -> Result<Rendered, RenderError> {
        let work = || self.render_inner(opts);
        stacker::maybe_grow(256 * 1024, 8 * 1024 * 1024, work)
    }

    fn render_inner(&self, opts: &RenderOptions) -> Result<Rendered, RenderError> {
        let user = match opts.values.to_value() {
            Value::Map(m) => m,
            Value::Nil => Map::new(MapKind::Iface),
            _ => {
                return Err(RenderError::new(
                    RenderErrorKind::Values,
                    "values must be a map".into(),
                ))
            }
        };
        // Dependencies: enabled ones, then imported values.
        let mut tree = deps::enabled(&self.root, &user, "")
            .map_err(|e| RenderError::new(RenderErrorKind::Values, e))?;
        deps::import_values(&mut tree).map_err(|e| RenderError::new(RenderErrorKind::Values, e))?;
        // Values.
        let vals = crate::funcs::dicts::deep_copy(&Value::Map(user), 0);
        let Value::Map(vals) = vals else {
            return Err(RenderError::new(
                RenderErrorKind::Values,
                "values must be a map".into(),
            ));
        };
        coalesce(&tree, &vals, false).map_err(|e| RenderError::new(RenderErrorKind::Values, e))?;
        crate::chart::schema::validate_tree(&tree, &vals)
            .map_err(|e| RenderError::new(RenderErrorKind::Schema, e))?;
        // Render objects.
        let kube = KubeVersion::parse(opts.kube_version.as_deref().unwrap_or(DEFAULT_KUBE_VERSION))
            .map_err(|e| RenderError::new(RenderErrorKind::Values, e))?;
        let mut apis: Vec<String> = match &opts.cluster_api_versions {
            Some(served) => served.clone(),
            None => DEFAULT_API_VERSIONS.iter().map(|s| s.to_string()).collect(),
        };
        apis.extend(opts.api_versions.iter().cloned());
        let caps = Value::Obj(Rc::new(Capabilities {
            kube,
            api_versions: apis,
        }));
        let release = Map::new(MapKind::Iface);
        release.insert("Name".into(), Value::str(&opts.release_name));
        release.insert("Namespace".into(), Value::str(&opts.namespace));
        release.insert("IsUpgrade".into(), Value::Bool(opts.is_upgrade));
        release.insert("IsInstall".into(), Value::Bool(opts.is_install));
        release.insert("Revision".into(), Value::Int(opts.revision));
        release.insert("Service".into(), Value::str("Helm"));
        let release = Value::Map(release);
        let root_vals = Value::Map(vals.with_kind(MapKind::Values));
        let mut jobs: Vec<(String, Map, String)> = Vec::new();
        rec_all_tpls(&tree, &root_vals, &release, &caps, &mut jobs);
        // Parse (cached) and execute in Helm's order.
        let set = self.template_set(&tree);
        let set = match set.as_ref() {
            Ok(s) => s.clone(),
            Err(e) => return Err(RenderError::new(RenderErrorKind::Parse, e.clone())),
        };
        let mut rt = Runtime::new(opts.limits.clone(), opts.strict);
        rt.lookup = opts.lookup.clone();
        rt.tpl_cache = self.tpl_cache.clone();
        let layer = Layer::base(set.clone());
        let mut names: Vec<String> = jobs.iter().map(|j| j.0.clone()).collect();
        helm_order(&mut names);
        let by_name: HashMap<String, (Map, String)> =
            jobs.into_iter().map(|(n, m, b)| (n, (m, b))).collect();
        let mut files = BTreeMap::new();
        for name in names {
            if name.rsplit('/').next().unwrap_or(&name).starts_with('_') {
                continue;
            }
            let Some((top, base)) = by_name.get(&name) else {
                continue;
            };
            let Some(tree) = set.get(&name) else { continue };
            let t = Map::new(MapKind::Values);
            t.insert("Name".into(), Value::str(&name));
            t.insert("BasePath".into(), Value::str(base));
            top.insert("Template".into(), Value::Map(t));
            let out = execute(&rt, layer.clone(), tree, Value::Map(top.clone())).map_err(|e| {
                let kind = if e.kind == ErrorKind::Limit {
                    RenderErrorKind::Limit
                } else {
                    RenderErrorKind::Exec
                };
                RenderError::new(kind, exec_error(&e.msg))
            })?;
            // Helm drops every `<no value>`; most outputs have none, and keep their buffer.
            let out = if out.contains("<no value>") {
                out.replace("<no value>", "")
            } else {
                out
            };
            files.insert(name, out);
        }
        let notes_key = format!("{}/templates/NOTES.txt", tree.name);
        let notes = files.get(&notes_key).cloned();
        let mut crds = Vec::new();
        collect_crds(&tree, &mut crds);
        let nondeterministic = rt.nondeterministic.take().into_iter().collect();
        Ok(Rendered {
            files,
            notes,
            crds,
            nondeterministic,
        })
    }
}

fn collect_parsed<'a>(ch: &'a EffChart, out: &mut Vec<&'a crate::chart::tree::Parsed>) {
    out.extend(ch.templates.iter());
    for d in &ch.deps {
        collect_parsed(d, out);
    }
}

fn collect_crds(ch: &EffChart, out: &mut Vec<(String, String)>) {
    for (n, d) in &ch.node.files {
        if n.starts_with("crds/")
            && (n.ends_with(".yaml") || n.ends_with(".yml") || n.ends_with(".json"))
        {
            out.push((
                format!("{}/{n}", ch.full_path),
                String::from_utf8_lossy(d).into_owned(),
            ));
        }
    }
    for d in &ch.deps {
        collect_crds(d, out);
    }
}

/// Helm's `recAllTpls`: the top-level object of each chart's templates.
fn rec_all_tpls(
    ch: &EffChart,
    values: &Value,
    release: &Value,
    caps: &Value,
    jobs: &mut Vec<(String, Map, String)>,
) -> Map {
    let mut meta = ch.node.meta.clone();
    meta.name = ch.name.clone();
    meta.dependencies = ch.reqs.clone();
    let subcharts = Map::new(MapKind::Iface);
    let next = Map::new(MapKind::Values);
    next.insert("Chart".into(), meta.to_value(ch.is_root()));
    let files = Map::new(MapKind::Files);
    for (n, d) in &ch.node.files {
        files.insert(Str::from(n.as_str()), Value::Bytes(d.clone()));
    }
    next.insert("Files".into(), Value::Map(files));
    next.insert("Release".into(), release.clone());
    next.insert("Capabilities".into(), caps.clone());
    let vals = if ch.is_root() {
        values.clone()
    } else {
        match values {
            Value::Map(m) => match m.get(&ch.name) {
                Some(Value::Map(sub)) => Value::Map(sub.with_kind(MapKind::Values)),
                _ => Value::Map(Map::new(MapKind::Values)),
            },
            _ => Value::Map(Map::new(MapKind::Values)),
        }
    };
    next.insert("Values".into(), vals.clone());
    next.insert("Subcharts".into(), Value::Map(subcharts.clone()));
    for d in &ch.deps {
        let sub = rec_all_tpls(d, &vals, release, caps, jobs);
        subcharts.insert(Str::from(d.name.as_str()), Value::Map(sub));
    }
    for p in ch.templates.iter() {
        jobs.push((
            p.name.clone(),
            next.clone(),
            format!("{}/templates", ch.full_path),
        ));
    }
    next
}
