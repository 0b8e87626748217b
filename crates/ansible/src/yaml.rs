//! YAML as Ansible reads it (PyYAML's SafeLoader, YAML 1.1 scalars: `yes`/`on` are booleans,
//! `0755` is octal, `1e3` is a string), keeping each node's line and column so that load-time
//! errors can name them. Parsing is yaml-rust2's event parser; scalar resolution, anchors,
//! merge keys and the limits against hostile input are here.
use std::collections::HashMap;

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser, Tag};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// 1-based line and column.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mark {
    pub line: usize,
    pub col: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Yaml {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    /// A string tagged `!unsafe`: never templated.
    Unsafe(String),
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub value: Yaml,
    pub mark: Mark,
}

#[derive(Debug, thiserror::Error)]
#[error("{line}:{col}: {msg}")]
pub struct YamlError {
    pub line: usize,
    pub col: usize,
    pub msg: String,
}

/// Nodes (alias expansions included) one document stream may build: a "billion laughs" file
/// ends in an error instead of exhausting memory.
const MAX_NODES: usize = 2_000_000;
const MAX_DEPTH: usize = 256;

impl Node {
    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Yaml::Str(s) | Yaml::Unsafe(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_map(&self) -> Option<&[(Node, Node)]> {
        match &self.value {
            Yaml::Map(m) => Some(m),
            _ => None,
        }
    }

    pub fn as_seq(&self) -> Option<&[Node]> {
        match &self.value {
            Yaml::Seq(s) => Some(s),
            _ => None,
        }
    }

    pub fn get(&self, key: &str) -> Option<&Node> {
        self.as_map()?
            .iter()
            .rev()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v)
    }

    /// The node as JSON (unsafe strings become `{"__ansible_unsafe": s}`).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match &self.value {
            Yaml::Null => J::Null,
            Yaml::Bool(b) => J::Bool(*b),
            Yaml::Int(i) => J::from(*i),
            Yaml::Float(f) => serde_json::Number::from_f64(*f).map_or(J::Null, J::Number),
            Yaml::Str(s) => J::String(s.clone()),
            Yaml::Unsafe(s) => serde_json::json!({"__ansible_unsafe": s}),
            Yaml::Seq(items) => J::Array(items.iter().map(Node::to_json).collect()),
            Yaml::Map(pairs) => J::Object(
                pairs
                    .iter()
                    .map(|(k, v)| (key_text(k), v.to_json()))
                    .collect(),
            ),
        }
    }
}

/// A mapping key as Python would show it once it became a JSON key.
pub fn key_text(k: &Node) -> String {
    match &k.value {
        Yaml::Str(s) | Yaml::Unsafe(s) => s.clone(),
        Yaml::Null => "None".into(),
        Yaml::Bool(b) => if *b { "True" } else { "False" }.into(),
        Yaml::Int(i) => i.to_string(),
        Yaml::Float(f) => crate::template::value::py_float(*f),
        _ => format!("{:?}", k.value),
    }
}

/// Every document of the stream.
pub fn load_all(src: &str) -> Result<Vec<Node>, YamlError> {
    let mut b = Builder::default();
    let mut parser = Parser::new_from_str(src);
    parser.load(&mut b, true).map_err(|e| YamlError {
        line: e.marker().line(),
        col: e.marker().col() + 1,
        msg: e.info().to_string(),
    })?;
    if let Some(e) = b.error {
        return Err(e);
    }
    Ok(b.docs)
}

#[derive(Default)]
struct Builder {
    docs: Vec<Node>,
    stack: Vec<(Node, Option<usize>)>,
    pending_key: Vec<Option<Node>>,
    anchors: HashMap<usize, (Node, usize)>,
    nodes: usize,
    error: Option<YamlError>,
}

fn mark(m: &Marker) -> Mark {
    Mark {
        line: m.line(),
        col: m.col() + 1,
    }
}

impl Builder {
    fn fail(&mut self, m: Mark, msg: impl Into<String>) {
        if self.error.is_none() {
            self.error = Some(YamlError {
                line: m.line,
                col: m.col,
                msg: msg.into(),
            });
        }
    }

    fn push_value(&mut self, node: Node, anchor: Option<usize>, weight: usize) {
        self.nodes += weight;
        if self.nodes > MAX_NODES {
            let m = node.mark;
            self.fail(m, "document too large (alias expansion)");
            return;
        }
        if let Some(a) = anchor.filter(|a| *a > 0) {
            self.anchors.insert(a, (node.clone(), size(&node)));
        }
        let Some((parent, _)) = self.stack.last_mut() else {
            self.docs.push(node);
            return;
        };
        match &mut parent.value {
            Yaml::Seq(items) => items.push(node),
            Yaml::Map(pairs) => {
                let slot = self.pending_key.last_mut();
                match slot {
                    Some(slot @ None) => *slot = Some(node),
                    Some(slot) => {
                        let key = slot.take().unwrap_or(node.clone());
                        insert(pairs, key, node);
                    }
                    None => {}
                }
            }
            _ => {}
        }
    }
}

/// Nodes in a tree (what cloning it for an alias costs).
fn size(n: &Node) -> usize {
    match &n.value {
        Yaml::Seq(items) => 1 + items.iter().map(size).sum::<usize>(),
        Yaml::Map(pairs) => 1 + pairs.iter().map(|(k, v)| size(k) + size(v)).sum::<usize>(),
        _ => 1,
    }
}

/// Adds a pair; a `<<` merge key brings in the pairs of the map (or maps) it names that are
/// not set already; a duplicate key replaces the earlier value (PyYAML keeps the last).
fn insert(pairs: &mut Vec<(Node, Node)>, key: Node, value: Node) {
    if key.as_str() == Some("<<") && matches!(key.value, Yaml::Str(_)) {
        let sources: Vec<&Node> = match &value.value {
            Yaml::Map(_) => vec![&value],
            Yaml::Seq(items) => items.iter().collect(),
            _ => vec![],
        };
        if !sources.is_empty() {
            for src in sources {
                for (k, v) in src.as_map().unwrap_or_default() {
                    if !pairs.iter().any(|(pk, _)| pk.value == k.value) {
                        pairs.push((k.clone(), v.clone()));
                    }
                }
            }
            return;
        }
    }
    if let Some(slot) = pairs.iter_mut().find(|(k, _)| k.value == key.value) {
        slot.1 = value;
    } else {
        pairs.push((key, value));
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, m: Marker) {
        if self.error.is_some() {
            return;
        }
        let at = mark(&m);
        match ev {
            Event::Scalar(text, style, anchor, tag) => match resolve(&text, style, tag.as_ref()) {
                Ok(value) => self.push_value(Node { value, mark: at }, Some(anchor), 1),
                Err(msg) => self.fail(at, msg),
            },
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                let is_map = matches!(ev, Event::MappingStart(..));
                let (Event::SequenceStart(anchor, tag) | Event::MappingStart(anchor, tag)) = ev
                else {
                    return;
                };
                if self.stack.len() >= MAX_DEPTH {
                    self.fail(at, "nesting too deep");
                    return;
                }
                if let Some(t) =
                    tag.filter(|t| !matches!(t.suffix.as_str(), "seq" | "map" | "omap"))
                {
                    self.fail(at, format!("unsupported tag {}{}", t.handle, t.suffix));
                    return;
                }
                let value = if is_map {
                    Yaml::Map(Vec::new())
                } else {
                    Yaml::Seq(Vec::new())
                };
                self.stack.push((Node { value, mark: at }, Some(anchor)));
                self.pending_key.push(None);
            }
            Event::SequenceEnd | Event::MappingEnd => {
                self.pending_key.pop();
                if let Some((node, anchor)) = self.stack.pop() {
                    self.push_value(node, anchor, 1);
                }
            }
            Event::Alias(id) => match self.anchors.get(&id).cloned() {
                Some((node, weight)) => self.push_value(
                    Node {
                        value: node.value,
                        mark: at,
                    },
                    None,
                    weight,
                ),
                None => self.fail(at, "found undefined alias"),
            },
            _ => {}
        }
    }
}

/// PyYAML's implicit resolvers (plain scalars only) and the explicit tags Ansible knows.
fn resolve(text: &str, style: TScalarStyle, tag: Option<&Tag>) -> Result<Yaml, String> {
    if let Some(t) = tag {
        let full = format!("{}{}", t.handle, t.suffix);
        return match full.as_str() {
            "!unsafe" => Ok(Yaml::Unsafe(text.to_string())),
            "tag:yaml.org,2002:str" | "!!str" => Ok(Yaml::Str(text.to_string())),
            "tag:yaml.org,2002:int" | "!!int" => int(text)
                .map(Yaml::Int)
                .ok_or_else(|| format!("invalid int {text:?}")),
            "tag:yaml.org,2002:float" | "!!float" => float(text)
                .or_else(|| int(text).map(|i| i as f64))
                .map(Yaml::Float)
                .ok_or_else(|| format!("invalid float {text:?}")),
            "tag:yaml.org,2002:bool" | "!!bool" => boolean(text)
                .map(Yaml::Bool)
                .ok_or_else(|| format!("invalid bool {text:?}")),
            "tag:yaml.org,2002:null" | "!!null" => Ok(Yaml::Null),
            other => Err(format!("unsupported tag {other}")),
        };
    }
    if style != TScalarStyle::Plain {
        return Ok(Yaml::Str(text.to_string()));
    }
    if matches!(text, "" | "~" | "null" | "Null" | "NULL") {
        return Ok(Yaml::Null);
    }
    if let Some(b) = boolean(text) {
        return Ok(Yaml::Bool(b));
    }
    if let Some(i) = int(text) {
        return Ok(Yaml::Int(i));
    }
    if let Some(f) = float(text) {
        return Ok(Yaml::Float(f));
    }
    Ok(Yaml::Str(text.to_string()))
}

fn boolean(t: &str) -> Option<bool> {
    match t {
        "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => Some(true),
        "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => Some(false),
        _ => None,
    }
}

fn split_sign(t: &str) -> (i64, &str) {
    match t.as_bytes().first() {
        Some(b'-') => (-1, &t[1..]),
        Some(b'+') => (1, &t[1..]),
        _ => (1, t),
    }
}

fn sexagesimal(body: &str) -> Option<f64> {
    let mut acc = 0f64;
    for (i, part) in body.split(':').enumerate() {
        if i > 0 && (part.is_empty() || part.len() > 2 || part.parse::<u32>().ok()? > 59) {
            return None;
        }
        acc = acc * 60.0 + part.parse::<f64>().ok()?;
    }
    Some(acc)
}

fn int(t: &str) -> Option<i64> {
    let (sign, body) = split_sign(t);
    if body.is_empty() || !body.as_bytes()[0].is_ascii_digit() {
        return None;
    }
    let digits =
        |s: &str, ok: fn(char) -> bool| !s.is_empty() && s.chars().all(|c| ok(c) || c == '_');
    let v = if let Some(b) = body.strip_prefix("0b") {
        digits(b, |c| c == '0' || c == '1')
            .then(|| i64::from_str_radix(&b.replace('_', ""), 2).ok())??
    } else if let Some(x) = body.strip_prefix("0x") {
        digits(x, |c| c.is_ascii_hexdigit())
            .then(|| i64::from_str_radix(&x.replace('_', ""), 16).ok())??
    } else if body.len() > 1 && body.starts_with('0') {
        digits(&body[1..], |c| ('0'..='7').contains(&c))
            .then(|| i64::from_str_radix(&body[1..].replace('_', ""), 8).ok())??
    } else if body.contains(':') {
        let (head, _) = body.split_once(':')?;
        if !digits(head, |c| c.is_ascii_digit()) || head.starts_with('0') {
            return None;
        }
        let f = sexagesimal(&body.replace('_', ""))?;
        if body.contains('.') {
            return None;
        }
        f as i64
    } else {
        if !digits(body, |c| c.is_ascii_digit()) {
            return None;
        }
        body.replace('_', "").parse::<i64>().ok()?
    };
    Some(sign * v)
}

fn float(t: &str) -> Option<f64> {
    let (sign, body) = split_sign(t);
    let sign = sign as f64;
    match body {
        ".inf" | ".Inf" | ".INF" => return Some(sign * f64::INFINITY),
        ".nan" | ".NaN" | ".NAN" if sign > 0.0 && !t.starts_with('+') => return Some(f64::NAN),
        _ => {}
    }
    if !body.contains('.') || body.is_empty() {
        return None;
    }
    if body.contains(':') {
        if !body.as_bytes()[0].is_ascii_digit() {
            return None;
        }
        return sexagesimal(&body.replace('_', "")).map(|f| sign * f);
    }
    let (mant, exp) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let (int_part, frac) = mant.split_once('.')?;
    let int_ok = if int_part.is_empty() {
        !frac.is_empty() && frac.as_bytes()[0].is_ascii_digit()
    } else {
        int_part.as_bytes()[0].is_ascii_digit()
            && int_part.chars().all(|c| c.is_ascii_digit() || c == '_')
    };
    if !int_ok || !frac.chars().all(|c| c.is_ascii_digit() || c == '_') {
        return None;
    }
    if let Some(e) = exp {
        let digits = e.strip_prefix(['+', '-'])?;
        if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
    }
    let clean = body.replace('_', "");
    let clean = if clean.ends_with('.') {
        format!("{clean}0")
    } else {
        clean
    };
    clean.parse::<f64>().ok().map(|f| sign * f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(s: &str) -> Yaml {
        load_all(s).expect("test value").remove(0).value
    }

    #[test]
    fn pyyaml_scalars() {
        assert_eq!(one("yes"), Yaml::Bool(true));
        assert_eq!(one("Off"), Yaml::Bool(false));
        assert_eq!(one("0755"), Yaml::Int(493));
        assert_eq!(one("08"), Yaml::Str("08".into()));
        assert_eq!(one("1_000"), Yaml::Int(1000));
        assert_eq!(one("1:30"), Yaml::Int(90));
        assert_eq!(one("0x1F"), Yaml::Int(31));
        assert_eq!(one("1e3"), Yaml::Str("1e3".into()));
        assert_eq!(one("1.5e+3"), Yaml::Float(1500.0));
        assert_eq!(one("1."), Yaml::Float(1.0));
        assert_eq!(one("-.inf"), Yaml::Float(f64::NEG_INFINITY));
        assert_eq!(one("~"), Yaml::Null);
        assert_eq!(one("'yes'"), Yaml::Str("yes".into()));
        assert_eq!(one("!unsafe '{{ x }}'"), Yaml::Unsafe("{{ x }}".into()));
    }

    #[test]
    fn marks_merges_and_limits() {
        let docs = load_all("a: 1\nb:\n  - &x {c: 2}\n  - <<: *x\n    d: 3\n").expect("test value");
        let b = docs[0].get("b").expect("test value");
        assert_eq!(b.mark, Mark { line: 3, col: 3 });
        assert_eq!(
            b.as_seq().expect("test value")[1].to_json(),
            serde_json::json!({"c": 2, "d": 3})
        );
        let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..9 {
            bomb.push_str(&format!(
                "{}: &{} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n",
                (b'a' + i) as char,
                (b'a' + i) as char,
                p = (b'a' + i - 1) as char
            ));
        }
        assert!(load_all(&bomb).is_err());
        assert!(load_all(&"[".repeat(100_000)).is_err());
    }
}
