//! Go's `encoding/json`, as `toJson`, `fromJson`, `toYaml` (which marshals to JSON
//! first) and values loading use it.
//!
//! Encoding: map keys sorted, `<`, `>`, `&`, U+2028 and U+2029 escaped as `\u003c`…
//! (unless HTML escaping is off, as in `toRawJson`), `\b` and `\f` short forms, floats in
//! `strconv` shortest form with exponents only below 1e-6 and from 1e21 (`1e-7`, not
//! `1e-07`), `[]byte` as base64, NaN and infinities refused. Decoding: numbers are
//! `float64` (or `int64` when integral, for the apiserver's rules), invalid UTF-8 becomes
//! U+FFFD, the last of duplicate keys wins, nesting is limited.
use std::collections::BTreeMap;
use std::fmt::Write;

use super::format::format_float;
use super::{Data, Value};

/// Go's `encoding/json` nesting limit.
const MAX_DEPTH: usize = 1_000;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct JsonError(pub String);

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Numbers {
    /// `encoding/json` into `interface{}`.
    Float,
    /// apimachinery's JSON: integral numbers as int64.
    Int64OrFloat,
}

/// Options of a JSON encoder.
#[derive(Clone, Copy)]
pub struct Encode {
    pub escape_html: bool,
    /// `MarshalIndent(v, "", indent)` when set.
    pub indent: Option<&'static str>,
}

impl Encode {
    pub const MARSHAL: Encode = Encode {
        escape_html: true,
        indent: None,
    };
}

/// `json.Marshal(v)`.
pub fn marshal(v: &Value) -> Result<String, JsonError> {
    encode(v, Encode::MARSHAL)
}

pub fn encode(v: &Value, opts: Encode) -> Result<String, JsonError> {
    let mut out = String::new();
    encode_value(&mut out, v, opts, 0)?;
    Ok(out)
}

fn newline(out: &mut String, opts: Encode, depth: usize) {
    if let Some(ind) = opts.indent {
        out.push('\n');
        for _ in 0..depth {
            out.push_str(ind);
        }
    }
}

fn encode_value(out: &mut String, v: &Value, opts: Encode, depth: usize) -> Result<(), JsonError> {
    if depth > MAX_DEPTH {
        return Err(JsonError(
            "json: unsupported value: encountered a cycle".into(),
        ));
    }
    match v {
        Value::Nil => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) | Value::Int64(i) => {
            let _ = write!(out, "{i}");
        }
        Value::Uint64(u) => {
            let _ = write!(out, "{u}");
        }
        Value::Float(f) => out.push_str(&float(*f)?),
        Value::Str(s) => string(out, s, opts.escape_html),
        Value::Bytes(b) => {
            out.push('"');
            out.push_str(&crate::funcs::encoding::base64_std(b));
            out.push('"');
        }
        Value::List(l) => {
            out.push('[');
            for (k, x) in l.items.iter().enumerate() {
                if k > 0 {
                    out.push(',');
                }
                newline(out, opts, depth + 1);
                encode_value(out, x, opts, depth + 1)?;
            }
            if !l.items.is_empty() {
                newline(out, opts, depth);
            }
            out.push(']');
        }
        Value::Map(m) => {
            out.push('{');
            let entries = m.snapshot();
            for (k, (key, x)) in entries.iter().enumerate() {
                if k > 0 {
                    out.push(',');
                }
                newline(out, opts, depth + 1);
                string(out, key, opts.escape_html);
                out.push(':');
                if opts.indent.is_some() {
                    out.push(' ');
                }
                encode_value(out, x, opts, depth + 1)?;
            }
            if !entries.is_empty() {
                newline(out, opts, depth);
            }
            out.push('}');
        }
        Value::Obj(o) => {
            let repr = match o.json_value() {
                Some(r) => r,
                None => {
                    let m = super::Map::new(super::MapKind::Iface);
                    for name in o.field_names() {
                        m.insert(super::Str::from(*name), o.field(name).unwrap_or_default());
                    }
                    Value::Map(m)
                }
            };
            encode_value(out, &repr, opts, depth + 1)?;
        }
    }
    Ok(())
}

/// A float64 as `encoding/json` writes it.
pub fn float(f: f64) -> Result<String, JsonError> {
    if f.is_nan() || f.is_infinite() {
        return Err(JsonError(format!(
            "json: unsupported value: {}",
            super::format::sprint_value(&Value::Float(f))
        )));
    }
    let abs = f.abs();
    let exp = abs != 0.0 && !(1e-6..1e21).contains(&abs);
    let mut s = format_float(f, if exp { 'e' } else { 'f' }, None);
    if exp {
        // Go writes e-07 as e-7.
        let n = s.len();
        let b = s.as_bytes();
        if n >= 4 && b[n - 4] == b'e' && b[n - 3] == b'-' && b[n - 2] == b'0' {
            s.remove(n - 2);
        }
    }
    Ok(s)
}

/// A JSON string with Go's escaping.
pub fn string(out: &mut String, s: &str, escape_html: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '<' | '>' | '&' if escape_html => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Decodes JSON text (one value, then only whitespace).
pub fn decode(text: &str, numbers: Numbers) -> Result<Data, JsonError> {
    let mut p = Parser {
        b: text.as_bytes(),
        i: 0,
        numbers,
    };
    p.ws();
    if p.i >= p.b.len() {
        return Err(JsonError("unexpected end of JSON input".into()));
    }
    let v = p.value(0)?;
    p.ws();
    if p.i < p.b.len() {
        return Err(p.invalid("after top-level value"));
    }
    Ok(v)
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
    numbers: Numbers,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn invalid(&self, context: &str) -> JsonError {
        match self.b.get(self.i) {
            None => JsonError("unexpected end of JSON input".into()),
            Some(&c) => {
                let shown = if c.is_ascii_graphic() || c == b' ' {
                    format!("'{}'", c as char)
                } else {
                    let ch = std::str::from_utf8(&self.b[self.i..])
                        .ok()
                        .and_then(|s| s.chars().next())
                        .unwrap_or(char::from(c));
                    super::format::quote_rune(ch, false)
                };
                JsonError(format!("invalid character {shown} {context}"))
            }
        }
    }

    fn value(&mut self, depth: usize) -> Result<Data, JsonError> {
        if depth > MAX_DEPTH {
            return Err(JsonError("exceeded max depth".into()));
        }
        match self.b.get(self.i) {
            None => Err(JsonError("unexpected end of JSON input".into())),
            Some(b'{') => {
                self.i += 1;
                let mut m = BTreeMap::new();
                self.ws();
                if self.b.get(self.i) == Some(&b'}') {
                    self.i += 1;
                    return Ok(Data::Map(m));
                }
                loop {
                    self.ws();
                    if self.b.get(self.i) != Some(&b'"') {
                        return Err(self.invalid("looking for beginning of object key string"));
                    }
                    let k = self.string()?;
                    self.ws();
                    if self.b.get(self.i) != Some(&b':') {
                        return Err(self.invalid("after object key"));
                    }
                    self.i += 1;
                    self.ws();
                    let v = self.value(depth + 1)?;
                    m.insert(k, v);
                    self.ws();
                    match self.b.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(Data::Map(m));
                        }
                        _ => return Err(self.invalid("after object key:value pair")),
                    }
                }
            }
            Some(b'[') => {
                self.i += 1;
                let mut l = Vec::new();
                self.ws();
                if self.b.get(self.i) == Some(&b']') {
                    self.i += 1;
                    return Ok(Data::List(l));
                }
                loop {
                    self.ws();
                    l.push(self.value(depth + 1)?);
                    self.ws();
                    match self.b.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(Data::List(l));
                        }
                        _ => return Err(self.invalid("after array element")),
                    }
                }
            }
            Some(b'"') => Ok(Data::String(self.string()?)),
            Some(b't') => self.literal("true", Data::Bool(true)),
            Some(b'f') => self.literal("false", Data::Bool(false)),
            Some(b'n') => self.literal("null", Data::Null),
            Some(c) if *c == b'-' || c.is_ascii_digit() => self.number(),
            Some(_) => Err(self.invalid("looking for beginning of value")),
        }
    }

    fn literal(&mut self, word: &str, v: Data) -> Result<Data, JsonError> {
        for (k, &w) in word.as_bytes().iter().enumerate() {
            if self.b.get(self.i) != Some(&w) {
                let ctx = format!(
                    "in literal {word} (expecting '{}')",
                    word.as_bytes()[k] as char
                );
                return Err(self.invalid(&ctx));
            }
            self.i += 1;
        }
        Ok(v)
    }

    fn number(&mut self) -> Result<Data, JsonError> {
        let start = self.i;
        if self.b[self.i] == b'-' {
            self.i += 1;
        }
        match self.b.get(self.i) {
            Some(b'0') => self.i += 1,
            Some(c) if c.is_ascii_digit() => {
                while self.b.get(self.i).is_some_and(u8::is_ascii_digit) {
                    self.i += 1;
                }
            }
            _ => return Err(self.invalid("in numeric literal")),
        }
        let mut integral = true;
        if self.b.get(self.i) == Some(&b'.') {
            integral = false;
            self.i += 1;
            if !self.b.get(self.i).is_some_and(u8::is_ascii_digit) {
                return Err(self.invalid("after decimal point in numeric literal"));
            }
            while self.b.get(self.i).is_some_and(u8::is_ascii_digit) {
                self.i += 1;
            }
        }
        if matches!(self.b.get(self.i), Some(b'e' | b'E')) {
            integral = false;
            self.i += 1;
            if matches!(self.b.get(self.i), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if !self.b.get(self.i).is_some_and(u8::is_ascii_digit) {
                return Err(self.invalid("in exponent of numeric literal"));
            }
            while self.b.get(self.i).is_some_and(u8::is_ascii_digit) {
                self.i += 1;
            }
        }
        let text = std::str::from_utf8(&self.b[start..self.i]).unwrap_or("0");
        if integral && self.numbers == Numbers::Int64OrFloat {
            if let Ok(i) = text.parse::<i64>() {
                return Ok(Data::Int(i));
            }
        }
        match text.parse::<f64>() {
            Ok(f) if f.is_finite() => Ok(Data::Float(f)),
            _ => Err(JsonError(format!(
                "json: cannot unmarshal number {text} into Go value of type float64"
            ))),
        }
    }

    fn string(&mut self) -> Result<String, JsonError> {
        self.i += 1; // opening quote
        let mut out: Vec<u8> = Vec::new();
        loop {
            let Some(&c) = self.b.get(self.i) else {
                return Err(JsonError("unexpected end of JSON input".into()));
            };
            match c {
                b'"' => {
                    self.i += 1;
                    break;
                }
                b'\\' => {
                    self.i += 1;
                    let Some(&e) = self.b.get(self.i) else {
                        return Err(JsonError("unexpected end of JSON input".into()));
                    };
                    self.i += 1;
                    match e {
                        b'"' => out.push(b'"'),
                        b'\\' => out.push(b'\\'),
                        b'/' => out.push(b'/'),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let r = self.hex4()?;
                            let ch = if (0xD800..0xDC00).contains(&r) {
                                // A surrogate pair, if the next escape completes it.
                                let save = self.i;
                                if self.b.get(self.i) == Some(&b'\\')
                                    && self.b.get(self.i + 1) == Some(&b'u')
                                {
                                    self.i += 2;
                                    let lo = self.hex4()?;
                                    if (0xDC00..0xE000).contains(&lo) {
                                        char::from_u32(
                                            0x10000 + ((r - 0xD800) << 10) + (lo - 0xDC00),
                                        )
                                    } else {
                                        self.i = save;
                                        None
                                    }
                                } else {
                                    None
                                }
                            } else {
                                char::from_u32(r)
                            };
                            let ch = ch.unwrap_or('\u{FFFD}');
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                        }
                        _ => {
                            self.i -= 1;
                            return Err(self.invalid("in string escape code"));
                        }
                    }
                }
                c if c < 0x20 => return Err(self.invalid("in string literal")),
                _ => {
                    out.push(c);
                    self.i += 1;
                }
            }
        }
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    fn hex4(&mut self) -> Result<u32, JsonError> {
        let mut r = 0u32;
        for _ in 0..4 {
            let Some(&c) = self.b.get(self.i) else {
                return Err(JsonError("unexpected end of JSON input".into()));
            };
            let d = (c as char)
                .to_digit(16)
                .ok_or_else(|| self.invalid("in \\u hexadecimal character escape"))?;
            r = r * 16 + d;
            self.i += 1;
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marshal_like_go() {
        let v = Value::iface_list(vec![
            Value::str("<a&b>"),
            Value::Float(1.5),
            Value::Float(1e21),
            Value::Float(100000000.0),
            Value::str("\u{8}\u{c}\u{2028}"),
            Value::Float(1e-7),
        ]);
        assert_eq!(
            marshal(&v).unwrap(),
            r#"["\u003ca\u0026b\u003e",1.5,1e+21,100000000,"\b\f\u2028",1e-7]"#
        );
    }

    #[test]
    fn decode_numbers() {
        let d = decode(r#"{"a": 5, "b": 1.5, "c": [1e3]}"#, Numbers::Int64OrFloat).unwrap();
        assert_eq!(d.lookup("a"), Some(&Data::Int(5)));
        assert_eq!(d.lookup("b"), Some(&Data::Float(1.5)));
        let d = decode(r#"{"a": 5}"#, Numbers::Float).unwrap();
        assert_eq!(d.lookup("a"), Some(&Data::Float(5.0)));
    }
}
