//! Helm's `strvals` (`--set`, `--set-string`): `a.b=c,d[0]=e,f={x,y}`, with `\` escapes,
//! list indexes, and typed values for `--set` (`int64` integers, `true`/`false`,
//! `null`) or strings for `--set-string`.
use std::collections::BTreeMap;

use crate::value::Data;

/// Parses one `--set` argument into `into`.
pub fn parse_into(s: &str, into: &mut Data, string_only: bool) -> Result<(), String> {
    let mut p = Parser {
        chars: s.chars().collect(),
        i: 0,
        string_only,
    };
    while p.i < p.chars.len() {
        let Some((key_path, end)) = p.key()? else {
            // An index cut short by the end of the text: Go's parser meets EOF there and
            // stops, setting nothing.
            return Ok(());
        };
        let last = || match key_path.last() {
            Some(Seg::Key(k)) => k.clone(),
            _ => String::new(),
        };
        match end {
            KeyEnd::Value => {}
            KeyEnd::Comma => {
                return Err(format!(
                    "key {} has no value (cannot end with ,)",
                    crate::value::format::quote(&last(), false)
                ))
            }
            KeyEnd::Eof => {
                return Err(format!(
                    "key {} has no value",
                    crate::value::format::quote(&last(), false)
                ))
            }
        }
        let val = p.value()?;
        // Go's `set` skips an empty key: `=x` and `.a=x` set nothing, and a named map
        // left empty by it (`a.=x`, `a..b=x`) is an error.
        match key_path
            .iter()
            .position(|s| matches!(s, Seg::Key(k) if k.is_empty()))
        {
            None => set_path(into, &key_path, val)?,
            Some(0) => {}
            Some(j) => {
                let parent = match &key_path[j - 1] {
                    Seg::Key(k) => k.clone(),
                    Seg::Index(_) => String::new(),
                };
                return Err(format!(
                    "key map {} has no value",
                    crate::value::format::quote(&parent, false)
                ));
            }
        }
        if p.i < p.chars.len() && p.chars[p.i] == ',' {
            p.i += 1;
        }
    }
    Ok(())
}

/// How a key ended.
enum KeyEnd {
    /// At `=`: a value follows.
    Value,
    /// At `,`: no value.
    Comma,
    /// At the end of the text: no value.
    Eof,
}

/// Helm's largest list index.
const MAX_INDEX: i64 = 65536;

#[derive(Clone, Debug)]
enum Seg {
    Key(String),
    Index(usize),
}

struct Parser {
    chars: Vec<char>,
    i: usize,
    string_only: bool,
}

impl Parser {
    /// Reads `a.b[0].c=` and returns the path segments (empty keys included, as Go's
    /// recursive parser sees them) and how the key ended; `None` when an index runs to
    /// the end of the text.
    fn key(&mut self) -> Result<Option<(Vec<Seg>, KeyEnd)>, String> {
        let mut segs = Vec::new();
        let mut cur = String::new();
        // Right after `]`, a `.` or `=` does not end an (empty) key of its own.
        let mut after_index = false;
        while self.i < self.chars.len() {
            let c = self.chars[self.i];
            self.i += 1;
            match c {
                '\\' => {
                    if let Some(&n) = self.chars.get(self.i) {
                        cur.push(n);
                        self.i += 1;
                    }
                    after_index = false;
                }
                '.' => {
                    if !after_index {
                        segs.push(Seg::Key(std::mem::take(&mut cur)));
                    }
                    after_index = false;
                }
                '[' => {
                    if !after_index || !cur.is_empty() {
                        segs.push(Seg::Key(std::mem::take(&mut cur)));
                    }
                    let Some(end) = self.chars[self.i..].iter().position(|&x| x == ']') else {
                        self.i = self.chars.len();
                        return Ok(None);
                    };
                    let idx: String = self.chars[self.i..self.i + end].iter().collect();
                    let n = go_atoi(&idx).map_err(|e| format!("error parsing index: {e}"))?;
                    if n < 0 {
                        return Err(format!("negative {n} index not allowed"));
                    }
                    if n > MAX_INDEX {
                        return Err(format!(
                            "index of {n} is greater than maximum supported index of {MAX_INDEX}"
                        ));
                    }
                    segs.push(Seg::Index(n as usize));
                    self.i += end + 1;
                    after_index = true;
                }
                '=' | ',' => {
                    if !after_index {
                        segs.push(Seg::Key(cur));
                    }
                    let end = if c == '=' {
                        KeyEnd::Value
                    } else {
                        KeyEnd::Comma
                    };
                    return Ok(Some((segs, end)));
                }
                c => {
                    cur.push(c);
                    after_index = false;
                }
            }
        }
        if !after_index {
            segs.push(Seg::Key(cur));
        }
        Ok(Some((segs, KeyEnd::Eof)))
    }

    fn value(&mut self) -> Result<Data, String> {
        if self.chars.get(self.i) == Some(&'{') {
            self.i += 1;
            let mut items = Vec::new();
            let mut cur = String::new();
            while self.i < self.chars.len() {
                let c = self.chars[self.i];
                self.i += 1;
                match c {
                    '\\' => {
                        if let Some(&n) = self.chars.get(self.i) {
                            cur.push(n);
                            self.i += 1;
                        }
                    }
                    ',' => items.push(self.typed(std::mem::take(&mut cur))),
                    '}' => {
                        items.push(self.typed(cur));
                        return Ok(Data::List(items));
                    }
                    c => cur.push(c),
                }
            }
            return Err("list must terminate with '}'".into());
        }
        let mut cur = String::new();
        while self.i < self.chars.len() {
            let c = self.chars[self.i];
            if c == ',' {
                break;
            }
            self.i += 1;
            if c == '\\' {
                if let Some(&n) = self.chars.get(self.i) {
                    cur.push(n);
                    self.i += 1;
                }
                continue;
            }
            cur.push(c);
        }
        Ok(self.typed(cur))
    }

    fn typed(&self, s: String) -> Data {
        if self.string_only {
            return Data::String(s);
        }
        match s.as_str() {
            "true" => Data::Bool(true),
            "false" => Data::Bool(false),
            "null" => Data::Null,
            "0" => Data::Int(0),
            _ => {
                // Helm types integers without a leading zero as int64.
                if !s.starts_with('0') {
                    if let Ok(i) = s.parse::<i64>() {
                        return Data::Int(i);
                    }
                }
                Data::String(s)
            }
        }
    }
}

/// Go's `strconv.Atoi`, with its error texts.
fn go_atoi(s: &str) -> Result<i64, String> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "strconv.Atoi: parsing {}: invalid syntax",
            crate::value::format::quote(s, false)
        ));
    }
    s.parse::<i64>().map_err(|_| {
        format!(
            "strconv.Atoi: parsing {}: value out of range",
            crate::value::format::quote(s, false)
        )
    })
}

fn set_path(into: &mut Data, path: &[Seg], val: Data) -> Result<(), String> {
    let Some((first, rest)) = path.split_first() else {
        *into = val;
        return Ok(());
    };
    match first {
        Seg::Key(k) => {
            if !matches!(into, Data::Map(_)) {
                *into = Data::Map(BTreeMap::new());
            }
            let Data::Map(m) = into else { return Ok(()) };
            let entry = m.entry(k.clone()).or_insert(Data::Null);
            if rest.is_empty() {
                *entry = val;
                return Ok(());
            }
            set_path(entry, rest, val)
        }
        Seg::Index(i) => {
            if !matches!(into, Data::List(_)) {
                *into = Data::List(Vec::new());
            }
            let Data::List(l) = into else { return Ok(()) };
            while l.len() <= *i {
                l.push(Data::Null);
            }
            if rest.is_empty() {
                l[*i] = val;
                return Ok(());
            }
            set_path(&mut l[*i], rest, val)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets() {
        let mut d = Data::Map(BTreeMap::new());
        parse_into("a.b=1,c=x,d={1,2},e[1]=y,f=true,g=007", &mut d, false).unwrap();
        assert_eq!(d.lookup("a.b"), Some(&Data::Int(1)));
        assert_eq!(d.lookup("c"), Some(&Data::String("x".into())));
        assert_eq!(
            d.lookup("d"),
            Some(&Data::List(vec![Data::Int(1), Data::Int(2)]))
        );
        assert_eq!(
            d.lookup("e"),
            Some(&Data::List(vec![Data::Null, Data::String("y".into())]))
        );
        assert_eq!(d.lookup("f"), Some(&Data::Bool(true)));
        assert_eq!(d.lookup("g"), Some(&Data::String("007".into())));
    }
}
