//! sigs.k8s.io/yaml's `convertToJSONableObject` followed by Go's `json.Marshal`: map keys
//! become strings the way that package stringifies them, objects are written with sorted
//! keys, strings with `encoding/json`'s HTML-safe escaping, floats in Go's JSON layout.

use crate::error::ErrorKind;
use crate::value::{Node, Yaml};
use crate::Error;

use super::strconv::{format_g, format_json};

/// JSON text for `v`, exactly as `json.Marshal` would write the value go-yaml decoded.
pub fn to_json(v: &Yaml) -> Result<String, Error> {
    // sigs.k8s.io/yaml converts every key before encoding, so a bad key anywhere wins over a
    // bad value.
    check_keys(v)?;
    let mut out = String::new();
    write_value(v, &mut out)?;
    Ok(out)
}

fn check_keys(root: &Yaml) -> Result<(), Error> {
    let mut stack = vec![root];
    while let Some(v) = stack.pop() {
        match v {
            Yaml::Seq(items) => stack.extend(items.iter().rev().map(|i| &i.value)),
            Yaml::Map(pairs) => {
                // Depth first in document order: keys of a mapping before its values' keys.
                let mut values = Vec::with_capacity(pairs.len());
                for (k, v) in pairs {
                    key_string(&k.value, &v.value)?;
                    values.push(&v.value);
                }
                stack.extend(values.into_iter().rev());
            }
            _ => {}
        }
    }
    Ok(())
}

fn json_error(message: String) -> Error {
    Error::new(ErrorKind::Json, message, None)
}

/// Writes with an explicit stack, so no tree is too deep to encode.
fn write_value(root: &Yaml, out: &mut String) -> Result<(), Error> {
    enum Work<'a> {
        Value(&'a Yaml),
        Text(&'static str),
        Key(Vec<u8>),
    }
    let mut stack = vec![Work::Value(root)];
    while let Some(work) = stack.pop() {
        let v = match work {
            Work::Text(t) => {
                out.push_str(t);
                continue;
            }
            Work::Key(k) => {
                write_string(&k, out);
                out.push(':');
                continue;
            }
            Work::Value(v) => v,
        };
        match v {
            Yaml::Null => out.push_str("null"),
            Yaml::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Yaml::Int(i) => out.push_str(&i.to_string()),
            Yaml::BigInt(s) => out.push_str(s),
            Yaml::Float(f) => match format_json(*f) {
                Some(s) => out.push_str(&s),
                None => {
                    return Err(json_error(format!(
                        "json: unsupported value: {}",
                        format_g(*f, false)
                    )))
                }
            },
            Yaml::Str(s) => write_string(s.as_bytes(), out),
            Yaml::Binary(b) => write_string(b, out),
            Yaml::Timestamp(t) => write_string(t.to_string().as_bytes(), out),
            Yaml::Seq(items) => {
                out.push('[');
                stack.push(Work::Text("]"));
                for (i, item) in items.iter().enumerate().rev() {
                    stack.push(Work::Value(&item.value));
                    if i > 0 {
                        stack.push(Work::Text(","));
                    }
                }
            }
            Yaml::Map(pairs) => {
                // Keys that stringify alike collide; the later one wins (Go's order is random).
                let mut by_key: std::collections::BTreeMap<Vec<u8>, &Node> = Default::default();
                for (k, v) in pairs {
                    by_key.insert(key_string(&k.value, &v.value)?, v);
                }
                out.push('{');
                stack.push(Work::Text("}"));
                let entries: Vec<(Vec<u8>, &Node)> = by_key.into_iter().collect();
                let n = entries.len();
                for (i, (k, v)) in entries.into_iter().enumerate().rev() {
                    stack.push(Work::Value(&v.value));
                    stack.push(Work::Key(k));
                    if i > 0 && i < n {
                        stack.push(Work::Text(","));
                    }
                }
            }
        }
    }
    Ok(())
}

/// The key as sigs.k8s.io/yaml stringifies it; floats use go-yaml's 32-bit `'g'` form.
fn key_string(k: &Yaml, v: &Yaml) -> Result<Vec<u8>, Error> {
    Ok(match k {
        Yaml::Str(s) => s.as_bytes().to_vec(),
        Yaml::Binary(b) => b.clone(),
        Yaml::Int(i) => i.to_string().into_bytes(),
        Yaml::Float(f) => {
            let s = format_g(*f, true);
            match s.as_str() {
                "+Inf" => ".inf".into(),
                "-Inf" => "-.inf".into(),
                "NaN" => ".nan".into(),
                _ => s.into_bytes(),
            }
        }
        Yaml::Bool(b) => if *b { "true" } else { "false" }.into(),
        Yaml::Timestamp(t) => t.to_string().into_bytes(),
        Yaml::Null | Yaml::BigInt(_) | Yaml::Seq(_) | Yaml::Map(_) => {
            let type_name = match k {
                Yaml::Null => "%!s(<nil>)",
                Yaml::BigInt(_) => "uint64",
                Yaml::Seq(_) => "[]interface {}",
                _ => "map[interface {}]interface {}",
            };
            return Err(json_error(format!(
                "unsupported map key of type: {type_name}, key: {}, value: {}",
                go_sharp_v(k),
                go_sharp_v(v)
            )));
        }
    })
}

/// Go's `encoding/json` string encoding with HTML escaping (the `json.Marshal` default):
/// invalid UTF-8 bytes become `\ufffd` one by one.
pub(crate) fn write_string(bytes: &[u8], out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    let mut rest = bytes;
    while !rest.is_empty() {
        let (c, size) = decode_rune(rest);
        match c {
            None => out.push_str("\\ufffd"),
            Some(c) => match c {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '<' | '>' | '&' | '\u{0}'..='\u{1f}' => {
                    let b = c as u32;
                    out.push_str("\\u00");
                    out.push(HEX[(b >> 4) as usize] as char);
                    out.push(HEX[(b & 0xF) as usize] as char);
                }
                '\u{2028}' => out.push_str("\\u2028"),
                '\u{2029}' => out.push_str("\\u2029"),
                _ => out.push(c),
            },
        }
        rest = &rest[size..];
    }
    out.push('"');
}

/// `utf8.DecodeRune`: a character and its width, or `None` and width 1 for an invalid byte.
fn decode_rune(b: &[u8]) -> (Option<char>, usize) {
    let width = match b[0] {
        0x00..=0x7F => 1,
        0xC2..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF4 => 4,
        _ => return (None, 1),
    };
    if b.len() < width {
        return (None, 1);
    }
    match std::str::from_utf8(&b[..width]) {
        Ok(s) => (s.chars().next(), width),
        Err(_) => (None, 1),
    }
}

/// Go's `%+#v` of a decoded value, for error messages.
pub(crate) fn go_sharp_v(v: &Yaml) -> String {
    match v {
        Yaml::Null => "<nil>".into(),
        Yaml::Bool(b) => b.to_string(),
        Yaml::Int(i) => i.to_string(),
        Yaml::BigInt(s) => match s.parse::<u64>() {
            Ok(u) => format!("{u:#x}"),
            Err(_) => s.clone(),
        },
        Yaml::Float(f) => format_g(*f, false),
        Yaml::Str(s) => go_quote(s.as_bytes()),
        Yaml::Binary(b) => go_quote(b),
        Yaml::Timestamp(t) => go_quote(t.to_string().as_bytes()),
        Yaml::Seq(items) => {
            let inner: Vec<String> = items.iter().map(|n| go_sharp_v_elem(&n.value)).collect();
            format!("[]interface {{}}{{{}}}", inner.join(", "))
        }
        Yaml::Map(pairs) => {
            let mut sorted: Vec<&(Node, Node)> = pairs.iter().collect();
            sorted.sort_by(|a, b| fmt_key_order(&a.0.value, &b.0.value));
            let inner: Vec<String> = sorted
                .iter()
                .map(|(k, v)| {
                    format!(
                        "{}:{}",
                        go_sharp_v_elem(&k.value),
                        go_sharp_v_elem(&v.value)
                    )
                })
                .collect();
            format!("map[interface {{}}]interface {{}}{{{}}}", inner.join(", "))
        }
    }
}

/// Go's `strconv.Quote`: printable characters (letters, marks, numbers, punctuation, symbols,
/// the ASCII space) as they are, the rest escaped.
fn go_quote(bytes: &[u8]) -> String {
    use unicode_general_category::{get_general_category, GeneralCategory as G};
    let printable = |c: char| {
        c == ' '
            || !matches!(
                get_general_category(c),
                G::SpaceSeparator
                    | G::LineSeparator
                    | G::ParagraphSeparator
                    | G::Control
                    | G::Format
                    | G::Surrogate
                    | G::PrivateUse
                    | G::Unassigned
            )
    };
    let mut out = String::from("\"");
    let mut rest = bytes;
    while !rest.is_empty() {
        let (c, size) = decode_rune(rest);
        match c {
            None => out.push_str(&format!("\\x{:02x}", rest[0])),
            Some('"') => out.push_str("\\\""),
            Some('\\') => out.push_str("\\\\"),
            Some('\u{7}') => out.push_str("\\a"),
            Some('\u{8}') => out.push_str("\\b"),
            Some('\u{c}') => out.push_str("\\f"),
            Some('\n') => out.push_str("\\n"),
            Some('\r') => out.push_str("\\r"),
            Some('\t') => out.push_str("\\t"),
            Some('\u{b}') => out.push_str("\\v"),
            Some(c) if printable(c) => out.push(c),
            Some(c) if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            Some(c) if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            Some(c) => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
        rest = &rest[size..];
    }
    out.push('"');
    out
}

/// `fmt`'s order for `interface{}` map keys: by concrete type (in the order Go's type
/// descriptors happen to sit in Helm's binary, observed as nil, string, uint64, int, float64,
/// bool), then by value.
fn fmt_key_order(a: &Yaml, b: &Yaml) -> std::cmp::Ordering {
    fn rank(v: &Yaml) -> u8 {
        match v {
            Yaml::Null => 0,
            Yaml::Str(_) | Yaml::Binary(_) | Yaml::Timestamp(_) => 1,
            Yaml::BigInt(_) => 2,
            Yaml::Int(_) => 3,
            Yaml::Float(_) => 4,
            Yaml::Bool(_) => 5,
            Yaml::Seq(_) => 6,
            Yaml::Map(_) => 7,
        }
    }
    rank(a).cmp(&rank(b)).then_with(|| match (a, b) {
        (Yaml::Str(x), Yaml::Str(y)) => x.cmp(y),
        (Yaml::BigInt(x), Yaml::BigInt(y)) => x
            .parse::<u64>()
            .unwrap_or(0)
            .cmp(&y.parse::<u64>().unwrap_or(0)),
        (Yaml::Int(x), Yaml::Int(y)) => x.cmp(y),
        (Yaml::Float(x), Yaml::Float(y)) => x.total_cmp(y),
        (Yaml::Bool(x), Yaml::Bool(y)) => x.cmp(y),
        _ => std::cmp::Ordering::Equal,
    })
}

/// Inside a container Go prints `interface{}` elements with their type when they are nil.
fn go_sharp_v_elem(v: &Yaml) -> String {
    match v {
        Yaml::Null => "interface {}(nil)".into(),
        other => go_sharp_v(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: Yaml) -> String {
        to_json(&v).unwrap_or_else(|e| e.to_string())
    }

    #[test]
    fn escaping() {
        let mut out = String::new();
        write_string("a<b>&\u{1}\u{8}\t\u{2028}é\"\\".as_bytes(), &mut out);
        assert_eq!(out, r#""a\u003cb\u003e\u0026\u0001\b\t\u2028é\"\\""#);
        let mut out = String::new();
        write_string(b"\xe2\x82x", &mut out);
        assert_eq!(out, r#""\ufffd\ufffdx""#);
    }

    #[test]
    fn keys_and_floats() {
        let map = Yaml::Map(vec![
            (Node::new(Yaml::Float(1.5)), Node::new(Yaml::Int(1))),
            (Node::new(Yaml::Bool(true)), Node::new(Yaml::Float(0.5))),
            (Node::new(Yaml::Int(10)), Node::new(Yaml::Null)),
        ]);
        // encoding/json sorts keys bytewise: "." sorts before "0".
        assert_eq!(s(map), r#"{"1.5":1,"10":null,"true":0.5}"#);
        assert_eq!(
            s(Yaml::Float(f64::INFINITY)),
            "json: unsupported value: +Inf"
        );
    }
}
