//! Methods of `common.Values` (the type of `.`, `.Values` and `.Template`), which Go
//! finds before map keys of the same name.
use crate::value::object::{Method, Ty};
use crate::value::{Map, MapKind, Value};

pub fn method(m: &Map, name: &str) -> Option<Method> {
    if !matches!(name, "AsMap" | "YAML" | "Table" | "PathValue") {
        return None;
    }
    let m = m.clone();
    Some(match name {
        "AsMap" => Method::new(&[], move |_| Ok(Value::Map(m.shallow_copy(MapKind::Iface)))),
        "YAML" => Method::new(&[], move |_| {
            crate::funcs::helm::to_yaml(&Value::Map(m.clone()))
                .map(|y| Value::string(format!("{y}\n")))
        }),
        "Table" => Method::new(&[Ty::Str], move |a| {
            let path = a.first().and_then(Value::as_str).unwrap_or("");
            let mut cur = Value::Map(m.clone());
            for part in path.split('.') {
                cur = match &cur {
                    Value::Map(x) => match x.get(part) {
                        Some(v @ Value::Map(_)) => v,
                        _ => return Err(format!("no table named {path:?}")),
                    },
                    _ => return Err(format!("no table named {path:?}")),
                };
            }
            match cur {
                Value::Map(x) => Ok(Value::Map(x.with_kind(MapKind::Values))),
                _ => Err(format!("no table named {path:?}")),
            }
        }),
        "PathValue" => Method::new(&[Ty::Str], move |a| {
            let path = a.first().and_then(Value::as_str).unwrap_or("");
            let parts: Vec<&str> = path.split('.').collect();
            let mut cur = Value::Map(m.clone());
            for (i, part) in parts.iter().enumerate() {
                let Value::Map(x) = &cur else {
                    return Err(format!("{path} is not a value"));
                };
                match x.get(part) {
                    Some(v) => {
                        if i == parts.len() - 1 && matches!(v, Value::Map(_)) {
                            return Err(format!("{path} is not a value"));
                        }
                        cur = v;
                    }
                    None => return Err(format!("{path} is not a value")),
                }
            }
            Ok(cur)
        }),
        _ => return None,
    })
}
