//! String filters: regular expressions (Python `re` syntax translated to Rust's `regex`),
//! base64, hashes, shell quoting and paths.
use base64::Engine as _;
use minijinja::value::Value;
use minijinja::{Error, State};
use sha2::Digest;

use super::args::{defined, invalid, Args};
use super::value::py_str;

fn input(v: &Value) -> Result<String, Error> {
    Ok(py_str(defined(v)?))
}

/// Compiles a Python regular expression. Constructs `regex` lacks (look-around,
/// back-references in the pattern) are an error, never a different match.
pub fn python_regex(pat: &str, ignorecase: bool, multiline: bool) -> Result<regex::Regex, Error> {
    // Python's named groups `(?P<n>...)` are Rust's too; `\Z` is Rust's `\z`.
    let translated = pat.replace("\\Z", "\\z");
    regex::RegexBuilder::new(&translated)
        .case_insensitive(ignorecase)
        .multi_line(multiline)
        .size_limit(1 << 22)
        .build()
        .map_err(|e| {
            invalid(format!(
                "unsupported or invalid regular expression '{pat}': {e}"
            ))
        })
}

/// Python's replacement syntax (`\1`, `\g<1>`, `\g<name>`, `\n`) in Rust's (`${1}`).
fn replacement(rep: &str) -> String {
    let mut out = String::new();
    let mut chars = rep.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '$' => out.push_str("$$"),
            '\\' => match chars.next() {
                Some(d) if d.is_ascii_digit() => {
                    let mut n = d.to_string();
                    if let Some(&d2) = chars.peek() {
                        if d2.is_ascii_digit() {
                            n.push(d2);
                            chars.next();
                        }
                    }
                    out.push_str(&format!("${{{n}}}"));
                }
                Some('g') if chars.peek() == Some(&'<') => {
                    chars.next();
                    let name: String = chars.by_ref().take_while(|&c| c != '>').collect();
                    out.push_str(&format!("${{{name}}}"));
                }
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('r') => out.push('\r'),
                Some('\\') => out.push('\\'),
                Some(o) => {
                    out.push('\\');
                    out.push(o);
                }
                None => out.push('\\'),
            },
            c => out.push(c),
        }
    }
    out
}

pub fn regex_replace(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check(
        "regex_replace",
        &[
            "pattern",
            "replacement",
            "ignorecase",
            "multiline",
            "count",
            "mandatory_count",
        ],
        3,
    )?;
    let s = input(&v)?;
    let re = python_regex(
        &args.get_str(0, "pattern", "")?,
        args.get_bool(3, "ignorecase", false),
        args.get_bool(4, "multiline", false),
    )?;
    let rep = replacement(&args.get_str(1, "replacement", "")?);
    let count = args
        .get(2, "count")
        .and_then(|c| c.as_i64())
        .unwrap_or(0)
        .max(0) as usize;
    Ok(Value::from(
        re.replacen(&s, count, rep.as_str()).into_owned(),
    ))
}

pub fn regex_search(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("regex_search", &["ignorecase", "multiline"], 8)?;
    let s = input(&v)?;
    let pat = args.get_str(0, "regex", "")?;
    let re = python_regex(
        &pat,
        args.get_bool(usize::MAX, "ignorecase", false),
        args.get_bool(usize::MAX, "multiline", false),
    )?;
    let Some(caps) = re.captures(&s) else {
        return Ok(Value::from(()));
    };
    let groups: Vec<&Value> = args.pos.iter().skip(1).collect();
    if groups.is_empty() {
        return Ok(Value::from(caps.get(0).map_or("", |m| m.as_str())));
    }
    let mut out = Vec::new();
    for g in groups {
        let g = py_str(g);
        let m = if let Some(n) = g.strip_prefix("\\g<").and_then(|x| x.strip_suffix('>')) {
            match n.parse::<usize>() {
                Ok(i) => caps.get(i),
                Err(_) => caps.name(n),
            }
        } else if let Some(n) = g.strip_prefix('\\') {
            caps.get(
                n.parse::<usize>()
                    .map_err(|_| invalid(format!("Unknown argument {g}")))?,
            )
        } else {
            return Err(invalid(format!("Unknown argument {g}")));
        };
        out.push(m.map_or(Value::from(()), |m| Value::from(m.as_str())));
    }
    Ok(Value::from(out))
}

pub fn regex_findall(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("regex_findall", &["regex", "multiline", "ignorecase"], 3)?;
    let s = input(&v)?;
    let re = python_regex(
        &args.get_str(0, "regex", "")?,
        args.get_bool(2, "ignorecase", false),
        args.get_bool(1, "multiline", false),
    )?;
    let groups = re.captures_len() - 1;
    let mut out = Vec::new();
    for caps in re.captures_iter(&s) {
        let g = |i: usize| Value::from(caps.get(i).map_or("", |m| m.as_str()));
        out.push(match groups {
            0 => g(0),
            1 => g(1),
            n => Value::from((1..=n).map(g).collect::<Vec<_>>()),
        });
    }
    Ok(Value::from(out))
}

pub fn regex_escape(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("regex_escape", &["re_type"], 1)?;
    // Python's re.escape: every character except ASCII letters, digits and `_`.
    let s = input(&v)?;
    let mut out = String::new();
    for c in s.chars() {
        if !(c.is_ascii_alphanumeric() || c == '_' || !c.is_ascii()) {
            out.push('\\');
        }
        out.push(c);
    }
    Ok(Value::from(out))
}

pub fn split(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("split", &["sep", "maxsplit"], 2)?;
    let s = input(&v)?;
    let max = args
        .get(1, "maxsplit")
        .and_then(|m| m.as_i64())
        .unwrap_or(-1);
    let parts: Vec<String> = match args.get(0, "sep").filter(|s| !s.is_none()) {
        Some(sep) => {
            let sep = py_str(&sep);
            if sep.is_empty() {
                return Err(invalid("empty separator"));
            }
            if max < 0 {
                s.split(sep.as_str()).map(String::from).collect()
            } else {
                s.splitn(max as usize + 1, sep.as_str())
                    .map(String::from)
                    .collect()
            }
        }
        None => {
            let mut out = Vec::new();
            let mut rest = s.trim_start();
            while !rest.is_empty() {
                if max >= 0 && out.len() as i64 == max {
                    out.push(rest.to_string());
                    break;
                }
                let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
                out.push(rest[..end].to_string());
                rest = rest[end..].trim_start();
            }
            out
        }
    };
    Ok(Value::from(parts))
}

pub fn b64encode(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("b64encode", &["encoding", "errors"], 2)?;
    Ok(Value::from(
        base64::engine::general_purpose::STANDARD.encode(input(&v)?),
    ))
}

pub fn b64decode(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("b64decode", &["encoding", "errors"], 2)?;
    let s = input(&v)?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(s.trim())
        .map_err(|e| invalid(format!("b64decode: {e}")))?;
    Ok(Value::from(String::from_utf8_lossy(&bytes).into_owned()))
}

fn digest(kind: &str, data: &[u8]) -> Result<String, Error> {
    Ok(match kind {
        "sha1" => hex::encode(sha1::Sha1::digest(data)),
        "md5" => hex::encode(md5::Md5::digest(data)),
        "sha224" => hex::encode(sha2::Sha224::digest(data)),
        "sha256" => hex::encode(sha2::Sha256::digest(data)),
        "sha384" => hex::encode(sha2::Sha384::digest(data)),
        "sha512" => hex::encode(sha2::Sha512::digest(data)),
        other => return Err(invalid(format!("unsupported hash type {other}"))),
    })
}

pub fn hash(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("hash", &["hashtype"], 1)?;
    let kind = args.get_str(0, "hashtype", "sha1")?;
    Ok(Value::from(digest(&kind, input(&v)?.as_bytes())?))
}

pub fn sha1(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("sha1", &[], 0)?;
    Ok(Value::from(digest("sha1", input(&v)?.as_bytes())?))
}

pub fn md5(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("md5", &[], 0)?;
    Ok(Value::from(digest("md5", input(&v)?.as_bytes())?))
}

/// Python's `shlex.quote`.
pub fn quote(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("quote", &[], 0)?;
    let s = if v.is_none() {
        String::new()
    } else {
        input(&v)?
    };
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "@%+=:,./-_".contains(c))
    {
        return Ok(Value::from(s));
    }
    Ok(Value::from(format!("'{}'", s.replace('\'', "'\"'\"'"))))
}

pub fn basename(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("basename", &[], 0)?;
    let s = input(&v)?;
    Ok(Value::from(s.rsplit('/').next().unwrap_or_default()))
}

pub fn dirname(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("dirname", &[], 0)?;
    let s = input(&v)?;
    let Some(i) = s.rfind('/') else {
        return Ok(Value::from(""));
    };
    let head = &s[..=i];
    let trimmed = head.trim_end_matches('/');
    Ok(Value::from(if trimmed.is_empty() { head } else { trimmed }))
}

/// `os.path.join` over a list (or one string).
pub fn path_join(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("path_join", &[], 0)?;
    let parts: Vec<String> = match v.as_str() {
        Some(s) => vec![s.to_string()],
        None => defined(&v)?.try_iter()?.map(|p| py_str(&p)).collect(),
    };
    let mut out = String::new();
    for p in parts {
        if p.starts_with('/') {
            out = p;
        } else if out.is_empty() || out.ends_with('/') {
            out.push_str(&p);
        } else {
            out.push('/');
            out.push_str(&p);
        }
    }
    Ok(Value::from(out))
}
