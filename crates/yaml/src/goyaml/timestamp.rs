//! go-yaml v2's `parseTimestamp`: a plain scalar is a timestamp when Go's `time.Parse`
//! accepts it with one of four layouts. Only the yes/no answer matters (decoding into
//! `interface{}` keeps the text, but the encoder quotes such strings), so this follows
//! `time.Parse`'s field rules without building a time.

/// `2006-1-2T15:4:5.999999999Z07:00`, the same with `t`, `2006-1-2 15:4:5.999999999`, and
/// `2006-1-2`.
pub(crate) fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    // Quick check: all formats start with YYYY-.
    let digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if digits != 4 || b.get(4) != Some(&b'-') {
        return false;
    }
    [
        Layout::DateTimeZone(b'T'),
        Layout::DateTimeZone(b't'),
        Layout::DateTime,
        Layout::Date,
    ]
    .into_iter()
    .any(|layout| parse(b, layout).is_some())
}

#[derive(Clone, Copy)]
enum Layout {
    DateTimeZone(u8),
    DateTime,
    Date,
}

/// Go's `getnum`: one or two digits (`fixed` demands two).
fn getnum(b: &[u8], fixed: bool) -> Option<(u32, &[u8])> {
    let d0 = *b.first().filter(|c| c.is_ascii_digit())?;
    match b.get(1).filter(|c| c.is_ascii_digit()) {
        Some(&d1) => Some((u32::from(d0 - b'0') * 10 + u32::from(d1 - b'0'), &b[2..])),
        None if fixed => None,
        None => Some((u32::from(d0 - b'0'), &b[1..])),
    }
}

fn literal(b: &[u8], c: u8) -> Option<&[u8]> {
    (b.first() == Some(&c)).then(|| &b[1..])
}

/// Go's `skip` for a layout space: one or more spaces, or nothing at the end of input.
fn spaces(b: &[u8]) -> Option<&[u8]> {
    if !b.is_empty() && b[0] != b' ' {
        return None;
    }
    let n = b.iter().take_while(|&&c| c == b' ').count();
    Some(&b[n..])
}

fn parse(b: &[u8], layout: Layout) -> Option<()> {
    let year: u32 = std::str::from_utf8(&b[..4]).ok()?.parse().ok()?;
    let rest = literal(&b[4..], b'-')?;
    let (month, rest) = getnum(rest, false)?;
    if !(1..=12).contains(&month) {
        return None;
    }
    let rest = literal(rest, b'-')?;
    let (day, rest) = getnum(rest, false)?;
    let rest = match layout {
        Layout::Date => rest,
        Layout::DateTime => time(spaces(rest)?)?,
        Layout::DateTimeZone(t) => zone(time(literal(rest, t)?)?)?,
    };
    if !rest.is_empty() || day < 1 || day > days_in(month, year) {
        return None;
    }
    Some(())
}

/// `15:4:5.999999999`: hour, minute and second of one or two digits, optional fraction.
fn time(b: &[u8]) -> Option<&[u8]> {
    let (hour, rest) = getnum(b, false)?;
    let rest = literal(rest, b':')?;
    let (minute, rest) = getnum(rest, false)?;
    let rest = literal(rest, b':')?;
    let (second, rest) = getnum(rest, false)?;
    if hour >= 24 || minute >= 60 || second >= 60 {
        return None;
    }
    if rest.len() >= 2 && (rest[0] == b'.' || rest[0] == b',') && rest[1].is_ascii_digit() {
        let n = 1 + rest[1..].iter().take_while(|c| c.is_ascii_digit()).count();
        return Some(&rest[n..]);
    }
    Some(rest)
}

/// `Z07:00`: `Z`, or a sign, two-digit hours, `:`, two-digit minutes.
fn zone(b: &[u8]) -> Option<&[u8]> {
    if b.first() == Some(&b'Z') {
        return Some(&b[1..]);
    }
    if b.len() < 6 || b[3] != b':' || !(b[0] == b'+' || b[0] == b'-') {
        return None;
    }
    let (hour, _) = getnum(&b[1..3], true)?;
    let (minute, _) = getnum(&b[4..6], true)?;
    if hour > 24 || minute > 60 {
        return None;
    }
    Some(&b[6..])
}

fn days_in(month: u32, year: u32) -> u32 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::is_timestamp;

    #[test]
    fn layouts() {
        for yes in [
            "2024-01-01",
            "2024-1-1",
            "2001-12-14t21:59:43.10Z",
            "2001-12-14T21:59:43+05:00",
            "2001-12-14 21:59:43.10",
            "2001-12-14  21:59:43",
            "2024-02-29",
        ] {
            assert!(is_timestamp(yes), "{yes}");
        }
        for no in [
            "2023-02-29",
            "2024-13-01",
            "2024-01-01x",
            "2001-12-14 21:59:43.10 -5",
            "2001-12-14T21:59:43",
            "12024-01-01",
            "2024-001-01",
            "2024-01-32",
        ] {
            assert!(!is_timestamp(no), "{no}");
        }
    }
}
