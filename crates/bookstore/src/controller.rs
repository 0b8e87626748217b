//! The BookStore reconcile pipeline:
//!
//! 1. **fetch** — the BookStore comes from the watch cache; deletion runs [`cleanup`];
//! 2. **validate** — [`crate::validate`], pure;
//! 3. **build** — every child from [`crate::build`], pure;
//! 4. **guard** — never take over an object another owner holds, never reuse or touch
//!    another BookStore's claims, refuse shrink / class change ([`crate::resize::decide`]);
//! 5. **apply** — server-side apply, skipped when the cache shows the desired state;
//! 6. **expand** — grow claims, recreate the StatefulSet, restart resize-pending pods;
//! 7. **status** — conditions and counts, written only on change; an Event when a problem
//!    appears or changes.
use std::sync::Arc;
use std::time::Duration;

use bosun_runtime::apply::Applier;
use bosun_runtime::cache::{reflect, ChildCache, MetaCache, Synced};
use bosun_runtime::conditions::find;
use bosun_runtime::events::Events;
use bosun_runtime::manager::{log_unobserved, observe, ControllerContext, Operator, OperatorError};
use bosun_runtime::metrics::ControllerMetrics;
use bosun_runtime::status::StatusWriter;
use futures::future::BoxFuture;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Config as CtrlConfig, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

use crate::api::{BookStore, DataPolicy};
use crate::build::{self, Names, INSTANCE_LABEL, MANAGED_BY, MANAGED_BY_LABEL, NAME_LABEL};
use crate::error::{Error, Problem};
use crate::resize::{self, Step};
use crate::status::{compute, Observed, Outcome};
use crate::validate::validate;

pub const FIELD_MANAGER: &str = "bosun-bookstore";
/// Present only while `bookDB.dataPolicy: Delete` asks for the claims to go with the BookStore.
pub const FINALIZER: &str = "bookstore.bosun.dev/delete-data";

pub struct BookStoreOperator;

pub struct Context {
    pub client: Client,
    pub applier: Applier,
    pub status: StatusWriter,
    pub events: Events,
    pub metrics: ControllerMetrics,
    pub deployments: ChildCache<Deployment>,
    pub statefulsets: ChildCache<StatefulSet>,
    pub services: MetaCache<Service>,
    pub claims: ChildCache<PersistentVolumeClaim>,
}

impl Operator for BookStoreOperator {
    fn name(&self) -> &str {
        "bookstore"
    }

    fn run(&self, ctx: ControllerContext) -> BoxFuture<'static, Result<(), OperatorError>> {
        Box::pin(async move {
            ctx.run_per_namespace(|ns| controller(&ctx, ns)).await;
            Ok(())
        })
    }
}

// Children are cached slimmed to what the pipeline reads. Deployments, StatefulSets and
// Services are watched without a label filter so that an object bosun did not create is seen
// (and never taken over) without an extra request.
fn strip_deployment(d: &mut Deployment) {
    d.spec = None;
}
fn strip_statefulset(s: &mut StatefulSet) {
    s.spec = None;
}
fn keep_claim(_: &mut PersistentVolumeClaim) {}

/// One kube-runtime Controller for one namespace (or all).
fn controller(
    ctx: &ControllerContext,
    ns: Option<String>,
) -> (BoxFuture<'static, ()>, Vec<Synced>) {
    let client = ctx.client.clone();
    let nsr = ns.as_deref();
    let api: Api<BookStore> = match nsr {
        Some(n) => Api::namespaced(client.clone(), n),
        None => Api::all(client.clone()),
    };
    let (store, stream, bs_synced) = reflect(api, Default::default());
    let (deployments, dep_stream) = ChildCache::watch(client.clone(), nsr, "", strip_deployment);
    let (statefulsets, sts_stream) = ChildCache::watch(client.clone(), nsr, "", strip_statefulset);
    let (services, svc_stream) = MetaCache::<Service>::watch(client.clone(), nsr, "");
    let claim_labels = format!("{MANAGED_BY_LABEL}={MANAGED_BY},{NAME_LABEL}=bookstore");
    let (claims, claim_stream) = ChildCache::watch(client.clone(), nsr, &claim_labels, keep_claim);
    let synced = vec![
        bs_synced,
        deployments.synced().clone(),
        statefulsets.synced().clone(),
        services.synced().clone(),
        claims.synced().clone(),
    ];
    let context = Arc::new(Context {
        client: client.clone(),
        applier: Applier::new(FIELD_MANAGER),
        status: StatusWriter::new(FIELD_MANAGER),
        events: Events::new(client, "bosun-bookstore"),
        metrics: ctx.metrics.clone(),
        deployments,
        statefulsets,
        services,
        claims,
    });
    let metrics = ctx.metrics.clone();
    let cached = store.clone();
    let run = Controller::for_stream(stream, store)
        .owns_stream(dep_stream)
        .owns_stream(sts_stream)
        .owns_stream(svc_stream)
        // Claims carry no owner reference (data outlives its owner); map them by label.
        .watches_stream(claim_stream, |pvc: PersistentVolumeClaim| {
            let ns = pvc.namespace()?;
            let name = pvc.labels().get(INSTANCE_LABEL)?.clone();
            Some(ObjectRef::<BookStore>::new(&name).within(&ns))
        })
        .with_config(CtrlConfig::default().concurrency(ctx.concurrency))
        .graceful_shutdown_on(ctx.shutdown_signal())
        .run(reconcile, error_policy, context)
        .for_each(move |res| {
            metrics.set_cached_objects(cached.len());
            log_unobserved(&res);
            async {}
        });
    (Box::pin(run), synced)
}

pub async fn reconcile(bs: Arc<BookStore>, ctx: Arc<Context>) -> Result<Action, Error> {
    observe(&ctx.metrics, bs.as_ref(), async {
        if bs.meta().deletion_timestamp.is_some() {
            return cleanup(&bs, &ctx).await;
        }
        ensure_finalizer(&bs, &ctx).await?;
        let (outcome, failure) = match converge(&bs, &ctx).await {
            Ok(o) => (o, None),
            Err(e) => match e.problem().cloned() {
                Some(p) => (Outcome::Problem(p), Some(e)),
                None => return Err(e),
            },
        };
        let ready = publish_status(&bs, &ctx, &outcome).await?;
        match (failure, outcome) {
            (Some(e), _) => Err(e),
            (None, Outcome::Resizing(_)) => Ok(Action::requeue(Duration::from_secs(2))),
            // Still rolling out: children's events normally bring the next reconcile; a
            // requeue makes sure the status catches up even if one is missed.
            (None, _) if !ready => Ok(Action::requeue(Duration::from_secs(60))),
            (None, _) => Ok(Action::await_change()),
        }
    })
    .await
}

pub fn error_policy(_bs: Arc<BookStore>, err: &Error, _ctx: Arc<Context>) -> Action {
    match err {
        // Waiting for the user; a spec change triggers a reconcile anyway.
        Error::InvalidSpec(_) | Error::Refused(_) => Action::requeue(Duration::from_secs(300)),
        // The other owner may go away without an event reaching us.
        Error::Conflict(_) => Action::requeue(Duration::from_secs(30)),
        Error::Kube(kube::Error::Api(s)) if s.code == 422 => {
            Action::requeue(Duration::from_secs(300))
        }
        Error::Kube(_) => Action::requeue(Duration::from_secs(5)),
    }
}

/// A child may be written only if absent or controlled by this BookStore.
fn check_owner(
    bs: &BookStore,
    kind: &str,
    name: &str,
    meta: Option<ObjectMeta>,
) -> Result<(), Error> {
    let Some(meta) = meta else { return Ok(()) };
    let uid = bs.uid().unwrap_or_default();
    let owners = meta.owner_references.unwrap_or_default();
    let controller = owners.iter().find(|o| o.controller == Some(true));
    match controller {
        Some(o) if o.uid == uid => Ok(()),
        Some(o) => Err(Error::Conflict(Problem::new(
            "NameConflict",
            format!("{kind} {name} is already owned by {} {}; bosun never takes over another owner's objects", o.kind, o.name),
        ))),
        None => Err(Error::Conflict(Problem::new(
            "NameConflict",
            format!("{kind} {name} already exists and was not created by this BookStore; bosun never takes it over. Rename or remove it"),
        ))),
    }
}

async fn converge(bs: &BookStore, ctx: &Context) -> Result<Outcome, Error> {
    let plan = validate(bs).map_err(Error::InvalidSpec)?;
    let ns = bs.namespace().unwrap_or_default();
    let names: &Names = &plan.names;

    // Build (pure).
    let deployment = build::app_deployment::build(bs);
    let app_service = build::app_service::build(bs);
    let statefulset = build::db_statefulset::build(bs);
    let headless = build::db_services::headless(bs);
    let client_service = build::db_services::client(bs);

    // Guard ownership of every name before writing anything.
    let dep_meta = ctx.deployments.meta(&ns, &names.app);
    let sts_meta = ctx.statefulsets.meta(&ns, &names.db);
    check_owner(bs, "Deployment", &names.app, dep_meta.clone())?;
    check_owner(bs, "StatefulSet", &names.db, sts_meta.clone())?;
    for svc in [&names.app, &names.db_headless, &names.db_client] {
        check_owner(bs, "Service", svc, ctx.services.meta(&ns, svc))?;
    }

    // Data guards and the expansion decision.
    let all_claims = ctx.claims.all();
    let claims = resize::own_claims(bs, all_claims.iter().map(|c| c.as_ref()));
    let step = resize::decide(bs, &plan, sts_meta.as_ref())?;
    let mut resizing: Option<String> = None;
    let sts_terminating = sts_meta
        .as_ref()
        .is_some_and(|m| m.deletion_timestamp.is_some());
    if let Step::Expand { .. } = step {
        if !sts_terminating {
            let msg = resize::expand(
                &ctx.client,
                bs,
                names,
                &claims,
                sts_meta.as_ref().and_then(|m| m.uid.clone()),
            )
            .await?;
            ctx.events
                .publish(
                    &bs.object_ref(&()),
                    false,
                    "VolumeExpansionStarted",
                    "Resize",
                    &msg,
                )
                .await;
            resizing = Some(msg);
        }
    }

    // Apply (each write skipped when the cache shows it in place).
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), &ns);
    let services: Api<Service> = Api::namespaced(ctx.client.clone(), &ns);
    let sets: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), &ns);
    ctx.applier
        .apply(&deployments, &deployment, dep_meta.as_ref())
        .await
        .map_err(refused("Deployment", &names.app))?;
    for svc in [&app_service, &headless, &client_service] {
        let name = svc.name_any();
        ctx.applier
            .apply(&services, svc, ctx.services.meta(&ns, &name).as_ref())
            .await
            .map_err(refused("Service", &name))?;
    }
    if sts_terminating || resizing.is_some() {
        // The old StatefulSet is going away (orphaning its pods); create the new one after.
        return Ok(Outcome::Resizing(resizing.unwrap_or_else(|| {
            format!(
                "waiting for the old StatefulSet {} to be removed before recreating it",
                names.db
            )
        })));
    }
    if sts_meta.is_none() {
        let cached: Vec<&PersistentVolumeClaim> = all_claims.iter().map(|c| c.as_ref()).collect();
        if let Some(msg) = resize::guard_claims(&ctx.client, bs, &cached).await? {
            ctx.events
                .publish(&bs.object_ref(&()), false, "ClaimsAdopted", "Adopt", &msg)
                .await;
        }
    }
    ctx.applier
        .apply(&sets, &statefulset, sts_meta.as_ref())
        .await
        .map_err(refused("StatefulSet", &names.db))?;

    // Finish file system resizes, one pod at a time.
    match resize::restart_pending(&ctx.client, bs, names, &claims).await? {
        Some(resize::Restart::Restarted { pod, message }) => {
            ctx.events
                .publish_related(
                    &bs.object_ref(&()),
                    Some(pod),
                    false,
                    "PodRestarted",
                    "Resize",
                    &message,
                )
                .await;
            return Ok(Outcome::Resizing(message));
        }
        Some(resize::Restart::Waiting(message)) => return Ok(Outcome::Resizing(message)),
        None => {}
    }
    let small = claims
        .iter()
        .filter(|c| crate::status::claim_capacity(c).is_some_and(|b| b < plan.db_bytes))
        .count();
    if small > 0 {
        return Ok(Outcome::Resizing(format!(
            "waiting for {small} volume(s) to reach {}",
            bs.spec.book_db.db_size
        )));
    }
    Ok(Outcome::Applied)
}

/// The API server's validation refusing a child built from the spec is the user's to fix:
/// report it (reason `ChildRejected`) instead of retrying it as a transient error.
fn refused(kind: &'static str, name: &str) -> impl FnOnce(kube::Error) -> Error {
    let name = name.to_string();
    move |e| match e {
        kube::Error::Api(s) if s.code == 422 || s.code == 400 => Error::InvalidSpec(Problem::new(
            "ChildRejected",
            format!(
                "the API server refused {kind} {name} built from this spec: {}",
                s.message
            ),
        )),
        e => Error::Kube(e),
    }
}

/// Computes and writes the status; returns whether the BookStore is Ready.
async fn publish_status(bs: &BookStore, ctx: &Context, outcome: &Outcome) -> Result<bool, Error> {
    let ns = bs.namespace().unwrap_or_default();
    let names = Names::of(bs);
    let dep = ctx.deployments.get(&ns, &names.app);
    let sts = ctx.statefulsets.get(&ns, &names.db);
    let all_claims = ctx.claims.all();
    let observed = Observed {
        deployment: dep.as_deref().filter(|d| controlled_by(bs, d.meta())),
        statefulset: sts.as_deref().filter(|s| controlled_by(bs, s.meta())),
        claims: resize::own_claims(bs, all_claims.iter().map(|c| c.as_ref())),
    };
    let status = compute(bs, &observed, outcome, Timestamp::now());

    // An Event when a problem appears or changes; not on every reconcile.
    let before = bs
        .status
        .as_ref()
        .and_then(|s| find(&s.conditions, "Degraded"))
        .cloned();
    if let Outcome::Problem(p) = outcome {
        let same = before
            .as_ref()
            .is_some_and(|c| c.status == "True" && c.reason == p.reason && c.message == p.message);
        if !same {
            ctx.events
                .publish(&bs.object_ref(&()), true, p.reason, "Reconcile", &p.message)
                .await;
        }
    } else if before.is_some_and(|c| c.status == "True") {
        ctx.events
            .publish(
                &bs.object_ref(&()),
                false,
                "Recovered",
                "Reconcile",
                "the earlier problem is resolved",
            )
            .await;
    }
    let api: Api<BookStore> = Api::namespaced(ctx.client.clone(), &ns);
    ctx.status
        .write_if_changed(&api, bs, bs.status.as_ref(), &status)
        .await?;
    Ok(bosun_runtime::conditions::is_true(
        &status.conditions,
        "Ready",
    ))
}

fn controlled_by(bs: &BookStore, meta: &ObjectMeta) -> bool {
    let uid = bs.uid();
    meta.owner_references.as_ref().is_some_and(|o| {
        o.iter()
            .any(|o| o.controller == Some(true) && Some(&o.uid) == uid.as_ref())
    })
}

/// Adds the data-deletion finalizer while the spec asks for it, removes it otherwise.
async fn ensure_finalizer(bs: &BookStore, ctx: &Context) -> Result<(), Error> {
    let want = bs.spec.book_db.data_policy == DataPolicy::Delete;
    let finalizers = bs.finalizers().to_vec();
    let has = finalizers.iter().any(|f| f == FINALIZER);
    if want == has {
        return Ok(());
    }
    let api: Api<BookStore> =
        Api::namespaced(ctx.client.clone(), &bs.namespace().unwrap_or_default());
    let mut next: Vec<String> = finalizers
        .iter()
        .filter(|f| *f != FINALIZER)
        .cloned()
        .collect();
    if want {
        next.push(FINALIZER.to_string());
    }
    // Guarded by the resourceVersion: concurrent finalizer edits by others are not lost.
    let patch = json!({"metadata": {"finalizers": next, "resourceVersion": bs.resource_version()}});
    api.patch(
        &bs.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}

/// Deletion: children go with the BookStore through owner references; claims only when
/// the spec asked (`dataPolicy: Delete`), and then only this BookStore's (label + UID).
async fn cleanup(bs: &BookStore, ctx: &Context) -> Result<Action, Error> {
    if !bs.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(Action::await_change());
    }
    if bs.spec.book_db.data_policy == DataPolicy::Delete {
        let n = resize::delete_claims(&ctx.client, bs).await?;
        ctx.events
            .publish(
                &bs.object_ref(&()),
                false,
                "DataDeleted",
                "Delete",
                format!("deleted {n} volume claim(s) as bookDB.dataPolicy asks"),
            )
            .await;
    }
    let next: Vec<String> = bs
        .finalizers()
        .iter()
        .filter(|f| *f != FINALIZER)
        .cloned()
        .collect();
    let api: Api<BookStore> =
        Api::namespaced(ctx.client.clone(), &bs.namespace().unwrap_or_default());
    let patch = json!({"metadata": {"finalizers": next, "resourceVersion": bs.resource_version()}});
    match api
        .patch(
            &bs.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => return Err(e.into()),
    }
    ctx.status.forget(&bs.uid().unwrap_or_default());
    Ok(Action::await_change())
}
