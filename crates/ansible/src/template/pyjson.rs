//! Python's `json.dumps` output, byte for byte, for `to_json`/`to_nice_json` (roles hash
//! these, so a space in a different place is a different hash).
use minijinja::value::{Value, ValueKind};

use super::value::py_float;

pub struct JsonOpts {
    pub indent: Option<String>,
    pub sort_keys: bool,
    pub ensure_ascii: bool,
    pub item_sep: String,
    pub key_sep: String,
}

impl Default for JsonOpts {
    fn default() -> Self {
        JsonOpts {
            indent: None,
            sort_keys: false,
            ensure_ascii: true,
            item_sep: ", ".into(),
            key_sep: ": ".into(),
        }
    }
}

pub fn dumps(v: &Value, o: &JsonOpts) -> Result<String, String> {
    let mut out = String::new();
    write(v, o, 0, &mut out)?;
    Ok(out)
}

fn write(v: &Value, o: &JsonOpts, level: usize, out: &mut String) -> Result<(), String> {
    if level > 500 {
        return Err("maximum recursion depth exceeded while encoding a JSON object".into());
    }
    match v.kind() {
        ValueKind::Undefined => {
            return Err("Object of type AnsibleUndefined is not JSON serializable".into())
        }
        ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if v.is_true() { "true" } else { "false" }),
        ValueKind::Number => {
            if v.is_integer() {
                out.push_str(&v.to_string());
            } else {
                let f = f64::try_from(v.clone()).unwrap_or(f64::NAN);
                out.push_str(&match py_float(f).as_str() {
                    "nan" => "NaN".to_string(),
                    "inf" => "Infinity".to_string(),
                    "-inf" => "-Infinity".to_string(),
                    s => s.to_string(),
                });
            }
        }
        ValueKind::String => string(v.as_str().unwrap_or_default(), o.ensure_ascii, out),
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = v.try_iter().map_err(|e| e.to_string())?.collect();
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                sep(o, level + 1, i > 0, out);
                write(x, o, level + 1, out)?;
            }
            close(o, level, out);
            out.push(']');
        }
        ValueKind::Map => {
            let mut pairs: Vec<(String, Value)> = Vec::new();
            for k in v.try_iter().map_err(|e| e.to_string())? {
                let key = match k.kind() {
                    ValueKind::String => k.as_str().unwrap_or_default().to_string(),
                    ValueKind::Bool => if k.is_true() { "true" } else { "false" }.to_string(),
                    ValueKind::None => "null".to_string(),
                    ValueKind::Number if k.is_integer() => k.to_string(),
                    ValueKind::Number => py_float(f64::try_from(k.clone()).unwrap_or(f64::NAN)),
                    _ => {
                        return Err(format!(
                            "keys must be str, int, float, bool or None, not {}",
                            k.kind()
                        ))
                    }
                };
                let item = v.get_item(&k).unwrap_or_default();
                pairs.push((key, item));
            }
            if o.sort_keys {
                pairs.sort_by(|a, b| a.0.cmp(&b.0));
            }
            if pairs.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            out.push('{');
            for (i, (k, x)) in pairs.iter().enumerate() {
                sep(o, level + 1, i > 0, out);
                string(k, o.ensure_ascii, out);
                out.push_str(&o.key_sep);
                write(x, o, level + 1, out)?;
            }
            close(o, level, out);
            out.push('}');
        }
        _ => string(&v.to_string(), o.ensure_ascii, out),
    }
    Ok(())
}

fn sep(o: &JsonOpts, level: usize, not_first: bool, out: &mut String) {
    match &o.indent {
        Some(ind) => {
            if not_first {
                out.push_str(o.item_sep.trim_end_matches(' '));
            }
            out.push('\n');
            for _ in 0..level {
                out.push_str(ind);
            }
        }
        None => {
            if not_first {
                out.push_str(&o.item_sep);
            }
        }
    }
}

fn close(o: &JsonOpts, level: usize, out: &mut String) {
    if let Some(ind) = &o.indent {
        out.push('\n');
        for _ in 0..level {
            out.push_str(ind);
        }
    }
}

fn string(s: &str, ensure_ascii: bool, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if ensure_ascii && (c as u32) > 0x7e => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::template::value::from_json;

    #[test]
    fn python_formatting() {
        let v = from_json(
            &serde_json::json!({"b": [1, 2.0, {"x": null}], "a": "é\n", "c": {}, "d": []}),
        );
        assert_eq!(
            dumps(&v, &JsonOpts::default()).expect("test value"),
            r#"{"a": "\u00e9\n", "b": [1, 2.0, {"x": null}], "c": {}, "d": []}"#
        );
        let nice = JsonOpts {
            indent: Some("    ".into()),
            sort_keys: true,
            item_sep: ",".into(),
            ..JsonOpts::default()
        };
        assert_eq!(dumps(&v, &nice).expect("test value"), "{\n    \"a\": \"\\u00e9\\n\",\n    \"b\": [\n        1,\n        2.0,\n        {\n            \"x\": null\n        }\n    ],\n    \"c\": {},\n    \"d\": []\n}");
    }
}
