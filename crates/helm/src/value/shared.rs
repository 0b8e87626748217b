//! [`Shared`]: a [`Data`] tree whose strings and keys are already shared strings.
//!
//! Every render turns the chart's defaults into fresh values (templates may change them
//! with `set`, as Go's maps are mutable), and copying each string and key of a large
//! values file was the largest source of allocations left in a render. The defaults are
//! converted once into this form instead: a render's values then take the strings by
//! reference count, and only the maps and lists themselves are new.
use std::sync::OnceLock;

use super::{Data, Entries, ListKind, Map, MapKind, Str, Value};

/// A value tree with shared strings, safe to share between threads.
#[derive(Debug)]
pub enum Shared {
    Null,
    Bool(bool),
    /// Go `int64`.
    Int(i64),
    /// Go `float64`.
    Float(f64),
    Str(Str),
    List(Box<[Shared]>),
    /// Sorted by key, no duplicates (a `Data` map's order).
    Map(Box<[(Str, Shared)]>),
}

impl From<&Data> for Shared {
    fn from(d: &Data) -> Shared {
        match d {
            Data::Null => Shared::Null,
            Data::Bool(b) => Shared::Bool(*b),
            Data::Int(i) => Shared::Int(*i),
            Data::Float(f) => Shared::Float(*f),
            Data::String(s) => Shared::Str(Str::from(s.as_str())),
            Data::List(l) => Shared::List(l.iter().map(Shared::from).collect()),
            Data::Map(m) => Shared::Map(
                m.iter()
                    .map(|(k, v)| (Str::from(k.as_str()), Shared::from(v)))
                    .collect(),
            ),
        }
    }
}

impl Shared {
    /// The value [`Data::to_value`] makes of the same tree.
    pub fn to_value(&self) -> Value {
        self.convert(false)
    }

    /// [`to_value`](Self::to_value) with the null entries of every map left out,
    /// recursively (lists are kept as they are): Helm's `trimNilValues` of the result.
    pub fn to_value_without_nils(&self) -> Value {
        self.convert(true)
    }

    fn convert(&self, trim: bool) -> Value {
        match self {
            Shared::Null => Value::Nil,
            Shared::Bool(b) => Value::Bool(*b),
            Shared::Int(i) => Value::Int64(*i),
            Shared::Float(f) => Value::Float(*f),
            Shared::Str(s) => Value::Str(s.clone()),
            Shared::List(l) => Value::list(
                ListKind::Iface,
                l.iter().map(|x| x.convert(false)).collect(),
            ),
            Shared::Map(m) => Value::Map(Map::with_entries(
                MapKind::Iface,
                Entries::from_sorted(
                    m.iter()
                        .filter(|(_, x)| !(trim && matches!(x, Shared::Null)))
                        .map(|(k, x)| (k.clone(), x.convert(trim)))
                        .collect(),
                ),
            )),
        }
    }

    /// The entries of a map (none for another kind).
    pub fn entries(&self) -> &[(Str, Shared)] {
        match self {
            Shared::Map(m) => m,
            _ => &[],
        }
    }
}

/// A chart's default values as loaded, with their [`Shared`] form made on first use.
#[derive(Debug)]
pub struct Defaults {
    data: Data,
    shared: OnceLock<Shared>,
}

impl Defaults {
    pub fn new(data: Data) -> Defaults {
        Defaults {
            data,
            shared: OnceLock::new(),
        }
    }

    pub fn data(&self) -> &Data {
        &self.data
    }

    pub fn shared(&self) -> &Shared {
        self.shared.get_or_init(|| Shared::from(&self.data))
    }
}

impl std::ops::Deref for Defaults {
    type Target = Data;
    fn deref(&self) -> &Data {
        &self.data
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_as_data_does() {
        let d = Data::from_json_k8s(
            r#"{"a": null, "b": {"c": null, "d": [null, {"e": null}, 1.5, 2], "f": {"g": null, "h": "x"}},
                "i": "x", "j": [], "k": {}, "l": true}"#,
        )
        .expect("json");
        let s = Shared::from(&d);
        assert!(s.to_value().deep_equal(&d.to_value()));
        let Value::Map(m) = d.to_value() else {
            panic!("not a map")
        };
        let trimmed = Value::Map(crate::chart::coalesce::trim_nils(&m));
        assert!(s.to_value_without_nils().deep_equal(&trimmed));
    }
}
