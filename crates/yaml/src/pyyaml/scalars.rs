//! SafeConstructor's scalar constructors that can fail: `!!int`, `!!float`,
//! `!!timestamp`, with Python's own parsing rules and exception texts.

use crate::value::{Timestamp, TimestampTime, Yaml};

use super::number::{parse_float, parse_radix, parse_sexagesimal};
use super::pystr::{repr, repr200};
use super::resolve::parse_timestamp_parts;

/// `SafeConstructor.construct_yaml_int`, or the text of Python's ValueError.
pub(super) fn construct_int(text: &str) -> Result<Yaml, String> {
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
pub(super) fn construct_float(text: &str) -> Result<Yaml, String> {
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
pub(super) fn construct_timestamp(text: &str) -> Result<Timestamp, String> {
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
