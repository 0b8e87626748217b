//! What a role touches in the API, read from its text when it is loaded (no cluster, no
//! run): for `bosun rbac` to grant exactly that.
//!
//! Kinds are found where they are written literally:
//! * the `kind`/`apiVersion` of `k8s` definitions (mappings, YAML text, and the files of
//!   `template:`/`src:` and of `lookup('template', ...)`, where the top-level `kind:` and
//!   `apiVersion:` lines of each document are read);
//! * the `kind`/`api_version` options of `k8s`, `k8s_info`, `k8s_scale`, `k8s_status`;
//! * `lookup('k8s', kind=..., api_version=...)` / `query('k8s', ...)` anywhere in a task or
//!   in the role's variables.
//!
//! What cannot be determined — a kind or apiVersion computed by a template, a definition
//! held in a variable — is reported as a [`Gap`] with its file:line; such a role needs the
//! missing rules granted by hand (see the crate documentation).
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use bosun_ansible::modules::Module;
use bosun_ansible::role::{Action, RoleBody, RoleDep, Task};
use bosun_ansible::template::{value, VarLayer};
use bosun_ansible::Role;
use regex::Regex;
use serde_json::Value as Json;

/// What a role does with one kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Use {
    /// `k8s` state present (or a templated state): read, create, patch; watched as a child.
    pub manage: bool,
    /// `k8s` with `force` (PUT).
    pub replace: bool,
    /// `k8s` state absent (or a templated state).
    pub delete: bool,
    /// `k8s_info`, `lookup('k8s')`: read and list.
    pub read: bool,
    /// `k8s_scale`: read and patch.
    pub scale: bool,
    /// `k8s_status` on objects of this kind (not the run's own CR).
    pub status: bool,
}

impl Use {
    fn merge(&mut self, o: Use) {
        self.manage |= o.manage;
        self.replace |= o.replace;
        self.delete |= o.delete;
        self.read |= o.read;
        self.scale |= o.scale;
        self.status |= o.status;
    }
}

/// A place where the kinds a task touches could not be read from its text.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Gap {
    /// file:line:col of the task (or the variables file).
    pub location: String,
    pub what: String,
}

impl std::fmt::Display for Gap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.location, self.what)
    }
}

/// Everything a role (with its dependencies, includes and templates) touches.
#[derive(Clone, Debug, Default)]
pub struct Scan {
    /// `(group, kind)` → what is done with it.
    pub kinds: BTreeMap<(String, String), Use>,
    /// `(apiVersion, kind)` of each kind a `k8s` task creates or updates (state present or
    /// templated), as written: the children a run will watch, known before any run.
    pub managed: BTreeSet<(String, String)>,
    /// `k8s_event` is used (core `events`).
    pub events: bool,
    /// `k8s_status` is used on the run's own CR.
    pub own_status: bool,
    pub gaps: BTreeSet<Gap>,
}

impl Scan {
    /// Scans `role`; `own_kind` is the entry's kind (`k8s_status` on it is the run's CR).
    pub fn of(role: &Role, own_kind: &str) -> Scan {
        let mut s = Scanner {
            scan: Scan::default(),
            own_kind: own_kind.to_string(),
            seen: HashSet::new(),
        };
        for play in &role.plays {
            s.vars(&play.vars, &play.body.path);
            for list in [&play.pre_tasks, &play.tasks, &play.post_tasks] {
                s.tasks(list, &play.body);
            }
            s.body(&play.body);
            for dep in &play.roles {
                s.dep(dep);
            }
        }
        s.scan
    }

    /// Both scans together (a finalizer's role with the entry's own).
    pub fn merge(mut self, other: Scan) -> Scan {
        for (k, u) in other.kinds {
            self.kinds.entry(k).or_default().merge(u);
        }
        self.managed.extend(other.managed);
        self.events |= other.events;
        self.own_status |= other.own_status;
        self.gaps.extend(other.gaps);
        self
    }
}

struct Scanner {
    scan: Scan,
    own_kind: String,
    /// Role bodies already scanned (by address: a role loaded with another `tasks_from` is
    /// another body).
    seen: HashSet<usize>,
}

fn group_of(api_version: &str) -> String {
    api_version
        .split_once('/')
        .map_or(String::new(), |(g, _)| g.to_string())
}

fn templated(s: &str) -> bool {
    s.contains("{{") || s.contains("{%")
}

fn lookup_k8s() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r#"\b(?:lookup|query|q)\(\s*['"](?:kubernetes\.core\.)?k8s['"]([^)]*)\)"#)
            .expect("a valid regex")
    })
}

fn lookup_template() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r#"\b(?:lookup|query|q)\(\s*['"](?:ansible\.builtin\.)?template['"]\s*,\s*['"]([^'"]+)['"]"#)
            .expect("a valid regex")
    })
}

fn keyword(args: &str, name: &str) -> Option<String> {
    let r = Regex::new(&format!(r#"\b{name}\s*=\s*['"]([^'"]*)['"]"#)).ok()?;
    r.captures(args).map(|c| c[1].to_string())
}

impl Scanner {
    fn dep(&mut self, dep: &RoleDep) {
        self.vars(&dep.params, &dep.role.path);
        self.body(&dep.role);
    }

    fn body(&mut self, body: &Arc<RoleBody>) {
        if !self.seen.insert(Arc::as_ptr(body) as usize) {
            return;
        }
        self.vars(&body.defaults, &body.path);
        self.vars(&body.vars, &body.path);
        for layer in body.var_files.values() {
            self.vars(layer, &body.path);
        }
        let mut files: Vec<_> = body.files.iter().collect();
        files.sort_by(|a, b| a.0.cmp(b.0));
        for (_, tasks) in files {
            self.tasks(tasks, body);
        }
        for dep in &body.deps {
            self.dep(dep);
        }
    }

    fn vars(&mut self, layer: &VarLayer, base: &Path) {
        for (k, v) in layer {
            if let Ok(j) = value::to_json(v) {
                let at = format!("{} (variable {k})", base.display());
                self.strings(&j, &at);
            }
        }
    }

    fn tasks(&mut self, tasks: &[Task], body: &Arc<RoleBody>) {
        for t in tasks {
            self.task(t, body);
        }
    }

    fn task(&mut self, t: &Task, body: &Arc<RoleBody>) {
        let at = t.loc.to_string();
        if let Some(l) = &t.loop_value {
            if let Ok(j) = value::to_json(l) {
                self.strings(&j, &at);
            }
        }
        for v in t.vars.values() {
            if let Ok(j) = value::to_json(v) {
                self.strings(&j, &at);
            }
        }
        for w in &t.when {
            self.strings(&Json::String(w.clone()), &at);
        }
        match &t.action {
            Action::Block {
                block,
                rescue,
                always,
            } => {
                for list in [block, rescue, always] {
                    self.tasks(list, body);
                }
            }
            Action::Role { role, .. } => self.body(role),
            Action::Module { module, args } => {
                let args = value::to_json(args).unwrap_or(Json::Null);
                self.module(*module, &args, &at, &dir_of(&body.path));
                self.strings(&args, &at);
            }
            Action::IncludeTasks { .. } | Action::IncludeVars { .. } | Action::Meta(_) => {}
        }
    }

    fn add(&mut self, api_version: &str, kind: &str, u: Use) {
        if u.manage {
            self.scan
                .managed
                .insert((api_version.to_string(), kind.to_string()));
        }
        self.scan
            .kinds
            .entry((group_of(api_version), kind.to_string()))
            .or_default()
            .merge(u);
    }

    fn gap(&mut self, at: &str, what: impl Into<String>) {
        self.scan.gaps.insert(Gap {
            location: at.to_string(),
            what: what.into(),
        });
    }

    fn module(&mut self, m: Module, a: &Json, at: &str, base: &Path) {
        let opt = |k: &str| a.get(k).and_then(Json::as_str);
        let api_version = opt("api_version").or(opt("api")).or(opt("version"));
        match m {
            Module::K8s => {
                let state = opt("state").unwrap_or("present");
                let force = a.get("force").is_some_and(|f| f != &Json::Bool(false));
                let u = Use {
                    manage: state == "present" || templated(state),
                    delete: state == "absent" || templated(state),
                    replace: force,
                    ..Default::default()
                };
                let defs = self.definitions(a, at, base);
                let has_source = ["definition", "resource_definition", "src", "template"]
                    .iter()
                    .any(|k| a.get(*k).is_some_and(|v| !v.is_null()));
                if !has_source {
                    match (opt("kind"), api_version) {
                        (Some(k), v) if !templated(k) && !v.is_some_and(templated) => {
                            self.add(v.unwrap_or("v1"), k, u)
                        }
                        _ => self.gap(at, "k8s: kind or apiVersion not written literally"),
                    }
                }
                for (v, k) in defs {
                    let v = v.or(api_version.map(str::to_string));
                    self.add(v.as_deref().unwrap_or("v1"), &k, u);
                }
            }
            Module::K8sInfo | Module::K8sScale | Module::K8sStatus => {
                let Some(kind) = opt("kind").or_else(|| {
                    a.pointer("/resource_definition/kind")
                        .and_then(Json::as_str)
                }) else {
                    return;
                };
                let own = m == Module::K8sStatus && kind == self.own_kind;
                if own {
                    self.scan.own_status = true;
                    return;
                }
                if templated(kind) || api_version.is_some_and(templated) {
                    self.gap(
                        at,
                        format!("{}: kind or api_version not written literally", m.name()),
                    );
                    return;
                }
                let u = match m {
                    Module::K8sInfo => Use {
                        read: true,
                        ..Default::default()
                    },
                    Module::K8sScale => Use {
                        scale: true,
                        ..Default::default()
                    },
                    _ => Use {
                        status: true,
                        ..Default::default()
                    },
                };
                self.add(api_version.unwrap_or("v1"), kind, u);
            }
            Module::K8sEvent => self.scan.events = true,
            _ => {}
        }
    }

    /// The literal `(apiVersion, kind)` of a `k8s` task's definitions; gaps for the rest.
    fn definitions(&mut self, a: &Json, at: &str, base: &Path) -> Vec<(Option<String>, String)> {
        let mut out = Vec::new();
        let def = a.get("definition").or(a.get("resource_definition"));
        match def {
            Some(Json::Object(o)) => {
                let text = |k: &str| o.get(k).and_then(Json::as_str);
                // The task's `kind` fills in a definition without one.
                let kind = text("kind").or_else(|| a.get("kind").and_then(Json::as_str));
                match kind {
                    Some(k) if !templated(k) && !text("apiVersion").is_some_and(templated) => {
                        out.push((text("apiVersion").map(str::to_string), k.to_string()))
                    }
                    _ => self.gap(at, "k8s: the definition's kind or apiVersion is templated"),
                }
            }
            Some(Json::Array(items)) => {
                for i in items {
                    let mut one = serde_json::Map::new();
                    one.insert("definition".into(), i.clone());
                    out.extend(self.definitions(&Json::Object(one), at, base));
                }
            }
            Some(Json::String(s)) => {
                let files: Vec<String> = lookup_template()
                    .captures_iter(s)
                    .map(|c| c[1].to_string())
                    .collect();
                if !files.is_empty() {
                    for f in files {
                        out.extend(self.file(&base.join("templates").join(&f), at));
                    }
                } else if s.trim_start().starts_with("{{") {
                    self.gap(
                        at,
                        "k8s: the definition comes from a variable or expression",
                    );
                } else {
                    out.extend(self.documents(s, at, "the definition"));
                }
            }
            _ => {}
        }
        for (key, dir) in [("template", "templates"), ("src", "files")] {
            let paths: Vec<String> = match a.get(key) {
                Some(Json::String(p)) => vec![p.clone()],
                Some(Json::Object(o)) => o
                    .get("path")
                    .and_then(Json::as_str)
                    .map(str::to_string)
                    .into_iter()
                    .collect(),
                Some(Json::Array(items)) => items
                    .iter()
                    .filter_map(|i| {
                        i.as_str()
                            .or_else(|| i.get("path").and_then(Json::as_str))
                            .map(str::to_string)
                    })
                    .collect(),
                _ => Vec::new(),
            };
            for p in paths {
                if templated(&p) {
                    self.gap(at, format!("k8s: {key} path is templated"));
                    continue;
                }
                let full = if Path::new(&p).is_absolute() {
                    PathBuf::from(&p)
                } else if base.join(dir).join(&p).is_file() {
                    base.join(dir).join(&p)
                } else {
                    base.join(&p)
                };
                out.extend(self.file(&full, at));
            }
        }
        out
    }

    fn file(&mut self, path: &Path, at: &str) -> Vec<(Option<String>, String)> {
        match std::fs::read_to_string(path) {
            Ok(text) => self.documents(&text, at, &path.display().to_string()),
            Err(_) => {
                self.gap(at, format!("k8s: cannot read {}", path.display()));
                Vec::new()
            }
        }
    }

    /// The top-level `kind:`/`apiVersion:` of each YAML document of a (template) text.
    fn documents(&mut self, text: &str, at: &str, what: &str) -> Vec<(Option<String>, String)> {
        let mut out = Vec::new();
        for doc in split_documents(text) {
            let (mut kind, mut version) = (None, None);
            for line in doc.lines() {
                let value = |l: &str, key: &str| {
                    l.strip_prefix(key).map(|v| {
                        v.split(" #")
                            .next()
                            .unwrap_or_default()
                            .trim()
                            .trim_matches(['"', '\''])
                            .to_string()
                    })
                };
                if let Some(k) = value(line, "kind:") {
                    kind = Some(k);
                } else if let Some(v) = value(line, "apiVersion:") {
                    version = Some(v);
                }
            }
            match kind {
                Some(k) if !templated(&k) && !version.as_deref().is_some_and(templated) => {
                    out.push((version, k))
                }
                Some(_) => self.gap(
                    at,
                    format!("k8s: a kind or apiVersion in {what} is templated"),
                ),
                None => {}
            }
        }
        out
    }

    /// `lookup('k8s', kind=...)` and template lookups in any string of a value.
    fn strings(&mut self, v: &Json, at: &str) {
        let mut stack = vec![v];
        while let Some(v) = stack.pop() {
            match v {
                Json::String(s) => self.lookups(s, at),
                Json::Array(a) => stack.extend(a),
                Json::Object(o) => stack.extend(o.values()),
                _ => {}
            }
        }
    }

    fn lookups(&mut self, s: &str, at: &str) {
        if !s.contains("k8s") {
            return;
        }
        let found: Vec<String> = lookup_k8s()
            .captures_iter(s)
            .map(|c| c[1].to_string())
            .collect();
        for args in found {
            let kind = keyword(&args, "kind");
            let version = keyword(&args, "api_version").unwrap_or_else(|| "v1".into());
            match kind {
                Some(k) if !templated(&k) && !templated(&version) && !k.is_empty() => self.add(
                    &version,
                    &k,
                    Use {
                        read: true,
                        ..Default::default()
                    },
                ),
                _ => self.gap(
                    at,
                    "lookup('k8s'): kind or api_version not written literally",
                ),
            }
        }
    }
}

/// A role's directory, or a playbook's (its templates are beside it).
fn dir_of(p: &Path) -> PathBuf {
    if p.is_file() {
        p.parent().map(Path::to_path_buf).unwrap_or_default()
    } else {
        p.to_path_buf()
    }
}

fn split_documents(text: &str) -> Vec<String> {
    let mut docs = vec![String::new()];
    for line in text.lines() {
        if line.starts_with("---") {
            docs.push(String::new());
        } else if let Some(d) = docs.last_mut() {
            d.push_str(line);
            d.push('\n');
        }
    }
    docs
}
