//! Python's number rules as PyYAML uses them: `int(text, base)` with arbitrary precision,
//! `float(text)`, and `repr(float)`.

use crate::value::Yaml;

/// A non-negative integer in base 10^9 limbs, little-endian: just enough arithmetic for
/// Python's `int()` on long digit strings.
#[derive(Clone)]
struct Big(Vec<u64>);

const LIMB: u64 = 1_000_000_000;

impl Big {
    fn zero() -> Big {
        Big(vec![0])
    }

    /// self = self * m + a, for small m and a.
    fn mul_add(&mut self, m: u64, a: u64) {
        let mut carry = a;
        for limb in self.0.iter_mut() {
            let v = *limb * m + carry;
            *limb = v % LIMB;
            carry = v / LIMB;
        }
        while carry > 0 {
            self.0.push(carry % LIMB);
            carry /= LIMB;
        }
    }

    fn add(&mut self, other: &Big) {
        let mut carry = 0;
        for i in 0..other.0.len().max(self.0.len()) {
            if i >= self.0.len() {
                self.0.push(0);
            }
            let v = self.0[i] + other.0.get(i).copied().unwrap_or(0) + carry;
            self.0[i] = v % LIMB;
            carry = v / LIMB;
        }
        if carry > 0 {
            self.0.push(carry);
        }
    }

    fn parse(text: &str, base: u32) -> Option<Big> {
        if text.is_empty() {
            return None;
        }
        let mut n = Big::zero();
        for c in text.chars() {
            n.mul_add(u64::from(base), u64::from(c.to_digit(base)?));
        }
        Some(n)
    }

    fn into_yaml(self, negative: bool) -> Yaml {
        let mut digits = String::new();
        for (i, limb) in self.0.iter().rev().enumerate() {
            if i == 0 {
                digits.push_str(&limb.to_string());
            } else {
                digits.push_str(&format!("{limb:09}"));
            }
        }
        let digits = digits.trim_start_matches('0');
        let digits = if digits.is_empty() { "0" } else { digits };
        let text = if negative && digits != "0" {
            format!("-{digits}")
        } else {
            digits.to_string()
        };
        match text.parse::<i64>() {
            Ok(i) => Yaml::Int(i),
            Err(_) => Yaml::BigInt(text),
        }
    }
}

/// Python's `int(text, base)` on digits without sign or underscores: `Int` when it fits in
/// i64, `BigInt` (decimal) otherwise; `None` when Python raises ValueError.
pub(crate) fn parse_radix(text: &str, base: u32, negative: bool) -> Option<Yaml> {
    Big::parse(text, base).map(|n| n.into_yaml(negative))
}

/// Sexagesimal `a:b:c`, each part a decimal integer, as PyYAML sums it (exactly).
pub(crate) fn parse_sexagesimal(parts: &[&str], negative: bool) -> Option<Yaml> {
    let mut n = Big::zero();
    for part in parts {
        n.mul_add(60, 0);
        n.add(&Big::parse(part, 10)?);
    }
    Some(n.into_yaml(negative))
}

/// Python reads any Unicode decimal digit in `int()` and `float()` (`"١٢"` is 12): ASCII
/// stand-ins for them. Decimal digits come in contiguous runs of ten, zero first.
pub(crate) fn ascii_digits(text: &str) -> String {
    use unicode_general_category::{get_general_category, GeneralCategory};
    let is_nd = |c: u32| {
        char::from_u32(c).is_some_and(|c| get_general_category(c) == GeneralCategory::DecimalNumber)
    };
    text.chars()
        .map(|c| {
            if c.is_ascii() || !is_nd(c as u32) {
                return c;
            }
            let mut start = c as u32;
            while start > 0 && is_nd(start - 1) {
                start -= 1;
            }
            char::from_digit((c as u32 - start) % 10, 10).unwrap_or(c)
        })
        .collect()
}

/// Python's `float(text)` for the forms PyYAML passes (already stripped of `_` and lowered):
/// decimal with optional exponent, `inf`, `nan`, surrounding whitespace.
pub(crate) fn parse_float(text: &str) -> Option<f64> {
    let normalized = ascii_digits(text);
    let t = normalized.trim();
    let (neg, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let lower = body.to_ascii_lowercase();
    let v = match lower.as_str() {
        "inf" | "infinity" => f64::INFINITY,
        "nan" => f64::NAN,
        _ => {
            let b = lower.as_bytes();
            let ok = !b.is_empty()
                && b.iter()
                    .all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'+' | b'-'))
                && b.iter().any(u8::is_ascii_digit)
                && !b.starts_with(b"e");
            if !ok {
                return None;
            }
            lower.parse::<f64>().ok()?
        }
    };
    Some(if neg { -v } else { v })
}

/// `repr(f)` for a finite float: shortest round-trip digits, exponent form when the decimal
/// exponent is below -4 or above 15.
pub(crate) fn float_repr(f: f64) -> String {
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0.0".into()
        } else {
            "0.0".into()
        };
    }
    let s = format!("{:e}", f.abs());
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let exp: i32 = exp.parse().unwrap_or(0);
    let decpt = exp + 1;
    let sign = if f < 0.0 { "-" } else { "" };
    if !(-4 < decpt && decpt <= 16) {
        let mut out = String::from(sign);
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        out.push_str(&format!("{:02}", exp.unsigned_abs()));
        return out;
    }
    let body = if decpt <= 0 {
        format!("0.{}{}", "0".repeat(decpt.unsigned_abs() as usize), digits)
    } else if decpt as usize >= digits.len() {
        format!("{}{}.0", digits, "0".repeat(decpt as usize - digits.len()))
    } else {
        format!(
            "{}.{}",
            &digits[..decpt as usize],
            &digits[decpt as usize..]
        )
    };
    format!("{sign}{body}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ints() {
        assert_eq!(parse_radix("1F", 16, false), Some(Yaml::Int(31)));
        assert_eq!(parse_radix("17", 8, true), Some(Yaml::Int(-15)));
        assert_eq!(
            parse_radix("123456789012345678901234567890", 10, false),
            Some(Yaml::BigInt("123456789012345678901234567890".into()))
        );
        assert_eq!(
            parse_radix("FFFFFFFFFFFFFFFFFFFF", 16, false),
            Some(Yaml::BigInt("1208925819614629174706175".into()))
        );
        assert_eq!(parse_radix("8", 8, false), None);
        assert_eq!(parse_sexagesimal(&["1", "20"], false), Some(Yaml::Int(80)));
        assert_eq!(
            parse_sexagesimal(&["190", "20", "30"], true),
            Some(Yaml::Int(-685230))
        );
    }

    #[test]
    fn repr() {
        assert_eq!(float_repr(1.0), "1.0");
        assert_eq!(float_repr(1e16), "1e+16");
        assert_eq!(float_repr(1e15), "1000000000000000.0");
        assert_eq!(float_repr(0.0001), "0.0001");
        assert_eq!(float_repr(0.00001), "1e-05");
        assert_eq!(float_repr(-1.5e-7), "-1.5e-07");
        assert_eq!(float_repr(123.456), "123.456");
    }
}
