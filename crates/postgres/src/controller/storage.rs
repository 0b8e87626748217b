//! The instances' data volumes follow `spec.storage.size`, which only grows.
//!
//! - A spec below the largest size a data claim asks for is a shrink: refused by
//!   [`crate::validate`] (the claims' largest request comes in as `Observed::storage_bytes`),
//!   nothing touched.
//! - A spec above a claim's request grows that claim — every instance's, in one step (a
//!   request is a promise the volume grows online; nothing restarts). BookStore's check of the
//!   StorageClass comes first ([`bosun_runtime::claims::expandable`]): a class that
//!   does not allow expansion leaves every claim as it is, with the reason in the
//!   `StorageResized` condition and an Event, and the cluster runs on, nothing lost.
//! - A claim whose volume waits for a pod restart to grow its file system
//!   (`FileSystemResizePending`, drivers without online expansion) is reported in the
//!   condition; the operator does not restart instances for it (a restart of the primary is a
//!   failover): delete a replica's pod, or switch over and delete the old primary's.
use bosun_runtime::claims::{capacity, requested, resize_pending};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use bosun_runtime::conditions::condition;

use crate::validate::{serial_of, Plan};

use super::reason::Reason;

pub const CONDITION: &str = "StorageResized";

/// The largest size an instance's data claim asks for: the spec may not go below it.
pub fn largest_request(cluster: &str, claims: &[PersistentVolumeClaim]) -> Option<u128> {
    data_claims(cluster, claims).filter_map(requested).max()
}

fn data_claims<'a>(
    cluster: &'a str,
    claims: &'a [PersistentVolumeClaim],
) -> impl Iterator<Item = &'a PersistentVolumeClaim> + 'a {
    claims
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .filter(move |c| serial_of(cluster, &c.name_any()).is_some())
}

/// Data claims that ask for less than the plan (pure).
pub fn below_plan<'a>(
    plan: &'a Plan,
    claims: &'a [PersistentVolumeClaim],
) -> Vec<&'a PersistentVolumeClaim> {
    data_claims(&plan.name, claims)
        .filter(|c| requested(c).is_some_and(|r| r < plan.storage.bytes))
        .collect()
}

/// What this cycle did to the volumes.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every data claim asks for the plan's size already.
    AsPlanned,
    /// These claims were grown to the plan's size.
    Grew(Vec<String>),
    /// The StorageClass does not allow expansion: nothing was changed.
    NotExpandable(String),
}

/// Grows every data claim below the plan, once the StorageClass allows it.
pub async fn grow(
    client: &Client,
    plan: &Plan,
    claims: &[PersistentVolumeClaim],
) -> Result<Outcome, kube::Error> {
    let below = below_plan(plan, claims);
    if below.is_empty() {
        return Ok(Outcome::AsPlanned);
    }
    if let Err(why) = bosun_runtime::claims::expandable(client, &below).await? {
        return Ok(Outcome::NotExpandable(why));
    }
    let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &plan.namespace);
    let patch = json!({"spec": {"resources": {"requests": {"storage": plan.storage.text}}}});
    let mut grown = Vec::new();
    for c in below {
        match api
            .patch(
                &c.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => grown.push(c.name_any()),
            // Gone meanwhile (a member being replaced): its successor is made at the new size.
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Outcome::Grew(grown))
}

/// The `StorageResized` condition after this cycle (pure); None while no resize was ever
/// asked (the condition appears with the first growth).
pub fn condition_of(
    plan: &Plan,
    claims: &[PersistentVolumeClaim],
    outcome: &Outcome,
    had_condition: bool,
    generation: Option<i64>,
) -> Option<Condition> {
    let want = &plan.storage.text;
    let (ok, reason, message) = match outcome {
        Outcome::NotExpandable(why) => (
            false,
            Reason::ExpansionNotSupported,
            format!("spec.storage.size {want} is not applied: {why}"),
        ),
        Outcome::Grew(names) => (
            false,
            Reason::GrowingVolumes,
            format!("growing {} to {want}", names.join(", ")),
        ),
        Outcome::AsPlanned => {
            let pending: Vec<String> = data_claims(&plan.name, claims)
                .filter(|c| resize_pending(c))
                .map(|c| c.name_any())
                .collect();
            let growing: Vec<String> = data_claims(&plan.name, claims)
                .filter(|c| capacity(c).is_none_or(|have| have < plan.storage.bytes))
                .map(|c| c.name_any())
                .collect();
            if !pending.is_empty() {
                (
                    false,
                    Reason::FileSystemResizePending,
                    format!(
                        "{} grew to {want}; the file system grows when the pod restarts (delete a replica's pod, or switch over first for the primary)",
                        pending.join(", ")
                    ),
                )
            } else if !growing.is_empty() {
                if !had_condition {
                    return None;
                }
                (
                    false,
                    Reason::GrowingVolumes,
                    format!("waiting for {} to reach {want}", growing.join(", ")),
                )
            } else {
                if !had_condition {
                    return None;
                }
                (
                    true,
                    Reason::VolumesResized,
                    format!("every instance's volume has {want}"),
                )
            }
        }
    };
    Some(condition(
        CONDITION,
        ok,
        reason.as_str(),
        message,
        generation,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::plan_of;
    use k8s_openapi::api::core::v1::{PersistentVolumeClaimSpec, PersistentVolumeClaimStatus};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn claim(name: &str, asks: &str, has: Option<&str>) -> PersistentVolumeClaim {
        let q = |v: &str| [("storage".to_string(), Quantity(v.into()))].into();
        PersistentVolumeClaim {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                resources: Some(k8s_openapi::api::core::v1::VolumeResourceRequirements {
                    requests: Some(q(asks)),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            status: has.map(|h| PersistentVolumeClaimStatus {
                capacity: Some(q(h)),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn only_data_claims_below_the_plan_grow_and_the_largest_bounds_a_shrink() {
        let p = plan_of(serde_json::json!({"storage": {"size": "2Gi"}}));
        let claims = [
            claim("pg-1", "1Gi", Some("1Gi")),
            claim("pg-2", "2Gi", Some("2Gi")),
            // The backup volume and another cluster's claim are not this cluster's data.
            claim("pg-backup", "1Gi", Some("1Gi")),
            claim("pgx-1", "1Gi", Some("1Gi")),
        ];
        let below: Vec<String> = below_plan(&p, &claims)
            .iter()
            .map(|c| c.name_any())
            .collect();
        assert_eq!(below, ["pg-1"]);
        assert_eq!(largest_request("pg", &claims), Some(2 << 30));
        assert_eq!(largest_request("pg", &[]), None);
    }

    #[test]
    fn the_condition_follows_the_volumes() {
        let p = plan_of(serde_json::json!({"storage": {"size": "2Gi"}}));
        let at_size = [claim("pg-1", "2Gi", Some("2Gi"))];
        let asked = [claim("pg-1", "2Gi", Some("1Gi"))];
        let of = |claims: &[PersistentVolumeClaim], o: &Outcome, had: bool| {
            condition_of(&p, claims, o, had, Some(3)).map(|c| (c.status, c.reason))
        };
        let pair = |s: &str, r: Reason| Some((s.to_string(), r.as_str().to_string()));
        // Never resized: no condition.
        assert_eq!(of(&at_size, &Outcome::AsPlanned, false), None);
        assert_eq!(
            of(&asked, &Outcome::Grew(vec!["pg-1".into()]), false),
            pair("False", Reason::GrowingVolumes)
        );
        assert_eq!(
            of(&asked, &Outcome::AsPlanned, true),
            pair("False", Reason::GrowingVolumes)
        );
        assert_eq!(
            of(&at_size, &Outcome::AsPlanned, true),
            pair("True", Reason::VolumesResized)
        );
        assert_eq!(
            of(&asked, &Outcome::NotExpandable("no".into()), false),
            pair("False", Reason::ExpansionNotSupported)
        );
    }
}
