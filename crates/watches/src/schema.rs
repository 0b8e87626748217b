//! The schema of a custom resource's spec inferred from default values — a Helm chart's
//! values.yaml, an Ansible role's defaults/main.yml — shared by both flavours so that the
//! same default gives the same schema: each key typed as its default, its default in the
//! description, every object open to keys the defaults do not list (subchart values, extra
//! labels, vars a role reads without a default), and every field nullable (a `null` removes
//! a chart's default, as in Helm). The result is structural, as the API server requires.
use serde_json::{json, Map, Value};

/// Keeps the fields a schema does not list (`x-kubernetes-preserve-unknown-fields`).
pub const OPEN: &str = "x-kubernetes-preserve-unknown-fields";

/// "Default: <the value as JSON>", cut to 120 characters.
pub fn describe_default(v: &Value) -> String {
    let mut s = serde_json::to_string(v).unwrap_or_default();
    if s.len() > 120 {
        let mut cut = 117;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("...");
    }
    format!("Default: {s}")
}

/// The schema of a value inferred from its default.
pub fn infer(v: &Value) -> Value {
    let mut s = match v {
        Value::Null => json!({ OPEN: true }),
        Value::Bool(_) => json!({"type": "boolean"}),
        Value::Number(n) if n.is_i64() || n.is_u64() => json!({"type": "integer"}),
        Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => {
            // values.yaml numbers are float64 in Helm; a whole one is meant as an integer
            // often (replicas, ports) but may be given as 1.5 elsewhere: accept both.
            json!({"type": "number"})
        }
        Value::Number(_) => json!({"type": "number"}),
        Value::String(_) => json!({"type": "string"}),
        Value::Array(items) => {
            let first = items.first().map(infer);
            let same = first
                .as_ref()
                .is_some_and(|f| items.iter().all(|i| infer(i).get("type") == f.get("type")));
            let item = match first {
                Some(f) if same && f.get("type").is_some() => strip_description(f),
                _ => json!({ OPEN: true }),
            };
            json!({"type": "array", "items": item})
        }
        Value::Object(m) => {
            let props: Map<String, Value> = m.iter().map(|(k, v)| (k.clone(), infer(v))).collect();
            let mut o = json!({"type": "object", OPEN: true});
            if !props.is_empty() {
                o["properties"] = Value::Object(props);
            }
            o
        }
    };
    if let Some(o) = s.as_object_mut() {
        o.insert("description".into(), json!(describe_default(v)));
        o.insert("nullable".into(), json!(true));
    }
    s
}

fn strip_description(mut v: Value) -> Value {
    if let Some(o) = v.as_object_mut() {
        o.remove("description");
        o.remove("nullable");
    }
    v
}

/// The schema of a spec whose defaults are `defaults` (an object: its keys are the spec's
/// properties): [`infer`]red, and an open object whatever the defaults are.
pub fn spec_of_defaults(defaults: &Value) -> Value {
    open_object(infer(defaults))
}

/// `schema` made an object open to unknown keys (the spec of a chart or role always is).
pub fn open_object(mut schema: Value) -> Value {
    if let Some(o) = schema.as_object_mut() {
        o.insert("type".into(), json!("object"));
        o.insert(OPEN.into(), json!(true));
    }
    schema
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inferred_schema_types_defaults_and_stays_open() {
        let values = json!({"replicaCount": 1.0, "image": {"app": {"tag": "latest"}}, "nodeSelector": {}, "tolerations": [], "ports": [80, 443], "enabled": true, "maybe": null});
        let s = infer(&values);
        assert_eq!(s["type"], "object");
        assert_eq!(s[OPEN], true);
        let p = &s["properties"];
        assert_eq!(p["replicaCount"]["type"], "number");
        assert_eq!(p["replicaCount"]["description"], "Default: 1.0");
        assert_eq!(
            p["image"]["properties"]["app"]["properties"]["tag"]["type"],
            "string"
        );
        assert_eq!(p["nodeSelector"][OPEN], true);
        assert_eq!(p["tolerations"]["items"][OPEN], true);
        assert_eq!(p["ports"]["items"]["type"], "integer");
        assert_eq!(p["enabled"]["nullable"], true);
        assert_eq!(p["maybe"][OPEN], true);
    }

    #[test]
    fn a_spec_is_an_open_object_whatever_its_defaults() {
        for defaults in [json!({}), json!(null), json!({"a": 1})] {
            let s = spec_of_defaults(&defaults);
            assert_eq!(s["type"], "object", "{defaults}");
            assert_eq!(s[OPEN], true, "{defaults}");
        }
    }
}
