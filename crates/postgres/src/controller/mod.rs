//! The PostgresCluster controller. Each cycle is one pass of the pipeline:
//!
//! 1. **fetch** the cluster (the watch hands it in);
//! 2. **validate** it into the [`Plan`] (a refused spec: condition + Event, nothing touched;
//!    the claims are listed first, their sizes bound a shrink);
//! 3. **observe**: the credentials Secret and the Service (made once), the pods and claims,
//!    and each instance's `/state` at its pod IP ([`observe`]);
//! 4. **decide** the one action of this cycle ([`crate::lifecycle::decide`], pure), and
//!    grow the claims below `spec.storage.size` ([`storage`]);
//! 5. **record** the decision in the status ([`status`], pure) *before* acting, plus an Event;
//! 6. **act** ([`act`]), then requeue: soon while anything is in motion, at a slower pace
//!    when healthy (the instances are polled: a lost primary is noticed within that period,
//!    or at once when its pod changes).
pub mod act;
pub mod backup;
pub mod build;
pub mod fence;
pub mod metrics;
pub mod observe;
pub mod reason;
pub mod status;
pub mod storage;

use std::io::Read;
use std::sync::Arc;
use std::time::Duration;

use bosun_runtime::cache::{scoped_api, MetaCache};
use bosun_runtime::conditions::{condition, set_condition};
use bosun_runtime::error::{Categorized, ErrorCategory};
use bosun_runtime::events::Events;
use bosun_runtime::manager::{ControllerContext, Operator, OperatorError};
use bosun_runtime::rbac::{rule, Rbac};
use bosun_runtime::status::StatusWriter;
use bosun_runtime::{apply::Applier, Primary, Wiring};
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::runtime::controller::Action as Requeue;
use kube::runtime::reflector::Store;
use kube::{Client, CustomResourceExt, Resource, ResourceExt};

use crate::api::{Phase, PostgresCluster, PostgresClusterStatus};
use crate::instance::client::ClientError;
use crate::lifecycle::{self, Action, Wait};
use crate::validate::{self, Observed, Plan};

use reason::Reason;

pub const FIELD_MANAGER: &str = "bosun-postgres";

/// The operator in the registry (`--operators postgres`).
pub struct PostgresOperator;

pub struct Context {
    client: Client,
    status: StatusWriter,
    events: Events,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("{0}")]
    Instance(#[from] ClientError),
    /// A step that needs something not there yet (a pod IP, a running primary).
    #[error("not yet: {0}")]
    NotYet(String),
    #[error("the credentials Secret is missing the key {0}")]
    Secret(&'static str),
    #[error("not supported: {0}")]
    Unsupported(String),
    /// PostgreSQL refused a value of `postgresql.parameters` (the others are applied): the
    /// status says which, and the reconcile goes on polling (a failover is never held up).
    #[error("PostgreSQL refused spec.postgresql.parameters: {0}")]
    ParameterRefused(String),
    /// No kernel randomness for the cluster's passwords and token: nothing is made from a
    /// weaker source.
    #[error("cannot read random bytes for the credentials from {path}: {reason}")]
    NoRandomness { path: String, reason: String },
}

impl Categorized for Error {
    fn category(&self) -> ErrorCategory {
        match self {
            Error::Kube(_) => ErrorCategory::Api,
            Error::Unsupported(_) | Error::Secret(_) | Error::ParameterRefused(_) => {
                ErrorCategory::InvalidSpec
            }
            Error::Instance(_) | Error::NotYet(_) | Error::NoRandomness { .. } => {
                ErrorCategory::Transient
            }
        }
    }
}

/// Requeue periods: in motion, and healthy.
const BUSY: Duration = Duration::from_secs(1);
const IDLE: Duration = Duration::from_secs(5);

impl Operator for PostgresOperator {
    fn name(&self) -> &str {
        "postgres"
    }

    fn crds(&self) -> Vec<CustomResourceDefinition> {
        vec![PostgresCluster::crd()]
    }

    fn rbac(&self) -> Rbac {
        Rbac {
            namespaced: vec![
                rule(
                    "lukeb0nd.com",
                    &["postgresclusters"],
                    // patch: the sharder labels each cluster with the replica working it.
                    &["get", "list", "watch", "patch"],
                ),
                rule("lukeb0nd.com", &["postgresclusters/status"], &["patch"]),
                rule(
                    "",
                    &["pods", "persistentvolumeclaims"],
                    &["get", "list", "watch", "create", "patch", "delete"],
                ),
                rule("", &["secrets", "services"], &["get", "create"]),
                rule("policy", &["poddisruptionbudgets"], &["get", "create"]),
            ],
            cluster: vec![
                // Whether a StorageClass allows expansion, before growing the claims.
                rule("storage.k8s.io", &["storageclasses"], &["get", "list"]),
                // Whether an unanswering primary's node is Ready: then its kubelet kills
                // what runs there before the pod object goes, which proves it stopped.
                rule("", &["nodes"], &["get"]),
            ],
        }
    }

    fn run(&self, ctx: ControllerContext) -> BoxFuture<'static, Result<(), OperatorError>> {
        // The caches of every watched namespace, read at each scrape.
        let stores: Arc<std::sync::Mutex<Vec<Store<PostgresCluster>>>> = Arc::default();
        let read = stores.clone();
        ctx.metrics.add_text_fn("postgres", move || {
            let stores = read.lock().unwrap_or_else(|p| p.into_inner());
            let clusters: Vec<Arc<PostgresCluster>> =
                stores.iter().flat_map(|s| s.state()).collect();
            metrics::openmetrics(clusters.iter().map(|c| c.as_ref()))
        });
        Box::pin(async move {
            let client = ctx.client.clone();
            ctx.run_controller(
                |ns| {
                    let (wiring, store) = wire(&client, ns);
                    stores.lock().unwrap_or_else(|p| p.into_inner()).push(store);
                    wiring
                },
                reconcile,
            )
            .await;
            Ok(())
        })
    }
}

fn slim(m: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) {
    m.annotations = None;
    m.managed_fields = None;
}

/// The controller's wiring, and its cache of clusters (which the metrics read).
fn wire(
    client: &Client,
    ns: Option<&str>,
) -> (Wiring<PostgresCluster, Context>, Store<PostgresCluster>) {
    let status = StatusWriter::new(FIELD_MANAGER);
    let primary = Primary::watch(scoped_api(client.clone(), ns), (), Default::default())
        .forgetting(&status)
        .skip_status_only();
    let store = primary.store();
    // Pod changes (a deletion, a readiness flip) trigger a cycle at once.
    let applier = Applier::new(FIELD_MANAGER);
    let (pods, pod_stream) =
        MetaCache::<Pod>::watch_owned(client.clone(), ns, build::CLUSTER_LABEL, slim, &applier);
    let context = Arc::new(Context {
        client: client.clone(),
        status,
        events: Events::new(client.clone(), FIELD_MANAGER),
    });
    (
        Wiring::new(primary, context).owns(pod_stream, pods.synced()),
        store,
    )
}

/// Credentials the operator uses itself.
struct Creds {
    token: String,
    superuser: String,
}

async fn reconcile(pc: Arc<PostgresCluster>, ctx: Arc<Context>) -> Result<Requeue, Error> {
    let prev = pc.status.clone().unwrap_or_default();
    let api: Api<PostgresCluster> =
        Api::namespaced(ctx.client.clone(), &pc.namespace().unwrap_or_default());
    let ns = pc.namespace().unwrap_or_default();
    let claims = observe::claims(&ctx.client, &ns, &pc.name_any()).await?;
    let observed = Observed::of(
        pc.status.as_ref(),
        storage::largest_request(&pc.name_any(), &claims),
    );
    // A refused edit never stops the cluster's reconcile (failover included): it goes on
    // with the last accepted spec, and the SpecAccepted condition says why (issue 32, M1).
    let (plan, refused) = match validate::plan(&pc, &observed) {
        Ok(p) => (p, None),
        Err(invalid) => match validate::last_good(&pc, &observed) {
            Some(p) => (p, Some(invalid)),
            None => return refuse(&pc, &ctx, &api, &prev, invalid).await,
        },
    };
    let Some(owner) = pc.controller_owner_ref(&()) else {
        return Ok(Requeue::await_change());
    };
    let creds = if plan.paused {
        None
    } else {
        ensure_service(&ctx.client, &plan, &owner).await?;
        ensure_disruption_budget(&ctx.client, &plan, &owner).await?;
        ensure_backup_claim(&ctx.client, &plan).await?;
        Some(ensure_secret(&ctx.client, &plan, &owner).await?)
    };
    // The token proves the poll is the operator's: a primary that has lost its replicas and
    // then hears from no operator fences itself (see crate::instance::isolation). A paused
    // cluster is polled with it too, read without writing anything.
    let token = match &creds {
        Some(c) => Some(c.token.clone()),
        None => read_token(&ctx.client, &plan).await,
    };
    let seen = observe::observe(&ctx.client, &plan, &claims, token.as_deref()).await?;
    let now = Timestamp::now();
    let lost_for = if seen
        .states
        .values()
        .any(|s| s.role == crate::instance::StateRole::Primary)
    {
        None
    } else {
        Some(
            prev.primary_lost_since
                .as_deref()
                .and_then(|s| s.parse::<Timestamp>().ok())
                .map(|t| now.duration_since(t).unsigned_abs())
                .unwrap_or_default(),
        )
    };
    let template = build::template_hash(&plan);
    let mut observation = seen.observation(&plan, &prev, lost_for, &template);
    if observation.latest_serial == 0 {
        observation.restore_blocked = restore_blocked(&ctx.client, &plan).await?;
    }
    let action = lifecycle::decide(&plan, &observation);
    let mut desired = status::build(&plan, pc.meta().generation, &prev, &seen, &action, now);
    status::parameters(&plan, &seen, pc.meta().generation, &prev, &mut desired, now);
    status::rollout(
        &plan,
        &observation,
        pc.meta().generation,
        &prev,
        &mut desired,
        now,
    );
    // The primary's report of the store and the archiver.
    let primary_state = seen
        .states
        .values()
        .find(|s| s.role == crate::instance::StateRole::Primary);
    let primary_backup = primary_state.and_then(|s| s.backup.clone());
    if plan.backup.is_some() || prev.backup.is_some() {
        desired.backup = Some(backup::status(
            prev.backup.as_ref(),
            primary_backup.as_ref(),
        ));
        backup::conditions(
            &mut desired,
            &prev,
            primary_backup.as_ref(),
            pc.meta().generation,
            now,
        );
        if plan.backup.is_some() && primary_state.is_some() && primary_backup.is_none() {
            backup::not_mounted(&mut desired, &prev, pc.meta().generation, now);
        }
    }
    let members: std::collections::BTreeSet<u32> = seen.pods.keys().copied().collect();
    backup::archive_reads(
        &mut desired,
        &prev,
        &seen.states,
        &members,
        plan.backup.is_some(),
        pc.meta().generation,
        now,
    );
    spec_accepted(&pc, &ctx, &prev, &mut desired, refused.as_ref(), now).await;
    if !plan.paused {
        resize(&pc, &ctx, &plan, &claims, &prev, &mut desired, now).await?;
    }
    // The decision is recorded before it is carried out.
    ctx.status
        .write_if_changed(&api, &pc, pc.status.as_ref(), &desired)
        .await?;
    announce(&pc, &ctx, &plan, &action).await;
    announce_backups(&pc, &ctx, prev.backup.as_ref(), desired.backup.as_ref()).await;
    announce_store_refused(&pc, &ctx, &prev, &desired).await;
    announce_archive_reads(&pc, &ctx, &prev, &desired).await;
    if let Some(creds) = creds {
        let act = act::Act {
            client: &ctx.client,
            plan: &plan,
            owner: &owner,
            seen: &seen,
            token: &creds.token,
            superuser_password: &creds.superuser,
            current_primary: observation.current_primary,
        };
        if let Action::FencePostgres { serial } = &action {
            fence_postgres(&pc, &ctx, &api, &act, *serial, &desired).await?;
            return Ok(Requeue::requeue(BUSY));
        }
        match act.run(&action).await {
            Ok(()) => {}
            // Not an error of the reconcile: its backoff would slow the polls that notice a
            // lost primary. The condition says why until the spec changes.
            Err(Error::ParameterRefused(why)) => {
                refused_parameters(&pc, &ctx, &api, &desired, why).await?;
                return Ok(Requeue::requeue(IDLE));
            }
            Err(e) => {
                let text = e.to_string();
                ctx.events
                    .publish(
                        &pc.object_ref(&()),
                        true,
                        Reason::ActionFailed.as_str(),
                        "Reconcile",
                        format!("{}: {text}", status::describe(&plan, &action)),
                    )
                    .await;
                return Err(e);
            }
        }
        sync_role_labels(&ctx.client, &plan, &seen).await?;
        if action == Action::Wait(Wait::Healthy) {
            act.drop_orphan_slots().await;
            if let Some(seen_backup) = &primary_backup {
                start_backup(&pc, &ctx, &api, &plan, &act, &desired, seen_backup).await?;
            }
        }
    }
    Ok(match action {
        Action::Wait(Wait::Healthy) | Action::Wait(Wait::Paused) | Action::Fail(_) => {
            Requeue::requeue(IDLE)
        }
        _ => Requeue::requeue(BUSY),
    })
}

/// Fences the old primary through its PostgreSQL (its `Fencing` already recorded in
/// `desired`), then records what was found there, which the next cycle's decision reads.
async fn fence_postgres(
    pc: &PostgresCluster,
    ctx: &Context,
    api: &Api<PostgresCluster>,
    act: &act::Act<'_>,
    serial: u32,
    desired: &PostgresClusterStatus,
) -> Result<(), Error> {
    let (state, message) = act
        .fence_postgres(serial, desired.last_primary.as_ref())
        .await?;
    tracing::warn!(cluster = %pc.name_any(), ?state, %message, "old primary fenced through PostgreSQL");
    let mut after = desired.clone();
    if let Some(l) = after.last_primary.as_mut() {
        l.sql_fence = Some(state);
        l.sql_fence_message = Some(message.clone());
    }
    ctx.status
        .write_if_changed(api, pc, Some(desired), &after)
        .await?;
    ctx.events
        .publish(
            &pc.object_ref(&()),
            true,
            Reason::Fencing.as_str(),
            "Reconcile",
            message,
        )
        .await;
    Ok(())
}

/// The `SpecAccepted` condition and `status.acceptedSpec`: an accepted spec is recorded; a
/// refused one is named (one Event when the refusal is new) while the last accepted one
/// stays in force.
async fn spec_accepted(
    pc: &PostgresCluster,
    ctx: &Context,
    prev: &PostgresClusterStatus,
    desired: &mut PostgresClusterStatus,
    refused: Option<&validate::Invalid>,
    now: Timestamp,
) {
    let c = match refused {
        None => {
            desired.accepted_spec = serde_json::to_string(&pc.spec).ok();
            condition(
                "SpecAccepted",
                true,
                "Accepted",
                "the spec is accepted and in force".to_string(),
                pc.meta().generation,
            )
        }
        Some(invalid) => {
            let reason = match invalid {
                validate::Invalid::MajorVersionChange { .. } => Reason::MajorUpgradeUnsupported,
                _ => Reason::InvalidSpec,
            };
            desired.accepted_spec = prev.accepted_spec.clone();
            condition(
                "SpecAccepted",
                false,
                reason.as_str(),
                format!(
                    "{invalid}; the cluster runs on the last accepted spec until this is fixed"
                ),
                pc.meta().generation,
            )
        }
    };
    let new_refusal = !c.status.eq("True")
        && !prev
            .conditions
            .iter()
            .any(|p| p.type_ == c.type_ && p.message == c.message);
    if new_refusal {
        ctx.events
            .publish(
                &pc.object_ref(&()),
                true,
                c.reason.as_str(),
                "Validate",
                c.message.clone(),
            )
            .await;
    }
    set_condition(&mut desired.conditions, &prev.conditions, c, now);
}

/// A refused parameter value: the `ParametersApplied` condition names it (an Event the
/// first time), written after the status of the cycle.
async fn refused_parameters(
    pc: &PostgresCluster,
    ctx: &Context,
    api: &Api<PostgresCluster>,
    written: &PostgresClusterStatus,
    why: String,
) -> Result<(), Error> {
    let mut after = written.clone();
    set_condition(
        &mut after.conditions,
        &written.conditions,
        condition(
            "ParametersApplied",
            false,
            Reason::ParameterRefused.as_str(),
            format!("PostgreSQL refused spec.postgresql.parameters: {why}"),
            pc.meta().generation,
        ),
        Timestamp::now(),
    );
    if ctx
        .status
        .write_if_changed(api, pc, Some(written), &after)
        .await?
    {
        ctx.events
            .publish(
                &pc.object_ref(&()),
                true,
                Reason::ParameterRefused.as_str(),
                "Reconcile",
                format!("PostgreSQL refused spec.postgresql.parameters: {why}"),
            )
            .await;
    }
    Ok(())
}

/// Grows the data claims to `spec.storage.size` (see [`storage`]): the `StorageResized`
/// condition, and an Event when the volumes grow or cannot.
async fn resize(
    pc: &PostgresCluster,
    ctx: &Context,
    plan: &Plan,
    claims: &[PersistentVolumeClaim],
    prev: &PostgresClusterStatus,
    desired: &mut PostgresClusterStatus,
    now: Timestamp,
) -> Result<(), Error> {
    let outcome = storage::grow(&ctx.client, plan, claims).await?;
    let had = prev
        .conditions
        .iter()
        .any(|c| c.type_ == storage::CONDITION);
    let Some(c) = storage::condition_of(plan, claims, &outcome, had, pc.meta().generation) else {
        return Ok(());
    };
    let event = match &outcome {
        storage::Outcome::Grew(_) => Some((false, c.message.clone())),
        // Once per refusal, not every cycle.
        storage::Outcome::NotExpandable(_)
            if !prev
                .conditions
                .iter()
                .any(|p| p.type_ == c.type_ && p.reason == c.reason && p.message == c.message) =>
        {
            Some((true, c.message.clone()))
        }
        _ => None,
    };
    if let Some((warning, message)) = event {
        ctx.events
            .publish(&pc.object_ref(&()), warning, &c.reason, "Resize", message)
            .await;
    }
    set_condition(&mut desired.conditions, &prev.conditions, c, now);
    Ok(())
}

/// Starts a base backup on the primary when one is due, then records what started it.
async fn start_backup(
    pc: &PostgresCluster,
    ctx: &Context,
    api: &Api<PostgresCluster>,
    plan: &Plan,
    act: &act::Act<'_>,
    desired: &PostgresClusterStatus,
    seen: &crate::instance::BackupState,
) -> Result<(), Error> {
    let request = pc
        .annotations()
        .get(backup::REQUEST_ANNOTATION)
        .map(String::as_str);
    let since = pc
        .meta()
        .creation_timestamp
        .as_ref()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(&t.0.to_string()).ok())
        .map(|t| t.to_utc())
        .unwrap_or_else(chrono::Utc::now);
    let Some(trigger) = backup::due(
        plan,
        request,
        desired.backup.as_ref(),
        seen,
        since,
        chrono::Utc::now(),
    ) else {
        return Ok(());
    };
    act.start_backup().await?;
    ctx.events
        .publish(
            &pc.object_ref(&()),
            false,
            Reason::BackupStarted.as_str(),
            "Backup",
            match &trigger {
                backup::Trigger::Request(r) => format!("base backup requested ({r}) started"),
                backup::Trigger::Schedule(t) => format!("scheduled base backup ({t}) started"),
                backup::Trigger::First => "the first base backup started".into(),
            },
        )
        .await;
    let mut after = desired.clone();
    after.backup = Some(backup::started(
        desired.backup.clone().unwrap_or_default(),
        &trigger,
    ));
    ctx.status
        .write_if_changed(api, pc, Some(desired), &after)
        .await?;
    Ok(())
}

/// Events for backups that completed or failed since the last cycle.
async fn announce_backups(
    pc: &PostgresCluster,
    ctx: &Context,
    prev: Option<&crate::api::BackupStatus>,
    now: Option<&crate::api::BackupStatus>,
) {
    let Some(now) = now else { return };
    let before = prev.cloned().unwrap_or_default();
    if now.last_successful_backup.is_some()
        && now.last_successful_backup != before.last_successful_backup
    {
        ctx.events
            .publish(
                &pc.object_ref(&()),
                false,
                Reason::BackupSucceeded.as_str(),
                "Backup",
                format!(
                    "base backup completed at {}",
                    now.last_successful_backup.as_deref().unwrap_or_default()
                ),
            )
            .await;
    }
    if now.last_failed_backup.is_some() && now.last_failed_backup != before.last_failed_backup {
        ctx.events
            .publish(
                &pc.object_ref(&()),
                true,
                Reason::BackupFailed.as_str(),
                "Backup",
                format!(
                    "base backup failed at {}: {}",
                    now.last_failed_backup.as_deref().unwrap_or_default(),
                    now.last_failed_backup_message
                        .as_deref()
                        .unwrap_or("no reason reported")
                ),
            )
            .await;
    }
}

/// A warning Event when the store turns out to be another cluster's (once, when the
/// condition first says so; the condition's message names the fix).
async fn announce_store_refused(
    pc: &PostgresCluster,
    ctx: &Context,
    prev: &PostgresClusterStatus,
    now: &PostgresClusterStatus,
) {
    let refused = |s: &PostgresClusterStatus| {
        s.conditions
            .iter()
            .find(|c| {
                c.type_ == "ContinuousArchiving"
                    && c.reason == Reason::StoreOwnedByAnotherCluster.as_str()
            })
            .map(|c| c.message.clone())
    };
    if let (Some(message), None) = (refused(now), refused(prev)) {
        ctx.events
            .publish(
                &pc.object_ref(&()),
                true,
                Reason::StoreOwnedByAnotherCluster.as_str(),
                "Backup",
                message,
            )
            .await;
    }
}

/// One Event when replicas start failing to read the backup store (a warning naming them),
/// and one when they read it again. The message changes as a replica asks for other
/// segments; only the turn is announced.
async fn announce_archive_reads(
    pc: &PostgresCluster,
    ctx: &Context,
    prev: &PostgresClusterStatus,
    now: &PostgresClusterStatus,
) {
    let of = |s: &PostgresClusterStatus| {
        s.conditions
            .iter()
            .find(|c| c.type_ == backup::ARCHIVE_READABLE)
            .map(|c| (c.status == "True", c.message.clone()))
    };
    let (warning, reason, message) = match (of(prev), of(now)) {
        (was, Some((false, message))) if was.as_ref().is_none_or(|(ok, _)| *ok) => {
            (true, Reason::ArchiveReadFailing, message)
        }
        (Some((false, _)), Some((true, message))) => (false, Reason::ArchiveReadable, message),
        _ => return,
    };
    ctx.events
        .publish(
            &pc.object_ref(&()),
            warning,
            reason.as_str(),
            "Backup",
            message,
        )
        .await;
}

/// The backup volume's claim, made once (never owned: it outlives the cluster).
async fn ensure_backup_claim(client: &Client, plan: &Plan) -> Result<(), Error> {
    let Some(claim) = build::backup_claim(plan) else {
        return Ok(());
    };
    let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &plan.namespace);
    if api
        .get_opt(&build::backup_claim_name(&plan.name))
        .await?
        .is_some()
    {
        return Ok(());
    }
    match api.create(&PostParams::default(), &claim).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Why a bootstrap from a backup cannot start: the source's backup volume is not there.
async fn restore_blocked(client: &Client, plan: &Plan) -> Result<Option<String>, Error> {
    let validate::BootstrapPlan::Recovery {
        store: validate::StorePlan::Volume { .. },
        source_cluster,
        ..
    } = &plan.bootstrap
    else {
        return Ok(None);
    };
    let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &plan.namespace);
    let claim = build::backup_claim_name(source_cluster);
    Ok(match api.get_opt(&claim).await? {
        Some(_) => None,
        None => Some(format!(
            "no backup of cluster {source_cluster} to restore: its backup volume claim {claim} does not exist in namespace {}",
            plan.namespace
        )),
    })
}

/// An Event for every change the cycle makes, and for the waits that hold a failover back
/// (repeats are folded into one Event's series).
async fn announce(pc: &PostgresCluster, ctx: &Context, plan: &Plan, action: &Action) {
    let (warning, reason) = match action {
        // Waits that hold a failover back say what they wait for.
        Action::Wait(Wait::PrimaryTerminating { .. }) => (true, Reason::PrimaryTerminating),
        Action::Wait(Wait::PrimaryIsolating { .. }) => (true, Reason::PrimaryLost),
        Action::Wait(_) => return,
        Action::Fail(_) => (true, Reason::Failed),
        Action::CreateSeed { .. } => (false, Reason::CreatingSeed),
        Action::AddReplica { .. } => (false, Reason::AddingReplica),
        Action::RemoveReplica { .. } => (false, Reason::RemovingReplica),
        Action::SetSynchronous { .. } => (false, Reason::SettingSynchronous),
        Action::StartPod { .. } => (false, Reason::RestartingInstance),
        Action::RemoveMember { .. } => (true, Reason::RemovingMember),
        Action::Fence { .. } | Action::FencePostgres { .. } => (true, Reason::Fencing),
        Action::Unfence { .. } => (false, Reason::Unfencing),
        Action::BeginSwitchover { .. } => (false, Reason::SwitchingOver),
        Action::Promote { .. } => (true, Reason::Promoting),
        Action::Follow { .. } => (false, Reason::Rejoining),
        // Its data is replaced: a user should see that, and why.
        Action::Reclone { .. } => (true, Reason::Recloning),
        Action::SetParameters { .. } => (false, Reason::SettingParameters),
        Action::RollInstance { .. } => (false, Reason::RollingUpdate),
    };
    ctx.events
        .publish(
            &pc.object_ref(&()),
            warning,
            reason.as_str(),
            "Reconcile",
            status::describe(plan, action),
        )
        .await;
}

/// A refused spec: the reason in the status and an Event; nothing else is touched.
async fn refuse(
    pc: &PostgresCluster,
    ctx: &Context,
    api: &Api<PostgresCluster>,
    prev: &PostgresClusterStatus,
    invalid: validate::Invalid,
) -> Result<Requeue, Error> {
    let message = invalid.to_string();
    let reason = match invalid {
        validate::Invalid::MajorVersionChange { .. } => Reason::MajorUpgradeUnsupported,
        _ => Reason::InvalidSpec,
    };
    let mut desired = prev.clone();
    desired.phase = Some(Phase::Failed);
    desired.phase_reason = Some(message.clone());
    desired.observed_generation = pc.meta().generation;
    // The scale subresource's selector: an empty one is refused by the API server.
    desired.selector = build::selector(&pc.name_any());
    desired.control_paused = pc.spec.paused;
    let mut conditions = prev.conditions.clone();
    set_condition(
        &mut conditions,
        &prev.conditions,
        condition(
            "Ready",
            false,
            reason.as_str(),
            message.clone(),
            pc.meta().generation,
        ),
        Timestamp::now(),
    );
    desired.conditions = conditions;
    if ctx
        .status
        .write_if_changed(api, pc, pc.status.as_ref(), &desired)
        .await?
    {
        ctx.events
            .publish(
                &pc.object_ref(&()),
                true,
                reason.as_str(),
                "Validate",
                message,
            )
            .await;
    }
    Ok(Requeue::await_change())
}

async fn ensure_service(
    client: &Client,
    plan: &Plan,
    owner: &k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
) -> Result<(), Error> {
    let api: Api<Service> = Api::namespaced(client.clone(), &plan.namespace);
    if api
        .get_opt(&build::service_name(&plan.name))
        .await?
        .is_some()
    {
        return Ok(());
    }
    match api
        .create(&PostParams::default(), &build::service(plan, owner))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The PodDisruptionBudget, made once (nothing in it follows the spec).
async fn ensure_disruption_budget(
    client: &Client,
    plan: &Plan,
    owner: &k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
) -> Result<(), Error> {
    let api: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &plan.namespace);
    if api.get_opt(&plan.name).await?.is_some() {
        return Ok(());
    }
    match api
        .create(
            &PostParams::default(),
            &build::disruption_budget(plan, owner),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The Secret, made once with random values; its token and superuser password.
async fn ensure_secret(
    client: &Client,
    plan: &Plan,
    owner: &k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
) -> Result<Creds, Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), &plan.namespace);
    let name = build::secret_name(&plan.name);
    let secret = match api.get_opt(&name).await? {
        Some(s) => s,
        None => {
            let mut values = Vec::new();
            for _ in 0..build::SECRET_KEYS.len() {
                values.push(random_secret()?);
            }
            let fresh = build::secret(plan, owner, values);
            match api.create(&PostParams::default(), &fresh).await {
                Ok(s) => s,
                Err(kube::Error::Api(s)) if s.code == 409 => api.get(&name).await?,
                Err(e) => return Err(e.into()),
            }
        }
    };
    let get = |key: &'static str| {
        secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .and_then(|v| String::from_utf8(v.0.clone()).ok())
            .filter(|v| !v.is_empty())
            .ok_or(Error::Secret(key))
    };
    Ok(Creds {
        token: get(build::KEY_TOKEN)?,
        superuser: get(build::KEY_SUPERUSER)?,
    })
}

/// The API token from the cluster's Secret, if it exists (nothing is made).
async fn read_token(client: &Client, plan: &Plan) -> Option<String> {
    let api: Api<Secret> = Api::namespaced(client.clone(), &plan.namespace);
    let secret = api.get_opt(&build::secret_name(&plan.name)).await.ok()??;
    secret
        .data?
        .get(build::KEY_TOKEN)
        .and_then(|v| String::from_utf8(v.0.clone()).ok())
        .filter(|v| !v.is_empty())
}

/// 32 random bytes from the kernel, hex: passwords and the token.
fn random_secret() -> Result<String, Error> {
    random_secret_from(std::path::Path::new("/dev/urandom"))
}

/// The kernel's randomness or an error: a password derived from the time would be guessable.
fn random_secret_from(path: &std::path::Path) -> Result<String, Error> {
    let mut b = [0u8; 32];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|e| Error::NoRandomness {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// The role label of each pod follows the role its instance reports (the Service selects the
/// primary by it).
async fn sync_role_labels(
    client: &Client,
    plan: &Plan,
    seen: &observe::Snapshot,
) -> Result<(), Error> {
    for (serial, state) in &seen.states {
        let role = match state.role {
            crate::instance::StateRole::Primary => "primary",
            crate::instance::StateRole::Replica => "replica",
            _ => continue,
        };
        let Some(pod) = seen.pods.get(serial) else {
            continue;
        };
        if pod.role_label.as_deref() != Some(role) {
            act::label_role(
                client,
                &plan.namespace,
                &build::instance_name(&plan.name, *serial),
                role,
            )
            .await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod randomness_tests {
    use super::*;

    #[test]
    fn credentials_are_never_made_without_kernel_randomness() {
        let missing = std::path::Path::new("/nonexistent/bosun-no-urandom");
        match random_secret_from(missing) {
            Err(Error::NoRandomness { path, .. }) => assert!(path.contains("bosun-no-urandom")),
            other => panic!("a weaker source was used: {other:?}"),
        }
        let fresh = random_secret().expect("the kernel's randomness");
        assert_eq!(fresh.len(), 64);
        assert_ne!(fresh, random_secret().expect("again"));
    }
}
