//! Ansible's filters on Python's `itertools` and a few more: `product`, `zip_longest`,
//! `subelements`, `strftime`, Jinja2's `urlencode` and kubernetes.core's
//! `k8s_config_resource_name`.
use minijinja::value::{Value, ValueKind};
use minijinja::{Error, State};

use super::args::{defined, invalid, Args};
use super::pyjson::{dumps, JsonOpts};
use super::value::py_str;

fn items(v: &Value) -> Result<Vec<Value>, Error> {
    Ok(defined(v)?.try_iter()?.collect())
}

/// Most elements `product` may build (a hostile role cannot make it allocate without end).
const MAX_PRODUCT: usize = 100_000;

/// `itertools.product(v, *args, repeat=n)` as a list of lists.
pub fn product(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("product", &["repeat"], usize::MAX)?;
    let repeat = match args.kw("repeat") {
        Some(r) => i64::try_from(r).map_err(|_| invalid("repeat must be an integer"))?,
        None => 1,
    };
    let mut pools = vec![items(&v)?];
    for a in &args.pos {
        pools.push(items(a)?);
    }
    let pools: Vec<Vec<Value>> = (0..repeat.max(0)).flat_map(|_| pools.clone()).collect();
    combinations(&pools)
}

/// `itertools.product(first, *rest)` as a list of lists.
pub fn product_of(first: &Value, rest: &[Value]) -> Result<Value, Error> {
    let mut pools = vec![items(first)?];
    for a in rest {
        pools.push(items(a)?);
    }
    combinations(&pools)
}

fn combinations(pools: &[Vec<Value>]) -> Result<Value, Error> {
    pools
        .iter()
        .try_fold(1usize, |n, p| n.checked_mul(p.len()))
        .filter(|n| *n <= MAX_PRODUCT)
        .ok_or_else(|| invalid(format!("product would make more than {MAX_PRODUCT} items")))?;
    let mut out: Vec<Vec<Value>> = vec![Vec::new()];
    for pool in pools {
        out = out
            .iter()
            .flat_map(|prefix| {
                pool.iter().map(move |x| {
                    let mut p = prefix.clone();
                    p.push(x.clone());
                    p
                })
            })
            .collect();
    }
    Ok(Value::from(
        out.into_iter().map(Value::from).collect::<Vec<_>>(),
    ))
}

/// `itertools.zip_longest(v, *args, fillvalue=None)` as a list of lists.
pub fn zip_longest(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("zip_longest", &["fillvalue"], usize::MAX)?;
    let fill = args.kw("fillvalue").unwrap_or(Value::from(()));
    zip_longest_of(&v, &args.pos, fill)
}

/// `itertools.zip_longest(first, *rest, fillvalue=fill)` as a list of lists.
pub fn zip_longest_of(first: &Value, rest: &[Value], fill: Value) -> Result<Value, Error> {
    let mut lists = vec![items(first)?];
    for a in rest {
        lists.push(items(a)?);
    }
    let n = lists.iter().map(Vec::len).max().unwrap_or(0);
    Ok(Value::from(
        (0..n)
            .map(|i| {
                Value::from(
                    lists
                        .iter()
                        .map(|l| l.get(i).cloned().unwrap_or_else(|| fill.clone()))
                        .collect::<Vec<_>>(),
                )
            })
            .collect::<Vec<_>>(),
    ))
}

/// Ansible's `subelements(list, 'key.path', skip_missing=False)`: `[item, subitem]` pairs.
pub fn subelements(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("subelements", &["subelements", "skip_missing"], 2)?;
    let path = args
        .get(0, "subelements")
        .ok_or_else(|| invalid("subelements needs the name of the list"))?;
    let skip = args.get_bool(1, "skip_missing", false);
    subelements_of(&v, &path, skip)
}

/// Ansible's `subelements` on `v` for the key path `path` (a dotted string or a list).
pub fn subelements_of(v: &Value, path: &Value, skip: bool) -> Result<Value, Error> {
    let keys: Vec<String> = match path.kind() {
        ValueKind::String => py_str(path).split('.').map(String::from).collect(),
        ValueKind::Seq => items(path)?.iter().map(py_str).collect(),
        _ => return Err(invalid("subelements must be a list or a string")),
    };
    let list = match v.kind() {
        ValueKind::Seq => items(v)?,
        ValueKind::Map => v
            .try_iter()?
            .map(|k| v.get_item(&k))
            .collect::<Result<_, _>>()?,
        _ => return Err(invalid("obj must be a list of dicts or a nested dict")),
    };
    let mut out = Vec::new();
    'items: for item in list {
        let mut sub = item.clone();
        for k in &keys {
            let next = sub.get_attr(k).ok().filter(|x| !x.is_undefined());
            match next {
                Some(x) => sub = x,
                None if skip => continue 'items,
                None => {
                    return Err(invalid(format!(
                        "could not find '{k}' key in iterated item '{}'",
                        py_str(&item)
                    )))
                }
            }
        }
        if sub.kind() != ValueKind::Seq {
            return Err(invalid(format!(
                "the key {} should point to a list, got '{}'",
                keys.last().map(String::as_str).unwrap_or_default(),
                py_str(&sub)
            )));
        }
        for s in items(&sub)? {
            out.push(Value::from(vec![item.clone(), s]));
        }
    }
    Ok(Value::from(out))
}

/// Ansible's `strftime(format, second=None, utc=False)`: the time (now, or epoch `second`)
/// formatted with C's `strftime` specifiers, in the process's time zone (UTC in a container
/// without `TZ`; other zones are not read) or in UTC.
pub fn strftime(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("strftime", &["second", "utc"], 2)?;
    let fmt = py_str(defined(&v)?);
    let secs = match args.get(0, "second").filter(|s| !s.is_none()) {
        Some(s) => py_str(&s)
            .trim()
            .parse::<f64>()
            .map_err(|_| invalid(format!("Invalid value for epoch value ({})", py_str(&s))))?,
        None => chrono::Utc::now().timestamp() as f64,
    };
    let t = chrono::DateTime::from_timestamp(secs.floor() as i64, 0)
        .ok_or_else(|| invalid(format!("Invalid value for epoch value ({secs})")))?;
    // Only the specifiers C and chrono agree on are accepted.
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c == '%' {
            match chars.next() {
                Some(
                    'a' | 'A' | 'b' | 'B' | 'd' | 'H' | 'I' | 'j' | 'm' | 'M' | 'p' | 'S' | 'y'
                    | 'Y' | 'e' | 'F' | 'T' | 'D' | 'R' | 'u' | 'w' | 's' | 'n' | 't' | '%',
                ) => {}
                other => {
                    return Err(invalid(format!(
                        "strftime: the specifier %{} is not supported by bosun",
                        other.map(String::from).unwrap_or_default()
                    )))
                }
            }
        }
    }
    Ok(Value::from(t.format(&fmt).to_string()))
}

/// kubernetes.core's `k8s_config_resource_name`: a ConfigMap's or Secret's name with the
/// hash kubectl appends (`name-<10 chars>`), from the same JSON bytes.
pub fn k8s_config_resource_name(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    use sha2::Digest;
    args.check("k8s_config_resource_name", &[], 0)?;
    let name = v
        .get_attr("metadata")
        .and_then(|m| m.get_attr("name"))
        .ok()
        .filter(|n| !n.is_undefined() && !n.is_none())
        .ok_or_else(|| {
            invalid("resource must have a metadata.name key to generate a resource name")
        })?;
    let kind = py_str(&v.get_attr("kind")?);
    let keys: &[&str] = match kind.as_str() {
        "ConfigMap" => &["data", "kind", "name"],
        "Secret" => &["data", "kind", "name", "type"],
        _ => {
            return Err(invalid(format!(
                "k8s_config_resource_name: kind {kind} has no hash"
            )))
        }
    };
    let field = |k: &str| -> Result<Value, Error> {
        let x = if k == "name" {
            name.clone()
        } else {
            v.get_attr(k)?
        };
        Ok(if x.is_undefined() {
            Value::from("")
        } else {
            sort_maps(&x)?
        })
    };
    let ordered = Value::from_pairs(
        keys.iter()
            .map(|k| Ok((Value::from(*k), field(k)?)))
            .collect::<Result<Vec<_>, Error>>()?,
    );
    let json = dumps(
        &ordered,
        &JsonOpts {
            item_sep: ",".into(),
            key_sep: ":".into(),
            ..Default::default()
        },
    )
    .map_err(invalid)?;
    let hex = hex::encode(sha2::Sha256::digest(json.as_bytes()));
    let hash: String = hex[..10]
        .chars()
        .map(|c| match c {
            '0' => 'g',
            '1' => 'h',
            '3' => 'k',
            'a' => 'm',
            'e' => 't',
            c => c,
        })
        .collect();
    Ok(Value::from(format!("{}-{hash}", py_str(&name))))
}

/// Maps with their keys sorted, at every level (kubernetes.core's `sorted_dict`; lists
/// are kept as they are, their maps included).
fn sort_maps(v: &Value) -> Result<Value, Error> {
    if v.kind() != ValueKind::Map {
        return Ok(v.clone());
    }
    let mut keys: Vec<Value> = v.try_iter()?.collect();
    keys.sort_by_key(py_str);
    Ok(Value::from_pairs(
        keys.into_iter()
            .map(|k| Ok((k.clone(), sort_maps(&v.get_item(&k)?)?)))
            .collect::<Result<Vec<_>, Error>>()?,
    ))
}

/// Jinja2's `urlencode`: a string (or any non-iterable) percent-encoded with `/` kept; a
/// dict or a list of pairs as a query string (`k=v&...`, spaces as `+`, `/` encoded).
pub fn urlencode(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("urlencode", &[], 0)?;
    let quote = |x: &Value, for_qs: bool| -> String {
        let s = py_str(x);
        let mut out = String::new();
        for b in s.bytes() {
            if b.is_ascii_alphanumeric() || b"_.-~".contains(&b) || (!for_qs && b == b'/') {
                out.push(b as char);
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
        if for_qs {
            out = out.replace("%20", "+");
        }
        out
    };
    let pairs: Vec<(Value, Value)> = match defined(&v)?.kind() {
        ValueKind::Map => v
            .try_iter()?
            .map(|k| Ok((k.clone(), v.get_item(&k)?)))
            .collect::<Result<_, Error>>()?,
        ValueKind::Seq | ValueKind::Iterable => v
            .try_iter()?
            .map(|p| {
                let kv = items(&p)?;
                match kv.as_slice() {
                    [k, x] => Ok((k.clone(), x.clone())),
                    _ => Err(invalid("urlencode: a list must hold (key, value) pairs")),
                }
            })
            .collect::<Result<_, Error>>()?,
        _ => return Ok(Value::from(quote(&v, false))),
    };
    Ok(Value::from(
        pairs
            .iter()
            .map(|(k, x)| format!("{}={}", quote(k, true), quote(x, true)))
            .collect::<Vec<_>>()
            .join("&"),
    ))
}
