//! Python's dict semantics for the mappings PyYAML builds: keys compare by Python equality
//! (`1 == 1.0 == True`, aware datetimes as instants), an equal key keeps its first position
//! and object and takes the new value, lists and dicts cannot be keys.

use std::collections::HashMap;

use crate::value::{Node, Yaml};

/// A Python dict being filled: an equal key keeps its first position and object and takes
/// the new value.
#[derive(Default)]
pub(super) struct PyDict {
    pub(super) pairs: Vec<(Node, Node)>,
    index: HashMap<PyKey, usize>,
}

impl PyDict {
    pub(super) fn set(&mut self, hash: Option<PyKey>, key: Node, value: Node) {
        match hash {
            Some(h) => match self.index.get(&h) {
                Some(&i) => self.pairs[i].1 = value,
                None => {
                    self.index.insert(h, self.pairs.len());
                    self.pairs.push((key, value));
                }
            },
            // NaN: hashable but never equal to another NaN.
            None => self.pairs.push((key, value)),
        }
    }
}

/// Python key equality: numbers compare by value across bool, int and float; dates and
/// datetimes by value (aware ones as instants); str and bytes by content.
#[derive(PartialEq, Eq, Hash)]
pub(super) enum PyKey {
    None,
    Int(String),
    Float(u64),
    Str(String),
    Bytes(Vec<u8>),
    Date(i32, u8, u8),
    Naive(i32, u8, u8, u8, u8, u8, u32),
    Aware(i128),
}

/// `Some(None)` means hashable but never equal (NaN); `None` means unhashable.
pub(super) fn py_key(v: &Yaml) -> Option<Option<PyKey>> {
    Some(Some(match v {
        Yaml::Null => PyKey::None,
        Yaml::Bool(b) => PyKey::Int(if *b { "1" } else { "0" }.into()),
        Yaml::Int(i) => PyKey::Int(i.to_string()),
        Yaml::BigInt(s) => PyKey::Int(s.clone()),
        Yaml::Float(f) if f.is_nan() => return Some(None),
        Yaml::Float(f) if f.is_finite() && f.fract() == 0.0 => {
            let s = format!("{f:.0}");
            PyKey::Int(if s == "-0" { "0".into() } else { s })
        }
        Yaml::Float(f) => PyKey::Float(f.to_bits()),
        Yaml::Str(s) => PyKey::Str(s.clone()),
        Yaml::Binary(b) => PyKey::Bytes(b.clone()),
        Yaml::Timestamp(t) => match t.time {
            None => PyKey::Date(t.year, t.month, t.day),
            Some(tt) => match tt.offset_minutes {
                None => PyKey::Naive(
                    t.year,
                    t.month,
                    t.day,
                    tt.hour,
                    tt.minute,
                    tt.second,
                    tt.microsecond,
                ),
                Some(off) => {
                    let days = crate::value::days_from_civil(t.year, t.month, t.day);
                    let secs = days * 86_400
                        + i128::from(tt.hour) * 3600
                        + i128::from(tt.minute) * 60
                        + i128::from(tt.second)
                        - i128::from(off) * 60;
                    PyKey::Aware(secs * 1_000_000 + i128::from(tt.microsecond))
                }
            },
        },
        Yaml::Seq(_) | Yaml::Map(_) => return None,
    }))
}
