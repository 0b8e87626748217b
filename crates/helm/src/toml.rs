//! `toToml` and `fromToml` as Helm does them with BurntSushi/toml: keys sorted, plain
//! keys before tables, table bodies indented by two spaces, whole floats written as
//! integers (Helm's `normalizeForTOML`).
use crate::value::{format, Data, Map, MapKind, Str, Value};

/// Encodes a map as TOML.
pub fn encode(v: &Value) -> Result<String, String> {
    let Value::Map(m) = v else {
        return Err("toml: top-level values must be Go maps or structs".into());
    };
    let mut out = String::new();
    table(&mut out, m, &[], 0)?;
    Ok(out)
}

fn is_table(v: &Value) -> bool {
    matches!(v, Value::Map(_))
}

fn is_table_array(v: &Value) -> bool {
    matches!(v, Value::List(l) if !l.items.is_empty() && l.items.iter().all(is_table))
}

fn key(k: &str) -> String {
    if !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        k.to_string()
    } else {
        quote(k)
    }
}

fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || c == '\x7f' => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn scalar(v: &Value) -> Result<String, String> {
    Ok(match v {
        Value::Bool(b) => b.to_string(),
        Value::Int(i) | Value::Int64(i) => i.to_string(),
        Value::Uint64(u) => u.to_string(),
        Value::Float(f) => {
            if f.is_finite() && f.fract() == 0.0 && f.abs() < 9.2e18 {
                (*f as i64).to_string()
            } else if f.is_nan() {
                "nan".into()
            } else if f.is_infinite() {
                if *f > 0.0 {
                    "inf".into()
                } else {
                    "-inf".into()
                }
            } else {
                format::format_float(*f, 'f', None)
            }
        }
        Value::Str(s) => quote(s),
        Value::List(l) => {
            let items: Result<Vec<String>, String> = l.items.iter().map(scalar).collect();
            format!("[{}]", items?.join(", "))
        }
        Value::Map(m) => {
            let mut parts = Vec::new();
            for (k, x) in m.snapshot() {
                if !x.is_nil() {
                    parts.push(format!("{} = {}", key(&k), scalar(&x)?));
                }
            }
            format!("{{{}}}", parts.join(", "))
        }
        Value::Nil => return Err("toml: cannot marshal nil value".into()),
        other => quote(&format::sprint_value(other)),
    })
}

fn table(out: &mut String, m: &Map, path: &[String], depth: usize) -> Result<(), String> {
    let indent = "  ".repeat(depth);
    let entries = m.snapshot();
    for (k, v) in &entries {
        if v.is_nil() || is_table(v) || is_table_array(v) {
            continue;
        }
        out.push_str(&format!("{indent}{} = {}\n", key(k), scalar(v)?));
    }
    for (k, v) in &entries {
        let mut p = path.to_vec();
        p.push(key(k));
        match v {
            Value::Map(sub) => {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(&format!("{}[{}]\n", "  ".repeat(depth), p.join(".")));
                table(out, sub, &p, depth + 1)?;
            }
            v if is_table_array(v) => {
                if let Value::List(l) = v {
                    for item in &l.items {
                        if let Value::Map(sub) = item {
                            if !out.is_empty() {
                                out.push('\n');
                            }
                            out.push_str(&format!("{}[[{}]]\n", "  ".repeat(depth), p.join(".")));
                            table(out, sub, &p, depth + 1)?;
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Decodes TOML into a map; errors go into the `Error` key, as Helm's `fromToml`.
pub fn decode_map(src: &str) -> Value {
    match src.parse::<toml::Table>() {
        Ok(t) => from_toml(&toml::Value::Table(t)).to_value(),
        Err(e) => {
            let m = Map::new(MapKind::Iface);
            m.insert(Str::from("Error"), Value::string(e.message().to_string()));
            Value::Map(m)
        }
    }
}

fn from_toml(v: &toml::Value) -> Data {
    match v {
        toml::Value::String(s) => Data::String(s.clone()),
        toml::Value::Integer(i) => Data::Int(*i),
        toml::Value::Float(f) => Data::Float(*f),
        toml::Value::Boolean(b) => Data::Bool(*b),
        toml::Value::Datetime(d) => Data::String(d.to_string()),
        toml::Value::Array(a) => Data::List(a.iter().map(from_toml).collect()),
        toml::Value::Table(t) => {
            Data::Map(t.iter().map(|(k, x)| (k.clone(), from_toml(x))).collect())
        }
    }
}
