//! `semver` and `semverCompare` with Masterminds/semver v3 rules: loose versions
//! (`v1.2`), constraints joined by `,`/space (and) and `||` (or), operators
//! `= != > < >= <= ~ ~> ^`, wildcards `x X *`, hyphen ranges, and the rule that a
//! prerelease version only satisfies a constraint that names a prerelease
//! (`>=1.19-0` admits `v1.27.3-eks-1`, `>=1.19` does not).
use std::cmp::Ordering;
use std::rc::Rc;

use super::{s, FnResult, FuncDef};
use crate::func;
use crate::value::object::{Method, Object};
use crate::value::{Kind, Value};

pub const FUNCS: &[FuncDef] = &[
    func!("semver", [Str], |_, a| {
        let v = Version::parse(s(&a[0])).map_err(|e| e.to_string())?;
        Ok(Value::Obj(Rc::new(v)))
    }),
    func!("semverCompare", [Str, Str], |_, a| semver_compare(
        s(&a[0]),
        s(&a[1])
    )),
];

fn semver_compare(constraint: &str, version: &str) -> FnResult {
    let c = Constraints::parse(constraint).map_err(|e| e.to_string())?;
    let v = Version::parse(version).map_err(|e| e.to_string())?;
    Ok(Value::Bool(c.check(&v)))
}

#[derive(Clone, Debug, PartialEq)]
pub struct Version {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
    pub pre: String,
    pub meta: String,
    pub original: String,
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-'
}

fn valid_idents(s: &str) -> bool {
    !s.is_empty()
        && s.split('.')
            .all(|p| !p.is_empty() && p.chars().all(is_ident_char))
}

impl Version {
    /// `semver.NewVersion`.
    pub fn parse(s: &str) -> Result<Version, &'static str> {
        const INVALID: &str = "Invalid Semantic Version";
        let body = s.strip_prefix('v').unwrap_or(s);
        let (body, meta) = match body.split_once('+') {
            Some((b, m)) => {
                if !valid_idents(m) {
                    return Err(INVALID);
                }
                (b, m)
            }
            None => (body, ""),
        };
        let (core, pre) = match body.split_once('-') {
            Some((c, p)) => {
                if !valid_idents(p) {
                    return Err(INVALID);
                }
                (c, p)
            }
            None => (body, ""),
        };
        let parts: Vec<&str> = core.split('.').collect();
        if parts.is_empty()
            || parts.len() > 3
            || parts
                .iter()
                .any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
        {
            return Err(INVALID);
        }
        let num = |i: usize| -> Result<u64, &'static str> {
            match parts.get(i) {
                Some(p) => p.parse::<u64>().map_err(|_| INVALID),
                None => Ok(0),
            }
        };
        for id in pre.split('.').filter(|_| !pre.is_empty()) {
            if id.len() > 1 && id.starts_with('0') && id.bytes().all(|b| b.is_ascii_digit()) {
                return Err("Version segment starts with 0");
            }
        }
        Ok(Version {
            major: num(0)?,
            minor: num(1)?,
            patch: num(2)?,
            pre: pre.to_string(),
            meta: meta.to_string(),
            original: s.to_string(),
        })
    }

    pub fn compare(&self, o: &Version) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(o.major, o.minor, o.patch))
            .then_with(|| compare_pre(&self.pre, &o.pre))
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        if !self.pre.is_empty() {
            write!(f, "-{}", self.pre)?;
        }
        if !self.meta.is_empty() {
            write!(f, "+{}", self.meta)?;
        }
        Ok(())
    }
}

fn compare_pre(a: &str, b: &str) -> Ordering {
    match (a.is_empty(), b.is_empty()) {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Greater,
        (false, true) => return Ordering::Less,
        _ => {}
    }
    let (pa, pb): (Vec<&str>, Vec<&str>) = (a.split('.').collect(), b.split('.').collect());
    for (x, y) in pa.iter().zip(&pb) {
        let o = match (x.parse::<u64>(), y.parse::<u64>()) {
            (Ok(i), Ok(j)) => i.cmp(&j),
            (Ok(_), Err(_)) => Ordering::Less,
            (Err(_), Ok(_)) => Ordering::Greater,
            _ => x.cmp(y),
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    pa.len().cmp(&pb.len())
}

impl Object for Version {
    fn type_name(&self) -> &str {
        "*semver.Version"
    }
    fn kind(&self) -> Kind {
        Kind::Ptr
    }
    fn field_names(&self) -> &'static [&'static str] {
        &[]
    }
    fn field(&self, _name: &str) -> Option<Value> {
        None
    }
    fn method(&self, name: &str) -> Option<Method> {
        let v = self.clone();
        Some(match name {
            "Major" => Method::new(&[], move |_| Ok(Value::Uint64(v.major))),
            "Minor" => Method::new(&[], move |_| Ok(Value::Uint64(v.minor))),
            "Patch" => Method::new(&[], move |_| Ok(Value::Uint64(v.patch))),
            "Prerelease" => Method::new(&[], move |_| Ok(Value::string(v.pre.clone()))),
            "Metadata" => Method::new(&[], move |_| Ok(Value::string(v.meta.clone()))),
            "Original" => Method::new(&[], move |_| Ok(Value::string(v.original.clone()))),
            "String" => Method::new(&[], move |_| Ok(Value::string(v.to_string()))),
            _ => return None,
        })
    }
    fn stringer(&self, _top: bool) -> Option<String> {
        Some(self.to_string())
    }
    fn json_value(&self) -> Option<Value> {
        Some(Value::string(self.to_string()))
    }
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Op {
    TildeOrEqual,
    NotEqual,
    Gt,
    Lt,
    Gte,
    Lte,
    Tilde,
    Caret,
}

#[derive(Debug)]
struct Constraint {
    op: Op,
    con: Version,
    dirty: bool,
    minor_dirty: bool,
    patch_dirty: bool,
}

pub struct Constraints {
    ors: Vec<Vec<Constraint>>,
}

fn is_x(s: &str) -> bool {
    matches!(s, "x" | "X" | "*")
}

impl Constraints {
    pub fn parse(c: &str) -> Result<Constraints, String> {
        let c = rewrite_ranges(c);
        let mut ors = Vec::new();
        for part in c.split("||") {
            let mut ands = Vec::new();
            for tok in tokens(part) {
                ands.push(
                    parse_constraint(&tok).ok_or_else(|| format!("improper constraint: {part}"))?,
                );
            }
            if ands.is_empty() {
                ands.push(
                    parse_constraint("").ok_or_else(|| format!("improper constraint: {part}"))?,
                );
            }
            ors.push(ands);
        }
        Ok(Constraints { ors })
    }

    pub fn check(&self, v: &Version) -> bool {
        self.ors.iter().any(|ands| ands.iter().all(|c| c.check(v)))
    }
}

/// `1.2 - 1.4.5` → `>= 1.2, <= 1.4.5`.
fn rewrite_ranges(c: &str) -> String {
    let words: Vec<&str> = c.split_whitespace().collect();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < words.len() {
        if i + 2 < words.len() && words[i + 1] == "-" {
            out.push(format!(">= {}, <= {}", words[i], words[i + 2]));
            i += 3;
        } else {
            out.push(words[i].to_string());
            i += 1;
        }
    }
    out.join(" ")
}

/// Splits an AND group into `op version` tokens.
fn tokens(part: &str) -> Vec<String> {
    let mut out = Vec::new();
    let chars: Vec<char> = part.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        while i < chars.len() && (chars[i].is_whitespace() || chars[i] == ',') {
            i += 1;
        }
        if i >= chars.len() {
            break;
        }
        let mut tok = String::new();
        while i < chars.len() && "=!<>~^".contains(chars[i]) {
            tok.push(chars[i]);
            i += 1;
        }
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        while i < chars.len() && !chars[i].is_whitespace() && chars[i] != ',' {
            tok.push(chars[i]);
            i += 1;
        }
        out.push(tok);
    }
    out
}

fn parse_constraint(c: &str) -> Option<Constraint> {
    let op_len = c.find(|ch: char| !"=!<>~^".contains(ch)).unwrap_or(c.len());
    let (op_s, ver) = c.split_at(op_len);
    let op = match op_s {
        "" | "=" => Op::TildeOrEqual,
        "!=" => Op::NotEqual,
        ">" => Op::Gt,
        "<" => Op::Lt,
        ">=" | "=>" => Op::Gte,
        "<=" | "=<" => Op::Lte,
        "~" | "~>" => Op::Tilde,
        "^" => Op::Caret,
        _ => return None,
    };
    if ver.is_empty() {
        if !op_s.is_empty() {
            return None;
        }
        return Some(Constraint {
            op,
            con: Version::parse("0.0.0").ok()?,
            dirty: true,
            minor_dirty: false,
            patch_dirty: false,
        });
    }
    let body = ver.strip_prefix('v').unwrap_or(ver);
    let split = body.find(['-', '+']).unwrap_or(body.len());
    let (core, rest) = body.split_at(split);
    let parts: Vec<&str> = core.split('.').collect();
    if parts.len() > 3
        || parts
            .iter()
            .any(|p| p.is_empty() || !(is_x(p) || p.bytes().all(|b| b.is_ascii_digit())))
    {
        return None;
    }
    let (mut dirty, mut minor_dirty, mut patch_dirty) = (false, false, false);
    let v = if is_x(parts[0]) {
        dirty = true;
        format!("0.0.0{rest}")
    } else if parts.len() < 2 || is_x(parts[1]) {
        dirty = true;
        minor_dirty = true;
        format!("{}.0.0{rest}", parts[0])
    } else if parts.len() < 3 || is_x(parts[2]) {
        dirty = true;
        patch_dirty = true;
        format!("{}.{}.0{rest}", parts[0], parts[1])
    } else {
        body.to_string()
    };
    Some(Constraint {
        op,
        con: Version::parse(&v).ok()?,
        dirty,
        minor_dirty,
        patch_dirty,
    })
}

impl Constraint {
    fn pre_blocked(&self, v: &Version) -> bool {
        !v.pre.is_empty() && self.con.pre.is_empty()
    }

    fn check(&self, v: &Version) -> bool {
        let c = &self.con;
        match self.op {
            Op::NotEqual => {
                if self.dirty {
                    if self.pre_blocked(v) {
                        return false;
                    }
                    if c.major != v.major {
                        return true;
                    }
                    if c.minor != v.minor && !self.minor_dirty {
                        return true;
                    } else if self.minor_dirty {
                        return false;
                    } else if c.patch != v.patch && !self.patch_dirty {
                        return true;
                    } else if self.patch_dirty {
                        if !v.pre.is_empty() || !c.pre.is_empty() {
                            return compare_pre(&v.pre, &c.pre) != Ordering::Equal;
                        }
                        return false;
                    }
                }
                v.compare(c) != Ordering::Equal
            }
            Op::Gt => {
                if self.pre_blocked(v) {
                    return false;
                }
                if !self.dirty {
                    return v.compare(c) == Ordering::Greater;
                }
                if v.major > c.major {
                    return true;
                } else if v.major < c.major || self.minor_dirty {
                    return false;
                } else if self.patch_dirty {
                    return v.minor > c.minor;
                }
                v.compare(c) == Ordering::Greater
            }
            Op::Lt => !self.pre_blocked(v) && v.compare(c) == Ordering::Less,
            Op::Gte => !self.pre_blocked(v) && v.compare(c) != Ordering::Less,
            Op::Lte => {
                if self.pre_blocked(v) {
                    return false;
                }
                if !self.dirty {
                    return v.compare(c) != Ordering::Greater;
                }
                !(v.major > c.major
                    || (v.major == c.major && v.minor > c.minor && !self.minor_dirty))
            }
            Op::Tilde => self.tilde(v),
            Op::TildeOrEqual => {
                if self.pre_blocked(v) {
                    return false;
                }
                if self.dirty {
                    return self.tilde(v);
                }
                v.compare(c) == Ordering::Equal
            }
            Op::Caret => {
                if self.pre_blocked(v) || v.compare(c) == Ordering::Less {
                    return false;
                }
                if c.major > 0 || self.minor_dirty {
                    return v.major == c.major;
                }
                if c.major == 0 && v.major > 0 {
                    return false;
                }
                if c.minor > 0 || self.patch_dirty {
                    return v.minor == c.minor;
                }
                if c.minor == 0 && v.minor > 0 {
                    return false;
                }
                c.patch == v.patch
            }
        }
    }

    fn tilde(&self, v: &Version) -> bool {
        let c = &self.con;
        if self.pre_blocked(v) || v.compare(c) == Ordering::Less {
            return false;
        }
        if c.major == 0 && c.minor == 0 && c.patch == 0 && !self.minor_dirty && !self.patch_dirty {
            return true;
        }
        if v.major != c.major {
            return false;
        }
        v.minor == c.minor || self.minor_dirty
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(c: &str, v: &str) -> bool {
        Constraints::parse(c)
            .unwrap()
            .check(&Version::parse(v).unwrap())
    }

    #[test]
    fn constraints() {
        assert!(check(">=1.19-0", "v1.31.0"));
        assert!(check(">=1.19-0", "v1.27.3-eks-a5565ad"));
        assert!(!check(">=1.19", "v1.27.3-eks-a5565ad"));
        assert!(check("^1.2", "1.3.0"));
        assert!(!check("^1.2", "2.0.0"));
        assert!(check("~1.2.3", "1.2.9"));
        assert!(!check("~1.2.3", "1.3.0"));
        assert!(check("<1.14-0", "v1.13.5"));
        assert!(check(">= 1.2, < 2 || 3.x", "3.4.0"));
        assert!(check("1.2 - 1.4.5", "1.3.0"));
    }
}
