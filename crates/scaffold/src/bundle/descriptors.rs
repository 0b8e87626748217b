//! An owned CRD's entry in the CSV, read from the CRD itself: the storage version, the kind's
//! description, a spec descriptor per top-level spec field and a status descriptor per status
//! field (conditions with OLM's conditions descriptor, so consoles show them).
use serde_json::{json, Value};

pub fn owned(crd: &Value) -> Value {
    let versions = crd["spec"]["versions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let version = versions
        .iter()
        .find(|v| v["storage"] == true)
        .or_else(|| versions.first())
        .cloned()
        .unwrap_or(Value::Null);
    owned_version(crd, &version)
}

/// An entry per served version, the stored one first, as operator-sdk lists a CRD with several
/// versions: an example of any served version is then of an owned kind.
pub fn owned_versions(crd: &Value) -> Vec<Value> {
    let mut out = vec![owned(crd)];
    for v in crd["spec"]["versions"].as_array().into_iter().flatten() {
        if v["served"] == true && v["name"] != out[0]["version"] {
            out.push(owned_version(crd, v));
        }
    }
    out
}

fn owned_version(crd: &Value, version: &Value) -> Value {
    let spec = &crd["spec"];
    let kind = spec["names"]["kind"].as_str().unwrap_or_default();
    let schema = &version["schema"]["openAPIV3Schema"];
    let description = first_sentence(schema["description"].as_str().unwrap_or_default());
    json!({
        "name": crd["metadata"]["name"],
        "version": version["name"],
        "kind": kind,
        "displayName": words(kind),
        "description": if description.is_empty() { words(kind) } else { description },
        "specDescriptors": descriptors(&schema["properties"]["spec"], false),
        "statusDescriptors": status_descriptors(version, schema),
    })
}

/// From the status schema, and — where the schema leaves status open (Helm and Ansible
/// operators) — from the printer columns that read it.
fn status_descriptors(version: &Value, schema: &Value) -> Vec<Value> {
    let mut out = descriptors(&schema["properties"]["status"], true);
    for col in version["additionalPrinterColumns"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let Some(path) = col["jsonPath"]
            .as_str()
            .and_then(|p| p.strip_prefix(".status."))
        else {
            continue;
        };
        let field: String = path
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if field.is_empty() || out.iter().any(|d| d["path"] == field.as_str()) {
            continue;
        }
        let mut d = json!({
            "path": field,
            "displayName": words(&field),
            "description": col["description"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| format!("Shown in the {} column.", col["name"].as_str().unwrap_or(&field))),
        });
        if field == "conditions" {
            d["x-descriptors"] = json!(["urn:alm:descriptor:io.kubernetes.conditions"]);
        }
        out.push(d);
    }
    out
}

fn descriptors(schema: &Value, status: bool) -> Vec<Value> {
    let Some(props) = schema["properties"].as_object() else {
        return Vec::new();
    };
    props
        .iter()
        .map(|(name, p)| {
            let mut d = json!({
                "path": name,
                "displayName": words(name),
                "description": first_sentence(p["description"].as_str().unwrap_or_default()),
            });
            if status && name == "conditions" {
                d["x-descriptors"] = json!(["urn:alm:descriptor:io.kubernetes.conditions"]);
            }
            d
        })
        .collect()
}

/// `replicaCount` / `BookStore` → `Replica Count` / `Book Store`.
pub fn words(s: &str) -> String {
    let mut out = String::new();
    let mut prev_lower = false;
    for c in s.chars() {
        if c == '_' || c == '-' {
            out.push(' ');
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower {
            out.push(' ');
        }
        if out.is_empty() || out.ends_with(' ') {
            out.extend(c.to_uppercase());
        } else {
            out.push(c);
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
    }
    out
}

fn first_sentence(s: &str) -> String {
    let s = s.trim();
    let end = s
        .find(". ")
        .map(|i| i + 1)
        .or_else(|| s.find('\n'))
        .unwrap_or(s.len());
    s[..end].trim().to_string()
}
