//! [`Entries`]: the contents of a Go map, in key order.
//!
//! Templates read maps far more than they write them, and most maps are small (a
//! container's `resources`, an `image`, the top-level `.` with its seven fields). Those
//! live in a sorted vector: built in one allocation from sorted input, searched without
//! walking B-tree nodes, freed at once. A map that grows past [`SMALL_MAX`] entries moves to
//! a B-tree, so building a large map key by key (`set` in a loop) stays `O(n log n)`.
use std::collections::{btree_map, BTreeMap};

use super::{Str, Value};

/// The most entries a map keeps in a sorted vector.
pub const SMALL_MAX: usize = 32;

#[derive(Clone)]
pub enum Entries {
    /// Sorted by key, no duplicates.
    Small(Vec<(Str, Value)>),
    Large(BTreeMap<Str, Value>),
}

impl Default for Entries {
    fn default() -> Entries {
        Entries::Small(Vec::new())
    }
}

impl From<BTreeMap<Str, Value>> for Entries {
    fn from(m: BTreeMap<Str, Value>) -> Entries {
        if m.len() <= SMALL_MAX {
            Entries::Small(m.into_iter().collect())
        } else {
            Entries::Large(m)
        }
    }
}

impl Entries {
    /// Entries from pairs already sorted by key without duplicates (the iteration of
    /// another ordered map).
    pub fn from_sorted(pairs: Vec<(Str, Value)>) -> Entries {
        debug_assert!(pairs.windows(2).all(|w| w[0].0 < w[1].0));
        if pairs.len() <= SMALL_MAX {
            Entries::Small(pairs)
        } else {
            Entries::Large(pairs.into_iter().collect())
        }
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            // A few entries: comparing lengths and first bytes skips most keys without
            // a call to memcmp.
            Entries::Small(v) => v
                .iter()
                .find(|(k, _)| {
                    k.len() == key.len()
                        && k.as_bytes().first() == key.as_bytes().first()
                        && **k == *key
                })
                .map(|(_, x)| x),
            Entries::Large(m) => m.get(key),
        }
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    pub fn insert(&mut self, key: Str, value: Value) {
        match self {
            Entries::Small(v) => match v.binary_search_by(|(k, _)| k.as_ref().cmp(&key)) {
                Ok(i) => v[i].1 = value,
                Err(i) => {
                    if v.len() < SMALL_MAX {
                        v.insert(i, (key, value));
                    } else {
                        let mut m: BTreeMap<Str, Value> = std::mem::take(v).into_iter().collect();
                        m.insert(key, value);
                        *self = Entries::Large(m);
                    }
                }
            },
            Entries::Large(m) => {
                m.insert(key, value);
            }
        }
    }

    pub fn remove(&mut self, key: &str) -> Option<Value> {
        match self {
            Entries::Small(v) => {
                let i = v.iter().position(|(k, _)| **k == *key)?;
                Some(v.remove(i).1)
            }
            Entries::Large(m) => m.remove(key),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Entries::Small(v) => v.len(),
            Entries::Large(m) => m.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entries in key order.
    pub fn iter(&self) -> Iter<'_> {
        match self {
            Entries::Small(v) => Iter::Small(v.iter()),
            Entries::Large(m) => Iter::Large(m.iter()),
        }
    }

    pub fn keys(&self) -> impl Iterator<Item = &Str> {
        self.iter().map(|(k, _)| k)
    }
}

/// The entries of a map in key order.
pub enum Iter<'a> {
    Small(std::slice::Iter<'a, (Str, Value)>),
    Large(btree_map::Iter<'a, Str, Value>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a Str, &'a Value);
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Small(i) => i.next().map(|(k, v)| (k, v)),
            Iter::Large(i) => i.next(),
        }
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Iter::Small(i) => i.size_hint(),
            Iter::Large(i) => i.size_hint(),
        }
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl<'a> IntoIterator for &'a Entries {
    type Item = (&'a Str, &'a Value);
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(e: &Entries) -> Vec<String> {
        e.keys().map(|k| k.to_string()).collect()
    }

    /// Inserting, replacing and removing keep the same order and contents as a B-tree, on
    /// both sides of the switch to one.
    #[test]
    fn behaves_as_an_ordered_map_across_the_switch() {
        let mut e = Entries::default();
        let mut want: BTreeMap<Str, Value> = BTreeMap::new();
        // A scrambled order of 3 * SMALL_MAX keys, each inserted twice (the second replaces).
        let n = 3 * SMALL_MAX as u64;
        for round in 0..2 {
            for i in 0..n {
                let k = Str::from(format!("k{}", (i * 37) % n).as_str());
                e.insert(k.clone(), Value::Int(round));
                want.insert(k, Value::Int(round));
                assert_eq!(e.len(), want.len());
                assert_eq!(
                    keys(&e),
                    want.keys().map(|k| k.to_string()).collect::<Vec<_>>()
                );
            }
        }
        assert!(matches!(e, Entries::Large(_)));
        for i in (0..n).step_by(3) {
            let k = format!("k{i}");
            assert!(e.remove(&k).is_some());
            want.remove(k.as_str());
        }
        assert_eq!(
            keys(&e),
            want.keys().map(|k| k.to_string()).collect::<Vec<_>>()
        );
        assert!(e.get("k1").is_some() && e.get("k0").is_none() && e.get("zz").is_none());

        let mut small = Entries::default();
        for k in ["b", "a", "c", "a"] {
            small.insert(Str::from(k), Value::Nil);
        }
        assert_eq!(keys(&small), ["a", "b", "c"]);
        assert!(small.remove("b").is_some() && small.remove("b").is_none());
        assert_eq!(keys(&small), ["a", "c"]);
        assert!(matches!(small, Entries::Small(_)));
    }
}
