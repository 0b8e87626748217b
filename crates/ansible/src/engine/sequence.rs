//! `with_sequence`: Ansible's `sequence` lookup — `start=1 end=10 stride=2 format=x%02d` or
//! the short form `[start-]end[/stride][:format]`, numbers in decimal (ansible-core 2.18
//! refuses the hexadecimal its documentation shows), each number formatted with a Python `%`
//! format that holds one conversion.
use std::collections::HashMap;

/// Most numbers one sequence may give (the loop's own limit applies after).
const MAX_NUMBERS: i64 = 100_000;

/// The option's value as ansible-core 2.18 takes it: Python's `int()` of the text (the
/// `0x…` forms the lookup's documentation shows fail there, as here).
fn int(key: &str, s: &str) -> Result<i64, String> {
    s.trim().parse::<i64>().map_err(|_| {
        format!("Invalid type for configuration option plugin_type: lookup plugin: sequence setting: {key} (from Direct): ")
    })
}

/// The numbers of one term, formatted.
pub(crate) fn sequence(term: &str) -> Result<Vec<String>, String> {
    let term = term.trim();
    let mut start = 1i64;
    let mut end: Option<i64> = None;
    let mut count: Option<i64> = None;
    let mut stride = 1i64;
    let mut format = "%d".to_string();
    if term.contains('=') {
        let mut kv = HashMap::new();
        for part in term.split_whitespace() {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("unrecognized arguments to with_sequence: {part:?}"))?;
            kv.insert(k.to_string(), v.to_string());
        }
        for (k, v) in &kv {
            match k.as_str() {
                "start" => start = int("start", v)?,
                "end" => end = Some(int("end", v)?),
                "count" => count = Some(int("count", v)?),
                "stride" => stride = int("stride", v)?,
                "format" => format = v.clone(),
                other => {
                    return Err(format!(
                        "unrecognized arguments to with_sequence: [{other:?}]"
                    ))
                }
            }
        }
    } else {
        // [start-]end[/stride][:format]
        let (nums, fmt) = match term.split_once(':') {
            Some((n, f)) => (n, Some(f)),
            None => (term, None),
        };
        let (range, st) = match nums.split_once('/') {
            Some((r, s)) => (r, Some(s)),
            None => (nums, None),
        };
        match range.split_once('-') {
            Some((s, e)) => {
                start = int("start", s)?;
                end = Some(int("end", e)?);
            }
            None => end = Some(int("end", range)?),
        }
        if let Some(s) = st {
            stride = int("stride", s)?;
        }
        if let Some(f) = fmt {
            format = f.to_string();
        }
    }
    let end = match (count, end) {
        (None, None) => return Err("must specify count or end in with_sequence".into()),
        (Some(_), Some(_)) => {
            return Err("can't specify both count and end in with_sequence".into())
        }
        (Some(0), None) => {
            start = 0;
            stride = 0;
            0
        }
        (Some(c), None) => start + c * stride - 1,
        (None, Some(e)) => e,
    };
    if stride > 0 && end < start {
        return Err("to count backwards make stride negative".into());
    }
    if stride < 0 && end > start {
        return Err("to count forward don't make stride negative".into());
    }
    if format.matches('%').count() != 1 {
        return Err(format!("bad formatting string: {format}"));
    }
    let mut out = Vec::new();
    let mut i = start;
    let adjust = if stride >= 0 { 1 } else { -1 };
    let stop = end + adjust;
    // Python's range(start, stop, 0) raises; a zero stride here is only the count=0 case.
    if stride == 0 {
        return Ok(out);
    }
    while (stride > 0 && i < stop) || (stride < 0 && i > stop) {
        if out.len() as i64 >= MAX_NUMBERS {
            return Err(format!(
                "with_sequence gives more than {MAX_NUMBERS} numbers"
            ));
        }
        out.push(percent(&format, i)?);
        i += stride;
    }
    Ok(out)
}

/// Python's `format % i` for a format holding one conversion (`%d`, `%05x`, `%-3o`, `%s`...).
fn percent(format: &str, i: i64) -> Result<String, String> {
    let bad = || format!("problem formatting {i} with '{format}'");
    let at = format.find('%').ok_or_else(bad)?;
    let (before, rest) = format.split_at(at);
    let spec: Vec<char> = rest[1..].chars().collect();
    let mut k = 0;
    let (mut left, mut zero, mut plus, mut space, mut alt) = (false, false, false, false, false);
    while k < spec.len() && "-0+ #".contains(spec[k]) {
        match spec[k] {
            '-' => left = true,
            '0' => zero = true,
            '+' => plus = true,
            ' ' => space = true,
            _ => alt = true,
        }
        k += 1;
    }
    let mut width = 0usize;
    while k < spec.len() && spec[k].is_ascii_digit() {
        width = width * 10 + spec[k].to_digit(10).unwrap_or(0) as usize;
        k += 1;
    }
    let conv = *spec.get(k).ok_or_else(bad)?;
    let after: String = spec[k + 1..].iter().collect();
    let mag = i.unsigned_abs();
    let digits = match conv {
        'd' | 'i' | 'u' | 's' => mag.to_string(),
        'x' => format!("{}{mag:x}", if alt { "0x" } else { "" }),
        'X' => format!("{}{mag:X}", if alt { "0X" } else { "" }),
        'o' => format!("{}{mag:o}", if alt { "0o" } else { "" }),
        _ => return Err(bad()),
    };
    let sign = if i < 0 {
        "-"
    } else if plus && conv != 's' {
        "+"
    } else if space && conv != 's' {
        " "
    } else {
        ""
    };
    let body = format!("{sign}{digits}");
    let padded = if body.len() >= width {
        body
    } else if left {
        format!("{body:<width$}")
    } else if zero && conv != 's' {
        let (prefix, num) = body.split_at(sign.len());
        format!("{prefix}{num:0>w$}", w = width - sign.len())
    } else {
        format!("{body:>width$}")
    };
    Ok(format!("{before}{padded}{after}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_and_formats() {
        assert_eq!(sequence("start=1 end=3").expect("seq"), ["1", "2", "3"]);
        assert_eq!(
            sequence("4-8/2:host%02d").expect("seq"),
            ["host04", "host06", "host08"]
        );
        assert_eq!(
            sequence("count=3 start=16 format=%x").expect("seq"),
            ["10", "11", "12"]
        );
        assert!(sequence("count=3 start=0x10").is_err());
        assert_eq!(
            sequence("start=5 end=1 stride=-2").expect("seq"),
            ["5", "3", "1"]
        );
        assert!(sequence("start=5 end=1").is_err());
        assert!(sequence("end=3 format=%d-%d").is_err());
        assert!(sequence("count=0").expect("seq").is_empty());
    }
}
