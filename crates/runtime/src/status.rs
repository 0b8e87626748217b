//! Status writes: server-side apply of the status subresource, sent only when the desired
//! status differs from what the object carries.
//!
//! The cached object can lag behind this writer's own last write (a reconcile triggered by a
//! child's event may see the parent before its status update arrived), so the writer also
//! remembers the hash of the last status it wrote per object UID and skips an identical write.
//! Status belongs to this controller: an external edit of it is corrected on the next change.
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::apply::desired_hash;

#[derive(Clone)]
pub struct StatusWriter {
    field_manager: String,
    written: Arc<Mutex<HashMap<String, String>>>,
}

impl StatusWriter {
    pub fn new(field_manager: impl Into<String>) -> Self {
        StatusWriter {
            field_manager: field_manager.into(),
            written: Arc::default(),
        }
    }

    /// Writes `desired` as the status of `obj` (a k8s-openapi or derived kind) unless
    /// `current` (the cached status) equals it or this writer already wrote exactly it.
    /// Returns whether a request was sent.
    pub async fn write_if_changed<K, S>(
        &self,
        api: &Api<K>,
        obj: &K,
        current: Option<&S>,
        desired: &S,
    ) -> Result<bool, kube::Error>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
        S: Serialize + PartialEq,
    {
        self.write_if_changed_with(api, &(), obj, current, desired)
            .await
    }

    /// [`StatusWriter::write_if_changed`] for any kind: `dyntype` says its apiVersion and
    /// kind (an `ApiResource` for a `DynamicObject`).
    pub async fn write_if_changed_with<K, S>(
        &self,
        api: &Api<K>,
        dyntype: &K::DynamicType,
        obj: &K,
        current: Option<&S>,
        desired: &S,
    ) -> Result<bool, kube::Error>
    where
        K: Resource + Clone + DeserializeOwned + Debug,
        S: Serialize + PartialEq,
    {
        let uid = obj.uid().unwrap_or_else(|| obj.name_any());
        let hash = desired_hash(desired).map_err(kube::Error::SerdeError)?;
        if current == Some(desired) {
            self.remember(uid, hash);
            return Ok(false);
        }
        if self
            .written
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&uid)
            == Some(&hash)
        {
            return Ok(false);
        }
        let patch = serde_json::json!({
            "apiVersion": K::api_version(dyntype),
            "kind": K::kind(dyntype),
            "status": desired,
        });
        api.patch_status(
            &obj.name_any(),
            &PatchParams::apply(&self.field_manager).force(),
            &Patch::Apply(&patch),
        )
        .await?;
        self.remember(uid, hash);
        Ok(true)
    }

    fn remember(&self, uid: String, hash: String) {
        self.written
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(uid, hash);
    }

    /// Objects whose last written status is remembered.
    pub fn remembered(&self) -> usize {
        self.written.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Forgets a deleted object.
    pub fn forget(&self, uid: &str) {
        self.written
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(uid);
    }
}
