//! Go's `text/template` builtins: logic, comparison, `len`, `index`, the print family,
//! and the escapers. Comparisons follow Go 1.18+: integers of any width compare with
//! each other, an int never equals a float (`incompatible types for comparison`), nil
//! equals nil, and only basic kinds can be ordered.
use std::fmt::Write;

use super::{check_len, int, s, FnResult, FuncDef, Lazy, NIL_DEREF};
use crate::template::exec::Exec;
use crate::value::object::{Sig, Ty};
use crate::value::{format, Kind, ListKind, Value};
use crate::{func, funcv};

pub const FUNCS: &[FuncDef] = &[
    FuncDef {
        name: "and",
        sig: Sig {
            params: &[Ty::Raw],
            variadic: Some(Ty::Raw),
        },
        imp: |_, a| Ok(a.into_iter().next().unwrap_or_default()),
        lazy: Lazy::And,
        nondeterministic: false,
    },
    FuncDef {
        name: "or",
        sig: Sig {
            params: &[Ty::Raw],
            variadic: Some(Ty::Raw),
        },
        imp: |_, a| Ok(a.into_iter().next().unwrap_or_default()),
        lazy: Lazy::Or,
        nondeterministic: false,
    },
    func!("not", [Raw], |_, a| Ok(Value::Bool(!a[0].truth()))),
    func!("len", [Raw], |_, a| length(&a[0])),
    funcv!("index", [Raw], Raw, |_, a| index(&a)),
    funcv!("print", [], Any, |ex, a| out(ex, format::sprint(&a))),
    funcv!("printf", [Str], Any, |ex, a| out(
        ex,
        format::sprintf(s(&a[0]), &a[1..])
    )),
    funcv!("println", [], Any, |ex, a| out(ex, format::sprintln(&a))),
    funcv!("html", [], Any, |_, a| Ok(Value::string(html_escape(
        &eval_args(&a)
    )))),
    funcv!("js", [], Any, |_, a| Ok(Value::string(js_escape(
        &eval_args(&a)
    )))),
    funcv!("urlquery", [], Any, |_, a| Ok(Value::string(query_escape(
        &eval_args(&a)
    )))),
    funcv!("call", [Raw], Raw, |_, a| Err(match &a[0] {
        Value::Nil => "call of nil".to_string(),
        v => format!("non-function of type {}", v.type_name()),
    }
    .into())),
    funcv!("eq", [Raw], Raw, |_, a| eq(&a[0], &a[1..]).map(Value::Bool)),
    func!("ne", [Raw, Raw], |_, a| eq(&a[0], &a[1..2])
        .map(|b| Value::Bool(!b))),
    func!("lt", [Raw, Raw], |_, a| lt(&a[0], &a[1]).map(Value::Bool)),
    func!("le", [Raw, Raw], |_, a| le(&a[0], &a[1]).map(Value::Bool)),
    func!("gt", [Raw, Raw], |_, a| le(&a[0], &a[1])
        .map(|b| Value::Bool(!b))),
    func!("ge", [Raw, Raw], |_, a| lt(&a[0], &a[1])
        .map(|b| Value::Bool(!b))),
];

fn out(ex: &Exec<'_>, s: String) -> FnResult {
    check_len(ex, s.len())?;
    Ok(Value::string(s))
}

fn length(v: &Value) -> FnResult {
    match v {
        Value::Nil => Err("len of nil pointer".into()),
        _ => match v.len() {
            Some(n) => Ok(Value::Int(n as i64)),
            None => Err(format!("len of type {}", v.type_name()).into()),
        },
    }
}

fn index_arg(i: &Value, len: usize) -> Result<usize, String> {
    let x = match i {
        Value::Int(n) | Value::Int64(n) => *n,
        Value::Uint64(u) => *u as i64,
        Value::Nil => return Err("cannot index slice/array with nil".into()),
        other => {
            return Err(format!(
                "cannot index slice/array with type {}",
                other.type_name()
            ))
        }
    };
    if x < 0 || x as u64 > len as u64 {
        return Err(format!("index out of range: {x}"));
    }
    Ok(x as usize)
}

fn index(a: &[Value]) -> FnResult {
    let mut item = a[0].clone();
    if item.is_nil() {
        return Err("index of untyped nil".into());
    }
    for i in &a[1..] {
        item = match &item {
            Value::Nil => return Err("index of nil pointer".into()),
            Value::Str(st) => {
                let x = index_arg(i, st.len())?;
                if x == st.len() {
                    return Err(format!("index out of range: {x}").into());
                }
                Value::Uint64(u64::from(st.as_bytes()[x]))
            }
            Value::List(_) | Value::Bytes(_) | Value::Obj(_) if item.list_items().is_some() => {
                let items = item.list_items().unwrap_or_default();
                let x = index_arg(i, items.len())?;
                if x == items.len() {
                    return Err(format!("index out of range: {x}").into());
                }
                items[x].clone()
            }
            Value::Map(m) => {
                let key = match i {
                    Value::Str(k) => k.clone(),
                    Value::Nil => return Err("value is nil; should be of type string".into()),
                    other => {
                        return Err(format!(
                            "value has type {}; should be string",
                            other.type_name()
                        )
                        .into())
                    }
                };
                match m.get(&key) {
                    Some(v) => v,
                    None => match m.kind() {
                        crate::value::MapKind::Str => Value::str(""),
                        crate::value::MapKind::Files => {
                            Value::Bytes(std::sync::Arc::from(Vec::new()))
                        }
                        _ => Value::Nil,
                    },
                }
            }
            other => return Err(format!("can't index item of type {}", other.type_name()).into()),
        };
    }
    Ok(item)
}

#[derive(PartialEq, Eq, Clone, Copy)]
enum BasicKind {
    Invalid,
    Bool,
    Int,
    Uint,
    Float,
    String,
}

fn basic(v: &Value) -> BasicKind {
    match v.kind() {
        Kind::Bool => BasicKind::Bool,
        Kind::Int | Kind::Int64 => BasicKind::Int,
        Kind::Uint64 => BasicKind::Uint,
        Kind::Float64 => BasicKind::Float,
        Kind::String => BasicKind::String,
        _ => BasicKind::Invalid,
    }
}

fn as_f(v: &Value) -> f64 {
    match v {
        Value::Float(f) => *f,
        _ => 0.0,
    }
}

fn as_u(v: &Value) -> u64 {
    match v {
        Value::Uint64(u) => *u,
        _ => 0,
    }
}

fn as_b(v: &Value) -> bool {
    matches!(v, Value::Bool(true))
}

/// Go's `eq`: true if the first argument equals any of the others.
pub fn eq(a1: &Value, rest: &[Value]) -> Result<bool, super::FnError> {
    if rest.is_empty() {
        return Err("missing argument for comparison".into());
    }
    let k1 = basic(a1);
    for a2 in rest {
        let k2 = basic(a2);
        let truth = if k1 != k2 {
            match (k1, k2) {
                (BasicKind::Int, BasicKind::Uint) => int(a1) >= 0 && int(a1) as u64 == as_u(a2),
                (BasicKind::Uint, BasicKind::Int) => int(a2) >= 0 && as_u(a1) == int(a2) as u64,
                _ => {
                    if !a1.is_nil() && !a2.is_nil() {
                        return Err(format!(
                            "incompatible types for comparison: {} and {}",
                            a1.type_name(),
                            a2.type_name()
                        )
                        .into());
                    }
                    false
                }
            }
        } else {
            match k1 {
                BasicKind::Bool => as_b(a1) == as_b(a2),
                BasicKind::Int => int(a1) == int(a2),
                BasicKind::Uint => as_u(a1) == as_u(a2),
                BasicKind::Float => as_f(a1) == as_f(a2),
                BasicKind::String => s(a1) == s(a2),
                BasicKind::Invalid => {
                    if a1.is_nil() || a2.is_nil() {
                        a1.is_nil() == a2.is_nil()
                    } else {
                        match (a1, a2) {
                            (Value::Obj(x), Value::Obj(y)) => x.deep_equal(y.as_ref()),
                            _ => {
                                return Err(format!(
                                    "non-comparable type {}: {}",
                                    format::sprintf("%s", std::slice::from_ref(a2)),
                                    a2.type_name()
                                )
                                .into())
                            }
                        }
                    }
                }
            }
        };
        if truth {
            return Ok(true);
        }
    }
    Ok(false)
}

fn lt(a1: &Value, a2: &Value) -> Result<bool, super::FnError> {
    let (k1, k2) = (basic(a1), basic(a2));
    if k1 == BasicKind::Invalid || k2 == BasicKind::Invalid {
        return Err("invalid type for comparison".into());
    }
    if k1 != k2 {
        return match (k1, k2) {
            (BasicKind::Int, BasicKind::Uint) => Ok(int(a1) < 0 || (int(a1) as u64) < as_u(a2)),
            (BasicKind::Uint, BasicKind::Int) => Ok(int(a2) >= 0 && as_u(a1) < int(a2) as u64),
            _ => Err(format!(
                "incompatible types for comparison: {} and {}",
                a1.type_name(),
                a2.type_name()
            )
            .into()),
        };
    }
    Ok(match k1 {
        BasicKind::Bool | BasicKind::Invalid => return Err("invalid type for comparison".into()),
        BasicKind::Int => int(a1) < int(a2),
        BasicKind::Uint => as_u(a1) < as_u(a2),
        BasicKind::Float => as_f(a1) < as_f(a2),
        BasicKind::String => s(a1) < s(a2),
    })
}

fn le(a1: &Value, a2: &Value) -> Result<bool, super::FnError> {
    if lt(a1, a2)? {
        return Ok(true);
    }
    eq(a1, std::slice::from_ref(a2))
}

/// Go's `evalArgs`: one string argument as is, otherwise `fmt.Sprint`.
fn eval_args(a: &[Value]) -> String {
    if let [Value::Str(s)] = a {
        return s.to_string();
    }
    format::sprint(a)
}

pub fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("&#34;"),
            '\'' => out.push_str("&#39;"),
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\0' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

fn js_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '"' => out.push_str("\\\""),
            '<' => out.push_str("\\u003C"),
            '>' => out.push_str("\\u003E"),
            '&' => out.push_str("\\u0026"),
            '=' => out.push_str("\\u003D"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c if (c as u32) < 0x80 => out.push(c),
            c if format::is_print(c) => out.push(c),
            c => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
        }
    }
    out
}

/// Go's `url.QueryEscape`.
pub fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => {
                let _ = write!(out, "%{b:02X}");
            }
        }
    }
    out
}

/// The elements of a slice value as Sprig's reflection sees them, or Go's panic text.
pub(crate) fn slice_items(v: &Value, what: &str) -> Result<Vec<Value>, super::FnError> {
    match v {
        Value::Nil => Err(NIL_DEREF.into()),
        Value::List(l) => Ok(l.items.clone()),
        Value::Bytes(_) => Ok(v.list_items().unwrap_or_default()),
        Value::Obj(o) if o.items().is_some() => Ok(o.items().unwrap_or_default()),
        other => Err(format!("Cannot {what} on type {}", other.kind().name()).into()),
    }
}

#[allow(dead_code)]
fn _kind_list(l: ListKind) -> ListKind {
    l
}
