//! The parts of Go's `strconv` that go-yaml's resolver and encoder and `encoding/json` use:
//! `ParseInt(s, 0, 64)`, `ParseUint(s, 0, 64)`, `ParseFloat(s, 64)` for decimal input, and
//! `FormatFloat` in the `'g'`, `'f'` and `'e'` forms with shortest precision.
//!
//! Decimal conversion itself is delegated to Rust's `f64` parsing and shortest formatting,
//! which are correctly rounded like Go's; only Go's syntax and layout rules are written here.

/// Why a Go parse failed; go-yaml treats a range error differently only for big integers,
/// which v2.4 does not decode, so callers just need success or failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NumError {
    Syntax,
    Range,
}

/// `strconv.ParseUint(s, 0, 64)`: optional base prefix (`0x`, `0o`, `0b`, or a leading `0`
/// for octal), no sign, underscores only between digits when a prefix was given.
pub(crate) fn parse_uint(s: &str) -> Result<u64, NumError> {
    if s.is_empty() {
        return Err(NumError::Syntax);
    }
    let b = s.as_bytes();
    let (base, digits) = if b[0] == b'0' {
        match b.get(1).map(|c| c.to_ascii_lowercase()) {
            Some(b'b') if s.len() >= 3 => (2, &s[2..]),
            Some(b'o') if s.len() >= 3 => (8, &s[2..]),
            Some(b'x') if s.len() >= 3 => (16, &s[2..]),
            _ => (8, &s[1..]),
        }
    } else {
        (10, s)
    };
    let mut n: u64 = 0;
    let mut underscores = false;
    for c in digits.bytes() {
        if c == b'_' {
            underscores = true;
            continue;
        }
        let d = match c {
            b'0'..=b'9' => u64::from(c - b'0'),
            b'a'..=b'z' => u64::from(c - b'a') + 10,
            b'A'..=b'Z' => u64::from(c - b'A') + 10,
            _ => return Err(NumError::Syntax),
        };
        if d >= base {
            return Err(NumError::Syntax);
        }
        n = n
            .checked_mul(base)
            .and_then(|n| n.checked_add(d))
            .ok_or(NumError::Range)?;
    }
    if underscores && !underscore_ok(s) {
        return Err(NumError::Syntax);
    }
    Ok(n)
}

/// `strconv.ParseInt(s, 0, 64)`.
pub(crate) fn parse_int(s: &str) -> Result<i64, NumError> {
    let (neg, rest) = match s.as_bytes().first() {
        Some(b'+') => (false, &s[1..]),
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    let u = parse_uint(rest)?;
    if neg {
        if u > 1u64 << 63 {
            return Err(NumError::Range);
        }
        Ok((u as i64).wrapping_neg())
    } else {
        i64::try_from(u).map_err(|_| NumError::Range)
    }
}

/// Go's `underscoreOK`: underscores only between digits, or between a base prefix and a digit.
fn underscore_ok(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    if matches!(b.first(), Some(b'+') | Some(b'-')) {
        i = 1;
    }
    let mut saw = b'^';
    let mut hex = false;
    if b.len() >= i + 2
        && b[i] == b'0'
        && matches!(b[i + 1].to_ascii_lowercase(), b'b' | b'o' | b'x')
    {
        hex = b[i + 1].eq_ignore_ascii_case(&b'x');
        i += 2;
        saw = b'0';
    }
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_digit() || (hex && c.is_ascii_hexdigit()) {
            saw = b'0';
        } else if c == b'_' {
            if saw != b'0' {
                return false;
            }
            saw = b'_';
        } else {
            if saw == b'_' {
                return false;
            }
            saw = b'!';
        }
        i += 1;
    }
    saw != b'_'
}

/// `strconv.ParseFloat(s, 64)` for the decimal syntax go-yaml can reach (it never passes hex
/// floats, `inf` or `nan` here): sign, digits with underscores, one dot, exponent.
pub(crate) fn parse_float(s: &str) -> Result<f64, NumError> {
    let b = s.as_bytes();
    let mut i = 0;
    if matches!(b.first(), Some(b'+') | Some(b'-')) {
        i = 1;
    }
    let mut saw_digits = false;
    let mut saw_dot = false;
    let mut underscores = false;
    while i < b.len() {
        match b[i] {
            b'_' => underscores = true,
            b'.' if !saw_dot => saw_dot = true,
            c if c.is_ascii_digit() => saw_digits = true,
            _ => break,
        }
        i += 1;
    }
    if !saw_digits {
        return Err(NumError::Syntax);
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if matches!(b.get(i), Some(b'+') | Some(b'-')) {
            i += 1;
        }
        if !b.get(i).is_some_and(u8::is_ascii_digit) {
            return Err(NumError::Syntax);
        }
        while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'_') {
            underscores |= b[i] == b'_';
            i += 1;
        }
    }
    if i != b.len() || (underscores && !underscore_ok(s)) {
        return Err(NumError::Syntax);
    }
    let cleaned: String = s.chars().filter(|&c| c != '_').collect();
    let v: f64 = cleaned.parse().map_err(|_| NumError::Syntax)?;
    if v.is_infinite() {
        return Err(NumError::Range);
    }
    Ok(v)
}

/// Shortest decimal digits of a finite, non-zero magnitude and the decimal point position
/// (value = 0.DIGITS × 10^point), as Go's `decimal` keeps them.
pub(crate) fn shortest_digits(f: f64) -> (String, i32) {
    let s = format!("{:e}", f.abs());
    split_sci(&s)
}

/// The same for a `float32` (`FormatFloat(f, 'g', -1, 32)`).
pub(crate) fn shortest_digits32(f: f32) -> (String, i32) {
    let s = format!("{:e}", f.abs());
    split_sci(&s)
}

fn split_sci(s: &str) -> (String, i32) {
    let (mantissa, exp) = s.split_once('e').unwrap_or((s, "0"));
    let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() {
        "0".to_string()
    } else {
        digits.to_string()
    };
    (digits, exp + 1)
}

fn special(f: f64) -> Option<&'static str> {
    if f.is_nan() {
        Some("NaN")
    } else if f == f64::INFINITY {
        Some("+Inf")
    } else if f == f64::NEG_INFINITY {
        Some("-Inf")
    } else {
        None
    }
}

/// `FormatFloat(f, 'g', -1, bits)`.
pub(crate) fn format_g(f: f64, bits32: bool) -> String {
    // A 32-bit format rounds to float32 first, which may overflow to infinity.
    let f = if bits32 { f64::from(f as f32) } else { f };
    if let Some(s) = special(f) {
        return s.to_string();
    }
    let neg = f.is_sign_negative();
    if f == 0.0 {
        return if neg { "-0".into() } else { "0".into() };
    }
    let (digits, point) = if bits32 {
        shortest_digits32(f as f32)
    } else {
        shortest_digits(f)
    };
    let exp = point - 1;
    // Shortest formatting decides with a precision of 6, whatever the digit count.
    let body = if !(-4..6).contains(&exp) {
        format_e_digits(&digits, exp)
    } else {
        format_f_digits(&digits, point)
    };
    if neg {
        format!("-{body}")
    } else {
        body
    }
}

/// `FormatFloat(f, 'f', -1, 64)`.
pub(crate) fn format_f(f: f64) -> String {
    let neg = f.is_sign_negative();
    if f == 0.0 {
        return if neg { "-0".into() } else { "0".into() };
    }
    let (digits, point) = shortest_digits(f);
    let body = format_f_digits(&digits, point);
    if neg {
        format!("-{body}")
    } else {
        body
    }
}

/// `FormatFloat(f, 'e', -1, 64)`.
pub(crate) fn format_e(f: f64) -> String {
    let neg = f.is_sign_negative();
    let (digits, point) = if f == 0.0 {
        ("0".to_string(), 1)
    } else {
        shortest_digits(f)
    };
    let body = format_e_digits(&digits, point - 1);
    if neg {
        format!("-{body}")
    } else {
        body
    }
}

fn format_e_digits(digits: &str, exp: i32) -> String {
    let mut out = String::new();
    out.push_str(&digits[..1]);
    if digits.len() > 1 {
        out.push('.');
        out.push_str(&digits[1..]);
    }
    out.push('e');
    out.push(if exp < 0 { '-' } else { '+' });
    let e = exp.unsigned_abs();
    if e < 10 {
        out.push('0');
    }
    out.push_str(&e.to_string());
    out
}

fn format_f_digits(digits: &str, point: i32) -> String {
    if point <= 0 {
        format!("0.{}{}", "0".repeat(point.unsigned_abs() as usize), digits)
    } else if point as usize >= digits.len() {
        format!("{}{}", digits, "0".repeat(point as usize - digits.len()))
    } else {
        format!(
            "{}.{}",
            &digits[..point as usize],
            &digits[point as usize..]
        )
    }
}

/// `encoding/json`'s float encoding: `'f'` form, or `'e'` form with a one-digit negative
/// exponent below 1e-6 and from 1e21 on. NaN and infinities are not JSON (`None`).
pub(crate) fn format_json(f: f64) -> Option<String> {
    if !f.is_finite() {
        return None;
    }
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let mut s = format_e(f);
        // Go trims "e-07" to "e-7".
        let n = s.len();
        if n >= 4 && s.as_bytes()[n - 4] == b'e' && &s[n - 3..n - 1] == "-0" {
            s.remove(n - 2);
        }
        return Some(s);
    }
    Some(format_f(f))
}

/// go-yaml's float scalar: `'g'` form, with YAML's spellings of the specials.
pub(crate) fn format_yaml_float(f: f64) -> String {
    match special(f) {
        Some("NaN") => ".nan".into(),
        Some("+Inf") => ".inf".into(),
        Some(_) => "-.inf".into(),
        None => format_g(f, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_int_follows_go_base_prefixes() {
        assert_eq!(parse_int("0x1F"), Ok(31));
        assert_eq!(parse_int("0o17"), Ok(15));
        assert_eq!(parse_int("010"), Ok(8));
        assert_eq!(parse_int("0b101"), Ok(5));
        assert_eq!(parse_int("-0x10"), Ok(-16));
        assert_eq!(parse_int("+7"), Ok(7));
        assert_eq!(parse_int("0"), Ok(0));
        assert_eq!(parse_int("08"), Err(NumError::Syntax));
        assert_eq!(parse_int("0x"), Err(NumError::Syntax));
        assert_eq!(parse_int("9223372036854775808"), Err(NumError::Range));
        assert_eq!(parse_int("-9223372036854775808"), Ok(i64::MIN));
        assert_eq!(parse_uint("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(parse_uint("+1"), Err(NumError::Syntax));
    }

    #[test]
    fn parse_float_decimal_syntax() {
        assert_eq!(parse_float(".5"), Ok(0.5));
        assert_eq!(parse_float("1e3"), Ok(1000.0));
        assert_eq!(parse_float(".5_5"), Ok(0.55));
        assert_eq!(parse_float("1e400"), Err(NumError::Range));
        assert_eq!(parse_float("."), Err(NumError::Syntax));
        assert_eq!(parse_float("1._5"), Err(NumError::Syntax));
    }

    #[test]
    fn format_g_matches_go() {
        assert_eq!(format_g(1e21, false), "1e+21");
        assert_eq!(format_g(1e6, false), "1e+06");
        assert_eq!(format_g(123456.0, false), "123456");
        assert_eq!(format_g(1234567.0, false), "1.234567e+06");
        assert_eq!(format_g(0.0001, false), "0.0001");
        assert_eq!(format_g(0.00001, false), "1e-05");
        assert_eq!(format_g(0.1, true), "0.1");
        assert_eq!(format_g(123456789.0, true), "1.2345679e+08");
        assert_eq!(format_g(-2.5, false), "-2.5");
        assert_eq!(format_g(1e40, true), "+Inf");
    }

    #[test]
    fn format_json_matches_go() {
        assert_eq!(format_json(1e21).as_deref(), Some("1e+21"));
        assert_eq!(format_json(1e20).as_deref(), Some("100000000000000000000"));
        assert_eq!(format_json(1e-7).as_deref(), Some("1e-7"));
        assert_eq!(format_json(0.000001).as_deref(), Some("0.000001"));
        assert_eq!(
            format_json(12345678901234567890.0).as_deref(),
            Some("12345678901234567000")
        );
        assert_eq!(format_json(-0.0).as_deref(), Some("-0"));
        assert_eq!(format_json(f64::NAN), None);
    }
}
