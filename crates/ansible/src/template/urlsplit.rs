//! `urlsplit`: ansible-core's filter over Python's `urllib.parse.urlsplit` (Python 3.11):
//! the URL's parts as a mapping (`fragment`, `hostname`, `netloc`, `password`, `path`,
//! `port`, `query`, `scheme`, `username` — the attributes Ansible copies, in `dir()` order),
//! or one of them. Python's rules kept: leading C0 controls and spaces stripped, tabs and
//! newlines removed, the scheme lower-cased when it is one, the host lower-cased and taken
//! out of `[...]`, a port that is not a number (or out of 0-65535) an error, absent parts
//! `None` (hostname, port, username, password) or empty text.
use minijinja::value::Value;
use minijinja::{Error, State};

use super::args::{invalid, Args};
use super::value::py_str;

#[derive(Debug, PartialEq)]
pub struct Parts {
    pub scheme: String,
    pub netloc: String,
    pub path: String,
    pub query: String,
    pub fragment: String,
}

fn is_scheme_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "+-.".contains(c)
}

pub fn split(url: &str) -> Parts {
    let url: String = url
        .trim_start_matches(|c: char| c <= ' ')
        .chars()
        .filter(|c| !matches!(c, '\t' | '\r' | '\n'))
        .collect();
    let mut rest = url.as_str();
    let mut scheme = String::new();
    if let Some(i) = rest.find(':') {
        let s = &rest[..i];
        if s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && s.chars().all(is_scheme_char)
        {
            scheme = s.to_ascii_lowercase();
            rest = &rest[i + 1..];
        }
    }
    let mut netloc = String::new();
    if let Some(after) = rest.strip_prefix("//") {
        let end = after.find(['/', '?', '#']).unwrap_or(after.len());
        netloc = after[..end].to_string();
        rest = &after[end..];
    }
    let (rest, fragment) = match rest.split_once('#') {
        Some((a, f)) => (a, f.to_string()),
        None => (rest, String::new()),
    };
    let (path, query) = match rest.split_once('?') {
        Some((p, q)) => (p.to_string(), q.to_string()),
        None => (rest.to_string(), String::new()),
    };
    Parts {
        scheme,
        netloc,
        path,
        query,
        fragment,
    }
}

/// (username, password, hostname, port) from a netloc, as Python's `SplitResult`.
#[allow(clippy::type_complexity)]
fn netloc_parts(
    netloc: &str,
) -> Result<(Option<String>, Option<String>, Option<String>, Option<u16>), String> {
    let (user, pass) = match netloc.rsplit_once('@') {
        Some((userinfo, _)) => match userinfo.split_once(':') {
            Some((u, p)) => (Some(u.to_string()), Some(p.to_string())),
            None => (Some(userinfo.to_string()), None),
        },
        None => (None, None),
    };
    let hostinfo = netloc.rsplit_once('@').map_or(netloc, |(_, h)| h);
    let (host, port) = if let Some(b) = hostinfo.strip_prefix('[') {
        match b.split_once(']') {
            Some((h, after)) => (h, after.split_once(':').map(|(_, p)| p)),
            None => (b, None),
        }
    } else {
        match hostinfo.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostinfo, None),
        }
    };
    let host = (!host.is_empty()).then(|| host.to_lowercase());
    let port = match port.filter(|p| !p.is_empty()) {
        None => None,
        Some(p) if p.chars().all(|c| c.is_ascii_digit()) => {
            match p.trim_start_matches('0').parse::<u32>() {
                Ok(n) if n <= 65535 => Some(n as u16),
                Err(_) if p.trim_start_matches('0').is_empty() => Some(0),
                _ => return Err("Port out of range 0-65535".into()),
            }
        }
        Some(p) => return Err(format!("Port could not be cast to integer value as '{p}'")),
    };
    Ok((user, pass, host, port))
}

pub fn urlsplit(_: &State, v: Value, args: Args) -> Result<Value, Error> {
    args.check("urlsplit", &["query"], 1)?;
    let query = args.get_str(0, "query", "")?;
    let p = split(&py_str(&v));
    let (user, pass, host, port) = netloc_parts(&p.netloc).map_err(invalid)?;
    let opt = |s: Option<String>| s.map_or(Value::from(()), Value::from);
    let parts: Vec<(&str, Value)> = vec![
        ("fragment", Value::from(p.fragment)),
        ("hostname", opt(host)),
        ("netloc", Value::from(p.netloc)),
        ("password", opt(pass)),
        ("path", Value::from(p.path)),
        ("port", port.map_or(Value::from(()), Value::from)),
        ("query", Value::from(p.query)),
        ("scheme", Value::from(p.scheme)),
        ("username", opt(user)),
    ];
    if query.is_empty() {
        // Sorted, as Ansible's `dir()`-ordered copy of the attributes.
        let map: std::collections::BTreeMap<String, Value> =
            parts.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        return Ok(Value::from(map));
    }
    parts
        .into_iter()
        .find(|(k, _)| *k == query)
        .map(|(_, v)| v)
        .ok_or_else(|| invalid(format!("urlsplit: unknown URL component: {query}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_as_python() {
        let p = split(" HTTPS://u:p@Host.Example:8443/a/b?x=1#f");
        assert_eq!(p.scheme, "https");
        assert_eq!(p.netloc, "u:p@Host.Example:8443");
        assert_eq!(
            (p.path.as_str(), p.query.as_str(), p.fragment.as_str()),
            ("/a/b", "x=1", "f")
        );
        assert_eq!(
            netloc_parts(&p.netloc),
            Ok((
                Some("u".into()),
                Some("p".into()),
                Some("host.example".into()),
                Some(8443)
            ))
        );
        assert_eq!(
            netloc_parts("[::1]:80"),
            Ok((None, None, Some("::1".into()), Some(80)))
        );
        assert_eq!(netloc_parts("h:"), Ok((None, None, Some("h".into()), None)));
        assert!(netloc_parts("h:x").is_err());
        assert!(netloc_parts("h:70000").is_err());
        let rel = split("a/b?q");
        assert_eq!(
            (rel.scheme.as_str(), rel.path.as_str(), rel.query.as_str()),
            ("", "a/b", "q")
        );
        assert_eq!(split("mailto:a@b").path, "a@b");
    }
}
