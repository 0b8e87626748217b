//! go-yaml v2's `Marshal` of an `interface{}` tree: values to emitter events, with go-yaml's
//! scalar styles (double quotes for strings that would resolve to something else, a literal
//! block for strings with a line break) and its sorted map keys.

use std::borrow::Cow;

use crate::emit::{self, Dialect, EmitEvent, ScalarEvent, Settings};
use crate::syntax::ScalarStyle;
use crate::value::Yaml;

use super::base64;
use super::resolve::{is_base60_float, resolve_implicit, BINARY, STR};
use super::sort::sort_pairs;
use super::strconv::format_yaml_float;

/// The YAML text go-yaml v2's `yaml.Marshal` writes for `v`, trailing newline included.
pub fn marshal(v: &Yaml) -> String {
    // A small value's events fit without regrowing.
    let mut events = Vec::with_capacity(32);
    events.push(EmitEvent::StreamStart);
    events.push(EmitEvent::DocumentStart { implicit: true });
    push_value(v, &mut events);
    events.push(EmitEvent::DocumentEnd { implicit: true });
    events.push(EmitEvent::StreamEnd);
    emit::emit(
        &events,
        Settings {
            dialect: Dialect::GoYamlV2,
            indent: 2,
            width: Some(80),
            unicode: true,
        },
    )
}

fn plain(value: String) -> EmitEvent<'static> {
    EmitEvent::Scalar(ScalarEvent {
        tag: None,
        value: value.into(),
        plain_implicit: true,
        quoted_implicit: true,
        style: Some(ScalarStyle::Plain),
    })
}

/// Values to events with an explicit stack, so no tree is too deep to write.
fn push_value<'a>(root: &'a Yaml, events: &mut Vec<EmitEvent<'a>>) {
    enum Work<'a> {
        Value(&'a Yaml),
        End(EmitEvent<'a>),
    }
    let mut stack = Vec::with_capacity(16);
    stack.push(Work::Value(root));
    while let Some(work) = stack.pop() {
        let v = match work {
            Work::End(event) => {
                events.push(event);
                continue;
            }
            Work::Value(v) => v,
        };
        match v {
            Yaml::Null => events.push(plain("null".into())),
            Yaml::Bool(b) => events.push(plain(b.to_string())),
            Yaml::Int(i) => events.push(plain(i.to_string())),
            Yaml::BigInt(s) => events.push(plain(s.clone())),
            Yaml::Float(f) => events.push(plain(format_yaml_float(*f))),
            Yaml::Str(s) => events.push(string_event(s.into())),
            Yaml::Timestamp(t) => events.push(string_event(t.to_string().into())),
            Yaml::Binary(bytes) => {
                // Invalid UTF-8 goes out as tagged base64, plain unless it spans lines.
                let value = encode_base64_lines(bytes);
                let style = if value.contains('\n') {
                    ScalarStyle::Literal
                } else {
                    ScalarStyle::Plain
                };
                events.push(EmitEvent::Scalar(ScalarEvent {
                    tag: Some(BINARY.to_string()),
                    value: value.into(),
                    plain_implicit: false,
                    quoted_implicit: false,
                    style: Some(style),
                }))
            }
            Yaml::Seq(items) => {
                events.push(EmitEvent::SequenceStart {
                    tag: None,
                    implicit: true,
                    flow: false,
                });
                stack.push(Work::End(EmitEvent::SequenceEnd));
                stack.extend(items.iter().rev().map(|i| Work::Value(&i.value)));
            }
            Yaml::Map(pairs) => {
                let mut sorted: Vec<_> = pairs.iter().collect();
                sort_pairs(&mut sorted, |(k, _)| &k.value);
                events.push(EmitEvent::MappingStart {
                    tag: None,
                    implicit: true,
                    flow: false,
                });
                stack.push(Work::End(EmitEvent::MappingEnd));
                for (k, v) in sorted.into_iter().rev() {
                    stack.push(Work::Value(&v.value));
                    stack.push(Work::Value(&k.value));
                }
            }
        }
    }
}

/// go-yaml's `stringv`: quoted when the plain form would read back as another type.
fn string_event(s: Cow<'_, str>) -> EmitEvent<'_> {
    // `resolve("", s)` without building its tag string: an empty tag always resolves.
    let can_use_plain = resolve_implicit("", &s).0 == STR && !is_base60_float(&s);
    let style = if s.contains('\n') {
        ScalarStyle::Literal
    } else if can_use_plain {
        ScalarStyle::Plain
    } else {
        ScalarStyle::DoubleQuoted
    };
    EmitEvent::Scalar(ScalarEvent {
        tag: None,
        value: s,
        plain_implicit: true,
        quoted_implicit: true,
        style: Some(style),
    })
}

/// go-yaml's `encodeBase64`: 70-character lines, each ending in a newline once there is more
/// than one line.
fn encode_base64_lines(bytes: &[u8]) -> String {
    let encoded = base64::encode_std(bytes);
    let lines = encoded.len() / 70 + 1;
    if lines == 1 {
        return encoded;
    }
    let mut out = String::with_capacity(encoded.len() + lines);
    for chunk in encoded.as_bytes().chunks(70) {
        out.push_str(std::str::from_utf8(chunk).unwrap_or_default());
        out.push('\n');
    }
    out
}
