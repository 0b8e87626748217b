//! The BookStore operator as the runtime sees it: what it serves (the CRD), what it needs
//! granted ([`crate::rbac`]), and what it watches in each namespace. The pipeline itself is in
//! [`crate::reconcile`].
use std::sync::Arc;

use bosun_runtime::apply::Applier;
use bosun_runtime::cache::{scoped_api, ChildCache, MetaCache, PackedCache};
use bosun_runtime::controller::controller_owner;
use bosun_runtime::events::Events;
use bosun_runtime::manager::{ControllerContext, Operator, OperatorError};
use bosun_runtime::rbac::Rbac;
use bosun_runtime::status::StatusWriter;
use bosun_runtime::{Primary, Wiring};
use futures::future::BoxFuture;
use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentStatus, StatefulSet, StatefulSetSpec, StatefulSetStatus,
};
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimSpec, Service, VolumeResourceRequirements,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector::ObjectRef;
use kube::{Client, ResourceExt};

use crate::api::BookStore;
use crate::names::{CLAIM_SELECTOR, INSTANCE_LABEL, MANAGED_BY, MANAGED_BY_LABEL};
use crate::reconcile::reconcile;

pub const FIELD_MANAGER: &str = "bosun-bookstore";

pub struct BookStoreOperator;

/// What a reconcile reads and writes with, per watched namespace.
pub struct Context {
    pub client: Client,
    pub applier: Applier,
    pub status: StatusWriter,
    pub events: Events,
    pub deployments: PackedCache<Deployment>,
    pub statefulsets: PackedCache<StatefulSet>,
    pub services: MetaCache<Service>,
    pub claims: ChildCache<PersistentVolumeClaim>,
}

impl Operator for BookStoreOperator {
    fn name(&self) -> &str {
        "bookstore"
    }

    fn crds(&self) -> Vec<CustomResourceDefinition> {
        vec![crate::api::crd()]
    }

    fn rbac(&self) -> Rbac {
        crate::rbac::rbac()
    }

    fn run(&self, ctx: ControllerContext) -> BoxFuture<'static, Result<(), OperatorError>> {
        Box::pin(async move {
            let client = ctx.client.clone();
            ctx.run_controller(|ns| wire(&client, ns), reconcile).await;
            Ok(())
        })
    }
}

// Children are cached slimmed to what the pipeline reads (measured by `bench/heap`), and
// Deployments and StatefulSets packed (metadata, and the rest as JSON text): of
// their metadata, identity, owners, generation and deletion, and — only for a child without
// a controller — the two labels that map a child that lost its owner reference back to its
// BookStore (annotations and the rest go: the applier decides from the owned-field
// fingerprint the cache keeps beside each object); of their status, the replica counts; of
// the StatefulSet also its replicas (a scale-up checks the claims it will mount) and its
// claim template's size and class.
pub fn slim_meta(m: &mut ObjectMeta) {
    m.annotations = None;
    m.creation_timestamp = None;
    m.managed_fields = None;
    // Labels are read only when no controller is named (`owner_of`, and the reconcile's
    // `lost_owner`); two labels cost a whole B-tree node, ≈0.6 KB per cached child.
    if bosun_runtime::owner::controller(m).is_some() {
        m.labels = None;
    } else if let Some(labels) = m.labels.as_mut() {
        labels.retain(|k, _| k == MANAGED_BY_LABEL || k == INSTANCE_LABEL);
    }
}

pub fn strip_deployment(d: &mut Deployment) {
    slim_meta(&mut d.metadata);
    d.spec = None;
    d.status = d.status.take().map(|s| DeploymentStatus {
        replicas: s.replicas,
        ready_replicas: s.ready_replicas,
        updated_replicas: s.updated_replicas,
        observed_generation: s.observed_generation,
        ..Default::default()
    });
}

pub fn strip_statefulset(s: &mut StatefulSet) {
    slim_meta(&mut s.metadata);
    s.spec = s.spec.take().map(|spec| StatefulSetSpec {
        replicas: spec.replicas,
        volume_claim_templates: spec
            .volume_claim_templates
            .map(|ts| ts.into_iter().map(claim_template_size_and_class).collect()),
        ..Default::default()
    });
    s.status = s.status.take().map(|st| StatefulSetStatus {
        replicas: st.replicas,
        ready_replicas: st.ready_replicas,
        updated_replicas: st.updated_replicas,
        observed_generation: st.observed_generation,
        ..Default::default()
    });
}

/// A claim template's name, requests and class: what the resize decision compares.
fn claim_template_size_and_class(t: PersistentVolumeClaim) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: t.metadata.name,
            ..Default::default()
        },
        spec: t.spec.map(|s| PersistentVolumeClaimSpec {
            resources: s.resources.map(|r| VolumeResourceRequirements {
                requests: r.requests,
                ..Default::default()
            }),
            storage_class_name: s.storage_class_name,
            ..Default::default()
        }),
        status: None,
    }
}

pub fn keep_claim(_: &mut PersistentVolumeClaim) {}

/// The BookStore a child belongs to: its controller, or — for a child of bosun's that lost
/// its owner reference (which must then be repaired) — its instance label.
fn owner_of<K: kube::Resource>(child: K) -> Option<ObjectRef<BookStore>> {
    let meta = child.meta();
    if let Some(r) = controller_owner::<BookStore>(meta, &()) {
        return Some(r);
    }
    let labels = meta.labels.as_ref()?;
    if labels.get(MANAGED_BY_LABEL).map(String::as_str) != Some(MANAGED_BY) {
        return None;
    }
    let name = labels.get(INSTANCE_LABEL)?;
    Some(ObjectRef::<BookStore>::new(name).within(meta.namespace.as_deref()?))
}

/// The caches and triggers of one namespace (or all). Deployments, StatefulSets and Services
/// are watched without a label filter so that an object bosun did not create is seen (and
/// never taken over) without an extra request, and with the fingerprint of the fields bosun
/// owns, so that every drift is seen (see `bosun_runtime::apply`).
fn wire(client: &Client, ns: Option<&str>) -> Wiring<BookStore, Context> {
    let applier = Applier::new(FIELD_MANAGER);
    let status = StatusWriter::new(FIELD_MANAGER);
    // Memos forget what is deleted: children as their caches see them go, BookStores as
    // theirs does.
    let primary = Primary::watch(scoped_api(client.clone(), ns), (), Default::default())
        .forgetting(&status)
        .skip_status_only();
    let (deployments, dep_stream) =
        PackedCache::watch_owned(client.clone(), ns, "", strip_deployment, &applier);
    let (statefulsets, sts_stream) =
        PackedCache::watch_owned(client.clone(), ns, "", strip_statefulset, &applier);
    // Services are read for their metadata only: kept as such, fingerprinted from the whole
    // object on arrival.
    let (services, svc_stream) =
        MetaCache::<Service>::watch_owned(client.clone(), ns, "", slim_meta, &applier);
    let (claims, claim_stream) = ChildCache::watch(client.clone(), ns, CLAIM_SELECTOR, keep_claim);
    let context = Arc::new(Context {
        client: client.clone(),
        applier,
        status,
        events: Events::new(client.clone(), "bosun-bookstore"),
        deployments: deployments.clone(),
        statefulsets: statefulsets.clone(),
        services: services.clone(),
        claims: claims.clone(),
    });
    Wiring::new(primary, context)
        .watches(dep_stream, deployments.synced(), owner_of)
        .watches(sts_stream, statefulsets.synced(), owner_of)
        .watches(svc_stream, services.synced(), owner_of)
        // Claims carry no owner reference (data outlives its owner); map them by label.
        .watches(
            claim_stream,
            claims.synced(),
            |pvc: PersistentVolumeClaim| {
                let ns = pvc.namespace()?;
                let name = pvc.labels().get(INSTANCE_LABEL)?.clone();
                Some(ObjectRef::<BookStore>::new(&name).within(&ns))
            },
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::fixtures::{plan, sample};
    use crate::build::Children;
    use crate::resize::{claim_template, compare};
    use crate::status::{compute, Observed, Outcome, Wanted};
    use bosun_runtime::cache::Packed;
    use k8s_openapi::jiff::Timestamp;

    /// The slimmed children decide exactly as the whole ones: volume sizes and classes,
    /// status, and the owner of a child that lost its owner reference.
    #[test]
    fn slimmed_children_decide_as_whole_ones() {
        let mut bs = sample();
        bs.spec.book_db.storage_class_name = Some("fast".into());
        let p = plan(&bs);
        let children = Children::build(&p);
        let mut dep = children.deployment.clone();
        dep.metadata.generation = Some(2);
        dep.metadata.creation_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::UNIX_EPOCH),
        );
        dep.status = Some(DeploymentStatus {
            replicas: Some(1),
            ready_replicas: Some(1),
            updated_replicas: Some(1),
            observed_generation: Some(2),
            conditions: Some(vec![Default::default()]),
            ..Default::default()
        });
        let mut sts = children.statefulset.clone();
        sts.metadata.generation = Some(3);
        sts.status = Some(StatefulSetStatus {
            replicas: 1,
            ready_replicas: Some(1),
            updated_replicas: Some(1),
            observed_generation: Some(2),
            current_revision: Some("db-5d8f".into()),
            ..Default::default()
        });
        let (mut slim_dep, mut slim_sts) = (dep.clone(), sts.clone());
        strip_deployment(&mut slim_dep);
        strip_statefulset(&mut slim_sts);
        // Packed as the caches hold them, they decode to the same slimmed objects.
        assert_eq!(
            Packed::pack(slim_dep.clone())
                .and_then(|p| p.unpack())
                .expect("roundtrip"),
            slim_dep
        );
        assert_eq!(
            Packed::pack(slim_sts.clone())
                .and_then(|p| p.unpack())
                .expect("roundtrip"),
            slim_sts
        );
        assert!(
            slim_dep.metadata.labels.is_none(),
            "a controlled child keeps no labels"
        );
        assert!(
            slim_dep.metadata.annotations.is_none()
                && slim_dep
                    .status
                    .as_ref()
                    .is_some_and(|s| s.conditions.is_none())
        );

        for db_size in ["2Gi", "5Gi", "1Gi"] {
            let mut other = bs.clone();
            other.spec.book_db.db_size = db_size.into();
            for class in [Some("fast"), Some("slow"), None] {
                other.spec.book_db.storage_class_name = class.map(str::to_string);
                let q = plan(&other);
                assert_eq!(
                    format!(
                        "{:?}",
                        compare(&q, claim_template(&slim_sts), &[], Some("fast"))
                    ),
                    format!("{:?}", compare(&q, claim_template(&sts), &[], Some("fast"))),
                    "{db_size} {class:?}"
                );
            }
        }
        assert_eq!(
            slim_sts.spec.as_ref().and_then(|s| s.replicas),
            sts.spec.as_ref().and_then(|s| s.replicas)
        );
        let status = |d: &Deployment, s: &StatefulSet| {
            compute(
                &p.id,
                Wanted::of(&p),
                None,
                &Observed {
                    deployment: Some(d),
                    statefulset: Some(s),
                    claims: vec![],
                },
                &Outcome::Applied,
                Timestamp::UNIX_EPOCH,
            )
        };
        assert_eq!(status(&slim_dep, &slim_sts), status(&dep, &sts));

        // A controlled child maps back by its owner reference, labels or not.
        assert!(owner_of(dep.clone()).is_some());
        assert_eq!(owner_of(slim_dep.clone()), owner_of(dep.clone()));
        // A child whose owner reference was removed still maps back by its labels.
        let (mut orphan, mut slim_orphan) = (dep.clone(), dep.clone());
        orphan.metadata.owner_references = None;
        slim_orphan.metadata.owner_references = None;
        strip_deployment(&mut slim_orphan);
        assert!(owner_of(orphan.clone()).is_some());
        assert_eq!(owner_of(slim_orphan), owner_of(orphan));
    }
}
