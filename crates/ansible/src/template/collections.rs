//! Filters over lists and dicts: `combine` (recursive, `list_merge`), `dict2items`,
//! `items2dict`, `flatten`, set operations (order kept as Ansible keeps it), `zip`,
//! `extract`, `json_query` (JMESPath) and the `dict`/`range` globals.
use minijinja::value::{Kwargs, Rest, Value, ValueKind, ValueOrKwargs};
use minijinja::{Error, State};

use super::args::{defined, invalid, Args};
use super::value::{from_json, py_str, to_json};

fn pairs(v: &Value) -> Result<Vec<(Value, Value)>, Error> {
    let mut out = Vec::new();
    for k in v.try_iter()? {
        let item = v.get_item(&k)?;
        out.push((k, item));
    }
    Ok(out)
}

fn items(v: &Value) -> Result<Vec<Value>, Error> {
    Ok(defined(v)?.try_iter()?.collect())
}

fn is_map(v: &Value) -> bool {
    v.kind() == ValueKind::Map
}

pub fn combine(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("combine", &["recursive", "list_merge"], usize::MAX)?;
    let recursive = args.get_bool(usize::MAX, "recursive", false);
    let list_merge = args.get_str(usize::MAX, "list_merge", "replace")?;
    if ![
        "replace",
        "keep",
        "append",
        "prepend",
        "append_rp",
        "prepend_rp",
    ]
    .contains(&list_merge.as_str())
    {
        return Err(invalid(format!(
            "'{list_merge}' is not a valid list_merge value"
        )));
    }
    let mut dicts = vec![v];
    for a in &args.pos {
        // Lists of dicts are flattened, as Ansible's combine does.
        if a.kind() == ValueKind::Seq {
            dicts.extend(items(a)?);
        } else {
            dicts.push(a.clone());
        }
    }
    let mut acc: Vec<(Value, Value)> = Vec::new();
    for d in dicts {
        if !is_map(defined(&d)?) {
            return Err(invalid(format!(
                "combine expects dictionaries, got {}",
                py_str(&d)
            )));
        }
        acc = merge(acc, pairs(&d)?, recursive, &list_merge)?;
    }
    Ok(Value::from_pairs(acc))
}

fn merge(
    mut a: Vec<(Value, Value)>,
    b: Vec<(Value, Value)>,
    recursive: bool,
    lm: &str,
) -> Result<Vec<(Value, Value)>, Error> {
    for (k, bv) in b {
        match a.iter_mut().find(|(ak, _)| *ak == k) {
            None => a.push((k, bv)),
            Some(slot) => {
                let av = slot.1.clone();
                slot.1 = if recursive && is_map(&av) && is_map(&bv) {
                    Value::from_pairs(merge(pairs(&av)?, pairs(&bv)?, recursive, lm)?)
                } else if av.kind() == ValueKind::Seq && bv.kind() == ValueKind::Seq {
                    merge_lists(items(&av)?, items(&bv)?, lm)
                } else {
                    bv
                };
            }
        }
    }
    Ok(a)
}

fn merge_lists(a: Vec<Value>, b: Vec<Value>, lm: &str) -> Value {
    let without = |xs: &[Value], drop: &[Value]| {
        xs.iter()
            .filter(|x| !drop.contains(x))
            .cloned()
            .collect::<Vec<_>>()
    };
    Value::from(match lm {
        "keep" => a,
        "append" => a.into_iter().chain(b).collect(),
        "prepend" => b.into_iter().chain(a).collect(),
        "append_rp" => without(&a, &b).into_iter().chain(b).collect(),
        "prepend_rp" => b.iter().cloned().chain(without(&a, &b)).collect(),
        _ => b,
    })
}

pub fn dict2items(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("dict2items", &["key_name", "value_name"], 2)?;
    if !is_map(defined(&v)?) {
        return Err(invalid(format!(
            "dict2items requires a dictionary, got {} instead.",
            v.kind()
        )));
    }
    let (kn, vn) = (
        args.get_str(0, "key_name", "key")?,
        args.get_str(1, "value_name", "value")?,
    );
    Ok(Value::from(
        pairs(&v)?
            .into_iter()
            .map(|(k, x)| {
                Value::from_pairs([(Value::from(kn.as_str()), k), (Value::from(vn.as_str()), x)])
            })
            .collect::<Vec<_>>(),
    ))
}

pub fn items2dict(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("items2dict", &["key_name", "value_name"], 2)?;
    let (kn, vn) = (
        args.get_str(0, "key_name", "key")?,
        args.get_str(1, "value_name", "value")?,
    );
    let mut out: Vec<(Value, Value)> = Vec::new();
    for item in items(&v)? {
        if !is_map(&item) {
            return Err(invalid(format!(
                "items2dict requires a list of dictionaries, got {}",
                py_str(&item)
            )));
        }
        let k = item.get_attr(&kn)?;
        let x = item.get_attr(&vn)?;
        if k.is_undefined() || x.is_undefined() {
            return Err(invalid(format!(
                "items2dict requires each dictionary to have keys '{kn}' and '{vn}'"
            )));
        }
        match out.iter_mut().find(|(ok, _)| *ok == k) {
            Some(slot) => slot.1 = x,
            None => out.push((k, x)),
        }
    }
    Ok(Value::from_pairs(out))
}

pub fn flatten(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("flatten", &["levels", "skip_nulls"], 2)?;
    let levels = args.get(0, "levels").and_then(|l| l.as_i64());
    let skip_nulls = args.get_bool(1, "skip_nulls", true);
    fn go(
        xs: Vec<Value>,
        levels: Option<i64>,
        skip_nulls: bool,
        out: &mut Vec<Value>,
        depth: usize,
    ) -> Result<(), Error> {
        if depth > 200 {
            return Err(invalid("flatten: nesting too deep"));
        }
        for x in xs {
            if skip_nulls && (x.is_none() || x.as_str() == Some("None")) {
                continue;
            }
            if x.kind() == ValueKind::Seq && levels.is_none_or(|l| l > 0) {
                go(
                    x.try_iter()?.collect(),
                    levels.map(|l| l - 1),
                    skip_nulls,
                    out,
                    depth + 1,
                )?;
            } else {
                out.push(x);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    go(items(&v)?, levels, skip_nulls, &mut out, 0)?;
    Ok(Value::from(out))
}

fn unique(xs: impl IntoIterator<Item = Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for x in xs {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

fn other(args: &Args, what: &str) -> Result<Vec<Value>, Error> {
    args.check(what, &[], 1)?;
    items(
        &args
            .get(0, "b")
            .ok_or_else(|| invalid(format!("{what} needs a list")))?,
    )
}

pub fn difference(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    let b = other(&args, "difference")?;
    Ok(Value::from(unique(
        items(&v)?.into_iter().filter(|x| !b.contains(x)),
    )))
}

pub fn intersect(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    let b = other(&args, "intersect")?;
    Ok(Value::from(unique(
        items(&v)?.into_iter().filter(|x| b.contains(x)),
    )))
}

pub fn union(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    let b = other(&args, "union")?;
    Ok(Value::from(unique(items(&v)?.into_iter().chain(b))))
}

pub fn symmetric_difference(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    let b = other(&args, "symmetric_difference")?;
    let a = items(&v)?;
    let both = unique(a.iter().cloned().chain(b.iter().cloned()));
    Ok(Value::from(
        both.into_iter()
            .filter(|x| !(a.contains(x) && b.contains(x)))
            .collect::<Vec<_>>(),
    ))
}

pub fn zip(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("zip", &[], usize::MAX)?;
    let mut lists = vec![items(&v)?];
    for a in &args.pos {
        lists.push(items(a)?);
    }
    let n = lists.iter().map(Vec::len).min().unwrap_or(0);
    Ok(Value::from(
        (0..n)
            .map(|i| Value::from(lists.iter().map(|l| l[i].clone()).collect::<Vec<_>>()))
            .collect::<Vec<_>>(),
    ))
}

pub fn extract(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("extract", &["container", "morekeys"], 2)?;
    let container = args
        .get(0, "container")
        .ok_or_else(|| invalid("extract needs a container"))?;
    let mut out = container.get_item(defined(&v)?)?;
    if let Some(more) = args.get(1, "morekeys").filter(|m| !m.is_none()) {
        let keys = if more.kind() == ValueKind::Seq {
            items(&more)?
        } else {
            vec![more]
        };
        for k in keys {
            out = out.get_item(&k)?;
        }
    }
    Ok(out)
}

pub fn json_query(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("json_query", &["expr"], 1)?;
    let expr = args.get_str(0, "expr", "")?;
    let data = to_json(defined(&v)?).map_err(|e| invalid(e.to_string()))?;
    let compiled = jmespath::compile(&expr)
        .map_err(|e| invalid(format!("JMESPathError in json_query filter plugin: {e}")))?;
    let var = jmespath::Variable::from_json(&data.to_string()).map_err(invalid)?;
    let found = compiled
        .search(var)
        .map_err(|e| invalid(format!("JMESPathError in json_query filter plugin: {e}")))?;
    let j = serde_json::to_value(&*found).map_err(|e| invalid(e.to_string()))?;
    Ok(from_json(&j))
}

pub fn dict_filter(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("dict", &[], 0)?;
    let mut out = Vec::new();
    for pair in items(&v)? {
        let kv = items(&pair)?;
        if kv.len() != 2 {
            return Err(invalid(
                "dictionary update sequence element has wrong length",
            ));
        }
        out.push((kv[0].clone(), kv[1].clone()));
    }
    Ok(Value::from_pairs(out))
}

/// Python's `dict(**kwargs)` / `dict(pairs)`.
pub fn dict_fn(args: Rest<ValueOrKwargs>) -> Result<Value, Error> {
    let args = Args::parse(args.0.into_iter().map(Value::from).collect());
    let mut out: Vec<(Value, Value)> = Vec::new();
    if let Some(first) = args.pos.first() {
        if is_map(first) {
            out = pairs(first)?;
        } else {
            for pair in items(first)? {
                let kv = items(&pair)?;
                if kv.len() != 2 {
                    return Err(invalid(
                        "dictionary update sequence element has wrong length",
                    ));
                }
                out.push((kv[0].clone(), kv[1].clone()));
            }
        }
    }
    for (k, v) in args.kw {
        out.push((Value::from(k), v));
    }
    Ok(Value::from_pairs(out))
}

/// Python's `range`, capped so a hostile role cannot allocate without bound.
pub fn range(
    lower: i64,
    upper: Option<i64>,
    step: Option<i64>,
    _kw: Option<Kwargs>,
) -> Result<Value, Error> {
    let (start, stop) = match upper {
        Some(u) => (lower, u),
        None => (0, lower),
    };
    let step = step.unwrap_or(1);
    if step == 0 {
        return Err(invalid("range() arg 3 must not be zero"));
    }
    let n = if step > 0 {
        (stop - start).max(0) / step + i64::from((stop - start).max(0) % step != 0)
    } else {
        (start - stop).max(0) / -step + i64::from((start - stop).max(0) % -step != 0)
    };
    if n > 100_000 {
        return Err(invalid("range() too large (more than 100000 items)"));
    }
    Ok(Value::from(
        (0..n).map(|i| start + i * step).collect::<Vec<_>>(),
    ))
}
