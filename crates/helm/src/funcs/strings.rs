//! Sprig's string functions, with Go's byte-oriented semantics (`trunc` and `substr`
//! count bytes, `upper` uses simple case mapping so `ß` stays `ß`, `title` is Go's
//! deprecated `strings.Title`).
use super::builtins::slice_items;
use super::{check_len, check_list, int, s, Args, FnResult, FuncDef};
use crate::template::exec::Exec;
use crate::value::{format, ListKind, Map, MapKind, Str, Value};
use crate::{func, funcv};

pub const FUNCS: &[FuncDef] = &[
    func!("hello", [], |_, _| Ok(Value::str("Hello!"))),
    func!("abbrev", [Int, Str], |_, a| Ok(Value::string(abbrev(
        int(&a[0]),
        s(&a[1])
    )))),
    func!("abbrevboth", [Int, Int, Str], |_, a| Ok(Value::string(
        abbrevboth(int(&a[0]), int(&a[1]), s(&a[2]))
    ))),
    func!("trunc", [Int, Str], |_, a| Ok(trunc(int(&a[0]), &a[1]))),
    func!("trim", [Str], |_, a| Ok(same_or_new(
        &a[0],
        go_trim_space(s(&a[0]))
    ))),
    func!("upper", [Str], |_, a| Ok(Value::string(
        s(&a[0]).chars().map(upper_char).collect()
    ))),
    func!("lower", [Str], |_, a| Ok(Value::string(
        s(&a[0]).chars().map(lower_char).collect()
    ))),
    func!("title", [Str], |_, a| Ok(Value::string(title(s(&a[0]))))),
    func!("untitle", [Str], |_, a| Ok(Value::string(untitle(
        s(&a[0])
    )))),
    func!("substr", [Int, Int, Str], |_, a| substr(
        int(&a[0]),
        int(&a[1]),
        s(&a[2])
    )),
    func!("repeat", [Int, Str], repeat),
    func!("trimall", [Str, Str], |_, a| Ok(Value::str(
        s(&a[1]).trim_matches(|c| s(&a[0]).contains(c))
    ))),
    func!("trimAll", [Str, Str], |_, a| Ok(Value::str(
        s(&a[1]).trim_matches(|c| s(&a[0]).contains(c))
    ))),
    func!("trimSuffix", [Str, Str], |_, a| Ok(same_or_new(
        &a[1],
        s(&a[1]).strip_suffix(s(&a[0])).unwrap_or(s(&a[1]))
    ))),
    func!("trimPrefix", [Str, Str], |_, a| Ok(same_or_new(
        &a[1],
        s(&a[1]).strip_prefix(s(&a[0])).unwrap_or(s(&a[1]))
    ))),
    func!("nospace", [Str], |_, a| Ok(Value::string(
        s(&a[0]).chars().filter(|c| !is_go_space(*c)).collect()
    ))),
    func!("initials", [Str], |_, a| Ok(Value::string(initials(s(
        &a[0]
    ))))),
    func!("swapcase", [Str], |_, a| Ok(Value::string(swapcase(s(
        &a[0]
    ))))),
    func!("snakecase", [Str], |_, a| Ok(Value::string(word_case(
        s(&a[0]),
        '_'
    )))),
    func!("kebabcase", [Str], |_, a| Ok(Value::string(word_case(
        s(&a[0]),
        '-'
    )))),
    func!("camelcase", [Str], |_, a| Ok(Value::string(camelcase(s(
        &a[0]
    ))))),
    func!("wrap", [Int, Str], |_, a| Ok(Value::string(wrap(
        s(&a[1]),
        int(&a[0]),
        "\n",
        false
    )))),
    func!("wrapWith", [Int, Str, Str], |_, a| Ok(Value::string(wrap(
        s(&a[2]),
        int(&a[0]),
        s(&a[1]),
        true
    )))),
    func!("contains", [Str, Str], |_, a| Ok(Value::Bool(
        s(&a[1]).contains(s(&a[0]))
    ))),
    func!("hasPrefix", [Str, Str], |_, a| Ok(Value::Bool(
        s(&a[1]).starts_with(s(&a[0]))
    ))),
    func!("hasSuffix", [Str, Str], |_, a| Ok(Value::Bool(
        s(&a[1]).ends_with(s(&a[0]))
    ))),
    funcv!("quote", [], Any, |_, a| {
        let mut out = String::new();
        for v in a.iter().filter(|v| !v.is_nil()) {
            // Each quoted operand is at least `""`: a non-empty buffer has one before it.
            if !out.is_empty() {
                out.push(' ');
            }
            match v {
                Value::Str(s) => format::quote_into(&mut out, s, false),
                other => format::quote_into(&mut out, &strval(other), false),
            }
        }
        Ok(Value::string(out))
    }),
    funcv!("squote", [], Any, |_, a| Ok(Value::string(
        a.iter()
            .filter(|v| !v.is_nil())
            .map(|v| format!("'{}'", format::sprint_value(v)))
            .collect::<Vec<_>>()
            .join(" ")
    ))),
    funcv!("cat", [], Any, |_, a| {
        let v: Vec<Value> = a.into_iter().filter(|v| !v.is_nil()).collect();
        let f = vec!["%v"; v.len()].join(" ");
        Ok(Value::string(format::sprintf(&f, &v)))
    }),
    func!("indent", [Int, Str], |ex, a| indent(
        ex,
        int(&a[0]),
        s(&a[1]),
        false
    )),
    func!("nindent", [Int, Str], |ex, a| indent(
        ex,
        int(&a[0]),
        s(&a[1]),
        true
    )),
    func!("replace", [Str, Str, Str], |ex, a| {
        let (old, new, src) = (s(&a[0]), s(&a[1]), s(&a[2]));
        let count = if old.is_empty() {
            src.chars().count() + 1
        } else {
            src.matches(old).count()
        };
        check_len(ex, src.len() + count.saturating_mul(new.len()))?;
        Ok(Value::string(go_replace(src, old, new)))
    }),
    func!("plural", [Str, Str, Int], |_, a| Ok(if int(&a[2]) == 1 {
        a[0].clone()
    } else {
        a[1].clone()
    })),
    func!("toString", [Any], |_, a| Ok(match &a[0] {
        Value::Str(_) => a[0].clone(),
        other => Value::string(strval(other)),
    })),
    func!("split", [Str, Str], |_, a| Ok(parts_map(go_split(
        s(&a[1]),
        s(&a[0]),
        -1
    )))),
    func!("splitn", [Str, Int, Str], |_, a| Ok(parts_map(go_split(
        s(&a[2]),
        s(&a[0]),
        int(&a[1])
    )))),
    func!("splitList", [Str, Str], |ex, a| {
        let parts = go_split(s(&a[1]), s(&a[0]), -1);
        check_list(ex, parts.len())?;
        Ok(Value::str_list(parts))
    }),
    func!("toStrings", [Any], |_, a| Ok(Value::str_list(strslice(
        &a[0]
    )))),
    func!("join", [Str, Any], |_, a| Ok(Value::string(
        strslice(&a[1]).join(s(&a[0]))
    ))),
    func!("sortAlpha", [Any], |_, a| {
        let mut v = match &a[0] {
            Value::List(_) | Value::Bytes(_) => strslice(&a[0]),
            other => vec![strval(other)],
        };
        v.sort();
        Ok(Value::str_list(v))
    }),
];

/// Sprig's `strval`: strings as is, `[]byte` as text, `String()` of objects, else `%v`.
pub fn strval(v: &Value) -> String {
    match v {
        Value::Str(s) => String::from(&**s),
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        Value::Obj(o) => match o.stringer(false) {
            Some(s) => s,
            None => format::sprint_value(v),
        },
        _ => format::sprint_value(v),
    }
}

/// Sprig's `strslice`: a list as strings, nils dropped; a scalar as a one-item list.
pub fn strslice(v: &Value) -> Vec<String> {
    match v {
        Value::List(l) => {
            if l.kind == ListKind::Str {
                return l.items.iter().map(strval).collect();
            }
            l.items.iter().filter(|x| !x.is_nil()).map(strval).collect()
        }
        Value::Bytes(_) => v
            .list_items()
            .unwrap_or_default()
            .iter()
            .map(strval)
            .collect(),
        Value::Nil => Vec::new(),
        other => vec![strval(other)],
    }
}

fn parts_map(parts: Vec<String>) -> Value {
    let m = Map::new(MapKind::Str);
    for (i, p) in parts.into_iter().enumerate() {
        m.insert(Str::from(format!("_{i}")), Value::string(p));
    }
    Value::Map(m)
}

/// Go's `unicode.IsSpace`.
pub fn is_go_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\x0b' | '\x0c' | '\r' | ' ' | '\u{85}' | '\u{A0}'
    ) || (c as u32 > 0xff && c.is_whitespace())
}

/// Go's `strings.TrimSpace`.
pub fn go_trim_space(s: &str) -> &str {
    s.trim_matches(is_go_space)
}

/// Go's simple upper-case mapping (one rune to one rune).
pub fn upper_char(c: char) -> char {
    let mut it = c.to_uppercase();
    match (it.next(), it.next()) {
        (Some(u), None) => u,
        _ => c,
    }
}

pub fn lower_char(c: char) -> char {
    let mut it = c.to_lowercase();
    match (it.next(), it.next()) {
        (Some(l), None) => l,
        _ => c,
    }
}

/// Go's `strings.Title`: upper-case letters that start a word; a word starts after a
/// separator (not a letter, digit or `_`).
fn title(s: &str) -> String {
    let mut prev = ' ';
    s.chars()
        .map(|c| {
            let sep = !(prev.is_alphanumeric() || prev == '_');
            prev = c;
            if sep {
                // unicode.ToTitle: title case equals upper case except for digraphs.
                upper_char(c)
            } else {
                c
            }
        })
        .collect()
}

fn untitle(s: &str) -> String {
    let mut it = s.chars();
    match it.next() {
        Some(c) => std::iter::once(lower_char(c)).chain(it).collect(),
        None => String::new(),
    }
}

fn swapcase(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_uppercase() {
                lower_char(c)
            } else if c.is_lowercase() {
                upper_char(c)
            } else {
                c
            }
        })
        .collect()
}

fn initials(s: &str) -> String {
    let mut out = String::new();
    let mut last_sep = true;
    for c in s.chars() {
        if is_go_space(c) {
            last_sep = true;
        } else if last_sep {
            out.push(c);
            last_sep = false;
        }
    }
    out
}

/// Byte slicing that keeps Go's result when a cut falls inside a UTF-8 sequence
/// (the invalid bytes become U+FFFD, as they would when printed).
fn byte_slice(s: &str, from: usize, to: usize) -> String {
    String::from_utf8_lossy(&s.as_bytes()[from..to]).into_owned()
}

/// Sprig's `trunc` of the string `v`; a string that needs no cut is returned as it is.
fn trunc(c: i64, v: &Value) -> Value {
    let s = s(v);
    let n = s.len() as i64;
    if c < 0 && n + c > 0 {
        return Value::string(byte_slice(s, (n + c) as usize, s.len()));
    }
    if c >= 0 && n > c {
        return Value::string(byte_slice(s, 0, c as usize));
    }
    v.clone()
}

/// `part` (a slice of the string `orig`) as a value, sharing `orig` when it is all of it.
fn same_or_new(orig: &Value, part: &str) -> Value {
    match orig {
        Value::Str(o) if o.len() == part.len() && std::ptr::eq(o.as_ptr(), part.as_ptr()) => {
            orig.clone()
        }
        _ => Value::str(part),
    }
}

/// A value as a shared string: a string value without copying it.
pub fn str_of(v: &Value) -> Str {
    match v {
        Value::Str(s) => s.clone(),
        other => Str::from(strval(other)),
    }
}

fn substr(start: i64, end: i64, s: &str) -> FnResult {
    let n = s.len() as i64;
    let oob = |lo: i64, hi: i64| -> super::FnError {
        if hi > n || hi < 0 {
            format!("runtime error: slice bounds out of range [:{hi}] with length {n}").into()
        } else {
            format!("runtime error: slice bounds out of range [{lo}:{hi}]").into()
        }
    };
    if start < 0 {
        if end < 0 || end > n {
            return Err(oob(0, end));
        }
        return Ok(Value::string(byte_slice(s, 0, end as usize)));
    }
    if end < 0 || end > n {
        if start > n {
            return Err(format!("runtime error: slice bounds out of range [{start}:{n}]").into());
        }
        return Ok(Value::string(byte_slice(s, start as usize, s.len())));
    }
    if start > end {
        return Err(oob(start, end));
    }
    Ok(Value::string(byte_slice(s, start as usize, end as usize)))
}

fn repeat(ex: &mut Exec<'_>, a: Args) -> FnResult {
    let count = int(&a[0]);
    let st = s(&a[1]);
    if count < 0 {
        return Err("strings: negative Repeat count".into());
    }
    check_len(ex, (count as usize).saturating_mul(st.len()))?;
    Ok(Value::string(st.repeat(count as usize)))
}

fn indent(ex: &Exec<'_>, spaces: i64, v: &str, newline: bool) -> FnResult {
    if spaces < 0 {
        return Err("strings: negative Repeat count".into());
    }
    let bytes = v.as_bytes();
    let lines = bytes.iter().filter(|&&b| b == b'\n').count() + 1;
    check_len(ex, v.len() + lines.saturating_mul(spaces as usize + 1))?;
    let pad = spaces as usize;
    let mut out = String::with_capacity(v.len() + lines * pad + 1);
    if newline {
        out.push('\n');
    }
    push_spaces(&mut out, pad);
    // Lines are copied whole; a break is followed by the pad.
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'\n' {
            out.push_str(&v[start..=i]);
            push_spaces(&mut out, pad);
            start = i + 1;
        }
    }
    out.push_str(&v[start..]);
    Ok(Value::string(out))
}

fn push_spaces(out: &mut String, mut n: usize) {
    const SPACES: &str = "                                ";
    while n > 0 {
        let k = n.min(SPACES.len());
        out.push_str(&SPACES[..k]);
        n -= k;
    }
}

/// Go's `strings.Replace(s, old, new, -1)`, including the empty-`old` case.
pub fn go_replace(s: &str, old: &str, new: &str) -> String {
    if old.is_empty() {
        let mut out = String::with_capacity(s.len() + new.len() * (s.len() + 1));
        out.push_str(new);
        for c in s.chars() {
            out.push(c);
            out.push_str(new);
        }
        return out;
    }
    s.replace(old, new)
}

/// Go's `strings.SplitN` (`n < 0` means all; an empty separator splits into runes).
pub fn go_split(s: &str, sep: &str, n: i64) -> Vec<String> {
    if n == 0 {
        return Vec::new();
    }
    if sep.is_empty() {
        let chars: Vec<String> = s.chars().map(String::from).collect();
        if n > 0 && (n as usize) < chars.len() {
            let mut head: Vec<String> = chars[..n as usize - 1].to_vec();
            let rest: usize = head.iter().map(String::len).sum();
            head.push(s[rest..].to_string());
            return head;
        }
        return chars;
    }
    if n < 0 {
        return s.split(sep).map(String::from).collect();
    }
    s.splitn(n as usize, sep).map(String::from).collect()
}

fn abbrev(width: i64, s: &str) -> String {
    if width < 4 {
        return s.to_string();
    }
    abbreviate_full(s, 0, width).unwrap_or_default()
}

fn abbrevboth(left: i64, right: i64, s: &str) -> String {
    if right < 4 || (left > 0 && right < 7) {
        return s.to_string();
    }
    abbreviate_full(s, left, right).unwrap_or_default()
}

/// goutils' `AbbreviateFull` (commons-lang's algorithm), on bytes.
fn abbreviate_full(s: &str, offset: i64, max: i64) -> Option<String> {
    if s.is_empty() {
        return Some(String::new());
    }
    if max < 4 {
        return None;
    }
    let n = s.len() as i64;
    if n <= max {
        return Some(s.to_string());
    }
    let mut offset = offset.min(n);
    if n - offset < max - 3 {
        offset = n - (max - 3);
    }
    if offset <= 4 {
        return Some(format!("{}...", byte_slice(s, 0, (max - 3) as usize)));
    }
    if max < 7 {
        return None;
    }
    if offset + max - 3 < n {
        let rest = byte_slice(s, offset as usize, s.len());
        return Some(format!("...{}", abbreviate_full(&rest, 0, max - 3)?));
    }
    Some(format!(
        "...{}",
        byte_slice(s, (n - (max - 3)) as usize, s.len())
    ))
}

/// goutils' `WrapCustom`, on bytes.
fn wrap(s: &str, width: i64, newline: &str, wrap_long: bool) -> String {
    if s.is_empty() {
        return String::new();
    }
    let newline = if newline.is_empty() { "\n" } else { newline };
    let width = width.max(1) as usize;
    let b = s.as_bytes();
    let n = b.len();
    let mut offset = 0usize;
    let mut out = String::new();
    while n - offset > width {
        if b[offset] == b' ' {
            offset += 1;
            continue;
        }
        let end = (width + offset + 1).min(n);
        let space = b[offset..end].iter().rposition(|&c| c == b' ');
        match space {
            Some(sp) => {
                let at = offset + sp;
                out.push_str(&byte_slice(s, offset, at));
                out.push_str(newline);
                offset = at + 1;
            }
            None => {
                let end = width + offset;
                if wrap_long {
                    out.push_str(&byte_slice(s, offset, end));
                    out.push_str(newline);
                    offset += width;
                } else {
                    match b[end..].iter().position(|&c| c == b' ') {
                        None => {
                            out.push_str(&byte_slice(s, offset, n));
                            offset = n;
                        }
                        Some(i) => {
                            let at = i + end;
                            out.push_str(&byte_slice(s, offset, at));
                            out.push_str(newline);
                            offset = at + 1;
                        }
                    }
                }
            }
        }
    }
    out.push_str(&byte_slice(s, offset, n));
    out
}

fn is_connector(c: char) -> bool {
    c == '-' || c == '_' || is_go_space(c)
}

/// xstrings' `ToCamelCase`.
fn camelcase(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    let mut r0 = '\0';
    let mut got = false;
    for c in chars.by_ref() {
        if !is_connector(c) {
            r0 = upper_char(c);
            got = true;
            break;
        }
        out.push(c);
    }
    if !got {
        return out;
    }
    for c in chars {
        let r1 = r0;
        r0 = c;
        if is_connector(r0) && is_connector(r1) {
            out.push(r1);
            continue;
        }
        if is_connector(r1) {
            r0 = upper_char(r0);
        } else {
            out.push(r1);
        }
    }
    out.push(r0);
    out
}

/// Splits camel-case and separated words and joins them lower-cased with `sep`
/// (xstrings' `ToSnakeCase`/`ToKebabCase` for ordinary identifiers).
fn word_case(s: &str, sep: char) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut words: Vec<String> = Vec::new();
    let mut cur = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if is_connector(c) {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            continue;
        }
        if c.is_uppercase() && !cur.is_empty() {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            if prev.is_lowercase() || prev.is_ascii_digit() || (prev.is_uppercase() && next_lower) {
                words.push(std::mem::take(&mut cur));
            }
        }
        cur.push(lower_char(c));
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words.join(&sep.to_string())
}

#[allow(dead_code)]
fn _items(v: &Value) -> Result<Vec<Value>, super::FnError> {
    slice_items(v, "use")
}
