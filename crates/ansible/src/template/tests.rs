//! Ansible's Jinja tests (`is match`, `is version`, `is failed`, ...) beside minijinja's
//! built-in ones.
use minijinja::value::{Rest, Value, ValueKind, ValueOrKwargs};
use minijinja::{Environment, Error, State};

use super::args::{invalid, split_first, Args};
use super::text::python_regex;
use super::value::py_str;

const BUILTIN: &[&str] = &[
    "defined",
    "undefined",
    "none",
    "boolean",
    "odd",
    "even",
    "divisibleby",
    "number",
    "integer",
    "float",
    "string",
    "sequence",
    "iterable",
    "mapping",
    "startingwith",
    "endingwith",
    "lower",
    "upper",
    "sameas",
    "eq",
    "equalto",
    "==",
    "ne",
    "!=",
    "lt",
    "lessthan",
    "<",
    "le",
    "<=",
    "gt",
    "greaterthan",
    ">",
    "ge",
    ">=",
    "in",
    "true",
    "false",
    "filter",
    "test",
];

type Test = fn(&State, Value, Args) -> Result<bool, Error>;

const OWN: &[(&str, Test)] = &[
    ("match", |_, v, a| regex_test(v, a, "match")),
    ("search", |_, v, a| regex_test(v, a, "search")),
    ("regex", |_, v, a| {
        let mt = a.get_str(3, "match_type", "search")?;
        regex_test(v, a, &mt)
    }),
    ("version", version),
    ("version_compare", version),
    ("truthy", |_, v, a| Ok(truthy(&v, &a))),
    ("falsy", |_, v, a| Ok(!truthy(&v, &a))),
    ("contains", |_, v, a| {
        Ok(v.try_iter()?.any(|x| Some(&x) == a.pos.first()))
    }),
    ("subset", |_, v, a| {
        let b: Vec<Value> = a
            .get(0, "b")
            .ok_or_else(|| invalid("subset needs a list"))?
            .try_iter()?
            .collect();
        Ok(v.try_iter()?.all(|x| b.contains(&x)))
    }),
    ("superset", |_, v, a| {
        let mine: Vec<Value> = v.try_iter()?.collect();
        Ok(a.get(0, "b")
            .ok_or_else(|| invalid("superset needs a list"))?
            .try_iter()?
            .all(|x| mine.contains(&x)))
    }),
    ("all", |_, v, _| Ok(v.try_iter()?.all(|x| x.is_true()))),
    ("any", |_, v, _| Ok(v.try_iter()?.any(|x| x.is_true()))),
    ("failed", |_, v, _| result_flag(&v, "failed")),
    ("failure", |_, v, _| result_flag(&v, "failed")),
    ("succeeded", |_, v, _| result_flag(&v, "failed").map(|f| !f)),
    ("success", |_, v, _| result_flag(&v, "failed").map(|f| !f)),
    ("successful", |_, v, _| {
        result_flag(&v, "failed").map(|f| !f)
    }),
    ("changed", |_, v, _| result_flag(&v, "changed")),
    ("change", |_, v, _| result_flag(&v, "changed")),
    ("skipped", |_, v, _| result_flag(&v, "skipped")),
    ("skip", |_, v, _| result_flag(&v, "skipped")),
    ("finished", |_, v, _| {
        result_flag(&v, "finished").map(|_| true)
    }),
];

pub fn supported(name: &str) -> bool {
    BUILTIN.contains(&name) || OWN.iter().any(|(n, _)| *n == name)
}

pub fn register(env: &mut Environment<'static>) {
    for (name, f) in OWN {
        let f = *f;
        env.add_test(*name, move |state: &State, rest: Rest<ValueOrKwargs>| {
            let (v, args) = split_first(rest.0.into_iter().map(Value::from).collect());
            f(state, v, args)
        });
    }
}

fn regex_test(v: Value, a: Args, kind: &str) -> Result<bool, Error> {
    a.check(
        kind,
        &["pattern", "ignorecase", "multiline", "match_type"],
        4,
    )?;
    let s = py_str(&v);
    let pat = a.get_str(0, "pattern", "")?;
    let (ic, ml) = (
        a.get_bool(1, "ignorecase", false),
        a.get_bool(2, "multiline", false),
    );
    let pat = match kind {
        "match" => format!("\\A(?:{pat})"),
        "fullmatch" => format!("\\A(?:{pat})\\z"),
        _ => pat,
    };
    Ok(python_regex(&pat, ic, ml)?.is_match(&s))
}

fn result_flag(v: &Value, key: &str) -> Result<bool, Error> {
    if v.kind() != ValueKind::Map {
        return Err(invalid(format!("The '{key}' test expects a dictionary")));
    }
    Ok(v.get_attr(key)?.is_true())
}

fn truthy(v: &Value, a: &Args) -> bool {
    if a.get_bool(0, "convert_bool", false)
        && matches!(
            v.kind(),
            ValueKind::String | ValueKind::Bool | ValueKind::Number
        )
    {
        let s = py_str(v).to_lowercase();
        if ["yes", "on", "1", "true"].contains(&s.as_str()) {
            return true;
        }
        if ["no", "off", "0", "false"].contains(&s.as_str()) {
            return false;
        }
    }
    v.is_true()
}

/// A `LooseVersion` component: a number or a run of letters.
#[derive(Debug, PartialEq, PartialOrd)]
enum Part {
    Num(u128),
    Word(String),
}

fn loose(v: &str) -> Vec<Part> {
    let mut out = Vec::new();
    let mut chars = v.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_ascii_digit() {
            let mut n = String::new();
            while let Some(&d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                n.push(d);
                chars.next();
            }
            out.push(Part::Num(n.parse().unwrap_or(u128::MAX)));
        } else if c == '.' {
            chars.next();
        } else {
            let mut w = String::new();
            while let Some(&d) = chars.peek().filter(|d| !d.is_ascii_digit() && **d != '.') {
                w.push(d);
                chars.next();
            }
            out.push(Part::Word(w));
        }
    }
    out
}

fn cmp_loose(a: &[Part], b: &[Part]) -> Result<std::cmp::Ordering, Error> {
    for (x, y) in a.iter().zip(b) {
        match (x, y) {
            (Part::Num(_), Part::Word(_)) | (Part::Word(_), Part::Num(_)) => {
                return Err(invalid("Version comparison failed: '<' not supported between instances of 'str' and 'int'"));
            }
            _ => {}
        }
        match x.partial_cmp(y) {
            Some(std::cmp::Ordering::Equal) | None => continue,
            Some(o) => return Ok(o),
        }
    }
    Ok(a.len().cmp(&b.len()))
}

fn version(_: &State, v: Value, a: Args) -> Result<bool, Error> {
    a.check(
        "version",
        &["version", "operator", "strict", "version_type"],
        4,
    )?;
    let other = a.get_str(0, "version", "")?;
    if other.is_empty() {
        return Err(invalid(
            "Version parameter to compare against cannot be empty",
        ));
    }
    let op = a.get_str(1, "operator", "eq")?;
    let vt = a.get_str(3, "version_type", "loose")?;
    if vt != "loose" {
        return Err(invalid(format!(
            "version_type '{vt}' is not supported by bosun (loose only)"
        )));
    }
    let ord = cmp_loose(&loose(&py_str(&v)), &loose(&other))?;
    use std::cmp::Ordering::*;
    Ok(match op.as_str() {
        "==" | "=" | "eq" => ord == Equal,
        "<" | "lt" => ord == Less,
        "<=" | "le" => ord != Greater,
        ">" | "gt" => ord == Greater,
        ">=" | "ge" => ord != Less,
        "!=" | "<>" | "ne" => ord != Equal,
        other => return Err(invalid(format!("Invalid operator type ({other})"))),
    })
}
