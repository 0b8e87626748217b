//! Sprig's defaults (`default`, `empty`, `coalesce`, `ternary`...), paths (Go's `path`
//! and `path/filepath` on Unix) and URLs (`urlParse`, `urlJoin`).
use super::conv::empty;
use super::{boolean, s, FnResult, FuncDef};
use crate::value::{Map, MapKind, Str, Value};
use crate::{func, funcv};

pub const FUNCS: &[FuncDef] = &[
    funcv!("default", [Any], Any, |_, a| {
        if a.len() < 2 || empty(&a[1]) {
            return Ok(a[0].clone());
        }
        Ok(a[1].clone())
    }),
    func!("empty", [Any], |_, a| Ok(Value::Bool(empty(&a[0])))),
    funcv!("coalesce", [], Any, |_, a| Ok(a
        .into_iter()
        .find(|v| !empty(v))
        .unwrap_or_default())),
    funcv!("all", [], Any, |_, a| Ok(Value::Bool(
        a.iter().all(|v| !empty(v))
    ))),
    funcv!("any", [], Any, |_, a| Ok(Value::Bool(
        a.iter().any(|v| !empty(v))
    ))),
    func!("ternary", [Any, Any, Bool], |_, a| Ok(if boolean(&a[2]) {
        a[0].clone()
    } else {
        a[1].clone()
    })),
    func!("base", [Str], |_, a| Ok(Value::string(base(s(&a[0]))))),
    func!("dir", [Str], |_, a| Ok(Value::string(dir(s(&a[0]))))),
    func!("clean", [Str], |_, a| Ok(Value::string(clean(s(&a[0]))))),
    func!("ext", [Str], |_, a| Ok(Value::string(ext(s(&a[0]))))),
    func!("isAbs", [Str], |_, a| Ok(Value::Bool(
        s(&a[0]).starts_with('/')
    ))),
    func!("osBase", [Str], |_, a| Ok(Value::string(base(s(&a[0]))))),
    func!("osDir", [Str], |_, a| Ok(Value::string(dir(s(&a[0]))))),
    func!("osClean", [Str], |_, a| Ok(Value::string(clean(s(&a[0]))))),
    func!("osExt", [Str], |_, a| Ok(Value::string(ext(s(&a[0]))))),
    func!("osIsAbs", [Str], |_, a| Ok(Value::Bool(
        s(&a[0]).starts_with('/')
    ))),
    func!("urlParse", [Str], |_, a| url_parse(s(&a[0]))),
    func!("urlJoin", [Map], |_, a| Ok(Value::string(url_join(&a[0])))),
];

/// Go's `path.Clean`.
pub fn clean(p: &str) -> String {
    if p.is_empty() {
        return ".".into();
    }
    let rooted = p.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|l| *l != "..") {
                    parts.pop();
                } else if !rooted {
                    parts.push("..");
                }
            }
            s => parts.push(s),
        }
    }
    let body = parts.join("/");
    match (rooted, body.is_empty()) {
        (true, _) => format!("/{body}"),
        (false, true) => ".".into(),
        (false, false) => body,
    }
}

/// Go's `path.Base`.
pub fn base(p: &str) -> String {
    if p.is_empty() {
        return ".".into();
    }
    let t = p.trim_end_matches('/');
    if t.is_empty() {
        return "/".into();
    }
    t.rsplit('/').next().unwrap_or(t).to_string()
}

/// Go's `path.Dir`.
pub fn dir(p: &str) -> String {
    let d = match p.rfind('/') {
        Some(i) => &p[..=i],
        None => "",
    };
    clean(d)
}

/// Go's `path.Ext`.
pub fn ext(p: &str) -> String {
    for (i, c) in p.char_indices().rev() {
        if c == '/' {
            break;
        }
        if c == '.' {
            return p[i..].to_string();
        }
    }
    String::new()
}

fn url_parse(u: &str) -> FnResult {
    let (rest, fragment) = u.split_once('#').unwrap_or((u, ""));
    let (scheme, rest) = match rest.split_once(':') {
        Some((sc, r))
            if !sc.is_empty()
                && sc
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) =>
        {
            (sc.to_string(), r)
        }
        _ => (String::new(), rest),
    };
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (mut userinfo, mut host, mut path, mut opaque) = (
        String::new(),
        String::new(),
        rest.to_string(),
        String::new(),
    );
    if let Some(auth) = rest.strip_prefix("//") {
        let (a, p) = match auth.find('/') {
            Some(i) => (&auth[..i], &auth[i..]),
            None => (auth, ""),
        };
        match a.rsplit_once('@') {
            Some((ui, h)) => {
                userinfo = ui.to_string();
                host = h.to_string();
            }
            None => host = a.to_string(),
        }
        path = p.to_string();
    } else if !scheme.is_empty() && !rest.starts_with('/') {
        opaque = rest.to_string();
        path = String::new();
    }
    let hostname = match host.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => {
            h.trim_start_matches('[').trim_end_matches(']').to_string()
        }
        _ => host.clone(),
    };
    let m = Map::new(MapKind::Iface);
    for (k, v) in [
        ("scheme", scheme),
        ("host", host),
        ("hostname", hostname),
        ("path", path),
        ("query", query.to_string()),
        ("opaque", opaque),
        ("fragment", fragment.to_string()),
        ("userinfo", userinfo),
    ] {
        m.insert(Str::from(k), Value::string(v));
    }
    Ok(Value::Map(m))
}

fn url_join(v: &Value) -> String {
    let Value::Map(m) = v else {
        return String::new();
    };
    let get = |k: &str| {
        m.get(k)
            .map(|x| super::strings::strval(&x))
            .unwrap_or_default()
    };
    let mut out = String::new();
    let scheme = get("scheme");
    if !scheme.is_empty() {
        out.push_str(&scheme);
        out.push(':');
    }
    let opaque = get("opaque");
    if !opaque.is_empty() {
        out.push_str(&opaque);
    } else {
        let host = get("host");
        let userinfo = get("userinfo");
        if !host.is_empty() || !userinfo.is_empty() {
            out.push_str("//");
            if !userinfo.is_empty() {
                out.push_str(&userinfo);
                out.push('@');
            }
            out.push_str(&host);
        }
        let path = get("path");
        if !path.is_empty() && !path.starts_with('/') && !host.is_empty() {
            out.push('/');
        }
        out.push_str(&path);
    }
    let query = get("query");
    if !query.is_empty() {
        out.push('?');
        out.push_str(&query);
    }
    let fragment = get("fragment");
    if !fragment.is_empty() {
        out.push('#');
        out.push_str(&fragment);
    }
    out
}
