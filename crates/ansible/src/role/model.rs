//! What a loaded role is: tasks with their keywords, already validated, and the role's
//! variables. Values are kept raw (templated at run time, as Ansible templates lazily).
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use minijinja::value::Value;

use crate::modules::Module;
use crate::template::VarLayer;

/// Where something was written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loc {
    pub file: Arc<PathBuf>,
    pub line: usize,
    pub col: usize,
}

impl std::fmt::Display for Loc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}", self.file.display(), self.line, self.col)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoopKind {
    Loop,
    /// `with_items`: flattens one level.
    WithItems,
    WithList,
    /// `with_dict`: `{key, value}` items.
    WithDict,
    /// `with_nested`: every combination of the lists (`product`).
    WithNested,
    /// `with_together`: the lists side by side (`zip_longest`).
    WithTogether,
    /// `with_subelements`: `[list, 'key.path', {skip_missing}]` → `[element, subelement]`.
    WithSubelements,
    /// `with_indexed_items`: `[index, item]`, flattened one level.
    WithIndexedItems,
    /// `with_sequence`: numbers as formatted strings.
    WithSequence,
}

#[derive(Clone, Debug)]
pub struct LoopControl {
    pub loop_var: String,
    pub index_var: Option<String>,
    pub label: Option<Value>,
    pub pause: Option<Value>,
    pub extended: bool,
}

impl Default for LoopControl {
    fn default() -> Self {
        LoopControl {
            loop_var: "item".into(),
            index_var: None,
            label: None,
            pause: None,
            extended: false,
        }
    }
}

#[derive(Clone, Debug)]
pub enum MetaAction {
    EndPlay,
    EndHost,
    EndRole,
    Noop,
    FlushHandlers,
}

#[derive(Clone, Debug)]
pub enum Action {
    Module {
        module: Module,
        args: Value,
    },
    /// `block`/`rescue`/`always` (also what `import_tasks` becomes).
    Block {
        block: Vec<Task>,
        rescue: Vec<Task>,
        always: Vec<Task>,
    },
    /// `include_tasks`: the file name (maybe a template) and the files it may name.
    IncludeTasks {
        file: Value,
        base: PathBuf,
    },
    /// `include_role`/`import_role` (static: loaded with the role).
    Role {
        role: Arc<RoleBody>,
        tasks_from: String,
        dynamic: bool,
    },
    IncludeVars {
        file: Value,
        /// Where the (rendered) name is looked for, as Ansible looks.
        search: super::search::SearchPath,
    },
    Meta(MetaAction),
}

#[derive(Clone, Debug)]
pub struct Task {
    pub name: Option<String>,
    pub loc: Loc,
    pub action: Action,
    pub when: Vec<String>,
    pub loop_kind: Option<LoopKind>,
    pub loop_value: Option<Value>,
    pub loop_control: LoopControl,
    pub register: Option<String>,
    pub until: Option<Vec<String>>,
    pub retries: Option<Value>,
    pub delay: Option<Value>,
    pub changed_when: Option<Vec<String>>,
    pub failed_when: Option<Vec<String>>,
    pub ignore_errors: Option<Value>,
    /// `no_log` (a boolean or a template), inherited by a block's (and an import's) tasks.
    pub no_log: Option<Value>,
    pub vars: Arc<VarLayer>,
}

impl Task {
    /// The name Ansible shows: the task's name, or its module's.
    pub fn display_name(&self) -> String {
        if let Some(n) = &self.name {
            return n.clone();
        }
        match &self.action {
            Action::Module { module, .. } => module.name().to_string(),
            Action::Block { .. } => "block".into(),
            Action::IncludeTasks { .. } => "include_tasks".into(),
            Action::Role { role, .. } => role.name.clone(),
            Action::IncludeVars { .. } => "include_vars".into(),
            Action::Meta(_) => "meta".into(),
        }
    }
}

/// One role: its variables, its task files (every file `include_tasks` may name, loaded and
/// validated up front) and its dependencies.
#[derive(Debug)]
pub struct RoleBody {
    pub name: String,
    pub path: PathBuf,
    pub defaults: Arc<VarLayer>,
    pub vars: Arc<VarLayer>,
    pub deps: Vec<RoleDep>,
    /// Task files by absolute path.
    pub files: HashMap<PathBuf, Arc<Vec<Task>>>,
    /// Var files (`include_vars`) by absolute path.
    pub var_files: HashMap<PathBuf, Arc<VarLayer>>,
}

#[derive(Debug)]
pub struct RoleDep {
    pub role: Arc<RoleBody>,
    pub params: Arc<VarLayer>,
    pub when: Vec<String>,
    /// `no_log` on the role entry, inherited by its tasks.
    pub no_log: Option<Value>,
}

impl RoleBody {
    pub fn tasks_file(&self, name: &str) -> Option<&Arc<Vec<Task>>> {
        let dir = self.path.join("tasks");
        ["", ".yml", ".yaml"]
            .iter()
            .find_map(|ext| self.files.get(&dir.join(format!("{name}{ext}"))))
    }
}

/// A play of a playbook (or the play ansible-runner generates for a role).
#[derive(Debug)]
pub struct Play {
    pub name: Option<String>,
    pub vars: Arc<VarLayer>,
    pub roles: Vec<RoleDep>,
    pub pre_tasks: Arc<Vec<Task>>,
    pub tasks: Arc<Vec<Task>>,
    pub post_tasks: Arc<Vec<Task>>,
    /// Task files and var files of the playbook itself.
    pub body: Arc<RoleBody>,
}
