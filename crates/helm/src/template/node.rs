//! The parse tree, shaped like Go's `text/template/parse` nodes. Each node keeps its
//! byte offset so errors can name `file:line:col`, and prints itself as Go's `String()`
//! does, which is the `<context>` of an execution error.
use std::fmt;
use std::sync::Arc;

use crate::funcs::FuncDef;
use crate::value::Str;

/// A parsed template: a file, a `define`, a `block` or a `tpl` string.
#[derive(Debug, Clone)]
pub struct Tree {
    pub name: Str,
    /// The name of the file the text came from (Go's `ParseName`).
    pub parse_name: Str,
    /// The whole text of that file, to turn positions into lines and columns.
    pub text: Arc<str>,
    pub root: Vec<Node>,
}

impl Tree {
    /// Go's `ErrorContext` location: `file:line:col` (the column counts bytes from 0 on
    /// the first line and from 0 after a newline).
    pub fn location(&self, pos: u32) -> String {
        let pos = (pos as usize).min(self.text.len());
        let before = &self.text.as_bytes()[..pos];
        let line = 1 + before.iter().filter(|&&c| c == b'\n').count();
        let col = match before.iter().rposition(|&c| c == b'\n') {
            Some(nl) => pos - (nl + 1),
            None => pos,
        };
        format!("{}:{}:{}", self.parse_name, line, col)
    }

    /// Go's `IsEmptyTree`: only white space and comments.
    pub fn is_empty(&self) -> bool {
        self.root.iter().all(Node::is_empty)
    }
}

#[derive(Debug, Clone)]
pub enum Node {
    Text(Arc<str>),
    Action(Action),
    If(Branch),
    With(Branch),
    Range(Branch),
    Template(TemplateCall),
    Break(u32),
    Continue(u32),
}

impl Node {
    fn is_empty(&self) -> bool {
        match self {
            Node::Text(t) => t.trim_matches(|c: char| c.is_whitespace()).is_empty(),
            _ => false,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Action {
    pub pos: u32,
    pub pipe: Pipe,
}

/// `if`, `with` and `range`: a pipeline, a body and an optional else body.
#[derive(Debug, Clone)]
pub struct Branch {
    pub pos: u32,
    pub pipe: Pipe,
    pub list: Vec<Node>,
    pub else_list: Option<Vec<Node>>,
}

#[derive(Debug, Clone)]
pub struct TemplateCall {
    pub pos: u32,
    pub name: Str,
    pub pipe: Option<Pipe>,
}

#[derive(Debug, Clone)]
pub struct Pipe {
    pub pos: u32,
    pub is_assign: bool,
    /// Declared or assigned variables (`$x :=`, `$i, $e :=`).
    pub decl: Vec<Str>,
    pub cmds: Vec<Command>,
}

#[derive(Debug, Clone)]
pub struct Command {
    pub pos: u32,
    pub args: Vec<Arg>,
}

/// A number literal with every type it can take, as Go's `NumberNode`.
#[derive(Debug, Clone)]
pub struct Number {
    pub text: Str,
    pub int: Option<i64>,
    pub uint: Option<u64>,
    pub float: Option<f64>,
    pub complex: bool,
}

#[derive(Debug, Clone)]
pub enum Arg {
    /// `.A.B`
    Field {
        pos: u32,
        idents: Vec<Str>,
    },
    /// `$x.A.B` (`idents[0]` is the variable).
    Variable {
        pos: u32,
        idents: Vec<Str>,
    },
    /// `(pipe).A.B`
    Chain {
        pos: u32,
        node: Box<Arg>,
        fields: Vec<Str>,
    },
    /// A function name.
    Ident {
        pos: u32,
        name: Str,
        func: &'static FuncDef,
    },
    Dot(u32),
    Nil(u32),
    Bool(u32, bool),
    Number(u32, Number),
    /// A string literal: `quoted` as written, `text` unquoted.
    String {
        pos: u32,
        quoted: Str,
        text: Str,
    },
    Pipe(Box<Pipe>),
}

impl Arg {
    pub fn pos(&self) -> u32 {
        match self {
            Arg::Field { pos, .. }
            | Arg::Variable { pos, .. }
            | Arg::Chain { pos, .. }
            | Arg::Ident { pos, .. }
            | Arg::Dot(pos)
            | Arg::Nil(pos)
            | Arg::Bool(pos, _)
            | Arg::Number(pos, _)
            | Arg::String { pos, .. } => *pos,
            Arg::Pipe(p) => p.pos,
        }
    }
}

impl fmt::Display for Arg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Arg::Field { idents, .. } => {
                for i in idents {
                    write!(f, ".{i}")?;
                }
                Ok(())
            }
            Arg::Variable { idents, .. } => write!(f, "{}", join(idents, ".")),
            Arg::Chain { node, fields, .. } => {
                if let Arg::Pipe(p) = node.as_ref() {
                    write!(f, "({p})")?;
                } else {
                    write!(f, "{node}")?;
                }
                for i in fields {
                    write!(f, ".{i}")?;
                }
                Ok(())
            }
            Arg::Ident { name, .. } => write!(f, "{name}"),
            Arg::Dot(_) => write!(f, "."),
            Arg::Nil(_) => write!(f, "nil"),
            Arg::Bool(_, b) => write!(f, "{b}"),
            Arg::Number(_, n) => write!(f, "{}", n.text),
            Arg::String { quoted, .. } => write!(f, "{quoted}"),
            Arg::Pipe(p) => write!(f, "{p}"),
        }
    }
}

fn join(v: &[Str], sep: &str) -> String {
    v.iter().map(|s| s.as_ref()).collect::<Vec<_>>().join(sep)
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, a) in self.args.iter().enumerate() {
            if i > 0 {
                write!(f, " ")?;
            }
            if let Arg::Pipe(p) = a {
                write!(f, "({p})")?;
            } else {
                write!(f, "{a}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Display for Pipe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.decl.is_empty() {
            write!(f, "{}", join(&self.decl, ", "))?;
            write!(f, "{}", if self.is_assign { " = " } else { " := " })?;
        }
        for (i, c) in self.cmds.iter().enumerate() {
            if i > 0 {
                write!(f, " | ")?;
            }
            write!(f, "{c}")?;
        }
        Ok(())
    }
}

impl fmt::Display for TemplateCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = crate::value::format::quote(&self.name, false);
        match &self.pipe {
            Some(p) => write!(f, "{{{{template {name} {p}}}}}"),
            None => write!(f, "{{{{template {name}}}}}"),
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{{{{{}}}}}", self.pipe)
    }
}

/// Writes a node list the way Go's `ListNode.String()` does.
pub fn write_list(f: &mut fmt::Formatter<'_>, list: &[Node]) -> fmt::Result {
    for n in list {
        write!(f, "{n}")?;
    }
    Ok(())
}

fn write_branch(f: &mut fmt::Formatter<'_>, name: &str, b: &Branch) -> fmt::Result {
    write!(f, "{{{{{name} {}}}}}", b.pipe)?;
    write_list(f, &b.list)?;
    if let Some(e) = &b.else_list {
        write!(f, "{{{{else}}}}")?;
        write_list(f, e)?;
    }
    write!(f, "{{{{end}}}}")
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Node::Text(t) => write!(f, "{}", crate::value::format::quote(t, false)),
            Node::Action(a) => write!(f, "{a}"),
            Node::If(b) => write_branch(f, "if", b),
            Node::With(b) => write_branch(f, "with", b),
            Node::Range(b) => write_branch(f, "range", b),
            Node::Template(t) => write!(f, "{t}"),
            Node::Break(_) => write!(f, "{{{{break}}}}"),
            Node::Continue(_) => write!(f, "{{{{continue}}}}"),
        }
    }
}
