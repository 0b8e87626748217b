//! Status writes: server-side apply of the status subresource, sent only when the desired
//! status differs from what the cached object carries.
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt::Debug;

/// Writes `desired` as the status of `obj` unless it already equals `current`.
/// Returns whether a request was sent.
pub async fn write_status_if_changed<K, S>(
    api: &Api<K>,
    field_manager: &str,
    obj: &K,
    current: Option<&S>,
    desired: &S,
) -> Result<bool, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    S: Serialize + PartialEq,
{
    if current == Some(desired) {
        return Ok(false);
    }
    let patch = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": desired,
    });
    api.patch_status(&obj.name_any(), &PatchParams::apply(field_manager).force(), &Patch::Apply(&patch))
        .await?;
    Ok(true)
}
