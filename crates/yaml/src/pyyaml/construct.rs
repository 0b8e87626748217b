//! PyYAML's SafeConstructor over a composed document: tags to values, merge keys flattened
//! the PyYAML way (merged pairs first, so explicit keys win; a list of maps merged with the
//! first map winning), and mappings built with Python's dict semantics (`1`, `1.0` and `True`
//! are one key; the first key and the last value are kept; lists and dicts cannot be keys).
//!
//! Python shares an aliased node's object; the tree here copies it, so alias expansion is
//! bounded with go-yaml's ratio rule, and a node that contains an alias to itself (legal in
//! Python) is refused.

use std::collections::HashSet;

use crate::compose::{RawDoc, RawKind};
use crate::error::{pyyaml_marked, ErrorKind};
use crate::syntax::Pos;
use crate::value::{Mark, Node, Yaml};
use crate::{Error, MAX_DEPTH};

use super::binary::decode_base64;
use super::pydict::{py_key, PyDict};
use super::pystr::repr;
use super::resolve::*;
use super::scalars::{construct_float, construct_int, construct_timestamp};

pub(crate) struct Constructor<'a> {
    pub(super) doc: &'a RawDoc,
    pub(super) decode_count: usize,
    pub(super) alias_count: usize,
    pub(super) alias_depth: usize,
    pub(super) in_progress: HashSet<usize>,
    /// `=` keys that `flatten_mapping` retagged as strings (PyYAML mutates the node).
    pub(super) retagged: HashSet<usize>,
    pub(super) depth: usize,
}

pub(super) fn marked(
    context: Option<&str>,
    context_mark: Option<Mark>,
    problem: &str,
    mark: Mark,
) -> Error {
    Error::new(
        ErrorKind::Construct,
        pyyaml_marked(context, context_mark, problem, Some(mark)),
        Some(mark),
    )
}

/// An exception other than a YAMLError (ValueError, KeyError, ...): `str(exc)`.
fn python(message: String, mark: Mark) -> Error {
    Error::new(ErrorKind::Construct, message, Some(mark))
}

impl<'a> Constructor<'a> {
    pub(crate) fn new(doc: &'a RawDoc) -> Constructor<'a> {
        Constructor {
            doc,
            decode_count: 0,
            alias_count: 0,
            alias_depth: 0,
            in_progress: HashSet::new(),
            retagged: HashSet::new(),
            depth: 0,
        }
    }

    pub(crate) fn construct_document(&mut self) -> Result<Node, Error> {
        self.check_in_python_order()?;
        self.construct(self.doc.root)
    }

    pub(super) fn mark(&self, idx: usize) -> Mark {
        Mark::from_pos(self.doc.nodes[idx].start)
    }

    pub(super) fn pos(&self, idx: usize) -> Pos {
        self.doc.nodes[idx].start
    }

    /// Follows aliases to the node they stand for.
    pub(super) fn resolve_alias(&self, mut idx: usize) -> usize {
        let mut hops = 0;
        while let RawKind::Alias { target, .. } = &self.doc.nodes[idx].kind {
            idx = *target;
            hops += 1;
            if hops > self.doc.nodes.len() {
                break;
            }
        }
        idx
    }

    pub(super) fn node_id(&self, idx: usize) -> &'static str {
        match &self.doc.nodes[self.resolve_alias(idx)].kind {
            RawKind::Seq { .. } => "sequence",
            RawKind::Map { .. } => "mapping",
            _ => "scalar",
        }
    }

    /// The tag PyYAML's composer gives a node.
    pub(super) fn tag(&self, idx: usize) -> String {
        if self.retagged.contains(&idx) {
            return STR.to_string();
        }
        match &self.doc.nodes[idx].kind {
            RawKind::Scalar {
                value,
                tag,
                plain_implicit,
                ..
            } => match tag.as_deref() {
                None | Some("!") if *plain_implicit => resolve_plain(value).to_string(),
                None | Some("!") => STR.to_string(),
                Some(t) => t.to_string(),
            },
            RawKind::Seq { tag, .. } => match tag.as_deref() {
                None | Some("!") => SEQ.to_string(),
                Some(t) => t.to_string(),
            },
            RawKind::Map { tag, .. } => match tag.as_deref() {
                None | Some("!") => MAP.to_string(),
                Some(t) => t.to_string(),
            },
            RawKind::Alias { target, .. } => self.tag(*target),
        }
    }

    pub(super) fn count(&mut self, idx: usize) -> Result<(), Error> {
        self.decode_count += 1;
        if self.alias_depth > 0 {
            self.alias_count += 1;
        }
        let ratio = if self.decode_count <= 400_000 {
            0.99
        } else if self.decode_count >= 4_000_000 {
            0.10
        } else {
            0.99 - 0.89 * ((self.decode_count - 400_000) as f64 / 3_600_000.0)
        };
        if self.alias_count > 100
            && self.decode_count > 1000
            && self.alias_count as f64 / self.decode_count as f64 > ratio
        {
            return Err(Error::new(
                ErrorKind::Limit,
                "document contains excessive aliasing",
                Some(self.mark(idx)),
            ));
        }
        Ok(())
    }

    pub(super) fn construct(&mut self, idx: usize) -> Result<Node, Error> {
        self.count(idx)?;
        if let RawKind::Alias { anchor, target } = &self.doc.nodes[idx].kind {
            let target = *target;
            if self.in_progress.contains(&target) {
                return Err(recursive_alias(anchor, self.mark(idx)));
            }
            // An alias hop counts as depth: expansion recurses like nesting does.
            self.depth += 1;
            if self.depth > MAX_DEPTH {
                return Err(too_deep(self.mark(idx)));
            }
            self.alias_depth += 1;
            let node = self.construct(target);
            self.alias_depth -= 1;
            self.depth -= 1;
            return node;
        }
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(too_deep(self.mark(idx)));
        }
        self.in_progress.insert(idx);
        let tag = self.tag(idx);
        let value = self.construct_tagged(idx, &tag);
        self.in_progress.remove(&idx);
        self.depth -= 1;
        Ok(Node {
            value: value?,
            mark: self.mark(idx),
        })
    }

    pub(super) fn scalar_value(&self, idx: usize) -> Result<&'a str, Error> {
        match &self.doc.nodes[idx].kind {
            RawKind::Scalar { value, .. } => Ok(value),
            _ => Err(marked(
                None,
                None,
                &format!("expected a scalar node, but found {}", self.node_id(idx)),
                self.mark(idx),
            )),
        }
    }

    /// Collections recurse through here, so it stays small; scalars go to a separate
    /// function whose larger frame is not on the recursion path.
    pub(super) fn construct_tagged(&mut self, idx: usize, tag: &str) -> Result<Yaml, Error> {
        match tag {
            SEQ => self.construct_sequence(idx).map(Yaml::Seq),
            MAP => self.construct_mapping(idx).map(Yaml::Map),
            SET => {
                let pairs = self.construct_mapping(idx)?;
                Ok(Yaml::Map(
                    pairs
                        .into_iter()
                        .map(|(k, v)| {
                            (
                                k,
                                Node {
                                    value: Yaml::Null,
                                    mark: v.mark,
                                },
                            )
                        })
                        .collect(),
                ))
            }
            OMAP | PAIRS => self.construct_pairs(idx, tag == OMAP),
            _ => self.construct_scalar(idx, tag),
        }
    }

    #[inline(never)]
    pub(super) fn construct_scalar(&mut self, idx: usize, tag: &str) -> Result<Yaml, Error> {
        let mark = self.mark(idx);
        match tag {
            NULL => self.scalar_value(idx).map(|_| Yaml::Null),
            STR => self.scalar_value(idx).map(|s| Yaml::Str(s.to_string())),
            BOOL => {
                let v = self.scalar_value(idx)?;
                match v.to_lowercase().as_str() {
                    "yes" | "true" | "on" => Ok(Yaml::Bool(true)),
                    "no" | "false" | "off" => Ok(Yaml::Bool(false)),
                    other => Err(python(repr(other), mark)),
                }
            }
            INT => construct_int(self.scalar_value(idx)?).map_err(|m| python(m, mark)),
            FLOAT => construct_float(self.scalar_value(idx)?).map_err(|m| python(m, mark)),
            BINARY => {
                let v = self.scalar_value(idx)?;
                decode_base64(v).map(Yaml::Binary).map_err(|e| {
                    marked(
                        None,
                        None,
                        &format!("failed to decode base64 data: {e}"),
                        mark,
                    )
                })
            }
            TIMESTAMP => construct_timestamp(self.scalar_value(idx)?)
                .map(Yaml::Timestamp)
                .map_err(|m| python(m, mark)),
            _ => Err(marked(
                None,
                None,
                &format!(
                    "could not determine a constructor for the tag {}",
                    repr(tag)
                ),
                mark,
            )),
        }
    }

    pub(super) fn construct_sequence(&mut self, idx: usize) -> Result<Vec<Node>, Error> {
        let RawKind::Seq { items, .. } = &self.doc.nodes[idx].kind else {
            return Err(marked(
                None,
                None,
                &format!("expected a sequence node, but found {}", self.node_id(idx)),
                self.mark(idx),
            ));
        };
        let mut out = Vec::with_capacity(items.len());
        for &i in items {
            out.push(self.construct(i)?);
        }
        Ok(out)
    }

    /// `!!omap` / `!!pairs`: a sequence of one-pair mappings, as a list of `[key, value]`.
    pub(super) fn construct_pairs(&mut self, idx: usize, omap: bool) -> Result<Yaml, Error> {
        let context = if omap {
            "while constructing an ordered map"
        } else {
            "while constructing pairs"
        };
        let RawKind::Seq { items, .. } = &self.doc.nodes[idx].kind else {
            return Err(marked(
                Some(context),
                Some(self.mark(idx)),
                &format!("expected a sequence, but found {}", self.node_id(idx)),
                self.mark(idx),
            ));
        };
        let mut out = Vec::new();
        for &item in items {
            let item = self.resolve_alias(item);
            let RawKind::Map { pairs, .. } = &self.doc.nodes[item].kind else {
                return Err(marked(
                    Some(context),
                    Some(self.mark(idx)),
                    &format!(
                        "expected a mapping of length 1, but found {}",
                        self.node_id(item)
                    ),
                    self.mark(item),
                ));
            };
            if pairs.len() != 1 {
                return Err(marked(
                    Some(context),
                    Some(self.mark(idx)),
                    &format!(
                        "expected a single mapping item, but found {} items",
                        pairs.len()
                    ),
                    self.mark(item),
                ));
            }
            let (k, v) = pairs[0];
            let key = self.construct(k)?;
            let value = self.construct(v)?;
            out.push(Node {
                value: Yaml::Seq(vec![key, value]),
                mark: self.mark(item),
            });
        }
        Ok(Yaml::Seq(out))
    }

    /// `SafeConstructor.flatten_mapping`: the pairs of mapping `idx` with merges resolved.
    pub(super) fn flatten(&mut self, idx: usize) -> Result<Vec<(usize, usize)>, Error> {
        let RawKind::Map { pairs, .. } = &self.doc.nodes[idx].kind else {
            return Ok(Vec::new());
        };
        let mut merge: Vec<(usize, usize)> = Vec::new();
        let mut own: Vec<(usize, usize)> = Vec::new();
        for &(k, v) in pairs {
            let key = self.resolve_alias(k);
            match self.tag(key).as_str() {
                MERGE => {
                    let value = self.resolve_alias(v);
                    match &self.doc.nodes[value].kind {
                        RawKind::Map { .. } => merge.extend(self.flatten_nested(value)?),
                        RawKind::Seq { items, .. } => {
                            let mut submerge = Vec::new();
                            for &sub in items {
                                let sub = self.resolve_alias(sub);
                                if !matches!(self.doc.nodes[sub].kind, RawKind::Map { .. }) {
                                    return Err(marked(
                                        Some("while constructing a mapping"),
                                        Some(self.mark(idx)),
                                        &format!(
                                            "expected a mapping for merging, but found {}",
                                            self.node_id(sub)
                                        ),
                                        self.mark(sub),
                                    ));
                                }
                                submerge.push(self.flatten_nested(sub)?);
                            }
                            for pairs in submerge.into_iter().rev() {
                                merge.extend(pairs);
                            }
                        }
                        _ => {
                            return Err(marked(
                                Some("while constructing a mapping"),
                                Some(self.mark(idx)),
                                &format!(
                                "expected a mapping or list of mappings for merging, but found {}",
                                self.node_id(value)
                            ),
                                self.mark(value),
                            ))
                        }
                    }
                }
                VALUE => {
                    self.retagged.insert(key);
                    own.push((k, v));
                }
                _ => own.push((k, v)),
            }
        }
        merge.extend(own);
        Ok(merge)
    }

    pub(super) fn flatten_nested(&mut self, idx: usize) -> Result<Vec<(usize, usize)>, Error> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Error::new(
                ErrorKind::Limit,
                format!("exceeded max depth of {MAX_DEPTH}"),
                Some(self.mark(idx)),
            ));
        }
        if !self.in_progress.insert(idx) {
            return Err(Error::new(
                ErrorKind::Construct,
                "found a recursive merge; recursive structures are not supported",
                Some(self.mark(idx)),
            ));
        }
        let pairs = self.flatten(idx);
        self.in_progress.remove(&idx);
        self.depth -= 1;
        pairs
    }

    pub(super) fn construct_mapping(&mut self, idx: usize) -> Result<Vec<(Node, Node)>, Error> {
        if !matches!(self.doc.nodes[idx].kind, RawKind::Map { .. }) {
            return Err(marked(
                None,
                None,
                &format!("expected a mapping node, but found {}", self.node_id(idx)),
                self.mark(idx),
            ));
        }
        let pairs = self.flatten(idx)?;
        let mut map = PyDict::default();
        for (k, v) in pairs {
            let key = self.construct(k)?;
            let Some(hash) = py_key(&key.value) else {
                return Err(marked(
                    Some("while constructing a mapping"),
                    Some(Mark::from_pos(self.pos(idx))),
                    "found unhashable key",
                    self.mark(self.resolve_alias(k)),
                ));
            };
            let value = self.construct(v)?;
            map.set(hash, key, value);
        }
        Ok(map.pairs)
    }
}

#[cold]
#[inline(never)]
fn recursive_alias(anchor: &str, mark: Mark) -> Error {
    Error::new(
        ErrorKind::Construct,
        format!("found recursive alias '{anchor}'; recursive structures are not supported"),
        Some(mark),
    )
}

#[cold]
#[inline(never)]
fn too_deep(mark: Mark) -> Error {
    Error::new(
        ErrorKind::Limit,
        format!("exceeded max depth of {MAX_DEPTH}"),
        Some(mark),
    )
}
