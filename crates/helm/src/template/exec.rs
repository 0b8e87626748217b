//! The evaluator: Go's `text/template/exec.go` semantics over [`Value`].
//!
//! Faithful points that decide output and errors:
//! * a value read from a `map[string]interface{}` or a `[]interface{}` is
//!   interface-wrapped ([`Val::wrapped`]) until its pipeline ends: a nil there makes
//!   `.x` fail with `nil pointer evaluating interface {}.x`, while an unwrapped nil
//!   (`$v := .missing`, `(.missing).x`) just yields nil;
//! * function arguments are checked against the Go parameter types (literals by syntax,
//!   other values by assignability), with Go's messages;
//! * `and`/`or` evaluate lazily; `range` walks maps in key order, integers from 0, and
//!   supports `break`/`continue` and `else`;
//! * missing map keys give the element type's zero value (`missingkey=zero`), or an
//!   error in strict mode.
//!
//! Each template invocation (`template`, `include`, `tpl`) runs in a fresh [`Exec`] with
//! its own variables, as Go's `ExecuteTemplate` does; shared counters in [`Runtime`]
//! bound output, loops and nesting so hostile templates end in errors.
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

/// The engine's per-render maps, keyed by chart text: a fast hasher, randomly seeded.
pub(crate) type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;
use std::fmt;
use std::rc::Rc;
use std::sync::Arc;

use super::error::{ExecError, FnError};
use super::node::*;
use super::set::Layer;
use crate::funcs::{Args, FuncDef, Lazy};
use crate::value::object::{Method, Sig, Ty};
use crate::value::{format, Kind, MapKind, Str, Value};

/// Hard limits on what one render may do.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Bytes written by all templates of one render, includes and `tpl` counted too.
    pub max_output_bytes: usize,
    /// `range` iterations over the whole render.
    pub max_iterations: u64,
    /// Nested template invocations (`template`, `include`, `tpl`) at any moment, across
    /// the render. Helm has no such limit: its own rules are
    /// [`max_include_per_name`](Self::max_include_per_name) and Go's 100000 nested
    /// `template` actions within one execution (`maxExecDepth`, which `include` and `tpl`
    /// restart), and beyond those Go's 1 GB stack ends a render with a crash (Helm 4.2
    /// renders 30000 nested `tpl`s in 1.4 GB). This backstop sits above Go's 100000 so that every chain Helm's
    /// rules allow renders, and ends runaway `tpl` recursion with an error; evaluation
    /// grows its stack on the heap ([`stacker`]), so no depth overflows the thread's stack.
    pub max_nesting: usize,
    /// Helm's limit on nested `include`s of one name (`recursionMaxNums`): an include
    /// fails when this many of the same name are already in progress and more.
    pub max_include_per_name: usize,
    /// The largest string a function may build (`repeat`, `indent`, `printf`...).
    pub max_string_bytes: usize,
    /// The longest list a function may build (`until`, `untilStep`, `seq`...).
    pub max_list_len: usize,
    /// The compiled size of a regular expression.
    pub max_regex_bytes: usize,
    /// Nesting of data (`fromJson`, `fromYaml`, printing, copying).
    pub max_data_depth: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_output_bytes: 256 << 20,
            max_iterations: 20_000_000,
            max_nesting: 110_000,
            max_include_per_name: 1_000,
            max_string_bytes: 64 << 20,
            max_list_len: 10_000_000,
            max_regex_bytes: 2 << 20,
            max_data_depth: 2_000,
        }
    }
}

/// State shared by every template executed in one render.
pub struct Runtime {
    pub limits: Limits,
    /// `missingkey=error` (Helm's `--strict`).
    pub strict: bool,
    written: Cell<usize>,
    iterations: Cell<u64>,
    nesting: Cell<usize>,
    pub(crate) includes: RefCell<FastMap<Str, usize>>,
    /// Parsed `tpl` texts: the render's own, or its chart's (shared by its renders).
    pub tpl_cache: Arc<super::tpl_cache::TplCache>,
    pub(crate) regex_cache: RefCell<FastMap<String, Result<regex::Regex, String>>>,
    /// Cluster reads for `lookup` (None: every lookup finds nothing).
    pub lookup: Option<crate::render::lookup::SharedLookup>,
    /// Functions called whose result differs between renders.
    pub(crate) nondeterministic: RefCell<std::collections::BTreeSet<&'static str>>,
    /// Output buffers of finished `include`s, reused by the next ones so that each does
    /// not grow a fresh string (see [`Exec::execute_template_str`]).
    buffers: RefCell<Vec<String>>,
}

impl Runtime {
    pub fn new(limits: Limits, strict: bool) -> Runtime {
        Runtime {
            limits,
            strict,
            written: Cell::new(0),
            iterations: Cell::new(0),
            nesting: Cell::new(0),
            includes: RefCell::new(FastMap::default()),
            tpl_cache: Arc::default(),
            regex_cache: RefCell::new(FastMap::default()),
            lookup: None,
            nondeterministic: RefCell::new(Default::default()),
            buffers: RefCell::new(Vec::new()),
        }
    }

    fn take_buffer(&self) -> String {
        self.buffers.borrow_mut().pop().unwrap_or_default()
    }

    /// Keeps a few buffers of reasonable size; the nesting of includes decides how many
    /// are in use at once.
    fn return_buffer(&self, mut buf: String) {
        const KEEP: usize = 16;
        const MAX_BYTES: usize = 1 << 20;
        let mut pool = self.buffers.borrow_mut();
        if pool.len() < KEEP && buf.capacity() <= MAX_BYTES {
            buf.clear();
            pool.push(buf);
        }
    }

    /// Notes that the render called `name`, whose result changes from render to render.
    pub(crate) fn nondeterministic(&self, name: &'static str) {
        self.nondeterministic.borrow_mut().insert(name);
    }
}

/// A value with Go's interface-wrapping remembered.
#[derive(Clone, Default)]
pub struct Val {
    pub v: Value,
    /// Read out of an `interface{}` slot and not yet unwrapped by a pipeline's end.
    pub wrapped: bool,
}

impl Val {
    pub fn plain(v: Value) -> Val {
        Val { v, wrapped: false }
    }
}

enum Flow {
    Normal,
    Break,
    Continue,
}

/// The node execution is at, for error messages (Go's `state.at`).
#[derive(Clone, Copy)]
enum At<'t> {
    None,
    Arg(&'t Arg),
    Cmd(&'t Command),
    Pipe(&'t Pipe),
    Action(&'t Action),
    If(&'t Branch),
    With(&'t Branch),
    Range(&'t Branch),
    Template(&'t TemplateCall),
}

impl At<'_> {
    fn pos(&self) -> Option<u32> {
        Some(match self {
            At::None => return None,
            At::Arg(a) => a.pos(),
            At::Cmd(c) => c.pos,
            At::Pipe(p) => p.pos,
            At::Action(a) => a.pos,
            At::If(b) | At::With(b) | At::Range(b) => b.pos,
            At::Template(t) => t.pos,
        })
    }
}

impl fmt::Display for At<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            At::None => Ok(()),
            At::Arg(a) => write!(f, "{a}"),
            At::Cmd(c) => write!(f, "{c}"),
            At::Pipe(p) => write!(f, "{p}"),
            At::Action(a) => write!(f, "{a}"),
            At::If(b) => write!(f, "{}", NodeRef("if", b)),
            At::With(b) => write!(f, "{}", NodeRef("with", b)),
            At::Range(b) => write!(f, "{}", NodeRef("range", b)),
            At::Template(t) => write!(f, "{t}"),
        }
    }
}

struct NodeRef<'a>(&'static str, &'a Branch);

impl fmt::Display for NodeRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{{{{{} {}}}}}", self.0, self.1.pipe)?;
        write_list(f, &self.1.list)?;
        if let Some(e) = &self.1.else_list {
            write!(f, "{{{{else}}}}")?;
            write_list(f, e)?;
        }
        write!(f, "{{{{end}}}}")
    }
}

/// One template invocation.
pub struct Exec<'t> {
    pub rt: &'t Runtime,
    pub set: Rc<Layer>,
    tree: &'t Tree,
    name: Str,
    /// `$`, the data the template was invoked with; [`vars`](Self::vars) may shadow it.
    root: Val,
    /// Variables declared so far, innermost last. Empty (no allocation) until a template
    /// declares one.
    vars: Vec<(&'t str, Val)>,
    at: At<'t>,
    /// Depth of `template` actions (Go's maxExecDepth counter).
    depth: usize,
    pub out: String,
}

type R<T> = Result<T, ExecError>;

/// Keeps the render-wide nesting counter honest across early returns.
struct NestGuard<'a>(&'a Runtime);

impl Drop for NestGuard<'_> {
    fn drop(&mut self) {
        self.0.nesting.set(self.0.nesting.get().saturating_sub(1));
    }
}

fn enter(rt: &Runtime) -> R<NestGuard<'_>> {
    let n = rt.nesting.get() + 1;
    if n > rt.limits.max_nesting {
        return Err(ExecError::limit(format!(
            "template nesting exceeds {} levels",
            rt.limits.max_nesting
        )));
    }
    rt.nesting.set(n);
    Ok(NestGuard(rt))
}

/// Executes `tree` (named `name`) with `data` as dot, returning its output.
pub fn execute(
    rt: &Runtime,
    set: Rc<Layer>,
    tree: &Tree,
    data: Value,
) -> Result<String, ExecError> {
    execute_into(rt, set, tree, data, String::new())
}

/// [`execute`], appending to `out`.
fn execute_into(
    rt: &Runtime,
    set: Rc<Layer>,
    tree: &Tree,
    data: Value,
    out: String,
) -> Result<String, ExecError> {
    let _g = enter(rt)?;
    let mut ex = Exec {
        rt,
        set,
        tree,
        name: tree.name.clone(),
        root: Val::plain(data.clone()),
        vars: Vec::new(),
        at: At::None,
        depth: 0,
        out,
    };
    let dot = Val::plain(data);
    stacker::maybe_grow(256 * 1024, 4 * 1024 * 1024, || ex.walk(&dot, &tree.root))?;
    Ok(ex.out)
}

impl<'t> Exec<'t> {
    /// Go's `state.errorf`.
    pub fn errorf(&self, msg: impl Into<String>) -> ExecError {
        let msg = msg.into();
        match self.at.pos() {
            None => ExecError::exec(format!("template: {}: {}", self.name, msg)),
            Some(pos) => ExecError::exec(format!(
                "template: {}: executing {} at <{}>: {}",
                self.tree.location(pos),
                format::quote(&self.name, false),
                self.at,
                msg
            )),
        }
    }

    fn write(&mut self, s: &str) -> R<()> {
        let n = self.rt.written.get() + s.len();
        if n > self.rt.limits.max_output_bytes {
            return Err(ExecError::limit(format!(
                "template output exceeds {} bytes",
                self.rt.limits.max_output_bytes
            )));
        }
        self.rt.written.set(n);
        self.out.push_str(s);
        Ok(())
    }

    fn push(&mut self, name: &'t str, v: Val) {
        self.vars.push((name, v));
    }

    fn set_var(&mut self, name: &str, v: Val) -> R<()> {
        for slot in self.vars.iter_mut().rev() {
            if slot.0 == name {
                slot.1 = v;
                return Ok(());
            }
        }
        if name == "$" {
            self.root = v;
            return Ok(());
        }
        Err(self.errorf(format!("undefined variable: {name}")))
    }

    fn var_value(&self, name: &str) -> R<Val> {
        for slot in self.vars.iter().rev() {
            if slot.0 == name {
                return Ok(slot.1.clone());
            }
        }
        if name == "$" {
            return Ok(self.root.clone());
        }
        Err(self.errorf(format!("undefined variable: {name}")))
    }

    fn walk(&mut self, dot: &Val, nodes: &'t [Node]) -> R<Flow> {
        for node in nodes {
            match self.walk_node(dot, node)? {
                Flow::Normal => {}
                other => return Ok(other),
            }
        }
        Ok(Flow::Normal)
    }

    fn walk_node(&mut self, dot: &Val, node: &'t Node) -> R<Flow> {
        match node {
            Node::Text(t) => self.write(t)?,
            Node::Action(a) => {
                self.at = At::Action(a);
                let v = self.eval_pipeline(dot, &a.pipe)?;
                if a.pipe.decl.is_empty() {
                    self.at = At::Action(a);
                    match &v.v {
                        Value::Str(s) => self.write(s)?,
                        other => {
                            let s = format::print_action(other);
                            self.write(&s)?;
                        }
                    }
                }
            }
            Node::If(b) => {
                self.at = At::If(b);
                return self.walk_if_with(dot, b, false);
            }
            Node::With(b) => {
                self.at = At::With(b);
                return self.walk_if_with(dot, b, true);
            }
            Node::Range(b) => {
                self.at = At::Range(b);
                return self.walk_range(dot, b);
            }
            Node::Template(t) => {
                self.at = At::Template(t);
                self.walk_template(dot, t)?;
            }
            Node::Break(_) => return Ok(Flow::Break),
            Node::Continue(_) => return Ok(Flow::Continue),
        }
        Ok(Flow::Normal)
    }

    fn walk_if_with(&mut self, dot: &Val, b: &'t Branch, with: bool) -> R<Flow> {
        let mark = self.vars.len();
        let r = (|| {
            let val = self.eval_pipeline(dot, &b.pipe)?;
            if val.v.truth() {
                if with {
                    self.walk(&val, &b.list)
                } else {
                    self.walk(dot, &b.list)
                }
            } else if let Some(e) = &b.else_list {
                self.walk(dot, e)
            } else {
                Ok(Flow::Normal)
            }
        })();
        self.vars.truncate(mark);
        r
    }

    fn count_iteration(&self) -> R<()> {
        let n = self.rt.iterations.get() + 1;
        if n > self.rt.limits.max_iterations {
            return Err(ExecError::limit(format!(
                "range iterations exceed {}",
                self.rt.limits.max_iterations
            )));
        }
        self.rt.iterations.set(n);
        Ok(())
    }

    fn walk_range(&mut self, dot: &Val, b: &'t Branch) -> R<Flow> {
        let mark = self.vars.len();
        let r = self.walk_range_inner(dot, b);
        self.vars.truncate(mark);
        r.map(|_| Flow::Normal)
    }

    /// One iteration; returns false when the loop must stop (`break`).
    fn range_step(&mut self, b: &'t Branch, index: Val, elem: Val) -> R<bool> {
        self.count_iteration()?;
        let decl = &b.pipe.decl;
        if !decl.is_empty() {
            if b.pipe.is_assign {
                if decl.len() > 1 {
                    self.set_var(&decl[0], index.clone())?;
                } else {
                    self.set_var(&decl[0], elem.clone())?;
                }
            } else {
                let n = self.vars.len();
                self.vars[n - 1].1 = elem.clone();
            }
        }
        if decl.len() > 1 {
            if b.pipe.is_assign {
                self.set_var(&decl[1], elem.clone())?;
            } else {
                let n = self.vars.len();
                self.vars[n - 2].1 = index;
            }
        }
        let mark = self.vars.len();
        let flow = self.walk(&elem, &b.list);
        self.vars.truncate(mark);
        Ok(!matches!(flow?, Flow::Break))
    }

    fn walk_range_inner(&mut self, dot: &Val, b: &'t Branch) -> R<()> {
        let val = self.eval_pipeline(dot, &b.pipe)?;
        let ran = match &val.v {
            Value::List(l) => {
                let iface = l.kind == crate::value::ListKind::Iface;
                let items = l.items.clone();
                for (i, x) in items.into_iter().enumerate() {
                    let elem = Val {
                        v: x,
                        wrapped: iface,
                    };
                    if !self.range_step(b, Val::plain(Value::Int(i as i64)), elem)? {
                        break;
                    }
                }
                !l.items.is_empty()
            }
            Value::Bytes(bytes) => {
                for (i, x) in bytes.iter().enumerate() {
                    let elem = Val::plain(Value::Uint64(u64::from(*x)));
                    if !self.range_step(b, Val::plain(Value::Int(i as i64)), elem)? {
                        break;
                    }
                }
                !bytes.is_empty()
            }
            Value::Map(m) => {
                let iface = matches!(m.kind(), MapKind::Iface | MapKind::Values);
                let entries = m.snapshot();
                let any = !entries.is_empty();
                for (k, x) in entries {
                    let elem = Val {
                        v: x,
                        wrapped: iface,
                    };
                    if !self.range_step(b, Val::plain(Value::Str(k)), elem)? {
                        break;
                    }
                }
                any
            }
            Value::Int(_) | Value::Int64(_) | Value::Uint64(_) => {
                if b.pipe.decl.len() > 1 {
                    return Err(self.errorf(format!(
                        "can't use {} to iterate over more than one variable",
                        format::sprint_value(&val.v)
                    )));
                }
                let n: i64 = match val.v {
                    Value::Int(i) | Value::Int64(i) => i,
                    Value::Uint64(u) => i64::try_from(u).unwrap_or(i64::MAX),
                    _ => 0,
                };
                for i in 0..n.max(0) {
                    let e = match val.v {
                        Value::Int64(_) => Value::Int64(i),
                        Value::Uint64(_) => Value::Uint64(i as u64),
                        _ => Value::Int(i),
                    };
                    if !self.range_step(b, Val::default(), Val::plain(e))? {
                        break;
                    }
                }
                n > 0
            }
            Value::Obj(o) => match o.items() {
                Some(items) => {
                    let any = !items.is_empty();
                    for (i, x) in items.into_iter().enumerate() {
                        if !self.range_step(b, Val::plain(Value::Int(i as i64)), Val::plain(x))? {
                            break;
                        }
                    }
                    any
                }
                None => {
                    return Err(self.errorf(format!(
                        "range can't iterate over {}",
                        format::sprint_value(&val.v)
                    )))
                }
            },
            Value::Nil => false,
            other => {
                return Err(self.errorf(format!(
                    "range can't iterate over {}",
                    format::sprint_value(other)
                )))
            }
        };
        if !ran {
            if let Some(e) = &b.else_list {
                self.walk(dot, e)?;
            }
        }
        Ok(())
    }

    fn walk_template(&mut self, dot: &Val, t: &'t TemplateCall) -> R<()> {
        let Some(tree) = self.set.lookup(&t.name) else {
            return Err(self.errorf(format!(
                "template {} not defined",
                format::quote(&t.name, false)
            )));
        };
        if self.depth >= 100_000 {
            return Err(self.errorf("exceeded maximum template depth (100000)"));
        }
        let new_dot = match &t.pipe {
            Some(p) => self.eval_pipeline(dot, p)?,
            None => Val::default(),
        };
        let _g = enter(self.rt)?;
        let out = std::mem::take(&mut self.out);
        let mut child = Exec {
            rt: self.rt,
            set: self.set.clone(),
            tree: &tree,
            name: tree.name.clone(),
            root: new_dot.clone(),
            vars: Vec::new(),
            at: At::None,
            depth: self.depth + 1,
            out,
        };
        let r = stacker::maybe_grow(256 * 1024, 4 * 1024 * 1024, || {
            child.walk(&new_dot, &tree.root)
        });
        self.out = std::mem::take(&mut child.out);
        r.map(|_| ())
    }

    /// Go's `evalPipeline`: the result is unwrapped; declarations are pushed or assigned.
    fn eval_pipeline(&mut self, dot: &Val, pipe: &'t Pipe) -> R<Val> {
        self.at = At::Pipe(pipe);
        let mut value: Option<Val> = None;
        for cmd in &pipe.cmds {
            let v = self.eval_command(dot, cmd, value.take())?;
            value = Some(Val::plain(v.v));
        }
        let value = value.unwrap_or_default();
        for name in &pipe.decl {
            if pipe.is_assign {
                self.set_var(name, value.clone())?;
            } else {
                self.push(name, value.clone());
            }
        }
        Ok(value)
    }

    fn not_a_function(&self, args: &'t [Arg], fin: &Option<Val>) -> R<()> {
        if args.len() > 1 || fin.is_some() {
            return Err(self.errorf(format!("can't give argument to non-function {}", args[0])));
        }
        Ok(())
    }

    fn eval_command(&mut self, dot: &Val, cmd: &'t Command, fin: Option<Val>) -> R<Val> {
        let first = &cmd.args[0];
        match first {
            Arg::Field { idents, .. } => {
                self.at = At::Arg(first);
                return self.eval_field_chain(dot, dot.clone(), first, idents, &cmd.args, fin);
            }
            Arg::Chain { node, fields, .. } => {
                self.at = At::Arg(first);
                let recv = self.eval_arg(dot, None, node)?;
                return self.eval_field_chain(dot, recv, first, fields, &cmd.args, fin);
            }
            Arg::Ident { name, func, .. } => {
                self.at = At::Arg(first);
                return self.eval_call(
                    dot,
                    Callee::Func(func),
                    At::Cmd(cmd),
                    name,
                    &cmd.args[1..],
                    fin,
                );
            }
            Arg::Pipe(p) => {
                self.not_a_function(&cmd.args, &fin)?;
                return self.eval_pipeline(dot, p);
            }
            Arg::Variable { idents, .. } => {
                self.at = At::Arg(first);
                let v = self.var_value(&idents[0])?;
                if idents.len() == 1 {
                    self.not_a_function(&cmd.args, &fin)?;
                    return Ok(v);
                }
                return self.eval_field_chain(dot, v, first, &idents[1..], &cmd.args, fin);
            }
            _ => {}
        }
        self.at = At::Arg(first);
        self.not_a_function(&cmd.args, &fin)?;
        match first {
            Arg::Bool(_, b) => Ok(Val::plain(Value::Bool(*b))),
            Arg::Dot(_) => Ok(dot.clone()),
            Arg::Nil(_) => Err(self.errorf("nil is not a command")),
            Arg::Number(_, n) => self.ideal_constant(n).map(Val::plain),
            Arg::String { text, .. } => Ok(Val::plain(Value::Str(text.clone()))),
            _ => Err(self.errorf(format!(
                "can't evaluate command {}",
                format::quote(&first.to_string(), false)
            ))),
        }
    }

    fn ideal_constant(&self, n: &Number) -> R<Value> {
        if n.complex {
            return Err(self.errorf(format!("complex constant {} is not supported", n.text)));
        }
        let t = &n.text;
        let hex_int = t.len() > 2
            && t.starts_with('0')
            && matches!(t.as_bytes()[1], b'x' | b'X')
            && !t.contains(['p', 'P']);
        let rune = t.starts_with('\'');
        if let Some(f) = n.float {
            if !hex_int && !rune && t.contains(['.', 'e', 'E', 'p', 'P']) {
                return Ok(Value::Float(f));
            }
        }
        if let Some(i) = n.int {
            return Ok(Value::Int(i));
        }
        if n.uint.is_some() {
            return Err(self.errorf(format!("{t} overflows int")));
        }
        Ok(Value::Nil)
    }

    /// `.A.B.C`, possibly a method call with arguments at the end.
    fn eval_field_chain(
        &mut self,
        dot: &Val,
        mut recv: Val,
        node: &'t Arg,
        idents: &'t [Str],
        args: &'t [Arg],
        fin: Option<Val>,
    ) -> R<Val> {
        let n = idents.len();
        for ident in &idents[..n - 1] {
            recv = self.eval_field(dot, ident, node, &[], None, recv)?;
        }
        self.eval_field(dot, &idents[n - 1], node, args, fin, recv)
    }

    fn eval_field(
        &mut self,
        dot: &Val,
        name: &str,
        node: &'t Arg,
        args: &'t [Arg],
        fin: Option<Val>,
        recv: Val,
    ) -> R<Val> {
        if recv.v.is_nil() && !recv.wrapped {
            if self.rt.strict {
                return Err(self.errorf(format!(
                    "nil data; no entry for key {}",
                    format::quote(name, false)
                )));
            }
            return Ok(Val::default());
        }
        let typ = |recv: &Val| {
            if recv.wrapped {
                "interface {}".to_string()
            } else {
                recv.v.type_name()
            }
        };
        if recv.v.is_nil() {
            return Err(self.errorf(format!("nil pointer evaluating {}.{name}", typ(&recv))));
        }
        if let Some(m) = method_of(&recv.v, name) {
            let fn_args = if args.is_empty() { args } else { &args[1..] };
            return self.eval_call(dot, Callee::Method(&m), At::Arg(node), name, fn_args, fin);
        }
        let has_args = args.len() > 1 || fin.is_some();
        match &recv.v {
            Value::Obj(o) => {
                if let Some(v) = o.field(name) {
                    if has_args {
                        return Err(self.errorf(format!(
                            "{name} has arguments but cannot be invoked as function"
                        )));
                    }
                    return Ok(Val::plain(v));
                }
            }
            Value::Map(m) => {
                if has_args {
                    return Err(self.errorf(format!("{name} is not a method but has arguments")));
                }
                let kind = m.kind();
                let iface = matches!(kind, MapKind::Iface | MapKind::Values);
                return match m.get(name) {
                    Some(v) => Ok(Val { v, wrapped: iface }),
                    None => {
                        if self.rt.strict {
                            return Err(self.errorf(format!(
                                "map has no entry for key {}",
                                format::quote(name, false)
                            )));
                        }
                        Ok(match kind {
                            MapKind::Str => Val::plain(Value::str("")),
                            MapKind::Files => Val::plain(Value::Bytes(Arc::from(Vec::new()))),
                            _ => Val {
                                v: Value::Nil,
                                wrapped: true,
                            },
                        })
                    }
                };
            }
            _ => {}
        }
        Err(self.errorf(format!(
            "can't evaluate field {name} in type {}",
            typ(&recv)
        )))
    }

    /// Go's `evalCall`: counts and checks arguments, then calls.
    fn eval_call(
        &mut self,
        dot: &Val,
        callee: Callee<'_>,
        node: At<'t>,
        name: &str,
        args: &'t [Arg],
        fin: Option<Val>,
    ) -> R<Val> {
        let sig = callee.sig();
        let num_in = args.len() + usize::from(fin.is_some());
        let num_fixed = if sig.variadic.is_some() {
            let fixed = sig.params.len();
            if num_in < fixed {
                return Err(self.errorf(format!(
                    "wrong number of args for {name}: want at least {fixed} got {}",
                    args.len()
                )));
            }
            fixed
        } else {
            if num_in != sig.params.len() {
                return Err(self.errorf(format!(
                    "wrong number of args for {name}: want {} got {num_in}",
                    sig.params.len()
                )));
            }
            args.len()
        };
        if let Callee::Func(f) = callee {
            if f.lazy != Lazy::No {
                return self.eval_and_or(dot, f.lazy == Lazy::Or, args, fin);
            }
        }
        let mut argv = Args::with_capacity(num_in);
        let mut i = 0;
        while i < num_fixed && i < args.len() {
            argv.push(self.eval_arg(dot, Some(sig.params[i]), &args[i])?.v);
            i += 1;
        }
        if let Some(vt) = sig.variadic {
            while i < args.len() {
                argv.push(self.eval_arg(dot, Some(vt), &args[i])?.v);
                i += 1;
            }
        }
        if let Some(f) = fin {
            let t = match sig.variadic {
                Some(vt) => {
                    if num_in - 1 < num_fixed {
                        sig.params[num_in - 1]
                    } else {
                        vt
                    }
                }
                None => sig.params[sig.params.len() - 1],
            };
            argv.push(self.validate_type(f, t)?);
        }
        let r = match callee {
            Callee::Func(f) => {
                if f.nondeterministic {
                    self.rt.nondeterministic(f.name);
                }
                (f.imp)(self, argv)
            }
            Callee::Method(m) => (m.call)(argv.into_vec()).map_err(FnError::Msg),
        };
        match r {
            Ok(v) => Ok(Val::plain(v)),
            Err(e) => {
                self.at = node;
                Err(match e {
                    FnError::Msg(m) => self.errorf(format!("error calling {name}: {m}")),
                    FnError::Nested(inner) => {
                        if inner.kind == super::error::ErrorKind::Limit {
                            return Err(inner);
                        }
                        self.errorf(format!("error calling {name}: {}", inner.msg))
                    }
                })
            }
        }
    }

    fn eval_and_or(&mut self, dot: &Val, or: bool, args: &'t [Arg], fin: Option<Val>) -> R<Val> {
        let mut v = Val::default();
        for a in args {
            v = Val::plain(self.eval_arg(dot, Some(Ty::Raw), a)?.v);
            if v.v.truth() == or {
                return Ok(v);
            }
        }
        if let Some(f) = fin {
            v = Val::plain(f.v);
        }
        Ok(v)
    }

    /// Go's `validateType`: can `v` be passed as a `t`?
    fn validate_type(&self, v: Val, t: Ty) -> R<Value> {
        if v.v.is_nil() {
            // An interface holding nil passes only as an interface; an untyped nil
            // (Go's invalid value) becomes the zero value of any nillable type.
            if matches!(t, Ty::Any | Ty::Raw) || (t.can_be_nil() && !v.wrapped) {
                return Ok(Value::Nil);
            }
            if v.wrapped {
                return Err(self.errorf(format!(
                    "wrong type for value; expected {}; got interface {{}}",
                    t.name()
                )));
            }
            return Err(self.errorf(format!("invalid value; expected {}", t.name())));
        }
        let ok = match t {
            Ty::Any | Ty::Raw => true,
            Ty::Str => matches!(v.v, Value::Str(_)),
            Ty::Int => matches!(v.v, Value::Int(_)),
            Ty::Int64 => matches!(v.v, Value::Int64(_)),
            Ty::Float64 => matches!(v.v, Value::Float(_)),
            Ty::Bool => matches!(v.v, Value::Bool(_)),
            Ty::Map => {
                matches!(&v.v, Value::Map(m) if matches!(m.kind(), MapKind::Iface | MapKind::Values))
            }
            Ty::List => matches!(&v.v, Value::List(l) if l.kind == crate::value::ListKind::Iface),
        };
        if !ok {
            return Err(self.errorf(format!(
                "wrong type for value; expected {}; got {}",
                t.name(),
                v.v.type_name()
            )));
        }
        Ok(v.v)
    }

    /// Go's `evalArg`. `t` is None for a chain's receiver (no type to check).
    fn eval_arg(&mut self, dot: &Val, t: Option<Ty>, n: &'t Arg) -> R<Val> {
        self.at = At::Arg(n);
        let checked = |ex: &Self, v: Val| -> R<Val> {
            match t {
                None => Ok(Val::plain(v.v)),
                Some(t) => {
                    let wrapped = v.wrapped;
                    ex.validate_type(v, t).map(|v| Val { v, wrapped })
                }
            }
        };
        match n {
            Arg::Dot(_) => return checked(self, dot.clone()),
            Arg::Nil(_) => {
                return match t {
                    Some(t) if !t.can_be_nil() => {
                        Err(self.errorf(format!("cannot assign nil to {}", t.name())))
                    }
                    _ => Ok(Val::default()),
                }
            }
            Arg::Field { idents, .. } => {
                let v = self.eval_field_chain(
                    dot,
                    dot.clone(),
                    n,
                    idents,
                    std::slice::from_ref(n),
                    None,
                )?;
                return checked(self, v);
            }
            Arg::Variable { idents, .. } => {
                let v = self.var_value(&idents[0])?;
                let v = if idents.len() == 1 {
                    v
                } else {
                    self.eval_field_chain(dot, v, n, &idents[1..], &[], None)?
                };
                return checked(self, v);
            }
            Arg::Pipe(p) => {
                let v = self.eval_pipeline(dot, p)?;
                return checked(self, v);
            }
            Arg::Ident { name, func, .. } => {
                let v = self.eval_call(dot, Callee::Func(func), At::Arg(n), name, &[], None)?;
                return checked(self, v);
            }
            Arg::Chain { node, fields, .. } => {
                let recv = self.eval_arg(dot, None, node)?;
                self.at = At::Arg(n);
                let v = self.eval_field_chain(dot, recv, n, fields, &[], None)?;
                return checked(self, v);
            }
            _ => {}
        }
        let t = t.unwrap_or(Ty::Any);
        let v = match t {
            Ty::Bool => match n {
                Arg::Bool(_, b) => Value::Bool(*b),
                _ => return Err(self.errorf(format!("expected bool; found {n}"))),
            },
            Ty::Str => match n {
                Arg::String { text, .. } => Value::Str(text.clone()),
                _ => return Err(self.errorf(format!("expected string; found {n}"))),
            },
            Ty::Int | Ty::Int64 => match n {
                Arg::Number(_, num) if num.int.is_some() && !num.complex => {
                    let i = num.int.unwrap_or(0);
                    if t == Ty::Int {
                        Value::Int(i)
                    } else {
                        Value::Int64(i)
                    }
                }
                _ => return Err(self.errorf(format!("expected integer; found {n}"))),
            },
            Ty::Float64 => match n {
                Arg::Number(_, num) if num.float.is_some() && !num.complex => {
                    Value::Float(num.float.unwrap_or(0.0))
                }
                _ => return Err(self.errorf(format!("expected float; found {n}"))),
            },
            Ty::Any | Ty::Raw => match n {
                Arg::Bool(_, b) => Value::Bool(*b),
                Arg::Number(_, num) => self.ideal_constant(num)?,
                Arg::String { text, .. } => Value::Str(text.clone()),
                _ => {
                    return Err(self.errorf(format!(
                        "can't handle assignment of {n} to empty interface argument"
                    )))
                }
            },
            Ty::Map | Ty::List => {
                return Err(self.errorf(format!("can't handle {n} for arg of type {}", t.name())));
            }
        };
        Ok(Val::plain(v))
    }

    /// Runs the template `name` with `data` into a string (Go's `ExecuteTemplate`).
    pub fn execute_template(&self, name: &str, data: Value) -> Result<String, ExecError> {
        let tree = self.named_tree(name)?;
        execute(self.rt, self.set.clone(), &tree, data)
    }

    fn named_tree(&self, name: &str) -> Result<Arc<Tree>, ExecError> {
        self.set.lookup(name).ok_or_else(|| {
            ExecError::exec(format!(
                "template: no template {} associated with template \"gotpl\"",
                format::quote(name, false)
            ))
        })
    }

    /// [`execute_template`](Self::execute_template) into a reused buffer, returning the
    /// output as the shared string a function result holds (`include`).
    pub fn execute_template_str(&self, name: &str, data: Value) -> Result<Str, ExecError> {
        let tree = self.named_tree(name)?;
        let out = execute_into(
            self.rt,
            self.set.clone(),
            &tree,
            data,
            self.rt.take_buffer(),
        )?;
        let s = Str::from(out.as_str());
        self.rt.return_buffer(out);
        Ok(s)
    }

    /// Runs an already-parsed tree in another template set (`tpl`).
    pub fn execute_in(
        &self,
        set: Rc<Layer>,
        tree: &Tree,
        data: Value,
    ) -> Result<String, ExecError> {
        execute(self.rt, set, tree, data)
    }
}

enum Callee<'a> {
    Func(&'static FuncDef),
    Method(&'a Method),
}

impl Callee<'_> {
    fn sig(&self) -> Sig {
        match self {
            Callee::Func(f) => f.sig,
            Callee::Method(m) => m.sig,
        }
    }
}

/// Methods Go would find on a value before looking at fields or keys.
fn method_of(v: &Value, name: &str) -> Option<Method> {
    match v {
        Value::Obj(o) => o.method(name),
        Value::Map(m) => match m.kind() {
            MapKind::Files => crate::chart::files::method(m, name),
            MapKind::Values => crate::chart::values::method(m, name),
            _ => None,
        },
        Value::List(l) if l.kind == crate::value::ListKind::VersionSet => {
            crate::chart::capabilities::version_set_method(l, name)
        }
        _ => None,
    }
}

/// Whether a value has a reflect kind that `eq` and friends can compare.
pub fn basic_kind(v: &Value) -> Option<Kind> {
    match v.kind() {
        k
        @ (Kind::Bool | Kind::Int | Kind::Int64 | Kind::Uint64 | Kind::Float64 | Kind::String) => {
            Some(k)
        }
        _ => None,
    }
}
