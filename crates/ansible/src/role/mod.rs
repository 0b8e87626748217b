//! Loading roles and playbooks. Everything is read, parsed and validated up front
//! ([`Role::load`]), so a role using something bosun does not run is refused when the
//! watches file is loaded, with the file:line:col and the construct — never at reconcile time.
//!
//! Roles are found as ansible-operator finds them: a 3-part FQCN in the collections paths
//! (`ANSIBLE_COLLECTIONS_PATH`, else `/usr/share/ansible/collections:~/.ansible/collections`),
//! then every `ANSIBLE_ROLES_PATH` entry (`<p>/<role>` and `<p>/roles/<role>`), then
//! `./roles/<role>`; a path to a directory is taken as it is.
pub mod model;
pub(crate) mod parse;
pub mod search;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use model::*;
use parse::{load_err, FileCtx};

use crate::template::{Templar, VarLayer};
use crate::yaml::{self, Node, NodeExt, Yaml};
use crate::Error;

/// Where roles and collections are looked for.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    pub roles_path: Vec<PathBuf>,
    pub collections_paths: Vec<PathBuf>,
    pub cwd: PathBuf,
}

impl LoadOptions {
    /// From `ANSIBLE_ROLES_PATH`, `ANSIBLE_COLLECTIONS_PATH` (or `ANSIBLE_COLLECTIONS_PATHS`)
    /// and the working directory, as ansible-operator reads them.
    pub fn from_env() -> LoadOptions {
        let split = |v: String| {
            v.split(':')
                .filter(|s| !s.is_empty())
                .map(PathBuf::from)
                .collect::<Vec<_>>()
        };
        let home = std::env::var("HOME").unwrap_or_default();
        let collections = std::env::var("ANSIBLE_COLLECTIONS_PATH")
            .or_else(|_| std::env::var("ANSIBLE_COLLECTIONS_PATHS"))
            .map(split)
            .unwrap_or_else(|_| {
                vec![
                    PathBuf::from("/usr/share/ansible/collections"),
                    Path::new(&home).join(".ansible/collections"),
                ]
            });
        LoadOptions {
            roles_path: std::env::var("ANSIBLE_ROLES_PATH")
                .map(split)
                .unwrap_or_default(),
            collections_paths: collections,
            cwd: std::env::current_dir().unwrap_or_default(),
        }
    }
}

/// A loaded role or playbook, ready to run.
#[derive(Debug)]
pub struct Role {
    pub plays: Vec<Play>,
    /// Where it was loaded from (the role directory or the playbook file).
    pub path: PathBuf,
    /// The Jinja environment, built once and shared by every run.
    pub templar: Templar,
}

struct BodyBuilder {
    role_dir: PathBuf,
    files: HashMap<PathBuf, Arc<Vec<Task>>>,
    var_files: HashMap<PathBuf, Arc<VarLayer>>,
    pending: Vec<PathBuf>,
    seen: HashSet<PathBuf>,
}

pub(crate) struct Loader {
    templar: Templar,
    opts: LoadOptions,
    /// Loaded roles by directory and extra entry point (`tasks_from`).
    roles: HashMap<(PathBuf, String), Arc<RoleBody>>,
    stack: Vec<PathBuf>,
    bodies: Vec<BodyBuilder>,
    /// Constructs outside the native subset met so far: the load goes on past them so that
    /// its error lists every one.
    pub(crate) unsupported: Vec<Error>,
    /// The play's base directory: a playbook's own; none for a role run as ansible-runner
    /// runs a role entry.
    pub(crate) basedir: Option<PathBuf>,
}

/// How deep role dependencies may nest.
const MAX_ROLE_DEPTH: usize = 32;

impl Role {
    /// Loads a role (name, FQCN or directory) or a playbook (a `.yml`/`.yaml` file).
    pub fn load(spec: &str, opts: &LoadOptions) -> Result<Role, Error> {
        let mut loader = Loader {
            templar: Templar::new(),
            opts: opts.clone(),
            roles: HashMap::new(),
            stack: Vec::new(),
            bodies: Vec::new(),
            unsupported: Vec::new(),
            basedir: None,
        };
        let loaded = loader.load_spec(spec, opts);
        let mut all = std::mem::take(&mut loader.unsupported);
        match loaded {
            Ok(role) if all.is_empty() => Ok(role),
            Ok(_) => Err(match all.len() {
                1 => all.remove(0),
                _ => Error::Unsupported(all),
            }),
            Err(e) if all.is_empty() => Err(e),
            Err(e) => {
                all.push(e);
                Err(Error::Unsupported(all))
            }
        }
    }
}

impl Loader {
    fn load_spec(&mut self, spec: &str, opts: &LoadOptions) -> Result<Role, Error> {
        let loader = self;
        let p = if Path::new(spec).is_absolute() {
            PathBuf::from(spec)
        } else {
            opts.cwd.join(spec)
        };
        if p.is_file() {
            return loader.load_playbook(&p);
        }
        let templar = loader.templar.clone();
        let role = loader.load_role(spec, None)?;
        // ansible-runner's generated play: localhost, the one role, no fact gathering
        // (ansible-operator's scaffold sets ANSIBLE_GATHERING=explicit).
        let body = Arc::new(RoleBody {
            name: "play".into(),
            path: role.path.clone(),
            defaults: Default::default(),
            vars: Default::default(),
            deps: Vec::new(),
            files: HashMap::new(),
            var_files: HashMap::new(),
        });
        let path = role.path.clone();
        Ok(Role {
            plays: vec![Play {
                name: None,
                vars: Default::default(),
                roles: vec![RoleDep {
                    role,
                    params: Default::default(),
                    when: Vec::new(),
                    no_log: None,
                }],
                pre_tasks: Default::default(),
                tasks: Default::default(),
                post_tasks: Default::default(),
                body,
            }],
            path,
            templar,
        })
    }
}

fn io_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Io(format!("{}: {e}", path.display()))
}

impl Loader {
    pub(crate) fn read_yaml(&self, path: &Path) -> Result<Vec<Node>, Error> {
        let src = std::fs::read_to_string(path).map_err(|e| io_err(path, e))?;
        yaml::load_all(&src).map_err(|e| Error::Load {
            file: path.to_path_buf(),
            line: e.line,
            col: e.col,
            msg: format!("YAML: {}", e.msg),
        })
    }

    fn resolve_role(&self, name: &str, near: Option<&Path>) -> Option<PathBuf> {
        let direct = if Path::new(name).is_absolute() {
            PathBuf::from(name)
        } else {
            self.opts.cwd.join(name)
        };
        let mut cands = Vec::new();
        if name.contains('/') {
            cands.push(direct);
        }
        let parts: Vec<&str> = name.split('.').collect();
        if parts.len() == 3 {
            for p in &self.opts.collections_paths {
                cands.push(
                    p.join("ansible_collections")
                        .join(parts[0])
                        .join(parts[1])
                        .join("roles")
                        .join(parts[2]),
                );
            }
        }
        if let Some(n) = near {
            cands.push(n.join(name));
        }
        for p in &self.opts.roles_path {
            cands.push(p.join(name));
            cands.push(p.join("roles").join(name));
        }
        cands.push(self.opts.cwd.join("roles").join(name));
        cands
            .into_iter()
            .find(|c| c.is_dir())
            .map(|c| std::fs::canonicalize(&c).unwrap_or(c))
    }

    fn optional_main(&self, dir: &Path) -> Option<PathBuf> {
        ["main.yml", "main.yaml", "main"]
            .iter()
            .map(|f| dir.join(f))
            .find(|p| p.is_file())
    }

    fn vars_file(&mut self, path: &Path, role_dir: &Path) -> Result<VarLayer, Error> {
        let docs = self.read_yaml(path)?;
        let ctx = FileCtx {
            file: Arc::new(path.to_path_buf()),
            role_dir,
            depth: 0,
        };
        match docs.first() {
            None => Ok(VarLayer::new()),
            Some(d) => self.var_layer(&ctx, d),
        }
    }

    pub(crate) fn load_role(
        &mut self,
        name: &str,
        from: Option<(&Arc<PathBuf>, &Node)>,
    ) -> Result<Arc<RoleBody>, Error> {
        self.load_role_from(name, from, "main")
    }

    /// Loads a role with `entry` (a `tasks_from` file) as well as `tasks/main`.
    pub(crate) fn load_role_from(
        &mut self,
        name: &str,
        from: Option<(&Arc<PathBuf>, &Node)>,
        entry: &str,
    ) -> Result<Arc<RoleBody>, Error> {
        let near = self
            .stack
            .last()
            .and_then(|p| p.parent())
            .map(Path::to_path_buf);
        let dir = self.resolve_role(name, near.as_deref()).ok_or_else(|| {
            let msg = format!("the role '{name}' was not found (looked in collections paths, ANSIBLE_ROLES_PATH and ./roles)");
            match from {
                Some((f, n)) => load_err(f, n, msg),
                None => Error::Io(msg),
            }
        })?;
        let key = (dir.clone(), entry.to_string());
        if let Some(r) = self.roles.get(&key) {
            return Ok(r.clone());
        }
        if self.stack.contains(&dir) || self.stack.len() > MAX_ROLE_DEPTH {
            let msg = format!("role '{name}' depends on itself");
            return Err(match from {
                Some((f, n)) => load_err(f, n, msg),
                None => Error::Io(msg),
            });
        }
        self.stack.push(dir.clone());
        let r = self.build_role(name, &dir, entry);
        self.stack.pop();
        let body = Arc::new(r?);
        self.roles.insert(key, body.clone());
        Ok(body)
    }

    fn build_role(&mut self, name: &str, dir: &Path, entry: &str) -> Result<RoleBody, Error> {
        let defaults = match self.optional_main(&dir.join("defaults")) {
            Some(p) => self.vars_file(&p, dir)?,
            None => VarLayer::new(),
        };
        let vars = match self.optional_main(&dir.join("vars")) {
            Some(p) => self.vars_file(&p, dir)?,
            None => VarLayer::new(),
        };
        let mut deps = Vec::new();
        if let Some(meta) = self.optional_main(&dir.join("meta")) {
            let docs = self.read_yaml(&meta)?;
            let file = Arc::new(meta.clone());
            if let Some(list) = docs.first().and_then(|d| d.get("dependencies")) {
                for d in list.as_seq().unwrap_or_default() {
                    deps.push(self.dependency(&file, dir, d)?);
                }
            }
        }
        self.bodies.push(BodyBuilder {
            role_dir: dir.to_path_buf(),
            files: HashMap::new(),
            var_files: HashMap::new(),
            pending: Vec::new(),
            seen: HashSet::new(),
        });
        if let Some(main) = self.optional_main(&dir.join("tasks")) {
            self.want_file(std::fs::canonicalize(&main).unwrap_or(main));
        }
        if entry != "main" {
            let tasks = dir.join("tasks");
            let found = ["", ".yml", ".yaml"]
                .iter()
                .map(|e| tasks.join(format!("{entry}{e}")))
                .find(|p| p.is_file());
            match found {
                Some(p) => self.want_file(std::fs::canonicalize(&p).unwrap_or(p)),
                None => return Err(Error::Io(format!("role {name} has no tasks file {entry}"))),
            }
        }
        self.check_template_files(dir);
        self.check_local_plugins(dir);
        let built = self.drain_files();
        let b = self.bodies.pop();
        built?;
        let b = b.ok_or_else(|| Error::Io("internal: role builder missing".into()))?;
        Ok(RoleBody {
            name: name.to_string(),
            path: dir.to_path_buf(),
            defaults: Arc::new(defaults),
            vars: Arc::new(vars),
            deps,
            files: b.files,
            var_files: b.var_files,
        })
    }

    fn dependency(&mut self, file: &Arc<PathBuf>, dir: &Path, d: &Node) -> Result<RoleDep, Error> {
        let ctx = FileCtx {
            file: file.clone(),
            role_dir: dir,
            depth: 0,
        };
        let mut no_log = None;
        let (name, params, when) = match &d.value {
            Yaml::Str(s) => (s.clone(), VarLayer::new(), Vec::new()),
            Yaml::Map(pairs) => {
                let name = d
                    .get("role")
                    .or(d.get("name"))
                    .and_then(NodeExt::as_str)
                    .ok_or_else(|| ctx.err(d, "a dependency needs 'role'"))?
                    .to_string();
                let mut params = VarLayer::new();
                let mut when = Vec::new();
                for (k, v) in pairs {
                    match k.as_str().unwrap_or_default() {
                        "role" | "name" | "tags" => {}
                        "no_log" => {
                            self.check_node(&ctx, v)?;
                            no_log = Some(crate::template::yamlfilters::node_value(v));
                        }
                        "when" => {
                            when = v.as_str().map(|s| vec![s.to_string()]).unwrap_or_default()
                        }
                        "vars" => params.extend(self.var_layer(&ctx, v)?),
                        other => {
                            self.check_node(&ctx, v)?;
                            params.insert(
                                other.to_string(),
                                crate::template::yamlfilters::node_value(v),
                            );
                        }
                    }
                }
                (name, params, when)
            }
            _ => return Err(ctx.err(d, "a dependency must be a role name or a mapping")),
        };
        let role = self.load_role(&name, Some((file, d)))?;
        Ok(RoleDep {
            role,
            params: Arc::new(params),
            when,
            no_log,
        })
    }

    pub(crate) fn want_file(&mut self, path: PathBuf) {
        if let Some(b) = self.bodies.last_mut() {
            if b.seen.insert(path.clone()) {
                b.pending.push(path);
            }
        }
    }

    pub(crate) fn want_var_file(&mut self, path: &Path) -> Result<(), Error> {
        let role_dir = self
            .bodies
            .last()
            .map(|b| b.role_dir.clone())
            .unwrap_or_default();
        let layer = self.vars_file(path, &role_dir)?;
        let key = std::fs::canonicalize(path).unwrap_or(path.to_path_buf());
        if let Some(b) = self.bodies.last_mut() {
            b.var_files.insert(key, Arc::new(layer));
        }
        Ok(())
    }

    /// A vars file a templated `include_vars` may name: read and checked like any, but one
    /// that is not a vars file at all (a task list, a template) is left out — the run fails
    /// if it names it, as Ansible's would. A construct outside the subset in it still
    /// refuses the role.
    pub(crate) fn want_var_file_if_vars(&mut self, path: &Path) {
        if let Err(e) = self.want_var_file(path) {
            if e.is_outside_subset() {
                self.unsupported.push(e);
            }
        }
    }

    /// Checks every file of `<dir>/templates/` as the template it may be rendered as (the
    /// name a `template:` or `lookup('template')` gives is often computed at run time): a
    /// filter, test or lookup outside the subset, or text minijinja cannot parse, refuses
    /// the role at load — a run never stops halfway on a template.
    fn check_template_files(&mut self, dir: &Path) {
        let tdir = dir.join("templates");
        if !tdir.is_dir() {
            return;
        }
        let at = |file: &Path, msg: String| Error::Load {
            file: file.to_path_buf(),
            line: 1,
            col: 1,
            msg,
        };
        let files = match search::files_under(&tdir) {
            Ok(f) => f,
            Err(m) => {
                self.unsupported.push(at(
                    &tdir,
                    format!("templates: {m}; so many is not supported by bosun"),
                ));
                return;
            }
        };
        for f in files {
            // Not text: Ansible's template module cannot render it either.
            let Ok(text) = std::fs::read_to_string(&f) else {
                continue;
            };
            if !crate::template::scan::is_possibly_template(&text) {
                continue;
            }
            match self.templar.check(&text) {
                Err(m) => self.unsupported.push(at(
                    &f,
                    format!("template error: {m} (this template is not supported by bosun)"),
                )),
                Ok(names) => {
                    let ctx = FileCtx {
                        file: Arc::new(f.clone()),
                        role_dir: dir,
                        depth: 0,
                    };
                    let node = Node {
                        value: Yaml::Null,
                        mark: Default::default(),
                    };
                    let _ = self.check_names(&ctx, &node, &names);
                }
            }
        }
    }

    /// Python plugins beside a role or playbook (`filter_plugins/`, `library/`, …) may
    /// define any name, even one bosun implements (a role's own `to_yaml`): bosun runs no
    /// Python, so such a role is left whole to real Ansible.
    fn check_local_plugins(&mut self, dir: &Path) {
        for sub in [
            "filter_plugins",
            "test_plugins",
            "lookup_plugins",
            "library",
            "module_utils",
            "action_plugins",
        ] {
            let d = dir.join(sub);
            let has_python = std::fs::read_dir(&d).is_ok_and(|rd| {
                rd.flatten()
                    .any(|e| e.path().extension().is_some_and(|x| x == "py"))
            });
            if has_python {
                self.unsupported.push(Error::Load {
                    file: d,
                    line: 1,
                    col: 1,
                    msg: format!("{sub}/ (Python plugins) is not supported by bosun"),
                });
            }
        }
    }

    fn drain_files(&mut self) -> Result<(), Error> {
        while let Some(path) = self.bodies.last_mut().and_then(|b| b.pending.pop()) {
            let role_dir = self
                .bodies
                .last()
                .map(|b| b.role_dir.clone())
                .unwrap_or_default();
            let docs = self.read_yaml(&path)?;
            let ctx = FileCtx {
                file: Arc::new(path.clone()),
                role_dir: &role_dir,
                depth: 0,
            };
            let tasks = match docs.first() {
                Some(d) => self.parse_tasks(&ctx, d)?,
                None => Vec::new(),
            };
            if let Some(b) = self.bodies.last_mut() {
                b.files.insert(path, Arc::new(tasks));
            }
        }
        Ok(())
    }

    fn load_playbook(&mut self, path: &Path) -> Result<Role, Error> {
        let path = std::fs::canonicalize(path).unwrap_or(path.to_path_buf());
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        self.basedir = Some(dir.clone());
        let docs = self.read_yaml(&path)?;
        let file = Arc::new(path.clone());
        let ctx_dir = dir.clone();
        let plays_node = docs
            .first()
            .ok_or_else(|| Error::Io(format!("{}: empty playbook", path.display())))?;
        let items = plays_node
            .as_seq()
            .ok_or_else(|| load_err(&file, plays_node, "a playbook must be a list of plays"))?;
        self.check_template_files(&dir);
        self.check_local_plugins(&dir);
        let mut plays = Vec::new();
        for p in items {
            self.bodies.push(BodyBuilder {
                role_dir: ctx_dir.clone(),
                files: HashMap::new(),
                var_files: HashMap::new(),
                pending: Vec::new(),
                seen: HashSet::new(),
            });
            let r = self.play(&file, &ctx_dir, p);
            let drained = r.and_then(|play| self.drain_files().map(|_| play));
            let b = self.bodies.pop();
            let mut play = drained?;
            let b = b.ok_or_else(|| Error::Io("internal: play builder missing".into()))?;
            play.body = Arc::new(RoleBody {
                name: "playbook".into(),
                path: ctx_dir.clone(),
                defaults: Default::default(),
                vars: Default::default(),
                deps: Vec::new(),
                files: b.files,
                var_files: b.var_files,
            });
            plays.push(play);
        }
        Ok(Role {
            plays,
            path,
            templar: self.templar.clone(),
        })
    }

    fn play(&mut self, file: &Arc<PathBuf>, dir: &Path, p: &Node) -> Result<Play, Error> {
        let ctx = FileCtx {
            file: file.clone(),
            role_dir: dir,
            depth: 0,
        };
        let pairs = p
            .as_map()
            .ok_or_else(|| ctx.err(p, "a play must be a mapping"))?;
        let mut play = Play {
            name: None,
            vars: Default::default(),
            roles: Vec::new(),
            pre_tasks: Default::default(),
            tasks: Default::default(),
            post_tasks: Default::default(),
            body: Arc::new(RoleBody {
                name: String::new(),
                path: dir.to_path_buf(),
                defaults: Default::default(),
                vars: Default::default(),
                deps: Vec::new(),
                files: HashMap::new(),
                var_files: HashMap::new(),
            }),
        };
        for (k, v) in pairs {
            match k.as_str().unwrap_or_default() {
                "name" => play.name = v.as_str().map(String::from),
                "hosts" => {
                    let h = v.as_str().unwrap_or_default();
                    if !matches!(h, "localhost" | "all" | "127.0.0.1") {
                        return Err(ctx.err(
                            v,
                            format!("hosts: {h} is not supported by bosun (it runs plays on localhost only)"),
                        ));
                    }
                }
                "gather_facts" => {
                    if !matches!(v.value, Yaml::Bool(false))
                        && v.as_str() != Some("no")
                        && v.as_str() != Some("false")
                    {
                        // Facts (and their `gather_subset`) are the host's: real Ansible
                        // gathers them exactly.
                        self.unsupported.push(ctx.err(v, "gather_facts: true is not supported by bosun (it gathers no facts, as ansible-operator's ANSIBLE_GATHERING=explicit)"));
                    }
                }
                "connection" | "collections" | "tags" | "any_errors_fatal" => {}
                "gather_subset" | "gather_timeout" => {}
                "vars" => play.vars = Arc::new(self.var_layer(&ctx, v)?),
                "roles" => {
                    for r in v.as_seq().unwrap_or_default() {
                        play.roles.push(self.dependency(file, dir, r)?);
                    }
                }
                "pre_tasks" => play.pre_tasks = Arc::new(self.parse_tasks(&ctx, v)?),
                "tasks" => play.tasks = Arc::new(self.parse_tasks(&ctx, v)?),
                "post_tasks" => play.post_tasks = Arc::new(self.parse_tasks(&ctx, v)?),
                other => self.unsupported.push(ctx.err(
                    k,
                    format!("play keyword '{other}' is not supported by bosun"),
                )),
            }
        }
        Ok(play)
    }
}
