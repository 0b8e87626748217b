//! The spec schema of a role-backed kind, from the role's `defaults/main.yml`: each default
//! variable is a spec property, typed as the Helm flavour types a chart's values
//! ([`bosun_watches::schema::infer`]), so `kubectl explain` shows what the role reads and the
//! API server refuses a value of the wrong type before the role runs. operator-sdk scaffolds
//! an open spec.
//!
//! * Keys are camelCased the way ansible-operator's snake-casing ([`to_snake`]) inverts —
//!   `pull_policy` is written `pullPolicy` in the spec, nested keys too — unless the entry
//!   sets `snakeCaseParameters: false` (then verbatim). Where the camelCased key does not
//!   snake-case back (`a_1`: `a1` stays `a1`) the variable's own name does; a variable no
//!   spec key snake-cases to (`pullPolicy` in the defaults) cannot be set from the spec, and
//!   is left out.
//! * A default that is a Jinja expression (a string holding `{{` or `{%`) has no type
//!   knowable before a run: that property (or that list's items) stays open to any value.
//! * A playbook entry is described by the defaults of the roles its plays import (`roles:`,
//!   `import_role`/`include_role` tasks); when two roles default a variable differently it is
//!   left open. A playbook importing no role, or run by real Ansible (where bosun does not
//!   read the playbook), keeps an open spec, as without defaults.
//! * The spec stays open to unknown keys (a role may read any variable) and every property
//!   is nullable: what is refused is a value of another type than its default's.
//! * Kubernetes before 1.25 merges the managed fields of an open subtree under a typed
//!   schema in time exponential in its nesting depth (kubernetes-sigs/structured-merge-diff
//!   #222; a fully open spec is spared): a spec nested some 20 levels deep takes seconds
//!   there. The Helm flavour's inferred CRDs share this.
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use bosun_ansible::extra_vars::to_snake;
use bosun_ansible::role::{Action, Task};
use bosun_ansible::yaml::NodeExt;
use bosun_ansible::Role;
use bosun_ansible_runner::target::Target;
use bosun_watches::schema::{describe_default, spec_of_defaults, OPEN};
use serde_json::{json, Map, Value};

/// The role directories whose defaults describe the spec of a natively loaded entry: the
/// roles its plays import, in order, each once.
pub fn role_dirs(role: &Role) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for play in &role.plays {
        dirs.extend(play.roles.iter().map(|d| d.role.path.clone()));
        for tasks in [&play.pre_tasks, &play.tasks, &play.post_tasks] {
            imported(tasks, &mut dirs);
        }
    }
    let mut seen = BTreeSet::new();
    dirs.retain(|d| seen.insert(d.clone()));
    dirs
}

fn imported(tasks: &[Task], dirs: &mut Vec<PathBuf>) {
    for t in tasks {
        match &t.action {
            Action::Role { role, .. } => dirs.push(role.path.clone()),
            Action::Block {
                block,
                rescue,
                always,
            } => {
                for b in [block, rescue, always] {
                    imported(b, dirs);
                }
            }
            _ => {}
        }
    }
}

/// The role directory of an entry run by real Ansible (none for a playbook: bosun does not
/// read it).
pub fn target_dirs(target: &Target, collections_paths: &[PathBuf]) -> Vec<PathBuf> {
    match target {
        Target::Role { name, roles_path } => vec![roles_path.join(name)],
        Target::CollectionRole(fqcn) => {
            let parts: Vec<&str> = fqcn.split('.').collect();
            let [ns, coll, name] = parts.as_slice() else {
                return Vec::new();
            };
            collections_paths
                .iter()
                .map(|c| {
                    c.join("ansible_collections")
                        .join(ns)
                        .join(coll)
                        .join("roles")
                        .join(name)
                })
                .find(|d| d.is_dir())
                .into_iter()
                .collect()
        }
        Target::Playbook(_) => Vec::new(),
    }
}

/// The defaults of the roles in `dirs`, merged: None when none of them has a defaults file.
/// A variable two roles default differently is returned in the second map (its type is not
/// knowable). A file that cannot be read is the role loader's to report: it is skipped here.
pub fn read_defaults(dirs: &[PathBuf]) -> Option<(Map<String, Value>, BTreeSet<String>)> {
    let mut merged: Option<Map<String, Value>> = None;
    let mut differing = BTreeSet::new();
    for dir in dirs {
        let Some(vars) = defaults_file(dir) else {
            continue;
        };
        let m = merged.get_or_insert_with(Map::new);
        for (k, v) in vars {
            match m.get(&k) {
                Some(old) if *old != v => {
                    differing.insert(k);
                }
                Some(_) => {}
                None => {
                    m.insert(k, v);
                }
            }
        }
    }
    merged.map(|m| (m, differing))
}

/// `<dir>/defaults/main{.yml,.yaml,}` as JSON (Ansible's YAML rules).
fn defaults_file(dir: &Path) -> Option<Map<String, Value>> {
    let path = ["main.yml", "main.yaml", "main"]
        .iter()
        .map(|f| dir.join("defaults").join(f))
        .find(|p| p.is_file())?;
    let read = std::fs::read_to_string(&path)
        .map_err(|e| e.to_string())
        .and_then(|src| bosun_ansible::yaml::load_all(&src).map_err(|e| e.to_string()));
    match read {
        Ok(docs) => match docs.first().map(NodeExt::to_json) {
            Some(Value::Object(m)) => Some(m),
            _ => Some(Map::new()),
        },
        Err(e) => {
            tracing::warn!(file = %path.display(), "the role's defaults are not read for the CRD: {e}");
            None
        }
    }
}

/// The spec's schema: open without defaults, else each default a property (see the module
/// doc). `differing`: variables whose default is not knowable (left open).
pub fn spec_schema(
    defaults: Option<&(Map<String, Value>, BTreeSet<String>)>,
    snake_case: bool,
) -> Value {
    let Some((vars, differing)) = defaults else {
        return json!({"type": "object", OPEN: true});
    };
    let mut spec = Map::new();
    let mut unknown = Vec::new();
    for (k, v) in vars {
        let Some(key) = spec_key(k, snake_case) else {
            continue;
        };
        if differing.contains(k) {
            unknown.push(key.clone());
        }
        spec.insert(key, spec_value(v, snake_case, 0));
    }
    let spec = Value::Object(spec);
    let mut schema = spec_of_defaults(&spec);
    open_templates(&spec, &mut schema);
    for key in unknown {
        if let Some(p) = schema
            .get_mut("properties")
            .and_then(|p| p.get_mut(key.as_str()))
        {
            *p = json!({OPEN: true, "nullable": true,
                        "description": "Defaulted differently by the roles the playbook imports."});
        }
    }
    schema
}

/// The spec key a variable is set from.
fn spec_key(var: &str, snake_case: bool) -> Option<String> {
    if snake_case {
        to_camel(var)
    } else {
        Some(var.to_string())
    }
}

/// How deep defaults are followed (ansible-operator snake-cases spec keys as deep).
const MAX_DEPTH: usize = 64;

/// A default as the spec would carry it: keys camelCased when `snake_case`.
fn spec_value(v: &Value, snake_case: bool, depth: usize) -> Value {
    if !snake_case || depth > MAX_DEPTH {
        return v.clone();
    }
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter_map(|(k, v)| Some((to_camel(k)?, spec_value(v, true, depth + 1))))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(|x| spec_value(x, true, depth + 1)).collect()),
        other => other.clone(),
    }
}

/// The spec key ansible-operator snake-cases into `var`: camelCased (`pull_policy` ←
/// `pullPolicy`, `_private` ← `Private`), else as it is when that gives it (`a_1` ← `a_1`:
/// `a1` would stay `a1`), else None (`pullPolicy` ← nothing: snake-casing lowers it).
pub fn to_camel(var: &str) -> Option<String> {
    let mut out = String::with_capacity(var.len());
    for (i, word) in var.split('_').enumerate() {
        let mut chars = word.chars();
        match chars.next() {
            Some(c) if i > 0 => {
                out.extend(c.to_uppercase());
                out.push_str(chars.as_str());
            }
            _ => out.push_str(word),
        }
    }
    [out, var.to_string()]
        .into_iter()
        .find(|k| to_snake(k) == var)
}

/// A string Ansible templates: its value and type are known only when the role runs.
pub fn is_jinja(s: &str) -> bool {
    s.contains("{{") || s.contains("{%")
}

fn has_jinja(v: &Value) -> bool {
    match v {
        Value::String(s) => is_jinja(s),
        Value::Array(a) => a.iter().any(has_jinja),
        Value::Object(m) => m.values().any(has_jinja),
        _ => false,
    }
}

/// Opens what `infer` typed from a Jinja expression: the property, or a list's items.
fn open_templates(default: &Value, schema: &mut Value) {
    match default {
        Value::String(s) if is_jinja(s) => {
            *schema = json!({OPEN: true, "nullable": true,
                "description": format!("{} (a Jinja expression: any type)", describe_default(default))});
        }
        Value::Object(m) => {
            for (k, v) in m {
                if let Some(p) = schema
                    .get_mut("properties")
                    .and_then(|p| p.get_mut(k.as_str()))
                {
                    open_templates(v, p);
                }
            }
        }
        Value::Array(a) if a.iter().any(has_jinja) => {
            schema["items"] = json!({ OPEN: true });
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests;
