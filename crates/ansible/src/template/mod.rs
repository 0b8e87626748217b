//! Jinja templating with Ansible's (ansible-core 2.18) semantics on top of minijinja:
//! - a string that is only `{{ name }}` whose variable is a bool or a number keeps that type;
//!   any other template yields text, which becomes a list, dict or bool again when it reads
//!   as a Python literal (`{{ 1 + 1 }}` is the string "2", `{{ [a, b] }}` a list);
//! - values rendered into text are written as Python's `str()` writes them (`True`, `None`,
//!   `{'a': 1}`);
//! - variables are templated lazily when read (a role default may refer to a spec value);
//! - undefined: chained attribute access and `default`/`is defined` work, printing or
//!   passing on an undefined value is an error;
//! - Ansible's filters, tests and lookups are in the sibling modules.
pub mod args;
pub mod collections;
pub mod filters;
pub mod itertools;
pub mod literal;
pub mod lookups;
pub mod methods;
pub mod pyjson;
pub mod scan;
pub mod tests;
pub mod text;
pub mod urlsplit;
pub mod value;
pub mod yamlfilters;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use minijinja::value::{Enumerator, Object, Value, ValueKind};
use minijinja::{Environment, UndefinedBehavior};

use crate::Error;

/// How deep variables may refer to variables that are templates themselves.
const MAX_VAR_DEPTH: usize = 24;

/// One layer of variables (a name → value map).
pub type VarLayer = HashMap<String, Value>;

/// A templated variable, or its error (whether it was an undefined, and the message).
type Memo = Result<Value, (bool, String)>;

/// The variables visible at one point of a run: layers from the lowest precedence to the
/// highest, looked up from the top. Values that contain templates are templated when read.
pub struct Scope {
    layers: Vec<Arc<VarLayer>>,
    templar: Templar,
    /// Variables already templated in this scope (errors too: minijinja may look a name up
    /// more than once, and a failing chain must not be re-evaluated each time).
    memo: Mutex<HashMap<String, Memo>>,
    /// Variables being templated: reading one of them again is a cycle.
    in_progress: Mutex<std::collections::HashSet<String>>,
    depth: AtomicUsize,
    runtime: Option<Arc<dyn lookups::Runtime>>,
}

impl std::fmt::Debug for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scope")
            .field("layers", &self.layers.len())
            .finish()
    }
}

/// The name under which the scope exposes itself to lookups and filters that need the run.
pub(crate) const SCOPE_KEY: &str = "__bosun_scope";

impl Scope {
    pub fn new(
        templar: Templar,
        layers: Vec<Arc<VarLayer>>,
        runtime: Option<Arc<dyn lookups::Runtime>>,
    ) -> Arc<Scope> {
        Arc::new(Scope {
            layers,
            templar,
            memo: Mutex::new(HashMap::new()),
            in_progress: Mutex::new(Default::default()),
            depth: AtomicUsize::new(0),
            runtime,
        })
    }

    pub fn templar(&self) -> &Templar {
        &self.templar
    }

    pub fn runtime(&self) -> Option<&Arc<dyn lookups::Runtime>> {
        self.runtime.as_ref()
    }

    /// The raw (untemplated) value of a variable.
    pub fn raw(&self, name: &str) -> Option<&Value> {
        self.layers.iter().rev().find_map(|l| l.get(name))
    }

    /// The value of a variable, templated.
    pub fn get(self: &Arc<Self>, name: &str) -> Result<Option<Value>, Error> {
        let Some(raw) = self.raw(name) else {
            return Ok(None);
        };
        if !needs_templating(raw) {
            return Ok(Some(raw.clone()));
        }
        if let Some(r) = self.memo.lock().ok().and_then(|m| m.get(name).cloned()) {
            return match r {
                Ok(v) => Ok(Some(v)),
                Err((true, m)) => Err(Error::Undefined(m)),
                Err((false, m)) => Err(Error::Template(m)),
            };
        }
        let cycle = self
            .in_progress
            .lock()
            .map(|mut p| !p.insert(name.to_string()))
            .unwrap_or(false);
        let r = if cycle {
            Err(Error::Template(format!(
                "recursive loop detected in template string for variable '{name}'"
            )))
        } else if self.depth.fetch_add(1, Ordering::SeqCst) >= MAX_VAR_DEPTH {
            self.depth.fetch_sub(1, Ordering::SeqCst);
            Err(Error::Template(format!(
                "variables refer to variables more than {MAX_VAR_DEPTH} deep at '{name}'"
            )))
        } else {
            let r = self.templar.template_value(raw, self);
            self.depth.fetch_sub(1, Ordering::SeqCst);
            r
        };
        if !cycle {
            if let Ok(mut p) = self.in_progress.lock() {
                p.remove(name);
            }
        }
        let stored = match &r {
            Ok(v) => Ok(v.clone()),
            Err(Error::Undefined(m)) => Err((true, m.clone())),
            Err(e) => Err((false, e.to_string())),
        };
        if let Ok(mut m) = self.memo.lock() {
            m.insert(name.to_string(), stored);
        }
        r.map(Some)
    }

    /// A copy with one more layer on top.
    pub fn with_layer(&self, layer: Arc<VarLayer>) -> Arc<Scope> {
        let mut layers = self.layers.clone();
        layers.push(layer);
        Scope::new(self.templar.clone(), layers, self.runtime.clone())
    }

    pub fn layers(&self) -> &[Arc<VarLayer>] {
        &self.layers
    }
}

/// Variable lookups from templates.
#[derive(Debug)]
struct ScopeRef(Arc<Scope>);

impl Object for ScopeRef {
    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let name = key.as_str()?;
        if name == SCOPE_KEY {
            return Some(Value::from_object(ScopeHandle(self.0.clone())));
        }
        match self.0.get(name) {
            Ok(v) => v,
            // Ansible turns a variable whose template hits an undefined into an undefined
            // value (so `is defined` is false); other errors surface when it is used.
            Err(Error::Undefined(_)) => None,
            Err(e) => Some(Value::from(minijinja::Error::new(
                minijinja::ErrorKind::InvalidOperation,
                e.to_string(),
            ))),
        }
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::NonEnumerable
    }
}

/// The scope as seen by lookups and filters that need it.
#[derive(Debug)]
pub struct ScopeHandle(pub Arc<Scope>);

impl Object for ScopeHandle {}

/// Fetches the run's scope from inside a filter or function.
pub(crate) fn scope_of(state: &minijinja::State) -> Option<Arc<Scope>> {
    state
        .lookup(SCOPE_KEY)
        .and_then(|v| v.downcast_object::<ScopeHandle>())
        .map(|h| h.0.clone())
}

/// Whether a value holds a string that is a template (and is not marked unsafe).
pub fn needs_templating(v: &Value) -> bool {
    match v.kind() {
        ValueKind::String => !v.is_safe() && v.as_str().is_some_and(scan::is_possibly_template),
        ValueKind::Seq | ValueKind::Map => v.try_iter().is_ok_and(|mut it| {
            it.any(|x| {
                if v.kind() == ValueKind::Map {
                    v.get_item(&x).is_ok_and(|i| needs_templating(&i))
                } else {
                    needs_templating(&x)
                }
            })
        }),
        _ => false,
    }
}

/// The Jinja environment with Ansible's filters, tests, lookups and formatting.
#[derive(Clone)]
pub struct Templar {
    env: Arc<Environment<'static>>,
}

impl std::fmt::Debug for Templar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Templar")
    }
}

impl Default for Templar {
    fn default() -> Self {
        Templar::new()
    }
}

/// The error text of a minijinja error, with its cause chain.
pub fn error_text(e: &minijinja::Error) -> String {
    let mut s = match e.detail() {
        Some(d) => d.to_string(),
        None => e.kind().to_string(),
    };
    let mut src = std::error::Error::source(e);
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}

fn map_err(e: minijinja::Error) -> Error {
    match e.kind() {
        minijinja::ErrorKind::UndefinedError => Error::Undefined(error_text(&e)),
        _ => Error::Template(error_text(&e)),
    }
}

impl Templar {
    pub fn new() -> Templar {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Chainable);
        env.set_recursion_limit(200);
        env.set_fuel(Some(50_000_000));
        env.set_formatter(|out, _state, v| {
            if v.is_undefined() {
                return Err(minijinja::Error::new(
                    minijinja::ErrorKind::UndefinedError,
                    "undefined value rendered",
                ));
            }
            // Ansible's finalize renders None as nothing.
            if v.is_none() {
                return Ok(());
            }
            if let ValueKind::Invalid = v.kind() {
                return v.get_attr("x").map(|_| ());
            }
            out.write_str(&value::py_str(v))
                .map_err(|_| minijinja::Error::new(minijinja::ErrorKind::WriteFailure, "write"))
        });
        env.set_unknown_method_callback(methods::call_method);
        filters::register(&mut env);
        tests::register(&mut env);
        lookups::register(&mut env);
        Templar { env: Arc::new(env) }
    }

    /// Templates a value as Ansible templates module arguments: strings by the typing rules,
    /// lists and dict values recursively (keys are left as they are).
    pub fn template_value(&self, v: &Value, scope: &Arc<Scope>) -> Result<Value, Error> {
        match v.kind() {
            ValueKind::String if !v.is_safe() => {
                self.template_str(v.as_str().unwrap_or_default(), scope)
            }
            ValueKind::Seq => {
                let items: Result<Vec<Value>, Error> = value::iter(v)?
                    .map(|x| self.template_value(&x, scope))
                    .collect();
                Ok(Value::from(items?))
            }
            ValueKind::Map => {
                if !needs_templating(v) {
                    return Ok(v.clone());
                }
                let mut pairs = Vec::new();
                for k in value::iter(v)? {
                    let item = v.get_item(&k).map_err(value::tmpl_err)?;
                    pairs.push((k, self.template_value(&item, scope)?));
                }
                Ok(Value::from_pairs(pairs))
            }
            _ => Ok(v.clone()),
        }
    }

    /// Templates one string with Ansible 2.18's typing.
    pub fn template_str(&self, s: &str, scope: &Arc<Scope>) -> Result<Value, Error> {
        self.template_impl(s, scope, true, true)
    }

    /// Templates a template file's text as the `template` lookup does: no backslash
    /// doubling; `convert` is its `convert_data` option.
    pub fn template_file(
        &self,
        s: &str,
        scope: &Arc<Scope>,
        convert: bool,
    ) -> Result<Value, Error> {
        self.template_impl(s, scope, false, convert)
    }

    fn template_impl(
        &self,
        s: &str,
        scope: &Arc<Scope>,
        escape: bool,
        convert: bool,
    ) -> Result<Value, Error> {
        if !scan::is_possibly_template(s) {
            return Ok(Value::from(s));
        }
        if let Some(name) = scan::single_var(s) {
            if let Some(raw) = scope.raw(name) {
                match raw.kind() {
                    ValueKind::Bool | ValueKind::Number | ValueKind::None => return Ok(raw.clone()),
                    _ => {}
                }
            }
        }
        let prepared = scan::prepare_with(s, escape).map_err(|e| {
            Error::Template(format!(
                "template error while templating string: {e}. String: {s}"
            ))
        })?;
        let ctx = Value::from_object(ScopeRef(scope.clone()));
        let data_newlines = trailing_newlines(s);
        let mut out = match &prepared.single_expr {
            Some(expr) => {
                let e = self.env.compile_expression(expr).map_err(|e| {
                    Error::Template(format!(
                        "template error while templating string: {}. String: {s}",
                        error_text(&e)
                    ))
                })?;
                let v = e.eval(ctx).map_err(map_err)?;
                if v.is_undefined() {
                    return Err(Error::Undefined(format!("'{}' is undefined", expr.trim())));
                }
                if let ValueKind::Invalid = v.kind() {
                    return Err(v
                        .get_attr("x")
                        .map_err(map_err)
                        .err()
                        .unwrap_or_else(|| Error::Template("invalid value".into())));
                }
                match v.kind() {
                    // Filters that return text on purpose (to_json, to_yaml, string…) mark it
                    // safe: Ansible's NativeJinjaText, never read back as a literal.
                    ValueKind::String if v.is_safe() => Value::from(v.as_str().unwrap_or_default()),
                    // str() then literal_eval() gives these back unchanged.
                    ValueKind::Seq | ValueKind::Map | ValueKind::Bool => v,
                    ValueKind::Iterable => Value::from(value::iter(&v)?.collect::<Vec<_>>()),
                    ValueKind::None => Value::from(""),
                    _ if convert => convert_text(value::py_str(&v)),
                    _ => Value::from(value::py_str(&v)),
                }
            }
            None => {
                let text = self
                    .env
                    .render_str(&prepared.source, ctx)
                    .map_err(map_err)?;
                if convert {
                    convert_text(text)
                } else {
                    Value::from(text)
                }
            }
        };
        if let Some(text) = out.as_str() {
            let have = trailing_newlines(text);
            if data_newlines > have {
                out = Value::from(format!("{text}{}", "\n".repeat(data_newlines - have)));
            }
        }
        Ok(out)
    }

    /// Evaluates a bare expression (`when`, `failed_when`, `until`, `that`) for its truth,
    /// as Ansible's conditionals do. An undefined result is an error.
    pub fn eval_bool(&self, expr: &str, scope: &Arc<Scope>) -> Result<bool, Error> {
        let expr = expr.trim();
        if scan::is_possibly_template(expr) {
            // Ansible templates such a conditional first, then evaluates the text again.
            let v = self.template_str(expr, scope)?;
            return match v.kind() {
                ValueKind::Bool => Ok(v.is_true()),
                ValueKind::String if v.as_str() == Some("") => Ok(false),
                ValueKind::String => self.eval_bool(&value::py_str(&v).replace("{{", "{ {"), scope),
                _ => Ok(v.is_true()),
            };
        }
        // Python truthiness of the expression's value (ansible-core 2.18 allows non-bool
        // results with a deprecation warning).
        Ok(self.eval_expr(expr, scope)?.is_true())
    }

    /// Evaluates a bare expression to its value. A conditional written with `{{ }}` is
    /// templated first, as Ansible does.
    pub fn eval_expr(&self, expr: &str, scope: &Arc<Scope>) -> Result<Value, Error> {
        let expr = expr.trim();
        if scan::is_possibly_template(expr) {
            return self.template_str(expr, scope);
        }
        let prepared = scan::prepare(&format!("{{{{ {expr} }}}}")).map_err(Error::Template)?;
        let inner = prepared
            .single_expr
            .ok_or_else(|| Error::Template(format!("not an expression: {expr}")))?;
        let e = self.env.compile_expression(&inner).map_err(|e| {
            Error::Template(format!("template error in '{expr}': {}", error_text(&e)))
        })?;
        let ctx = Value::from_object(ScopeRef(scope.clone()));
        let v = e.eval(ctx).map_err(map_err)?;
        if v.is_undefined() {
            return Err(Error::Undefined(format!(
                "error while evaluating conditional ({expr}): undefined"
            )));
        }
        if let ValueKind::Invalid = v.kind() {
            return Err(v
                .get_attr("x")
                .map_err(map_err)
                .err()
                .unwrap_or_else(|| Error::Template("invalid value".into())));
        }
        Ok(v)
    }

    /// Renders a whole template file (`lookup('template')`, `template:` definitions) to text.
    pub fn render_text(&self, src: &str, scope: &Arc<Scope>) -> Result<String, Error> {
        let prepared = scan::prepare(src).map_err(Error::Template)?;
        let ctx = Value::from_object(ScopeRef(scope.clone()));
        let mut text = self
            .env
            .render_str(&prepared.source, ctx)
            .map_err(map_err)?;
        let (want, have) = (trailing_newlines(src), trailing_newlines(&text));
        if want > have {
            text.push_str(&"\n".repeat(want - have));
        }
        Ok(text)
    }

    /// Checks that a template parses; returns the names it uses.
    pub fn check(&self, src: &str) -> Result<scan::Names, String> {
        let prepared = scan::prepare(src)?;
        match &prepared.single_expr {
            Some(e) => self
                .env
                .compile_expression(e)
                .map(|_| ())
                .map_err(|e| error_text(&e))?,
            None => self
                .env
                .template_from_str(&prepared.source)
                .map(|_| ())
                .map_err(|e| error_text(&e))?,
        }
        Ok(prepared.names)
    }

    /// Checks that a bare expression parses.
    pub fn check_expr(&self, expr: &str) -> Result<scan::Names, String> {
        if scan::is_possibly_template(expr) {
            return self.check(expr);
        }
        self.check(&format!("{{{{ {} }}}}", expr.trim()))
    }

    pub fn env(&self) -> &Environment<'static> {
        &self.env
    }
}

fn trailing_newlines(s: &str) -> usize {
    s.bytes().rev().take_while(|&b| b == b'\n').count()
}

/// Ansible's last step: text that reads as a list, dict or bool becomes one.
fn convert_text(text: String) -> Value {
    if text.starts_with('{') || text.starts_with('[') || text == "True" || text == "False" {
        if let Some(v) = literal::literal_eval(&text) {
            return v;
        }
    }
    Value::from(text)
}
