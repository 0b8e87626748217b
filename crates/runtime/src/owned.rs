//! What a field manager holds on a live object, summed up in 16 bytes — how the applier sees
//! drift without keeping whole objects in memory.
//!
//! Server-side apply records, per field manager, the set of fields it owns (`managedFields`,
//! `fieldsV1`). Anyone else who changes one of them — `kubectl set image`, `kubectl edit`, a
//! label removed, an owner reference dropped — takes the field away from it (or removes it).
//! So the live values at the fields bosun owns equal its desired object exactly when nobody
//! has touched what bosun wrote. [`live`] extracts those values from a live object and
//! hashes them; [`desired`] hashes the desired object the same way. Equal fingerprints: in
//! place. The watch caches compute the live fingerprint when an object arrives (the full
//! object and its `managedFields` are at hand then) and keep only these 16 bytes per object
//! (see [`crate::cache`]); the cached metadata they hand out carries it as a one-entry
//! `managedFields` summary ([`keep_summary`], [`summary`]).
//!
//! Both sides are normalized the way the API server serializes: no nulls, no empty maps or
//! lists. A value the server rewrites (a quantity in another spelling, say) makes the
//! fingerprints differ on first sight; the applier then writes once and remembers the
//! fingerprint its own write produced.
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry, ObjectMeta};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// Marks the one summary entry a fingerprinting cache keeps in `managedFields`.
pub const SUMMARY_TYPE: &str = "bosun.dev/owned-fingerprint";

/// 16 bytes of SHA-256.
pub type Fingerprint = u128;

/// What one field manager holds on a cached object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owned {
    /// Fingerprint of the live values at the fields it owns; None when it owns nothing.
    pub fingerprint: Option<Fingerprint>,
}

/// Sums up `manager`'s ownership of `obj` (serialized, with its `managedFields`).
pub fn live(obj: &Value, entries: &[ManagedFieldsEntry], manager: &str) -> Owned {
    let mut fields = Value::Object(Map::new());
    let mut any = false;
    for e in entries {
        if e.manager.as_deref() != Some(manager)
            || !e.subresource.as_deref().unwrap_or("").is_empty()
        {
            continue;
        }
        let Some(f) = e.fields_v1.as_ref() else {
            continue;
        };
        any = true;
        merge(&mut fields, &f.0);
    }
    let fingerprint = any.then(|| {
        let fields = fields.as_object().cloned().unwrap_or_default();
        let extracted = extract(obj, &fields).and_then(normalize);
        hash(extracted.as_ref().unwrap_or(&Value::Null))
    });
    Owned { fingerprint }
}

/// The fingerprint `live` gives once `applied` (the object as sent, with apiVersion and
/// kind) is in place and untouched.
pub fn desired(applied: &Value) -> Fingerprint {
    let mut v = applied.clone();
    if let Some(map) = v.as_object_mut() {
        // Identity, not fields anyone owns.
        map.remove("apiVersion");
        map.remove("kind");
        if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
            for k in [
                "name",
                "namespace",
                "uid",
                "resourceVersion",
                "generateName",
            ] {
                meta.remove(k);
            }
        }
    }
    hash(normalize(v).as_ref().unwrap_or(&Value::Null))
}

/// A UID as 128 bits (a UUID's own bits; any other string hashed): how caches and the
/// applier key objects compactly.
pub fn uid_bits(uid: &str) -> u128 {
    let hex: String = uid.chars().filter(|c| *c != '-').collect();
    match (hex.len(), u128::from_str_radix(&hex, 16)) {
        (32, Ok(v)) => v,
        _ => {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            uid.hash(&mut h);
            u128::from(h.finish())
        }
    }
}

/// Replaces the `managedFields` of a cached object with `manager`'s summary.
pub fn keep_summary(meta: &mut ObjectMeta, manager: &str, owned: Owned) {
    meta.managed_fields = Some(vec![ManagedFieldsEntry {
        manager: Some(manager.to_string()),
        fields_type: Some(SUMMARY_TYPE.to_string()),
        fields_v1: owned
            .fingerprint
            .map(|f| FieldsV1(Value::String(format!("{f:032x}")))),
        ..Default::default()
    }]);
}

/// The summary a fingerprinting cache kept for `manager`, if it keeps one.
pub fn summary(meta: &ObjectMeta, manager: &str) -> Option<Owned> {
    let e = meta.managed_fields.as_ref()?.iter().find(|e| {
        e.fields_type.as_deref() == Some(SUMMARY_TYPE) && e.manager.as_deref() == Some(manager)
    })?;
    Some(Owned {
        fingerprint: e
            .fields_v1
            .as_ref()
            .and_then(|f| f.0.as_str())
            .and_then(|h| Fingerprint::from_str_radix(h, 16).ok()),
    })
}

/// Deep union of two `fieldsV1` sets.
pub fn merge(into: &mut Value, from: &Value) {
    let (Some(into), Some(from)) = (into.as_object_mut(), from.as_object()) else {
        return;
    };
    for (k, v) in from {
        match into.get_mut(k) {
            Some(existing) => merge(existing, v),
            None => {
                into.insert(k.clone(), v.clone());
            }
        }
    }
}

/// The parts of `live` that `fields` (a `fieldsV1` node) names. A node without children is
/// owned whole (a scalar, or an atomic map or list).
fn extract(live: &Value, fields: &Map<String, Value>) -> Option<Value> {
    let children: Vec<(&String, &Value)> = fields.iter().filter(|(k, _)| *k != ".").collect();
    if children.is_empty() {
        return Some(live.clone());
    }
    match live {
        Value::Object(obj) => {
            let mut out = Map::new();
            for (key, sub) in children {
                let Some(name) = key.strip_prefix("f:") else {
                    continue;
                };
                let (Some(v), Some(sub)) = (obj.get(name), sub.as_object()) else {
                    continue;
                };
                if let Some(x) = extract(v, sub) {
                    out.insert(name.to_string(), x);
                }
            }
            Some(Value::Object(out))
        }
        Value::Array(items) => {
            let mut out = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let owned = children
                    .iter()
                    .find(|(key, _)| item_matches(key, i, item))
                    .and_then(|(_, sub)| sub.as_object());
                if let Some(x) = owned.and_then(|sub| extract(item, sub)) {
                    out.push(x);
                }
            }
            Some(Value::Array(out))
        }
        other => Some(other.clone()),
    }
}

/// Whether a list item is the one a `k:`, `v:` or `i:` key of `fieldsV1` names.
fn item_matches(key: &str, index: usize, item: &Value) -> bool {
    if let Some(k) = key.strip_prefix("k:") {
        let Ok(Value::Object(want)) = serde_json::from_str::<Value>(k) else {
            return false;
        };
        want.iter().all(|(f, v)| item.get(f) == Some(v))
    } else if let Some(v) = key.strip_prefix("v:") {
        serde_json::from_str::<Value>(v).is_ok_and(|v| &v == item)
    } else if let Some(i) = key.strip_prefix("i:") {
        i.parse::<usize>() == Ok(index)
    } else {
        false
    }
}

/// Drops nulls and empty maps and lists, as the API server's serialization does.
fn normalize(v: Value) -> Option<Value> {
    match v {
        Value::Null => None,
        Value::Object(m) => {
            let m: Map<String, Value> = m
                .into_iter()
                .filter_map(|(k, v)| normalize(v).map(|v| (k, v)))
                .collect();
            (!m.is_empty()).then_some(Value::Object(m))
        }
        Value::Array(a) => {
            let a: Vec<Value> = a.into_iter().filter_map(normalize).collect();
            (!a.is_empty()).then_some(Value::Array(a))
        }
        other => Some(other),
    }
}

/// SHA-256 of a canonical serialization (keys sorted), cut to 16 bytes.
fn hash(v: &Value) -> Fingerprint {
    let mut h = Sha256::new();
    canonical(v, &mut h);
    let digest = h.finalize();
    let mut first = [0u8; 16];
    first.copy_from_slice(&digest[..16]);
    Fingerprint::from_be_bytes(first)
}

fn canonical(v: &Value, h: &mut Sha256) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            h.update(b"{");
            for k in keys {
                h.update(serde_json::to_string(k).unwrap_or_default().as_bytes());
                h.update(b":");
                canonical(&m[k], h);
                h.update(b",");
            }
            h.update(b"}");
        }
        Value::Array(a) => {
            h.update(b"[");
            for x in a {
                canonical(x, h);
                h.update(b",");
            }
            h.update(b"]");
        }
        other => h.update(other.to_string().as_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(manager: &str, op: &str, fields: Value) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some(op.into()),
            fields_v1: Some(FieldsV1(fields)),
            ..Default::default()
        }
    }

    fn applied() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "ns", "labels": {"app": "a"},
                         "ownerReferences": [{"uid": "u1", "kind": "BookStore", "name": "s", "apiVersion": "x/v1", "controller": true}]},
            "spec": {"replicas": 1, "template": {"spec": {
                "containers": [{"name": "c", "image": "i:1", "args": ["a", "b"], "env": []}]}}}
        })
    }

    /// What the API server records for `applied()` (dropping the empty env list).
    fn owned_fields() -> Value {
        json!({
            "f:metadata": {"f:labels": {"f:app": {}}, "f:ownerReferences": {
                "k:{\"uid\":\"u1\"}": {".": {}, "f:uid": {}, "f:kind": {}, "f:name": {}, "f:apiVersion": {}, "f:controller": {}}}},
            "f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
                "k:{\"name\":\"c\"}": {".": {}, "f:name": {}, "f:image": {}, "f:args": {}}}}}}
        })
    }

    fn live_object() -> Value {
        let mut v = applied();
        // Server-side: identity, defaults and other managers' fields.
        v["metadata"]["uid"] = json!("x");
        v["metadata"]["resourceVersion"] = json!("7");
        v["metadata"]["labels"]["other"] = json!("theirs");
        v["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = json!("Always");
        v["spec"]["template"]["spec"]["containers"]
            .as_array_mut()
            .expect("list")
            .push(json!({"name": "sidecar", "image": "s"}));
        v["status"] = json!({"replicas": 1});
        v
    }

    #[test]
    fn untouched_live_object_matches_the_desired_one() {
        let entries = [
            entry("bosun", "Apply", owned_fields()),
            entry("kcm", "Update", json!({"f:status": {"f:replicas": {}}})),
        ];
        let got = live(&live_object(), &entries, "bosun");
        assert_eq!(got.fingerprint, Some(desired(&applied())));
        assert_eq!(live(&live_object(), &entries, "nobody").fingerprint, None);
    }

    #[test]
    fn edits_by_others_change_the_fingerprint() {
        let want = desired(&applied());
        let fp = |obj: &Value, fields: Value| {
            live(obj, &[entry("bosun", "Apply", fields)], "bosun").fingerprint
        };
        // `kubectl set image`: the image changed and left bosun's set.
        let mut obj = live_object();
        obj["spec"]["template"]["spec"]["containers"][0]["image"] = json!("evil");
        let mut fields = owned_fields();
        fields["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"c\"}"]
            .as_object_mut()
            .expect("item")
            .remove("f:image");
        assert_ne!(fp(&obj, fields), Some(want));
        // A label removed.
        let mut obj = live_object();
        obj["metadata"]["labels"]
            .as_object_mut()
            .expect("labels")
            .remove("app");
        let mut fields = owned_fields();
        fields["f:metadata"]["f:labels"] = json!({});
        assert_ne!(fp(&obj, fields), Some(want));
        // The owner reference removed.
        let mut obj = live_object();
        obj["metadata"]
            .as_object_mut()
            .expect("meta")
            .remove("ownerReferences");
        let mut fields = owned_fields();
        fields["f:metadata"]
            .as_object_mut()
            .expect("meta")
            .remove("f:ownerReferences");
        assert_ne!(fp(&obj, fields), Some(want));
        // Status changes and other managers' fields do not count.
        let mut obj = live_object();
        obj["status"]["replicas"] = json!(3);
        obj["metadata"]["labels"]["more"] = json!("x");
        assert_eq!(fp(&obj, owned_fields()), Some(want));
    }

    #[test]
    fn the_summary_round_trips_through_metadata() {
        let mut meta = ObjectMeta::default();
        let owned = Owned {
            fingerprint: Some(0xabc),
        };
        keep_summary(&mut meta, "bosun", owned);
        assert_eq!(summary(&meta, "bosun"), Some(owned));
        assert_eq!(summary(&meta, "other"), None);
        assert_eq!(summary(&ObjectMeta::default(), "bosun"), None);
    }

    #[test]
    fn set_and_index_items() {
        let obj = json!({"finalizers": ["a", "b"], "l": [1, 2, 3]});
        let fields = json!({"f:finalizers": {"v:\"b\"": {}}, "f:l": {"i:2": {}}});
        let got = extract(&obj, fields.as_object().expect("map"));
        assert_eq!(got, Some(json!({"finalizers": ["b"], "l": [3]})));
    }
}
