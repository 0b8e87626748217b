//! Go's `fmt` printing: `%v` and the `printf` verbs, as `print`, `printf`, `println`,
//! `toString` and action output produce them.
//!
//! Rules kept from Go: floats use `strconv`'s shortest form with `%e` from exponent 21
//! (`%v` of 1234567.0 is `1.234567e+06`); maps print `map[k:v]` in key order; a nil
//! inside a container prints `<nil>`; a verb that does not fit the value prints
//! `%!d(string=x)`; missing and extra arguments print `%!d(MISSING)` and
//! `%!(EXTRA int=1)`; width and precision count runes.
use std::fmt::Write;

use unicode_general_category::{get_general_category, GeneralCategory};

use super::{ListKind, Value};

/// Deeper nesting than this is treated as a cycle (a map `set` into itself).
const MAX_DEPTH: usize = 1_000;

#[derive(Clone, Copy, Default)]
struct Flags {
    plus: bool,
    minus: bool,
    sharp: bool,
    space: bool,
    zero: bool,
    plus_v: bool,
    sharp_v: bool,
    wid: Option<usize>,
    prec: Option<usize>,
}

struct Printer {
    buf: String,
    f: Flags,
}

/// `fmt.Sprint(v)` of one value: nil prints `<nil>`.
pub fn sprint_value(v: &Value) -> String {
    let mut p = Printer::new();
    p.print_arg(v, 'v', false);
    p.buf
}

/// What a template action prints: nil prints `<no value>`, a pointer is followed, and a
/// host object's `String()` is used.
pub fn print_action(v: &Value) -> String {
    match v {
        Value::Nil => "<no value>".to_string(),
        Value::Str(s) => String::from(&**s),
        Value::Obj(o) => match o.stringer(true) {
            Some(s) => s,
            None => {
                let mut p = Printer::new();
                p.print_struct(v, 'v', 1);
                p.buf
            }
        },
        _ => sprint_value(v),
    }
}

/// `fmt.Sprint(args...)`: a space between operands when neither is a string.
pub fn sprint(args: &[Value]) -> String {
    let mut p = Printer::new();
    let mut prev_string = false;
    for (i, a) in args.iter().enumerate() {
        let is_string = matches!(a, Value::Str(_));
        if i > 0 && !is_string && !prev_string {
            p.buf.push(' ');
        }
        p.print_arg(a, 'v', false);
        prev_string = is_string;
    }
    p.buf
}

/// `fmt.Sprintln(args...)`: spaces between all operands and a newline.
pub fn sprintln(args: &[Value]) -> String {
    let mut p = Printer::new();
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            p.buf.push(' ');
        }
        p.print_arg(a, 'v', false);
    }
    p.buf.push('\n');
    p.buf
}

/// `fmt.Sprintf(format, args...)`.
pub fn sprintf(format: &str, args: &[Value]) -> String {
    // Room for the format and short operands: most results need no regrowth.
    let mut p = Printer::with_capacity(format.len() + 16 * args.len());
    p.do_printf(format, args);
    p.buf
}

impl Printer {
    fn new() -> Printer {
        Printer::with_capacity(16)
    }

    fn with_capacity(n: usize) -> Printer {
        Printer {
            buf: String::with_capacity(n),
            f: Flags::default(),
        }
    }

    fn do_printf(&mut self, format: &str, args: &[Value]) {
        let b = format.as_bytes();
        let end = b.len();
        let mut arg_num = 0usize;
        let mut reordered = false;
        let mut i = 0usize;
        while i < end {
            let mut good_arg_num = true;
            let lasti = i;
            while i < end && b[i] != b'%' {
                i += 1;
            }
            if i > lasti {
                self.buf.push_str(&format[lasti..i]);
            }
            if i >= end {
                break;
            }
            i += 1;
            self.f = Flags::default();
            // Flags.
            while i < end {
                match b[i] {
                    b'#' => self.f.sharp = true,
                    b'0' => self.f.zero = !self.f.minus,
                    b'+' => self.f.plus = true,
                    b'-' => {
                        self.f.minus = true;
                        self.f.zero = false;
                    }
                    b' ' => self.f.space = true,
                    _ => break,
                }
                i += 1;
            }
            // Argument index, width.
            let mut after_index;
            (arg_num, i, after_index) = arg_number(
                arg_num,
                format,
                i,
                args.len(),
                &mut good_arg_num,
                &mut reordered,
            );
            if i < end && b[i] == b'*' {
                i += 1;
                let (w, ok, n) = int_from_arg(args, arg_num);
                arg_num = n;
                if !ok {
                    self.buf.push_str("%!(BADWIDTH)");
                    self.f.wid = None;
                } else if w < 0 {
                    self.f.wid = Some(w.unsigned_abs() as usize);
                    self.f.minus = true;
                    self.f.zero = false;
                } else {
                    self.f.wid = Some(w as usize);
                }
                after_index = false;
            } else {
                let (w, present, ni) = parse_num(format, i);
                i = ni;
                if present {
                    self.f.wid = Some(w);
                    if after_index {
                        good_arg_num = false;
                    }
                }
            }
            // Precision.
            if i + 1 < end && b[i] == b'.' {
                i += 1;
                if after_index {
                    good_arg_num = false;
                }
                (arg_num, i, after_index) = arg_number(
                    arg_num,
                    format,
                    i,
                    args.len(),
                    &mut good_arg_num,
                    &mut reordered,
                );
                if i < end && b[i] == b'*' {
                    i += 1;
                    let (pv, ok, n) = int_from_arg(args, arg_num);
                    arg_num = n;
                    if pv < 0 {
                        self.f.prec = None;
                    } else if ok {
                        self.f.prec = Some(pv as usize);
                    }
                    if !ok || pv < 0 {
                        if !ok {
                            self.buf.push_str("%!(BADPREC)");
                        }
                        self.f.prec = None;
                    }
                    after_index = false;
                } else {
                    let (pv, present, ni) = parse_num(format, i);
                    i = ni;
                    self.f.prec = Some(if present { pv } else { 0 });
                }
            }
            if !after_index {
                (arg_num, i, _) = arg_number(
                    arg_num,
                    format,
                    i,
                    args.len(),
                    &mut good_arg_num,
                    &mut reordered,
                );
            }
            if i >= end {
                self.buf.push_str("%!(NOVERB)");
                break;
            }
            let verb = match format[i..].chars().next() {
                Some(c) => c,
                None => break,
            };
            i += verb.len_utf8();
            if verb == '%' {
                self.buf.push('%');
            } else if !good_arg_num {
                let _ = write!(self.buf, "%!{verb}(BADINDEX)");
            } else if arg_num >= args.len() {
                let _ = write!(self.buf, "%!{verb}(MISSING)");
            } else {
                if verb == 'v' {
                    self.f.sharp_v = self.f.sharp;
                    self.f.sharp = false;
                    self.f.plus_v = self.f.plus;
                    self.f.plus = false;
                }
                self.print_arg(&args[arg_num], verb, false);
                arg_num += 1;
            }
        }
        if !reordered && arg_num < args.len() {
            self.f = Flags::default();
            self.buf.push_str("%!(EXTRA ");
            for (k, a) in args[arg_num..].iter().enumerate() {
                if k > 0 {
                    self.buf.push_str(", ");
                }
                if a.is_nil() {
                    self.buf.push_str("<nil>");
                } else {
                    self.buf.push_str(&a.type_name());
                    self.buf.push('=');
                    self.print_arg(a, 'v', false);
                }
            }
            self.buf.push(')');
        }
    }

    /// `pp.printArg`: `depth_gt0` is true for elements of containers.
    fn print_arg(&mut self, v: &Value, verb: char, nested: bool) {
        self.print_value(v, verb, if nested { 1 } else { 0 });
    }

    fn print_value(&mut self, v: &Value, verb: char, depth: usize) {
        if depth > MAX_DEPTH {
            self.buf.push_str("<too deep>");
            return;
        }
        if verb == 'T' {
            let t = v.type_name();
            self.fmt_s(&t);
            return;
        }
        match v {
            Value::Nil => {
                if depth > 0 || verb == 'v' {
                    self.pad_str("<nil>");
                } else {
                    self.bad_verb(verb, v);
                }
            }
            Value::Bool(b) => match verb {
                't' | 'v' => self.pad_str(if *b { "true" } else { "false" }),
                _ => self.bad_verb(verb, v),
            },
            Value::Int(i) | Value::Int64(i) => self.fmt_int(*i as u64, *i < 0, true, verb, v),
            Value::Uint64(u) => self.fmt_int(*u, false, false, verb, v),
            Value::Float(x) => self.fmt_float(*x, verb, v),
            Value::Str(s) => self.fmt_string(s, verb, v),
            Value::Bytes(bytes) => match verb {
                's' | 'q' | 'x' | 'X' => {
                    let s = String::from_utf8_lossy(bytes).into_owned();
                    self.fmt_string(&s, verb, v)
                }
                _ => {
                    self.buf.push('[');
                    for (k, x) in bytes.iter().enumerate() {
                        if k > 0 {
                            self.buf.push(' ');
                        }
                        let e = Value::Uint64(u64::from(*x));
                        self.fmt_int(u64::from(*x), false, false, verb, &e);
                    }
                    self.buf.push(']');
                }
            },
            Value::List(l) => {
                if self.f.sharp_v {
                    self.buf.push_str(&v.type_name());
                    self.buf.push('{');
                    for (k, x) in l.items.iter().enumerate() {
                        if k > 0 {
                            self.buf.push_str(", ");
                        }
                        self.print_value(x, verb, depth + 1);
                    }
                    self.buf.push('}');
                    return;
                }
                self.buf.push('[');
                for (k, x) in l.items.iter().enumerate() {
                    if k > 0 {
                        self.buf.push(' ');
                    }
                    self.print_value(x, verb, depth + 1);
                }
                self.buf.push(']');
            }
            Value::Map(m) => {
                if self.f.sharp_v {
                    self.buf.push_str(&v.type_name());
                    self.buf.push('{');
                    for (k, (key, x)) in m.snapshot().iter().enumerate() {
                        if k > 0 {
                            self.buf.push_str(", ");
                        }
                        self.fmt_string(key, verb, &Value::Str(key.clone()));
                        self.buf.push(':');
                        self.print_value(x, verb, depth + 1);
                    }
                    self.buf.push('}');
                    return;
                }
                self.buf.push_str("map[");
                for (k, (key, x)) in m.snapshot().iter().enumerate() {
                    if k > 0 {
                        self.buf.push(' ');
                    }
                    self.fmt_string(key, verb, &Value::Str(key.clone()));
                    self.buf.push(':');
                    self.print_value(x, verb, depth + 1);
                }
                self.buf.push(']');
            }
            Value::Obj(o) => {
                if matches!(verb, 'v' | 's' | 'q' | 'x' | 'X') && !self.f.sharp_v {
                    if let Some(s) = o.stringer(false) {
                        self.fmt_string(&s, verb, v);
                        return;
                    }
                }
                if let Some(items) = o.items() {
                    self.print_value(&Value::list(ListKind::Iface, items), verb, depth);
                    return;
                }
                if depth == 0 && o.kind() == super::Kind::Ptr {
                    self.buf.push('&');
                }
                self.print_struct(v, verb, depth + 1);
            }
        }
    }

    fn print_struct(&mut self, v: &Value, verb: char, depth: usize) {
        let Value::Obj(o) = v else { return };
        self.buf.push('{');
        let names = o.field_names();
        for (k, fv) in o.print_fields().iter().enumerate() {
            if k > 0 {
                self.buf.push(' ');
            }
            if self.f.plus_v {
                self.buf.push_str(names.get(k).copied().unwrap_or(""));
                self.buf.push(':');
            }
            self.print_value(fv, verb, depth + 1);
        }
        self.buf.push('}');
    }

    fn bad_verb(&mut self, verb: char, v: &Value) {
        let _ = write!(self.buf, "%!{verb}(");
        if v.is_nil() {
            self.buf.push_str("<nil>");
        } else {
            self.buf.push_str(&v.type_name());
            self.buf.push('=');
            let saved = self.f;
            self.f.sharp_v = false;
            self.print_value(v, 'v', 0);
            self.f = saved;
        }
        self.buf.push(')');
    }

    /// Pads `s` to the width, counting runes; zeros only to the left.
    fn pad_str(&mut self, s: &str) {
        let Some(w) = self.f.wid else {
            self.buf.push_str(s);
            return;
        };
        let n = s.chars().count();
        if n >= w {
            self.buf.push_str(s);
            return;
        }
        let fill = if self.f.zero { '0' } else { ' ' };
        if self.f.minus {
            self.buf.push_str(s);
            self.buf.extend(std::iter::repeat_n(' ', w - n));
        } else {
            self.buf.extend(std::iter::repeat_n(fill, w - n));
            self.buf.push_str(s);
        }
    }

    fn fmt_s(&mut self, s: &str) {
        let s = self.truncate(s);
        self.pad_str(&s);
    }

    fn truncate<'a>(&self, s: &'a str) -> std::borrow::Cow<'a, str> {
        match self.f.prec {
            Some(p) => s.chars().take(p).collect(),
            None => s.into(),
        }
    }

    fn fmt_string(&mut self, s: &str, verb: char, v: &Value) {
        match verb {
            'v' => {
                if self.f.sharp_v {
                    self.pad_str(&quote(s, false));
                } else {
                    self.fmt_s(s)
                }
            }
            's' => self.fmt_s(s),
            'x' | 'X' => self.fmt_sx(s.as_bytes(), verb == 'X'),
            'q' => {
                let t = self.truncate(s);
                if self.f.sharp && can_backquote(&t) {
                    self.pad_str(&format!("`{t}`"));
                } else {
                    self.pad_str(&quote(&t, self.f.plus));
                }
            }
            _ => self.bad_verb(verb, v),
        }
    }

    fn fmt_sx(&mut self, bytes: &[u8], upper: bool) {
        let digits: &[u8] = if upper {
            b"0123456789ABCDEF"
        } else {
            b"0123456789abcdef"
        };
        let n = match self.f.prec {
            Some(p) if p < bytes.len() => p,
            _ => bytes.len(),
        };
        let mut out = String::new();
        for (k, &c) in bytes[..n].iter().enumerate() {
            if self.f.space && k > 0 {
                out.push(' ');
            }
            if self.f.sharp && (self.f.space || k == 0) {
                out.push('0');
                out.push(if upper { 'X' } else { 'x' });
            }
            out.push(digits[(c >> 4) as usize] as char);
            out.push(digits[(c & 15) as usize] as char);
        }
        self.pad_str(&out);
    }

    fn fmt_int(&mut self, u: u64, negative: bool, signed: bool, verb: char, v: &Value) {
        let base = match verb {
            'v' | 'd' => 10,
            'b' => 2,
            'o' | 'O' => 8,
            'x' | 'X' => 16,
            'c' => {
                let c = char::from_u32(u as u32).unwrap_or('\u{FFFD}');
                let s = c.to_string();
                self.pad_str(&s);
                return;
            }
            'q' => {
                let c = char::from_u32(u as u32).unwrap_or('\u{FFFD}');
                let s = quote_rune(c, self.f.plus);
                self.pad_str(&s);
                return;
            }
            'U' => {
                let mut s = format!("U+{:04X}", u);
                if self.f.sharp {
                    if let Some(c) = char::from_u32(u as u32) {
                        if is_print(c) {
                            s = format!("{s} '{c}'");
                        }
                    }
                }
                self.pad_str(&s);
                return;
            }
            _ => {
                self.bad_verb(verb, v);
                return;
            }
        };
        let _ = signed;
        let mag = if negative {
            (u as i64).unsigned_abs()
        } else {
            u
        };
        let digits: &[u8] = if verb == 'X' {
            b"0123456789ABCDEF"
        } else {
            b"0123456789abcdef"
        };
        let mut prec = 0usize;
        if let Some(p) = self.f.prec {
            prec = p;
            if p == 0 && mag == 0 {
                let saved = self.f.zero;
                self.f.zero = false;
                self.pad_str("");
                self.f.zero = saved;
                return;
            }
        } else if self.f.zero && !self.f.minus {
            if let Some(w) = self.f.wid {
                prec = w;
                if negative || self.f.plus || self.f.space {
                    prec = prec.saturating_sub(1);
                }
            }
        }
        let mut rev: Vec<u8> = Vec::new();
        let mut m = mag;
        loop {
            rev.push(digits[(m % base) as usize]);
            m /= base;
            if m == 0 {
                break;
            }
        }
        while rev.len() < prec {
            rev.push(b'0');
        }
        if self.f.sharp {
            match base {
                2 => rev.extend_from_slice(b"b0"),
                8 if rev.last() != Some(&b'0') => rev.push(b'0'),
                16 => {
                    rev.push(if verb == 'X' { b'X' } else { b'x' });
                    rev.push(b'0');
                }
                _ => {}
            }
        }
        if verb == 'O' {
            rev.extend_from_slice(b"o0");
        }
        if negative {
            rev.push(b'-');
        } else if self.f.plus {
            rev.push(b'+');
        } else if self.f.space {
            rev.push(b' ');
        }
        rev.reverse();
        let s = String::from_utf8(rev).unwrap_or_default();
        let saved = self.f.zero;
        self.f.zero = false;
        self.pad_str(&s);
        self.f.zero = saved;
    }

    fn fmt_float(&mut self, x: f64, verb: char, v: &Value) {
        let (fverb, prec) = match verb {
            'v' => ('g', None),
            'g' | 'G' | 'b' | 'x' | 'X' => (verb, None),
            'f' | 'F' | 'e' | 'E' => (verb, Some(6)),
            _ => {
                self.bad_verb(verb, v);
                return;
            }
        };
        if matches!(fverb, 'b' | 'x' | 'X') {
            // Binary and hexadecimal float forms are not used by charts.
            self.bad_verb(verb, v);
            return;
        }
        let prec = self.f.prec.or(prec);
        let mut num = format_float(x, fverb, prec);
        if !num.starts_with('-') && !num.starts_with('+') {
            num.insert(0, '+');
        }
        if self.f.space && num.starts_with('+') && !self.f.plus {
            num.replace_range(0..1, " ");
        }
        let body = &num[1..];
        if body.starts_with('I') || body.starts_with('N') {
            let saved = self.f.zero;
            self.f.zero = false;
            let s = if body.starts_with('N') && !self.f.space && !self.f.plus {
                body.to_string()
            } else {
                num.clone()
            };
            self.pad_str(&s);
            self.f.zero = saved;
            return;
        }
        if self.f.plus || !num.starts_with('+') {
            if self.f.zero {
                if let Some(w) = self.f.wid {
                    if w > num.len() {
                        let sign = &num[..1];
                        self.buf.push_str(sign);
                        self.buf.extend(std::iter::repeat_n('0', w - num.len()));
                        self.buf.push_str(&num[1..]);
                        return;
                    }
                }
            }
            self.pad_str(&num);
            return;
        }
        let s = num[1..].to_string();
        self.pad_str(&s);
    }
}

fn arg_number(
    arg_num: usize,
    format: &str,
    i: usize,
    num_args: usize,
    good: &mut bool,
    reordered: &mut bool,
) -> (usize, usize, bool) {
    let b = format.as_bytes();
    if i >= b.len() || b[i] != b'[' {
        return (arg_num, i, false);
    }
    *reordered = true;
    // Find the closing bracket.
    let mut j = i + 1;
    while j < b.len() {
        if b[j] == b']' {
            let (n, ok, after) = parse_num(format, i + 1);
            if !ok || after != j {
                *good = false;
                return (arg_num, j + 1, true);
            }
            let idx = n.wrapping_sub(1);
            if n >= 1 && idx < num_args {
                return (idx, j + 1, true);
            }
            *good = false;
            return (arg_num, j + 1, true);
        }
        j += 1;
    }
    *good = false;
    (arg_num, i + 1, false)
}

fn parse_num(s: &str, start: usize) -> (usize, bool, usize) {
    let b = s.as_bytes();
    let mut i = start;
    let mut n = 0usize;
    while i < b.len() && b[i].is_ascii_digit() {
        if n > 1_000_000 {
            return (0, false, b.len());
        }
        n = n * 10 + (b[i] - b'0') as usize;
        i += 1;
    }
    (n, i > start, i)
}

fn int_from_arg(args: &[Value], arg_num: usize) -> (i64, bool, usize) {
    if arg_num >= args.len() {
        return (0, false, arg_num);
    }
    let n = match &args[arg_num] {
        Value::Int(i) | Value::Int64(i) => Some(*i),
        Value::Uint64(u) => i64::try_from(*u).ok(),
        _ => None,
    };
    match n {
        Some(n) if (-1_000_000..=1_000_000).contains(&n) => (n, true, arg_num + 1),
        _ => (0, false, arg_num + 1),
    }
}

/// Decimal digits of |x| and the decimal point position, as Go's `decimal` holds them:
/// `digits` has no trailing zeros, value = 0.d1d2.. × 10^dp. Zero has no digits.
fn decimal_digits(x: f64, sig: Option<usize>) -> (Vec<u8>, i32) {
    let a = x.abs();
    if a == 0.0 {
        return (Vec::new(), 0);
    }
    // Integers below 2^53 (ports, replicas, sizes read from values files as float64):
    // each neighbouring double is at most 1 away, so the shortest digits that read back
    // are the integer's own, and no float formatting is needed.
    if sig.is_none() && a < 9_007_199_254_740_992.0 && a.fract() == 0.0 {
        return integral_digits(a as u64);
    }
    formatted_digits(a, sig)
}

/// [`decimal_digits`] of a positive integer.
fn integral_digits(n: u64) -> (Vec<u8>, i32) {
    let mut digits = n.to_string().into_bytes();
    let dp = digits.len() as i32;
    while digits.len() > 1 && digits.last() == Some(&b'0') {
        digits.pop();
    }
    (digits, dp)
}

/// [`decimal_digits`] of a positive `a` through Rust's shortest (or `sig`-digit) formatting.
fn formatted_digits(a: f64, sig: Option<usize>) -> (Vec<u8>, i32) {
    let s = match sig {
        None => format!("{a:e}"),
        Some(p) => format!("{:.*e}", p.saturating_sub(1), a),
    };
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let mut digits: Vec<u8> = mant.bytes().filter(u8::is_ascii_digit).collect();
    while digits.len() > 1 && digits.last() == Some(&b'0') {
        digits.pop();
    }
    if digits == [b'0'] {
        return (Vec::new(), 0);
    }
    (digits, exp + 1)
}

/// `strconv.FormatFloat(x, verb, prec, 64)` for the verbs e, E, f, F, g, G.
pub fn format_float(x: f64, verb: char, prec: Option<usize>) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    let neg = x.is_sign_negative();
    let mut out = String::with_capacity(24);
    if neg {
        out.push('-');
    }
    match verb {
        'f' | 'F' => {
            match prec {
                Some(p) => {
                    let _ = write!(out, "{:.*}", p, x.abs());
                }
                None => {
                    let (d, dp) = decimal_digits(x, None);
                    let p = (d.len() as i32 - dp).max(0) as usize;
                    fmt_f(&mut out, &d, dp, p);
                }
            }
            out
        }
        'e' | 'E' => {
            let (d, dp, p) = match prec {
                Some(p) => {
                    let (d, dp) = decimal_digits(x, Some(p + 1));
                    (d, dp, p)
                }
                None => {
                    let (d, dp) = decimal_digits(x, None);
                    let p = d.len().saturating_sub(1);
                    (d, dp, p)
                }
            };
            fmt_e(&mut out, &d, dp, p, verb);
            out
        }
        _ => {
            let upper = verb == 'G';
            let (d, dp, mut p, shortest) = match prec {
                None => {
                    let (d, dp) = decimal_digits(x, None);
                    let n = d.len();
                    (d, dp, n, true)
                }
                Some(p) => {
                    let p = if p == 0 { 1 } else { p };
                    let (d, dp) = decimal_digits(x, Some(p));
                    (d, dp, p, false)
                }
            };
            let nd = d.len() as i32;
            let mut eprec = p as i32;
            if eprec > nd && nd >= dp {
                eprec = nd;
            }
            if shortest {
                eprec = 6;
            }
            let exp = dp - 1;
            if exp < -4 || exp >= eprec {
                if p as i32 > nd {
                    p = nd.max(0) as usize;
                }
                fmt_e(
                    &mut out,
                    &d,
                    dp,
                    p.saturating_sub(1),
                    if upper { 'E' } else { 'e' },
                );
                return out;
            }
            if p as i32 > dp {
                p = nd.max(0) as usize;
            }
            fmt_f(&mut out, &d, dp, (p as i32 - dp).max(0) as usize);
            out
        }
    }
}

fn digit_at(d: &[u8], i: i32) -> char {
    if i >= 0 && (i as usize) < d.len() {
        d[i as usize] as char
    } else {
        '0'
    }
}

fn fmt_e(out: &mut String, d: &[u8], dp: i32, prec: usize, verb: char) {
    out.push(digit_at(d, 0));
    if prec > 0 {
        out.push('.');
        for i in 1..=prec {
            out.push(digit_at(d, i as i32));
        }
    }
    out.push(verb);
    let exp = if d.is_empty() { 0 } else { dp - 1 };
    out.push(if exp < 0 { '-' } else { '+' });
    let e = exp.unsigned_abs();
    if e < 10 {
        out.push('0');
    }
    let _ = write!(out, "{e}");
}

fn fmt_f(out: &mut String, d: &[u8], dp: i32, prec: usize) {
    if dp > 0 {
        for i in 0..dp {
            out.push(digit_at(d, i));
        }
    } else {
        out.push('0');
    }
    if prec > 0 {
        out.push('.');
        for i in 1..=prec as i32 {
            out.push(digit_at(d, dp + i - 1));
        }
    }
}

/// Go's `unicode.IsPrint`: letters, marks, numbers, punctuation, symbols and ASCII space.
pub fn is_print(c: char) -> bool {
    if (c as u32) < 0x80 {
        return (' '..='~').contains(&c);
    }
    use GeneralCategory as G;
    !matches!(
        get_general_category(c),
        G::Control
            | G::Format
            | G::Surrogate
            | G::PrivateUse
            | G::Unassigned
            | G::SpaceSeparator
            | G::LineSeparator
            | G::ParagraphSeparator
    )
}

/// `strconv.Quote` (or `QuoteToASCII` when `ascii`).
pub fn quote(s: &str, ascii: bool) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    quote_into(&mut out, s, ascii);
    out
}

/// [`quote`], appended to `out`.
pub fn quote_into(out: &mut String, s: &str, ascii: bool) {
    let q = '"';
    out.reserve(s.len() + 2);
    out.push(q);
    let bytes = s.as_bytes();
    // Printable ASCII other than the quote and the backslash is copied in runs.
    let plain = |b: u8| (b' '..=b'~').contains(&b) && b != q as u8 && b != b'\\';
    let mut i = 0;
    let mut run = 0;
    while i < bytes.len() {
        if plain(bytes[i]) {
            i += 1;
            continue;
        }
        out.push_str(&s[run..i]);
        let Some(c) = s[i..].chars().next() else {
            break;
        };
        i += c.len_utf8();
        run = i;
        escape_rune(out, c, q, ascii);
    }
    out.push_str(&s[run..]);
    out.push(q);
}

fn escape_rune(out: &mut String, c: char, q: char, ascii: bool) {
    if c == q || c == '\\' {
        out.push('\\');
        out.push(c);
        return;
    }
    if ascii {
        if (c as u32) < 0x80 && is_print(c) {
            out.push(c);
            return;
        }
    } else if is_print(c) {
        out.push(c);
        return;
    }
    match c {
        '\x07' => out.push_str("\\a"),
        '\x08' => out.push_str("\\b"),
        '\x0c' => out.push_str("\\f"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\x0b' => out.push_str("\\v"),
        _ => {
            let u = c as u32;
            if u < 0x20 || u == 0x7f {
                let _ = write!(out, "\\x{u:02x}");
            } else if u < 0x10000 {
                let _ = write!(out, "\\u{u:04x}");
            } else {
                let _ = write!(out, "\\U{u:08x}");
            }
        }
    }
}

/// `strconv.QuoteRune`.
pub fn quote_rune(c: char, ascii: bool) -> String {
    let mut out = String::from("'");
    escape_rune(&mut out, c, '\'', ascii);
    out.push('\'');
    out
}

/// `strconv.CanBackquote`.
fn can_backquote(s: &str) -> bool {
    s.chars()
        .all(|c| c != '`' && c != '\u{FEFF}' && (c == '\t' || !(c < ' ' || c == '\x7f')))
}

/// Go's `strconv.Quote` over raw bytes: invalid UTF-8 bytes become `\xNN`.
pub fn quote_bytes(b: &[u8]) -> String {
    let mut out = String::from("\"");
    let mut i = 0;
    while i < b.len() {
        match std::str::from_utf8(&b[i..]) {
            Ok(s) => {
                for c in s.chars() {
                    escape_rune(&mut out, c, '"', false);
                }
                break;
            }
            Err(e) => {
                let good = e.valid_up_to();
                if let Ok(s) = std::str::from_utf8(&b[i..i + good]) {
                    for c in s.chars() {
                        escape_rune(&mut out, c, '"', false);
                    }
                }
                i += good;
                if i < b.len() {
                    let _ = write!(out, "\\x{:02x}", b[i]);
                    i += 1;
                }
            }
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_like_go() {
        let cases = [
            (1234567.0, "1.234567e+06"),
            (100000.0, "100000"),
            (1e6, "1e+06"),
            (0.1, "0.1"),
            (1e21, "1e+21"),
            (1e-7, "1e-07"),
            (0.0001, "0.0001"),
            (-0.0, "-0"),
            (123456789.0, "1.23456789e+08"),
            (1.5, "1.5"),
        ];
        for (x, want) in cases {
            assert_eq!(sprint_value(&Value::Float(x)), want, "{x}");
        }
    }

    #[test]
    fn integral_floats_take_their_own_digits() {
        let mut cases: Vec<u64> = vec![1, 7, 10, 8000, 65535, 123456789, 1 << 53];
        for e in 0..16 {
            let p = 10u64.pow(e);
            cases.extend([p, p - 1 + u64::from(e == 0), p + 1, 9 * p, 3 * p + 7]);
        }
        for k in 1..=53 {
            cases.extend([(1u64 << k) - 1, 1 << k, (1 << k) + 1]);
        }
        for n in cases.into_iter().filter(|n| (1..=1 << 53).contains(n)) {
            assert_eq!(integral_digits(n), formatted_digits(n as f64, None), "{n}");
        }
    }

    #[test]
    fn quote_escapes_like_go_around_plain_runs() {
        // strconv.Quote's output for each input.
        let cases = [
            ("", r#""""#),
            ("plain text", r#""plain text""#),
            ("a\"b\\c\td", r#""a\"b\\c\td""#),
            ("\u{7f}é\u{200b}x", r#""\x7fé\u200bx""#),
            ("\n", r#""\n""#),
            ("tail\u{1F600}", r#""tail😀""#),
        ];
        for (s, want) in cases {
            assert_eq!(quote(s, false), want, "{s:?}");
        }
        assert_eq!(quote("é", true), r#""\u00e9""#);
    }

    #[test]
    fn printf_verbs() {
        let s = |f: &str, a: &[Value]| sprintf(f, a);
        assert_eq!(s("%5.2f|", &[Value::Float(1.23456)]), " 1.23|");
        assert_eq!(s("%-6s|", &[Value::str("ab")]), "ab    |");
        assert_eq!(s("%05d", &[Value::Int(-42)]), "-0042");
        assert_eq!(
            s(
                "%x %X %o %b",
                &[
                    Value::Int(255),
                    Value::Int(255),
                    Value::Int(8),
                    Value::Int(5)
                ]
            ),
            "ff FF 10 101"
        );
        assert_eq!(s("%q", &[Value::str("a\"b\n")]), "\"a\\\"b\\n\"");
        assert_eq!(s("%d", &[Value::str("x")]), "%!d(string=x)");
        assert_eq!(s("%d %d", &[Value::Int(1)]), "1 %!d(MISSING)");
        assert_eq!(
            s("%d", &[Value::Int(1), Value::str("x")]),
            "1%!(EXTRA string=x)"
        );
        assert_eq!(
            s(
                "%.3g|%g|%e",
                &[
                    Value::Float(1.0),
                    Value::Float(1e-5),
                    Value::Float(1234.5678)
                ]
            ),
            "1|1e-05|1.234568e+03"
        );
        assert_eq!(s("100%%", &[]), "100%");
        assert_eq!(
            s("%T %T", &[Value::Int(1), Value::Float(1.0)]),
            "int float64"
        );
    }
}
