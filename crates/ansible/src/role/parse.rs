//! Turns YAML task lists into validated [`Task`]s: every keyword, module, option, template,
//! filter, test and lookup checked against what bosun runs, errors naming file:line:col.
use std::path::{Path, PathBuf};
use std::sync::Arc;

use minijinja::value::Value;

use super::model::*;
use super::search::SearchPath;
use super::Loader;
use crate::modules::spec::{Module, TASK_KEYWORDS, UNSUPPORTED_KEYWORDS};
use crate::template::yamlfilters::node_value;
use crate::template::{scan, VarLayer};
use crate::yaml::{key_text, Node, NodeExt, Yaml};
use crate::Error;

/// How deep `import_tasks`/`block` may nest: a file importing itself ends in an error.
const MAX_NESTING: usize = 48;

pub(crate) fn load_err(file: &Path, n: &Node, msg: impl Into<String>) -> Error {
    Error::Load {
        file: file.to_path_buf(),
        line: n.mark.line,
        col: n.mark.col,
        msg: msg.into(),
    }
}

/// The task-level context of the file being parsed.
pub(crate) struct FileCtx<'a> {
    pub file: Arc<PathBuf>,
    /// The role's directory (include_tasks and lookups resolve against it).
    pub role_dir: &'a Path,
    pub depth: usize,
}

impl FileCtx<'_> {
    fn loc(&self, n: &Node) -> Loc {
        Loc {
            file: self.file.clone(),
            line: n.mark.line,
            col: n.mark.col,
        }
    }

    pub(crate) fn err(&self, n: &Node, msg: impl Into<String>) -> Error {
        load_err(&self.file, n, msg)
    }
}

/// Ansible's `parse_kv`: `a=1 b="x y"` (values stay strings, as in Ansible).
pub(crate) fn parse_kv(s: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut raw = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut depth = 0i32;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => {
                quote = None;
                cur.push(c);
            }
            (None, '"' | '\'') if depth == 0 => {
                quote = Some(c);
                cur.push(c);
            }
            (_, '\\') => {
                cur.push(c);
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            (None, '{') => {
                depth += 1;
                cur.push(c);
            }
            (None, '}') => {
                depth -= 1;
                cur.push(c);
            }
            (None, ' ') if depth == 0 => {
                if !cur.is_empty() {
                    raw.push(std::mem::take(&mut cur));
                }
            }
            _ => cur.push(c),
        }
    }
    if quote.is_some() {
        return Err(format!("unbalanced quotes in '{s}'"));
    }
    if !cur.is_empty() {
        raw.push(cur);
    }
    for item in raw {
        match item.split_once('=') {
            Some((k, v)) if !k.is_empty() && k.chars().all(|c| c.is_alphanumeric() || c == '_') => {
                let v = v.trim();
                let unq = if v.len() >= 2
                    && ((v.starts_with('"') && v.ends_with('"'))
                        || (v.starts_with('\'') && v.ends_with('\'')))
                {
                    &v[1..v.len() - 1]
                } else {
                    v
                };
                out.push((k.to_string(), unq.to_string()));
            }
            _ => return Err(format!("'{item}' is not a key=value argument")),
        }
    }
    Ok(out)
}

fn conditions(ctx: &FileCtx, n: &Node) -> Result<Vec<String>, Error> {
    let items: Vec<&Node> = match &n.value {
        Yaml::Seq(items) => items.iter().collect(),
        _ => vec![n],
    };
    items
        .into_iter()
        .map(|c| match &c.value {
            Yaml::Str(s) => Ok(s.clone()),
            Yaml::Bool(b) => Ok(if *b { "True" } else { "False" }.to_string()),
            Yaml::Int(i) => Ok(i.to_string()),
            Yaml::Null => Ok("None".into()),
            _ => Err(ctx.err(
                c,
                "a conditional must be a string, a boolean or a list of them",
            )),
        })
        .collect()
}

impl Loader {
    pub(crate) fn parse_tasks(&mut self, ctx: &FileCtx, list: &Node) -> Result<Vec<Task>, Error> {
        if ctx.depth > MAX_NESTING {
            return Err(ctx.err(
                list,
                "tasks nest too deep (an import or block that includes itself?)",
            ));
        }
        match &list.value {
            Yaml::Null => Ok(Vec::new()),
            Yaml::Seq(items) => items.iter().map(|t| self.parse_task(ctx, t)).collect(),
            _ => Err(ctx.err(list, "a task list must be a YAML list")),
        }
    }

    fn parse_task(&mut self, ctx: &FileCtx, node: &Node) -> Result<Task, Error> {
        let Some(pairs) = node.as_map() else {
            return Err(ctx.err(node, "a task must be a mapping"));
        };
        let mut task = Task {
            name: None,
            loc: ctx.loc(node),
            action: Action::Meta(MetaAction::Noop),
            when: Vec::new(),
            loop_kind: None,
            loop_value: None,
            loop_control: LoopControl::default(),
            register: None,
            until: None,
            retries: None,
            delay: None,
            changed_when: None,
            failed_when: None,
            ignore_errors: None,
            no_log: None,
            vars: Arc::new(VarLayer::new()),
        };
        let mut action: Option<(&Node, &Node)> = None;
        let mut unsupported_module = false;
        let mut block: Option<&Node> = None;
        let (mut rescue, mut always, mut extra_args) = (None, None, None);
        for (k, v) in pairs {
            let key = k
                .as_str()
                .ok_or_else(|| ctx.err(k, "task keys must be strings"))?;
            match key {
                "name" => task.name = Some(self.static_or_template(ctx, v)?),
                "when" => task.when = self.exprs(ctx, v)?,
                "changed_when" => task.changed_when = Some(self.exprs(ctx, v)?),
                "failed_when" => task.failed_when = Some(self.exprs(ctx, v)?),
                "until" => task.until = Some(self.exprs(ctx, v)?),
                "loop" | "with_items" | "with_list" | "with_dict" | "with_nested"
                | "with_together" | "with_subelements" | "with_indexed_items" | "with_sequence" => {
                    if task.loop_kind.is_some() {
                        return Err(ctx.err(k, "only one loop keyword may be used per task"));
                    }
                    task.loop_kind = Some(match key {
                        "loop" => LoopKind::Loop,
                        "with_items" => LoopKind::WithItems,
                        "with_list" => LoopKind::WithList,
                        "with_nested" => LoopKind::WithNested,
                        "with_together" => LoopKind::WithTogether,
                        "with_subelements" => LoopKind::WithSubelements,
                        "with_indexed_items" => LoopKind::WithIndexedItems,
                        "with_sequence" => LoopKind::WithSequence,
                        _ => LoopKind::WithDict,
                    });
                    self.check_node(ctx, v)?;
                    task.loop_value = Some(node_value(v));
                }
                "loop_control" => task.loop_control = self.loop_control(ctx, v)?,
                "register" => {
                    let r = v
                        .as_str()
                        .ok_or_else(|| ctx.err(v, "register takes a variable name"))?;
                    if !valid_var_name(r) {
                        return Err(ctx.err(v, format!("invalid variable name in 'register': {r}")));
                    }
                    task.register = Some(r.to_string());
                }
                "retries" | "delay" | "ignore_errors" | "no_log" => {
                    self.check_node(ctx, v)?;
                    let val = Some(node_value(v));
                    match key {
                        "retries" => task.retries = val,
                        "delay" => task.delay = val,
                        "no_log" => task.no_log = val,
                        _ => task.ignore_errors = val,
                    }
                }
                "vars" => task.vars = Arc::new(self.var_layer(ctx, v)?),
                "args" => extra_args = Some(v),
                "block" => block = Some(v),
                "rescue" => rescue = Some(v),
                "always" => always = Some(v),
                k2 if TASK_KEYWORDS.contains(&k2) => {}
                other if UNSUPPORTED_KEYWORDS.contains(&other) => {
                    self.unsupported.push(ctx.err(
                        k,
                        format!("task keyword '{other}' is not supported by bosun"),
                    ));
                }
                other => {
                    if Module::from_name(other).is_some() {
                        if let Some((prev, _)) = action {
                            return Err(ctx.err(
                                k,
                                format!(
                                    "conflicting action statements: {}, {other}",
                                    prev.as_str().unwrap_or_default()
                                ),
                            ));
                        }
                        action = Some((k, v));
                    } else if other.contains('.') || looks_like_module(other) {
                        self.unsupported.push(ctx.err(k, format!("module '{other}' is not supported by bosun (supported: k8s, k8s_info, k8s_status, k8s_event, k8s_scale, requeue_after, osdk_metric, set_fact, debug, fail, assert, pause, stat, file, meta, include_tasks, import_tasks, include_role, import_role, include_vars)")));
                        unsupported_module = true;
                    } else {
                        self.unsupported.push(ctx.err(
                            k,
                            format!("task keyword '{other}' is not supported by bosun"),
                        ));
                    }
                }
            }
        }
        let deeper = FileCtx {
            file: ctx.file.clone(),
            role_dir: ctx.role_dir,
            depth: ctx.depth + 1,
        };
        if let Some(b) = block {
            if action.is_some() {
                return Err(ctx.err(node, "a block cannot also call a module"));
            }
            if task.loop_kind.is_some() || task.register.is_some() {
                return Err(ctx.err(node, "loops and register are not allowed on a block"));
            }
            task.action = Action::Block {
                block: self.parse_tasks(&deeper, b)?,
                rescue: rescue
                    .map(|r| self.parse_tasks(&deeper, r))
                    .transpose()?
                    .unwrap_or_default(),
                always: always
                    .map(|a| self.parse_tasks(&deeper, a))
                    .transpose()?
                    .unwrap_or_default(),
            };
            return Ok(task);
        }
        if rescue.is_some() || always.is_some() {
            return Err(ctx.err(node, "rescue and always need a block"));
        }
        let Some((mk, mv)) = action else {
            if unsupported_module {
                // Reported; the load goes on to find the next one.
                task.action = Action::Meta(MetaAction::Noop);
                return Ok(task);
            }
            return Err(ctx.err(node, "no module or action found in this task"));
        };
        let module = Module::from_name(mk.as_str().unwrap_or_default())
            .ok_or_else(|| ctx.err(mk, "unknown module"))?;
        let args = self.module_args(ctx, module, mk, mv, extra_args)?;
        task.action = self.action(&deeper, module, mk, args, &task)?;
        Ok(task)
    }

    fn exprs(&mut self, ctx: &FileCtx, v: &Node) -> Result<Vec<String>, Error> {
        let list = conditions(ctx, v)?;
        for e in &list {
            let names = self
                .templar
                .check_expr(e)
                .map_err(|m| ctx.err(v, format!("invalid conditional '{e}': {m}")))?;
            self.check_names(ctx, v, &names)?;
        }
        Ok(list)
    }

    fn static_or_template(&mut self, ctx: &FileCtx, v: &Node) -> Result<String, Error> {
        self.check_node(ctx, v)?;
        Ok(match &v.value {
            Yaml::Str(s) => s.clone(),
            _ => key_text(v),
        })
    }

    fn loop_control(&mut self, ctx: &FileCtx, v: &Node) -> Result<LoopControl, Error> {
        let mut lc = LoopControl::default();
        for (k, val) in v
            .as_map()
            .ok_or_else(|| ctx.err(v, "loop_control must be a mapping"))?
        {
            match k.as_str().unwrap_or_default() {
                "loop_var" => {
                    lc.loop_var = val
                        .as_str()
                        .filter(|s| valid_var_name(s))
                        .ok_or_else(|| ctx.err(val, "loop_var must be a variable name"))?
                        .to_string()
                }
                "index_var" => {
                    lc.index_var = Some(
                        val.as_str()
                            .filter(|s| valid_var_name(s))
                            .ok_or_else(|| ctx.err(val, "index_var must be a variable name"))?
                            .to_string(),
                    )
                }
                "label" => {
                    self.check_node(ctx, val)?;
                    lc.label = Some(node_value(val));
                }
                "pause" => {
                    self.check_node(ctx, val)?;
                    lc.pause = Some(node_value(val));
                }
                "extended" => lc.extended = matches!(val.value, Yaml::Bool(true)),
                other => {
                    return Err(ctx.err(
                        k,
                        format!("loop_control option '{other}' is not supported by bosun"),
                    ))
                }
            }
        }
        Ok(lc)
    }

    pub(crate) fn var_layer(&mut self, ctx: &FileCtx, v: &Node) -> Result<VarLayer, Error> {
        let mut layer = VarLayer::new();
        match &v.value {
            Yaml::Null => {}
            Yaml::Map(pairs) => {
                for (k, val) in pairs {
                    let name = key_text(k);
                    if !valid_var_name(&name) {
                        return Err(ctx.err(k, format!("invalid variable name '{name}'")));
                    }
                    self.check_node(ctx, val)?;
                    layer.insert(name, node_value(val));
                }
            }
            _ => return Err(ctx.err(v, "vars must be a mapping")),
        }
        Ok(layer)
    }

    /// Checks every template inside a value.
    pub(crate) fn check_node(&mut self, ctx: &FileCtx, v: &Node) -> Result<(), Error> {
        match &v.value {
            Yaml::Str(s) if scan::is_possibly_template(s) => {
                let names = self
                    .templar
                    .check(s)
                    .map_err(|m| ctx.err(v, format!("template error: {m}")))?;
                self.check_names(ctx, v, &names)
            }
            Yaml::Seq(items) => items.iter().try_for_each(|i| self.check_node(ctx, i)),
            Yaml::Map(pairs) => pairs.iter().try_for_each(|(_, x)| self.check_node(ctx, x)),
            _ => Ok(()),
        }
    }

    pub(crate) fn check_names(
        &mut self,
        ctx: &FileCtx,
        v: &Node,
        names: &scan::Names,
    ) -> Result<(), Error> {
        if let Some(f) = names
            .filters
            .iter()
            .find(|f| !crate::template::filters::supported(f))
        {
            self.unsupported
                .push(ctx.err(v, format!("filter '{f}' is not supported by bosun")));
        }
        if let Some(t) = names
            .tests
            .iter()
            .find(|t| !crate::template::tests::supported(t))
        {
            self.unsupported
                .push(ctx.err(v, format!("test '{t}' is not supported by bosun")));
        }
        for l in &names.lookups {
            match l {
                None => self.unsupported.push(ctx.err(v, "a lookup whose plugin name is computed cannot be checked; name the plugin literally")),
                Some(name) if !crate::template::lookups::supported(name) => {
                    self.unsupported.push(ctx.err(v, format!("lookup plugin '{name}' is not supported by bosun")));
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn module_args(
        &mut self,
        ctx: &FileCtx,
        module: Module,
        mk: &Node,
        mv: &Node,
        extra: Option<&Node>,
    ) -> Result<Vec<(String, Node)>, Error> {
        let mut args: Vec<(String, Node)> = Vec::new();
        match &mv.value {
            Yaml::Null => {}
            Yaml::Map(pairs) => args.extend(pairs.iter().map(|(k, v)| (key_text(k), v.clone()))),
            Yaml::Str(s) if module.free_form() => {
                // `include_tasks: file.yml`, `meta: end_play`; `k=v` pairs are allowed too.
                let kv = if s.contains('=') && !scan::is_possibly_template(s) {
                    parse_kv(s).ok()
                } else {
                    None
                };
                match kv {
                    Some(kv) if !kv.is_empty() => args.extend(kv.into_iter().map(|(k, v)| {
                        (
                            k,
                            Node {
                                value: Yaml::Str(v),
                                mark: mv.mark,
                            },
                        )
                    })),
                    _ => args.push(("_raw_params".into(), mv.clone())),
                }
            }
            Yaml::Str(s) => {
                let kv = parse_kv(s).map_err(|m| ctx.err(mv, m))?;
                args.extend(kv.into_iter().map(|(k, v)| {
                    (
                        k,
                        Node {
                            value: Yaml::Str(v),
                            mark: mv.mark,
                        },
                    )
                }));
            }
            _ => {
                return Err(ctx.err(
                    mv,
                    format!("arguments of {} must be a mapping", module.name()),
                ))
            }
        }
        if let Some(e) = extra {
            let pairs = e
                .as_map()
                .ok_or_else(|| ctx.err(e, "args must be a mapping"))?;
            args.extend(pairs.iter().map(|(k, v)| (key_text(k), v.clone())));
        }
        if let Some(opts) = module.options() {
            for (k, v) in &args {
                if !opts.contains(&k.as_str()) {
                    let at = if k == "_raw_params" { mv } else { v };
                    return Err(ctx.err(
                        at,
                        format!(
                            "option '{k}' of module {} is not supported by bosun (supported: {})",
                            module.name(),
                            opts.join(", ")
                        ),
                    ));
                }
            }
        } else if module == Module::SetFact {
            for (k, _) in &args {
                if k != "cacheable" && !valid_var_name(k) && !scan::is_possibly_template(k) {
                    return Err(ctx.err(mk, format!("The variable name '{k}' is not valid")));
                }
            }
        }
        for (_, v) in &args {
            self.check_node(ctx, v)?;
        }
        Ok(args)
    }

    fn action(
        &mut self,
        ctx: &FileCtx,
        module: Module,
        mk: &Node,
        args: Vec<(String, Node)>,
        task: &Task,
    ) -> Result<Action, Error> {
        let arg = |name: &str| args.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v);
        let base = ctx.file.parent().map(Path::to_path_buf).unwrap_or_default();
        Ok(match module {
            Module::Meta => {
                let what = arg("_raw_params")
                    .and_then(NodeExt::as_str)
                    .unwrap_or_default();
                Action::Meta(match what {
                    "end_play" => MetaAction::EndPlay,
                    "end_host" => MetaAction::EndHost,
                    "end_role" => MetaAction::EndRole,
                    "noop" => MetaAction::Noop,
                    "flush_handlers" => MetaAction::FlushHandlers,
                    other => {
                        return Err(ctx.err(mk, format!("meta: {other} is not supported by bosun")))
                    }
                })
            }
            Module::ImportTasks => {
                let file = arg("file")
                    .or(arg("_raw_params"))
                    .ok_or_else(|| ctx.err(mk, "import_tasks needs a file"))?;
                let name = file
                    .as_str()
                    .filter(|s| !scan::is_possibly_template(s))
                    .ok_or_else(|| {
                        ctx.err(
                            file,
                            "import_tasks of a file named by a template is not supported by bosun",
                        )
                    })?;
                if task.loop_kind.is_some() {
                    return Err(ctx.err(mk, "import_tasks cannot loop (use include_tasks)"));
                }
                let path = self
                    .find_tasks_file(ctx, &base, name)
                    .ok_or_else(|| ctx.err(file, format!("could not find tasks file '{name}'")))?;
                let nodes = self.read_yaml(&path)?;
                let fctx = FileCtx {
                    file: Arc::new(path.clone()),
                    role_dir: ctx.role_dir,
                    depth: ctx.depth + 1,
                };
                let doc = nodes.first().cloned().unwrap_or(Node {
                    value: Yaml::Null,
                    mark: Default::default(),
                });
                Action::Block {
                    block: self.parse_tasks(&fctx, &doc)?,
                    rescue: Vec::new(),
                    always: Vec::new(),
                }
            }
            Module::IncludeTasks => {
                let file = arg("file")
                    .or(arg("_raw_params"))
                    .ok_or_else(|| ctx.err(mk, "include_tasks needs a file"))?;
                let name = file
                    .as_str()
                    .ok_or_else(|| ctx.err(file, "include_tasks needs a file name"))?;
                if scan::is_possibly_template(name) {
                    // Any task file of the role may be named: load and check them all.
                    for p in self.all_task_files(ctx) {
                        self.want_file(p);
                    }
                } else {
                    let path = self.find_tasks_file(ctx, &base, name).ok_or_else(|| {
                        ctx.err(file, format!("could not find tasks file '{name}'"))
                    })?;
                    self.want_file(path);
                }
                Action::IncludeTasks {
                    file: node_value(file),
                    base,
                }
            }
            Module::IncludeRole | Module::ImportRole => {
                let name = arg("name")
                    .and_then(NodeExt::as_str)
                    .filter(|s| !scan::is_possibly_template(s))
                    .ok_or_else(|| {
                        ctx.err(
                            mk,
                            "include_role or import_role of a role named by a template is not supported by bosun",
                        )
                    })?;
                let tasks_from = arg("tasks_from")
                    .and_then(NodeExt::as_str)
                    .unwrap_or("main")
                    .to_string();
                let role = self.load_role_from(name, Some((&ctx.file, mk)), &tasks_from)?;
                if role.tasks_file(&tasks_from).is_none() && tasks_from != "main" {
                    return Err(ctx.err(mk, format!("role {name} has no tasks file {tasks_from}")));
                }
                Action::Role {
                    role,
                    tasks_from,
                    dynamic: module == Module::IncludeRole,
                }
            }
            Module::IncludeVars => {
                let file = arg("file")
                    .or(arg("_raw_params"))
                    .ok_or_else(|| ctx.err(mk, "include_vars needs a file"))?;
                let name = file
                    .as_str()
                    .ok_or_else(|| ctx.err(file, "include_vars needs a file name"))?;
                if arg("name").is_some() {
                    return Err(ctx.err(mk, "include_vars name= is not supported by bosun"));
                }
                let in_role = self.basedir.as_deref() != Some(ctx.role_dir);
                let search = SearchPath::new(
                    in_role.then_some(ctx.role_dir),
                    &base,
                    self.basedir.as_deref(),
                );
                if scan::is_possibly_template(name) {
                    // Known only at run time: every file it could name is read now.
                    let files = search.matching_files("vars", name).map_err(|m| {
                        ctx.err(
                            file,
                            format!("an include_vars name with templates over {m} is not supported by bosun"),
                        )
                    })?;
                    for p in files {
                        self.want_var_file_if_vars(&p);
                    }
                } else {
                    let path = search
                        .find("vars", name)
                        .map_err(|_| ctx.err(file, format!("could not find vars file '{name}'")))?;
                    self.want_var_file(&path)?;
                }
                Action::IncludeVars {
                    file: node_value(file),
                    search,
                }
            }
            _ => {
                crate::modules::validate::static_args(module, &args)
                    .map_err(|(n, m)| ctx.err(n.unwrap_or(mk), m))?;
                let v = Value::from_pairs(
                    args.iter()
                        .map(|(k, v)| (Value::from(k.as_str()), node_value(v))),
                );
                Action::Module { module, args: v }
            }
        })
    }

    fn find_tasks_file(&self, ctx: &FileCtx, base: &Path, name: &str) -> Option<PathBuf> {
        let mut cands = vec![base.join(name), ctx.role_dir.join("tasks").join(name)];
        if Path::new(name).extension().is_none() {
            cands.push(base.join(format!("{name}.yml")));
            cands.push(ctx.role_dir.join("tasks").join(format!("{name}.yml")));
        }
        cands
            .into_iter()
            .find(|p| p.is_file())
            .map(|p| std::fs::canonicalize(&p).unwrap_or(p))
    }

    fn all_task_files(&self, ctx: &FileCtx) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for dir in [
            ctx.role_dir.join("tasks"),
            ctx.file.parent().map(Path::to_path_buf).unwrap_or_default(),
        ] {
            if let Ok(rd) = std::fs::read_dir(&dir) {
                for e in rd.flatten() {
                    let p = e.path();
                    if matches!(p.extension().and_then(|e| e.to_str()), Some("yml" | "yaml")) {
                        out.push(std::fs::canonicalize(&p).unwrap_or(p));
                    }
                }
            }
        }
        out
    }
}

pub(crate) fn valid_var_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(|f| f.is_alphabetic() || f == '_')
        && c.all(|x| x.is_alphanumeric() || x == '_')
}

/// Heuristic for an error message: a key that is not a known keyword is most likely a module.
fn looks_like_module(k: &str) -> bool {
    k.chars()
        .all(|c| c.is_ascii_lowercase() || c == '_' || c.is_ascii_digit())
}
