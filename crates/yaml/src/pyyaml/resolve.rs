//! PyYAML's implicit resolvers (`yaml.resolver.Resolver`, used by SafeLoader and
//! SafeDumper): which tag a plain scalar gets. Each regular expression of resolver.py is
//! written out as a matcher; candidates are tried in PyYAML's registration order for the
//! scalar's first character (bool, float, int, merge, null, timestamp, value, yaml).

pub(crate) const STR: &str = "tag:yaml.org,2002:str";
pub(crate) const BOOL: &str = "tag:yaml.org,2002:bool";
pub(crate) const INT: &str = "tag:yaml.org,2002:int";
pub(crate) const FLOAT: &str = "tag:yaml.org,2002:float";
pub(crate) const NULL: &str = "tag:yaml.org,2002:null";
pub(crate) const TIMESTAMP: &str = "tag:yaml.org,2002:timestamp";
pub(crate) const MERGE: &str = "tag:yaml.org,2002:merge";
pub(crate) const VALUE: &str = "tag:yaml.org,2002:value";
pub(crate) const YAML: &str = "tag:yaml.org,2002:yaml";
pub(crate) const BINARY: &str = "tag:yaml.org,2002:binary";
pub(crate) const SEQ: &str = "tag:yaml.org,2002:seq";
pub(crate) const MAP: &str = "tag:yaml.org,2002:map";
pub(crate) const SET: &str = "tag:yaml.org,2002:set";
pub(crate) const OMAP: &str = "tag:yaml.org,2002:omap";
pub(crate) const PAIRS: &str = "tag:yaml.org,2002:pairs";

/// The tag PyYAML resolves a plain scalar to. Python's `$` also matches before a final
/// newline, so `1\n` (from a `!`-tagged block scalar, say) still reads as an int.
pub(crate) fn resolve_plain(value: &str) -> &'static str {
    let first = value.chars().next();
    let value = match value.strip_suffix('\n') {
        Some(v) if !v.is_empty() => v,
        _ => value,
    };
    let candidates: &[&str] = match first {
        None => &[NULL],
        Some('y' | 'Y' | 'T' | 't' | 'F' | 'f' | 'O' | 'o') => &[BOOL],
        Some('n' | 'N') => &[BOOL, NULL],
        Some('-' | '+') => &[FLOAT, INT],
        Some('0'..='9') => &[FLOAT, INT, TIMESTAMP],
        Some('.') => &[FLOAT],
        Some('<') => &[MERGE],
        Some('~') => &[NULL],
        Some('=') => &[VALUE],
        Some('!' | '&' | '*') => &[YAML],
        _ => &[],
    };
    for &tag in candidates {
        let hit = match tag {
            BOOL => is_bool(value),
            FLOAT => is_float(value),
            INT => is_int(value),
            MERGE => value == "<<",
            NULL => matches!(value, "" | "~" | "null" | "Null" | "NULL"),
            TIMESTAMP => is_timestamp(value),
            VALUE => value == "=",
            _ => matches!(value, "!" | "&" | "*"),
        };
        if hit {
            return tag;
        }
    }
    STR
}

fn is_bool(v: &str) -> bool {
    matches!(
        v,
        "yes"
            | "Yes"
            | "YES"
            | "no"
            | "No"
            | "NO"
            | "true"
            | "True"
            | "TRUE"
            | "false"
            | "False"
            | "FALSE"
            | "on"
            | "On"
            | "ON"
            | "off"
            | "Off"
            | "OFF"
    )
}

/// A tiny cursor for writing the resolver regexes by hand.
struct Cur<'a> {
    b: &'a [u8],
    i: usize,
}

impl Cur<'_> {
    fn eat(&mut self, pred: impl Fn(u8) -> bool) -> bool {
        if self.b.get(self.i).is_some_and(|&c| pred(c)) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn many(&mut self, pred: impl Fn(u8) -> bool) -> usize {
        let start = self.i;
        while self.eat(&pred) {}
        self.i - start
    }

    fn sign(&mut self) {
        self.eat(|c| c == b'-' || c == b'+');
    }

    fn done(&self) -> bool {
        self.i == self.b.len()
    }
}

fn digit(c: u8) -> bool {
    c.is_ascii_digit()
}

fn digit_(c: u8) -> bool {
    c.is_ascii_digit() || c == b'_'
}

/// `(?::[0-5]?[0-9])+` — sexagesimal groups, greedy like the regex engine would settle.
fn sexagesimal_groups(c: &mut Cur) -> bool {
    let mut groups = 0;
    while c.b.get(c.i) == Some(&b':') {
        let save = c.i;
        c.i += 1;
        let n = c.b[c.i..].iter().take_while(|d| d.is_ascii_digit()).count();
        let take = if n >= 2 && c.b[c.i] <= b'5' {
            2
        } else if n >= 1 {
            1
        } else {
            0
        };
        if take == 0 {
            c.i = save;
            break;
        }
        c.i += take;
        groups += 1;
    }
    groups > 0
}

/// `[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?` | `\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?`
/// | `[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*` | `[-+]?\.(?:inf|Inf|INF)`
/// | `\.(?:nan|NaN|NAN)`
pub(crate) fn is_float(v: &str) -> bool {
    let b = v.as_bytes();
    let exponent = |c: &mut Cur| {
        let save = c.i;
        if c.eat(|x| x == b'e' || x == b'E')
            && c.eat(|x| x == b'-' || x == b'+')
            && c.many(digit) > 0
        {
            return;
        }
        c.i = save;
    };
    // Alternative 1.
    let mut c = Cur { b, i: 0 };
    c.sign();
    if c.eat(digit) {
        c.many(digit_);
        if c.eat(|x| x == b'.') {
            c.many(digit_);
            exponent(&mut c);
            if c.done() {
                return true;
            }
        }
    }
    // Alternative 2.
    let mut c = Cur { b, i: 0 };
    if c.eat(|x| x == b'.') && c.eat(digit) {
        c.many(digit_);
        exponent(&mut c);
        if c.done() {
            return true;
        }
    }
    // Alternative 3.
    let mut c = Cur { b, i: 0 };
    c.sign();
    if c.eat(digit) {
        c.many(digit_);
        if sexagesimal_groups(&mut c) && c.eat(|x| x == b'.') {
            c.many(digit_);
            if c.done() {
                return true;
            }
        }
    }
    let unsigned = v.strip_prefix(['-', '+']).unwrap_or(v);
    matches!(unsigned, ".inf" | ".Inf" | ".INF") || matches!(v, ".nan" | ".NaN" | ".NAN")
}

/// `[-+]?0b[0-1_]+` | `[-+]?0[0-7_]+` | `[-+]?(?:0|[1-9][0-9_]*)` | `[-+]?0x[0-9a-fA-F_]+`
/// | `[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+`
pub(crate) fn is_int(v: &str) -> bool {
    let b = v.as_bytes();
    let unsigned = match b.first() {
        Some(b'-' | b'+') => &b[1..],
        _ => b,
    };
    let all = |s: &[u8], pred: fn(u8) -> bool| !s.is_empty() && s.iter().all(|&c| pred(c));
    if let Some(rest) = unsigned.strip_prefix(b"0b") {
        if all(rest, |c| c == b'0' || c == b'1' || c == b'_') {
            return true;
        }
    }
    if let Some(rest) = unsigned.strip_prefix(b"0x") {
        if all(rest, |c| c.is_ascii_hexdigit() || c == b'_') {
            return true;
        }
    }
    if let Some(rest) = unsigned.strip_prefix(b"0") {
        if rest.is_empty() || all(rest, |c| (b'0'..=b'7').contains(&c) || c == b'_') {
            return true;
        }
    }
    if unsigned.first().is_some_and(|c| (b'1'..=b'9').contains(c)) {
        let mut c = Cur { b: unsigned, i: 1 };
        c.many(digit_);
        if c.done() {
            return true;
        }
        if sexagesimal_groups(&mut c) && c.done() {
            return true;
        }
    }
    false
}

/// `[0-9]{4}-[0-9]{2}-[0-9]{2}` | `[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?))?`
pub(crate) fn is_timestamp(v: &str) -> bool {
    parse_timestamp_parts(v, true).is_some()
}

/// The named groups of PyYAML's `timestamp_regexp` (or of the resolver's stricter pattern
/// when `resolver`): year, month, day and, for a time, hour, minute, second, fraction and
/// zone (`Some("Z")` or a sign with hours and minutes).
pub(crate) struct TimestampParts<'a> {
    pub year: &'a str,
    pub month: &'a str,
    pub day: &'a str,
    pub time: Option<TimeParts<'a>>,
}

pub(crate) struct TimeParts<'a> {
    pub hour: &'a str,
    pub minute: &'a str,
    pub second: &'a str,
    pub fraction: Option<&'a str>,
    pub zone: Option<Zone<'a>>,
}

pub(crate) enum Zone<'a> {
    Utc,
    Offset {
        negative: bool,
        hour: &'a str,
        minute: Option<&'a str>,
    },
}

pub(crate) fn parse_timestamp_parts(v: &str, resolver: bool) -> Option<TimestampParts<'_>> {
    let b = v.as_bytes();
    let mut c = Cur { b, i: 0 };
    let take = |c: &mut Cur, min: usize, max: usize| -> Option<(usize, usize)> {
        let start = c.i;
        let n = c.b[c.i..]
            .iter()
            .take(max)
            .take_while(|d| d.is_ascii_digit())
            .count();
        if n < min {
            return None;
        }
        c.i += n;
        Some((start, c.i))
    };
    let s = |r: (usize, usize)| &v[r.0..r.1];
    let year = take(&mut c, 4, 4)?;
    c.eat(|x| x == b'-').then_some(())?;
    let month = take(&mut c, 1, 2)?;
    c.eat(|x| x == b'-').then_some(())?;
    let day = take(&mut c, 1, 2)?;
    if c.done() {
        // The resolver's date-only form wants two-digit month and day.
        if resolver && (month.1 - month.0 != 2 || day.1 - day.0 != 2) {
            return None;
        }
        return Some(TimestampParts {
            year: s(year),
            month: s(month),
            day: s(day),
            time: None,
        });
    }
    if !(c.eat(|x| x == b'T' || x == b't') || c.many(|x| x == b' ' || x == b'\t') > 0) {
        return None;
    }
    let hour = take(&mut c, 1, 2)?;
    c.eat(|x| x == b':').then_some(())?;
    let minute = take(&mut c, 2, 2)?;
    c.eat(|x| x == b':').then_some(())?;
    let second = take(&mut c, 2, 2)?;
    let mut fraction = None;
    if c.eat(|x| x == b'.') {
        let start = c.i;
        c.many(digit);
        fraction = Some(&v[start..c.i]);
    }
    let mut zone = None;
    if !c.done() {
        c.many(|x| x == b' ' || x == b'\t');
        if c.eat(|x| x == b'Z') {
            zone = Some(Zone::Utc);
        } else {
            let negative = b.get(c.i) == Some(&b'-');
            c.eat(|x| x == b'-' || x == b'+').then_some(())?;
            let hour = take(&mut c, 1, 2)?;
            let mut minute = None;
            if c.eat(|x| x == b':') {
                minute = Some(s(take(&mut c, 2, 2)?));
            }
            zone = Some(Zone::Offset {
                negative,
                hour: s(hour),
                minute,
            });
        }
    }
    if !c.done() {
        return None;
    }
    Some(TimestampParts {
        year: s(year),
        month: s(month),
        day: s(day),
        time: Some(TimeParts {
            hour: s(hour),
            minute: s(minute),
            second: s(second),
            fraction,
            zone,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml11_table_for_pyyaml() {
        for (v, tag) in [
            ("yes", BOOL),
            ("y", STR),
            ("n", STR),
            ("NO", BOOL),
            ("~", NULL),
            ("", NULL),
            ("null", NULL),
            ("nULL", STR),
            ("Null", NULL),
            ("NULL", NULL),
            ("1_000", INT),
            ("0x1F", INT),
            ("0o17", STR),
            ("010", INT),
            ("08", STR),
            ("0b101", INT),
            ("1:20", INT),
            ("1:20.5", FLOAT),
            ("1:60", STR),
            ("1e3", STR),
            ("1.0e+3", FLOAT),
            ("1.0e3", STR),
            ("1.", FLOAT),
            (".5", FLOAT),
            ("+.5", STR),
            ("-.inf", FLOAT),
            (".NaN", FLOAT),
            ("-.nan", STR),
            ("2024-01-01", TIMESTAMP),
            ("2024-1-1", STR),
            ("2001-12-14 21:59:43.10 -5", TIMESTAMP),
            ("2001-12-14t21:59:43.10-05:00", TIMESTAMP),
            ("<<", MERGE),
            ("=", VALUE),
            ("12345678901234567890123", INT),
        ] {
            assert_eq!(resolve_plain(v), tag, "{v}");
        }
    }
}
