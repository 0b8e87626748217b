//! Sprig's regular expressions on the `regex` crate, whose syntax matches Go's RE2
//! for what charts use. Compiled patterns are cached per render and capped in size, so
//! a hostile pattern fails instead of exhausting memory.
use super::{check_list, int, s, Args, FnResult, FuncDef};
use crate::func;
use crate::template::error::FnError;
use crate::template::exec::Exec;
use crate::value::Value;

pub const FUNCS: &[FuncDef] = &[
    // Sprig's regexMatch ignores a bad pattern (false); the others panic on it.
    func!(
        "regexMatch",
        [Str, Str],
        |ex, a| match compile(ex, s(&a[0])) {
            Ok(r) => Ok(Value::Bool(r.is_match(s(&a[1])))),
            Err(e @ FnError::Nested(_)) => Err(e),
            Err(_) => Ok(Value::Bool(false)),
        }
    ),
    func!("mustRegexMatch", [Str, Str], |ex, a| Ok(Value::Bool(
        compile(ex, s(&a[0]))?.is_match(s(&a[1]))
    ))),
    func!("regexFindAll", [Str, Str, Int], find_all),
    func!("mustRegexFindAll", [Str, Str, Int], find_all),
    func!("regexFind", [Str, Str], |ex, a| Ok(Value::str(
        compile(ex, s(&a[0]))?
            .find(s(&a[1]))
            .map_or("", |m| m.as_str())
    ))),
    func!("mustRegexFind", [Str, Str], |ex, a| Ok(Value::str(
        compile(ex, s(&a[0]))?
            .find(s(&a[1]))
            .map_or("", |m| m.as_str())
    ))),
    func!("regexReplaceAll", [Str, Str, Str], |ex, a| replace(
        ex, &a, false
    )),
    func!("mustRegexReplaceAll", [Str, Str, Str], |ex, a| replace(
        ex, &a, false
    )),
    func!("regexReplaceAllLiteral", [Str, Str, Str], |ex, a| replace(
        ex, &a, true
    )),
    func!("mustRegexReplaceAllLiteral", [Str, Str, Str], |ex, a| {
        replace(ex, &a, true)
    }),
    func!("regexSplit", [Str, Str, Int], split),
    func!("mustRegexSplit", [Str, Str, Int], split),
    func!("regexQuoteMeta", [Str], |_, a| Ok(Value::string(
        quote_meta(s(&a[0]))
    ))),
];

/// Compiles (or fetches from the render's cache) a pattern.
pub fn compile(ex: &Exec<'_>, pattern: &str) -> Result<regex::Regex, super::FnError> {
    if let Some(r) = ex.rt.regex_cache.borrow().get(pattern) {
        return r.clone().map_err(to_fn_error);
    }
    let limit = ex.rt.limits.max_regex_bytes;
    let r = regex::RegexBuilder::new(pattern)
        .size_limit(limit)
        .dfa_size_limit(limit)
        .build()
        .map_err(|e| match e {
            regex::Error::CompiledTooBig(n) => {
                format!("regular expression too large (limit {n} bytes)")
            }
            other => format!(
                "error parsing regexp: {}",
                other.to_string().lines().last().unwrap_or("invalid")
            ),
        });
    ex.rt
        .regex_cache
        .borrow_mut()
        .insert(pattern.to_string(), r.clone());
    r.map_err(to_fn_error)
}

/// A pattern over the size limit stops the render; a bad pattern is a Go error.
fn to_fn_error(msg: String) -> FnError {
    if msg.starts_with("regular expression too large") {
        FnError::Nested(crate::template::error::ExecError::limit(msg))
    } else {
        FnError::Msg(msg)
    }
}

fn find_all(ex: &mut Exec<'_>, a: Args) -> FnResult {
    let re = compile(ex, s(&a[0]))?;
    let n = int(&a[2]);
    let mut out = Vec::new();
    for m in re.find_iter(s(&a[1])) {
        if n >= 0 && out.len() as i64 >= n {
            break;
        }
        out.push(m.as_str().to_string());
        check_list(ex, out.len())?;
    }
    Ok(Value::str_list(out))
}

fn replace(ex: &mut Exec<'_>, a: &[Value], literal: bool) -> FnResult {
    let re = compile(ex, s(&a[0]))?;
    let (src, repl) = (s(&a[1]), s(&a[2]));
    let out = if literal {
        re.replace_all(src, regex::NoExpand(repl)).into_owned()
    } else {
        re.replace_all(src, repl).into_owned()
    };
    super::check_len(ex, out.len())?;
    Ok(Value::string(out))
}

/// Go's `Regexp.Split`.
fn split(ex: &mut Exec<'_>, a: Args) -> FnResult {
    let re = compile(ex, s(&a[0]))?;
    let text = s(&a[1]);
    let n = int(&a[2]);
    if n == 0 {
        return Ok(Value::str_list(Vec::new()));
    }
    if !s(&a[0]).is_empty() && text.is_empty() {
        return Ok(Value::str_list(vec![String::new()]));
    }
    let mut out: Vec<String> = Vec::new();
    let (mut beg, mut end) = (0usize, 0usize);
    for m in re.find_iter(text) {
        if n > 0 && out.len() as i64 == n - 1 {
            break;
        }
        end = m.start();
        if m.end() != 0 {
            out.push(text[beg..end].to_string());
        }
        beg = m.end();
        check_list(ex, out.len())?;
    }
    if end != text.len() {
        out.push(text[beg..].to_string());
    }
    Ok(Value::str_list(out))
}

/// Go's `regexp.QuoteMeta`.
pub fn quote_meta(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
