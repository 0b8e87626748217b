//! `values.schema.json` validation, chart by chart as Helm's `ValidateAgainstSchema`
//! does (each subchart against its own values), with Helm's error layout:
//! `values don't meet the specifications of the schema(s) in the following chart(s):`
//! then `chart:` and one `- at '<path>': <problem>` line per violation. The problem
//! texts come from the `jsonschema` crate and are worded differently from Helm's.
use super::tree::EffChart;
use crate::value::{json, Map, MapKind, Value};

pub fn validate_tree(ch: &EffChart, vals: &Map) -> Result<(), String> {
    let mut report = String::new();
    walk(ch, vals, &mut report);
    if report.is_empty() {
        return Ok(());
    }
    Err(format!(
        "values don't meet the specifications of the schema(s) in the following chart(s):\n{report}"
    ))
}

fn walk(ch: &EffChart, vals: &Map, report: &mut String) {
    if let Some(schema) = &ch.node.schema {
        if let Err(e) = validate(schema, vals) {
            report.push_str(&format!("{}:\n{e}", ch.name));
        }
    }
    for d in &ch.deps {
        let sub = match vals.get(&d.name) {
            Some(Value::Map(m)) => m,
            _ => Map::new(MapKind::Iface),
        };
        walk(d, &sub, report);
    }
}

fn validate(schema: &[u8], vals: &Map) -> Result<(), String> {
    let schema: serde_json::Value = serde_json::from_slice(schema)
        .map_err(|e| format!("- invalid values.schema.json: {e}\n"))?;
    let doc = json::marshal(&Value::Map(vals.clone())).map_err(|e| format!("- {}\n", e.0))?;
    let doc: serde_json::Value = serde_json::from_str(&doc).map_err(|e| format!("- {e}\n"))?;
    let v = jsonschema::validator_for(&schema)
        .map_err(|e| format!("- invalid values.schema.json: {e}\n"))?;
    let mut out = String::new();
    for e in v.iter_errors(&doc) {
        let path = e.instance_path().to_string();
        out.push_str(&format!(
            "- at '{}': {}\n",
            if path.is_empty() { "" } else { &path },
            e
        ));
    }
    if out.is_empty() {
        Ok(())
    } else {
        Err(out)
    }
}
