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
    let mut sets = field_sets(entries, manager);
    let Some(first) = sets.next() else {
        return Owned { fingerprint: None };
    };
    // One entry per manager is the rule (one for its applies); several are merged.
    let merged;
    let fields = match sets.next() {
        None => first,
        Some(second) => {
            let mut all = Value::Object(Map::new());
            for f in [first, second].into_iter().chain(sets) {
                merge(&mut all, f);
            }
            merged = all;
            &merged
        }
    };
    let empty = Map::new();
    let fields = fields.as_object().unwrap_or(&empty);
    let mut out = Vec::with_capacity(1024);
    if !emit(obj, Some(fields), &mut out) {
        out.extend_from_slice(b"null");
    }
    Owned {
        fingerprint: Some(digest(&out)),
    }
}

/// The `fieldsV1` sets `manager` holds on the object itself (not on a subresource).
fn field_sets<'a>(
    entries: &'a [ManagedFieldsEntry],
    manager: &'a str,
) -> impl Iterator<Item = &'a Value> {
    entries
        .iter()
        .filter(move |e| {
            e.manager.as_deref() == Some(manager)
                && e.subresource.as_deref().unwrap_or("").is_empty()
        })
        .filter_map(|e| e.fields_v1.as_ref().map(|f| &f.0))
}

/// Whether `manager` holds any field of the object: without one, [`live`] has nothing to
/// fingerprint and the object need not be serialized for it.
pub fn holds(entries: &[ManagedFieldsEntry], manager: &str) -> bool {
    field_sets(entries, manager).next().is_some()
}

/// The field manager that owns label `key` of the object (an applying one first, when the
/// label is shared): a relabel written under its name leaves the label with that manager,
/// so the manager's [`live`] fingerprint keeps covering it (with the new value) instead of
/// losing it to whoever relabelled — a server-side applier then finds the object in place
/// once it wants that value. None when nobody owns the label.
pub fn label_owner<'a>(entries: &'a [ManagedFieldsEntry], key: &str) -> Option<&'a str> {
    let field = format!("f:{key}");
    entries
        .iter()
        .filter(|e| e.subresource.as_deref().unwrap_or("").is_empty())
        .filter(|e| {
            e.fields_v1
                .as_ref()
                .and_then(|f| f.0.get("f:metadata")?.get("f:labels")?.get(&field))
                .is_some()
        })
        .min_by_key(|e| e.operation.as_deref() != Some("Apply"))
        .and_then(|e| e.manager.as_deref())
}

/// The fingerprint `live` gives once `applied` (the object as sent, with apiVersion and
/// kind) is in place and untouched.
pub fn desired(applied: &Value) -> Fingerprint {
    let Some(map) = applied.as_object() else {
        return hash(applied);
    };
    // Identity, not fields anyone owns.
    let meta = map.get("metadata").and_then(Value::as_object).map(|m| {
        let mut m = m.clone();
        for k in [
            "name",
            "namespace",
            "uid",
            "resourceVersion",
            "generateName",
        ] {
            m.remove(k);
        }
        Value::Object(m)
    });
    let entries = map
        .iter()
        .filter(|(k, _)| *k != "apiVersion" && *k != "kind")
        .map(|(k, v)| match (k.as_str(), &meta) {
            ("metadata", Some(m)) => (k.as_str(), m, None),
            _ => (k.as_str(), v, None),
        })
        .collect();
    let mut out = Vec::with_capacity(1024);
    if !emit_map(entries, &mut out) {
        out.extend_from_slice(b"null");
    }
    digest(&out)
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

/// Writes the canonical form (keys sorted, every member and item followed by a comma) of
/// the parts of `v` that `fields` (a `fieldsV1` node; None: all of it) names, normalized as
/// the API server serializes: no nulls, no empty maps or lists. False, with nothing
/// written, when nothing is left. A node without children is owned whole (a scalar, or an
/// atomic map or list).
///
/// One pass over the live object into one buffer: the fingerprint of every watch event and
/// every write's response is computed here, and building the extracted and normalized
/// copies first was the largest allocator load of a converging operator (`perf`, see
/// BENCHMARKS.md).
fn emit(v: &Value, fields: Option<&Map<String, Value>>, out: &mut Vec<u8>) -> bool {
    let fields = fields.filter(|f| f.keys().any(|k| k != "."));
    match v {
        Value::Null => false,
        Value::Object(obj) => {
            let entries = match fields {
                None => obj.iter().map(|(k, v)| (k.as_str(), v, None)).collect(),
                Some(fields) => fields
                    .iter()
                    .filter_map(|(key, sub)| {
                        let name = key.strip_prefix("f:")?;
                        let (name, v) = obj.get_key_value(name)?;
                        Some((name.as_str(), v, Some(sub.as_object()?)))
                    })
                    .collect(),
            };
            emit_map(entries, out)
        }
        Value::Array(items) => {
            let start = out.len();
            out.push(b'[');
            let mut any = false;
            for (i, item) in items.iter().enumerate() {
                let sub = match fields {
                    None => None,
                    Some(fields) => {
                        let owned = fields
                            .iter()
                            .filter(|(k, _)| *k != ".")
                            .find(|(key, _)| item_matches(key, i, item))
                            .and_then(|(_, sub)| sub.as_object());
                        match owned {
                            Some(sub) => Some(sub),
                            None => continue,
                        }
                    }
                };
                if emit(item, sub, out) {
                    out.push(b',');
                    any = true;
                }
            }
            close(out, start, any, b']')
        }
        scalar => {
            // Writing a scalar into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut *out, scalar);
            true
        }
    }
}

/// A member of a map to write: its key, its value, and the `fieldsV1` node naming what of
/// it is owned (None: all of it).
type Member<'a> = (&'a str, &'a Value, Option<&'a Map<String, Value>>);

/// Writes a map of `(key, value, fields)` members, keys sorted; false (nothing written)
/// when every member normalizes away.
fn emit_map(mut entries: Vec<Member<'_>>, out: &mut Vec<u8>) -> bool {
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let start = out.len();
    out.push(b'{');
    let mut any = false;
    for (key, v, sub) in entries {
        let mark = out.len();
        let _ = serde_json::to_writer(&mut *out, key);
        out.push(b':');
        if emit(v, sub, out) {
            out.push(b',');
            any = true;
        } else {
            out.truncate(mark);
        }
    }
    close(out, start, any, b'}')
}

fn close(out: &mut Vec<u8>, start: usize, any: bool, end: u8) -> bool {
    if any {
        out.push(end);
    } else {
        out.truncate(start);
    }
    any
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

/// The fingerprint of a whole value, normalized.
fn hash(v: &Value) -> Fingerprint {
    let mut out = Vec::with_capacity(1024);
    if !emit(v, None, &mut out) {
        out.extend_from_slice(b"null");
    }
    digest(&out)
}

/// SHA-256 of a canonical form, cut to 16 bytes.
fn digest(canonical: &[u8]) -> Fingerprint {
    let digest = Sha256::digest(canonical);
    let mut first = [0u8; 16];
    first.copy_from_slice(&digest[..16]);
    Fingerprint::from_be_bytes(first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The fingerprint as first written here: extract the owned parts into a new value,
    /// normalize it, hash a canonical serialization. [`emit`] must agree with it exactly.
    mod reference {
        use super::super::item_matches;
        use serde_json::{Map, Value};

        pub fn extract(live: &Value, fields: &Map<String, Value>) -> Option<Value> {
            let children: Vec<(&String, &Value)> =
                fields.iter().filter(|(k, _)| *k != ".").collect();
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

        pub fn normalize(v: Value) -> Option<Value> {
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

        pub fn canonical(v: &Value, out: &mut String) {
            match v {
                Value::Object(m) => {
                    let mut keys: Vec<&String> = m.keys().collect();
                    keys.sort();
                    out.push('{');
                    for k in keys {
                        out.push_str(&serde_json::to_string(k).unwrap_or_default());
                        out.push(':');
                        canonical(&m[k], out);
                        out.push(',');
                    }
                    out.push('}');
                }
                Value::Array(a) => {
                    out.push('[');
                    for x in a {
                        canonical(x, out);
                        out.push(',');
                    }
                    out.push(']');
                }
                other => out.push_str(&other.to_string()),
            }
        }

        /// The canonical text of the parts `fields` names (None: all), normalized.
        pub fn text(v: &Value, fields: Option<&Map<String, Value>>) -> String {
            let extracted = match fields {
                Some(f) => extract(v, f),
                None => Some(v.clone()),
            };
            let mut out = String::new();
            canonical(
                extracted
                    .and_then(normalize)
                    .as_ref()
                    .unwrap_or(&Value::Null),
                &mut out,
            );
            out
        }
    }

    fn emitted(v: &Value, fields: Option<&Map<String, Value>>) -> String {
        let mut out = Vec::new();
        if !emit(v, fields, &mut out) {
            out.extend_from_slice(b"null");
        }
        String::from_utf8(out).expect("utf-8")
    }

    /// A small deterministic generator (xorshift) of JSON values and of `fieldsV1` sets
    /// over them: nulls, empty maps and lists, nested lists of maps keyed by name, sets of
    /// scalars, and field sets that name missing or non-map members.
    struct Gen(u64);

    impl Gen {
        fn next(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }

        fn value(&mut self, depth: u32) -> Value {
            let keys = ["a", "b", "name", "z", "é", "k\"q"];
            match (depth, self.next(9)) {
                (_, 0) => Value::Null,
                (_, 1) => json!(self.next(3) as i64 - 1),
                (_, 2) => json!(["x", "y", ""][self.next(3) as usize]),
                (_, 3) => json!(self.next(2) == 0),
                (0, _) => json!(1.5),
                (_, 4..=6) => {
                    let mut m = Map::new();
                    for _ in 0..self.next(4) {
                        let k = keys[self.next(keys.len() as u64) as usize];
                        m.insert(k.to_string(), self.value(depth - 1));
                    }
                    Value::Object(m)
                }
                _ => {
                    let mut items = Vec::new();
                    for i in 0..self.next(4) {
                        items.push(match self.next(3) {
                            0 => json!({"name": format!("n{}", i % 2), "v": self.value(depth - 1)}),
                            1 => json!(["p", "q"][self.next(2) as usize]),
                            _ => self.value(depth - 1),
                        });
                    }
                    Value::Array(items)
                }
            }
        }

        /// A field set for `v`: some of its members (and some absent ones) owned, whole
        /// or in part.
        fn fields(&mut self, v: &Value, depth: u32) -> Map<String, Value> {
            let mut f = Map::new();
            if self.next(4) == 0 {
                f.insert(".".into(), json!({}));
            }
            match v {
                Value::Object(m) if depth > 0 => {
                    for (k, x) in m {
                        if self.next(3) > 0 {
                            f.insert(format!("f:{k}"), Value::Object(self.fields(x, depth - 1)));
                        }
                    }
                    if self.next(5) == 0 {
                        f.insert("f:missing".into(), json!({}));
                    }
                    if self.next(7) == 0 {
                        f.insert("f:a".into(), json!("not a map"));
                    }
                }
                Value::Array(items) if depth > 0 => {
                    for (i, x) in items.iter().enumerate() {
                        let key = match (x, self.next(3)) {
                            (Value::Object(o), 0) if o.contains_key("name") => {
                                format!("k:{}", json!({"name": o["name"]}))
                            }
                            (Value::String(_), _) => format!("v:{x}"),
                            _ => format!("i:{i}"),
                        };
                        if self.next(4) > 0 {
                            f.insert(key, Value::Object(self.fields(x, depth - 1)));
                        }
                    }
                }
                _ => {}
            }
            f
        }
    }

    #[test]
    fn the_one_pass_fingerprint_agrees_with_extract_normalize_hash() {
        let mut g = Gen(0x9e37_79b9_7f4a_7c15);
        let mut compared = 0;
        for _ in 0..4000 {
            let v = g.value(4);
            let f = g.fields(&v, 4);
            assert_eq!(
                emitted(&v, Some(&f)),
                reference::text(&v, Some(&f)),
                "value {v}\nfields {}",
                Value::Object(f.clone())
            );
            assert_eq!(emitted(&v, None), reference::text(&v, None), "value {v}");
            compared += 1;
        }
        assert_eq!(compared, 4000);
        // And on the objects of the tests below.
        let f = owned_fields();
        assert_eq!(
            emitted(&live_object(), f.as_object()),
            reference::text(&live_object(), f.as_object())
        );
    }

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
    fn a_labels_owner_is_found_an_applier_first() {
        let label = |k: &str| json!({"f:metadata": {"f:labels": {format!("f:{k}"): {}}}});
        let entries = [
            entry("kubectl", "Update", label("other")),
            entry("relabeller", "Update", label("shard.bosun.dev/op")),
            entry("bosun", "Apply", label("shard.bosun.dev/op")),
        ];
        assert_eq!(label_owner(&entries, "shard.bosun.dev/op"), Some("bosun"));
        assert_eq!(
            label_owner(&entries[..2], "shard.bosun.dev/op"),
            Some("relabeller")
        );
        assert_eq!(label_owner(&entries, "other"), Some("kubectl"));
        assert_eq!(label_owner(&entries, "missing"), None);
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
        let got = reference::extract(&obj, fields.as_object().expect("map"));
        assert_eq!(got, Some(json!({"finalizers": ["b"], "l": [3]})));
        assert_eq!(
            emitted(&obj, fields.as_object()),
            r#"{"finalizers":["b",],"l":[3,],}"#
        );
    }
}
