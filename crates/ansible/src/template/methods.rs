//! The Python methods roles call on values inside templates (`d.get('k')`, `s.split(',')`,
//! `d.items()`, ...). Mutating methods (`append`, `update`) cannot exist on immutable values:
//! a role calling one is refused at run time with the method named.
use minijinja::value::{Value, ValueKind};
use minijinja::{Error, State};

use super::args::{invalid, Args};
use super::value::py_str;

pub fn call_method(_: &mut State, v: &Value, name: &str, args: &[Value]) -> Result<Value, Error> {
    let a = Args::parse(args.to_vec());
    match (v.kind(), name) {
        (ValueKind::Map, "get") => {
            let key = a.pos.first().ok_or_else(|| invalid("get() needs a key"))?;
            let found = v.get_item(key)?;
            Ok(if found.is_undefined() {
                a.pos.get(1).cloned().unwrap_or(Value::from(()))
            } else {
                found
            })
        }
        (ValueKind::Map, "keys") => Ok(Value::from(v.try_iter()?.collect::<Vec<_>>())),
        (ValueKind::Map, "values") => Ok(Value::from(
            v.try_iter()?
                .map(|k| v.get_item(&k).unwrap_or_default())
                .collect::<Vec<_>>(),
        )),
        (ValueKind::Map, "items") => Ok(Value::from(
            v.try_iter()?
                .map(|k| Value::from(vec![k.clone(), v.get_item(&k).unwrap_or_default()]))
                .collect::<Vec<_>>(),
        )),
        (ValueKind::String, _) => string_method(v.as_str().unwrap_or_default(), name, &a),
        (ValueKind::Seq, "index") => {
            let x = a
                .pos
                .first()
                .ok_or_else(|| invalid("index() needs a value"))?;
            v.try_iter()?
                .position(|y| &y == x)
                .map(Value::from)
                .ok_or_else(|| invalid(format!("{} is not in list", py_str(x))))
        }
        (ValueKind::Seq, "count") => {
            let x = a
                .pos
                .first()
                .ok_or_else(|| invalid("count() needs a value"))?;
            Ok(Value::from(v.try_iter()?.filter(|y| y == x).count()))
        }
        _ => Err(invalid(format!(
            "method '{name}' of {} is not supported by bosun",
            v.kind()
        ))),
    }
}

fn string_method(s: &str, name: &str, a: &Args) -> Result<Value, Error> {
    let arg = |i: usize| a.pos.get(i).map(py_str);
    Ok(match name {
        "lower" => Value::from(s.to_lowercase()),
        "upper" => Value::from(s.to_uppercase()),
        "strip" => Value::from(match arg(0) {
            Some(c) => s.trim_matches(|x| c.contains(x)),
            None => s.trim(),
        }),
        "lstrip" => Value::from(match arg(0) {
            Some(c) => s.trim_start_matches(|x| c.contains(x)),
            None => s.trim_start(),
        }),
        "rstrip" => Value::from(match arg(0) {
            Some(c) => s.trim_end_matches(|x| c.contains(x)),
            None => s.trim_end(),
        }),
        "startswith" => Value::from(arg(0).is_some_and(|p| s.starts_with(p.as_str()))),
        "endswith" => Value::from(arg(0).is_some_and(|p| s.ends_with(p.as_str()))),
        "replace" => {
            let (from, to) = (arg(0).unwrap_or_default(), arg(1).unwrap_or_default());
            Value::from(s.replace(from.as_str(), &to))
        }
        "split" => {
            let parts: Vec<String> = match arg(0) {
                Some(sep) if !sep.is_empty() => s.split(sep.as_str()).map(String::from).collect(),
                _ => s.split_whitespace().map(String::from).collect(),
            };
            Value::from(parts)
        }
        "join" => {
            let items: Vec<String> = a
                .pos
                .first()
                .ok_or_else(|| invalid("join() needs a list"))?
                .try_iter()?
                .map(|x| py_str(&x))
                .collect();
            Value::from(items.join(s))
        }
        "find" => Value::from(
            arg(0)
                .and_then(|p| s.find(p.as_str()))
                .map_or(-1, |i| s[..i].chars().count() as i64),
        ),
        "count" => Value::from(arg(0).map_or(0, |p| {
            if p.is_empty() {
                s.chars().count() + 1
            } else {
                s.matches(p.as_str()).count()
            }
        })),
        "isdigit" => Value::from(!s.is_empty() && s.chars().all(|c| c.is_ascii_digit())),
        "isalpha" => Value::from(!s.is_empty() && s.chars().all(char::is_alphabetic)),
        "capitalize" => {
            let mut c = s.chars();
            Value::from(
                c.next()
                    .map(|f| f.to_uppercase().collect::<String>() + &c.as_str().to_lowercase())
                    .unwrap_or_default(),
            )
        }
        "title" => Value::from(
            s.split(' ')
                .map(|w| {
                    let mut c = w.chars();
                    c.next()
                        .map(|f| f.to_uppercase().collect::<String>() + &c.as_str().to_lowercase())
                        .unwrap_or_default()
                })
                .collect::<Vec<_>>()
                .join(" "),
        ),
        _ => {
            return Err(invalid(format!(
                "method '{name}' of str is not supported by bosun"
            )))
        }
    })
}
