//! Data volumes' claims as the operators that grow them read them (the BookStore's MongoDB
//! claims, the PostgresCluster's instance claims): the size asked for and the size had
//! (Kubernetes quantities, to the byte, with [`crate::quantity`]), a file system resize
//! waiting for its pod, and whether the claims' StorageClass lets them grow.
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

use crate::quantity;

const PENDING: &str = "FileSystemResizePending";
const DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";

/// The size a claim asks for.
pub fn requested(c: &PersistentVolumeClaim) -> Option<u128> {
    c.spec
        .as_ref()?
        .resources
        .as_ref()?
        .requests
        .as_ref()?
        .get("storage")
        .and_then(|q| quantity::to_bytes(&q.0))
}

/// The size a claim's volume has.
pub fn capacity(c: &PersistentVolumeClaim) -> Option<u128> {
    c.status
        .as_ref()?
        .capacity
        .as_ref()?
        .get("storage")
        .and_then(|q| quantity::to_bytes(&q.0))
}

/// The volume grew but its file system waits for the pod to restart.
pub fn resize_pending(c: &PersistentVolumeClaim) -> bool {
    c.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == PENDING && c.status == "True"))
}

/// Whether the claims' StorageClass (the first one named, else the cluster's default)
/// allows expansion: `Ok(Err(why))` when it does not, or cannot be found, in words for a
/// condition; `Err` only when the API server could not be asked.
pub async fn expandable(
    client: &Client,
    claims: &[&PersistentVolumeClaim],
) -> Result<Result<(), String>, kube::Error> {
    let classes: Api<StorageClass> = Api::all(client.clone());
    let named = claims
        .iter()
        .find_map(|c| c.spec.as_ref().and_then(|s| s.storage_class_name.clone()))
        .filter(|c| !c.is_empty());
    let class = match named {
        Some(n) => classes.get_opt(&n).await?,
        None => classes
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .find(|c| c.annotations().get(DEFAULT_CLASS).map(String::as_str) == Some("true")),
    };
    Ok(match class {
        Some(c) if c.allow_volume_expansion == Some(true) => Ok(()),
        Some(c) => Err(format!(
            "StorageClass {} does not allow volume expansion (allowVolumeExpansion is not true); the volumes keep their size",
            c.name_any()
        )),
        None => Err(
            "the volumes' StorageClass was not found, so expansion cannot be checked; the volumes keep their size"
                .to_string(),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        PersistentVolumeClaimCondition, PersistentVolumeClaimSpec, PersistentVolumeClaimStatus,
        VolumeResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    #[test]
    fn sizes_and_a_pending_resize_are_read_from_the_claim() {
        let q = |s: &str| [("storage".to_string(), Quantity(s.into()))].into();
        let c = PersistentVolumeClaim {
            spec: Some(PersistentVolumeClaimSpec {
                resources: Some(VolumeResourceRequirements {
                    requests: Some(q("2Gi")),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            status: Some(PersistentVolumeClaimStatus {
                capacity: Some(q("1Gi")),
                conditions: Some(vec![PersistentVolumeClaimCondition {
                    type_: PENDING.into(),
                    status: "True".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(requested(&c), Some(2 << 30));
        assert_eq!(capacity(&c), Some(1 << 30));
        assert!(resize_pending(&c));
        assert_eq!(requested(&PersistentVolumeClaim::default()), None);
        assert!(!resize_pending(&PersistentVolumeClaim::default()));
    }
}
