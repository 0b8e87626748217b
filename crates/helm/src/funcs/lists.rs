//! Sprig's list functions. They accept any slice through reflection and return
//! `[]interface {}`; on a non-slice they fail with Sprig's message, and on nil with the
//! nil-dereference panic Go reports. Equality is `reflect.DeepEqual`.
use super::builtins::slice_items;
use super::conv::{empty, to_int64};
use super::{check_list, int, FnResult, FuncDef, NIL_DEREF};
use crate::value::{ListKind, Value};
use crate::{func, funcv};

fn list(items: Vec<Value>) -> Value {
    Value::list(ListKind::Iface, items)
}

fn push(a: &[Value], what: &str) -> FnResult {
    let mut items = slice_items(&a[0], what)?;
    items.push(a[1].clone());
    Ok(list(items))
}

fn prepend(a: &[Value], what: &str) -> FnResult {
    let mut items = slice_items(&a[0], what)?;
    items.insert(0, a[1].clone());
    Ok(list(items))
}

fn first(a: &[Value], what: &str) -> FnResult {
    Ok(slice_items(&a[0], what)?
        .into_iter()
        .next()
        .unwrap_or_default())
}

fn last(a: &[Value], what: &str) -> FnResult {
    Ok(slice_items(&a[0], what)?.pop().unwrap_or_default())
}

fn rest(a: &[Value], what: &str) -> FnResult {
    let items = slice_items(&a[0], what)?;
    if items.is_empty() {
        return Ok(list(Vec::new()));
    }
    Ok(list(items[1..].to_vec()))
}

fn initial(a: &[Value], what: &str) -> FnResult {
    let items = slice_items(&a[0], what)?;
    if items.is_empty() {
        return Ok(list(Vec::new()));
    }
    Ok(list(items[..items.len() - 1].to_vec()))
}

fn reverse(a: &[Value], what: &str) -> FnResult {
    let mut items = slice_items(&a[0], what)?;
    items.reverse();
    Ok(list(items))
}

fn compact(a: &[Value], what: &str) -> FnResult {
    let items = slice_items(&a[0], what)?;
    Ok(list(items.into_iter().filter(|x| !empty(x)).collect()))
}

fn uniq(a: &[Value], what: &str) -> FnResult {
    let items = slice_items(&a[0], what)?;
    let mut out: Vec<Value> = Vec::new();
    for x in items {
        if !out.iter().any(|y| y.deep_equal(&x)) {
            out.push(x);
        }
    }
    Ok(list(out))
}

fn without(a: &[Value], what: &str) -> FnResult {
    let items = slice_items(&a[0], what)?;
    let omit = &a[1..];
    Ok(list(
        items
            .into_iter()
            .filter(|x| !omit.iter().any(|o| o.deep_equal(x)))
            .collect(),
    ))
}

fn has(a: &[Value], what: &str) -> FnResult {
    let items = slice_items(&a[1], what)?;
    Ok(Value::Bool(items.iter().any(|x| x.deep_equal(&a[0]))))
}

fn slice(a: &[Value]) -> FnResult {
    let items = match &a[0] {
        Value::Nil => return Err(NIL_DEREF.into()),
        Value::List(_) | Value::Bytes(_) => a[0].list_items().unwrap_or_default(),
        other => {
            return Err(format!(
                "list should be type of slice or array but {}",
                other.kind().name()
            )
            .into())
        }
    };
    if items.is_empty() {
        return Ok(Value::Nil);
    }
    let l = items.len() as i64;
    let start = a.get(1).map(to_int64).unwrap_or(0);
    let end = a.get(2).map(to_int64).unwrap_or(l);
    if start < 0 || end < start || end > l {
        return Err("reflect: slice index out of range".into());
    }
    let kind = match &a[0] {
        Value::List(li) => li.kind,
        _ => ListKind::Iface,
    };
    Ok(Value::list(
        kind,
        items[start as usize..end as usize].to_vec(),
    ))
}

fn chunk(a: &[Value], what: &str) -> FnResult {
    let size = int(&a[0]);
    let items = match &a[1] {
        Value::Nil => return Err(NIL_DEREF.into()),
        Value::List(_) | Value::Bytes(_) => a[1].list_items().unwrap_or_default(),
        other => return Err(format!("Cannot {what} type {}", other.kind().name()).into()),
    };
    if size <= 0 {
        return Err("runtime error: integer divide by zero".into());
    }
    let out: Vec<Value> = items
        .chunks(size as usize)
        .map(|c| list(c.to_vec()))
        .collect();
    if out.is_empty() {
        return Ok(list(vec![list(Vec::new())]));
    }
    Ok(list(out))
}

pub const FUNCS: &[FuncDef] = &[
    funcv!("list", [], Any, |_, a| Ok(list(a.into_vec()))),
    funcv!("tuple", [], Any, |_, a| Ok(list(a.into_vec()))),
    func!("append", [Any, Any], |_, a| push(&a, "push on")),
    func!("push", [Any, Any], |_, a| push(&a, "push on")),
    func!("mustAppend", [Any, Any], |_, a| push(&a, "push on")),
    func!("mustPush", [Any, Any], |_, a| push(&a, "push on")),
    func!("prepend", [Any, Any], |_, a| prepend(&a, "prepend on")),
    func!("mustPrepend", [Any, Any], |_, a| prepend(&a, "prepend on")),
    func!("first", [Any], |_, a| first(&a, "find first on")),
    func!("mustFirst", [Any], |_, a| first(&a, "find first on")),
    func!("rest", [Any], |_, a| rest(&a, "find rest on")),
    func!("mustRest", [Any], |_, a| rest(&a, "find rest on")),
    func!("last", [Any], |_, a| last(&a, "find last on")),
    func!("mustLast", [Any], |_, a| last(&a, "find last on")),
    func!("initial", [Any], |_, a| initial(&a, "find initial on")),
    func!("mustInitial", [Any], |_, a| initial(&a, "find initial on")),
    func!("reverse", [Any], |_, a| reverse(&a, "find reverse on")),
    func!("mustReverse", [Any], |_, a| reverse(&a, "find reverse on")),
    func!("uniq", [Any], |_, a| uniq(&a, "find uniq on")),
    func!("mustUniq", [Any], |_, a| uniq(&a, "find uniq on")),
    funcv!("without", [Any], Any, |_, a| without(&a, "find without on")),
    funcv!("mustWithout", [Any], Any, |_, a| without(
        &a,
        "find without on"
    )),
    func!("has", [Any, Any], |_, a| has(&a, "find has on")),
    func!("mustHas", [Any, Any], |_, a| has(&a, "find has on")),
    func!("compact", [Any], |_, a| compact(&a, "compact on")),
    func!("mustCompact", [Any], |_, a| compact(&a, "compact on")),
    funcv!("slice", [Any], Any, |_, a| slice(&a)),
    funcv!("mustSlice", [Any], Any, |_, a| slice(&a)),
    func!("chunk", [Int, Any], |_, a| chunk(&a, "chunk")),
    func!("mustChunk", [Int, Any], |_, a| chunk(&a, "chunk")),
    funcv!("concat", [], Any, |ex, a| {
        let mut out = Vec::new();
        for l in &a {
            match l {
                Value::Nil => return Err(NIL_DEREF.into()),
                Value::List(_) | Value::Bytes(_) => out.extend(l.list_items().unwrap_or_default()),
                other => {
                    return Err(
                        format!("Cannot concat type {} as list", other.kind().name()).into(),
                    )
                }
            }
            check_list(ex, out.len())?;
        }
        Ok(list(out))
    }),
];
