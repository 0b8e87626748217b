//! The cluster reads behind the `lookup` template function.
//!
//! `helm template` (and a render with no [`Lookup`]) gives every `lookup` an empty map.
//! A caller with a cluster supplies a [`Lookup`] in
//! [`RenderOptions::lookup`](super::RenderOptions::lookup); the engine then keeps Helm's
//! rules (`pkg/engine/lookup_func.go`): a missing object is an empty map, so templates
//! can write `if not (lookup ...)`; any other failure stops the render with
//! `error calling lookup: <message>`.
use std::sync::Arc;

use crate::value::Data;

/// Reads one object, or lists objects, from the cluster for `lookup`.
///
/// `lookup apiVersion kind namespace name` calls [`Lookup::lookup`] with those four
/// strings. The implementation does what Helm's does with a dynamic client:
/// * `name` not empty: GET the object; `namespace` is ignored for cluster-scoped kinds;
/// * `name` empty: LIST, in `namespace` for a namespaced kind when it is not empty, else
///   across the cluster; return the list as the API server sends it
///   (`{"apiVersion", "kind": "<Kind>List", "metadata", "items"}`) — the engine fills in
///   each item's `apiVersion` and `kind` when absent, as client-go's unstructured
///   decoder does;
/// * a 404 (the object, or the kind, is not there): `Ok(None)`, which the template sees
///   as an empty map;
/// * anything else (forbidden, unreachable, an unknown group/version): `Err(message)`,
///   which fails the render. The message must not hold secret values.
///
/// Numbers keep the API server's kinds ([`Data::Int`] for integral JSON numbers,
/// [`Data::Float`] otherwise): `Data::from(&serde_json::Value)` or
/// [`Data::from_json_k8s`] convert a response body that way.
pub trait Lookup: Send + Sync {
    fn lookup(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Data>, String>;
}

/// A shared [`Lookup`], as [`RenderOptions::lookup`](super::RenderOptions::lookup) holds it.
pub type SharedLookup = Arc<dyn Lookup>;

/// What the template receives for a [`Lookup`] answer to `lookup ... name`.
pub(crate) fn answer(
    found: Result<Option<Data>, String>,
    name: &str,
    kind: &str,
) -> Result<Data, String> {
    let Some(data) = found? else {
        return Ok(Data::Map(Default::default()));
    };
    let Data::Map(mut obj) = data else {
        return Err(format!(
            "the cluster answered lookup of {kind} {name:?} with something other than an object"
        ));
    };
    if name.is_empty() {
        fill_item_types(&mut obj);
    }
    Ok(Data::Map(obj))
}

/// client-go's unstructured list decoding: items without `apiVersion` and `kind` get the
/// list's `apiVersion` and its kind without the `List` suffix.
fn fill_item_types(list: &mut std::collections::BTreeMap<String, Data>) {
    let api_version = list
        .get("apiVersion")
        .and_then(Data::as_str)
        .map(String::from);
    let item_kind = list
        .get("kind")
        .and_then(Data::as_str)
        .map(|k| k.strip_suffix("List").unwrap_or(k).to_string());
    let Some(Data::List(items)) = list.get_mut("items") else {
        return;
    };
    for item in items {
        let Data::Map(m) = item else { continue };
        let has = |k: &str| {
            m.get(k)
                .and_then(Data::as_str)
                .is_some_and(|s| !s.is_empty())
        };
        if has("kind") || has("apiVersion") {
            continue;
        }
        if let Some(k) = &item_kind {
            m.insert("kind".into(), Data::String(k.clone()));
        }
        if let Some(v) = &api_version {
            m.insert("apiVersion".into(), Data::String(v.clone()));
        }
    }
}

impl From<&serde_json::Value> for Data {
    /// A JSON body from the API server: integral numbers that fit are `int64`, others
    /// `float64`, as Kubernetes' unstructured JSON decoding gives them.
    fn from(v: &serde_json::Value) -> Data {
        match v {
            serde_json::Value::Null => Data::Null,
            serde_json::Value::Bool(b) => Data::Bool(*b),
            serde_json::Value::Number(n) => match n.as_i64() {
                Some(i) => Data::Int(i),
                None => Data::Float(n.as_f64().unwrap_or(0.0)),
            },
            serde_json::Value::String(s) => Data::String(s.clone()),
            serde_json::Value::Array(a) => Data::List(a.iter().map(Data::from).collect()),
            serde_json::Value::Object(o) => {
                Data::Map(o.iter().map(|(k, v)| (k.clone(), Data::from(v))).collect())
            }
        }
    }
}

impl std::fmt::Debug for dyn Lookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<lookup>")
    }
}
