//! Status writes: server-side apply of the status subresource, sent only when the desired
//! status differs from what the object carries.
//!
//! The cached object can lag behind this writer's own last write (a reconcile triggered by a
//! child's event may see the parent before its status update arrived), so the writer
//! remembers the hash of the last status it wrote per object UID (16 bytes each way) and
//! decides from it first: the same status again is skipped; another one is written even when
//! the cached status equals it — that cached status may be the one this writer has since
//! replaced. Only an object this writer has not written yet (a restart) is judged by its
//! cached status alone. The resourceVersion each write produced is kept beside it (8 bytes),
//! so a reconcile can tell that its cached object predates this writer's last write
//! ([`StatusWriter::behind`]) and read the live one instead of deciding from a stale status. Status belongs to this controller: an external edit of it is corrected
//! on the next change.
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::Serialize;

use sha2::{Digest, Sha256};

#[derive(Clone)]
pub struct StatusWriter {
    field_manager: String,
    /// UID bits → the bits of the last status written, and the resourceVersion that write
    /// gave the object (0 when it is not a number).
    written: Arc<Mutex<HashMap<u128, (u128, u64)>>>,
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
        let uid = crate::owned::uid_bits(&obj.uid().unwrap_or_else(|| obj.name_any()));
        let hash = status_hash(desired).map_err(kube::Error::SerdeError)?;
        let last = self.lock().get(&uid).copied();
        let in_place = match last {
            Some((written, _)) => written == hash,
            None => current == Some(desired),
        };
        if in_place {
            let rv = last.map_or(0, |(_, rv)| rv);
            self.lock().insert(uid, (hash, rv));
            return Ok(false);
        }
        let patch = serde_json::json!({
            "apiVersion": K::api_version(dyntype),
            "kind": K::kind(dyntype),
            "status": desired,
        });
        let written = api
            .patch_status(
                &obj.name_any(),
                &PatchParams::apply(&self.field_manager).force(),
                &Patch::Apply(&patch),
            )
            .await?;
        self.lock()
            .insert(uid, (hash, revision(written.resource_version().as_deref())));
        Ok(true)
    }

    /// Whether `obj` (as a cache holds it) is older than the object this writer's last status
    /// write produced: its status is not the one last written. False when this writer has not
    /// written it, or when either resourceVersion is not a number (etcd revisions are).
    pub fn behind<K: Resource>(&self, obj: &K) -> bool {
        let uid = crate::owned::uid_bits(&obj.uid().unwrap_or_else(|| obj.name_any()));
        let Some((_, wrote)) = self.lock().get(&uid).copied() else {
            return false;
        };
        let cached = revision(obj.meta().resource_version.as_deref());
        wrote != 0 && cached != 0 && cached < wrote
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u128, (u128, u64)>> {
        self.written.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Objects whose last written status is remembered.
    pub fn remembered(&self) -> usize {
        self.lock().len()
    }

    /// Forgets a deleted object.
    pub fn forget(&self, uid: &str) {
        self.lock().remove(&crate::owned::uid_bits(uid));
    }
}

/// A resourceVersion as a number (0 when absent or not a number).
fn revision(rv: Option<&str>) -> u64 {
    rv.and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// 128 bits of the SHA-256 of a status's JSON.
fn status_hash<S: Serialize>(status: &S) -> Result<u128, serde_json::Error> {
    let digest = Sha256::digest(serde_json::to_vec(status)?);
    let mut bits = [0u8; 16];
    bits.copy_from_slice(&digest[..16]);
    Ok(u128::from_le_bytes(bits))
}
