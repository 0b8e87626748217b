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
        let (key_path, has_value) = p.key()?;
        let val = if has_value {
            p.value()?
        } else {
            return Err(format!("key {key_path:?} has no value"));
        };
        set_path(into, &key_path, val)?;
        if p.i < p.chars.len() && p.chars[p.i] == ',' {
            p.i += 1;
        }
    }
    Ok(())
}

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
    /// Reads `a.b[0].c=` and returns the path segments.
    fn key(&mut self) -> Result<(Vec<Seg>, bool), String> {
        let mut segs = Vec::new();
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
                '.' => {
                    if !cur.is_empty() {
                        segs.push(Seg::Key(std::mem::take(&mut cur)));
                    }
                }
                '[' => {
                    if !cur.is_empty() {
                        segs.push(Seg::Key(std::mem::take(&mut cur)));
                    }
                    let end = self.chars[self.i..]
                        .iter()
                        .position(|&x| x == ']')
                        .ok_or("missing ']'")?;
                    let idx: String = self.chars[self.i..self.i + end].iter().collect();
                    let n: usize = idx.parse().map_err(|_| format!("invalid index {idx:?}"))?;
                    if n > 65536 {
                        return Err(format!(
                            "index of {n} is greater than maximum supported index value of 65536"
                        ));
                    }
                    segs.push(Seg::Index(n));
                    self.i += end + 1;
                }
                '=' => {
                    if !cur.is_empty() {
                        segs.push(Seg::Key(cur));
                    }
                    return Ok((segs, true));
                }
                ',' => {
                    if !cur.is_empty() {
                        segs.push(Seg::Key(cur));
                    }
                    return Ok((segs, false));
                }
                c => cur.push(c),
            }
        }
        if !cur.is_empty() {
            segs.push(Seg::Key(cur));
        }
        Ok((segs, false))
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
