//! The BookStore operator as the runtime sees it: what it serves (the CRD), what it needs
//! granted ([`crate::rbac`]), and what it watches in each namespace. The pipeline itself is in
//! [`crate::reconcile`].
use std::sync::Arc;

use bosun_runtime::apply::Applier;
use bosun_runtime::cache::{scoped_api, ChildCache, MetaCache};
use bosun_runtime::controller::controller_owner;
use bosun_runtime::events::Events;
use bosun_runtime::manager::{ControllerContext, Operator, OperatorError};
use bosun_runtime::rbac::Rbac;
use bosun_runtime::status::StatusWriter;
use bosun_runtime::{Primary, Wiring};
use futures::future::BoxFuture;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet, StatefulSetSpec};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::runtime::reflector::ObjectRef;
use kube::{Client, CustomResourceExt, ResourceExt};

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
    pub deployments: ChildCache<Deployment>,
    pub statefulsets: ChildCache<StatefulSet>,
    pub services: MetaCache<Service>,
    pub claims: ChildCache<PersistentVolumeClaim>,
}

impl Operator for BookStoreOperator {
    fn name(&self) -> &str {
        "bookstore"
    }

    fn crds(&self) -> Vec<CustomResourceDefinition> {
        vec![BookStore::crd()]
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

// Children are cached slimmed to what the pipeline reads: metadata and status, and of the
// StatefulSet also its replicas (a scale-up checks the claims it will mount) and its claim
// template (the current volume size and class).
fn strip_deployment(d: &mut Deployment) {
    d.spec = None;
}
fn strip_statefulset(s: &mut StatefulSet) {
    s.spec = s.spec.take().map(|spec| StatefulSetSpec {
        replicas: spec.replicas,
        volume_claim_templates: spec.volume_claim_templates,
        ..Default::default()
    });
}
fn keep_claim(_: &mut PersistentVolumeClaim) {}

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
    let primary =
        Primary::watch(scoped_api(client.clone(), ns), (), Default::default()).forgetting(&status);
    let (deployments, dep_stream) =
        ChildCache::watch_owned(client.clone(), ns, "", strip_deployment, &applier);
    let (statefulsets, sts_stream) =
        ChildCache::watch_owned(client.clone(), ns, "", strip_statefulset, &applier);
    // Services are read for their metadata only: kept as such, fingerprinted from the whole
    // object on arrival.
    let (services, svc_stream) =
        MetaCache::<Service>::watch_owned(client.clone(), ns, "", &applier);
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
