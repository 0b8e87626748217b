//! The value tree both schemas produce and both writers consume.

use std::fmt;

/// A position in the source: 1-based line and column (columns count characters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Mark {
    pub line: usize,
    pub col: usize,
}

impl fmt::Display for Mark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

impl Mark {
    pub(crate) fn from_pos(p: crate::syntax::Pos) -> Mark {
        Mark {
            line: p.line + 1,
            col: p.column + 1,
        }
    }
}

/// A node as read, with the position where it starts. Values reached through an alias carry
/// the marks of the anchored node, as both engines share that node.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub value: Yaml,
    pub mark: Mark,
}

impl Node {
    /// A node without a source position (for trees built in code).
    pub fn new(value: Yaml) -> Node {
        Node {
            value,
            mark: Mark::default(),
        }
    }
}

impl From<Yaml> for Node {
    fn from(value: Yaml) -> Node {
        Node::new(value)
    }
}

/// A YAML value.
#[derive(Debug, Clone, PartialEq)]
pub enum Yaml {
    Null,
    Bool(bool),
    Int(i64),
    /// An integer outside `i64`, as decimal digits with an optional leading `-`: go-yaml's
    /// `uint64` values (up to 2^64-1) and PyYAML's arbitrary-precision integers.
    BigInt(String),
    Float(f64),
    Str(String),
    /// `!!binary` data that is not valid UTF-8 (go-yaml keeps such data as a Go string; PyYAML
    /// always yields `bytes`, so under that schema all `!!binary` values are `Binary`).
    Binary(Vec<u8>),
    /// A PyYAML `!!timestamp` (go-yaml keeps timestamps as strings).
    Timestamp(Timestamp),
    Seq(Vec<Node>),
    /// Pairs in document order; keys are unique under the schema's equality.
    Map(Vec<(Node, Node)>),
}

impl Yaml {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Yaml::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The value of `key` in a mapping with string keys.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Yaml::Map(pairs) => pairs
                .iter()
                .find(|(k, _)| k.value.as_str() == Some(key))
                .map(|(_, v)| v),
            _ => None,
        }
    }
}

/// A date, or a date and time, as PyYAML's `construct_yaml_timestamp` builds them
/// (`datetime.date` / `datetime.datetime`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timestamp {
    pub year: i32,
    pub month: u8,
    pub day: u8,
    pub time: Option<TimestampTime>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampTime {
    pub hour: u8,
    pub minute: u8,
    pub second: u8,
    pub microsecond: u32,
    /// Offset from UTC in minutes; `None` for a naive time.
    pub offset_minutes: Option<i32>,
}

impl fmt::Display for Timestamp {
    /// Python's `isoformat(' ')`, which is how SafeRepresenter writes timestamps.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day)?;
        let Some(t) = self.time else { return Ok(()) };
        write!(f, " {:02}:{:02}:{:02}", t.hour, t.minute, t.second)?;
        if t.microsecond != 0 {
            write!(f, ".{:06}", t.microsecond)?;
        }
        if let Some(off) = t.offset_minutes {
            let sign = if off < 0 { '-' } else { '+' };
            let off = off.abs();
            write!(f, "{sign}{:02}:{:02}", off / 60, off % 60)?;
        }
        Ok(())
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
pub(crate) fn days_from_civil(y: i32, m: u8, d: u8) -> i128 {
    let y = i128::from(y) - i128::from(m <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i128::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i128::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}
