//! `.helmignore`, with Helm's own rules (`pkg/ignore`): a pattern without `/` matches
//! the base name, with `/` the whole path, `/x` from the root; a trailing `/` matches
//! only directories; `!` negates (in Helm's peculiar way: a path a negated pattern does
//! *not* match is ignored); `**` is refused. `templates/.?*` is always ignored.

pub struct Rules {
    patterns: Vec<Pattern>,
}

struct Pattern {
    rule: String,
    negate: bool,
    must_dir: bool,
    kind: MatchKind,
}

enum MatchKind {
    Root,
    Path,
    Base,
}

impl Rules {
    pub fn parse(text: &str) -> Result<Rules, String> {
        let mut r = Rules {
            patterns: Vec::new(),
        };
        for line in text.lines() {
            r.add(line)?;
        }
        r.add("templates/.?*")?;
        Ok(r)
    }

    fn add(&mut self, rule: &str) -> Result<(), String> {
        let rule = rule.trim();
        if rule.is_empty() || rule.starts_with('#') {
            return Ok(());
        }
        if rule.contains("**") {
            return Err("double-star (**) syntax is not supported".into());
        }
        let mut rule = rule.to_string();
        let negate = rule.starts_with('!');
        if negate {
            rule.remove(0);
        }
        let must_dir = rule.ends_with('/');
        if must_dir {
            rule.pop();
        }
        let kind = if let Some(r) = rule.strip_prefix('/') {
            rule = r.to_string();
            MatchKind::Root
        } else if rule.contains('/') {
            MatchKind::Path
        } else {
            MatchKind::Base
        };
        self.patterns.push(Pattern {
            rule,
            negate,
            must_dir,
            kind,
        });
        Ok(())
    }

    pub fn ignore(&self, path: &str, is_dir: bool) -> bool {
        if path.is_empty() || path == "." || path == "./" {
            return false;
        }
        for p in &self.patterns {
            let matched = || match p.kind {
                MatchKind::Root | MatchKind::Path => go_match(&p.rule, path),
                MatchKind::Base => go_match(&p.rule, path.rsplit('/').next().unwrap_or(path)),
            };
            if p.negate {
                if p.must_dir && !is_dir {
                    return true;
                }
                if !matched() {
                    return true;
                }
                continue;
            }
            if p.must_dir && !is_dir {
                continue;
            }
            if matched() {
                return true;
            }
        }
        false
    }
}

/// Go's `filepath.Match` (`*`, `?`, `[...]` with `^` negation, `\` escapes; `*` and
/// `?` do not cross `/`).
pub fn go_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    m(&p, &n)
}

fn m(p: &[char], n: &[char]) -> bool {
    let Some(&c) = p.first() else {
        return n.is_empty();
    };
    match c {
        '*' => {
            for k in 0..=n.len() {
                if m(&p[1..], &n[k..]) {
                    return true;
                }
                if k < n.len() && n[k] == '/' {
                    return false;
                }
            }
            false
        }
        '?' => !n.is_empty() && n[0] != '/' && m(&p[1..], &n[1..]),
        '[' => {
            let Some(&ch) = n.first() else { return false };
            if ch == '/' {
                return false;
            }
            let mut i = 1;
            let neg = p.get(1) == Some(&'^');
            if neg {
                i += 1;
            }
            let mut hit = false;
            let mut first = true;
            while i < p.len() && (p[i] != ']' || first) {
                first = false;
                let mut lo = p[i];
                if lo == '\\' && i + 1 < p.len() {
                    i += 1;
                    lo = p[i];
                }
                let mut hi = lo;
                if p.get(i + 1) == Some(&'-') && p.get(i + 2).is_some_and(|x| *x != ']') {
                    hi = p[i + 2];
                    i += 2;
                }
                if lo <= ch && ch <= hi {
                    hit = true;
                }
                i += 1;
            }
            if i >= p.len() {
                return false;
            }
            hit != neg && m(&p[i + 1..], &n[1..])
        }
        '\\' if p.len() > 1 => !n.is_empty() && n[0] == p[1] && m(&p[2..], &n[1..]),
        _ => !n.is_empty() && n[0] == c && m(&p[1..], &n[1..]),
    }
}
