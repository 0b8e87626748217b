//! Server-side apply with one stable field manager, and no request at all when the desired
//! object is already what the cluster holds.
//!
//! Children are cached as metadata only (≈1.6 KB each instead of ≈6 KB for full objects), so
//! the comparison cannot look at specs. Instead every applied object carries a hash of its
//! desired state in the `bosun.dev/applied-hash` annotation, and the applier remembers the
//! `metadata.generation` (or, for kinds without one, the `resourceVersion`) that its own apply
//! returned. A write is skipped when the cached metadata shows the same hash and that marker
//! has not moved since; a moved marker means someone else edited the object, so it is
//! re-applied. After a restart nothing is remembered: a matching hash is trusted, which is what
//! makes a restart over converged objects free of writes.
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::Status;
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::json;
use sha2::{Digest, Sha256};

pub const HASH_ANNOTATION: &str = "bosun.dev/applied-hash";

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    kind: String,
    namespace: String,
    name: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Applied {
    hash: String,
    marker: String,
}

/// What [`Applier::apply`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The cache showed the desired state in place; no request was sent.
    Unchanged,
    /// A server-side apply PATCH was sent.
    Applied,
}

#[derive(Clone)]
pub struct Applier {
    field_manager: String,
    memo: Arc<Mutex<HashMap<Key, Applied>>>,
}

/// The hash of a desired object, as stored in [`HASH_ANNOTATION`].
pub fn desired_hash<K: Serialize>(obj: &K) -> Result<String, serde_json::Error> {
    let bytes = serde_json::to_vec(obj)?;
    Ok(hex::encode(&Sha256::digest(&bytes)[..12]))
}

fn marker(meta: &ObjectMeta) -> String {
    match meta.generation {
        Some(g) if g > 0 => format!("g{g}"),
        _ => format!("rv{}", meta.resource_version.as_deref().unwrap_or("")),
    }
}

impl Applier {
    pub fn new(field_manager: impl Into<String>) -> Self {
        Applier {
            field_manager: field_manager.into(),
            memo: Arc::default(),
        }
    }

    pub fn field_manager(&self) -> &str {
        &self.field_manager
    }

    fn key<K: Resource>(obj: &K, dyntype: &K::DynamicType) -> Key {
        Key {
            kind: K::kind(dyntype).to_string(),
            namespace: obj.namespace().unwrap_or_default(),
            name: obj.name_any(),
        }
    }

    /// Decides from cached metadata whether `desired` (hash `hash`) needs a write.
    fn is_current<K: Resource>(
        &self,
        desired: &K,
        dyntype: &K::DynamicType,
        hash: &str,
        cached: Option<&ObjectMeta>,
    ) -> bool {
        let Some(cached) = cached else { return false };
        if cached.deletion_timestamp.is_some() {
            return false;
        }
        if cached
            .annotations
            .as_ref()
            .and_then(|a| a.get(HASH_ANNOTATION))
            .map(String::as_str)
            != Some(hash)
        {
            return false;
        }
        let key = Self::key(desired, dyntype);
        let mut memo = self.memo.lock().unwrap_or_else(|e| e.into_inner());
        match memo.get(&key) {
            Some(prev) if prev.hash == hash => prev.marker == marker(cached),
            _ => {
                // Nothing remembered (a restart, or another replica applied it): the hash says
                // the object was applied with this desired state; take its marker as the baseline.
                memo.insert(
                    key,
                    Applied {
                        hash: hash.to_string(),
                        marker: marker(cached),
                    },
                );
                true
            }
        }
    }

    /// Applies `desired` (of a k8s-openapi kind) unless `cached` (the object's metadata from
    /// a synced watch cache) shows it is already in place. `cached: None` means the cache
    /// holds no such object: it is then created with a plain create, which fails with 409
    /// (AlreadyExists) if an object of that name exists after all — one the cache cannot
    /// show (filtered out by its label selector, or created a moment ago) is never taken over.
    pub async fn apply<K>(
        &self,
        api: &Api<K>,
        desired: &K,
        cached: Option<&ObjectMeta>,
    ) -> Result<Outcome, kube::Error>
    where
        K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug,
    {
        self.apply_with(api, &(), desired, cached).await
    }

    /// [`Applier::apply`] for any kind: `dyntype` says its apiVersion and kind (an
    /// `ApiResource` for a `DynamicObject`).
    pub async fn apply_with<K>(
        &self,
        api: &Api<K>,
        dyntype: &K::DynamicType,
        desired: &K,
        cached: Option<&ObjectMeta>,
    ) -> Result<Outcome, kube::Error>
    where
        K: Resource + Serialize + DeserializeOwned + Clone + Debug,
    {
        let hash = desired_hash(desired).map_err(kube::Error::SerdeError)?;
        if self.is_current(desired, dyntype, &hash, cached) {
            return Ok(Outcome::Unchanged);
        }
        let mut obj = desired.clone();
        obj.annotations_mut()
            .insert(HASH_ANNOTATION.to_string(), hash.clone());
        let mut value = serde_json::to_value(&obj).map_err(kube::Error::SerdeError)?;
        if let Some(map) = value.as_object_mut() {
            map.insert("apiVersion".into(), K::api_version(dyntype).into());
            map.insert("kind".into(), K::kind(dyntype).into());
        }
        let written = match cached {
            None => self.create(api, &value).await?,
            Some(_) => {
                self.own_created_fields(api, &obj.name_any()).await?;
                let params = PatchParams::apply(&self.field_manager).force();
                api.patch(&obj.name_any(), &params, &Patch::Apply(&value))
                    .await?
            }
        };
        let key = Self::key(desired, dyntype);
        self.memo.lock().unwrap_or_else(|e| e.into_inner()).insert(
            key,
            Applied {
                hash,
                marker: marker(written.meta()),
            },
        );
        Ok(Outcome::Applied)
    }

    /// A plain create, recorded under this field manager.
    async fn create<K>(&self, api: &Api<K>, value: &serde_json::Value) -> Result<K, kube::Error>
    where
        K: Resource + Serialize + DeserializeOwned + Clone + Debug,
    {
        let obj: K = serde_json::from_value(value.clone()).map_err(kube::Error::SerdeError)?;
        let pp = PostParams {
            field_manager: Some(self.field_manager.clone()),
            ..Default::default()
        };
        api.create(&pp, &obj).await
    }

    /// A create is recorded as an `Update` by this field manager, and server-side apply
    /// never removes fields owned by an `Update` entry — even one of the same manager — so
    /// a field later dropped from the desired object would stay forever. Before the first
    /// apply to an object this manager created, its `Update` entry becomes (or joins) its
    /// `Apply` entry, guarded by `test` operations against concurrent changes.
    async fn own_created_fields<K>(&self, api: &Api<K>, name: &str) -> Result<(), kube::Error>
    where
        K: Resource + Clone + DeserializeOwned + Debug,
    {
        let Some(live) = api.get_opt(name).await? else {
            return Ok(());
        };
        let Some(patch) = ownership_patch(live.meta(), &self.field_manager) else {
            return Ok(());
        };
        let patch =
            Patch::<()>::Json(serde_json::from_value(patch).map_err(kube::Error::SerdeError)?);
        match api.patch(name, &PatchParams::default(), &patch).await {
            Ok(_) => Ok(()),
            // A `test` failed: the object changed meanwhile; the next reconcile retries.
            Err(kube::Error::Api(s)) if s.code == 422 => Err(kube::Error::Api(
                Status::failure(
                    &format!(
                        "{name} changed while taking over its created fields: {}",
                        s.message
                    ),
                    "Conflict",
                )
                .with_code(409)
                .boxed(),
            )),
            Err(e) => Err(e),
        }
    }
}

/// The JSON patch that turns `manager`'s `Update` entry (left by its create) into its
/// `Apply` entry, or None when it has none.
fn ownership_patch(meta: &ObjectMeta, manager: &str) -> Option<serde_json::Value> {
    let entries = meta.managed_fields.as_ref()?;
    let mine = |op: &str| {
        entries.iter().position(|e| {
            e.manager.as_deref() == Some(manager)
                && e.operation.as_deref() == Some(op)
                && e.subresource.as_deref().unwrap_or("").is_empty()
        })
    };
    let update = mine("Update")?;
    let path = |i: usize, field: &str| format!("/metadata/managedFields/{i}/{field}");
    let mut ops = vec![
        json!({"op": "test", "path": path(update, "manager"), "value": manager}),
        json!({"op": "test", "path": path(update, "operation"), "value": "Update"}),
    ];
    match mine("Apply") {
        None => {
            ops.push(json!({"op": "replace", "path": path(update, "operation"), "value": "Apply"}))
        }
        Some(apply) => {
            let mut fields = entries[apply]
                .fields_v1
                .as_ref()
                .map(|f| f.0.clone())
                .unwrap_or_else(|| json!({}));
            if let Some(created) = entries[update].fields_v1.as_ref() {
                merge_fields(&mut fields, &created.0);
            }
            ops.push(json!({"op": "test", "path": path(apply, "manager"), "value": manager}));
            ops.push(json!({"op": "test", "path": path(apply, "operation"), "value": "Apply"}));
            ops.push(json!({"op": "replace", "path": path(apply, "fieldsV1"), "value": fields}));
            ops.push(json!({"op": "remove", "path": format!("/metadata/managedFields/{update}")}));
        }
    }
    Some(serde_json::Value::Array(ops))
}

/// Deep union of two `fieldsV1` sets.
fn merge_fields(into: &mut serde_json::Value, from: &serde_json::Value) {
    let (Some(into), Some(from)) = (into.as_object_mut(), from.as_object()) else {
        return;
    };
    for (k, v) in from {
        match into.get_mut(k) {
            Some(existing) => merge_fields(existing, v),
            None => {
                into.insert(k.clone(), v.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
    use std::collections::BTreeMap;

    fn cm(data: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some("c".into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            data: Some(BTreeMap::from([("k".to_string(), data.to_string())])),
            ..Default::default()
        }
    }

    fn meta(hash: &str, generation: Option<i64>, rv: &str) -> ObjectMeta {
        ObjectMeta {
            annotations: Some(BTreeMap::from([(
                HASH_ANNOTATION.to_string(),
                hash.to_string(),
            )])),
            generation,
            resource_version: Some(rv.into()),
            ..Default::default()
        }
    }

    #[test]
    fn hash_tracks_desired_state() {
        let h = |v: &str| desired_hash(&cm(v)).expect("hash");
        assert_eq!(h("a"), h("a"));
        assert_ne!(h("a"), h("b"));
    }

    #[test]
    fn skip_needs_matching_hash_and_unmoved_marker() {
        let a = Applier::new("test");
        let obj = cm("a");
        let h = desired_hash(&obj).expect("hash");
        let cur =
            |a: &Applier, hash: &str, m: Option<&ObjectMeta>| a.is_current(&obj, &(), hash, m);
        assert!(!cur(&a, &h, None), "absent from cache: apply");
        assert!(
            !cur(&a, "other", Some(&meta(&h, None, "5"))),
            "hash differs: apply"
        );
        // First sight after a restart: trusted, baseline taken.
        assert!(cur(&a, &h, Some(&meta(&h, None, "5"))));
        assert!(cur(&a, &h, Some(&meta(&h, None, "5"))));
        // Someone edited it: the resourceVersion moved.
        assert!(!cur(&a, &h, Some(&meta(&h, None, "9"))));
        // Generation, when present, is the marker: status-only changes do not force a write.
        let b = Applier::new("test");
        assert!(cur(&b, &h, Some(&meta(&h, Some(2), "5"))));
        assert!(cur(&b, &h, Some(&meta(&h, Some(2), "7"))));
        assert!(!cur(&b, &h, Some(&meta(&h, Some(3), "8"))));
    }

    fn entry(manager: &str, op: &str, fields: serde_json::Value) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some(op.into()),
            fields_v1: Some(FieldsV1(fields)),
            ..Default::default()
        }
    }

    #[test]
    fn a_created_entry_becomes_the_apply_entry() {
        let mut m = ObjectMeta::default();
        assert_eq!(ownership_patch(&m, "bosun"), None);
        m.managed_fields = Some(vec![
            entry("kcm", "Update", json!({"f:status": {}})),
            entry("bosun", "Update", json!({"f:data": {"f:a": {}}})),
        ]);
        let ops = ownership_patch(&m, "bosun").expect("patch");
        assert_eq!(
            ops[2],
            json!({"op": "replace", "path": "/metadata/managedFields/1/operation", "value": "Apply"})
        );
        // With an Apply entry already there, the created fields join it.
        m.managed_fields = Some(vec![
            entry("bosun", "Apply", json!({"f:data": {"f:b": {}}})),
            entry(
                "bosun",
                "Update",
                json!({"f:data": {"f:a": {}}, "f:metadata": {}}),
            ),
        ]);
        let ops = ownership_patch(&m, "bosun").expect("patch");
        let ops = ops.as_array().expect("ops");
        assert_eq!(
            ops[4]["value"],
            json!({"f:data": {"f:a": {}, "f:b": {}}, "f:metadata": {}})
        );
        assert_eq!(
            ops[5],
            json!({"op": "remove", "path": "/metadata/managedFields/1"})
        );
        m.managed_fields = Some(vec![entry("bosun", "Apply", json!({}))]);
        assert_eq!(ownership_patch(&m, "bosun"), None);
    }
}
