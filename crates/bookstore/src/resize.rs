//! Volume expansion of the MongoDB StatefulSet's claims.
//!
//! Kubernetes forbids changing a StatefulSet's `volumeClaimTemplates`, so growing `dbSize`
//! takes three steps, each idempotent and resumed by the next reconcile — whatever state an
//! interruption left (the StatefulSet deleted and not yet recreated, `dbSize` raised again
//! meanwhile, the operator restarted):
//! 1. **grow every claim in use** (ordinals below `replicas`; found by label and owner UID,
//!    never by name) that is below the plan — on every reconcile, not only when the
//!    StatefulSet's template changes;
//! 2. **recreate the StatefulSet** when its claim template differs from the plan, with
//!    orphan deletion — its pods keep running and are adopted by the new StatefulSet. The
//!    pods first get a non-controller owner reference to the BookStore, so that a BookStore
//!    deleted meanwhile still takes them (and then its claims) with it;
//! 3. **restart pods whose claim reports `FileSystemResizePending`**, one at a time: a pod
//!    may be restarted when every other MongoDB pod is ready or waits for the same restart
//!    (the usual reason to grow is a full disk, whose pod cannot get ready before it).
//!
//! What the volumes are is read from the claims in use as well as the template: shrinking,
//! or changing the storage class, is refused before anything is touched even while the
//! StatefulSet is absent. Naming the default class explicitly is no change. So is growing
//! when the storage class does not allow expansion.
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

/// What the plan asks of the volumes, compared with the claims in use and the template.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Volumes {
    /// Claims in use below the planned size.
    pub grow: Vec<String>,
    /// The StatefulSet's claim template differs from the plan (size, or the spelling of the
    /// same class): it must be recreated.
    pub recreate: bool,
}

/// The data claim template of a (cached) StatefulSet.
pub(crate) fn claim_template(sts: &StatefulSet) -> Option<&PersistentVolumeClaimSpec> {
    sts.spec
        .as_ref()?
        .volume_claim_templates
        .as_ref()?
        .iter()
        .find(|t| t.metadata.name.as_deref() == Some(DATA_VOLUME))?
        .spec
        .as_ref()
}

fn template_size(t: &PersistentVolumeClaimSpec) -> Option<u128> {
    t.resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .and_then(|q| quantity::to_bytes(&q.0))
}

/// The claims the StatefulSet mounts: ordinals below the planned replicas.
pub fn in_use<'a>(
    plan: &Plan,
    claims: &[&'a PersistentVolumeClaim],
) -> Vec<&'a PersistentVolumeClaim> {
    claims
        .iter()
        .copied()
        .filter(|c| {
            plan.id
                .names
                .claim_ordinal(&c.name_any())
                .is_some_and(|i| i < plan.db.replicas)
        })
        .collect()
}

/// The cluster's default StorageClass.
async fn default_class(client: &Client) -> Result<Option<String>, Error> {
    let classes: Api<StorageClass> = Api::all(client.clone());
    Ok(classes
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .find(|c| c.annotations().get(DEFAULT_CLASS).map(String::as_str) == Some("true"))
        .map(|c| c.name_any()))
}

fn show_class(c: Option<&str>) -> String {
    match c {
        None => "the cluster default".to_string(),
        Some(c) => format!("{c:?}"),
    }
}

/// A `storageClassName` (None, or empty: the default class).
fn class_of(spec: Option<&PersistentVolumeClaimSpec>) -> Option<&str> {
    spec.and_then(|s| s.storage_class_name.as_deref())
        .filter(|c| !c.is_empty())
}

/// Compares the plan with the claims in use and the StatefulSet's claim template, refusing
/// a shrink or a class change; `claims` are this BookStore's own. The default class is
/// looked up (one LIST) only when the spellings differ.
pub async fn decide(
    client: &Client,
    plan: &Plan,
    sts: Option<&StatefulSet>,
    claims: &[&PersistentVolumeClaim],
) -> Result<Volumes, Error> {
    let used = in_use(plan, claims);
    let template = sts.and_then(claim_template);
    let want = plan.db.storage_class.as_deref();
    let spelled_differently = class_references(template, &used, want).any(|c| c != want);
    let default = if spelled_differently {
        default_class(client).await?
    } else {
        None
    };
    compare(plan, template, &used, default.as_deref())
}

/// The classes the plan's must match: none when the template is spelled as planned (the
/// claims were made from it); else the template's and those of the claims in use.
fn class_references<'a>(
    template: Option<&'a PersistentVolumeClaimSpec>,
    used: &'a [&'a PersistentVolumeClaim],
    want: Option<&'a str>,
) -> impl Iterator<Item = Option<&'a str>> + 'a {
    let as_planned = template.is_some_and(|t| class_of(Some(t)) == want);
    template
        .map(|t| class_of(Some(t)))
        .into_iter()
        .chain(used.iter().map(|c| class_of(c.spec.as_ref())))
        .filter(move |_| !as_planned)
}

/// [`decide`] once the default class is known (pure).
pub fn compare(
    plan: &Plan,
    template: Option<&PersistentVolumeClaimSpec>,
    used: &[&PersistentVolumeClaim],
    default: Option<&str>,
) -> Result<Volumes, Error> {
    let want_class = plan.db.storage_class.as_deref();
    fn resolve<'a>(c: Option<&'a str>, default: Option<&'a str>) -> Option<&'a str> {
        c.or(default)
    }
    let mut volumes = Volumes::default();
    // Class: the template and every claim in use must name the planned class.
    for have in class_references(template, used, want_class) {
        if resolve(have, default) != resolve(want_class, default) {
            return Err(Error::Refused(Problem::new(
                Reason::StorageClassChangeRefused,
                format!(
                    "storageClassName changed from {} to {}; the data volumes cannot move between classes. Set it back to keep this BookStore converging",
                    show_class(have),
                    show_class(want_class)
                ),
            )));
        }
    }
    // The same class spelled otherwise (named, or left to the default) is no change, but the
    // immutable template must be rewritten.
    volumes.recreate = template.is_some_and(|t| class_of(Some(t)) != want_class);

    // Size.
    let want = plan.db.size.bytes;
    let current = template
        .and_then(template_size)
        .into_iter()
        .chain(used.iter().filter_map(|c| requested(c)))
        .max();
    if let Some(current) = current.filter(|c| want < *c) {
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
    volumes.grow = used
        .iter()
        .filter(|c| requested(c).is_some_and(|r| r < want))
        .map(|c| c.name_any())
        .collect();
    volumes.recreate |= template.and_then(template_size).is_some_and(|t| t != want);
    Ok(volumes)
}

/// Checks that the claims' storage class allows expansion (`bosun_runtime::claims`, which
/// the PostgresCluster operator uses too).
pub async fn check_expandable(
    client: &Client,
    claims: &[&PersistentVolumeClaim],
) -> Result<(), Error> {
    bosun_runtime::claims::expandable(client, claims)
        .await?
        .map_err(|why| Error::Refused(Problem::new(Reason::ExpansionNotSupported, why)))
}

/// Step 1: grows the claims named in `grow` to the planned size.
pub async fn grow(
    client: &Client,
    plan: &Plan,
    claims: &[&PersistentVolumeClaim],
    grow: &[String],
) -> Result<String, Error> {
    let growing: Vec<&PersistentVolumeClaim> = claims
        .iter()
        .copied()
        .filter(|c| grow.contains(&c.name_any()))
        .collect();
    check_expandable(client, &growing).await?;
    let want = &plan.db.size.text;
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &plan.id.namespace);
    for c in &growing {
        let patch = json!({"spec": {"resources": {"requests": {"storage": want}}}});
        pvcs.patch(
            &c.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    }
    Ok(format!("grew {} volume claim(s) to {want}", growing.len()))
}

/// Step 2: gives the MongoDB pods a non-controller owner reference to the BookStore (so they
/// are not left without any owner), then deletes the StatefulSet leaving them running.
pub async fn recreate(
    client: &Client,
    plan: &Plan,
    sts_uid: Option<String>,
) -> Result<String, Error> {
    let ns = &plan.id.namespace;
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let lp = ListParams::default().labels(&selector_string(
        &plan.id.names.selector(Component::MongoDb),
    ));
    let owner = json!({
        "apiVersion": plan.owner.api_version, "kind": plan.owner.kind,
        "name": plan.owner.name, "uid": plan.owner.uid,
        "controller": false, "blockOwnerDeletion": false,
    });
    for pod in pods_api.list(&lp).await?.items {
        if pod
            .owner_references()
            .iter()
            .any(|o| o.uid == plan.owner.uid)
        {
            continue;
        }
        let patch = json!({"metadata": {"ownerReferences": [owner]}});
        match pods_api
            .patch(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Strategic(&patch),
            )
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
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
        "recreating StatefulSet {} (pods keep running) so its template carries {}",
        plan.id.names.db, plan.db.size.text
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

fn is_ready(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
        && p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// This claim's pod was already restarted for its current size (the pod now running is the
/// new one, waiting for the node to finish).
fn restarted(claim: &PersistentVolumeClaim, pod: &Pod) -> bool {
    let size = requested(claim).map(quantity::human).unwrap_or_default();
    let marker = format!("{size}/{}", pod.uid().unwrap_or_default());
    claim
        .annotations()
        .get(RESTARTED_ANNOTATION)
        .is_some_and(|m| m.starts_with(&format!("{size}/")) && *m != marker)
}

/// Step 3: restarts, one at a time, a pod whose claim waits for it. None when no claim in
/// use is pending. `cached` only tells whether to look: claims and pods are then read fresh.
pub async fn restart_pending(
    client: &Client,
    plan: &Plan,
    cached: &[&PersistentVolumeClaim],
) -> Result<Option<Restart>, Error> {
    if !in_use(plan, cached).iter().any(|c| resize_pending(c)) {
        return Ok(None);
    }
    let names = &plan.id.names;
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &plan.id.namespace);
    let lp = ListParams::default().labels(&format!(
        "{INSTANCE_LABEL}={},{OWNER_UID_LABEL}={}",
        names.instance, plan.id.uid
    ));
    let fresh = pvcs.list(&lp).await?.items;
    let fresh: Vec<&PersistentVolumeClaim> = fresh.iter().collect();
    let mut pending: Vec<&PersistentVolumeClaim> = in_use(plan, &fresh)
        .into_iter()
        .filter(|c| resize_pending(c))
        .collect();
    if pending.is_empty() {
        return Ok(None);
    }
    pending.sort_by_key(|c| names.claim_ordinal(&c.name_any()));
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), &plan.id.namespace);
    let lp = ListParams::default().labels(&selector_string(&names.selector(Component::MongoDb)));
    let pods = pods_api.list(&lp).await?.items;
    let pod_of = |i: i32| pods.iter().find(|p| p.name_any() == names.db_pod(i));
    let claim_of = |i: i32| {
        pending
            .iter()
            .copied()
            .find(|c| names.claim_ordinal(&c.name_any()) == Some(i))
    };
    // A pod may be restarted while every other one is ready or waits for this same fix
    // (unready with its claim pending, not yet restarted); anything else — a pod missing, a
    // restarted pod not ready yet, a pod unready for another reason — waits.
    for i in 0..plan.db.replicas {
        let waiting = match pod_of(i) {
            None => true,
            Some(p) if is_ready(p) => false,
            Some(p) => claim_of(i).is_none_or(|c| restarted(c, p)),
        };
        if waiting {
            return Ok(Some(Restart::Waiting(format!(
                "waiting for MongoDB pod {} to be ready before restarting the next one",
                names.db_pod(i)
            ))));
        }
    }
    for claim in &pending {
        let claim_name = claim.name_any();
        let Some(pod) = names.claim_ordinal(&claim_name).and_then(pod_of) else {
            continue;
        };
        if restarted(claim, pod) {
            continue;
        }
        let size = requested(claim).map(quantity::human).unwrap_or_default();
        let pod_uid = pod.uid().unwrap_or_default();
        let pod_name = pod.name_any();
        let patch = json!({"metadata": {"annotations": {RESTARTED_ANNOTATION: format!("{size}/{pod_uid}")}}});
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

    fn refused_reason(r: Result<Volumes, Error>) -> Option<Reason> {
        match r {
            Err(Error::Refused(p)) => Some(p.reason),
            _ => None,
        }
    }

    fn claim(name: &str, size: &str, class: Option<&str>) -> PersistentVolumeClaim {
        let mut c = PersistentVolumeClaim::default();
        c.metadata.name = Some(name.into());
        c.spec = Some(PersistentVolumeClaimSpec {
            storage_class_name: class.map(str::to_string),
            resources: Some(k8s_openapi::api::core::v1::VolumeResourceRequirements {
                requests: Some(
                    [(
                        "storage".to_string(),
                        k8s_openapi::apimachinery::pkg::api::resource::Quantity(size.into()),
                    )]
                    .into(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        });
        c
    }

    #[test]
    fn grows_refuses_shrink_and_class_change() {
        let bs = sample(); // 2Gi, the default class
        let sts = db_statefulset::build(&plan(&bs));
        let tpl = claim_template(&sts);
        let c0 = claim("data-bookstore-sample-mongodb-0", "2Gi", Some("standard"));
        let used = [&c0];
        let cmp = |bs: &crate::api::BookStore, tpl, used: &[&PersistentVolumeClaim]| {
            compare(&plan(bs), tpl, used, Some("standard"))
        };
        assert_eq!(cmp(&bs, tpl, &used).ok(), Some(Volumes::default()));
        assert_eq!(cmp(&bs, None, &[]).ok(), Some(Volumes::default()));

        let mut bigger = bs.clone();
        bigger.spec.book_db.db_size = "3Gi".into();
        let v = cmp(&bigger, tpl, &used).expect("grow");
        assert_eq!(v.grow, vec!["data-bookstore-sample-mongodb-0".to_string()]);
        assert!(v.recreate);
        // Without the StatefulSet the claims still grow.
        let v = cmp(&bigger, None, &used).expect("grow");
        assert_eq!((v.grow.len(), v.recreate), (1, false));

        let mut smaller = bs.clone();
        smaller.spec.book_db.db_size = "1Gi".into();
        assert_eq!(
            refused_reason(cmp(&smaller, tpl, &used)),
            Some(Reason::ShrinkRefused)
        );
        assert_eq!(
            refused_reason(cmp(&smaller, None, &used)),
            Some(Reason::ShrinkRefused),
            "the claims say what the volumes are"
        );

        let mut moved = bs.clone();
        moved.spec.book_db.storage_class_name = Some("other".into());
        assert_eq!(
            refused_reason(cmp(&moved, tpl, &used)),
            Some(Reason::StorageClassChangeRefused)
        );
        assert_eq!(
            refused_reason(cmp(&moved, None, &used)),
            Some(Reason::StorageClassChangeRefused)
        );
        // The default class named explicitly: no change, but the template is rewritten.
        let mut named = bs.clone();
        named.spec.book_db.storage_class_name = Some("standard".into());
        let v = cmp(&named, tpl, &used).expect("same class");
        assert_eq!((v.grow.len(), v.recreate), (0, true));
    }

    #[test]
    fn only_claims_in_use_count() {
        let mut bs = sample();
        bs.spec.book_db.db_size = "3Gi".into();
        let c0 = claim("data-bookstore-sample-mongodb-0", "2Gi", Some("standard"));
        // Left by a scale-down: bigger, and smaller, than the plan: neither matters.
        let c1 = claim("data-bookstore-sample-mongodb-1", "9Gi", Some("standard"));
        let c2 = claim("data-bookstore-sample-mongodb-2", "1Gi", Some("standard"));
        let p = plan(&bs);
        let used = in_use(&p, &[&c0, &c1, &c2]);
        assert_eq!(used.len(), 1);
        let v = compare(&p, None, &used, Some("standard")).expect("grow");
        assert_eq!(v.grow, vec!["data-bookstore-sample-mongodb-0".to_string()]);
    }
}
