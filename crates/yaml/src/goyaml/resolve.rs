//! go-yaml v2's `resolve`: the YAML 1.1 reading of a scalar, given its tag.

use super::strconv::{parse_float, parse_int, parse_uint};
use super::timestamp::is_timestamp;

pub(crate) const STR: &str = "tag:yaml.org,2002:str";
pub(crate) const BOOL: &str = "tag:yaml.org,2002:bool";
pub(crate) const INT: &str = "tag:yaml.org,2002:int";
pub(crate) const FLOAT: &str = "tag:yaml.org,2002:float";
pub(crate) const NULL: &str = "tag:yaml.org,2002:null";
pub(crate) const TIMESTAMP: &str = "tag:yaml.org,2002:timestamp";
pub(crate) const BINARY: &str = "tag:yaml.org,2002:binary";
pub(crate) const MERGE: &str = "tag:yaml.org,2002:merge";

/// A resolved scalar, in the Go types go-yaml produces for `interface{}`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Resolved {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    /// A string; timestamps stay strings when decoded into `interface{}`.
    Str,
}

/// `resolve(tag, in)`: the resolved tag and value, or go-yaml's "cannot decode" error text
/// when an explicit tag disagrees with the content.
pub(crate) fn resolve(tag: &str, input: &str) -> Result<(String, Resolved), String> {
    if !resolvable(tag) {
        return Ok((tag.to_string(), Resolved::Str));
    }
    let (rtag, value) = resolve_implicit(tag, input);
    if tag.is_empty() || tag == rtag || tag == STR || tag == BINARY {
        return Ok((rtag.to_string(), value));
    }
    if tag == FLOAT && rtag == INT {
        if let Resolved::Int(i) = value {
            return Ok((FLOAT.to_string(), Resolved::Float(i as f64)));
        }
    }
    Err(format!(
        "cannot decode {} `{}` as a {}",
        short_tag(rtag),
        input,
        short_tag(tag)
    ))
}

fn resolvable(tag: &str) -> bool {
    matches!(tag, "" | STR | BOOL | INT | FLOAT | NULL | TIMESTAMP)
}

pub(crate) fn short_tag(tag: &str) -> String {
    match tag.strip_prefix("tag:yaml.org,2002:") {
        Some(rest) => format!("!!{rest}"),
        None => tag.to_string(),
    }
}

pub(crate) fn resolve_implicit(tag: &str, input: &str) -> (&'static str, Resolved) {
    let hint = match input.as_bytes().first() {
        None => b'N',
        Some(b'+' | b'-') => b'S',
        Some(b'0'..=b'9') => b'D',
        Some(b'y' | b'Y' | b'n' | b'N' | b't' | b'T' | b'f' | b'F' | b'o' | b'O' | b'~') => b'M',
        Some(b'.') => b'.',
        _ => 0,
    };
    if hint == 0 || tag == STR || tag == BINARY {
        return (STR, Resolved::Str);
    }
    if let Some(found) = lookup(input) {
        return found;
    }
    match hint {
        b'.' => {
            if let Ok(f) = parse_float(input) {
                return (FLOAT, Resolved::Float(f));
            }
        }
        b'D' | b'S' => {
            if (tag.is_empty() || tag == TIMESTAMP) && is_timestamp(input) {
                return (TIMESTAMP, Resolved::Str);
            }
            let plain: String = input.chars().filter(|&c| c != '_').collect();
            if let Ok(i) = parse_int(&plain) {
                return (INT, Resolved::Int(i));
            }
            if let Ok(u) = parse_uint(&plain) {
                return (INT, Resolved::Uint(u));
            }
            if is_yaml_style_float(&plain) {
                if let Ok(f) = parse_float(&plain) {
                    return (FLOAT, Resolved::Float(f));
                }
            }
            // go-yaml's explicit "0b"/"-0b" branches are covered by ParseInt's prefixes.
        }
        _ => {}
    }
    (STR, Resolved::Str)
}

/// go-yaml's `resolveMap`: the YAML 1.1 words for booleans, null, the float specials and `<<`.
fn lookup(input: &str) -> Option<(&'static str, Resolved)> {
    Some(match input {
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            (BOOL, Resolved::Bool(true))
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            (BOOL, Resolved::Bool(false))
        }
        "" | "~" | "null" | "Null" | "NULL" => (NULL, Resolved::Null),
        ".nan" | ".NaN" | ".NAN" => (FLOAT, Resolved::Float(f64::NAN)),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            (FLOAT, Resolved::Float(f64::INFINITY))
        }
        "-.inf" | "-.Inf" | "-.INF" => (FLOAT, Resolved::Float(f64::NEG_INFINITY)),
        _ => return None,
    })
}

/// `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`
fn is_yaml_style_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    if matches!(b.first(), Some(b'+' | b'-')) {
        i += 1;
    }
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - start
    };
    if b.get(i) == Some(&b'.') {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    } else {
        if digits(&mut i) == 0 {
            return false;
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            digits(&mut i);
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// go-yaml's `isBase60Float`: the encoder quotes these for older parsers although v2 itself
/// reads them as strings. `^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$`
pub(crate) fn is_base60_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    if matches!(b.first(), Some(b'+' | b'-')) {
        i += 1;
    }
    if !b.get(i).is_some_and(u8::is_ascii_digit) {
        return false;
    }
    while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'_') {
        i += 1;
    }
    let mut groups = 0;
    while b.get(i) == Some(&b':') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() && i - start < 2 {
            i += 1;
        }
        match i - start {
            1 => {}
            2 if b[start] <= b'5' => {}
            _ => return false,
        }
        groups += 1;
    }
    if groups == 0 {
        return false;
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'_') {
            i += 1;
        }
    }
    i == b.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(s: &str) -> Resolved {
        match resolve("", s) {
            Ok((_, v)) => v,
            Err(e) => panic!("{e}"),
        }
    }

    /// The facts table of helm-operator-facts.md §2.6 (checked against Helm v4.2.3).
    #[test]
    fn yaml11_table() {
        for t in ["yes", "on", "Yes", "True", "y", "Y", "ON"] {
            assert_eq!(plain(t), Resolved::Bool(true), "{t}");
        }
        for f in ["n", "no", "NO", "off", "false"] {
            assert_eq!(plain(f), Resolved::Bool(false), "{f}");
        }
        assert_eq!(plain("0777"), Resolved::Int(511));
        assert_eq!(plain("010"), Resolved::Int(8));
        assert_eq!(plain("0o17"), Resolved::Int(15));
        assert_eq!(plain("0x1F"), Resolved::Int(31));
        assert_eq!(plain("1_000"), Resolved::Int(1000));
        assert_eq!(plain("1e3"), Resolved::Float(1000.0));
        assert_eq!(plain("3.0e+2"), Resolved::Float(300.0));
        assert_eq!(plain("1.0"), Resolved::Float(1.0));
        assert_eq!(plain("08"), Resolved::Float(8.0));
        assert_eq!(plain("2024-01-01"), Resolved::Str);
        assert_eq!(plain("~"), Resolved::Null);
        assert_eq!(plain(""), Resolved::Null);
        assert_eq!(
            plain("12345678901234567890"),
            Resolved::Uint(12345678901234567890)
        );
        assert_eq!(plain(".inf"), Resolved::Float(f64::INFINITY));
        assert_eq!(plain("1e400"), Resolved::Str);
        assert_eq!(plain("NaN"), Resolved::Str);
        assert_eq!(plain("1:20"), Resolved::Str);
        // `<<` is only a merge key by its text in a mapping key; `resolve` leaves it a string.
        assert_eq!(plain("<<"), Resolved::Str);
        assert_eq!(plain("+.5"), Resolved::Float(0.5));
        assert_eq!(
            resolve("", "2024-01-01").map(|r| r.0),
            Ok(TIMESTAMP.to_string())
        );
    }

    #[test]
    fn explicit_tags() {
        assert_eq!(resolve(STR, "123"), Ok((STR.to_string(), Resolved::Str)));
        assert_eq!(
            resolve(FLOAT, "1"),
            Ok((FLOAT.to_string(), Resolved::Float(1.0)))
        );
        assert_eq!(
            resolve(INT, "1.5"),
            Err("cannot decode !!float `1.5` as a !!int".to_string())
        );
        assert_eq!(
            resolve("!foo", "1"),
            Ok(("!foo".to_string(), Resolved::Str))
        );
    }

    #[test]
    fn base60() {
        assert!(is_base60_float("1:20"));
        assert!(is_base60_float("12:30:45"));
        assert!(is_base60_float("-1:59.5"));
        assert!(!is_base60_float("1:60"));
        assert!(!is_base60_float("a:1"));
        assert!(!is_base60_float("1:"));
    }
}
