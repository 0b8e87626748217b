//! The custom resources as a flavour's primary cache keeps them ([`crate::Flavor::slim_primary`]):
//! the metadata, and the rest (spec and status) as its compact JSON text. A
//! `serde_json::Value` tree costs a map node per object and tens of bytes per value: the
//! seed BookStore's spec and status held ≈10 KB that way, ≈1 KB as text. A reconcile parses
//! the text back once ([`unpacked`]); the triggers' filters read only the metadata.
use std::sync::Arc;

use kube::core::DynamicObject;
use serde_json::Value;

/// kubectl's copy of the whole object as last applied, which nothing here reads.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The object as the primary cache keeps it, without kubectl's last-applied copy (for a
/// flavour that never shows the annotations to its runs' input).
pub fn pack(obj: &mut DynamicObject) {
    if let Some(a) = obj.metadata.annotations.as_mut() {
        a.remove(LAST_APPLIED);
    }
    pack_data(obj);
}

/// The object as the primary cache keeps it, every annotation included.
pub fn pack_data(obj: &mut DynamicObject) {
    if !obj.data.is_string() {
        let text = obj.data.to_string();
        obj.data = Value::String(text);
    }
}

/// The object as the API server sent it (but for what [`pack`] dropped).
pub fn unpack(obj: &DynamicObject) -> DynamicObject {
    DynamicObject {
        types: obj.types.clone(),
        metadata: obj.metadata.clone(),
        data: data(&obj.data),
    }
}

/// The object a reconcile is handed, as the API server sent it: unpacked when the cache
/// packed it, else the same object.
pub fn unpacked(obj: Arc<DynamicObject>) -> Arc<DynamicObject> {
    if obj.data.is_string() {
        Arc::new(unpack(&obj))
    } else {
        obj
    }
}

/// A packed object's data as a tree (a tree is returned as it is).
pub fn data(v: &Value) -> Value {
    match v {
        // The text is what `pack` wrote from a tree: it parses.
        Value::String(text) => serde_json::from_str(text).unwrap_or(Value::Null),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::{ApiResource, GroupVersionKind};
    use serde_json::json;

    #[test]
    fn a_packed_object_unpacks_to_what_was_read() {
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("charts.example.com", "v1", "Web"));
        let mut o = DynamicObject::new("a", &ar).within("ns");
        o.metadata.generation = Some(3);
        o.metadata.annotations = Some(
            [
                (LAST_APPLIED.to_string(), "{\"spec\":{}}".to_string()),
                (
                    "helm.sdk.operatorframework.io/upgrade-force".to_string(),
                    "true".to_string(),
                ),
            ]
            .into(),
        );
        o.data = json!({"spec": {"replicaCount": 2, "image": {"tag": "1.0"}}, "status": {"conditions": [{"type": "Deployed", "status": "True"}]}});
        let read = o.clone();
        pack(&mut o);
        assert!(o.data.is_string());
        let again = o.clone();
        pack(&mut o);
        assert_eq!(o.data, again.data, "packing twice changes nothing");
        let back = unpack(&o);
        assert_eq!(back.data, read.data);
        assert_eq!(back.metadata.generation, Some(3));
        let annotations = back.metadata.annotations.unwrap_or_default();
        assert!(!annotations.contains_key(LAST_APPLIED));
        assert!(annotations.contains_key("helm.sdk.operatorframework.io/upgrade-force"));
        assert_eq!(
            unpack(&read).data,
            read.data,
            "an unpacked object is left as it is"
        );
    }

    /// The Ansible flavour hands the role the whole object: packing its data keeps every
    /// annotation, and `unpacked` gives back what was read.
    #[test]
    fn packing_the_data_alone_keeps_every_annotation() {
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(
            "cache.example.com",
            "v1",
            "Memcached",
        ));
        let mut o = DynamicObject::new("m", &ar).within("ns");
        o.metadata.annotations = Some([(LAST_APPLIED.to_string(), "{}".to_string())].into());
        o.data = json!({"spec": {"size": 3}});
        let read = o.clone();
        pack_data(&mut o);
        assert!(o.data.is_string());
        let back = unpacked(Arc::new(o));
        assert_eq!(back.data, read.data);
        assert_eq!(back.metadata.annotations, read.metadata.annotations);
        let same = Arc::new(read.clone());
        assert!(
            Arc::ptr_eq(&unpacked(same.clone()), &same),
            "an unpacked object is not copied"
        );
    }
}
