//! The CRD of a chart-backed kind, so that `kubectl explain` shows the values and the API
//! server refuses a value of the wrong type before a render does. operator-sdk scaffolds an
//! open spec (`x-kubernetes-preserve-unknown-fields` and nothing else).
//!
//! The spec's schema comes from the chart's `values.schema.json` when it has one (JSON
//! Schema turned into a structural OpenAPI v3 schema: what Kubernetes cannot express —
//! `$ref`, `oneOf`/`anyOf`/`allOf`, `patternProperties`, `if` — leaves that node open),
//! else it is inferred from values.yaml ([`bosun_watches::schema`], shared with the Ansible
//! flavour, which infers from a role's defaults): each key typed as its default, its default
//! in the description, every object open to keys the chart does not list (subchart values, extra
//! labels), and every field nullable (a `null` removes the chart's default, as in Helm).
use bosun_helm::value::Data;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::core::GroupVersionKind;
use serde_json::{json, Map, Value};

// Inferring a schema from default values is shared with the Ansible flavour.
use bosun_watches::schema::{open_object, spec_of_defaults, OPEN};

/// `kind` → plural as operator-sdk's scaffolding (flect) does for common English.
pub use bosun_watches::kinds::plural;

/// A chart value as JSON.
pub fn data_json(d: &Data) -> Value {
    match d {
        Data::Null => Value::Null,
        Data::Bool(b) => json!(b),
        Data::Int(i) => json!(i),
        Data::Float(f) => serde_json::Number::from_f64(*f)
            .map(Value::Number)
            .unwrap_or(Value::Null),
        Data::String(s) => json!(s),
        Data::List(l) => Value::Array(l.iter().map(data_json).collect()),
        Data::Map(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), data_json(v))).collect()),
    }
}

/// A JSON Schema (draft 4-7, as `values.schema.json` is written) as a structural OpenAPI v3
/// schema.
pub fn from_json_schema(s: &Value) -> Value {
    let Some(src) = s.as_object() else {
        return json!({ OPEN: true });
    };
    let mut out = Map::new();
    let unsupported = [
        "$ref",
        "oneOf",
        "anyOf",
        "allOf",
        "not",
        "if",
        "patternProperties",
    ];
    let mut open = unsupported.iter().any(|k| src.contains_key(*k));
    match src.get("type") {
        Some(Value::String(t)) if t != "null" => {
            out.insert("type".into(), json!(t));
        }
        Some(Value::Array(ts)) => {
            let real: Vec<&str> = ts
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| *t != "null")
                .collect();
            if ts.iter().any(|t| t == "null") {
                out.insert("nullable".into(), json!(true));
            }
            match real.as_slice() {
                [one] => {
                    out.insert("type".into(), json!(one));
                }
                _ => open = true,
            }
        }
        _ => open = true,
    }
    for key in [
        "description",
        "enum",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "uniqueItems",
        "minProperties",
        "maxProperties",
        "multipleOf",
    ] {
        if let Some(v) = src.get(key) {
            out.insert(key.into(), v.clone());
        }
    }
    // Draft 6+ exclusive bounds are numbers; OpenAPI v3 wants a bool beside the bound.
    for (ex, bound) in [
        ("exclusiveMinimum", "minimum"),
        ("exclusiveMaximum", "maximum"),
    ] {
        match src.get(ex) {
            Some(Value::Bool(b)) => {
                out.insert(ex.into(), json!(b));
            }
            Some(n @ Value::Number(_)) => {
                out.insert(bound.into(), n.clone());
                out.insert(ex.into(), json!(true));
            }
            _ => {}
        }
    }
    if let Some(Value::String(f)) = src.get("format") {
        if [
            "int32",
            "int64",
            "float",
            "double",
            "byte",
            "date",
            "date-time",
            "password",
            "uri",
            "email",
            "hostname",
            "ipv4",
            "ipv6",
            "uuid",
        ]
        .contains(&f.as_str())
        {
            out.insert("format".into(), json!(f));
        }
    }
    let is_object = out.get("type") == Some(&json!("object"));
    if let Some(Value::Object(props)) = src.get("properties") {
        let p: Map<String, Value> = props
            .iter()
            .map(|(k, v)| (k.clone(), from_json_schema(v)))
            .collect();
        out.insert("properties".into(), Value::Object(p));
    }
    if let Some(req) = src.get("required").and_then(Value::as_array) {
        if !req.is_empty() {
            out.insert("required".into(), Value::Array(req.clone()));
        }
    }
    if let Some(items) = src.get("items") {
        out.insert(
            "items".into(),
            if items.is_object() {
                from_json_schema(items)
            } else {
                json!({ OPEN: true })
            },
        );
    } else if out.get("type") == Some(&json!("array")) {
        out.insert("items".into(), json!({ OPEN: true }));
    }
    match src.get("additionalProperties") {
        Some(Value::Bool(false)) => {}
        Some(v @ Value::Object(_)) if !src.contains_key("properties") => {
            out.insert("additionalProperties".into(), from_json_schema(v));
        }
        _ if is_object || open => {
            out.insert(OPEN.into(), json!(true));
        }
        _ => {}
    }
    if open {
        out.remove("type");
        out.remove("properties");
        out.remove("items");
        out.remove("additionalProperties");
        out.insert(OPEN.into(), json!(true));
    }
    Value::Object(out)
}

/// The CRD for `gvk`, with `spec` described by `spec_schema`.
pub fn crd(
    gvk: &GroupVersionKind,
    spec_schema: Value,
    description: &str,
) -> Result<CustomResourceDefinition, serde_json::Error> {
    let plural = plural(&gvk.kind);
    let mut spec = spec_schema;
    if let Some(o) = spec.as_object_mut() {
        o.insert("description".into(), json!(description));
        o.remove("nullable");
    }
    let status = json!({
        "type": "object", OPEN: true,
        "description": "Written by bosun: conditions (Initialized, Deployed, ReleaseFailed, Irreconcilable, Ready), the deployed release and its revision."
    });
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{}", gvk.group)},
        "spec": {
            "group": gvk.group,
            "names": {"kind": gvk.kind, "listKind": format!("{}List", gvk.kind), "plural": plural, "singular": gvk.kind.to_lowercase()},
            "scope": "Namespaced",
            "versions": [{
                "name": gvk.version, "served": true, "storage": true,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
                    {"name": "Revision", "type": "integer", "jsonPath": ".status.deployedRelease.revision"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
                ],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": format!("{}: a release of a Helm chart run by bosun", gvk.kind),
                    "properties": {"spec": spec, "status": status}
                }}
            }]
        }
    });
    serde_json::from_value(crd)
}

/// The spec schema of a chart: its `values.schema.json`, else inferred from its values.
pub fn spec_schema(values: &Data, json_schema: Option<&Value>) -> Value {
    match json_schema {
        Some(s) => open_object(from_json_schema(s)),
        None => spec_of_defaults(&data_json(values)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plurals() {
        for (k, p) in [
            ("BookStore", "bookstores"),
            ("Policy", "policies"),
            ("Gateway", "gateways"),
            ("Ingress", "ingresses"),
            ("Box", "boxes"),
            ("Memcached", "memcacheds"),
        ] {
            assert_eq!(plural(k), p);
        }
    }

    #[test]
    fn json_schema_becomes_structural() {
        let js = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "required": ["image"],
            "properties": {
                "image": {"type": "object", "additionalProperties": false, "properties": {"tag": {"type": ["string", "null"], "pattern": "^v"}}},
                "replicas": {"type": "integer", "minimum": 1, "exclusiveMaximum": 10},
                "any": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}}
            }
        });
        let s = from_json_schema(&js);
        assert!(s.get("$schema").is_none());
        assert_eq!(s["required"], json!(["image"]));
        assert_eq!(
            s["properties"]["image"].get(OPEN),
            None,
            "additionalProperties: false stays closed"
        );
        assert_eq!(
            s["properties"]["image"]["properties"]["tag"],
            json!({"type": "string", "nullable": true, "pattern": "^v"})
        );
        assert_eq!(s["properties"]["replicas"]["maximum"], 10);
        assert_eq!(s["properties"]["replicas"]["exclusiveMaximum"], true);
        assert_eq!(s["properties"]["any"][OPEN], true);
        assert!(s["properties"]["any"].get("type").is_none());
        assert_eq!(
            s["properties"]["labels"]["additionalProperties"]["type"],
            "string"
        );
    }

    #[test]
    fn crd_has_status_and_columns() {
        let c = crd(
            &GroupVersionKind::gvk("charts.example.com", "v1alpha1", "BookStore"),
            spec_of_defaults(&json!({})),
            "values",
        )
        .expect("crd");
        assert_eq!(
            c.metadata.name.as_deref(),
            Some("bookstores.charts.example.com")
        );
        let v = &c.spec.versions[0];
        assert!(v
            .subresources
            .as_ref()
            .and_then(|s| s.status.as_ref())
            .is_some());
        let cols: Vec<&str> = v
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(cols, ["Ready", "Revision", "Age"]);
    }
}
