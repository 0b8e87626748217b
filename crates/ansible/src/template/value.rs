//! Conversions between JSON (what the API server and the extra vars speak) and minijinja
//! values (what templates compute with), and Python's `str()`/`repr()` of values, which is what
//! Ansible shows whenever a value is rendered into a string.
use minijinja::value::{Value, ValueKind};
use serde_json::Value as Json;

use crate::Error;

/// A JSON value as a template value. `{"__ansible_unsafe": s}` (ansible-operator's
/// `markUnsafe`) becomes a "safe" string: the marker bosun uses for text never templated.
pub fn from_json(j: &Json) -> Value {
    match j {
        Json::Null => Value::from(()),
        Json::Bool(b) => Value::from(*b),
        Json::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                Value::from(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Json::String(s) => Value::from(s.as_str()),
        Json::Array(a) => a.iter().map(from_json).collect(),
        Json::Object(m) => {
            if m.len() == 1 {
                if let Some(Json::String(s)) = m.get("__ansible_unsafe") {
                    return Value::from_safe_string(s.clone());
                }
            }
            Value::from_pairs(
                m.iter()
                    .map(|(k, v)| (Value::from(k.as_str()), from_json(v))),
            )
        }
    }
}

/// How deep a value may nest: serde_json's recursion limit, so the deepest CR spec kube can
/// read from the API server. Values are converted, compared and printed recursively (here
/// and inside minijinja); a bound well under what a 2 MiB worker stack holds in a debug build
/// keeps a hostile role or loop from overflowing it.
pub const MAX_DEPTH: usize = 128;

/// A template value as JSON; undefined values are an error, as Ansible refuses to pass them on.
pub fn to_json(v: &Value) -> Result<Json, Error> {
    to_json_at(v, 1)
}

fn to_json_at(v: &Value, depth: usize) -> Result<Json, Error> {
    if depth > MAX_DEPTH {
        return Err(Error::Template(format!(
            "a value nests more than {MAX_DEPTH} levels deep"
        )));
    }
    let to_json = |x: &Value| to_json_at(x, depth + 1);
    Ok(match v.kind() {
        ValueKind::Undefined => return Err(Error::Template(undefined_message(v))),
        ValueKind::None => Json::Null,
        ValueKind::Bool => Json::Bool(v.is_true()),
        ValueKind::Number => number_json(v),
        ValueKind::String => Json::String(v.as_str().unwrap_or_default().to_string()),
        ValueKind::Bytes => {
            Json::String(String::from_utf8_lossy(v.as_bytes().unwrap_or_default()).into_owned())
        }
        ValueKind::Seq | ValueKind::Iterable => {
            Json::Array(iter(v)?.map(|x| to_json(&x)).collect::<Result<_, _>>()?)
        }
        ValueKind::Map => {
            let mut m = serde_json::Map::new();
            for k in iter(v)? {
                let item = v.get_item(&k).map_err(tmpl_err)?;
                m.insert(py_str(&k), to_json(&item)?);
            }
            Json::Object(m)
        }
        ValueKind::Invalid => {
            return Err(match v.get_attr("x") {
                Err(e) => tmpl_err(e),
                Ok(_) => Error::Template("invalid value".into()),
            })
        }
        _ => Json::String(v.to_string()),
    })
}

fn number_json(v: &Value) -> Json {
    if let Some(i) = v.as_i64() {
        return Json::from(i);
    }
    if let Ok(u) = u64::try_from(v.clone()) {
        return Json::from(u);
    }
    let f = f64::try_from(v.clone()).unwrap_or(f64::NAN);
    serde_json::Number::from_f64(f)
        .map(Json::Number)
        .unwrap_or(Json::Null)
}

pub(crate) fn iter(v: &Value) -> Result<minijinja::value::ValueIter, Error> {
    v.try_iter().map_err(tmpl_err)
}

pub(crate) fn tmpl_err(e: minijinja::Error) -> Error {
    Error::Template(crate::template::error_text(&e))
}

pub(crate) fn undefined_message(v: &Value) -> String {
    let _ = v;
    "undefined variable".into()
}

/// Whether the value is a float (not an integer) number.
pub fn is_float(v: &Value) -> bool {
    v.kind() == ValueKind::Number && !v.is_integer()
}

/// Python's `str(v)`: strings as they are, everything else as `repr`.
pub fn py_str(v: &Value) -> String {
    if let Some(s) = v.as_str() {
        return s.to_string();
    }
    let mut out = String::new();
    py_repr_into(v, &mut out);
    out
}

/// Python's `repr(v)` for the types YAML and JSON produce.
pub fn py_repr(v: &Value) -> String {
    let mut out = String::new();
    py_repr_into(v, &mut out);
    out
}

fn py_repr_into(v: &Value, out: &mut String) {
    match v.kind() {
        ValueKind::Undefined | ValueKind::None => out.push_str("None"),
        ValueKind::Bool => out.push_str(if v.is_true() { "True" } else { "False" }),
        ValueKind::Number => {
            if v.is_integer() {
                out.push_str(&v.to_string());
            } else {
                out.push_str(&py_float(f64::try_from(v.clone()).unwrap_or(f64::NAN)));
            }
        }
        ValueKind::String => py_str_repr(v.as_str().unwrap_or_default(), out),
        ValueKind::Seq | ValueKind::Iterable => {
            out.push('[');
            if let Ok(it) = v.try_iter() {
                for (i, x) in it.enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    py_repr_into(&x, out);
                }
            }
            out.push(']');
        }
        ValueKind::Map => {
            out.push('{');
            if let Ok(it) = v.try_iter() {
                for (i, k) in it.enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    py_repr_into(&k, out);
                    out.push_str(": ");
                    py_repr_into(&v.get_item(&k).unwrap_or_default(), out);
                }
            }
            out.push('}');
        }
        _ => out.push_str(&v.to_string()),
    }
}

/// Python's `repr(float)`: the shortest digits that round-trip, in positional notation when
/// the exponent is in [-4, 16), otherwise `1e+16` style.
pub fn py_float(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.into();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    let sci = format!("{f:e}"); // e.g. "-1.2345e6"
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let neg = mant.starts_with('-');
    let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    let sign = if neg { "-" } else { "" };
    if (-4..16).contains(&exp) {
        let point = exp + 1; // digits before the decimal point
        let s = if point <= 0 {
            format!("0.{}{}", "0".repeat((-point) as usize), digits)
        } else if point as usize >= digits.len() {
            format!("{}{}.0", digits, "0".repeat(point as usize - digits.len()))
        } else {
            format!(
                "{}.{}",
                &digits[..point as usize],
                &digits[point as usize..]
            )
        };
        format!("{sign}{s}")
    } else {
        let m = if digits.len() > 1 {
            format!("{}.{}", &digits[..1], &digits[1..])
        } else {
            digits.clone()
        };
        let esign = if exp < 0 { "-" } else { "+" };
        format!("{sign}{m}e{esign}{:02}", exp.abs())
    }
}

fn py_str_repr(s: &str, out: &mut String) {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if !py_printable(c) => {
                let n = c as u32;
                if n < 0x100 {
                    out.push_str(&format!("\\x{n:02x}"));
                } else if n < 0x10000 {
                    out.push_str(&format!("\\u{n:04x}"));
                } else {
                    out.push_str(&format!("\\U{n:08x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

/// An approximation of Python's `str.isprintable` (controls, separators other than the space,
/// and format characters are not printable).
fn py_printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    !(c.is_control()
        || c.is_whitespace()
        || matches!(c as u32, 0xad | 0x600..=0x605 | 0x61c | 0x6dd | 0x70f | 0x180e | 0x200b..=0x200f
            | 0x202a..=0x202e | 0x2060..=0x2064 | 0x2066..=0x206f | 0xfeff | 0xfff9..=0xfffb
            | 0xd800..=0xdfff | 0xe000..=0xf8ff))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_like_python() {
        for (f, s) in [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (2.5e-5, "2.5e-05"),
            (1e16, "1e+16"),
            (123456789012345.6, "123456789012345.6"),
            (-0.0001, "-0.0001"),
            (1.5e300, "1.5e+300"),
        ] {
            assert_eq!(py_float(f), s);
        }
    }

    #[test]
    fn reprs_like_python() {
        let v = from_json(&serde_json::json!({"a": [1, true, null, "it's", 1.5], "b": "x\ny"}));
        assert_eq!(
            py_repr(&v),
            r#"{'a': [1, True, None, "it's", 1.5], 'b': 'x\ny'}"#
        );
    }
}
