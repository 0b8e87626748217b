//! Type conversions as Sprig does them through `spf13/cast`: strings parse with Go's
//! base prefixes (`"010"` is 8, `"0x1F"` is 31), `"10.0"` is 10 but `"1.5"` is 0,
//! floats truncate toward zero, anything unconvertible is 0.
use super::{FnResult, FuncDef};
use crate::func;
use crate::value::{Kind, ListKind, Value};

pub const FUNCS: &[FuncDef] = &[
    func!("atoi", [Str], |_, a| Ok(Value::Int(
        super::s(&a[0]).parse::<i64>().unwrap_or(0)
    ))),
    func!("int", [Any], |_, a| Ok(Value::Int(to_int64(&a[0])))),
    func!("int64", [Any], |_, a| Ok(Value::Int64(to_int64(&a[0])))),
    func!("float64", [Any], |_, a| Ok(Value::Float(to_float64(&a[0])))),
    func!("toDecimal", [Any], |_, a| Ok(Value::Int64(to_decimal(
        &a[0]
    )))),
    func!("typeOf", [Any], |_, a| Ok(Value::string(a[0].type_name()))),
    func!("typeIs", [Str, Any], |_, a| Ok(Value::Bool(
        super::s(&a[0]) == a[1].type_name()
    ))),
    func!("typeIsLike", [Str, Any], |_, a| {
        let t = a[1].type_name();
        let target = super::s(&a[0]);
        Ok(Value::Bool(t == target || t == format!("*{target}")))
    }),
    func!("kindOf", [Any], |_, a| Ok(Value::str(a[0].kind().name()))),
    func!("kindIs", [Str, Any], |_, a| Ok(Value::Bool(
        super::s(&a[0]) == a[1].kind().name()
    ))),
    func!("deepEqual", [Any, Any], |_, a| Ok(Value::Bool(
        a[0].deep_equal(&a[1])
    ))),
];

/// cast's `trimZeroDecimal`: `"10.00"` → `"10"`.
fn trim_zero_decimal(s: &str) -> &str {
    let b = s.as_bytes();
    let mut found_zero = false;
    for i in (1..=b.len()).rev() {
        match b[i - 1] {
            b'.' => {
                if found_zero {
                    return &s[..i - 1];
                }
            }
            b'0' => found_zero = true,
            _ => return s,
        }
    }
    s
}

/// Go's `strconv.ParseInt(s, 0, 64)`.
pub fn parse_go_int(s: &str) -> Option<i64> {
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if body.is_empty() {
        return None;
    }
    let (base, digits) = if body.len() >= 2 && body.as_bytes()[0] == b'0' {
        match body.as_bytes()[1] | 0x20 {
            b'x' => (16, &body[2..]),
            b'o' => (8, &body[2..]),
            b'b' => (2, &body[2..]),
            _ => (8, &body[1..]),
        }
    } else {
        (10, body)
    };
    let clean: String = digits.chars().filter(|&c| c != '_').collect();
    if clean.is_empty() {
        return if body == "0" { Some(0) } else { None };
    }
    if clean.starts_with('+') || clean.starts_with('-') {
        return None;
    }
    let u = u64::from_str_radix(&clean, base).ok()?;
    if neg {
        if u <= i64::MAX as u64 + 1 {
            Some((u as i128).wrapping_neg() as i64)
        } else {
            None
        }
    } else {
        i64::try_from(u).ok()
    }
}

/// Go's `int64(f)` for a float (truncation toward zero).
pub fn float_to_int(f: f64) -> i64 {
    if f.is_nan() {
        return i64::MIN;
    }
    f as i64
}

/// cast's `ToInt64`.
pub fn to_int64(v: &Value) -> i64 {
    match v {
        Value::Int(i) | Value::Int64(i) => *i,
        Value::Uint64(u) => *u as i64,
        Value::Float(f) => float_to_int(*f),
        Value::Bool(b) => i64::from(*b),
        Value::Str(s) => parse_go_int(trim_zero_decimal(s)).unwrap_or(0),
        _ => 0,
    }
}

/// Go's `strconv.ParseFloat(s, 64)` (decimal, hexadecimal, infinities, NaN).
pub fn parse_go_float(s: &str) -> Option<f64> {
    let t = s.to_ascii_lowercase();
    let body = t.trim_start_matches(['+', '-']);
    match body {
        "inf" | "infinity" => {
            return Some(if t.starts_with('-') {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            })
        }
        "nan" => return Some(f64::NAN),
        _ => {}
    }
    if body.starts_with("0x") {
        return None;
    }
    let clean: String = s.chars().filter(|&c| c != '_').collect();
    if !clean
        .bytes()
        .all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'+' | b'-'))
    {
        return None;
    }
    clean.parse::<f64>().ok()
}

/// cast's `ToFloat64`.
pub fn to_float64(v: &Value) -> f64 {
    match v {
        Value::Int(i) | Value::Int64(i) => *i as f64,
        Value::Uint64(u) => *u as f64,
        Value::Float(f) => *f,
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::Str(s) => parse_go_float(s).unwrap_or(0.0),
        _ => 0.0,
    }
}

fn to_decimal(v: &Value) -> i64 {
    let s = super::strings::strval(v);
    i64::from_str_radix(&s, 8).unwrap_or(0)
}

/// Sprig's `empty`: the zero value of its type (structs are never empty).
pub fn empty(v: &Value) -> bool {
    match v.kind() {
        Kind::Struct => false,
        Kind::Ptr => false,
        _ => !v.truth(),
    }
}

#[allow(dead_code)]
fn _k(_: ListKind) -> FnResult {
    Ok(Value::Nil)
}
