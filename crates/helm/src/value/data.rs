//! [`Data`]: a plain, thread-safe value tree for what crosses the engine's boundary —
//! chart defaults kept in a loaded chart, user values in a render request.
//!
//! Numbers keep Go's two kinds: a custom resource's spec arrives from the apiserver with
//! integral numbers as `int64` and the rest as `float64`; `--set` yields `int64`; a
//! values file read as Helm reads it yields only `float64`. They print differently, so
//! the tree keeps [`Data::Int`] (int64) and [`Data::Float`] (float64) apart.
use std::collections::BTreeMap;

use super::{json, Entries, ListKind, Map, MapKind, Str, Value};

#[derive(Clone, Debug, PartialEq, Default)]
pub enum Data {
    #[default]
    Null,
    Bool(bool),
    /// Go `int64`.
    Int(i64),
    /// Go `float64`.
    Float(f64),
    String(String),
    List(Vec<Data>),
    Map(BTreeMap<String, Data>),
}

impl Data {
    /// Parses JSON the way the apiserver hands a custom resource to an operator:
    /// integral numbers become `int64`, others `float64`.
    pub fn from_json_k8s(text: &str) -> Result<Data, json::JsonError> {
        json::decode(text, json::Numbers::Int64OrFloat)
    }

    /// Parses JSON the way Helm reads values (`encoding/json` into `interface{}`): every
    /// number is `float64`.
    pub fn from_json_float(text: &str) -> Result<Data, json::JsonError> {
        json::decode(text, json::Numbers::Float)
    }

    /// Converts into a runtime value; maps become `map[string]interface {}`.
    pub fn to_value(&self) -> Value {
        match self {
            Data::Null => Value::Nil,
            Data::Bool(b) => Value::Bool(*b),
            Data::Int(i) => Value::Int64(*i),
            Data::Float(f) => Value::Float(*f),
            Data::String(s) => Value::Str(Str::from(s.as_str())),
            Data::List(l) => Value::list(ListKind::Iface, l.iter().map(Data::to_value).collect()),
            // A BTreeMap iterates in key order: the entries need no sorting.
            Data::Map(m) => Value::Map(Map::with_entries(
                MapKind::Iface,
                Entries::from_sorted(
                    m.iter()
                        .map(|(k, v)| (Str::from(k.as_str()), v.to_value()))
                        .collect(),
                ),
            )),
        }
    }

    /// Converts a runtime value back; Go types without a JSON-like shape become strings
    /// of their printed form.
    pub fn from_value(v: &Value) -> Data {
        from_value(v, 0)
    }

    pub fn as_map(&self) -> Option<&BTreeMap<String, Data>> {
        match self {
            Data::Map(m) => Some(m),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Data::String(s) => Some(s),
            _ => None,
        }
    }

    /// `path` is a dotted path into nested maps.
    pub fn lookup(&self, path: &str) -> Option<&Data> {
        let mut cur = self;
        for part in path.split('.') {
            cur = cur.as_map()?.get(part)?;
        }
        Some(cur)
    }
}

fn from_value(v: &Value, depth: usize) -> Data {
    if depth > 1_000 {
        return Data::Null;
    }
    match v {
        Value::Nil => Data::Null,
        Value::Bool(b) => Data::Bool(*b),
        Value::Int(i) | Value::Int64(i) => Data::Int(*i),
        Value::Uint64(u) => i64::try_from(*u).map_or(Data::Float(*u as f64), Data::Int),
        Value::Float(f) => Data::Float(*f),
        Value::Str(s) => Data::String(String::from(&**s)),
        Value::Bytes(b) => Data::String(String::from_utf8_lossy(b).into_owned()),
        Value::List(l) => Data::List(l.items.iter().map(|x| from_value(x, depth + 1)).collect()),
        Value::Map(m) => Data::Map(
            m.entries()
                .iter()
                .map(|(k, x)| (String::from(&**k), from_value(x, depth + 1)))
                .collect(),
        ),
        Value::Obj(_) => Data::String(super::format::sprint_value(v)),
    }
}
