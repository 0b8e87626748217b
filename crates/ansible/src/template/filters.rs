//! Ansible's filters that minijinja lacks or implements differently. Names registered here
//! are the supported set; `SUPPORTED` is what load-time validation accepts.
use minijinja::value::{Rest, Value, ValueKind, ValueOrKwargs};
use minijinja::{Environment, Error, State};

use super::args::{defined, invalid, split_first, Args};
use super::value::{is_float, py_str};
use super::{collections, itertools, pyjson, text, urlsplit, yamlfilters};

/// minijinja built-ins whose behaviour matches Jinja2's closely enough to keep.
const BUILTIN: &[&str] = &[
    "abs",
    "attr",
    "batch",
    "capitalize",
    "count",
    "d",
    "default",
    "dictsort",
    "first",
    "groupby",
    "indent",
    "items",
    "last",
    "length",
    "list",
    "lower",
    "map",
    "max",
    "min",
    "reject",
    "rejectattr",
    "replace",
    "reverse",
    "round",
    "select",
    "selectattr",
    "slice",
    "sort",
    "sum",
    "title",
    "trim",
    "unique",
    "upper",
    "format",
    "safe",
    "escape",
    "e",
    "tojson",
    "wordcount",
    "center",
    "truncate",
];

/// Every filter a role may use.
pub fn supported(name: &str) -> bool {
    BUILTIN.contains(&name) || OWN.iter().any(|(n, _)| *n == name)
}

type Filter = fn(&State, Value, Args) -> Result<Value, Error>;

const OWN: &[(&str, Filter)] = &[
    ("bool", bool_filter),
    ("int", int_filter),
    ("float", float_filter),
    ("string", string_filter),
    ("join", join_filter),
    ("ternary", ternary),
    ("mandatory", mandatory),
    ("type_debug", type_debug),
    ("split", text::split),
    ("b64encode", text::b64encode),
    ("b64decode", text::b64decode),
    ("hash", text::hash),
    ("checksum", text::sha1),
    ("sha1", text::sha1),
    ("md5", text::md5),
    ("regex_replace", text::regex_replace),
    ("regex_search", text::regex_search),
    ("regex_findall", text::regex_findall),
    ("regex_escape", text::regex_escape),
    ("quote", text::quote),
    ("basename", text::basename),
    ("dirname", text::dirname),
    ("path_join", text::path_join),
    ("to_json", to_json),
    ("to_nice_json", to_nice_json),
    ("from_json", from_json),
    ("to_yaml", yamlfilters::to_yaml),
    ("to_nice_yaml", yamlfilters::to_nice_yaml),
    ("from_yaml", yamlfilters::from_yaml),
    ("from_yaml_all", yamlfilters::from_yaml_all),
    ("combine", collections::combine),
    ("dict2items", collections::dict2items),
    ("items2dict", collections::items2dict),
    ("flatten", collections::flatten),
    ("difference", collections::difference),
    ("intersect", collections::intersect),
    ("union", collections::union),
    ("symmetric_difference", collections::symmetric_difference),
    ("zip", collections::zip),
    ("extract", collections::extract),
    ("json_query", collections::json_query),
    ("dict", collections::dict_filter),
    ("urlencode", itertools::urlencode),
    ("product", itertools::product),
    ("zip_longest", itertools::zip_longest),
    ("subelements", itertools::subelements),
    ("strftime", itertools::strftime),
    ("urlsplit", urlsplit::urlsplit),
    (
        "k8s_config_resource_name",
        itertools::k8s_config_resource_name,
    ),
];

pub fn register(env: &mut Environment<'static>) {
    for (name, f) in OWN {
        let f = *f;
        env.add_filter(*name, move |state: &State, rest: Rest<ValueOrKwargs>| {
            let (v, args) = split_first(rest.0.into_iter().map(Value::from).collect());
            f(state, v, args)
        });
    }
    env.add_function("range", collections::range);
    env.add_function("dict", collections::dict_fn);
}

/// Marks text produced on purpose (Ansible's `NativeJinjaText`): never read back as a literal.
pub fn text_result(s: String) -> Value {
    Value::from_safe_string(s)
}

/// Ansible's `bool` filter: True for `yes`, `on`, `1`, `true` (any case) and 1.
pub fn to_bool(v: &Value) -> bool {
    match v.kind() {
        ValueKind::Bool => v.is_true(),
        ValueKind::String => matches!(
            v.as_str().unwrap_or_default().to_lowercase().as_str(),
            "yes" | "on" | "1" | "true"
        ),
        ValueKind::Number => f64::try_from(v.clone()).is_ok_and(|f| f == 1.0),
        _ => false,
    }
}

fn bool_filter(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("bool", &[], 0)?;
    // Ansible's filter passes None through (it renders as "").
    if v.is_none() {
        return Ok(v);
    }
    Ok(Value::from(to_bool(defined(&v)?)))
}

fn int_filter(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("int", &["default", "base"], 2)?;
    let default = args.get(0, "default").unwrap_or(Value::from(0));
    let base = args.get(1, "base").and_then(|b| b.as_i64()).unwrap_or(10);
    Ok(match defined(&v)?.kind() {
        ValueKind::Bool => Value::from(i64::from(v.is_true())),
        ValueKind::Number if v.is_integer() => v,
        ValueKind::Number => {
            let f = f64::try_from(v).unwrap_or(0.0);
            if f.is_finite() {
                Value::from(f.trunc() as i64)
            } else {
                default
            }
        }
        ValueKind::String => {
            let s = v.as_str().unwrap_or_default().trim().replace('_', "");
            let (neg, digits) = match s.strip_prefix('-') {
                Some(d) => (true, d.to_string()),
                None => (false, s.trim_start_matches('+').to_string()),
            };
            let lower = digits.to_lowercase();
            let (radix, body) = match (base, lower.get(..2)) {
                (16, Some("0x")) | (0, Some("0x")) => (16, &lower[2..]),
                (8, Some("0o")) | (0, Some("0o")) => (8, &lower[2..]),
                (2, Some("0b")) | (0, Some("0b")) => (2, &lower[2..]),
                (0, _) => (10, lower.as_str()),
                (b, _) => (b as u32, lower.as_str()),
            };
            match i64::from_str_radix(body, radix) {
                Ok(i) => Value::from(if neg { -i } else { i }),
                Err(_) if base == 10 => match s.parse::<f64>() {
                    Ok(f) if f.is_finite() => Value::from(f.trunc() as i64),
                    _ => default,
                },
                Err(_) => default,
            }
        }
        _ => default,
    })
}

fn float_filter(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("float", &["default"], 1)?;
    let default = args.get(0, "default").unwrap_or(Value::from(0.0));
    Ok(match defined(&v)?.kind() {
        ValueKind::Bool => Value::from(if v.is_true() { 1.0 } else { 0.0 }),
        ValueKind::Number => Value::from(f64::try_from(v).unwrap_or(0.0)),
        ValueKind::String => match v
            .as_str()
            .unwrap_or_default()
            .trim()
            .to_lowercase()
            .as_str()
        {
            "inf" | "infinity" | "+inf" => Value::from(f64::INFINITY),
            "-inf" | "-infinity" => Value::from(f64::NEG_INFINITY),
            "nan" => Value::from(f64::NAN),
            s => s
                .replace('_', "")
                .parse::<f64>()
                .map(Value::from)
                .unwrap_or(default),
        },
        _ => default,
    })
}

fn string_filter(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("string", &[], 0)?;
    Ok(text_result(py_str(defined(&v)?)))
}

fn join_filter(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("join", &["d", "attribute"], 2)?;
    let sep = args.get_str(0, "d", "")?;
    let attr = args.get(1, "attribute");
    let v = defined(&v)?;
    if let Some(s) = v.as_str() {
        return Ok(Value::from(
            s.chars().map(String::from).collect::<Vec<_>>().join(&sep),
        ));
    }
    let mut parts = Vec::new();
    for item in v.try_iter()? {
        let item = match &attr {
            Some(a) => item.get_attr(&py_str(a))?,
            None => item,
        };
        parts.push(py_str(defined(&item)?));
    }
    Ok(Value::from(parts.join(&sep)))
}

fn ternary(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("ternary", &["true_val", "false_val", "none_val"], 3)?;
    let none_val = args.get(2, "none_val");
    if v.is_none() {
        if let Some(n) = none_val.filter(|n| !n.is_none()) {
            return Ok(n);
        }
    }
    let pick = if defined(&v)?.is_true() {
        args.get(0, "true_val")
    } else {
        args.get(1, "false_val")
    };
    Ok(pick.unwrap_or(Value::from(())))
}

fn mandatory(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("mandatory", &["msg"], 1)?;
    if v.is_undefined() {
        let msg = match args.get(0, "msg") {
            Some(m) if !m.is_none() => py_str(&m),
            _ => "Mandatory variable not defined.".to_string(),
        };
        return Err(Error::new(minijinja::ErrorKind::UndefinedError, msg));
    }
    Ok(v)
}

fn type_debug(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("type_debug", &[], 0)?;
    Ok(Value::from(match v.kind() {
        ValueKind::Undefined => "AnsibleUndefined",
        ValueKind::None => "NoneType",
        ValueKind::Bool => "bool",
        ValueKind::Number if is_float(&v) => "float",
        ValueKind::Number => "int",
        ValueKind::String => "str",
        ValueKind::Seq | ValueKind::Iterable => "list",
        ValueKind::Map => "dict",
        _ => "object",
    }))
}

fn json_opts(args: &Args, nice: bool) -> Result<pyjson::JsonOpts, Error> {
    args.check(
        if nice { "to_nice_json" } else { "to_json" },
        &[
            "indent",
            "sort_keys",
            "ensure_ascii",
            "separators",
            "vault_to_text",
            "preprocess_unsafe",
        ],
        0,
    )?;
    let mut o = pyjson::JsonOpts::default();
    let indent = match args.kw("indent") {
        Some(i) if i.is_none() => None,
        Some(i) => Some(i),
        None if nice => Some(Value::from(4)),
        None => None,
    };
    if let Some(i) = indent {
        o.indent = Some(match i.as_i64() {
            Some(n) => " ".repeat(n.max(0) as usize),
            None => py_str(&i),
        });
        o.item_sep = ",".into();
    }
    o.sort_keys = args.kw("sort_keys").map_or(nice, |v| v.is_true());
    o.ensure_ascii = args.kw("ensure_ascii").is_none_or(|v| v.is_true());
    if let Some(seps) = args.kw("separators") {
        let parts: Vec<Value> = seps.try_iter()?.collect();
        if parts.len() != 2 {
            return Err(invalid("separators must be a pair"));
        }
        o.item_sep = py_str(&parts[0]);
        o.key_sep = py_str(&parts[1]);
    }
    Ok(o)
}

fn to_json(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    let o = json_opts(&args, false)?;
    pyjson::dumps(defined(&v)?, &o)
        .map(text_result)
        .map_err(invalid)
}

fn to_nice_json(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    let o = json_opts(&args, true)?;
    pyjson::dumps(defined(&v)?, &o)
        .map(text_result)
        .map_err(invalid)
}

fn from_json(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("from_json", &[], 0)?;
    let s = py_str(defined(&v)?);
    let j: serde_json::Value =
        serde_json::from_str(&s).map_err(|e| invalid(format!("from_json: {e}")))?;
    Ok(super::value::from_json(&j))
}
