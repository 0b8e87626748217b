//! Volume expansion of the MongoDB StatefulSet's claims.
//!
//! Kubernetes forbids changing a StatefulSet's `volumeClaimTemplates`, so growing `dbSize`
//! takes three steps, each idempotent and resumed by the next reconcile:
//! 1. **grow every claim** of this BookStore (found by label and owner UID, never by name);
//! 2. **recreate the StatefulSet** with orphan deletion — its pods keep running and are
//!    adopted by the new StatefulSet, whose template now carries the new size;
//! 3. **restart pods whose claim reports `FileSystemResizePending`**, one at a time, each only
//!    once every MongoDB pod is ready again.
//!
//! Shrinking, or changing the storage class, is refused before anything is touched. So is
//! growing when the storage class does not allow expansion.
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimSpec, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions, PropagationPolicy,
};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::claims::{requested, resize_pending};
use crate::error::{Error, Problem};
use crate::names::{selector_string, Component, DATA_VOLUME, INSTANCE_LABEL, OWNER_UID_LABEL};
use crate::quantity;
use crate::reason::Reason;
use crate::validate::Plan;

const DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";

/// What the StatefulSet's current claim template implies.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Size and class match (or there is no StatefulSet yet).
    InPlace,
    /// `dbSize` grew from `from` bytes.
    Expand { from: u128 },
}

/// The data claim template of a (cached) StatefulSet.
fn claim_template(sts: &StatefulSet) -> Option<&PersistentVolumeClaimSpec> {
    sts.spec
        .as_ref()?
        .volume_claim_templates
        .as_ref()?
        .iter()
        .find(|t| t.metadata.name.as_deref() == Some(DATA_VOLUME))?
        .spec
        .as_ref()
}

/// Compares the plan with what the StatefulSet's claim template holds.
pub fn decide(plan: &Plan, sts: Option<&StatefulSet>) -> Result<Step, Error> {
    let Some(template) = sts.and_then(claim_template) else {
        return Ok(Step::InPlace);
    };
    let want_class = plan.db.storage_class.as_deref();
    let class = template.storage_class_name.as_deref();
    if class != want_class {
        let show = |c: Option<&str>| match c {
            None => "the cluster default".to_string(),
            Some(c) => format!("{c:?}"),
        };
        return Err(Error::Refused(Problem::new(
            Reason::StorageClassChangeRefused,
            format!(
                "storageClassName changed from {} to {}; the data volumes cannot move between classes. Set it back to keep this BookStore converging",
                show(class),
                show(want_class)
            ),
        )));
    }
    let current = template
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .and_then(|q| quantity::to_bytes(&q.0));
    let Some(current) = current else {
        return Ok(Step::InPlace);
    };
    let want = plan.db.size.bytes;
    if want < current {
        return Err(Error::Refused(Problem::new(
            Reason::ShrinkRefused,
            format!(
                "dbSize {} is below the current {}; volumes can grow but never shrink. Nothing was changed: set dbSize to {} or more",
                plan.db.size.text,
                quantity::human(current),
                quantity::human(current)
            ),
        )));
    }
    Ok(if want > current {
        Step::Expand { from: current }
    } else {
        Step::InPlace
    })
}

/// Checks that the claims' storage class allows expansion.
async fn check_expandable(client: &Client, claims: &[&PersistentVolumeClaim]) -> Result<(), Error> {
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
    match class {
        Some(c) if c.allow_volume_expansion == Some(true) => Ok(()),
        Some(c) => Err(Error::Refused(Problem::new(
            Reason::ExpansionNotSupported,
            format!("StorageClass {} does not allow volume expansion (allowVolumeExpansion is not true); the volumes keep their size", c.name_any()),
        ))),
        None => Err(Error::Refused(Problem::new(
            Reason::ExpansionNotSupported,
            "the volumes' StorageClass was not found, so expansion cannot be checked; the volumes keep their size",
        ))),
    }
}

/// Steps 1 and 2: grow the claims, then delete the StatefulSet leaving its pods running.
pub async fn expand(
    client: &Client,
    plan: &Plan,
    claims: &[&PersistentVolumeClaim],
    sts_uid: Option<String>,
) -> Result<String, Error> {
    let ns = &plan.id.namespace;
    if !claims.is_empty() {
        check_expandable(client, claims).await?;
    }
    let want = &plan.db.size.text;
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    let mut grown = 0;
    for c in claims {
        if requested(c).is_some_and(|r| r >= plan.db.size.bytes) {
            continue;
        }
        let patch = json!({"spec": {"resources": {"requests": {"storage": want}}}});
        pvcs.patch(
            &c.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
        grown += 1;
    }
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), ns);
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Orphan),
        preconditions: Some(Preconditions {
            uid: sts_uid,
            resource_version: None,
        }),
        ..Default::default()
    };
    match sets.delete(&plan.id.names.db, &dp).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => return Err(e.into()),
    }
    Ok(format!(
        "grew {grown} of {} volume claims to {want}; recreating StatefulSet {} (pods keep running) so its template carries the new size",
        claims.len(),
        plan.id.names.db
    ))
}

/// What step 3 did or waits for.
pub enum Restart {
    /// A pod was deleted so it restarts with the grown volume.
    Restarted {
        pod: k8s_openapi::api::core::v1::ObjectReference,
        message: String,
    },
    Waiting(String),
}

/// On a claim: `<requested size>/<pod UID>` of the pod bosun deleted to finish a resize, so a
/// pod is restarted once per resize even across operator restarts and stale caches.
pub const RESTARTED_ANNOTATION: &str = "bookstore.bosun.dev/restarted-pod";

/// Step 3: restarts, one at a time, a pod whose claim waits for it. None when no claim is
/// pending. `cached` only tells whether to look: claims and pods are then read fresh.
pub async fn restart_pending(
    client: &Client,
    plan: &Plan,
    cached: &[&PersistentVolumeClaim],
) -> Result<Option<Restart>, Error> {
    if !cached.iter().any(|c| resize_pending(c)) {
        return Ok(None);
    }
    let names = &plan.id.names;
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &plan.id.namespace);
    let lp = ListParams::default().labels(&format!(
        "{INSTANCE_LABEL}={},{OWNER_UID_LABEL}={}",
        names.instance, plan.id.uid
    ));
    let mut pending: Vec<PersistentVolumeClaim> = pvcs
        .list(&lp)
        .await?
        .items
        .into_iter()
        .filter(resize_pending)
        .collect();
    if pending.is_empty() {
        return Ok(None);
    }
    pending.sort_by_key(|c| c.name_any());
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), &plan.id.namespace);
    let lp = ListParams::default().labels(&selector_string(&names.selector(Component::MongoDb)));
    let pods = pods_api.list(&lp).await?.items;
    let is_ready = |p: &Pod| {
        p.metadata.deletion_timestamp.is_none()
            && p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    };
    let want = usize::try_from(plan.db.replicas).unwrap_or(0);
    if pods.iter().filter(|p| is_ready(p)).count() < want {
        return Ok(Some(Restart::Waiting(
            "waiting for every MongoDB pod to be ready before restarting the next one".into(),
        )));
    }
    for claim in &pending {
        let claim_name = claim.name_any();
        let Some(ordinal) = names.claim_ordinal(&claim_name) else {
            continue;
        };
        let pod_name = names.db_pod(ordinal);
        let Some(pod) = pods.iter().find(|p| p.name_any() == pod_name) else {
            continue;
        };
        let size = requested(claim).map(quantity::human).unwrap_or_default();
        let pod_uid = pod.uid().unwrap_or_default();
        let marker = format!("{size}/{pod_uid}");
        match claim.annotations().get(RESTARTED_ANNOTATION) {
            // Restarted for this size already: the new pod finishes the resize.
            Some(m) if m.starts_with(&format!("{size}/")) && *m != marker => continue,
            // Recorded but the pod is still the old one (the delete did not happen): retry.
            _ => {}
        }
        let patch = json!({"metadata": {"annotations": {RESTARTED_ANNOTATION: marker}}});
        pvcs.patch(&claim_name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(pod_uid),
                resource_version: None,
            }),
            ..Default::default()
        };
        match pods_api.delete(&pod_name, &dp).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
        return Ok(Some(Restart::Restarted {
            pod: kube::Resource::object_ref(pod, &()),
            message: format!(
                "restarted pod {pod_name} to finish the file system resize of {claim_name}"
            ),
        }));
    }
    Ok(Some(Restart::Waiting(
        "waiting for the node to finish the file system resize".into(),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::db_statefulset;
    use crate::build::fixtures::{plan, sample};

    fn refused_reason(r: Result<Step, Error>) -> Option<Reason> {
        match r {
            Err(Error::Refused(p)) => Some(p.reason),
            _ => None,
        }
    }

    #[test]
    fn grows_refuses_shrink_and_class_change() {
        let bs = sample(); // 2Gi
        let sts = db_statefulset::build(&plan(&bs));
        assert_eq!(decide(&plan(&bs), Some(&sts)).ok(), Some(Step::InPlace));
        assert_eq!(decide(&plan(&bs), None).ok(), Some(Step::InPlace));

        let mut bigger = bs.clone();
        bigger.spec.book_db.db_size = "3Gi".into();
        assert_eq!(
            decide(&plan(&bigger), Some(&sts)).ok(),
            Some(Step::Expand { from: 2 << 30 })
        );

        let mut smaller = bs.clone();
        smaller.spec.book_db.db_size = "1Gi".into();
        assert_eq!(
            refused_reason(decide(&plan(&smaller), Some(&sts))),
            Some(Reason::ShrinkRefused)
        );

        let mut moved = bs.clone();
        moved.spec.book_db.storage_class_name = Some("other".into());
        assert_eq!(
            refused_reason(decide(&plan(&moved), Some(&sts))),
            Some(Reason::StorageClassChangeRefused)
        );
    }
}
