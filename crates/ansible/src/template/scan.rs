//! A light lexer over Jinja template text, run before minijinja sees it:
//! - it finds a template that is one `{{ expression }}` and nothing else, which Ansible types
//!   differently from text;
//! - it doubles backslashes inside string literals of `{{ }}` blocks, as Ansible's
//!   `_escape_backslashes` does (so `'\d'` in a role means the two characters `\d`);
//! - it shortens FQCN filter and test names (`ansible.builtin.to_json` → `to_json`), which
//!   minijinja's parser does not take;
//! - it lists the filters, tests and lookup plugins a template names, so a role using one bosun
//!   lacks is refused when it is loaded.

/// What a template names, for load-time validation.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Names {
    pub filters: Vec<String>,
    pub tests: Vec<String>,
    /// First arguments of `lookup(...)`, `query(...)` and `q(...)` when they are literals;
    /// `None` for a computed plugin name.
    pub lookups: Vec<Option<String>>,
}

/// A template prepared for minijinja.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The text to hand minijinja.
    pub source: String,
    /// When the whole template is one `{{ }}` block (ignoring one trailing newline): its
    /// expression.
    pub single_expr: Option<String>,
    pub names: Names,
}

pub fn is_possibly_template(s: &str) -> bool {
    s.contains("{{") || s.contains("{%") || s.contains("{#")
}

/// Ansible's `SINGLE_VAR`: `{{ name }}` with nothing else (`\w*`, possibly empty).
pub fn single_var(s: &str) -> Option<&str> {
    let inner = s.strip_prefix("{{")?.strip_suffix("}}")?;
    let name = inner.trim_matches(|c: char| c.is_whitespace());
    name.chars()
        .all(|c| c.is_alphanumeric() || c == '_')
        .then_some(name)
}

#[derive(PartialEq)]
enum Block {
    Expr,
    Stmt,
}

/// Splits and rewrites the template.
pub fn prepare(src: &str) -> Result<Prepared, String> {
    prepare_with(src, true)
}

/// `prepare`, with Ansible's backslash doubling on or off (template files have it off).
pub fn prepare_with(src: &str, escape_backslashes: bool) -> Result<Prepared, String> {
    let mut out = String::with_capacity(src.len() + 8);
    let mut names = Names::default();
    let mut blocks = 0usize;
    let mut text_outside = false;
    let mut single: Option<String> = None;
    let body_end = src
        .strip_suffix("\r\n")
        .or_else(|| src.strip_suffix('\n'))
        .map_or(src.len(), str::len);
    let b = src.as_bytes();
    let mut i = 0;
    let mut in_raw = false;
    while i < b.len() {
        if in_raw {
            if let Some(end) = find_endraw(src, i) {
                out.push_str(&src[i..end]);
                i = end;
                in_raw = false;
                continue;
            }
            out.push_str(&src[i..]);
            break;
        }
        let open = src[i..].find(['{']).map(|o| i + o);
        let Some(o) = open else {
            if i < body_end {
                text_outside = true;
            }
            out.push_str(&src[i..]);
            break;
        };
        let kind = match b.get(o + 1) {
            Some(b'{') => Some(Block::Expr),
            Some(b'%') => Some(Block::Stmt),
            Some(b'#') => None,
            _ => {
                if o < body_end {
                    text_outside = true;
                }
                out.push_str(&src[i..=o]);
                i = o + 1;
                continue;
            }
        };
        if o > i {
            text_outside = true;
            out.push_str(&src[i..o]);
        }
        let Some(kind) = kind else {
            // A comment: kept for minijinja, it renders nothing.
            let end = src[o + 2..]
                .find("#}")
                .map(|e| o + 2 + e + 2)
                .ok_or("unclosed comment")?;
            out.push_str(&src[o..end]);
            text_outside = true;
            i = end;
            continue;
        };
        let (inner_start, close) = (o + 2, if kind == Block::Expr { "}}" } else { "%}" });
        let (inner_end, end) = block_end(src, inner_start, close)?;
        let inner = &src[inner_start..inner_end];
        let rewritten = rewrite_expr(inner, escape_backslashes && kind == Block::Expr, &mut names)?;
        out.push_str(&src[o..inner_start]);
        out.push_str(&rewritten);
        out.push_str(close);
        blocks += 1;
        if kind == Block::Expr && o == 0 && end >= body_end && blocks == 1 {
            let e = rewritten.trim_start_matches('-').trim_end_matches('-');
            single = Some(e.to_string());
        }
        if kind == Block::Stmt {
            text_outside = true;
            if inner.trim_matches(|c: char| c == '-' || c == '+' || c.is_whitespace()) == "raw" {
                in_raw = true;
            }
        }
        i = end;
    }
    let single_expr = if blocks == 1 && !text_outside {
        single
    } else {
        None
    };
    Ok(Prepared {
        source: out,
        single_expr,
        names,
    })
}

fn find_endraw(src: &str, from: usize) -> Option<usize> {
    let mut at = from;
    while let Some(p) = src[at..].find("{%") {
        let start = at + p;
        let rest = &src[start + 2..];
        let close = rest.find("%}")?;
        if rest[..close].trim_matches(|c: char| c == '-' || c.is_whitespace()) == "endraw" {
            return Some(start);
        }
        at = start + 2;
    }
    None
}

/// Where a block's inner text ends and where the block ends, skipping string literals and
/// nested brackets (as Jinja's lexer balances them).
fn block_end(src: &str, from: usize, close: &str) -> Result<(usize, usize), String> {
    let b = src.as_bytes();
    let mut depth = 0i32;
    let mut i = from;
    while i < b.len() {
        match b[i] {
            b'\'' | b'"' => i = skip_string(b, i)?,
            b'(' | b'[' | b'{' => {
                depth += 1;
                i += 1;
            }
            b')' | b']' => {
                depth -= 1;
                i += 1;
            }
            b'}' if depth > 0 => {
                depth -= 1;
                i += 1;
            }
            _ => {
                if depth <= 0 && src[i..].starts_with(close) {
                    return Ok((i, i + 2));
                }
                if depth <= 0 && b[i] == b'-' && src[i + 1..].starts_with(close) {
                    return Ok((i + 1, i + 3));
                }
                i += 1;
            }
        }
    }
    Err(format!("unexpected end of template, expected '{close}'"))
}

fn skip_string(b: &[u8], start: usize) -> Result<usize, String> {
    let q = b[start];
    let mut i = start + 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            c if c == q => return Ok(i + 1),
            _ => i += 1,
        }
    }
    Err("unterminated string literal".into())
}

/// Rewrites one block's inner text and records the names it uses.
fn rewrite_expr(inner: &str, is_expr: bool, names: &mut Names) -> Result<String, String> {
    let b = inner.as_bytes();
    let mut out = String::with_capacity(inner.len());
    let mut i = 0;
    // The previous significant token: to tell a filter (after `|`) or a test (after `is`/`is not`).
    let mut prev: &str = "";
    let mut prev2: &str = "";
    while i < b.len() {
        let c = b[i];
        if c == b'\'' || c == b'"' {
            let end = skip_string(b, i)?;
            let lit = &inner[i..end];
            if prev == "(" && matches!(prev2, "lookup" | "query" | "q") {
                if let Some(last) = names.lookups.last_mut() {
                    if last.is_none() {
                        *last = Some(unquote(lit));
                    }
                }
            }
            if is_expr && lit.contains('\\') {
                out.push_str(&lit.replace('\\', "\\\\"));
            } else {
                out.push_str(lit);
            }
            prev2 = prev;
            prev = "'";
            i = end;
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len()
                && (b[i].is_ascii_alphanumeric()
                    || b[i] == b'_'
                    || (b[i] == b'.'
                        && (prev == "|" || prev == "is" || prev == "not")
                        && i + 1 < b.len()
                        && (b[i + 1].is_ascii_alphabetic() || b[i + 1] == b'_')))
            {
                i += 1;
            }
            let word = &inner[start..i];
            let short = word.rsplit('.').next().unwrap_or(word);
            if prev == "|" {
                names.filters.push(short.to_string());
                out.push_str(short);
            } else if prev == "is" || (prev == "not" && prev2 == "is") {
                if word == "not" {
                    out.push_str(word);
                    prev2 = prev;
                    prev = "not";
                    continue;
                }
                names.tests.push(short.to_string());
                out.push_str(short);
            } else {
                out.push_str(word);
            }
            // After a dotted attribute (`x.lookup`) a name is no plugin call.
            let attr = start > 0 && b[start - 1] == b'.';
            prev2 = prev;
            prev = match word {
                "is" => "is",
                "not" => "not",
                "lookup" | "query" | "q" if !attr => {
                    // Recorded when the call's `(` follows.
                    if i < b.len() && inner[i..].trim_start().starts_with('(') {
                        names.lookups.push(None);
                    }
                    match word {
                        "lookup" => "lookup",
                        "query" => "query",
                        _ => "q",
                    }
                }
                _ => "w",
            };
            continue;
        }
        out.push(c as char);
        if !c.is_ascii_whitespace() {
            prev2 = prev;
            prev = match c {
                b'|' => "|",
                b'(' => "(",
                _ => "o",
            };
        }
        if c >= 0x80 {
            // Keep multi-byte characters intact.
            out.pop();
            let ch_len = inner[i..].chars().next().map_or(1, char::len_utf8);
            out.push_str(&inner[i..i + ch_len]);
            i += ch_len;
            continue;
        }
        i += 1;
    }
    Ok(out)
}

fn unquote(lit: &str) -> String {
    lit[1..lit.len() - 1].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_expressions() {
        assert_eq!(
            prepare("{{ a }}")
                .expect("test value")
                .single_expr
                .as_deref(),
            Some(" a ")
        );
        assert_eq!(
            prepare("{{ a }}\n")
                .expect("test value")
                .single_expr
                .as_deref(),
            Some(" a ")
        );
        assert_eq!(
            prepare("{{ {'a': {'b': 1}} }}")
                .expect("test value")
                .single_expr
                .as_deref(),
            Some(" {'a': {'b': 1}} ")
        );
        assert_eq!(prepare(" {{ a }}").expect("test value").single_expr, None);
        assert_eq!(
            prepare("{{ a }}{{ b }}").expect("test value").single_expr,
            None
        );
        assert_eq!(
            prepare("{% if x %}{{ a }}{% endif %}")
                .expect("test value")
                .single_expr,
            None
        );
        assert_eq!(
            prepare("{{ '}}' }}")
                .expect("test value")
                .single_expr
                .as_deref(),
            Some(" '}}' ")
        );
        assert!(prepare("{{ a ").is_err());
        assert_eq!(single_var("{{ size }}"), Some("size"));
        assert_eq!(single_var("{{ a.b }}"), None);
    }

    #[test]
    fn rewrites_and_names() {
        let p = prepare(r"{{ x | ansible.builtin.regex_replace('\d', 'y') is not ansible.builtin.match('a') }}{% if lookup('env', 'HOME') | bool %}{% endif %}").expect("test value");
        assert_eq!(
            p.source,
            r"{{ x | regex_replace('\\d', 'y') is not match('a') }}{% if lookup('env', 'HOME') | bool %}{% endif %}"
        );
        assert_eq!(p.names.filters, vec!["regex_replace", "bool"]);
        assert_eq!(p.names.tests, vec!["match"]);
        assert_eq!(p.names.lookups, vec![Some("env".to_string())]);
        let p = prepare("{{ query(name) }}{% raw %}{{ not | parsed }}{% endraw %}")
            .expect("test value");
        assert_eq!(p.names.lookups, vec![None]);
        assert!(p.names.filters.is_empty());
    }
}
