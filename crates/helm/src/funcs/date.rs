//! Sprig's date functions over a Go-like `time.Time` (UTC or a fixed offset) with Go
//! layouts (`2006-01-02T15:04:05Z07:00`). Time zones other than UTC fall back to UTC,
//! as Sprig does for a zone it cannot load. They read the clock, so their output is
//! never compared with Helm's.
use std::rc::Rc;

use chrono::{DateTime, Datelike, Duration, FixedOffset, TimeZone, Timelike, Utc};

use super::conv::to_int64;
use super::{s, FnResult, FuncDef};
use crate::func;
use crate::value::object::{Method, Object, Ty};
use crate::value::{Kind, Value};

pub const FUNCS: &[FuncDef] = &[
    func!("now", [], |_, _| Ok(time(Utc::now().fixed_offset()))),
    func!("date", [Str, Any], |_, a| Ok(Value::string(format_layout(
        &as_time(&a[1]),
        s(&a[0])
    )))),
    func!("dateInZone", [Str, Any, Str], |_, a| Ok(Value::string(
        format_layout(&in_zone(&as_time(&a[1]), s(&a[2])), s(&a[0]))
    ))),
    func!("date_in_zone", [Str, Any, Str], |_, a| Ok(Value::string(
        format_layout(&in_zone(&as_time(&a[1]), s(&a[2])), s(&a[0]))
    ))),
    func!("htmlDate", [Any], |_, a| Ok(Value::string(format_layout(
        &as_time(&a[0]),
        "2006-01-02"
    )))),
    func!("htmlDateInZone", [Any, Str], |_, a| Ok(Value::string(
        format_layout(&in_zone(&as_time(&a[0]), s(&a[1])), "2006-01-02")
    ))),
    func!("unixEpoch", [Any], |_, a| Ok(Value::string(
        as_time(&a[0]).timestamp().to_string()
    ))),
    func!("dateModify", [Str, Any], |_, a| Ok(
        modify(&a).unwrap_or_else(|_| a[1].clone())
    )),
    func!("date_modify", [Str, Any], |_, a| Ok(
        modify(&a).unwrap_or_else(|_| a[1].clone())
    )),
    func!("mustDateModify", [Str, Any], |_, a| modify(&a)),
    func!("must_date_modify", [Str, Any], |_, a| modify(&a)),
    func!("toDate", [Str, Str], |_, a| Ok(parse_layout(
        s(&a[0]),
        s(&a[1])
    )
    .map(time)
    .unwrap_or_else(|_| time(zero_time())))),
    func!("mustToDate", [Str, Str], |_, a| parse_layout(
        s(&a[0]),
        s(&a[1])
    )
    .map(time)
    .map_err(Into::into)),
    func!("duration", [Any], |_, a| Ok(Value::string(go_duration(
        to_int64(&a[0]).saturating_mul(1_000_000_000)
    )))),
    func!("durationRound", [Any], |_, a| Ok(Value::string(
        duration_round(&a[0])
    ))),
    func!("ago", [Any], |_, a| {
        let t = as_time(&a[0]);
        let secs = (Utc::now().fixed_offset() - t).num_seconds();
        Ok(Value::string(duration_round(&Value::Int64(
            secs.saturating_mul(1_000_000_000),
        ))))
    }),
];

fn zero_time() -> DateTime<FixedOffset> {
    Utc.with_ymd_and_hms(1, 1, 1, 0, 0, 0)
        .single()
        .unwrap_or_default()
        .fixed_offset()
}

/// A Go `time.Time`.
#[derive(Clone)]
pub struct Time(pub DateTime<FixedOffset>);

pub fn time(t: DateTime<FixedOffset>) -> Value {
    Value::Obj(Rc::new(Time(t)))
}

impl Object for Time {
    fn type_name(&self) -> &str {
        "time.Time"
    }
    fn kind(&self) -> Kind {
        Kind::Struct
    }
    fn field_names(&self) -> &'static [&'static str] {
        &[]
    }
    fn field(&self, _name: &str) -> Option<Value> {
        None
    }
    fn method(&self, name: &str) -> Option<Method> {
        let t = self.0;
        Some(match name {
            "Unix" => Method::new(&[], move |_| Ok(Value::Int64(t.timestamp()))),
            "UnixNano" => Method::new(&[], move |_| {
                Ok(Value::Int64(t.timestamp_nanos_opt().unwrap_or(0)))
            }),
            "Year" => Method::new(&[], move |_| Ok(Value::Int(i64::from(t.year())))),
            "YearDay" => Method::new(&[], move |_| Ok(Value::Int(i64::from(t.ordinal())))),
            "Day" => Method::new(&[], move |_| Ok(Value::Int(i64::from(t.day())))),
            "Hour" => Method::new(&[], move |_| Ok(Value::Int(i64::from(t.hour())))),
            "Minute" => Method::new(&[], move |_| Ok(Value::Int(i64::from(t.minute())))),
            "Second" => Method::new(&[], move |_| Ok(Value::Int(i64::from(t.second())))),
            "UTC" => Method::new(&[], move |_| Ok(time(t.with_timezone(&Utc).fixed_offset()))),
            "Format" => Method::new(&[Ty::Str], move |a| {
                Ok(Value::string(format_layout(&t, s(&a[0]))))
            }),
            "String" => Method::new(&[], move |_| Ok(Value::string(go_string(&t)))),
            _ => return None,
        })
    }
    fn stringer(&self, _top: bool) -> Option<String> {
        Some(go_string(&self.0))
    }
    fn json_value(&self) -> Option<Value> {
        Some(Value::string(format_layout(
            &self.0,
            "2006-01-02T15:04:05.999999999Z07:00",
        )))
    }
}

fn go_string(t: &DateTime<FixedOffset>) -> String {
    format_layout(t, "2006-01-02 15:04:05.999999999 -0700 MST")
}

fn as_time(v: &Value) -> DateTime<FixedOffset> {
    match v {
        Value::Obj(o) if o.type_name() == "time.Time" => {
            // Our only time.Time object; read it back through its Unix time and offset.
            let unix = o.method("UnixNano").and_then(|m| (m.call)(vec![]).ok());
            match unix {
                Some(Value::Int64(n)) => Utc.timestamp_nanos(n).fixed_offset(),
                _ => Utc::now().fixed_offset(),
            }
        }
        Value::Int(i) | Value::Int64(i) => Utc
            .timestamp_opt(*i, 0)
            .single()
            .unwrap_or_default()
            .fixed_offset(),
        _ => Utc::now().fixed_offset(),
    }
}

fn in_zone(t: &DateTime<FixedOffset>, zone: &str) -> DateTime<FixedOffset> {
    let _ = zone;
    t.with_timezone(&Utc).fixed_offset()
}

fn modify(a: &[Value]) -> FnResult {
    let d = parse_duration(s(&a[0])).map_err(|e| e.to_string())?;
    let t = as_time(&a[1]);
    Ok(time(t + Duration::nanoseconds(d)))
}

/// Go's `time.ParseDuration`, in nanoseconds.
pub fn parse_duration(s: &str) -> Result<i64, String> {
    let orig = s;
    let bad = || {
        format!(
            "time: invalid duration {}",
            crate::value::format::quote(orig, false)
        )
    };
    let (neg, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(bad());
    }
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_end == 0 {
            return Err(bad());
        }
        let n: f64 = rest[..num_end].parse().map_err(|_| bad())?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let mult = match &rest[..unit_end] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "" => {
                return Err(format!(
                    "time: missing unit in duration {}",
                    crate::value::format::quote(orig, false)
                ))
            }
            u => {
                return Err(format!(
                    "time: unknown unit {} in duration {}",
                    crate::value::format::quote(u, false),
                    crate::value::format::quote(orig, false)
                ))
            }
        };
        total += n * mult;
        rest = &rest[unit_end..];
    }
    Ok(if neg { -(total as i64) } else { total as i64 })
}

/// Go's `time.Duration.String()`.
pub fn go_duration(ns: i64) -> String {
    if ns == 0 {
        return "0s".into();
    }
    let neg = ns < 0;
    let u = ns.unsigned_abs();
    let mut out = String::new();
    if u < 1_000_000_000 {
        let (unit, div) = if u < 1_000 {
            ("ns", 1)
        } else if u < 1_000_000 {
            ("µs", 1_000)
        } else {
            ("ms", 1_000_000)
        };
        out.push_str(&frac(u, div));
        out.push_str(unit);
    } else {
        let h = u / 3_600_000_000_000;
        let m = (u / 60_000_000_000) % 60;
        let sec_ns = u % 60_000_000_000;
        if h > 0 {
            out.push_str(&format!("{h}h{m}m"));
        } else if m > 0 {
            out.push_str(&format!("{m}m"));
        }
        out.push_str(&frac(sec_ns, 1_000_000_000));
        out.push('s');
    }
    if neg {
        out.insert(0, '-');
    }
    out
}

fn frac(v: u64, div: u64) -> String {
    let whole = v / div;
    let rem = v % div;
    if rem == 0 {
        return whole.to_string();
    }
    let width = div.to_string().len() - 1;
    let f = format!("{rem:0width$}");
    format!("{whole}.{}", f.trim_end_matches('0'))
}

fn duration_round(v: &Value) -> String {
    let ns: i64 = match v {
        Value::Str(st) => parse_duration(st).unwrap_or(0),
        other => to_int64(other),
    };
    let u = ns.unsigned_abs();
    let neg = if ns < 0 { "-" } else { "" };
    const SEC: u64 = 1_000_000_000;
    let (year, month, day, hour, minute) = (
        SEC * 31_536_000,
        SEC * 2_592_000,
        SEC * 86_400,
        SEC * 3_600,
        SEC * 60,
    );
    let out = if u > year {
        format!("{}y", u / year)
    } else if u > month {
        format!("{}mo", u / month)
    } else if u > day {
        format!("{}d", u / day)
    } else if u > hour {
        format!("{}h", u / hour)
    } else if u > minute {
        format!("{}m", u / minute)
    } else if u > SEC {
        format!("{}s", u / SEC)
    } else {
        "0s".to_string()
    };
    format!("{neg}{out}")
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// Go's `Time.Format` for the common layout elements.
pub fn format_layout(t: &DateTime<FixedOffset>, layout: &str) -> String {
    let mut out = String::new();
    let mut rest = layout;
    let off = t.offset().local_minus_utc();
    while !rest.is_empty() {
        let tokens: &[(&str, &dyn Fn() -> String)] = &[
            ("January", &|| MONTHS[t.month0() as usize].to_string()),
            ("Jan", &|| MONTHS[t.month0() as usize][..3].to_string()),
            ("Monday", &|| {
                DAYS[t.weekday().num_days_from_sunday() as usize].to_string()
            }),
            ("Mon", &|| {
                DAYS[t.weekday().num_days_from_sunday() as usize][..3].to_string()
            }),
            ("MST", &|| {
                if off == 0 {
                    "UTC".into()
                } else {
                    zone(off, true, false)
                }
            }),
            ("2006", &|| format!("{:04}", t.year())),
            ("Z07:00", &|| {
                if off == 0 {
                    "Z".into()
                } else {
                    zone(off, true, true)
                }
            }),
            ("Z0700", &|| {
                if off == 0 {
                    "Z".into()
                } else {
                    zone(off, false, true)
                }
            }),
            ("-07:00", &|| zone(off, true, true)),
            ("-0700", &|| zone(off, false, true)),
            ("-07", &|| zone(off, false, false)),
            ("002", &|| format!("{:03}", t.ordinal())),
            ("01", &|| format!("{:02}", t.month())),
            ("02", &|| format!("{:02}", t.day())),
            ("_2", &|| format!("{:>2}", t.day())),
            ("03", &|| format!("{:02}", (t.hour() + 11) % 12 + 1)),
            ("04", &|| format!("{:02}", t.minute())),
            ("05", &|| format!("{:02}", t.second())),
            ("06", &|| format!("{:02}", t.year() % 100)),
            ("15", &|| format!("{:02}", t.hour())),
            ("PM", &|| {
                if t.hour() >= 12 {
                    "PM".into()
                } else {
                    "AM".into()
                }
            }),
            ("pm", &|| {
                if t.hour() >= 12 {
                    "pm".into()
                } else {
                    "am".into()
                }
            }),
            (".000000000", &|| format!(".{:09}", t.nanosecond())),
            (".000000", &|| format!(".{:06}", t.nanosecond() / 1000)),
            (".000", &|| format!(".{:03}", t.nanosecond() / 1_000_000)),
            (".999999999", &|| {
                trim_frac(format!("{:09}", t.nanosecond()))
            }),
            (".999999", &|| {
                trim_frac(format!("{:06}", t.nanosecond() / 1000))
            }),
            (".999", &|| {
                trim_frac(format!("{:03}", t.nanosecond() / 1_000_000))
            }),
            ("1", &|| t.month().to_string()),
            ("2", &|| t.day().to_string()),
            ("3", &|| ((t.hour() + 11) % 12 + 1).to_string()),
            ("4", &|| t.minute().to_string()),
            ("5", &|| t.second().to_string()),
        ];
        let mut matched = false;
        for (tok, f) in tokens {
            if rest.starts_with(tok) {
                out.push_str(&f());
                rest = &rest[tok.len()..];
                matched = true;
                break;
            }
        }
        if !matched {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

fn trim_frac(digits: String) -> String {
    let t = digits.trim_end_matches('0');
    if t.is_empty() {
        String::new()
    } else {
        format!(".{t}")
    }
}

fn zone(off: i32, colon: bool, minutes: bool) -> String {
    let sign = if off < 0 { '-' } else { '+' };
    let a = off.unsigned_abs();
    let (h, m) = (a / 3600, (a % 3600) / 60);
    match (minutes, colon) {
        (true, true) => format!("{sign}{h:02}:{m:02}"),
        (true, false) => format!("{sign}{h:02}{m:02}"),
        _ => format!("{sign}{h:02}"),
    }
}

/// Go's `time.ParseInLocation` for numeric layouts (year, month, day, time, offset).
fn parse_layout(layout: &str, value: &str) -> Result<DateTime<FixedOffset>, String> {
    let err = || {
        format!(
            "parsing time {} as {}: cannot parse",
            crate::value::format::quote(value, false),
            crate::value::format::quote(layout, false)
        )
    };
    let (mut y, mut mo, mut d, mut h, mut mi, mut se, mut off) =
        (1i32, 1u32, 1u32, 0u32, 0u32, 0u32, 0i32);
    let mut l = layout;
    let mut v = value;
    let take = |v: &mut &str, n: usize| -> Result<u32, String> {
        if v.len() < n || !v.as_bytes()[..n].iter().all(u8::is_ascii_digit) {
            return Err(err());
        }
        let x = v[..n].parse().map_err(|_| err())?;
        *v = &v[n..];
        Ok(x)
    };
    while !l.is_empty() {
        if let Some(r) = l.strip_prefix("2006") {
            y = take(&mut v, 4)? as i32;
            l = r;
        } else if let Some(r) = l.strip_prefix("01") {
            mo = take(&mut v, 2)?;
            l = r;
        } else if let Some(r) = l.strip_prefix("02") {
            d = take(&mut v, 2)?;
            l = r;
        } else if let Some(r) = l.strip_prefix("15") {
            h = take(&mut v, 2)?;
            l = r;
        } else if let Some(r) = l.strip_prefix("04") {
            mi = take(&mut v, 2)?;
            l = r;
        } else if let Some(r) = l.strip_prefix("05") {
            se = take(&mut v, 2)?;
            l = r;
        } else if let Some(r) = l.strip_prefix("Z07:00") {
            if let Some(rv) = v.strip_prefix('Z') {
                v = rv;
            } else {
                let sign = if v.starts_with('-') { -1 } else { 1 };
                v = v.get(1..).ok_or_else(err)?;
                let hh = take(&mut v, 2)? as i32;
                v = v.strip_prefix(':').ok_or_else(err)?;
                let mm = take(&mut v, 2)? as i32;
                off = sign * (hh * 3600 + mm * 60);
            }
            l = r;
        } else {
            let c = l.chars().next().unwrap_or(' ');
            if !v.starts_with(c) {
                return Err(err());
            }
            l = &l[c.len_utf8()..];
            v = &v[c.len_utf8()..];
        }
    }
    if !v.is_empty() {
        return Err(err());
    }
    let tz = FixedOffset::east_opt(off).ok_or_else(err)?;
    tz.with_ymd_and_hms(y, mo, d, h, mi, se)
        .single()
        .ok_or_else(err)
}
