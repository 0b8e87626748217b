//! Sprig's dictionary functions. Maps are shared references: `set`, `unset`, `merge`
//! and `mergeOverwrite` change their first argument in place, as in Go. `merge` follows
//! mergo: a key is filled from a source when the destination lacks it or holds an empty
//! value, nested maps merge, and lists are kept unless overwriting.
use super::conv::empty;
use super::{s, FnResult, FuncDef};
use crate::value::{ListKind, Map, MapKind, Str, Value};
use crate::{func, funcv};

pub const FUNCS: &[FuncDef] = &[
    funcv!("dict", [], Any, |_, a| {
        let m = Map::new(MapKind::Iface);
        let mut i = 0;
        while i < a.len() {
            let key = super::strings::str_of(&a[i]);
            let v = a.get(i + 1).cloned().unwrap_or_else(|| Value::str(""));
            m.insert(key, v);
            i += 2;
        }
        Ok(Value::Map(m))
    }),
    func!("get", [Map, Str], |_, a| Ok(map_of(&a[0])
        .and_then(|m| m.get(s(&a[1])))
        .unwrap_or_else(|| Value::str("")))),
    func!("set", [Map, Str, Any], |_, a| {
        let m = require_map(&a[0])?;
        m.insert(Str::from(s(&a[1])), a[2].clone());
        Ok(a[0].clone())
    }),
    func!("unset", [Map, Str], |_, a| {
        if let Some(m) = map_of(&a[0]) {
            m.remove(s(&a[1]));
        }
        Ok(a[0].clone())
    }),
    func!("hasKey", [Map, Str], |_, a| Ok(Value::Bool(
        map_of(&a[0]).is_some_and(|m| m.contains_key(s(&a[1])))
    ))),
    funcv!("pluck", [Str], Map, |_, a| {
        let key = s(&a[0]);
        Ok(Value::list(
            ListKind::Iface,
            a[1..]
                .iter()
                .filter_map(|d| map_of(d).and_then(|m| m.get(key)))
                .collect(),
        ))
    }),
    funcv!("keys", [], Map, |_, a| {
        let mut k: Vec<String> = Vec::new();
        for d in &a {
            if let Some(m) = map_of(d) {
                k.extend(m.keys().iter().map(|x| x.to_string()));
            }
        }
        // Go iterates maps in random order; sorted is one of the orders Helm can print.
        Ok(Value::str_list(k))
    }),
    funcv!("pick", [Map], Str, |_, a| {
        let out = Map::new(MapKind::Iface);
        if let Some(m) = map_of(&a[0]) {
            for k in &a[1..] {
                if let Some(v) = m.get(s(k)) {
                    out.insert(Str::from(s(k)), v);
                }
            }
        }
        Ok(Value::Map(out))
    }),
    funcv!("omit", [Map], Str, |_, a| {
        let out = Map::new(MapKind::Iface);
        if let Some(m) = map_of(&a[0]) {
            for (k, v) in m.snapshot() {
                if !a[1..].iter().any(|o| s(o) == &*k) {
                    out.insert(k, v);
                }
            }
        }
        Ok(Value::Map(out))
    }),
    func!("values", [Map], |_, a| Ok(Value::list(
        ListKind::Iface,
        map_of(&a[0])
            .map(|m| m.snapshot().into_iter().map(|(_, v)| v).collect())
            .unwrap_or_default()
    ))),
    funcv!("merge", [Map], Map, |_, a| merge_all(&a, false)),
    funcv!("mustMerge", [Map], Map, |_, a| merge_all(&a, false)),
    funcv!("mergeOverwrite", [Map], Map, |_, a| merge_all(&a, true)),
    funcv!("mustMergeOverwrite", [Map], Map, |_, a| merge_all(&a, true)),
    funcv!("dig", [], Any, |_, a| dig(&a)),
    func!("deepCopy", [Any], |_, a| Ok(deep_copy(&a[0], 0))),
    func!("mustDeepCopy", [Any], |_, a| Ok(deep_copy(&a[0], 0))),
];

fn map_of(v: &Value) -> Option<Map> {
    match v {
        Value::Map(m) => Some(m.clone()),
        _ => None,
    }
}

fn require_map(v: &Value) -> Result<Map, super::FnError> {
    map_of(v).ok_or_else(|| "assignment to entry in nil map".into())
}

fn merge_all(a: &[Value], overwrite: bool) -> FnResult {
    let Some(dst) = map_of(&a[0]) else {
        // mergo refuses a nil destination; Sprig swallows the error and returns it.
        return Ok(a[0].clone());
    };
    for src in &a[1..] {
        if let Some(src) = map_of(src) {
            deep_merge(&dst, &src, overwrite, 0);
        }
    }
    Ok(a[0].clone())
}

/// mergo's `deepMerge` for `map[string]interface{}`.
pub fn deep_merge(dst: &Map, src: &Map, overwrite: bool, depth: usize) {
    if depth > 1_000 || dst.same(src) {
        return;
    }
    let dst_was_empty = dst.is_empty();
    let src_empty = src.is_empty();
    for (k, sv) in src.snapshot() {
        if sv.is_nil() {
            if overwrite {
                dst.insert(k, Value::Nil);
            }
            continue;
        }
        let dv = dst.get(&k);
        match &sv {
            Value::Map(sm) => {
                if let Some(Value::Map(dm)) = &dv {
                    deep_merge(dm, sm, overwrite, depth + 1);
                }
            }
            Value::List(_) => {
                if !src_empty && (overwrite || dst_was_empty) {
                    dst.insert(k.clone(), sv.clone());
                } else if dv.is_none() {
                    dst.insert(k.clone(), Value::list(ListKind::Iface, Vec::new()));
                }
            }
            _ => {}
        }
        let dv_now = dst.get(&k);
        if let Some(d) = &dv {
            if !empty(d) {
                if matches!(sv, Value::List(_)) {
                    continue;
                }
                if matches!(sv, Value::Map(_)) && matches!(d, Value::Map(_)) {
                    continue;
                }
            }
        }
        let dst_missing = dv.is_none();
        let dst_empty = dv_now.as_ref().is_none_or(empty);
        if overwrite || dst_missing || dst_empty {
            dst.insert(k, sv);
        }
    }
}

fn dig(a: &[Value]) -> FnResult {
    if a.len() < 3 {
        return Err("dig needs at least three arguments".into());
    }
    let dict = &a[a.len() - 1];
    let def = &a[a.len() - 2];
    let mut keys = Vec::new();
    for k in &a[..a.len() - 2] {
        match k {
            Value::Str(s) => keys.push(s.clone()),
            other => {
                return Err(format!(
                    "interface conversion: interface {{}} is {}, not string",
                    other.type_name()
                )
                .into())
            }
        }
    }
    let mut cur = dict.clone();
    for (i, k) in keys.iter().enumerate() {
        let m = match &cur {
            Value::Map(m) if m.kind() == MapKind::Iface => m.clone(),
            Value::Nil => {
                return Err(
                    "interface conversion: interface {} is nil, not map[string]interface {}".into(),
                )
            }
            other => {
                return Err(format!(
                    "interface conversion: interface {{}} is {}, not map[string]interface {{}}",
                    other.type_name()
                )
                .into())
            }
        };
        match m.get(k) {
            None => return Ok(def.clone()),
            Some(v) => {
                if i == keys.len() - 1 {
                    return Ok(v);
                }
                cur = v;
            }
        }
    }
    Ok(def.clone())
}

/// copystructure's `Copy`: maps and slices copied deeply, keeping their Go types.
pub fn deep_copy(v: &Value, depth: usize) -> Value {
    if depth > 1_000 {
        return v.clone();
    }
    match v {
        Value::List(l) => Value::list(
            l.kind,
            l.items.iter().map(|x| deep_copy(x, depth + 1)).collect(),
        ),
        Value::Map(m) => {
            let out = Map::new(m.kind());
            for (k, x) in m.snapshot() {
                out.insert(k, deep_copy(&x, depth + 1));
            }
            Value::Map(out)
        }
        other => other.clone(),
    }
}
