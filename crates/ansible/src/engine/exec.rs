//! The task interpreter.
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use minijinja::value::{Value, ValueKind};
use serde_json::{json, Map, Value as Json};

use super::loops;
use super::outcome::*;
use super::RunContext;
use crate::modules::{self, Effects, Module};
use crate::role::{Action, MetaAction, Play, RoleBody, RoleDep, Task};
use crate::template::{value, Scope, Templar, VarLayer};

/// Ansible's `omit` placeholder: an argument templated to it is dropped.
pub(crate) const OMIT: &str = "__omit_place_holder__bosun";
/// Longest `debug` output logged (a role may print a whole spec).
const MAX_LOGGED: usize = 8 * 1024;
/// How deep `include_tasks`/roles may nest at run time.
const MAX_INCLUDE_DEPTH: usize = 24;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flow {
    Continue,
    Failed,
    EndPlay,
    EndRole,
}

/// Where a task runs: its lower variable layers, inherited conditions and its role.
#[derive(Clone)]
pub(crate) struct Frame {
    low: Vec<Arc<VarLayer>>,
    when: Vec<String>,
    magic: Arc<VarLayer>,
    body: Arc<RoleBody>,
    /// The nearest enclosing block's, include's or role entry's `no_log`.
    no_log: Option<Value>,
}

pub(crate) struct Run {
    pub ctx: RunContext,
    pub templar: Templar,
    extra: Arc<VarLayer>,
    facts: Arc<VarLayer>,
    pub outcome: Outcome,
    executed: usize,
    depth: usize,
    playbook_dir: PathBuf,
    runtime: Arc<dyn crate::template::lookups::Runtime>,
    aborted: Option<String>,
    /// Whether the task being run has `no_log` in effect: its recorded result and failure
    /// message are replaced by Ansible's [`CENSORED`] text (what it registers is not).
    hide: bool,
}

fn str_layer(pairs: &[(&str, Value)]) -> Arc<VarLayer> {
    Arc::new(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    )
}

impl Run {
    pub fn new(ctx: RunContext, templar: Templar, extra: Arc<VarLayer>, path: &Path) -> Run {
        let playbook_dir = if path.is_file() {
            path.parent().map(Path::to_path_buf).unwrap_or_default()
        } else {
            path.to_path_buf()
        };
        let runtime = Arc::new(crate::kube_api::LookupRuntime::new(&ctx));
        Run {
            ctx,
            templar,
            extra,
            facts: Arc::new(VarLayer::new()),
            outcome: Outcome::default(),
            executed: 0,
            depth: 0,
            playbook_dir,
            runtime,
            aborted: None,
            hide: false,
        }
    }

    pub fn finish(mut self) -> Outcome {
        if let Some(msg) = self.aborted.take() {
            self.outcome.stats.failures += 1;
            self.outcome.failures.push(FailedTask {
                name: "run".into(),
                msg,
                location: String::new(),
            });
        }
        self.outcome.completed = Some(chrono::Utc::now());
        self.outcome
    }

    fn magic(&self, body: &RoleBody, role: bool) -> Arc<VarLayer> {
        let mut m = vec![
            (
                "playbook_dir",
                Value::from(self.playbook_dir.display().to_string()),
            ),
            ("inventory_hostname", Value::from("localhost")),
            ("inventory_hostname_short", Value::from("localhost")),
            ("ansible_check_mode", Value::from(false)),
            ("omit", Value::from(OMIT)),
        ];
        if role {
            m.push(("role_path", Value::from(body.path.display().to_string())));
            m.push(("role_name", Value::from(body.name.as_str())));
        }
        str_layer(&m)
    }

    pub(crate) fn scope(
        &self,
        frame: &Frame,
        task_vars: &Arc<VarLayer>,
        top: Option<Arc<VarLayer>>,
    ) -> Arc<Scope> {
        let mut layers = frame.low.clone();
        layers.push(task_vars.clone());
        layers.push(self.facts.clone());
        layers.push(frame.magic.clone());
        layers.push(self.extra.clone());
        if let Some(t) = top {
            layers.push(t);
        }
        Scope::new(self.templar.clone(), layers, Some(self.runtime.clone()))
    }

    pub async fn play(&mut self, play: &Play) -> Flow {
        let base = Frame {
            low: vec![play.vars.clone()],
            when: Vec::new(),
            magic: self.magic(&play.body, false),
            body: play.body.clone(),
            no_log: None,
        };
        for list in [&play.pre_tasks] {
            match self.run_tasks(list, &base).await {
                Flow::Continue | Flow::EndRole => {}
                f => return f,
            }
        }
        for dep in &play.roles {
            match self.run_role(dep, &base, "main").await {
                Flow::Continue | Flow::EndRole => {}
                f => return f,
            }
        }
        for list in [&play.tasks, &play.post_tasks] {
            match self.run_tasks(list, &base).await {
                Flow::Continue | Flow::EndRole => {}
                f => return f,
            }
        }
        Flow::Continue
    }

    /// A role: its dependencies, then its tasks, with its defaults below the play's vars and
    /// its vars above them.
    fn run_role<'a>(
        &'a mut self,
        dep: &'a RoleDep,
        outer: &'a Frame,
        tasks_from: &'a str,
    ) -> futures::future::BoxFuture<'a, Flow> {
        Box::pin(async move {
            if self.depth >= MAX_INCLUDE_DEPTH {
                self.aborted = Some(format!(
                    "roles and includes nest deeper than {MAX_INCLUDE_DEPTH}"
                ));
                return Flow::Failed;
            }
            self.depth += 1;
            let role = &dep.role;
            let mut low = vec![role.defaults.clone()];
            low.extend(outer.low.iter().cloned());
            low.push(role.vars.clone());
            low.push(dep.params.clone());
            let mut when = outer.when.clone();
            when.extend(dep.when.iter().cloned());
            let frame = Frame {
                low,
                when,
                magic: self.magic(role, true),
                body: role.clone(),
                no_log: dep.no_log.clone().or_else(|| outer.no_log.clone()),
            };
            let mut flow = Flow::Continue;
            for d in &role.deps {
                flow = self.run_role(d, &frame, "main").await;
                if flow != Flow::Continue {
                    break;
                }
            }
            if flow == Flow::Continue {
                if let Some(tasks) = role.tasks_file(tasks_from).cloned() {
                    flow = self.run_tasks(&tasks, &frame).await;
                }
            }
            self.depth -= 1;
            if flow == Flow::EndRole {
                Flow::Continue
            } else {
                flow
            }
        })
    }

    pub(crate) fn run_tasks<'a>(
        &'a mut self,
        tasks: &'a [Task],
        frame: &'a Frame,
    ) -> futures::future::BoxFuture<'a, Flow> {
        Box::pin(async move {
            for t in tasks {
                let f = self.run_task(t, frame).await;
                if f != Flow::Continue {
                    return f;
                }
            }
            Flow::Continue
        })
    }

    fn count(&mut self) -> bool {
        if self.ctx.remaining().is_zero() {
            self.aborted = Some(format!(
                "the run went past its deadline of {} s; stopped",
                self.ctx.run_timeout.as_secs()
            ));
            return false;
        }
        self.executed += 1;
        if self.executed > self.ctx.max_tasks {
            self.aborted = Some(format!(
                "the run executed more than {} tasks (loops and includes count); stopped",
                self.ctx.max_tasks
            ));
            return false;
        }
        true
    }

    /// Whether `no_log` is in effect for `task` (its own, else the nearest enclosing one's).
    /// A `no_log` that does not template hides: the safe side.
    fn hidden(&self, task: &Task, frame: &Frame) -> bool {
        let Some(v) = task.no_log.as_ref().or(frame.no_log.as_ref()) else {
            return false;
        };
        let scope = self.scope(frame, &task.vars, None);
        match self.templar.template_value(v, &scope) {
            Ok(v) => crate::template::filters::to_bool(&v),
            Err(_) => true,
        }
    }

    async fn run_task(&mut self, task: &Task, frame: &Frame) -> Flow {
        if self.aborted.is_some() || !self.count() {
            return Flow::Failed;
        }
        self.hide = self.hidden(task, frame);
        if !matches!(task.action, Action::Block { .. }) {
            tracing::debug!(task = %task.display_name(), "[playbook task start]");
        }
        match &task.action {
            Action::Block {
                block,
                rescue,
                always,
            } => {
                let mut inner = frame.clone();
                inner.low.push(task.vars.clone());
                inner.when.extend(task.when.iter().cloned());
                if task.no_log.is_some() {
                    inner.no_log = task.no_log.clone();
                }
                self.run_block(block, rescue, always, &inner).await
            }
            Action::Meta(m) => {
                let scope = self.scope(frame, &task.vars, None);
                match self.conditions_hold(task, frame, &scope) {
                    Ok(true) => {}
                    Ok(false) => {
                        self.record(task, "meta", TaskStatus::Skipped, skipped_result(None));
                        return Flow::Continue;
                    }
                    Err(msg) => return self.fail(task, "meta", msg, false),
                }
                match m {
                    MetaAction::EndPlay | MetaAction::EndHost => Flow::EndPlay,
                    MetaAction::EndRole => Flow::EndRole,
                    MetaAction::Noop | MetaAction::FlushHandlers => Flow::Continue,
                }
            }
            Action::Role {
                role,
                tasks_from,
                dynamic,
            } => {
                let scope = self.scope(frame, &task.vars, None);
                match self.conditions_hold(task, frame, &scope) {
                    Ok(true) => {}
                    Ok(false) => {
                        self.record(
                            task,
                            "include_role",
                            TaskStatus::Skipped,
                            skipped_result(None),
                        );
                        return Flow::Continue;
                    }
                    Err(msg) => return self.fail(task, "include_role", msg, false),
                }
                if *dynamic {
                    // Like include_tasks, a dynamic include counts as an ok task.
                    self.record(
                        task,
                        "include_role",
                        TaskStatus::Ok,
                        json!({"changed": false, "include_args": {"name": role.name}}),
                    );
                }
                let dep = RoleDep {
                    role: role.clone(),
                    params: task.vars.clone(),
                    when: Vec::new(),
                    // A static import applies its keywords to the role's tasks; a dynamic
                    // include only to itself (as include_tasks).
                    no_log: if *dynamic { None } else { task.no_log.clone() },
                };
                let mut outer = frame.clone();
                outer.when.clear();
                self.run_role(&dep, &outer, tasks_from).await
            }
            Action::IncludeTasks { .. } | Action::IncludeVars { .. } | Action::Module { .. } => {
                self.run_module_task(task, frame).await
            }
        }
    }

    async fn run_block(
        &mut self,
        block: &[Task],
        rescue: &[Task],
        always: &[Task],
        frame: &Frame,
    ) -> Flow {
        let failures_before = self.outcome.failures.len();
        let tasks_before = self.outcome.tasks.len();
        let mut flow = self.run_tasks(block, frame).await;
        if flow == Flow::Failed && !rescue.is_empty() && self.aborted.is_none() {
            // The block's failures are rescued: no longer failures of the run.
            let rescued = self.outcome.failures.len() - failures_before;
            self.outcome.failures.truncate(failures_before);
            self.outcome.stats.failures -= rescued as u64;
            self.outcome.stats.rescued += 1;
            for t in &mut self.outcome.tasks[tasks_before..] {
                if t.status == TaskStatus::Failed {
                    t.status = TaskStatus::Rescued;
                }
            }
            flow = self.run_tasks(rescue, frame).await;
        }
        if !always.is_empty() && flow != Flow::EndPlay && self.aborted.is_none() {
            let f = self.run_tasks(always, frame).await;
            if f != Flow::Continue {
                return f;
            }
        }
        flow
    }

    /// The task's inherited and own `when`, for the current scope.
    pub(crate) fn conditions_hold(
        &self,
        task: &Task,
        frame: &Frame,
        scope: &Arc<Scope>,
    ) -> Result<bool, String> {
        for cond in frame.when.iter().chain(task.when.iter()) {
            match self.templar.eval_bool(cond, scope) {
                Ok(true) => {}
                Ok(false) => return Ok(false),
                Err(e) => {
                    return Err(format!(
                        "The conditional check '{cond}' failed. The error was: {e}"
                    ))
                }
            }
        }
        Ok(true)
    }

    pub(crate) fn record(&mut self, task: &Task, module: &str, status: TaskStatus, result: Json) {
        let result = if self.hide { censor(&result) } else { result };
        if module == "debug" && status == TaskStatus::Ok {
            // As ansible-operator logs a debug task's output (`[playbook debug]`, level info).
            let mut shown = result
                .get("msg")
                .or(result.get("censored"))
                .map(|m| m.as_str().map_or_else(|| m.to_string(), String::from))
                .unwrap_or_else(|| result.to_string());
            if shown.len() > MAX_LOGGED {
                let mut cut = MAX_LOGGED;
                while !shown.is_char_boundary(cut) {
                    cut -= 1;
                }
                shown.truncate(cut);
                shown.push_str("… (truncated)");
            }
            tracing::info!(task = %task.display_name(), msg = %shown, "[playbook debug]");
        }
        let s = &mut self.outcome.stats;
        match status {
            TaskStatus::Ok => s.ok += 1,
            TaskStatus::Changed => {
                s.ok += 1;
                s.changed += 1;
            }
            TaskStatus::Skipped => s.skipped += 1,
            TaskStatus::Failed => s.failures += 1,
            TaskStatus::Ignored => {
                s.ok += 1;
                s.ignored += 1;
            }
            TaskStatus::Rescued => s.rescued += 1,
        }
        if !self.ctx.keep_results {
            return;
        }
        self.outcome.tasks.push(TaskResult {
            name: task.display_name(),
            module: module.to_string(),
            status,
            result,
            location: task.loc.to_string(),
        });
    }

    fn fail(&mut self, task: &Task, module: &str, msg: String, ignore: bool) -> Flow {
        let result = json!({"failed": true, "msg": msg, "changed": false});
        if ignore {
            self.record(task, module, TaskStatus::Ignored, result);
            return Flow::Continue;
        }
        self.outcome.failures.push(FailedTask {
            name: task.display_name(),
            msg: if self.hide { CENSORED.into() } else { msg },
            location: task.loc.to_string(),
        });
        self.record(task, module, TaskStatus::Failed, result);
        Flow::Failed
    }

    fn register(&mut self, task: &Task, result: &Json) {
        if let Some(r) = &task.register {
            Arc::make_mut(&mut self.facts).insert(r.clone(), value::from_json(result));
        }
    }

    async fn run_module_task(&mut self, task: &Task, frame: &Frame) -> Flow {
        let (module, name) = match &task.action {
            Action::Module { module, .. } => (Some(*module), module.name()),
            Action::IncludeTasks { .. } => (None, "include_tasks"),
            _ => (None, "include_vars"),
        };
        let scope = self.scope(frame, &task.vars, None);
        let ignore = match &task.ignore_errors {
            None => false,
            Some(v) => match self.templar.template_value(v, &scope) {
                Ok(v) => crate::template::filters::to_bool(&v),
                Err(e) => return self.fail(task, name, e.to_string(), false),
            },
        };
        let items = match loops::items(self, task, &scope) {
            Ok(items) => items,
            Err(msg) => return self.fail(task, name, msg, ignore),
        };
        let Some(items) = items else {
            // No loop.
            match self.conditions_hold(task, frame, &scope) {
                Ok(true) => {}
                Ok(false) => {
                    let cond = frame
                        .when
                        .iter()
                        .chain(task.when.iter())
                        .find(|c| !matches!(self.templar.eval_bool(c, &scope), Ok(true)))
                        .cloned();
                    let r = skipped_result(cond);
                    self.register(task, &r);
                    self.record(task, name, TaskStatus::Skipped, r);
                    return Flow::Continue;
                }
                Err(msg) => return self.fail(task, name, msg, ignore),
            }
            if let Action::IncludeTasks { .. } = task.action {
                return self.include_tasks(task, frame, &scope, None, true).await;
            }
            let mut fx = Effects::default();
            let r = if module.is_none() {
                self.include_vars(task, frame, &scope, &mut fx)
            } else {
                self.attempt(task, module, &scope, &mut fx).await
            };
            return self.finish_task(task, name, r, fx, ignore);
        };
        // A loop: one result per item, aggregated as Ansible registers it.
        let mut results = Vec::new();
        let mut all_fx = Effects::default();
        let mut includes = Vec::new();
        for (i, item) in items.iter().enumerate() {
            if !self.count() {
                return Flow::Failed;
            }
            let top = loops::item_layer(task, item, i, items.len());
            let iscope = self.scope(frame, &task.vars, Some(top.clone()));
            let label = loops::label(self, task, item, &iscope);
            match self.conditions_hold(task, frame, &iscope) {
                Ok(true) => {}
                Ok(false) => {
                    let cond = task
                        .when
                        .iter()
                        .find(|c| !matches!(self.templar.eval_bool(c, &iscope), Ok(true)))
                        .cloned();
                    results.push(loops::with_item(task, skipped_result(cond), item, i, label));
                    continue;
                }
                Err(msg) => {
                    results.push(loops::with_item(
                        task,
                        json!({"failed": true, "msg": msg, "changed": false}),
                        item,
                        i,
                        label,
                    ));
                    continue;
                }
            }
            if let Action::IncludeTasks { file, .. } = &task.action {
                // Ansible first resolves every item's include, then runs them in order.
                let name = self
                    .templar
                    .template_value(file, &iscope)
                    .map(|v| value::py_str(&v))
                    .unwrap_or_default();
                results.push(loops::with_item(
                    task,
                    json!({"changed": false, "include": name, "include_args": {}}),
                    item,
                    i,
                    label,
                ));
                includes.push((iscope, top));
                continue;
            }
            let mut fx = Effects::default();
            let r = if module.is_none() {
                self.include_vars(task, frame, &iscope, &mut fx)
            } else {
                self.attempt(task, module, &iscope, &mut fx).await
            };
            let item_failed = r.get("failed").and_then(Json::as_bool).unwrap_or(false);
            // Facts set by one item are seen by the next, as in Ansible.
            if !item_failed {
                let facts = std::mem::take(&mut fx.facts);
                let layer = Arc::make_mut(&mut self.facts);
                for (k, v) in facts {
                    layer.insert(k, v);
                }
            }
            all_fx.merge(fx);
            results.push(loops::with_item(task, r, item, i, label));
            if let Some(p) = &task.loop_control.pause {
                let secs = self
                    .templar
                    .template_value(p, &iscope)
                    .ok()
                    .and_then(|v| f64::try_from(v).ok())
                    .unwrap_or(0.0);
                if secs > 0.0 {
                    tokio::time::sleep(Duration::from_secs_f64(
                        secs.min(self.ctx.remaining().as_secs_f64()),
                    ))
                    .await;
                }
            }
        }
        let aggregate = loops::aggregate(results);
        if let Action::IncludeTasks { .. } = task.action {
            let skipped = aggregate
                .get("skipped")
                .and_then(Json::as_bool)
                .unwrap_or(false);
            self.register(task, &aggregate);
            self.record(
                task,
                name,
                if skipped {
                    TaskStatus::Skipped
                } else {
                    TaskStatus::Ok
                },
                aggregate,
            );
            // Ansible counts every included file of a looped include as an ok.
            self.outcome.stats.ok += includes.len().saturating_sub(1) as u64;
            for (iscope, top) in includes {
                let f = self
                    .include_tasks(task, frame, &iscope, Some(top), false)
                    .await;
                if f != Flow::Continue {
                    return f;
                }
            }
            return Flow::Continue;
        }
        self.finish_task(task, name, aggregate, all_fx, ignore)
    }

    fn finish_task(
        &mut self,
        task: &Task,
        name: &str,
        result: Json,
        fx: Effects,
        ignore: bool,
    ) -> Flow {
        let failed = result
            .get("failed")
            .and_then(Json::as_bool)
            .unwrap_or(false);
        let skipped = result
            .get("skipped")
            .and_then(Json::as_bool)
            .unwrap_or(false);
        let changed = result
            .get("changed")
            .and_then(Json::as_bool)
            .unwrap_or(false);
        if !failed {
            self.apply_effects(fx);
        } else {
            // Side effects already made on the cluster still count for watches.
            self.outcome.touched.extend(fx.touched);
        }
        self.register(task, &result);
        if failed {
            let msg = result
                .get("msg")
                .map(|m| {
                    m.as_str()
                        .map(String::from)
                        .unwrap_or_else(|| m.to_string())
                })
                .unwrap_or_else(|| "unknown playbook failure".into());
            if ignore {
                self.record(task, name, TaskStatus::Ignored, result);
                return Flow::Continue;
            }
            self.outcome.failures.push(FailedTask {
                name: task.display_name(),
                msg: if self.hide { CENSORED.into() } else { msg },
                location: task.loc.to_string(),
            });
            self.record(task, name, TaskStatus::Failed, result);
            return Flow::Failed;
        }
        let status = if skipped {
            TaskStatus::Skipped
        } else if changed {
            TaskStatus::Changed
        } else {
            TaskStatus::Ok
        };
        self.record(task, name, status, result);
        Flow::Continue
    }

    /// `include_tasks`: the file's tasks, with the include's vars (and loop variable) below
    /// them; the include's own `when` is not inherited.
    async fn include_tasks(
        &mut self,
        task: &Task,
        frame: &Frame,
        scope: &Arc<Scope>,
        item: Option<Arc<VarLayer>>,
        record: bool,
    ) -> Flow {
        let Action::IncludeTasks { file, base } = &task.action else {
            return Flow::Continue;
        };
        let name = match self.templar.template_value(file, scope) {
            Ok(v) => value::py_str(&v),
            Err(e) => return self.fail(task, "include_tasks", e.to_string(), false),
        };
        let mut cands = vec![base.join(&name), frame.body.path.join("tasks").join(&name)];
        if Path::new(&name).extension().is_none() {
            cands.push(base.join(format!("{name}.yml")));
            cands.push(frame.body.path.join("tasks").join(format!("{name}.yml")));
        }
        let found = cands.into_iter().find_map(|c| {
            let key = std::fs::canonicalize(&c).unwrap_or(c);
            frame.body.files.get(&key).cloned()
        });
        let Some(tasks) = found else {
            return self.fail(
                task,
                "include_tasks",
                format!("Could not find or access '{name}' among the role's task files"),
                false,
            );
        };
        if record {
            // Ansible counts an include that ran as an ok task.
            self.record(
                task,
                "include_tasks",
                TaskStatus::Ok,
                json!({"changed": false, "include": name, "include_args": {}}),
            );
        }
        if self.depth >= MAX_INCLUDE_DEPTH {
            self.aborted = Some(format!(
                "include_tasks nests deeper than {MAX_INCLUDE_DEPTH} (an include of itself?)"
            ));
            return Flow::Failed;
        }
        let mut inner = frame.clone();
        inner.low.push(task.vars.clone());
        if let Some(i) = item {
            inner.low.push(i);
        }
        self.depth += 1;
        let f = self.run_tasks(&tasks, &inner).await;
        self.depth -= 1;
        f
    }

    fn apply_effects(&mut self, fx: Effects) {
        if !fx.facts.is_empty() {
            let facts = Arc::make_mut(&mut self.facts);
            for (k, v) in fx.facts {
                facts.insert(k, v);
            }
        }
        if let Some(p) = fx.requeue {
            self.outcome.requeue_after = Some(p);
        }
        if let Some(s) = fx.status {
            let cur = self.outcome.status.get_or_insert_with(Default::default);
            crate::modules::k8s_status::merge_request(cur, s);
            *self
                .ctx
                .own_status
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = Some(cur.clone());
        }
        self.outcome.events.extend(fx.events);
        self.outcome.touched.extend(fx.touched);
    }

    /// One module call with `until`/`retries`/`delay`, `changed_when` and `failed_when`.
    async fn attempt(
        &mut self,
        task: &Task,
        module: Option<Module>,
        scope: &Arc<Scope>,
        fx: &mut Effects,
    ) -> Json {
        let Some(module) = module else {
            return json!({"failed": true, "msg": "not a module", "changed": false});
        };
        let int_of = |v: &Option<Value>, default: i64, s: &Arc<Scope>| -> i64 {
            v.as_ref()
                .and_then(|v| self.templar.template_value(v, s).ok())
                .and_then(|v| match v.kind() {
                    ValueKind::Number => v.as_i64(),
                    _ => value::py_str(&v).trim().parse().ok(),
                })
                .unwrap_or(default)
        };
        let mut retries = 1i64;
        if task.retries.is_some() {
            retries += int_of(&task.retries, 0, scope).max(0);
        } else if task.until.is_some() {
            retries += 3;
        }
        let delay = int_of(&task.delay, 5, scope);
        let delay = if delay < 0 { 1 } else { delay };
        let mut result = Json::Null;
        for attempt in 1..=retries {
            let mut one = Effects::default();
            let mut r = self.call(task, module, scope, &mut one).await;
            if !r.is_object() {
                r = json!({"result": r});
            }
            let Some(obj) = r.as_object_mut() else {
                return r;
            };
            obj.entry("failed").or_insert(Json::Bool(false));
            obj.entry("changed").or_insert(Json::Bool(false));
            if retries > 1 {
                obj.insert("attempts".into(), json!(attempt));
            }
            let reg_scope = match &task.register {
                Some(name) => scope.with_layer(str_layer(&[(name.as_str(), value::from_json(&r))])),
                None => scope.clone(),
            };
            if r.get("skipped").is_none() {
                self.evaluate_when_results(task, &mut r, &reg_scope);
            }
            result = r;
            fx.merge(one);
            if retries > 1 {
                let reg_scope = match &task.register {
                    Some(name) => {
                        scope.with_layer(str_layer(&[(name.as_str(), value::from_json(&result))]))
                    }
                    None => scope.clone(),
                };
                let done = match &task.until {
                    Some(conds) => conds
                        .iter()
                        .all(|c| matches!(self.templar.eval_bool(c, &reg_scope), Ok(true))),
                    None => !result["failed"].as_bool().unwrap_or(false),
                };
                if done {
                    return result;
                }
                if attempt < retries {
                    if Duration::from_secs(delay as u64) >= self.ctx.remaining() {
                        return json!({"failed": true, "changed": false, "attempts": attempt, "msg": format!("until/retries would wait past the run's deadline of {} s", self.ctx.run_timeout.as_secs())});
                    }
                    if !self.count() {
                        return json!({"failed": true, "changed": false, "msg": "task limit reached"});
                    }
                    tokio::time::sleep(Duration::from_secs(delay as u64)).await;
                }
            }
        }
        if retries > 1 {
            if let Some(o) = result.as_object_mut() {
                o.insert("attempts".into(), json!(retries - 1));
                o.insert("failed".into(), Json::Bool(true));
            }
        }
        result
    }

    fn evaluate_when_results(&self, task: &Task, r: &mut Json, scope: &Arc<Scope>) {
        let eval_all = |conds: &[String]| -> Result<bool, String> {
            for c in conds {
                if !self
                    .templar
                    .eval_bool(c, scope)
                    .map_err(|e| e.to_string())?
                {
                    return Ok(false);
                }
            }
            Ok(true)
        };
        let Some(obj) = r.as_object_mut() else { return };
        if let Some(cw) = task.changed_when.as_ref().filter(|c| !c.is_empty()) {
            match eval_all(cw) {
                Ok(b) => {
                    obj.insert("changed".into(), Json::Bool(b));
                }
                Err(e) => {
                    obj.insert("failed".into(), Json::Bool(true));
                    obj.insert("changed_when_result".into(), Json::String(e));
                    return;
                }
            }
        }
        if let Some(fw) = &task.failed_when {
            match eval_all(fw) {
                Ok(b) => {
                    obj.insert("failed_when_result".into(), Json::Bool(b));
                    obj.insert("failed".into(), Json::Bool(b));
                }
                Err(e) => {
                    obj.insert("failed".into(), Json::Bool(true));
                    obj.insert("failed_when_result".into(), Json::String(e));
                }
            }
        }
    }

    /// Templates the arguments and calls the module; an error becomes a failed result.
    async fn call(
        &mut self,
        task: &Task,
        module: Module,
        scope: &Arc<Scope>,
        fx: &mut Effects,
    ) -> Json {
        let Action::Module { args, .. } = &task.action else {
            return json!({"failed": true, "changed": false, "msg": "not a module"});
        };
        let templated = match module {
            // `that` holds expressions: the module evaluates them itself.
            Module::Assert => Ok(args.clone()),
            // `var` names an expression the module evaluates; `msg` is templated with the
            // other arguments, so an undefined variable in it fails as theirs do.
            Module::Debug => self.template_args_but(args, "var", scope),
            _ => self
                .templar
                .template_value(args, scope)
                .and_then(|v| value::to_json(&v))
                .map(|j| value::from_json(&remove_omit(j))),
        };
        let args = match templated {
            Ok(a) => a,
            Err(crate::Error::Undefined(e)) => {
                return json!({"failed": true, "changed": false, "msg": super::errors::undefined_in_args(&task.loc, &e)})
            }
            Err(e) => {
                return json!({"failed": true, "changed": false, "msg": format!("The task includes an option with an undefined variable or a template error. The error was: {e}")})
            }
        };
        match modules::call(module, &args, scope, &self.ctx, fx).await {
            Ok(Json::Object(m)) => Json::Object(m),
            Ok(other) => json!({"changed": false, "result": other}),
            Err(msg) => json!({"failed": true, "changed": false, "msg": msg}),
        }
    }

    /// The arguments templated, but for `keep`, passed on as written.
    fn template_args_but(
        &self,
        args: &Value,
        keep: &str,
        scope: &Arc<Scope>,
    ) -> Result<Value, crate::Error> {
        let Ok(keys) = args.try_iter() else {
            return Ok(args.clone());
        };
        let mut out = Map::new();
        for k in keys {
            let v = args.get_item(&k).unwrap_or_default();
            let v = if k.as_str() == Some(keep) {
                v
            } else {
                self.templar.template_value(&v, scope)?
            };
            out.insert(value::py_str(&k), value::to_json(&v)?);
        }
        Ok(value::from_json(&Json::Object(out)))
    }

    fn include_vars(
        &mut self,
        task: &Task,
        frame: &Frame,
        scope: &Arc<Scope>,
        fx: &mut Effects,
    ) -> Json {
        let Action::IncludeVars { file, search } = &task.action else {
            return json!({"changed": false});
        };
        let name = match self.templar.template_value(file, scope) {
            Ok(v) => value::py_str(&v),
            Err(e) => return json!({"failed": true, "changed": false, "msg": e.to_string()}),
        };
        let path = match search.find("vars", &name) {
            Ok(p) => p,
            // Ansible's result for a file it cannot find: no `msg`, its text in `message`.
            Err(message) => {
                return json!({"failed": true, "changed": false, "ansible_facts": {},
                              "ansible_included_var_files": [], "message": message})
            }
        };
        let key = std::fs::canonicalize(&path).unwrap_or(path);
        let Some(layer) = frame.body.var_files.get(&key) else {
            return json!({"failed": true, "changed": false, "msg": format!(
                "{} is not a vars file bosun read when the role was loaded (a vars file must be a mapping, and exist at load)",
                key.display()
            )});
        };
        let mut facts = Map::new();
        for (k, v) in layer.iter() {
            fx.facts.push((k.clone(), v.clone()));
            facts.insert(k.clone(), value::to_json(v).unwrap_or(Json::Null));
        }
        json!({"changed": false, "ansible_facts": facts, "ansible_included_var_files": [key.display().to_string()]})
    }
}

/// A `no_log` task's result as Ansible shows it: the replacement text and the status keys.
fn censor(r: &Json) -> Json {
    let mut out = Map::new();
    out.insert("censored".into(), Json::String(CENSORED.into()));
    for k in ["changed", "failed", "skipped", "attempts", "retries"] {
        if let Some(v) = r.get(k) {
            out.insert(k.into(), v.clone());
        }
    }
    Json::Object(out)
}

fn remove_omit(j: Json) -> Json {
    match j {
        Json::Object(m) => Json::Object(
            m.into_iter()
                .filter(|(_, v)| v.as_str() != Some(OMIT))
                .map(|(k, v)| (k, remove_omit(v)))
                .collect(),
        ),
        Json::Array(a) => Json::Array(
            a.into_iter()
                .filter(|v| v.as_str() != Some(OMIT))
                .map(remove_omit)
                .collect(),
        ),
        other => other,
    }
}

pub(crate) fn skipped_result(cond: Option<String>) -> Json {
    let mut r =
        json!({"changed": false, "skipped": true, "skip_reason": "Conditional result was False"});
    if let Some(c) = cond {
        r["false_condition"] = Json::String(c);
    }
    r
}
