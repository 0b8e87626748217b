//! PyYAML's SafeConstructor over a composed document: tags to values, merge keys flattened
//! the PyYAML way (merged pairs first, so explicit keys win; a list of maps merged with the
//! first map winning), and mappings built with Python's dict semantics (`1`, `1.0` and `True`
//! are one key; the first key and the last value are kept; lists and dicts cannot be keys).
//!
//! Python shares an aliased node's object; the tree here copies it, so alias expansion is
//! bounded with go-yaml's ratio rule, and a node that contains an alias to itself (legal in
//! Python) is refused.

use std::collections::{HashMap, HashSet, VecDeque};

use crate::compose::{RawDoc, RawKind};
use crate::error::{pyyaml_marked, ErrorKind};
use crate::syntax::Pos;
use crate::value::{Mark, Node, Timestamp, TimestampTime, Yaml};
use crate::{Error, MAX_DEPTH};

use super::binary::decode_base64;
use super::number::{parse_float, parse_radix, parse_sexagesimal};
use super::pystr::{repr, repr200};
use super::resolve::*;

pub(crate) struct Constructor<'a> {
    doc: &'a RawDoc,
    decode_count: usize,
    alias_count: usize,
    alias_depth: usize,
    in_progress: HashSet<usize>,
    /// `=` keys that `flatten_mapping` retagged as strings (PyYAML mutates the node).
    retagged: HashSet<usize>,
    depth: usize,
}

fn marked(context: Option<&str>, context_mark: Option<Mark>, problem: &str, mark: Mark) -> Error {
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

    /// Runs PyYAML's constructors in PyYAML's order, only to find the error Python would
    /// raise first. SafeConstructor builds collections with generators: a mapping's scalars
    /// are built when the mapping is, its nested collections later, round by round (breadth
    /// first), and each node once (aliases reuse it).
    fn check_in_python_order(&mut self) -> Result<(), Error> {
        let mut done: HashSet<usize> = HashSet::new();
        let mut pending: VecDeque<usize> = VecDeque::new();
        self.check_object(self.doc.root, &mut done, &mut pending)?;
        while let Some(idx) = pending.pop_front() {
            self.check_generator(idx, &mut done, &mut pending)?;
        }
        Ok(())
    }

    fn check_object(
        &mut self,
        idx: usize,
        done: &mut HashSet<usize>,
        pending: &mut VecDeque<usize>,
    ) -> Result<(), Error> {
        let idx = self.resolve_alias(idx);
        if !done.insert(idx) {
            return Ok(());
        }
        let tag = self.tag(idx);
        match tag.as_str() {
            SEQ | MAP | SET | OMAP | PAIRS => pending.push_back(idx),
            _ => {
                self.construct_tagged(idx, &tag)?;
            }
        }
        Ok(())
    }

    fn check_generator(
        &mut self,
        idx: usize,
        done: &mut HashSet<usize>,
        pending: &mut VecDeque<usize>,
    ) -> Result<(), Error> {
        let tag = self.tag(idx);
        match tag.as_str() {
            SEQ => {
                let RawKind::Seq { items, .. } = &self.doc.nodes[idx].kind else {
                    return self.construct_sequence(idx).map(|_| ());
                };
                for &item in items {
                    self.check_object(item, done, pending)?;
                }
            }
            OMAP | PAIRS => {
                // Validates the shape without building; keys and values are built in order.
                let RawKind::Seq { items, .. } = &self.doc.nodes[idx].kind else {
                    return self.construct_pairs(idx, tag == OMAP).map(|_| ());
                };
                for &item in items {
                    let item = self.resolve_alias(item);
                    match &self.doc.nodes[item].kind {
                        RawKind::Map { pairs, .. } if pairs.len() == 1 => {
                            let (k, v) = pairs[0];
                            self.check_object(k, done, pending)?;
                            self.check_object(v, done, pending)?;
                        }
                        _ => return self.construct_pairs(idx, tag == OMAP).map(|_| ()),
                    }
                }
            }
            _ => {
                if !matches!(self.doc.nodes[idx].kind, RawKind::Map { .. }) {
                    return self.construct_mapping(idx).map(|_| ());
                }
                for (k, v) in self.flatten(idx)? {
                    self.check_object(k, done, pending)?;
                    let key = self.resolve_alias(k);
                    if matches!(self.tag(key).as_str(), SEQ | MAP | SET | OMAP | PAIRS) {
                        return Err(marked(
                            Some("while constructing a mapping"),
                            Some(self.mark(idx)),
                            "found unhashable key",
                            self.mark(key),
                        ));
                    }
                    self.check_object(v, done, pending)?;
                }
            }
        }
        Ok(())
    }

    fn mark(&self, idx: usize) -> Mark {
        Mark::from_pos(self.doc.nodes[idx].start)
    }

    fn pos(&self, idx: usize) -> Pos {
        self.doc.nodes[idx].start
    }

    /// Follows aliases to the node they stand for.
    fn resolve_alias(&self, mut idx: usize) -> usize {
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

    fn node_id(&self, idx: usize) -> &'static str {
        match &self.doc.nodes[self.resolve_alias(idx)].kind {
            RawKind::Seq { .. } => "sequence",
            RawKind::Map { .. } => "mapping",
            _ => "scalar",
        }
    }

    /// The tag PyYAML's composer gives a node.
    fn tag(&self, idx: usize) -> String {
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

    fn count(&mut self, idx: usize) -> Result<(), Error> {
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

    fn construct(&mut self, idx: usize) -> Result<Node, Error> {
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

    fn scalar_value(&self, idx: usize) -> Result<&'a str, Error> {
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
    fn construct_tagged(&mut self, idx: usize, tag: &str) -> Result<Yaml, Error> {
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
    fn construct_scalar(&mut self, idx: usize, tag: &str) -> Result<Yaml, Error> {
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

    fn construct_sequence(&mut self, idx: usize) -> Result<Vec<Node>, Error> {
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
    fn construct_pairs(&mut self, idx: usize, omap: bool) -> Result<Yaml, Error> {
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
    fn flatten(&mut self, idx: usize) -> Result<Vec<(usize, usize)>, Error> {
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

    fn flatten_nested(&mut self, idx: usize) -> Result<Vec<(usize, usize)>, Error> {
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

    fn construct_mapping(&mut self, idx: usize) -> Result<Vec<(Node, Node)>, Error> {
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

/// A Python dict being filled: an equal key keeps its first position and object and takes
/// the new value.
#[derive(Default)]
struct PyDict {
    pairs: Vec<(Node, Node)>,
    index: HashMap<PyKey, usize>,
}

impl PyDict {
    fn set(&mut self, hash: Option<PyKey>, key: Node, value: Node) {
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
enum PyKey {
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
fn py_key(v: &Yaml) -> Option<Option<PyKey>> {
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

/// `SafeConstructor.construct_yaml_int`, or the text of Python's ValueError.
fn construct_int(text: &str) -> Result<Yaml, String> {
    let value: String = text.chars().filter(|&c| c != '_').collect();
    if value.is_empty() {
        // PyYAML indexes `value[0]`.
        return Err("string index out of range".into());
    }
    let negative = value.starts_with('-');
    let value = value.strip_prefix(['-', '+']).unwrap_or(&value);
    let int = |digits: &str, base: u32| py_int(digits, base, negative);
    if value == "0" {
        Ok(Yaml::Int(0))
    } else if let Some(bin) = value.strip_prefix("0b") {
        int(bin, 2)
    } else if let Some(hex) = value.strip_prefix("0x") {
        int(hex, 16)
    } else if value.starts_with('0') {
        int(value, 8)
    } else if value.contains(':') {
        let parts: Vec<&str> = value.split(':').collect();
        for part in &parts {
            py_int(part, 10, false)?;
        }
        let parts: Vec<String> = parts.iter().map(|p| p.trim().to_string()).collect();
        let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
        parse_sexagesimal(&parts, negative).ok_or_else(|| "invalid sexagesimal value".to_string())
    } else {
        int(value, 10)
    }
}

/// Python's `int(text, base)` (then negated for PyYAML's sign): surrounding whitespace, its
/// own sign and a matching base prefix are allowed.
fn py_int(text: &str, base: u32, negative: bool) -> Result<Yaml, String> {
    let invalid = || {
        format!(
            "invalid literal for int() with base {base}: {}",
            repr200(text)
        )
    };
    let normalized = super::number::ascii_digits(text);
    let t = normalized.trim();
    let (inner_negative, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let prefix = match base {
        2 => ["0b", "0B"],
        8 => ["0o", "0O"],
        16 => ["0x", "0X"],
        _ => ["", ""],
    };
    let digits = if base != 10 {
        t.strip_prefix(prefix[0])
            .or_else(|| t.strip_prefix(prefix[1]))
            .unwrap_or(t)
    } else {
        t
    };
    parse_radix(digits, base, negative != inner_negative).ok_or_else(invalid)
}

/// `SafeConstructor.construct_yaml_float`, or the text of Python's ValueError.
fn construct_float(text: &str) -> Result<Yaml, String> {
    let invalid = |s: &str| format!("could not convert string to float: {}", repr(s));
    if text.is_empty() {
        // PyYAML indexes `value[0]`.
        return Err("string index out of range".into());
    }
    let value: String = text
        .chars()
        .filter(|&c| c != '_')
        .collect::<String>()
        .to_lowercase();
    let (sign, value) = match value.chars().next() {
        Some('-') => (-1.0, &value[1..]),
        Some('+') => (1.0, &value[1..]),
        _ => (1.0, value.as_str()),
    };
    let v = if value == ".inf" {
        f64::INFINITY
    } else if value == ".nan" {
        // PyYAML returns its NaN constant without the sign.
        return Ok(Yaml::Float(f64::NAN));
    } else if value.contains(':') {
        let mut digits = Vec::new();
        for part in value.split(':') {
            digits.push(parse_float(part).ok_or_else(|| invalid(part))?);
        }
        digits.reverse();
        let (mut base, mut acc) = (1.0f64, 0.0f64);
        for d in digits {
            acc += d * base;
            base *= 60.0;
        }
        acc
    } else {
        parse_float(value).ok_or_else(|| invalid(value))?
    };
    Ok(Yaml::Float(sign * v))
}

/// `SafeConstructor.construct_yaml_timestamp`, with `datetime`'s range checks.
fn construct_timestamp(text: &str) -> Result<Timestamp, String> {
    // The regex's `$` also matches before a final newline.
    let text = text.strip_suffix('\n').unwrap_or(text);
    let Some(p) = parse_timestamp_parts(text, false) else {
        return Err("'NoneType' object has no attribute 'groupdict'".into());
    };
    let num = |s: &str| s.parse::<u32>().unwrap_or(0);
    let (year, month, day) = (num(p.year), num(p.month), num(p.day));
    if !(1..=9999).contains(&year) {
        return Err(format!("year {year} is out of range"));
    }
    if !(1..=12).contains(&month) {
        return Err("month must be in 1..12".into());
    }
    let leap = year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400));
    let days = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    if day < 1 || day > days {
        return Err("day is out of range for month".into());
    }
    let mut ts = Timestamp {
        year: year as i32,
        month: month as u8,
        day: day as u8,
        time: None,
    };
    let Some(super::resolve::TimeParts {
        hour,
        minute,
        second,
        fraction,
        zone,
    }) = p.time
    else {
        return Ok(ts);
    };
    let (hour, minute, second) = (num(hour), num(minute), num(second));
    if hour > 23 {
        return Err("hour must be in 0..23".into());
    }
    if minute > 59 {
        return Err("minute must be in 0..59".into());
    }
    if second > 59 {
        return Err("second must be in 0..59".into());
    }
    let microsecond = match fraction {
        Some(f) if !f.is_empty() => {
            let mut f: String = f.chars().take(6).collect();
            while f.len() < 6 {
                f.push('0');
            }
            num(&f)
        }
        _ => 0,
    };
    let offset_minutes = match zone {
        None => None,
        Some(super::resolve::Zone::Utc) => Some(0),
        Some(super::resolve::Zone::Offset {
            negative,
            hour,
            minute,
        }) => {
            let total = num(hour) as i32 * 60 + minute.map_or(0, num) as i32;
            if total >= 24 * 60 {
                return Err("offset must be a timedelta strictly between -timedelta(hours=24) and timedelta(hours=24).".into());
            }
            Some(if negative { -total } else { total })
        }
    };
    ts.time = Some(TimestampTime {
        hour: hour as u8,
        minute: minute as u8,
        second: second as u8,
        microsecond,
        offset_minutes,
    });
    Ok(ts)
}
