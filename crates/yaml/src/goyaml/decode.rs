//! go-yaml v2's decoding into `interface{}`: composed nodes to values with Go's types, Go map
//! semantics (a repeated key replaces the value), merge keys in go-yaml's order (a merge
//! writes into the map being built, so it overrides keys before it and is overridden by keys
//! after it), and go-yaml's alias accounting ("document contains excessive aliasing").

use std::collections::{HashMap, HashSet};

use crate::compose::{RawDoc, RawKind};
use crate::error::ErrorKind;
use crate::value::{Mark, Node, Yaml};
use crate::{Error, MAX_DEPTH};

use super::base64;
use super::resolve::{resolve, Resolved, BINARY, MERGE};

pub(crate) struct Decoder<'a> {
    doc: &'a RawDoc,
    decode_count: usize,
    alias_count: usize,
    alias_depth: usize,
    active_aliases: HashSet<usize>,
    depth: usize,
}

fn fail(kind: ErrorKind, message: String, mark: Mark) -> Error {
    Error::new(kind, format!("yaml: {message}"), Some(mark))
}

/// go-yaml's `allowedAliasRatio`: 99% of decodes may come from aliases in small documents,
/// sliding to 10% for documents of four million decodes.
fn allowed_alias_ratio(decode_count: usize) -> f64 {
    const LOW: f64 = 400_000.0;
    const HIGH: f64 = 4_000_000.0;
    let n = decode_count as f64;
    if n <= LOW {
        0.99
    } else if n >= HIGH {
        0.10
    } else {
        0.99 - 0.89 * ((n - LOW) / (HIGH - LOW))
    }
}

impl<'a> Decoder<'a> {
    pub(crate) fn new(doc: &'a RawDoc) -> Decoder<'a> {
        Decoder {
            doc,
            // go-yaml counts the document node itself.
            decode_count: 1,
            alias_count: 0,
            alias_depth: 0,
            active_aliases: HashSet::new(),
            depth: 0,
        }
    }

    pub(crate) fn decode(&mut self) -> Result<Node, Error> {
        self.unmarshal(self.doc.root)
    }

    fn mark(&self, idx: usize) -> Mark {
        Mark::from_pos(self.doc.nodes[idx].start)
    }

    fn count(&mut self, idx: usize) -> Result<(), Error> {
        self.decode_count += 1;
        if self.alias_depth > 0 {
            self.alias_count += 1;
        }
        if self.alias_count > 100
            && self.decode_count > 1000
            && self.alias_count as f64 / self.decode_count as f64
                > allowed_alias_ratio(self.decode_count)
        {
            return Err(fail(
                ErrorKind::Limit,
                "document contains excessive aliasing".into(),
                self.mark(idx),
            ));
        }
        Ok(())
    }

    fn unmarshal(&mut self, idx: usize) -> Result<Node, Error> {
        self.count(idx)?;
        let mark = self.mark(idx);
        match &self.doc.nodes[idx].kind {
            RawKind::Scalar {
                value,
                tag,
                plain_implicit,
                ..
            } => {
                let value = scalar(value, tag.as_deref(), *plain_implicit)
                    .map_err(|m| fail(ErrorKind::Construct, m, mark))?;
                Ok(Node { value, mark })
            }
            RawKind::Alias { .. } => {
                // An alias hop counts as depth: expansion recurses like nesting does.
                self.enter(mark)?;
                let node = self.alias(idx, |d, target| d.unmarshal(target));
                self.depth -= 1;
                node
            }
            RawKind::Seq { items, .. } => {
                self.enter(mark)?;
                let mut out = Vec::with_capacity(items.len());
                for &item in items {
                    out.push(self.unmarshal(item)?);
                }
                self.depth -= 1;
                Ok(Node {
                    value: Yaml::Seq(out),
                    mark,
                })
            }
            RawKind::Map { .. } => {
                let mut map = GoMap::default();
                self.mapping(idx, &mut map)?;
                Ok(Node {
                    value: Yaml::Map(map.pairs),
                    mark,
                })
            }
        }
    }

    fn enter(&mut self, mark: Mark) -> Result<(), Error> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(fail(
                ErrorKind::Limit,
                format!("exceeded max depth of {MAX_DEPTH}"),
                mark,
            ));
        }
        Ok(())
    }

    /// Follows an alias node, refusing one that is already being followed (a cycle).
    fn alias<T>(
        &mut self,
        idx: usize,
        then: impl FnOnce(&mut Self, usize) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let RawKind::Alias { anchor, target } = &self.doc.nodes[idx].kind else {
            return then(self, idx);
        };
        if !self.active_aliases.insert(idx) {
            return Err(fail(
                ErrorKind::Construct,
                format!("anchor '{anchor}' value contains itself"),
                self.mark(idx),
            ));
        }
        self.alias_depth += 1;
        let result = then(self, *target);
        self.alias_depth -= 1;
        self.active_aliases.remove(&idx);
        result
    }

    /// Decodes mapping `idx` into `out`, which may already hold pairs (a merge target).
    fn mapping(&mut self, idx: usize, out: &mut GoMap) -> Result<(), Error> {
        let RawKind::Map { pairs, .. } = &self.doc.nodes[idx].kind else {
            return Ok(());
        };
        self.enter(self.mark(idx))?;
        for &(k, v) in pairs {
            if self.is_merge(k) {
                self.merge(v, out)?;
                continue;
            }
            let key = self.unmarshal(k)?;
            if matches!(key.value, Yaml::Seq(_) | Yaml::Map(_)) {
                return Err(fail(
                    ErrorKind::Construct,
                    format!("invalid map key: {}", super::json::go_sharp_v(&key.value)),
                    key.mark,
                ));
            }
            let value = self.unmarshal(v)?;
            out.set(key, value);
        }
        self.depth -= 1;
        Ok(())
    }

    fn is_merge(&self, idx: usize) -> bool {
        match &self.doc.nodes[idx].kind {
            RawKind::Scalar {
                value,
                tag,
                plain_implicit,
                ..
            } => value == "<<" && (*plain_implicit || tag.as_deref() == Some(MERGE)),
            _ => false,
        }
    }

    fn merge(&mut self, idx: usize, out: &mut GoMap) -> Result<(), Error> {
        let want_map = |d: &Self| {
            fail(
                ErrorKind::Construct,
                "map merge requires map or sequence of maps as the value".into(),
                d.mark(idx),
            )
        };
        match &self.doc.nodes[idx].kind {
            RawKind::Map { .. } => {
                self.count(idx)?;
                self.mapping(idx, out)
            }
            RawKind::Alias { target, .. } => {
                if !matches!(self.doc.nodes[*target].kind, RawKind::Map { .. }) {
                    return Err(want_map(self));
                }
                self.count(idx)?;
                self.alias(idx, |d, target| {
                    d.count(target)?;
                    d.mapping(target, out)
                })
            }
            RawKind::Seq { items, .. } => {
                for &item in items.iter().rev() {
                    match &self.doc.nodes[item].kind {
                        RawKind::Alias { target, .. } => {
                            if !matches!(self.doc.nodes[*target].kind, RawKind::Map { .. }) {
                                return Err(want_map(self));
                            }
                            self.count(item)?;
                            self.alias(item, |d, target| {
                                d.count(target)?;
                                d.mapping(target, out)
                            })?;
                        }
                        RawKind::Map { .. } => {
                            self.count(item)?;
                            self.mapping(item, out)?;
                        }
                        _ => return Err(want_map(self)),
                    }
                }
                Ok(())
            }
            RawKind::Scalar { .. } => Err(want_map(self)),
        }
    }
}

/// A Go `map[interface{}]interface{}` being filled, keeping first-insertion order.
#[derive(Default)]
struct GoMap {
    pairs: Vec<(Node, Node)>,
    index: HashMap<GoKey, usize>,
}

/// Identity of a Go `interface{}` key: dynamic type and value. NaN has none (never equal).
#[derive(PartialEq, Eq, Hash)]
enum GoKey {
    Null,
    Bool(bool),
    Int(i64),
    Uint(String),
    Float(u64),
    Str(Vec<u8>),
}

fn go_key(v: &Yaml) -> Option<GoKey> {
    Some(match v {
        Yaml::Null => GoKey::Null,
        Yaml::Bool(b) => GoKey::Bool(*b),
        Yaml::Int(i) => GoKey::Int(*i),
        Yaml::BigInt(s) => GoKey::Uint(s.clone()),
        Yaml::Float(f) if f.is_nan() => return None,
        // +0 and -0 are equal keys.
        Yaml::Float(f) => GoKey::Float(if *f == 0.0 { 0 } else { f.to_bits() }),
        Yaml::Str(s) => GoKey::Str(s.as_bytes().to_vec()),
        Yaml::Binary(b) => GoKey::Str(b.clone()),
        Yaml::Timestamp(_) | Yaml::Seq(_) | Yaml::Map(_) => return None,
    })
}

impl GoMap {
    /// Go map assignment: an equal key takes the new value in place.
    fn set(&mut self, key: Node, value: Node) {
        match go_key(&key.value) {
            Some(k) => match self.index.get(&k) {
                Some(&i) => self.pairs[i].1 = value,
                None => {
                    self.index.insert(k, self.pairs.len());
                    self.pairs.push((key, value));
                }
            },
            None => self.pairs.push((key, value)),
        }
    }
}

/// go-yaml's `scalar` for an `interface{}` target.
fn scalar(value: &str, tag: Option<&str>, plain_implicit: bool) -> Result<Yaml, String> {
    if tag.is_none() && !plain_implicit {
        return Ok(Yaml::Str(value.to_string()));
    }
    let (rtag, resolved) = resolve(tag.unwrap_or(""), value)?;
    if rtag == BINARY {
        let bytes = base64::decode_go_std(value)
            .ok_or_else(|| "!!binary value contains invalid base64 data".to_string())?;
        return Ok(match String::from_utf8(bytes) {
            Ok(s) => Yaml::Str(s),
            Err(e) => Yaml::Binary(e.into_bytes()),
        });
    }
    Ok(match resolved {
        Resolved::Null => Yaml::Null,
        Resolved::Bool(b) => Yaml::Bool(b),
        Resolved::Int(i) => Yaml::Int(i),
        Resolved::Uint(u) => Yaml::BigInt(u.to_string()),
        Resolved::Float(f) => Yaml::Float(f),
        // Timestamps, too, decode to their text ("for backward compatibility", says go-yaml).
        Resolved::Str => Yaml::Str(value.to_string()),
    })
}
