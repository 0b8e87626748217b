//! `.Files`: the chart's non-template files as Helm's `engine.files`
//! (`map[string][]byte`) with `Get`, `GetBytes`, `Glob`, `Lines`, `AsConfig` and
//! `AsSecrets`. `Glob` uses gobwas/glob rules with `/` as separator.
use std::sync::Arc;

use crate::value::object::{Method, Ty};
use crate::value::{Map, MapKind, Str, Value};

pub fn method(m: &Map, name: &str) -> Option<Method> {
    if !matches!(
        name,
        "GetBytes" | "Get" | "Glob" | "Lines" | "AsConfig" | "AsSecrets"
    ) {
        return None;
    }
    let m = m.clone();
    let arg = |a: &[Value]| a.first().and_then(Value::as_str).unwrap_or("").to_string();
    Some(match name {
        "GetBytes" => Method::new(&[Ty::Str], move |a| Ok(Value::Bytes(bytes(&m, &arg(&a))))),
        "Get" => Method::new(&[Ty::Str], move |a| {
            Ok(Value::string(
                String::from_utf8_lossy(&bytes(&m, &arg(&a))).into_owned(),
            ))
        }),
        "Glob" => Method::new(&[Ty::Str], move |a| {
            let pat = arg(&a);
            let g = crate::chart::glob::Glob::new(&pat)
                .unwrap_or_else(|_| crate::chart::glob::Glob::any());
            let out = Map::new(MapKind::Files);
            for (k, v) in m.snapshot() {
                if g.matches(&k) {
                    out.insert(k, v);
                }
            }
            Ok(Value::Map(out))
        }),
        "Lines" => Method::new(&[Ty::Str], move |a| {
            let path = arg(&a);
            let Some(Value::Bytes(b)) = m.get(&path) else {
                return Ok(Value::str_list(Vec::new()));
            };
            let mut s = String::from_utf8_lossy(&b).into_owned();
            if s.is_empty() {
                return Err("runtime error: index out of range [-1]".into());
            }
            if s.ends_with('\n') {
                s.pop();
            }
            Ok(Value::str_list(s.split('\n').map(String::from).collect()))
        }),
        "AsConfig" => Method::new(&[], move |_| as_map(&m, false)),
        "AsSecrets" => Method::new(&[], move |_| as_map(&m, true)),
        _ => return None,
    })
}

fn bytes(m: &Map, name: &str) -> Arc<[u8]> {
    match m.get(name) {
        Some(Value::Bytes(b)) => b,
        _ => Arc::from(Vec::new()),
    }
}

fn as_map(m: &Map, secrets: bool) -> Result<Value, String> {
    let out = Map::new(MapKind::Str);
    for (k, v) in m.snapshot() {
        let base = k.rsplit('/').next().unwrap_or(&k).to_string();
        let Value::Bytes(b) = v else { continue };
        let text = if secrets {
            crate::funcs::encoding::base64_std(&b)
        } else {
            String::from_utf8_lossy(&b).into_owned()
        };
        out.insert(Str::from(base), Value::string(text));
    }
    Ok(Value::string(
        crate::funcs::helm::to_yaml(&Value::Map(out)).unwrap_or_default(),
    ))
}
