//! Volume expansion and the data guards around the MongoDB StatefulSet.
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
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions, PropagationPolicy,
};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::api::BookStore;
use crate::build::{
    selector, selector_string, Names, DB_SIZE_ANNOTATION, INSTANCE_LABEL, OWNER_UID_LABEL,
    STORAGE_CLASS_ANNOTATION,
};
use crate::error::{Error, Problem};
use crate::quantity;
use crate::validate::Plan;

const PENDING: &str = "FileSystemResizePending";
const DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";

/// What the StatefulSet's current template implies.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Size and class match (or there is no StatefulSet yet).
    InPlace,
    /// `dbSize` grew from `from` bytes.
    Expand { from: u128 },
}

/// Compares the spec with what the StatefulSet's template carries (from its annotations).
pub fn decide(bs: &BookStore, plan: &Plan, sts: Option<&ObjectMeta>) -> Result<Step, Error> {
    let Some(meta) = sts else {
        return Ok(Step::InPlace);
    };
    let ann = meta.annotations.clone().unwrap_or_default();
    let want_class = bs
        .spec
        .book_db
        .storage_class_name
        .clone()
        .unwrap_or_default();
    if let Some(class) = ann.get(STORAGE_CLASS_ANNOTATION) {
        if *class != want_class {
            let show = |c: &str| {
                if c.is_empty() {
                    "the cluster default".to_string()
                } else {
                    format!("{c:?}")
                }
            };
            return Err(Error::Refused(Problem::new(
                "StorageClassChangeRefused",
                format!(
                    "storageClassName changed from {} to {}; the data volumes cannot move between classes. Set it back to keep this BookStore converging",
                    show(class),
                    show(&want_class)
                ),
            )));
        }
    }
    let Some(current) = ann
        .get(DB_SIZE_ANNOTATION)
        .and_then(|s| quantity::to_bytes(s))
    else {
        return Ok(Step::InPlace);
    };
    if plan.db_bytes < current {
        return Err(Error::Refused(Problem::new(
            "ShrinkRefused",
            format!(
                "dbSize {} is below the current {}; volumes can grow but never shrink. Nothing was changed: set dbSize to {} or more",
                bs.spec.book_db.db_size,
                quantity::human(current),
                quantity::human(current)
            ),
        )));
    }
    Ok(if plan.db_bytes > current {
        Step::Expand { from: current }
    } else {
        Step::InPlace
    })
}

/// Claims that belong to this BookStore: its instance label **and** its UID.
pub fn own_claims<'a>(
    bs: &BookStore,
    claims: impl Iterator<Item = &'a PersistentVolumeClaim>,
) -> Vec<&'a PersistentVolumeClaim> {
    let name = bs.name_any();
    let uid = bs.uid().unwrap_or_default();
    let ns = bs.namespace().unwrap_or_default();
    claims
        .filter(|c| c.namespace().as_deref() == Some(ns.as_str()))
        .filter(|c| {
            let l = c.labels();
            l.get(INSTANCE_LABEL) == Some(&name) && l.get(OWNER_UID_LABEL) == Some(&uid)
        })
        .collect()
}

fn requested(c: &PersistentVolumeClaim) -> Option<u128> {
    c.spec
        .as_ref()?
        .resources
        .as_ref()?
        .requests
        .as_ref()?
        .get("storage")
        .and_then(|q| quantity::to_bytes(&q.0))
}

pub fn resize_pending(c: &PersistentVolumeClaim) -> bool {
    c.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == PENDING && c.status == "True"))
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
            "ExpansionNotSupported",
            format!("StorageClass {} does not allow volume expansion (allowVolumeExpansion is not true); the volumes keep their size", c.name_any()),
        ))),
        None => Err(Error::Refused(Problem::new(
            "ExpansionNotSupported",
            "the volumes' StorageClass was not found, so expansion cannot be checked; the volumes keep their size",
        ))),
    }
}

/// Steps 1 and 2: grow the claims, then delete the StatefulSet leaving its pods running.
pub async fn expand(
    client: &Client,
    bs: &BookStore,
    names: &Names,
    claims: &[&PersistentVolumeClaim],
    sts_uid: Option<String>,
) -> Result<String, Error> {
    let ns = bs.namespace().unwrap_or_default();
    if !claims.is_empty() {
        check_expandable(client, claims).await?;
    }
    let want = &bs.spec.book_db.db_size;
    let want_bytes = quantity::to_bytes(want).unwrap_or(0);
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    let mut grown = 0;
    for c in claims {
        if requested(c).is_some_and(|r| r >= want_bytes) {
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
    let sets: Api<k8s_openapi::api::apps::v1::StatefulSet> = Api::namespaced(client.clone(), &ns);
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Orphan),
        preconditions: Some(Preconditions {
            uid: sts_uid,
            resource_version: None,
        }),
        ..Default::default()
    };
    match sets.delete(&names.db, &dp).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => return Err(e.into()),
    }
    Ok(format!(
        "grew {grown} of {} volume claims to {want}; recreating StatefulSet {} (pods keep running) so its template carries the new size",
        claims.len(),
        names.db
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
    bs: &BookStore,
    names: &Names,
    cached: &[&PersistentVolumeClaim],
) -> Result<Option<Restart>, Error> {
    if !cached.iter().any(|c| resize_pending(c)) {
        return Ok(None);
    }
    let ns = bs.namespace().unwrap_or_default();
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    let lp = ListParams::default().labels(&format!(
        "{INSTANCE_LABEL}={},{OWNER_UID_LABEL}={}",
        bs.name_any(),
        bs.uid().unwrap_or_default()
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
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let lp = ListParams::default().labels(&selector_string(&selector(bs, "mongodb")));
    let pods = pods_api.list(&lp).await?.items;
    let is_ready = |p: &Pod| {
        p.metadata.deletion_timestamp.is_none()
            && p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    };
    let want = usize::try_from(bs.spec.book_db.replicas).unwrap_or(0);
    if pods.iter().filter(|p| is_ready(p)).count() < want {
        return Ok(Some(Restart::Waiting(
            "waiting for every MongoDB pod to be ready before restarting the next one".into(),
        )));
    }
    for claim in &pending {
        let claim_name = claim.name_any();
        let Some(ordinal) =
            claim_name.strip_prefix(&format!("{}-{}-", crate::build::DATA_VOLUME, names.db))
        else {
            continue;
        };
        let pod_name = format!("{}-{ordinal}", names.db);
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

/// Before the StatefulSet is created: claims with its names that another BookStore (an
/// earlier one of the same name) left behind are not reused silently. With
/// `bookDB.adoptClaims` they are relabelled to this BookStore on purpose. `cached` are the
/// claims the operator watches (every claim a BookStore's StatefulSet created carries the
/// labels of that watch), so the check costs no request.
pub async fn guard_claims(
    client: &Client,
    bs: &BookStore,
    cached: &[&PersistentVolumeClaim],
) -> Result<Option<String>, Error> {
    let ns = bs.namespace().unwrap_or_default();
    let uid = bs.uid().unwrap_or_default();
    let names = Names::of(bs);
    let prefix = format!("{}-{}-", crate::build::DATA_VOLUME, names.db);
    let foreign: Vec<&PersistentVolumeClaim> = cached
        .iter()
        .copied()
        .filter(|c| c.namespace().as_deref() == Some(ns.as_str()))
        .filter(|c| c.labels().get(INSTANCE_LABEL) == Some(&bs.name_any()))
        .filter(|c| c.name_any().starts_with(&prefix))
        .filter(|c| c.labels().get(OWNER_UID_LABEL) != Some(&uid))
        .collect();
    if foreign.is_empty() {
        return Ok(None);
    }
    let list = foreign
        .iter()
        .map(|c| c.name_any())
        .collect::<Vec<_>>()
        .join(", ");
    if !bs.spec.book_db.adopt_claims {
        return Err(Error::Conflict(Problem::new(
            "ClaimsFromPreviousOwner",
            format!(
                "volume claims {list} hold data of an earlier BookStore named {}; they were left untouched. Set bookDB.adoptClaims: true to use that data, or delete the claims",
                bs.name_any()
            ),
        )));
    }
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    for c in &foreign {
        let patch = json!({"metadata": {"labels": {OWNER_UID_LABEL: uid}}});
        pvcs.patch(
            &c.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    }
    Ok(Some(format!("adopted volume claims {list}")))
}

/// Deletes this BookStore's claims (only when its spec asks for it).
pub async fn delete_claims(client: &Client, bs: &BookStore) -> Result<usize, Error> {
    let ns = bs.namespace().unwrap_or_default();
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    let lp = ListParams::default().labels(&format!(
        "{INSTANCE_LABEL}={},{OWNER_UID_LABEL}={}",
        bs.name_any(),
        bs.uid().unwrap_or_default()
    ));
    let claims = pvcs.list(&lp).await?.items;
    for c in &claims {
        match pvcs.delete(&c.name_any(), &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(claims.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::{db_statefulset, fixtures};
    use crate::validate::validate;

    fn refused_reason(r: Result<Step, Error>) -> Option<&'static str> {
        match r {
            Err(Error::Refused(p)) => Some(p.reason),
            _ => None,
        }
    }

    #[test]
    fn grows_refuses_shrink_and_class_change() {
        let bs = fixtures::sample(); // 2Gi
        let sts = db_statefulset::build(&bs);
        let plan = validate(&bs).expect("valid");
        assert_eq!(
            decide(&bs, &plan, Some(&sts.metadata)).ok(),
            Some(Step::InPlace)
        );
        assert_eq!(decide(&bs, &plan, None).ok(), Some(Step::InPlace));

        let mut bigger = bs.clone();
        bigger.spec.book_db.db_size = "3Gi".into();
        let plan = validate(&bigger).expect("valid");
        assert_eq!(
            decide(&bigger, &plan, Some(&sts.metadata)).ok(),
            Some(Step::Expand { from: 2 << 30 })
        );

        let mut smaller = bs.clone();
        smaller.spec.book_db.db_size = "1Gi".into();
        let plan = validate(&smaller).expect("valid");
        assert_eq!(
            refused_reason(decide(&smaller, &plan, Some(&sts.metadata))),
            Some("ShrinkRefused")
        );

        let mut moved = bs.clone();
        moved.spec.book_db.storage_class_name = Some("other".into());
        let plan = validate(&moved).expect("valid");
        assert_eq!(
            refused_reason(decide(&moved, &plan, Some(&sts.metadata))),
            Some("StorageClassChangeRefused")
        );
    }

    #[test]
    fn own_claims_need_label_and_uid() {
        let bs = fixtures::sample();
        let mk = |name: &str, uid: &str| {
            let mut c = PersistentVolumeClaim::default();
            c.metadata.name = Some(name.into());
            c.metadata.namespace = Some("shop".into());
            c.metadata.labels = Some(
                [
                    (INSTANCE_LABEL.to_string(), "bookstore-sample".to_string()),
                    (OWNER_UID_LABEL.to_string(), uid.to_string()),
                ]
                .into(),
            );
            c
        };
        let mine = mk(
            "data-bookstore-sample-mongodb-0",
            "0ef42889-deb4-11e9-ba56-42010a800256",
        );
        let old = mk("data-bookstore-sample-mongodb-1", "older-uid");
        let all = [mine.clone(), old];
        let own = own_claims(&bs, all.iter());
        assert_eq!(own.len(), 1);
        assert_eq!(own[0].name_any(), "data-bookstore-sample-mongodb-0");
    }
}
