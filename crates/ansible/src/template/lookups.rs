//! `lookup()`, `query()`/`q()` and the lookup plugins bosun runs: `template`, `file`, `env`,
//! `vars`, `items`/`list`, `dict` and `k8s`. A lookup returns a list; `lookup` joins strings
//! with `,` and returns a lone non-string as itself, as Ansible's `_lookup` does.
use std::path::{Path, PathBuf};
use std::sync::Arc;

use minijinja::value::{Rest, Value, ValueKind, ValueOrKwargs};
use minijinja::{Environment, Error, State};

use super::args::{invalid, Args};
use super::value::{from_json, py_str, to_json};
use super::{scope_of, Scope};

/// What lookups need from the running engine (the Kubernetes API for `k8s`). Blocking: a
/// template is evaluated synchronously.
pub trait Runtime: Send + Sync + std::fmt::Debug {
    /// `kubernetes.core.k8s` lookup: the objects matching the parameters.
    fn k8s(
        &self,
        params: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Vec<serde_json::Value>, String>;
}

pub const SUPPORTED: &[&str] = &[
    "template", "file", "env", "vars", "items", "list", "dict", "k8s",
];

/// The short plugin name of `ansible.builtin.x`/`kubernetes.core.x`; a collection that does
/// not have the plugin keeps its prefix (and so is not supported).
pub fn short_name(name: &str) -> &str {
    if let Some(s) = name
        .strip_prefix("ansible.builtin.")
        .or_else(|| name.strip_prefix("ansible.legacy."))
    {
        return s;
    }
    // community.kubernetes 2.x redirects its plugins to kubernetes.core.
    match name
        .strip_prefix("kubernetes.core.")
        .or_else(|| name.strip_prefix("community.kubernetes."))
    {
        Some("k8s") => "k8s",
        _ => name,
    }
}

pub fn supported(name: &str) -> bool {
    SUPPORTED.contains(&short_name(name))
}

pub fn register(env: &mut Environment<'static>) {
    env.add_function("lookup", |state: &State, args: Rest<ValueOrKwargs>| {
        run(state, args.0.into_iter().map(Value::from).collect(), false)
    });
    env.add_function("query", |state: &State, args: Rest<ValueOrKwargs>| {
        run(state, args.0.into_iter().map(Value::from).collect(), true)
    });
    env.add_function("q", |state: &State, args: Rest<ValueOrKwargs>| {
        run(state, args.0.into_iter().map(Value::from).collect(), true)
    });
}

fn run(state: &State, mut args: Vec<Value>, wantlist: bool) -> Result<Value, Error> {
    if args.is_empty() || args[0].is_kwargs() {
        return Err(invalid("lookup needs a plugin name"));
    }
    let name = py_str(&args.remove(0));
    let scope = scope_of(state).ok_or_else(|| invalid("lookup outside of a run"))?;
    let a = Args::parse(args);
    let want = a.kw("wantlist").is_some_and(|w| w.is_true()) || wantlist;
    let ran = match short_name(&name) {
        "template" => template(&scope, &a)?,
        "file" => file(&scope, &a)?,
        "env" => env_lookup(&a)?,
        "vars" => vars(&scope, &a)?,
        "items" | "list" => list(&a),
        "dict" => dict(&a)?,
        "k8s" => k8s(&scope, &a)?,
        other => {
            return Err(invalid(format!(
                "lookup plugin '{other}' is not supported by bosun"
            )))
        }
    };
    if want {
        return Ok(Value::from(ran));
    }
    if ran.iter().all(|v| v.kind() == ValueKind::String) {
        return Ok(Value::from(
            ran.iter().map(py_str).collect::<Vec<_>>().join(","),
        ));
    }
    Ok(if ran.len() == 1 {
        ran.into_iter().next().unwrap_or_default()
    } else {
        Value::from(ran)
    })
}

fn terms(a: &Args) -> Vec<String> {
    a.pos.iter().map(py_str).collect()
}

fn var_path(scope: &Arc<Scope>, name: &str) -> Option<PathBuf> {
    scope.raw(name).and_then(|v| v.as_str().map(PathBuf::from))
}

/// Ansible's search path: the role's `<subdir>/` and itself, then the playbook's.
fn find(scope: &Arc<Scope>, subdir: &str, name: &str) -> Result<PathBuf, Error> {
    let p = Path::new(name);
    if p.is_absolute() {
        return Ok(p.to_path_buf());
    }
    let mut dirs = Vec::new();
    for base in [
        var_path(scope, "role_path"),
        var_path(scope, "playbook_dir"),
    ]
    .into_iter()
    .flatten()
    {
        dirs.push(base.join(subdir));
        dirs.push(base.clone());
    }
    dirs.iter()
        .map(|d| d.join(name))
        .find(|c| c.is_file())
        .ok_or_else(|| {
            invalid(format!(
                "the {subdir} lookup could not find '{name}' (searched {})",
                dirs.iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
}

fn read(path: &Path) -> Result<String, Error> {
    std::fs::read_to_string(path)
        .map_err(|e| invalid(format!("could not read {}: {e}", path.display())))
}

fn template(scope: &Arc<Scope>, a: &Args) -> Result<Vec<Value>, Error> {
    a.check(
        "template",
        &["convert_data", "template_vars", "jinja2_native"],
        usize::MAX,
    )?;
    let convert = a.kw("convert_data").is_none_or(|c| c.is_true());
    let mut scope = scope.clone();
    if let Some(tv) = a.kw("template_vars").filter(|v| v.kind() == ValueKind::Map) {
        let mut layer = super::VarLayer::new();
        for k in tv.try_iter()? {
            layer.insert(py_str(&k), tv.get_item(&k)?);
        }
        scope = scope.with_layer(Arc::new(layer));
    }
    let mut out = Vec::new();
    for t in terms(a) {
        let path = find(&scope, "templates", &t)?;
        let src = read(&path)?;
        let tmpl = scope.templar().clone();
        let v = tmpl
            .template_file(&src, &scope, convert)
            .map_err(|e| invalid(format!("{}: {e}", path.display())))?;
        out.push(v);
    }
    Ok(out)
}

fn file(scope: &Arc<Scope>, a: &Args) -> Result<Vec<Value>, Error> {
    a.check("file", &["rstrip", "lstrip"], usize::MAX)?;
    let (rstrip, lstrip) = (
        a.kw("rstrip").is_none_or(|v| v.is_true()),
        a.kw("lstrip").is_some_and(|v| v.is_true()),
    );
    terms(a)
        .iter()
        .map(|t| {
            let mut s = read(&find(scope, "files", t)?)?;
            if rstrip {
                s = s.trim_end().to_string();
            }
            if lstrip {
                s = s.trim_start().to_string();
            }
            Ok(Value::from(s))
        })
        .collect()
}

fn env_lookup(a: &Args) -> Result<Vec<Value>, Error> {
    a.check("env", &["default"], usize::MAX)?;
    let default = a.kw("default").map(|d| py_str(&d)).unwrap_or_default();
    Ok(terms(a)
        .iter()
        .map(|t| Value::from(std::env::var(t).unwrap_or_else(|_| default.clone())))
        .collect())
}

fn vars(scope: &Arc<Scope>, a: &Args) -> Result<Vec<Value>, Error> {
    a.check("vars", &["default"], usize::MAX)?;
    terms(a)
        .iter()
        .map(|t| match scope.get(t) {
            Ok(Some(v)) => Ok(v),
            Ok(None) => a.kw("default").ok_or_else(|| {
                Error::new(
                    minijinja::ErrorKind::UndefinedError,
                    format!("No variable found with this name: {t}"),
                )
            }),
            Err(e) => Err(invalid(e.to_string())),
        })
        .collect()
}

fn list(a: &Args) -> Vec<Value> {
    let mut out = Vec::new();
    for p in &a.pos {
        if p.kind() == ValueKind::Seq {
            out.extend(p.try_iter().into_iter().flatten());
        } else {
            out.push(p.clone());
        }
    }
    out
}

fn dict(a: &Args) -> Result<Vec<Value>, Error> {
    let mut out = Vec::new();
    for p in &a.pos {
        if p.kind() != ValueKind::Map {
            return Err(invalid("with_dict expects a dict"));
        }
        for k in p.try_iter()? {
            out.push(Value::from_pairs([
                (Value::from("key"), k.clone()),
                (Value::from("value"), p.get_item(&k)?),
            ]));
        }
    }
    Ok(out)
}

const K8S_PARAMS: &[&str] = &[
    "kind",
    "api_version",
    "resource_name",
    "namespace",
    "label_selector",
    "field_selector",
    "resource_definition",
    "src",
    "kubeconfig",
    "context",
    "host",
    "api_key",
    "validate_certs",
    "wait",
    "wait_sleep",
    "wait_timeout",
    "errors",
    "cluster_info",
];

fn k8s(scope: &Arc<Scope>, a: &Args) -> Result<Vec<Value>, Error> {
    a.check("k8s", K8S_PARAMS, 0)?;
    let rt = scope
        .runtime()
        .ok_or_else(|| invalid("lookup('k8s') needs a Kubernetes client"))?;
    let mut params = serde_json::Map::new();
    for (k, v) in &a.kw {
        params.insert(k.clone(), to_json(v).map_err(|e| invalid(e.to_string()))?);
    }
    let found = rt.k8s(&params).map_err(invalid)?;
    Ok(found.iter().map(from_json).collect())
}
