//! `from_yaml`, `from_yaml_all`, `to_yaml` and `to_nice_yaml`, through bosun-yaml's PyYAML
//! side (SafeLoader reading, SafeRepresenter + libyaml emitter writing: byte for byte what
//! Ansible writes, which matters to roles that hash the text).
use minijinja::value::{Value, ValueKind};
use minijinja::{Error, State};

use super::args::{defined, invalid, Args};
use super::filters::text_result;
use super::value::{is_float, py_str};
use crate::yaml::{self, Node, Yaml};

/// A YAML node as a template value.
pub fn node_value(n: &Node) -> Value {
    match &n.value {
        Yaml::Null => Value::from(()),
        Yaml::Bool(b) => Value::from(*b),
        Yaml::Int(i) => Value::from(*i),
        Yaml::BigInt(d) => d
            .parse::<i128>()
            .map(Value::from)
            .unwrap_or_else(|_| Value::from(d.parse::<f64>().unwrap_or(f64::NAN))),
        Yaml::Float(f) => Value::from(*f),
        Yaml::Str(s) => Value::from(s.as_str()),
        Yaml::Binary(b) => Value::from_bytes(b.clone()),
        Yaml::Timestamp(t) => Value::from(t.to_string()),
        Yaml::Seq(items) => items.iter().map(node_value).collect(),
        Yaml::Map(pairs) => {
            Value::from_pairs(pairs.iter().map(|(k, v)| (node_value(k), node_value(v))))
        }
    }
}

/// A template value as a YAML tree (for dumping).
pub fn value_yaml(v: &Value, depth: usize) -> Result<Yaml, Error> {
    if depth > 500 {
        return Err(invalid("value nests too deep to dump"));
    }
    Ok(match v.kind() {
        ValueKind::Undefined => {
            return Err(defined(v).err().unwrap_or_else(|| invalid("undefined")))
        }
        ValueKind::None => Yaml::Null,
        ValueKind::Bool => Yaml::Bool(v.is_true()),
        ValueKind::Number if is_float(v) => {
            Yaml::Float(f64::try_from(v.clone()).unwrap_or(f64::NAN))
        }
        ValueKind::Number => match v.as_i64() {
            Some(i) => Yaml::Int(i),
            None => Yaml::BigInt(v.to_string()),
        },
        ValueKind::String => Yaml::Str(v.as_str().unwrap_or_default().to_string()),
        ValueKind::Bytes => Yaml::Binary(v.as_bytes().unwrap_or_default().to_vec()),
        ValueKind::Seq | ValueKind::Iterable => Yaml::Seq(
            v.try_iter()?
                .map(|x| value_yaml(&x, depth + 1).map(Node::new))
                .collect::<Result<_, _>>()?,
        ),
        ValueKind::Map => {
            let mut pairs = Vec::new();
            for k in v.try_iter()? {
                let item = v.get_item(&k)?;
                pairs.push((
                    Node::new(value_yaml(&k, depth + 1)?),
                    Node::new(value_yaml(&item, depth + 1)?),
                ));
            }
            Yaml::Map(pairs)
        }
        _ => Yaml::Str(py_str(v)),
    })
}

fn parse(v: &Value) -> Result<Vec<Node>, Error> {
    let s = py_str(defined(v)?);
    yaml::load_all(&s).map_err(|e| invalid(format!("from_yaml: {}", e.msg)))
}

pub fn from_yaml(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("from_yaml", &[], 0)?;
    // Ansible passes non-strings through unchanged.
    if v.as_str().is_none() {
        return Ok(v);
    }
    let docs = parse(&v)?;
    match docs.len() {
        0 => Ok(Value::from(())),
        1 => Ok(node_value(&docs[0])),
        _ => Err(invalid(
            "from_yaml: expected a single document in the stream",
        )),
    }
}

pub fn from_yaml_all(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("from_yaml_all", &[], 0)?;
    if v.as_str().is_none() {
        return Ok(v);
    }
    Ok(Value::from(
        parse(&v)?.iter().map(node_value).collect::<Vec<_>>(),
    ))
}

fn dump(
    v: &Value,
    args: &Args,
    mut o: bosun_yaml::pyyaml::DumpOptions,
    what: &str,
) -> Result<Value, Error> {
    args.check(
        what,
        &[
            "indent",
            "width",
            "default_flow_style",
            "sort_keys",
            "allow_unicode",
            "explicit_start",
            "explicit_end",
        ],
        0,
    )?;
    let num = |k: &str| {
        args.kw(k)
            .and_then(|x| x.as_i64())
            .map(|n| n.max(0) as usize)
    };
    if let Some(i) = num("indent") {
        o.indent = i;
    }
    if let Some(w) = num("width") {
        o.width = w;
    }
    if let Some(f) = args.kw("default_flow_style") {
        o.default_flow_style = if f.is_none() { None } else { Some(f.is_true()) };
    }
    let flag = |k: &str, d: bool| args.kw(k).map_or(d, |x| x.is_true());
    o.sort_keys = flag("sort_keys", o.sort_keys);
    o.allow_unicode = flag("allow_unicode", o.allow_unicode);
    o.explicit_start = flag("explicit_start", o.explicit_start);
    o.explicit_end = flag("explicit_end", o.explicit_end);
    Ok(text_result(bosun_yaml::pyyaml::dump(
        &value_yaml(defined(v)?, 0)?,
        &o,
    )))
}

pub fn to_yaml(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    dump(
        &v,
        &args,
        bosun_yaml::pyyaml::DumpOptions::to_yaml(),
        "to_yaml",
    )
}

pub fn to_nice_yaml(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    dump(
        &v,
        &args,
        bosun_yaml::pyyaml::DumpOptions::to_nice_yaml(),
        "to_nice_yaml",
    )
}
