//! The BookStore reconcile pipeline, one named step each:
//!
//! 1. **finalize** a BookStore being deleted ([`finalize`]): children go by owner reference;
//!    claims only when `dataPolicy: Delete` asked (then the finalizer is released);
//! 2. **validate** the spec into the [`Plan`] (pure);
//! 3. **keep the finalizer** while `dataPolicy: Delete` asks for it;
//! 4. **build** every child from the plan (pure);
//! 5. **guard ownership**: never write a child another owner holds or someone else created;
//! 6. **resize the volumes**: grow every claim in use below `dbSize`, recreate the
//!    StatefulSet when its claim template differs; refuse shrink and class change, judged
//!    from the claims as well as the template;
//! 7. **apply** the app Deployment and the three Services (skipped when in place);
//! 8. **apply the StatefulSet**, after checking, when it is created or scaled up, that the
//!    claims it would mount by name are this BookStore's;
//! 9. **finish a resize**: restart pods whose volume waits for it, one at a time;
//! 10. **publish the status** (only on change) and an Event when a problem appears.
use std::sync::Arc;
use std::time::Duration;

use bosun_runtime::conditions::{find, is_true};
use bosun_runtime::owner::{applied_by, controlled_by, holder, set_finalizer, Holder};
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use crate::api::{BookStore, DataPolicy};
use crate::build::Children;
use crate::claims::{self, capacity, own_claims};
use crate::error::{Error, Problem};
use crate::names::{INSTANCE_LABEL, MANAGED_BY, MANAGED_BY_LABEL};
use crate::operator::{Context, FIELD_MANAGER};
use crate::reason::{ConditionType, EventReason, Reason};
use crate::resize::{self, Restart};
use crate::status::{compute, Observed, Outcome, Wanted};
use crate::validate::{validate, Identity, Plan};

/// Present only while `bookDB.dataPolicy: Delete` asks for the claims to go with the BookStore.
pub const FINALIZER: &str = "bookstore.bosun.dev/delete-data";

pub async fn reconcile(bs: Arc<BookStore>, ctx: Arc<Context>) -> Result<Action, Error> {
    if bs.meta().deletion_timestamp.is_some() {
        return finalize(&bs, &ctx).await;
    }
    let plan = validate(&bs);
    let result = match &plan {
        Ok(plan) => converge(&bs, plan, &ctx)
            .await
            .map_err(|e| e.reported(None)),
        Err(problem) => Err(Error::InvalidSpec(problem.clone())),
    };
    let (outcome, failure) = match result {
        Ok(o) => (o, None),
        Err(e) => match e.problem().cloned() {
            Some(p) => (Outcome::Problem(p), Some(e)),
            None => return Err(e),
        },
    };
    let ready = publish_status(&bs, plan.as_ref().ok(), &ctx, &outcome).await?;
    match (failure, outcome) {
        (Some(e), _) => Err(e),
        (None, Outcome::Resizing(_)) => Ok(Action::requeue(Duration::from_secs(2))),
        // Still rolling out: children's events normally bring the next reconcile; a requeue
        // makes sure the status catches up even if one is missed.
        (None, _) if !ready => Ok(Action::requeue(Duration::from_secs(60))),
        (None, _) => Ok(Action::await_change()),
    }
}

/// Steps 3-9.
async fn converge(bs: &BookStore, plan: &Plan, ctx: &Context) -> Result<Outcome, Error> {
    let api: Api<BookStore> = Api::namespaced(ctx.client.clone(), &plan.id.namespace);
    set_finalizer(
        &api,
        bs,
        FINALIZER,
        plan.db.data_policy == DataPolicy::Delete,
    )
    .await?;
    let children = Children::build(plan);
    let seen = Seen::of(plan, ctx);
    guard_ownership(plan, &seen)?;
    let all_claims = ctx.claims.all();
    let claims = own_claims(&plan.id, all_claims.iter().map(|c| c.as_ref()));
    let recreating = resize_volumes(bs, plan, ctx, &seen, &claims).await?;
    apply_app_and_services(plan, ctx, &children, &seen).await?;
    if let Some(message) = recreating.or_else(|| seen.statefulset_going(plan)) {
        return Ok(Outcome::Resizing(message));
    }
    apply_statefulset(bs, plan, ctx, &children, &seen).await?;
    finish_resize(bs, plan, ctx, &claims).await
}

/// The cached state of every child.
struct Seen {
    deployment: Option<ObjectMeta>,
    statefulset: Option<Arc<StatefulSet>>,
    /// Its metadata with the owned-field fingerprint (what the applier reads).
    statefulset_meta: Option<ObjectMeta>,
    services: [(String, Option<ObjectMeta>); 3],
}

impl Seen {
    fn of(plan: &Plan, ctx: &Context) -> Seen {
        let (ns, n) = (&plan.id.namespace, &plan.id.names);
        let svc = |name: &String| (name.clone(), ctx.services.meta(ns, name));
        Seen {
            deployment: ctx.deployments.meta(ns, &n.app),
            statefulset: ctx.statefulsets.get(ns, &n.db),
            statefulset_meta: ctx.statefulsets.meta(ns, &n.db),
            services: [svc(&n.app), svc(&n.db_headless), svc(&n.db_client)],
        }
    }

    fn statefulset_meta(&self) -> Option<&ObjectMeta> {
        self.statefulset_meta.as_ref()
    }

    /// The old StatefulSet is going away (orphaning its pods): the new one comes after.
    fn statefulset_going(&self, plan: &Plan) -> Option<String> {
        self.statefulset_meta()
            .is_some_and(|m| m.deletion_timestamp.is_some())
            .then(|| {
                format!(
                    "waiting for the old StatefulSet {} to be removed before recreating it",
                    plan.id.names.db
                )
            })
    }
}

/// Step 5: a child may be written only if absent or controlled by this BookStore — or if it
/// is this BookStore's child whose owner reference someone removed: bosun wrote it (its field
/// manager owns fields there) and it carries this BookStore's instance label. The apply then
/// puts the owner reference back.
fn guard_ownership(plan: &Plan, seen: &Seen) -> Result<(), Error> {
    let n = &plan.id.names;
    let mut checks = vec![
        ("Deployment", &n.app, seen.deployment.as_ref()),
        ("StatefulSet", &n.db, seen.statefulset_meta()),
    ];
    for (name, meta) in &seen.services {
        checks.push(("Service", name, meta.as_ref()));
    }
    for (kind, name, meta) in checks {
        let message = match holder(meta, &plan.id.uid) {
            Holder::Absent | Holder::Us => continue,
            Holder::Unowned if meta.is_some_and(|m| lost_owner(plan, m)) => continue,
            Holder::Other { kind: ok, name: on } => format!(
                "{kind} {name} is already owned by {ok} {on}; bosun never takes over another owner's objects"
            ),
            Holder::Unowned => format!(
                "{kind} {name} already exists and was not created by this BookStore; bosun never takes it over. Rename or remove it"
            ),
        };
        return Err(Error::Conflict(Problem::new(Reason::NameConflict, message)));
    }
    Ok(())
}

/// A child bosun wrote for this BookStore that no longer names it as its controller.
fn lost_owner(plan: &Plan, meta: &ObjectMeta) -> bool {
    let labels = meta.labels.as_ref();
    let label = |k: &str| labels.and_then(|l| l.get(k)).map(String::as_str);
    applied_by(meta, FIELD_MANAGER)
        && label(MANAGED_BY_LABEL) == Some(MANAGED_BY)
        && label(INSTANCE_LABEL) == Some(plan.id.names.instance.as_str())
}

/// Step 6: grows the claims in use that are below the plan (on every reconcile: a change
/// made while the StatefulSet was being recreated, or while bosun was stopped, is caught
/// up), and recreates the StatefulSet when its claim template differs from the plan.
/// Returns the message when the StatefulSet is being recreated.
async fn resize_volumes(
    bs: &BookStore,
    plan: &Plan,
    ctx: &Context,
    seen: &Seen,
    claims: &[&PersistentVolumeClaim],
) -> Result<Option<String>, Error> {
    let volumes = resize::decide(&ctx.client, plan, seen.statefulset.as_deref(), claims).await?;
    let mut steps = Vec::new();
    if !volumes.grow.is_empty() {
        steps.push(resize::grow(&ctx.client, plan, claims, &volumes.grow).await?);
    }
    let going = seen
        .statefulset_meta()
        .is_some_and(|m| m.deletion_timestamp.is_some());
    let recreating = volumes.recreate && seen.statefulset.is_some() && !going;
    if recreating {
        let sts_uid = seen.statefulset_meta().and_then(|m| m.uid.clone());
        steps.push(resize::recreate(&ctx.client, plan, sts_uid).await?);
    }
    if steps.is_empty() {
        return Ok(None);
    }
    let message = steps.join("; ");
    let reason = EventReason::VolumeExpansionStarted.as_str();
    publish_about(ctx, bs, false, reason, "Resize", &message).await;
    Ok(recreating.then_some(message))
}

/// Step 7.
async fn apply_app_and_services(
    plan: &Plan,
    ctx: &Context,
    children: &Children,
    seen: &Seen,
) -> Result<(), Error> {
    let ns = &plan.id.namespace;
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), ns);
    ctx.applier
        .apply(&deployments, &children.deployment, seen.deployment.as_ref())
        .await
        .map_err(refused("Deployment", &plan.id.names.app))?;
    let services: Api<Service> = Api::namespaced(ctx.client.clone(), ns);
    for (svc, (name, meta)) in children.services().into_iter().zip(&seen.services) {
        ctx.applier
            .apply(&services, svc, meta.as_ref())
            .await
            .map_err(refused("Service", name))?;
    }
    Ok(())
}

/// Step 8.
async fn apply_statefulset(
    bs: &BookStore,
    plan: &Plan,
    ctx: &Context,
    children: &Children,
    seen: &Seen,
) -> Result<(), Error> {
    let replicas = match &seen.statefulset {
        None => Some(0),
        Some(s) => s.spec.as_ref().and_then(|s| s.replicas),
    };
    if let Some(from) = replicas.filter(|r| *r < plan.db.replicas) {
        if let Some(msg) = claims::guard_names(&ctx.client, plan, from).await? {
            publish_about(
                ctx,
                bs,
                false,
                EventReason::ClaimsAdopted.as_str(),
                "Adopt",
                &msg,
            )
            .await;
        }
    }
    let sets: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), &plan.id.namespace);
    ctx.applier
        .apply(&sets, &children.statefulset, seen.statefulset_meta())
        .await
        .map_err(refused("StatefulSet", &plan.id.names.db))?;
    Ok(())
}

/// Step 9: restart, one at a time, pods whose volume waits for it; then wait until every
/// volume has the planned size.
async fn finish_resize(
    bs: &BookStore,
    plan: &Plan,
    ctx: &Context,
    claims: &[&PersistentVolumeClaim],
) -> Result<Outcome, Error> {
    match resize::restart_pending(&ctx.client, plan, claims).await? {
        Some(Restart::Restarted { pod, message }) => {
            ctx.events
                .publish_related(
                    &bs.object_ref(&()),
                    Some(pod),
                    false,
                    EventReason::PodRestarted.as_str(),
                    "Resize",
                    &message,
                )
                .await;
            return Ok(Outcome::Resizing(message));
        }
        Some(Restart::Waiting(message)) => return Ok(Outcome::Resizing(message)),
        None => {}
    }
    let small = resize::in_use(plan, claims)
        .iter()
        .filter(|c| capacity(c).is_some_and(|b| b < plan.db.size.bytes))
        .count();
    if small > 0 {
        return Ok(Outcome::Resizing(format!(
            "waiting for {small} volume(s) to reach {}",
            plan.db.size.text
        )));
    }
    Ok(Outcome::Applied)
}

/// The API server's validation refusing a child built from the spec is the user's to fix:
/// report it (reason `ChildRejected`) instead of retrying it as a transient error. A create
/// that finds the name taken (the cache could not show it yet) is a name conflict.
fn refused(kind: &'static str, name: &str) -> impl FnOnce(kube::Error) -> Error {
    let name = name.to_string();
    move |e| {
        match e {
        kube::Error::Api(s) if s.code == 422 || s.code == 400 => Error::InvalidSpec(Problem::new(
            Reason::ChildRejected,
            format!(
                "the API server refused {kind} {name} built from this spec: {}",
                s.message
            ),
        )),
        kube::Error::Api(s) if s.is_already_exists() => {
            Error::Conflict(Problem::new(
                Reason::NameConflict,
                format!(
                    "{kind} {name} already exists and was not created by this BookStore; bosun never takes it over. Rename or remove it"
                ),
            ))
        }
        e => Error::Kube(e).reported(Some(&format!("{kind} {name}"))),
    }
    }
}

/// Step 10: computes and writes the status; returns whether the BookStore is Ready. For a
/// spec that failed validation the status still reports what exists.
async fn publish_status(
    bs: &BookStore,
    plan: Option<&Plan>,
    ctx: &Context,
    outcome: &Outcome,
) -> Result<bool, Error> {
    let id = plan
        .map(|p| p.id.clone())
        .unwrap_or_else(|| Identity::of(bs));
    let want = plan.map(Wanted::of).unwrap_or(Wanted {
        app: bs.spec.book_app.replicas,
        db: bs.spec.book_db.replicas,
    });
    let dep = ctx.deployments.get(&id.namespace, &id.names.app);
    let sts = ctx.statefulsets.get(&id.namespace, &id.names.db);
    let all_claims = ctx.claims.all();
    let own = own_claims(&id, all_claims.iter().map(|c| c.as_ref()));
    let observed = Observed {
        deployment: dep.as_deref().filter(|d| controlled_by(d.meta(), &id.uid)),
        statefulset: sts.as_deref().filter(|s| controlled_by(s.meta(), &id.uid)),
        // The volumes in use: claims left by a scale-down are not the BookStore's size.
        claims: match plan {
            Some(p) => resize::in_use(p, &own),
            None => own,
        },
    };
    let status = compute(
        &id,
        want,
        bs.status.as_ref(),
        &observed,
        outcome,
        Timestamp::now(),
    );
    announce_problem(bs, ctx, outcome).await;
    let api: Api<BookStore> = Api::namespaced(ctx.client.clone(), &id.namespace);
    ctx.status
        .write_if_changed(&api, bs, bs.status.as_ref(), &status)
        .await?;
    Ok(is_true(&status.conditions, ConditionType::Ready.as_str()))
}

/// An Event when a problem appears or changes, and when it is resolved; not on every
/// reconcile.
async fn announce_problem(bs: &BookStore, ctx: &Context, outcome: &Outcome) {
    let before = bs
        .status
        .as_ref()
        .and_then(|s| find(&s.conditions, ConditionType::Degraded.as_str()))
        .filter(|c| c.status == "True");
    match outcome {
        Outcome::Problem(p) => {
            let same =
                before.is_some_and(|c| c.reason == p.reason.as_str() && c.message == p.message);
            if !same {
                publish_about(ctx, bs, true, p.reason.as_str(), "Reconcile", &p.message).await;
            }
        }
        _ if before.is_some() => {
            let note = "the earlier problem is resolved";
            publish_about(
                ctx,
                bs,
                false,
                EventReason::Recovered.as_str(),
                "Reconcile",
                note,
            )
            .await;
        }
        _ => {}
    }
}

async fn publish_about(
    ctx: &Context,
    bs: &BookStore,
    warning: bool,
    reason: &str,
    action: &str,
    note: &str,
) {
    ctx.events
        .publish(&bs.object_ref(&()), warning, reason, action, note)
        .await;
}

/// Step 1: children go with the BookStore through owner references; claims only when the
/// spec asked (`dataPolicy: Delete`), and then only this BookStore's (label + UID).
async fn finalize(bs: &BookStore, ctx: &Context) -> Result<Action, Error> {
    if !bs.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(Action::await_change());
    }
    let id = Identity::of(bs);
    if bs.spec.book_db.data_policy == DataPolicy::Delete {
        let n = claims::delete_all(&ctx.client, &id.namespace, &id.names.instance, &id.uid).await?;
        let note = format!("deleted {n} volume claim(s) as bookDB.dataPolicy asks");
        publish_about(
            ctx,
            bs,
            false,
            EventReason::DataDeleted.as_str(),
            "Delete",
            &note,
        )
        .await;
    }
    let api: Api<BookStore> = Api::namespaced(ctx.client.clone(), &id.namespace);
    set_finalizer(&api, bs, FINALIZER, false).await?;
    ctx.status.forget(&id.uid);
    Ok(Action::await_change())
}
