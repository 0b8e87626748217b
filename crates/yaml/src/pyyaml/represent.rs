//! `yaml.dump` with PyYAML's SafeRepresenter and the libyaml emitter behind `CSafeDumper`
//! (Ansible's `AnsibleDumper` derives from `CSafeDumper` whenever libyaml is present).

use std::cmp::Ordering;

use crate::emit::{self, Dialect, EmitEvent, ScalarEvent, Settings};
use crate::syntax::ScalarStyle;
use crate::value::{Node, Yaml};

use super::binary::encode_base64_lines;
use super::number::float_repr;
use super::resolve::{resolve_plain, BINARY, BOOL, FLOAT, INT, MAP, NULL, SEQ, STR, TIMESTAMP};

/// `yaml.dump` keyword arguments. [`Default`] is `yaml.dump`'s own defaults;
/// [`DumpOptions::to_yaml`] and [`DumpOptions::to_nice_yaml`] are Ansible's filters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpOptions {
    /// Indentation step; outside 2..=9 libyaml uses 2.
    pub indent: usize,
    /// Preferred line width; at most twice the indent means 80.
    pub width: usize,
    /// `Some(false)`: block collections; `Some(true)`: flow; `None`: flow only for
    /// collections whose items are all plain scalars (PyYAML's "best style").
    pub default_flow_style: Option<bool>,
    /// Sort mapping keys (left unsorted when Python cannot compare them).
    pub sort_keys: bool,
    /// Write non-ASCII characters as they are instead of escaping them.
    pub allow_unicode: bool,
    pub explicit_start: bool,
    pub explicit_end: bool,
}

impl Default for DumpOptions {
    fn default() -> DumpOptions {
        DumpOptions {
            indent: 2,
            width: 80,
            default_flow_style: Some(false),
            sort_keys: true,
            allow_unicode: false,
            explicit_start: false,
            explicit_end: false,
        }
    }
}

impl DumpOptions {
    /// Ansible's `to_yaml`: `yaml.dump(v, allow_unicode=True, default_flow_style=None)`.
    pub fn to_yaml() -> DumpOptions {
        DumpOptions {
            allow_unicode: true,
            default_flow_style: None,
            ..DumpOptions::default()
        }
    }

    /// Ansible's `to_nice_yaml`: `indent=4, allow_unicode=True, default_flow_style=False,
    /// sort_keys=True`.
    pub fn to_nice_yaml() -> DumpOptions {
        DumpOptions {
            indent: 4,
            allow_unicode: true,
            ..DumpOptions::default()
        }
    }
}

/// `yaml.dump(v, Dumper=CSafeDumper, **opts)`: the text PyYAML writes for one document.
pub fn dump(v: &Yaml, opts: &DumpOptions) -> String {
    let mut events = vec![
        EmitEvent::StreamStart,
        EmitEvent::DocumentStart {
            implicit: !opts.explicit_start,
        },
    ];
    represent(v, opts, &mut events);
    events.push(EmitEvent::DocumentEnd {
        implicit: !opts.explicit_end,
    });
    events.push(EmitEvent::StreamEnd);
    emit::emit(
        &events,
        Settings {
            dialect: Dialect::LibYaml,
            indent: opts.indent,
            width: Some(opts.width),
            unicode: opts.allow_unicode,
        },
    )
}

fn scalar(tag: &str, value: String, style: Option<ScalarStyle>) -> EmitEvent<'static> {
    // The serializer's implicit pair: does the plain text resolve back to the tag, and is
    // the tag the default one for quoted text?
    let plain_implicit = resolve_plain(&value) == tag;
    EmitEvent::Scalar(ScalarEvent {
        tag: Some(tag.to_string()),
        value: value.into(),
        plain_implicit,
        quoted_implicit: tag == STR,
        style: Some(style.unwrap_or(ScalarStyle::Plain)),
    })
}

/// Represents `root` with an explicit stack (no tree is too deep to write). A collection's
/// flow style is settled when it closes: PyYAML's "best style" is flow when every child is a
/// scalar without a forced style.
fn represent(root: &Yaml, opts: &DumpOptions, events: &mut Vec<EmitEvent>) {
    enum Work<'a> {
        Value(&'a Yaml),
        Close,
    }
    struct Open {
        start: usize,
        best: bool,
        mapping: bool,
    }
    let mut stack = vec![Work::Value(root)];
    let mut open: Vec<Open> = Vec::new();
    while let Some(work) = stack.pop() {
        let v = match work {
            Work::Close => {
                let Some(o) = open.pop() else { continue };
                let flow = opts.default_flow_style.unwrap_or(o.best);
                if o.mapping {
                    events[o.start] = EmitEvent::MappingStart {
                        tag: Some(MAP.into()),
                        implicit: true,
                        flow,
                    };
                    events.push(EmitEvent::MappingEnd);
                } else {
                    events[o.start] = EmitEvent::SequenceStart {
                        tag: Some(SEQ.into()),
                        implicit: true,
                        flow,
                    };
                    events.push(EmitEvent::SequenceEnd);
                }
                continue;
            }
            Work::Value(v) => v,
        };
        let plain_candidate = match v {
            Yaml::Null => {
                events.push(scalar(NULL, "null".into(), None));
                true
            }
            Yaml::Bool(b) => {
                events.push(scalar(BOOL, b.to_string(), None));
                true
            }
            Yaml::Int(i) => {
                events.push(scalar(INT, i.to_string(), None));
                true
            }
            Yaml::BigInt(s) => {
                events.push(scalar(INT, s.clone(), None));
                true
            }
            Yaml::Float(f) => {
                events.push(scalar(FLOAT, float_text(*f), None));
                true
            }
            Yaml::Str(s) => {
                events.push(scalar(STR, s.clone(), None));
                true
            }
            Yaml::Timestamp(t) => {
                events.push(scalar(TIMESTAMP, t.to_string(), None));
                true
            }
            Yaml::Binary(b) => {
                events.push(scalar(
                    BINARY,
                    encode_base64_lines(b),
                    Some(ScalarStyle::Literal),
                ));
                false
            }
            Yaml::Seq(items) => {
                // A placeholder start event, fixed when the sequence closes.
                open.push(Open {
                    start: events.len(),
                    best: true,
                    mapping: false,
                });
                events.push(EmitEvent::SequenceEnd);
                stack.push(Work::Close);
                stack.extend(items.iter().rev().map(|i| Work::Value(&i.value)));
                false
            }
            Yaml::Map(pairs) => {
                let mut ordered: Vec<&Pair> = pairs.iter().collect();
                if opts.sort_keys {
                    sort_like_python(&mut ordered);
                }
                open.push(Open {
                    start: events.len(),
                    best: true,
                    mapping: true,
                });
                events.push(EmitEvent::MappingEnd);
                stack.push(Work::Close);
                for (k, v) in ordered.into_iter().rev() {
                    stack.push(Work::Value(&v.value));
                    stack.push(Work::Value(&k.value));
                }
                false
            }
        };
        if !plain_candidate {
            // The collection just opened (if any) is not the parent: look below it.
            let parent = match v {
                Yaml::Seq(_) | Yaml::Map(_) => open.len().checked_sub(2),
                _ => open.len().checked_sub(1),
            };
            if let Some(p) = parent {
                open[p].best = false;
            }
        }
    }
}

/// `SafeRepresenter.represent_float`.
fn float_text(f: f64) -> String {
    if f.is_nan() {
        ".nan".into()
    } else if f == f64::INFINITY {
        ".inf".into()
    } else if f == f64::NEG_INFINITY {
        "-.inf".into()
    } else {
        let v = float_repr(f).to_lowercase();
        // repr(1e17) is '1e+17', which is not a YAML 1.1 float: add '.0'.
        if !v.contains('.') && v.contains('e') {
            v.replacen('e', ".0e", 1)
        } else {
            v
        }
    }
}

/// Python's comparison class of a key: keys of different classes (or any `None`) cannot be
/// ordered, and `sorted` then raises TypeError, which the representer ignores.
fn class(v: &Yaml) -> u8 {
    match v {
        Yaml::Bool(_) | Yaml::Int(_) | Yaml::BigInt(_) | Yaml::Float(_) => 1,
        Yaml::Str(_) => 2,
        Yaml::Binary(_) => 3,
        Yaml::Timestamp(t) => match t.time {
            None => 4,
            Some(tt) if tt.offset_minutes.is_none() => 5,
            Some(_) => 6,
        },
        Yaml::Null | Yaml::Seq(_) | Yaml::Map(_) => 0,
    }
}

type Pair = (Node, Node);

fn sort_like_python(pairs: &mut Vec<&Pair>) {
    if pairs.len() < 2 {
        return;
    }
    let first = class(&pairs[0].0.value);
    if first == 0 || pairs.iter().any(|(k, _)| class(&k.value) != first) {
        return;
    }
    // A stable merge sort on `<` alone, which stays defined with NaN keys.
    let less = |a: &Pair, b: &Pair| py_lt(&a.0.value, &b.0.value);
    let mut items: Vec<&Pair> = std::mem::take(pairs);
    merge_sort(&mut items, &less);
    *pairs = items;
}

fn merge_sort(items: &mut [&Pair], less: &dyn Fn(&Pair, &Pair) -> bool) {
    if items.len() < 2 {
        return;
    }
    let mid = items.len() / 2;
    merge_sort(&mut items[..mid], less);
    merge_sort(&mut items[mid..], less);
    let mut merged = Vec::with_capacity(items.len());
    let (mut i, mut j) = (0, mid);
    while i < mid && j < items.len() {
        if less(items[j], items[i]) {
            merged.push(items[j]);
            j += 1;
        } else {
            merged.push(items[i]);
            i += 1;
        }
    }
    merged.extend_from_slice(&items[i..mid]);
    merged.extend_from_slice(&items[j..]);
    items.copy_from_slice(&merged);
}

/// Python's `a < b` within one comparison class.
fn py_lt(a: &Yaml, b: &Yaml) -> bool {
    match (a, b) {
        (Yaml::Str(x), Yaml::Str(y)) => x < y,
        (Yaml::Binary(x), Yaml::Binary(y)) => x < y,
        (Yaml::Timestamp(x), Yaml::Timestamp(y)) => timestamp_key(x) < timestamp_key(y),
        _ => num_cmp(a, b) == Some(Ordering::Less),
    }
}

fn timestamp_key(t: &crate::value::Timestamp) -> (i64, u32) {
    let days = crate::value::days_from_civil(t.year, t.month, t.day) as i64;
    match t.time {
        None => (days * 86_400, 0),
        Some(tt) => {
            let secs = days * 86_400
                + i64::from(tt.hour) * 3600
                + i64::from(tt.minute) * 60
                + i64::from(tt.second)
                - i64::from(tt.offset_minutes.unwrap_or(0)) * 60;
            (secs, tt.microsecond)
        }
    }
}

/// Exact comparison of Python numbers (bool, int of any size, float).
fn num_cmp(a: &Yaml, b: &Yaml) -> Option<Ordering> {
    enum N {
        I(i128),
        Big(bool, String),
        F(f64),
    }
    fn n(v: &Yaml) -> Option<N> {
        Some(match v {
            Yaml::Bool(b) => N::I(i128::from(*b)),
            Yaml::Int(i) => N::I(i128::from(*i)),
            Yaml::BigInt(s) => match s.parse::<i128>() {
                Ok(i) => N::I(i),
                Err(_) => N::Big(s.starts_with('-'), s.trim_start_matches('-').to_string()),
            },
            Yaml::Float(f) => N::F(*f),
            _ => return None,
        })
    }
    fn big_cmp(neg: bool, digits: &str, other: f64) -> Option<Ordering> {
        // |digits| exceeds i128, far beyond any float's exact-integer range but not its range.
        let value = if neg {
            -digits.parse::<f64>().ok()?
        } else {
            digits.parse::<f64>().ok()?
        };
        value.partial_cmp(&other)
    }
    match (n(a)?, n(b)?) {
        (N::I(x), N::I(y)) => Some(x.cmp(&y)),
        (N::F(x), N::F(y)) => x.partial_cmp(&y),
        (N::I(x), N::F(y)) => (x as f64).partial_cmp(&y),
        (N::F(x), N::I(y)) => x.partial_cmp(&(y as f64)),
        (N::Big(neg, d), N::F(y)) => big_cmp(neg, &d, y),
        (N::F(x), N::Big(neg, d)) => big_cmp(neg, &d, x).map(Ordering::reverse),
        (N::Big(an, ad), N::Big(bn, bd)) => {
            let mag = ad.len().cmp(&bd.len()).then_with(|| ad.cmp(&bd));
            Some(match (an, bn) {
                (false, false) => mag,
                (true, true) => mag.reverse(),
                (true, false) => Ordering::Less,
                (false, true) => Ordering::Greater,
            })
        }
        (N::Big(neg, _), N::I(_)) => Some(if neg {
            Ordering::Less
        } else {
            Ordering::Greater
        }),
        (N::I(_), N::Big(neg, _)) => Some(if neg {
            Ordering::Greater
        } else {
            Ordering::Less
        }),
    }
}
