//! Python's `ast.literal_eval` over the literals Ansible's templating feeds it (with its
//! `Json2Python` pass, so `true`/`false`/`null` are accepted too): strings (adjacent ones
//! concatenated), numbers, `True`/`False`/`None`, lists, tuples (as lists) and dicts. Anything
//! else is not a literal, and the text stays a string, as in Ansible.
use minijinja::value::Value;

const MAX_DEPTH: usize = 200;

/// The value of `s` read as a Python literal, or None when it is not one.
pub fn literal_eval(s: &str) -> Option<Value> {
    let mut p = Parser {
        s: s.as_bytes(),
        src: s,
        i: 0,
        depth: 0,
    };
    let v = p.value()?;
    p.ws();
    (p.i == p.s.len()).then_some(v)
}

struct Parser<'a> {
    s: &'a [u8],
    src: &'a str,
    i: usize,
    depth: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len()
            && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r' | b'\x0c')
        {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn value(&mut self) -> Option<Value> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return None;
        }
        let v = match self.peek()? {
            b'[' => {
                self.i += 1;
                self.items(b']').map(Value::from)
            }
            b'(' => {
                self.i += 1;
                let start = self.i;
                let items = self.items(b')')?;
                // `(x)` is x, `(x,)` a tuple.
                if items.len() == 1
                    && !self.src[start..self.i]
                        .trim_end()
                        .trim_end_matches(')')
                        .trim_end()
                        .ends_with(',')
                {
                    items.into_iter().next()
                } else {
                    Some(Value::from(items))
                }
            }
            b'{' => {
                self.i += 1;
                self.dict()
            }
            b'\'' | b'"' => self.strings(),
            b'r' | b'R' | b'u' | b'U' | b'b' | b'B'
                if matches!(self.s.get(self.i + 1), Some(b'\'' | b'"')) =>
            {
                self.strings()
            }
            b'-' | b'+' => {
                let neg = self.s[self.i] == b'-';
                self.i += 1;
                let v = self.value()?;
                if !v.is_number() {
                    return None;
                }
                if neg {
                    negate(&v)
                } else {
                    Some(v)
                }
            }
            c if c.is_ascii_digit() || c == b'.' => self.number(),
            _ => self.name(),
        };
        self.depth -= 1;
        v
    }

    fn items(&mut self, close: u8) -> Option<Vec<Value>> {
        let mut out = Vec::new();
        loop {
            if self.eat(close) {
                return Some(out);
            }
            out.push(self.value()?);
            if !self.eat(b',') {
                return self.eat(close).then_some(out);
            }
        }
    }

    fn dict(&mut self) -> Option<Value> {
        let mut pairs: Vec<(Value, Value)> = Vec::new();
        loop {
            if self.eat(b'}') {
                break;
            }
            let k = self.value()?;
            if !self.eat(b':') {
                return None; // a set: not something templating produces from YAML data
            }
            let v = self.value()?;
            // Later duplicates win, at the first key's position, as in a Python dict.
            if let Some(slot) = pairs.iter_mut().find(|(pk, _)| *pk == k) {
                slot.1 = v;
            } else {
                pairs.push((k, v));
            }
            if !self.eat(b',') {
                if self.eat(b'}') {
                    break;
                }
                return None;
            }
        }
        Some(Value::from_pairs(pairs))
    }

    fn name(&mut self) -> Option<Value> {
        let start = self.i;
        while self.i < self.s.len()
            && (self.s[self.i].is_ascii_alphanumeric() || self.s[self.i] == b'_')
        {
            self.i += 1;
        }
        match &self.src[start..self.i] {
            "True" | "true" => Some(Value::from(true)),
            "False" | "false" => Some(Value::from(false)),
            "None" | "null" => Some(Value::from(())),
            _ => None,
        }
    }

    fn number(&mut self) -> Option<Value> {
        let start = self.i;
        while self.i < self.s.len()
            && (self.s[self.i].is_ascii_alphanumeric()
                || matches!(self.s[self.i], b'.' | b'_')
                || (matches!(self.s[self.i], b'+' | b'-')
                    && matches!(self.s[self.i - 1], b'e' | b'E')))
        {
            self.i += 1;
        }
        let text = &self.src[start..self.i];
        if text.starts_with('_') || text.ends_with('_') || text.contains("__") {
            return None;
        }
        let t = text.replace('_', "");
        let lower = t.to_ascii_lowercase();
        for (prefix, radix) in [("0x", 16), ("0o", 8), ("0b", 2)] {
            if let Some(d) = lower.strip_prefix(prefix) {
                return i64::from_str_radix(d, radix).ok().map(Value::from);
            }
        }
        if lower.chars().all(|c| c.is_ascii_digit()) {
            // Python 3 refuses leading zeros except for 0 itself.
            if lower.len() > 1
                && lower.starts_with('0')
                && !lower.trim_start_matches('0').is_empty()
            {
                return None;
            }
            return match lower.parse::<i64>() {
                Ok(i) => Some(Value::from(i)),
                Err(_) => lower.parse::<u64>().ok().map(Value::from),
            };
        }
        if lower.ends_with('j') {
            return None;
        }
        lower.parse::<f64>().ok().map(Value::from)
    }

    fn strings(&mut self) -> Option<Value> {
        let mut out = String::new();
        let mut any = false;
        loop {
            match self.peek() {
                Some(b'\'' | b'"') => {}
                Some(b'r' | b'R' | b'u' | b'U' | b'b' | b'B')
                    if matches!(self.s.get(self.i + 1), Some(b'\'' | b'"')) => {}
                _ => break,
            }
            let mut raw = false;
            if matches!(self.s[self.i], b'r' | b'R') {
                raw = true;
                self.i += 1;
            } else if matches!(self.s[self.i], b'u' | b'U') {
                self.i += 1;
            } else if matches!(self.s[self.i], b'b' | b'B') {
                return None; // bytes: not produced from YAML data
            }
            out.push_str(&self.string(raw)?);
            any = true;
        }
        any.then(|| Value::from(out))
    }

    fn string(&mut self, raw: bool) -> Option<String> {
        let q = self.s[self.i];
        let triple = self.s.get(self.i..self.i + 3) == Some(&[q, q, q]);
        self.i += if triple { 3 } else { 1 };
        let mut out = String::new();
        let rest = &self.src[self.i..];
        let mut chars = rest.char_indices().peekable();
        while let Some((off, c)) = chars.next() {
            if c as u32 == q as u32 {
                if !triple {
                    self.i += off + 1;
                    return Some(out);
                }
                if rest.as_bytes()[off..].starts_with(&[q, q, q]) {
                    self.i += off + 3;
                    return Some(out);
                }
                out.push(c);
            } else if c == '\n' && !triple {
                return None;
            } else if c == '\\' {
                let (_, e) = chars.next()?;
                if raw {
                    out.push('\\');
                    out.push(e);
                    continue;
                }
                match e {
                    '\n' => {}
                    '\\' | '\'' | '"' => out.push(e),
                    'n' => out.push('\n'),
                    'r' => out.push('\r'),
                    't' => out.push('\t'),
                    'a' => out.push('\x07'),
                    'b' => out.push('\x08'),
                    'f' => out.push('\x0c'),
                    'v' => out.push('\x0b'),
                    '0'..='7' => {
                        let mut n = e.to_digit(8)?;
                        for _ in 0..2 {
                            match chars.peek() {
                                Some((_, d)) if d.is_digit(8) => {
                                    n = n * 8 + d.to_digit(8)?;
                                    chars.next();
                                }
                                _ => break,
                            }
                        }
                        out.push(char::from_u32(n)?);
                    }
                    'x' | 'u' | 'U' => {
                        let len = match e {
                            'x' => 2,
                            'u' => 4,
                            _ => 8,
                        };
                        let mut n = 0u32;
                        for _ in 0..len {
                            let (_, d) = chars.next()?;
                            n = n * 16 + d.to_digit(16)?;
                        }
                        out.push(char::from_u32(n)?);
                    }
                    other => {
                        out.push('\\');
                        out.push(other);
                    }
                }
            } else {
                out.push(c);
            }
        }
        None
    }
}

fn negate(v: &Value) -> Option<Value> {
    if let Some(i) = v.as_i64() {
        return Some(Value::from(-i));
    }
    f64::try_from(v.clone()).ok().map(|f| Value::from(-f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::template::value::py_repr;

    fn ev(s: &str) -> Option<String> {
        literal_eval(s).map(|v| py_repr(&v))
    }

    #[test]
    fn literals() {
        assert_eq!(
            ev("[1, 'a', True, None, -2.5]").as_deref(),
            Some("[1, 'a', True, None, -2.5]")
        );
        assert_eq!(
            ev("{'a': {\"b\": [true, null]}}").as_deref(),
            Some("{'a': {'b': [True, None]}}")
        );
        assert_eq!(ev("True").as_deref(), Some("True"));
        assert_eq!(ev("(1,)").as_deref(), Some("[1]"));
        assert_eq!(ev("'a' 'b'").as_deref(), Some("'ab'"));
        assert_eq!(ev("[1, 2"), None);
        assert_eq!(ev("[x]"), None);
        assert_eq!(ev("{1, 2}"), None);
        assert_eq!(ev("[01]"), None);
        assert_eq!(ev("['\\x41\\n']").as_deref(), Some("['A\\n']"));
        assert_eq!(ev(&"[".repeat(10_000)), None);
    }
}
