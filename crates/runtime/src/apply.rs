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
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::Serialize;
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
    /// a watch cache) shows it is already in place.
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
        let params = PatchParams::apply(&self.field_manager).force();
        let applied = api
            .patch(&obj.name_any(), &params, &Patch::Apply(&value))
            .await?;
        let key = Self::key(desired, dyntype);
        self.memo.lock().unwrap_or_else(|e| e.into_inner()).insert(
            key,
            Applied {
                hash,
                marker: marker(applied.meta()),
            },
        );
        Ok(Outcome::Applied)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
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
}
