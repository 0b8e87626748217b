//! Ownership of children, and finalizers: the rules every operator follows before it writes.
//!
//! A child may be written only if it is absent or controlled by the object reconciling it;
//! an object someone else created is never taken over.
use std::fmt::Debug;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;

/// Who holds a child, as far as writing to it goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Holder {
    /// No such object: it may be created.
    Absent,
    /// Controlled by the object whose UID was given.
    Us,
    /// Controlled by another object (its kind and name).
    Other { kind: String, name: String },
    /// Exists with no controller: someone created it by hand or with another tool.
    Unowned,
}

/// The owner reference that names the object's controller, if one does.
pub fn controller(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
}

/// Who holds the child whose cached metadata is `meta`, seen from the owner `uid`.
pub fn holder(meta: Option<&ObjectMeta>, uid: &str) -> Holder {
    let Some(meta) = meta else {
        return Holder::Absent;
    };
    match controller(meta) {
        Some(o) if o.uid == uid => Holder::Us,
        Some(o) => Holder::Other {
            kind: o.kind.clone(),
            name: o.name.clone(),
        },
        None => Holder::Unowned,
    }
}

/// True when `field_manager` owns fields of the object whose cached metadata is `meta` (a
/// fingerprinting cache keeps that, see [`crate::owned`]): it wrote the object. An object
/// that lost its owner reference is still recognised as written by bosun this way.
pub fn applied_by(meta: &ObjectMeta, field_manager: &str) -> bool {
    crate::owned::summary(meta, field_manager).is_some_and(|o| o.fingerprint.is_some())
}

/// True when `meta` names `uid` as its controller.
pub fn controlled_by(meta: &ObjectMeta, uid: &str) -> bool {
    holder(Some(meta), uid) == Holder::Us
}

/// Adds (`present`) or removes `finalizer` on `obj` with one merge patch guarded by the
/// object's resourceVersion, so concurrent finalizer edits by others are never lost. Returns
/// whether a request was sent. Removing it from an object already gone is not an error.
pub async fn set_finalizer<K>(
    api: &Api<K>,
    obj: &K,
    finalizer: &str,
    present: bool,
) -> Result<bool, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let current = obj.finalizers();
    if current.iter().any(|f| f == finalizer) == present {
        return Ok(false);
    }
    let mut next: Vec<&String> = current.iter().filter(|f| *f != finalizer).collect();
    let owned = finalizer.to_string();
    if present {
        next.push(&owned);
    }
    let patch =
        json!({"metadata": {"finalizers": next, "resourceVersion": obj.resource_version()}});
    match api
        .patch(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 && !present => Ok(true),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn meta(owner: Option<(&str, bool)>) -> ObjectMeta {
        ObjectMeta {
            owner_references: owner.map(|(uid, controller)| {
                vec![OwnerReference {
                    uid: uid.into(),
                    kind: "BookStore".into(),
                    name: "shop".into(),
                    controller: Some(controller),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        }
    }

    #[test]
    fn holders() {
        assert_eq!(holder(None, "u"), Holder::Absent);
        assert_eq!(holder(Some(&meta(Some(("u", true)))), "u"), Holder::Us);
        assert_eq!(
            holder(Some(&meta(Some(("v", true)))), "u"),
            Holder::Other {
                kind: "BookStore".into(),
                name: "shop".into()
            }
        );
        assert_eq!(
            holder(Some(&meta(Some(("u", false)))), "u"),
            Holder::Unowned
        );
        assert_eq!(holder(Some(&meta(None)), "u"), Holder::Unowned);
        assert!(controlled_by(&meta(Some(("u", true))), "u"));
    }
}
