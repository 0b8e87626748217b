//! gobwas/glob patterns with `/` as the separator, as `.Files.Glob` uses them:
//! `*` matches within a path segment, `**` across segments, `?` one character,
//! `[abc]`/`[!a-z]` classes, `{a,b}` alternatives, `\` escapes.

#[derive(Debug, Clone)]
enum Tok {
    Lit(char),
    Any,
    Super,
    One,
    Class(bool, Vec<(char, char)>),
    Alt(Vec<Vec<Tok>>),
}

#[derive(Debug, Clone)]
pub struct Glob(Vec<Tok>);

impl Glob {
    pub fn any() -> Glob {
        Glob(vec![Tok::Super])
    }

    pub fn new(p: &str) -> Result<Glob, String> {
        let chars: Vec<char> = p.chars().collect();
        let mut i = 0;
        let toks = parse(&chars, &mut i, false)?;
        if i < chars.len() {
            return Err("unexpected end".into());
        }
        Ok(Glob(toks))
    }

    pub fn matches(&self, s: &str) -> bool {
        let chars: Vec<char> = s.chars().collect();
        m(&self.0, &chars)
    }
}

fn parse(c: &[char], i: &mut usize, in_alt: bool) -> Result<Vec<Tok>, String> {
    let mut out = Vec::new();
    while *i < c.len() {
        let ch = c[*i];
        match ch {
            '*' => {
                if c.get(*i + 1) == Some(&'*') {
                    out.push(Tok::Super);
                    *i += 2;
                } else {
                    out.push(Tok::Any);
                    *i += 1;
                }
            }
            '?' => {
                out.push(Tok::One);
                *i += 1;
            }
            '\\' => {
                *i += 1;
                let e = *c.get(*i).ok_or("unexpected end of escape")?;
                out.push(Tok::Lit(e));
                *i += 1;
            }
            '[' => {
                *i += 1;
                let neg = c.get(*i) == Some(&'!');
                if neg {
                    *i += 1;
                }
                let mut ranges = Vec::new();
                while *i < c.len() && c[*i] != ']' {
                    let lo = c[*i];
                    if c.get(*i + 1) == Some(&'-') && c.get(*i + 2).is_some_and(|x| *x != ']') {
                        ranges.push((lo, c[*i + 2]));
                        *i += 3;
                    } else {
                        ranges.push((lo, lo));
                        *i += 1;
                    }
                }
                if *i >= c.len() {
                    return Err("unclosed range".into());
                }
                *i += 1;
                out.push(Tok::Class(neg, ranges));
            }
            '{' => {
                *i += 1;
                let mut alts = Vec::new();
                loop {
                    alts.push(parse(c, i, true)?);
                    match c.get(*i) {
                        Some(',') => *i += 1,
                        Some('}') => {
                            *i += 1;
                            break;
                        }
                        _ => return Err("unclosed alternatives".into()),
                    }
                }
                out.push(Tok::Alt(alts));
            }
            ',' | '}' if in_alt => return Ok(out),
            _ => {
                out.push(Tok::Lit(ch));
                *i += 1;
            }
        }
    }
    Ok(out)
}

fn m(p: &[Tok], s: &[char]) -> bool {
    let Some((first, rest)) = p.split_first() else {
        return s.is_empty();
    };
    match first {
        Tok::Lit(c) => s.first() == Some(c) && m(rest, &s[1..]),
        Tok::One => s.first().is_some_and(|c| *c != '/') && m(rest, &s[1..]),
        Tok::Class(neg, ranges) => {
            s.first().is_some_and(|c| {
                *c != '/' && (ranges.iter().any(|(lo, hi)| lo <= c && c <= hi) != *neg)
            }) && m(rest, &s[1..])
        }
        Tok::Any => {
            for k in 0..=s.len() {
                if m(rest, &s[k..]) {
                    return true;
                }
                if k < s.len() && s[k] == '/' {
                    return false;
                }
            }
            false
        }
        Tok::Super => (0..=s.len()).any(|k| m(rest, &s[k..])),
        Tok::Alt(alts) => alts.iter().any(|a| {
            let mut seq = a.clone();
            seq.extend_from_slice(rest);
            m(&seq, s)
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::Glob;

    #[test]
    fn globs() {
        assert!(Glob::new("files/*.txt").unwrap().matches("files/a.txt"));
        assert!(!Glob::new("files/*.txt").unwrap().matches("files/x/a.txt"));
        assert!(Glob::new("files/**").unwrap().matches("files/x/a.txt"));
        assert!(Glob::new("{a,b}/?.[tx]*").unwrap().matches("b/c.txt"));
    }
}
