//! `from_yaml` and `from_yaml_all` (PyYAML's SafeLoader rules, through `crate::yaml`).
use minijinja::value::Value;
use minijinja::{Error, State};

use super::args::{defined, invalid, Args};
use super::value::py_str;
use crate::yaml::{self, Node, Yaml};

/// A YAML node as a template value (`!unsafe` strings stay never-templated).
pub fn node_value(n: &Node) -> Value {
    match &n.value {
        Yaml::Null => Value::from(()),
        Yaml::Bool(b) => Value::from(*b),
        Yaml::Int(i) => Value::from(*i),
        Yaml::Float(f) => Value::from(*f),
        Yaml::Str(s) => Value::from(s.as_str()),
        Yaml::Unsafe(s) => Value::from_safe_string(s.clone()),
        Yaml::Seq(items) => items.iter().map(node_value).collect(),
        Yaml::Map(pairs) => {
            Value::from_pairs(pairs.iter().map(|(k, v)| (node_value(k), node_value(v))))
        }
    }
}

fn parse(v: &Value) -> Result<Vec<Node>, Error> {
    let s = py_str(defined(v)?);
    yaml::load_all(&s).map_err(|e| invalid(format!("from_yaml: {e}")))
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
