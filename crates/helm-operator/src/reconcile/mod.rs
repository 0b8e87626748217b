//! One custom resource's release, reconciled:
//!
//! 1. **uninstall** when it is being deleted ([`uninstall`]: the stored release's pre-delete
//!    hooks, its objects but those kept by policy, its post-delete hooks, the records), then
//!    release the finalizer;
//! 2. keep the **finalizer** (`helm.sdk.operatorframework.io/uninstall-release`) before the
//!    first write of a release whose uninstall has work the garbage collector cannot do
//!    (delete hooks, objects no owner reference covers, `uninstall-wait`), so nothing is
//!    orphaned by a delete during an install; every other release is owned whole by the
//!    custom resource ([`keep_finalizer`]);
//! 3. build the **values** (spec + the watch's overrides) and **render** the chart (parsed
//!    once per watch entry) at the deployed revision;
//! 4. if the rendered release is what was deployed (its digest, kept in the status), **sync**:
//!    every object applied only where the cache shows drift — no release record is read,
//!    nothing is written when nothing changed;
//! 5. otherwise **install or upgrade**: a new revision recorded once its outcome is known
//!    (deployed or failed), CRDs of `crds/` created first, pre hooks, every object applied in Helm's
//!    order, objects the release no longer renders pruned (never those with
//!    `helm.sh/resource-policy: keep`), post hooks. A failure removes what the attempt
//!    added to the last deployed revision (helm-operator uninstalls a failed install and
//!    rolls a failed upgrade back), leaves the rest in place, and says so;
//! 6. compute **Ready** from the rendered workloads' status and write the **status** once,
//!    only if it changed.
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use bosun_helm::render::manifest::{sort_manifests, split_documents, Manifest};
use bosun_helm::render::RenderOptions;
use bosun_helm::value::Data;
use bosun_runtime::dynamic::Resolved;
use bosun_runtime::owner::set_finalizer;
use bosun_watches::host::{owner_kind_value, Host, Next, OWNER_KIND_LABEL};
use futures::StreamExt;
use kube::api::{Api, DeleteParams};
use kube::core::{DynamicObject, GroupVersionKind};
use kube::{Resource, ResourceExt};
use sha2::{Digest, Sha256};

use crate::error::{write_error, Error};
use crate::hooks::{self, Event, Hook};
use crate::objects::{self, Desired, ReleaseOwner};
use crate::ready;
use crate::release::{self, Release};
use crate::status::{ConditionType as C, DeployedRelease, HelmStatus, InventoryItem, Reason as R};
use crate::storage::{beyond_history, Secrets, Storage};
use crate::values;
use crate::HelmFlavor;
use bosun_runtime::error::{Categorized, ErrorCategory};

pub const FINALIZER: &str = "helm.sdk.operatorframework.io/uninstall-release";
/// operator-sdk's older finalizer name, still honoured on deletion.
pub const LEGACY_FINALIZER: &str = "uninstall-helm-release";
pub const PERIOD_ANNOTATION: &str = "helm.sdk.operatorframework.io/reconcile-period";
pub const UPGRADE_FORCE_ANNOTATION: &str = "helm.sdk.operatorframework.io/upgrade-force";
pub const UNINSTALL_WAIT_ANNOTATION: &str = "helm.sdk.operatorframework.io/uninstall-wait";

mod uninstall;

type Ctx = Host<HelmFlavor>;

/// One object of a render, with its kind as served.
struct Item {
    desired: Desired,
    resolved: Resolved,
}

/// One render of the release.
struct Plan {
    revision: i64,
    manifest: String,
    items: Vec<Item>,
    hooks: Vec<Hook>,
    notes: String,
    crds: Vec<(String, String)>,
    digest: String,
    /// The functions it called whose output changes on every render.
    nondeterministic: Vec<&'static str>,
    /// What applying it wrote.
    written: Written,
}

fn now() -> String {
    release::go_time(k8s_openapi::jiff::Timestamp::now())
}

fn owner_of(cr: &DynamicObject, host: &Ctx) -> Result<ReleaseOwner, Error> {
    let owner = cr
        .controller_owner_ref(&host.resource)
        .ok_or_else(|| Error::Manifest("the custom resource has no name or UID yet".into()))?;
    Ok(ReleaseOwner {
        release: cr.name_any(),
        namespace: cr.namespace().unwrap_or_default(),
        chart: host.flavor.chart.name().to_string(),
        owner,
        owner_type: bosun_runtime::dynamic::primary_resource_type::<DynamicObject>(&host.resource),
        child_label: (OWNER_KIND_LABEL.to_string(), owner_kind_value(&host.entry)),
        force: annotation_true(cr, UPGRADE_FORCE_ANNOTATION),
    })
}

fn annotation_true(cr: &DynamicObject, key: &str) -> bool {
    cr.annotations().get(key).is_some_and(|v| v == "true")
}

pub async fn reconcile(cr: Arc<DynamicObject>, host: Arc<Ctx>) -> Result<Next, Error> {
    // The cache keeps it packed (bosun_watches::packed).
    let cr = bosun_watches::packed::unpacked(cr);
    let api = host.api_of(&cr);
    let cr = live_record(cr, &host, &api).await?;
    let previous = HelmStatus::of(&cr.data);
    if cr.meta().deletion_timestamp.is_some() {
        return uninstall::uninstall(&cr, &host, &api, &previous).await;
    }
    if !host.namespaced {
        return refuse_cluster_scoped(&cr, &host, &api, &previous).await;
    }
    let mut status = HelmStatus {
        conditions: previous.conditions.clone(),
        deployed_release: previous.deployed_release.clone(),
        observed_generation: cr.metadata.generation,
        inventory: previous.inventory.clone(),
        failed_digest: None,
    };
    let t = now();
    status.set(&previous, C::Initialized, true, None, None, &t);
    let ns = cr.namespace().unwrap_or_default();
    let result = match crate::values_from::read(&host.client, &ns, &host.entry.values_from).await {
        Ok(sourced) => converge(&cr, &host, &previous, &mut status, &sourced)
            .await
            .map_err(|e| e.masked(&sourced)),
        Err(e) => Err(e.into()),
    };
    let next = match &result {
        Ok(plan) => {
            status.remove(C::Irreconcilable);
            status.remove(C::ReleaseFailed);
            let waiting = readiness(&host, &plan.items, &plan.written).await?;
            match waiting {
                None => status.set(&previous, C::Ready, true, Some(R::AllReady), None, &t),
                Some(msg) => {
                    status.set(&previous, C::Ready, false, Some(R::NotReady), Some(msg), &t)
                }
            }
            if status.is_true(C::Ready) {
                Next::AwaitChange
            } else {
                Next::After(Duration::from_secs(60))
            }
        }
        Err(e) => {
            let msg = e.to_string();
            record_failure(&mut status, &previous, e, &t);
            status.set(
                &previous,
                C::Ready,
                false,
                Some(R::NotReady),
                Some(format!("the release failed: {msg}")),
                &t,
            );
            Next::AwaitChange
        }
    };
    if let Err(e) = &result {
        let already = previous
            .condition(C::ReleaseFailed)
            .or(previous.condition(C::Irreconcilable));
        if already.and_then(|c| c.message.as_deref()) != Some(e.to_string().as_str()) {
            // The extensions' refusals are their own Event series: the recorder folds repeats
            // of one reason into the first Event's text, which would hide a later failure.
            let reason = match e {
                Error::ValuesFrom(_) => R::ValuesFromError.as_str(),
                Error::StoredVersionDropped { .. } => R::StoredVersionDropped.as_str(),
                _ => "ReleaseFailed",
            };
            publish(&host, &cr, true, reason, &e.to_string()).await;
        }
    }
    host.status
        .write_if_changed_with(&api, &host.resource, cr.as_ref(), Some(&previous), &status)
        .await?;
    result.map(|_| next)
}

/// The object to reconcile, read from the API server when the cached one cannot be trusted:
///
/// * the cache has not shown this operator's last status write yet ([`StatusWriter::behind`]:
///   the reconcile its own finalizer write brings, say). Deciding from the stale status would
///   stamp the conditions again with new times — a second status write per install, ≈500 at
///   1000 custom resources in the benchmark. One GET, only in that race.
/// * Without release records (`--release-storage=none`) the status is the record: a
///   reconcile handed an object whose status does not yet speak for the current generation
///   could install again, running its hooks twice (review M7). One GET after each spec
///   change, none on a resync.
///
/// [`StatusWriter::behind`]: bosun_runtime::status::StatusWriter::behind
async fn live_record(
    cr: Arc<DynamicObject>,
    host: &Ctx,
    api: &Api<DynamicObject>,
) -> Result<Arc<DynamicObject>, Error> {
    let observed = HelmStatus::of(&cr.data).observed_generation;
    let unrecorded = host.flavor.storage == Storage::None
        && cr.meta().deletion_timestamp.is_none()
        && observed != cr.metadata.generation;
    if !unrecorded && !host.status.behind(cr.as_ref()) {
        return Ok(cr);
    }
    match api.get_opt(&cr.name_any()).await? {
        Some(live) => Ok(Arc::new(live)),
        None => Ok(cr),
    }
}

/// A cluster-scoped custom resource: a Helm release lives in a namespace (its records, its
/// namespaced objects), so there is nothing sensible to install. helm-operator sends such
/// requests to an empty namespace; bosun says so once, in the status and an Event, and
/// touches nothing (no finalizer either, so deleting it is never blocked).
async fn refuse_cluster_scoped(
    cr: &DynamicObject,
    host: &Ctx,
    api: &Api<DynamicObject>,
    previous: &HelmStatus,
) -> Result<Next, Error> {
    let e = Error::Unsupported(format!(
        "{} is cluster-scoped: Helm-based operators install a release per custom resource in          its namespace; make the CRD namespaced (scope: Namespaced)",
        host.entry.describe()
    ));
    let mut status = previous.clone();
    status.observed_generation = cr.metadata.generation;
    record_failure(&mut status, previous, &e, &now());
    if previous
        .condition(C::Irreconcilable)
        .and_then(|c| c.message.as_deref())
        != Some(e.to_string().as_str())
    {
        publish(host, cr, true, "ReleaseFailed", &e.to_string()).await;
    }
    host.status
        .write_if_changed_with(api, &host.resource, cr, Some(previous), &status)
        .await?;
    Ok(Next::AwaitChange)
}

/// The failure condition of a failed reconcile, as helm-operator sets it: `Irreconcilable`
/// (ReconcileError) when the release could not even be built or kept in place — values, a
/// cluster-scoped resource, a conflict while syncing — else `ReleaseFailed` (InstallError or
/// UpgradeError). The other one goes: a condition left from an earlier failure would show
/// an old message beside the new one.
fn record_failure(status: &mut HelmStatus, previous: &HelmStatus, e: &Error, t: &str) {
    let msg = e.to_string();
    match e {
        // The same refusal as last time: its condition stays as it was set (its reason too).
        Error::FailedBefore(_)
            if status.condition(C::ReleaseFailed).is_some()
                || status.condition(C::Irreconcilable).is_some() => {}
        Error::StoredVersionDropped { .. } => {
            status.remove(C::Irreconcilable);
            status.set(
                previous,
                C::ReleaseFailed,
                true,
                Some(R::StoredVersionDropped),
                Some(msg),
                t,
            );
        }
        Error::ValuesFrom(_) => {
            status.remove(C::ReleaseFailed);
            status.set(
                previous,
                C::Irreconcilable,
                true,
                Some(R::ValuesFromError),
                Some(msg),
                t,
            );
        }
        _ if e.irreconcilable() => {
            status.remove(C::ReleaseFailed);
            status.set(
                previous,
                C::Irreconcilable,
                true,
                Some(R::ReconcileError),
                Some(msg),
                t,
            );
        }
        _ => {
            let reason = if status.deployed_release.is_some() {
                R::UpgradeError
            } else {
                R::InstallError
            };
            status.remove(C::Irreconcilable);
            status.set(previous, C::ReleaseFailed, true, Some(reason), Some(msg), t);
        }
    }
}

async fn publish(host: &Ctx, cr: &DynamicObject, warning: bool, reason: &str, note: &str) {
    host.events
        .publish(
            &cr.object_ref(&host.resource),
            warning,
            reason,
            "Reconcile",
            note,
        )
        .await;
}

/// Steps 3-5: returns the plan that is now deployed.
async fn converge(
    cr: &DynamicObject,
    host: &Ctx,
    previous: &HelmStatus,
    status: &mut HelmStatus,
    sourced: &crate::values_from::Sourced,
) -> Result<Plan, Error> {
    if let Err(e) = host.period(cr) {
        return Err(Error::Values(values::ValuesError::Spec(e)));
    }
    let owner = owner_of(cr, host)?;
    // valuesFrom < spec < overrideValues (values_from's module doc).
    let vals = values::set_overrides(
        sourced.under(values::from_spec(cr.data.get("spec"))?),
        &host.flavor.overrides,
    )?;
    let deployed = previous.deployed_release.clone();
    let at = deployed.as_ref().map(|d| d.revision).unwrap_or(1);
    let mut plan = render(host, &owner, &vals, at, at > 1).await?;
    let t = now();
    if let Some(d) = deployed.as_ref().filter(|d| d.digest == plan.digest) {
        // Step 4: what is deployed is what the spec asks for.
        keep_finalizer(cr, host, &plan).await?;
        plan.written = apply_all(host, &owner, &plan.items)
            .await
            .map_err(|e| Error::Sync(Box::new(e)))?;
        set_deployed(status, previous, d.revision > 1, &plan.notes, &t);
        status.remove(C::Nondeterministic);
        return Ok(plan);
    }
    // The same render as an attempt the API server refused: say so again, write nothing.
    // (Retrying would only add a failed record per event — the attempt's own partial writes
    // bring one — and, with `.Release.Revision` in a template, never stop.)
    let attempt = plan.digest.clone();
    if previous.failed_digest.as_deref() == Some(attempt.as_str()) {
        if let Some(c) = previous
            .condition(C::ReleaseFailed)
            .or(previous.condition(C::Irreconcilable))
        {
            status.failed_digest = Some(attempt);
            return Err(Error::FailedBefore(c.message.clone().unwrap_or_default()));
        }
    }
    let values_digest = values_digest(&vals);
    if let Some(d) = deployed
        .as_ref()
        .filter(|d| !plan.nondeterministic.is_empty() && d.values_digest == values_digest)
    {
        if unstable(cr, host, &owner, &vals, &plan, d.revision, previous, status).await? {
            return Ok(plan);
        }
    }
    status.remove(C::Nondeterministic);
    // Step 5: read the record before deciding.
    let (history, deployed_rec) = match host.flavor.storage {
        Storage::Secrets => {
            // One LIST of the release's records: whom the name belongs to, and its history
            // (install_or_upgrade goes on from this list rather than reading it again).
            let store = Secrets::new(host.client.clone(), &owner.namespace);
            let found = store.lookup(&owner.release, &owner.owner).await?;
            if let Some(other) = found.foreign_owner {
                return Err(Error::Conflict(format!(
                    "release name {:?} is in use by {other} (the same chart under another kind): \
                     give one of the two custom resources another name",
                    owner.release
                )));
            }
            let h = found.history;
            if let Some(foreign) = h.iter().rev().find(|r| r.chart_name() != owner.chart) {
                return Err(Error::Conflict(format!(
                    "duplicate release name: found existing release with name {:?} for chart {:?}",
                    owner.release,
                    foreign.chart_name()
                )));
            }
            let d = h
                .iter()
                .rev()
                .find(|r| r.info.status == release::status::DEPLOYED)
                .cloned();
            (h, d)
        }
        Storage::None => (Vec::new(), None),
    };
    if let Some(rec) = &deployed_rec {
        // Taken over (or the status was lost): the recorded release may already be this one.
        let mut same = render(host, &owner, &vals, rec.version, rec.version > 1).await?;
        // Helm 3 and 4 lay the manifest out slightly differently (a leading newline):
        // compare document by document.
        let recorded_values = serde_json::Value::Object(rec.config.clone());
        if !same_documents(&same.manifest, &rec.manifest)
            && !same.nondeterministic.is_empty()
            && recorded_values == crate::crd::data_json(&vals)
            && unstable(
                cr,
                host,
                &owner,
                &vals,
                &same,
                rec.version,
                previous,
                status,
            )
            .await?
        {
            // The status did not show the deployed revision yet (a cache behind this
            // operator's own status write, or a status lost): the record says these values are
            // deployed, and the render differs only by its random parts.
            status.deployed_release = Some(DeployedRelease {
                name: owner.release.clone(),
                revision: rec.version,
                digest: same.digest.clone(),
                values_digest: values_digest.clone(),
            });
            set_deployed(status, previous, rec.version > 1, &same.notes, &t);
            return Ok(same);
        }
        if !same_documents(&same.manifest, &rec.manifest) {
            // Which objects differ, never how: a line of either manifest may be a Secret's.
            let differ = crate::diff::describe(&same.manifest, &rec.manifest);
            tracing::info!(release = %owner.release, revision = rec.version, %differ, "the recorded release differs from the render: upgrading");
        } else {
            keep_finalizer(cr, host, &same).await?;
            same.written = apply_all(host, &owner, &same.items)
                .await
                .map_err(|e| Error::Sync(Box::new(e)))?;
            status.deployed_release = Some(DeployedRelease {
                name: owner.release.clone(),
                revision: rec.version,
                digest: same.digest.clone(),
                values_digest: values_digest.clone(),
            });
            set_deployed(status, previous, rec.version > 1, &same.notes, &t);
            return Ok(same);
        }
    }
    // With records, a release with a deployed revision goes on from the latest; one without
    // starts over at 1 (its failed attempts are cleared). Without records, the status counts.
    let base = match (&deployed_rec, host.flavor.storage) {
        (Some(_), _) => history.iter().map(|r| r.version).max().unwrap_or(0),
        (None, Storage::Secrets) => 0,
        (None, Storage::None) => deployed.as_ref().map(|d| d.revision).unwrap_or(0),
    };
    let revision = base + 1;
    let upgrade = deployed_rec.is_some() || deployed.is_some();
    let mut plan = if plan.revision == revision && upgrade == (revision > 1) {
        plan
    } else {
        render(host, &owner, &vals, revision, upgrade).await?
    };
    let old: Vec<Old> = match (&deployed_rec, host.flavor.storage) {
        (Some(rec), _) => old_objects(host, &owner, &rec.manifest).await,
        (None, Storage::None) => previous.inventory.iter().map(Old::from_inventory).collect(),
        (None, Storage::Secrets) => Vec::new(),
    };
    keep_finalizer(cr, host, &plan).await?;
    plan.written = install_or_upgrade(
        cr,
        host,
        &owner,
        &vals,
        &plan,
        (history, deployed_rec.as_ref()),
        &old,
        upgrade,
    )
    .await
    .inspect_err(|e| {
        // A stored version goes away by an admin's migration, which no event of ours shows:
        // that refusal is tried again at the next period.
        if e.category() == ErrorCategory::InvalidSpec
            && !matches!(e, Error::StoredVersionDropped { .. })
        {
            status.failed_digest = Some(attempt.clone());
        }
    })?;
    status.deployed_release = Some(DeployedRelease {
        name: owner.release.clone(),
        revision,
        digest: plan.digest.clone(),
        values_digest,
    });
    if host.flavor.storage == Storage::None {
        status.inventory = plan
            .items
            .iter()
            .map(|i| inventory_item(&i.desired))
            .collect();
    }
    let reason = set_deployed(status, previous, upgrade, &plan.notes, &t);
    let what = if upgrade { "upgraded" } else { "installed" };
    publish(
        host,
        cr,
        false,
        reason.as_str(),
        &format!("release {} {what} (revision {revision})", owner.release),
    )
    .await;
    // One Warning per override, as helm-operator's, with the value the release got (the
    // template executed); each its own series (the action names the key), or the recorder
    // would fold the second override into the first one's event.
    for (k, v) in &host.flavor.overrides {
        let shown = values::shown_override(k, v, host.flavor.suppress_override_values);
        let note = format!("Chart value {k:?} overridden to {shown:?} by operator's watches.yaml");
        let action: String = format!("Override {k}").chars().take(128).collect();
        host.events
            .publish(
                &cr.object_ref(&host.resource),
                true,
                "OverrideValuesInUse",
                &action,
                note,
            )
            .await;
    }
    Ok(plan)
}

/// Puts the uninstall finalizer on the custom resource before a plan's first write, when
/// uninstalling the plan has work the garbage collector cannot do: a delete hook to run, an
/// object no owner reference covers (cluster-scoped, or in another namespace; kept objects
/// are never deleted anyway), or `uninstall-wait` asked for. Otherwise every object, hook
/// and release record carries an owner reference to the custom resource, and a delete needs
/// no pass of bosun's: helm-operator adds the finalizer to every custom resource, which
/// costs a write and a reconcile per install and holds a deleted resource (and its
/// namespace) until the operator is back. A finalizer already there stays.
async fn keep_finalizer(cr: &DynamicObject, host: &Ctx, plan: &Plan) -> Result<(), Error> {
    if needs_finalizer(cr, plan) {
        set_finalizer(&host.api_of(cr), cr, FINALIZER, true).await?;
    }
    Ok(())
}

fn needs_finalizer(cr: &DynamicObject, plan: &Plan) -> bool {
    let deletes = |h: &Hook| {
        h.events
            .iter()
            .any(|e| e == Event::PreDelete.as_str() || e == Event::PostDelete.as_str())
    };
    annotation_true(cr, UNINSTALL_WAIT_ANNOTATION)
        || plan.hooks.iter().any(deletes)
        || plan
            .items
            .iter()
            .any(|it| !it.desired.keep && it.desired.object.metadata.owner_references.is_none())
}

/// Whether two manifests hold the same documents. Helm 3 and 4 lay a manifest out slightly
/// differently (a leading newline), and records written before bosun split as Helm does had
/// their last document trimmed: documents are compared without surrounding whitespace.
fn same_documents(a: &str, b: &str) -> bool {
    let docs = |m: &str| -> Vec<String> {
        split_documents(m)
            .into_iter()
            .map(|d| d.trim().to_string())
            .filter(|d| !d.is_empty())
            .collect()
    };
    docs(a) == docs(b)
}

/// Whether the chart's output changes on every render with these values (`plan` was
/// rendered at `revision` and differs from what is deployed, though the values are the
/// deployed ones): a second render that differs again says so. Then what is deployed stays —
/// upgrading would rotate the random values on every reconcile, and each upgrade's writes
/// bring the next reconcile — and the `Nondeterministic` condition says why (its Event once).
#[allow(clippy::too_many_arguments)]
async fn unstable(
    cr: &DynamicObject,
    host: &Ctx,
    owner: &ReleaseOwner,
    vals: &Data,
    plan: &Plan,
    revision: i64,
    previous: &HelmStatus,
    status: &mut HelmStatus,
) -> Result<bool, Error> {
    let again = render(host, owner, vals, revision, revision > 1).await?;
    if again.digest == plan.digest {
        return Ok(false);
    }
    let fns = plan.nondeterministic.join(", ");
    let msg = format!(
        "the chart renders differently every time ({fns}): revision {revision} stays deployed \
         and is upgraded only when the values change; reuse generated values with lookup and \
         dryRunOption: server"
    );
    if previous.condition(C::Nondeterministic).is_none() {
        // The cached status may be behind this operator's own last write: ask the API
        // server before telling twice.
        let told = match host.api_of(cr).get_opt(&cr.name_any()).await? {
            Some(fresh) => HelmStatus::of(&fresh.data)
                .condition(C::Nondeterministic)
                .is_some(),
            None => true,
        };
        if !told {
            publish(host, cr, true, R::NondeterministicRender.as_str(), &msg).await;
        }
    }
    status.set(
        previous,
        C::Nondeterministic,
        true,
        Some(R::NondeterministicRender),
        Some(msg),
        &now(),
    );
    Ok(true)
}

/// `Deployed` true, with the reason of the revision's kind and the chart's notes; returns the
/// reason.
fn set_deployed(
    status: &mut HelmStatus,
    previous: &HelmStatus,
    upgraded: bool,
    notes: &str,
    t: &str,
) -> R {
    let reason = if upgraded {
        R::UpgradeSuccessful
    } else {
        R::InstallSuccessful
    };
    status.set(
        previous,
        C::Deployed,
        true,
        Some(reason),
        Some(notes.to_string()),
        t,
    );
    reason
}

/// A digest of the values a release is rendered from.
fn values_digest(vals: &Data) -> String {
    let mut h = Sha256::new();
    h.update(crate::crd::data_json(vals).to_string().as_bytes());
    hex::encode(&h.finalize()[..16])
}

fn inventory_item(d: &Desired) -> InventoryItem {
    InventoryItem {
        api_version: d.gvk.api_version(),
        kind: d.gvk.kind.clone(),
        namespace: d.namespace().map(str::to_string),
        name: d.name().to_string(),
        keep: d.keep,
    }
}

/// The most one release's render may write (review L13). Its record holds the manifest in
/// one Secret (1 MiB, gzipped and base64-encoded), which a manifest this large cannot fit in
/// any realistic chart; the renderer's own bound (256 MiB, for `bosun render`) times the
/// reconciles in flight would be gigabytes of memory for a hostile spec.
pub const RELEASE_OUTPUT_LIMIT: usize = 32 << 20;

/// Renders the release at `revision` and turns it into objects.
async fn render(
    host: &Ctx,
    owner: &ReleaseOwner,
    vals: &Data,
    revision: i64,
    upgrade: bool,
) -> Result<Plan, Error> {
    let mut opts = RenderOptions::new(&owner.release, &owner.namespace);
    opts.limits.max_output_bytes = RELEASE_OUTPUT_LIMIT;
    opts.revision = revision;
    opts.is_install = !upgrade;
    opts.is_upgrade = upgrade;
    opts.values = vals.clone();
    opts.kube_version = host.flavor.kube_version.clone();
    let view = host
        .flavor
        .cluster
        .get_or_init(|| crate::cluster::ClusterView::new(host.client.clone()));
    if let Some(snapshot) = view.snapshot().await {
        if opts.kube_version.is_none() {
            opts.kube_version = snapshot.kube_version.clone();
        }
        opts.cluster_api_versions = Some(snapshot.api_versions.clone());
    }
    if host.entry.dry_run_server {
        opts.lookup = Some(Arc::new(crate::cluster::ApiLookup::new(
            host.client.clone(),
            host.discovery.clone(),
            tokio::runtime::Handle::current(),
        )));
    }
    let chart = host.flavor.chart.clone();
    // As Helm's install and upgrade: a chart the cluster's version does not satisfy fails
    // with Helm's message, an invalid-spec error that waits for a change, not a retry.
    chart
        .check_kube_version(opts.kube_version.as_deref())
        .map_err(|e| Error::Render(e.to_string()))?;
    let rendered = tokio::task::block_in_place(|| chart.render(&opts))
        .map_err(|e| Error::Render(e.to_string()))?;
    let (generic, hook_manifests) =
        sort_manifests(&rendered).map_err(|e| Error::Render(e.to_string()))?;
    let mut manifest = String::new();
    let mut items = Vec::new();
    let mut crds_installed = false;
    for m in &generic {
        manifest.push_str(&format!("---\n# Source: {}\n{}\n", m.path, m.content));
        let it = match item(host, owner, m).await {
            // Helm installs crds/ before it builds the templates' objects: a template making
            // an object of the chart's own CRD needs that kind served first. Only on a miss,
            // so a chart whose CRDs exist costs no read per render.
            Err(Error::Manifest(_)) if !crds_installed && !rendered.crds.is_empty() => {
                crds_installed = true;
                crate::chart_crds::create_missing(&host.client, &rendered.crds).await?;
                served_item(host, owner, m).await?
            }
            r => r?,
        };
        items.push(it);
    }
    let runnable: Vec<Manifest> = hook_manifests
        .into_iter()
        .filter(|m| {
            m.hook
                .as_deref()
                .is_some_and(|h| h.split(',').any(|e| !e.trim().starts_with("test")))
        })
        .collect();
    let hooks = hooks::parse(&runnable)?;
    let notes = rendered.notes.clone().unwrap_or_default();
    let mut h = Sha256::new();
    h.update(manifest.as_bytes());
    for hk in &hooks {
        h.update(hk.manifest.content.as_bytes());
    }
    h.update(notes.as_bytes());
    // With `upgradeCRDs` a chart whose CRDs changed is a release to upgrade; without it the
    // digest is what it always was (an upgrade of bosun upgrades no release).
    if host.entry.upgrade_crds {
        for (path, content) in &rendered.crds {
            h.update(path.as_bytes());
            h.update(content.as_bytes());
        }
    }
    Ok(Plan {
        revision,
        manifest,
        items,
        hooks,
        notes,
        crds: rendered.crds.clone(),
        digest: hex::encode(&h.finalize()[..16]),
        nondeterministic: rendered.nondeterministic.clone(),
        written: Written::default(),
    })
}

/// [`item`] of a kind a CRD just created defines: the API server serves a new group a moment
/// after the CRD is Established, so a miss is asked again for a while (Helm likewise waits
/// for its CRDs, then resets its discovery) before it counts.
async fn served_item(host: &Ctx, owner: &ReleaseOwner, m: &Manifest) -> Result<Item, Error> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match item(host, owner, m).await {
            Err(Error::Manifest(_)) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            r => return r,
        }
    }
}

async fn item(host: &Ctx, owner: &ReleaseOwner, m: &Manifest) -> Result<Item, Error> {
    let (gvk, mut object) = objects::parse(m).map_err(|e| Error::Manifest(e.to_string()))?;
    let resolved = host.discovery.resolve(&gvk).await.map_err(|e| {
        Error::Manifest(format!(
            "{}: kind {} is not served by the API server: {e}",
            m.path,
            gvk.api_version() + "/" + &gvk.kind
        ))
    })?;
    let keep = objects::mark(&mut object, resolved.namespaced, owner);
    objects::check_builtin(&gvk, &object).map_err(|e| {
        Error::Rejected(format!(
            "{}: {} {} cannot be sent: {e}",
            m.path,
            gvk.kind,
            object.metadata.name.as_deref().unwrap_or("")
        ))
    })?;
    Ok(Item {
        desired: Desired {
            path: m.path.clone(),
            gvk,
            object,
            keep,
        },
        resolved,
    })
}

fn api_of(host: &Ctx, resolved: &Resolved, namespace: Option<&str>) -> Api<DynamicObject> {
    match (namespace, resolved.namespaced) {
        (Some(ns), true) => Api::namespaced_with(host.client.clone(), ns, &resolved.resource),
        _ => Api::all_with(host.client.clone(), &resolved.resource),
    }
}

/// How many objects of one kind are applied at once: Helm applies the objects of a kind all
/// at once (its `batchPerform`); a bound keeps a chart of thousands from opening as many
/// requests.
const APPLY_BATCH: usize = 8;

/// Every object of a render, in Helm's order: kind after kind, as Helm's install waits for
/// each kind's objects before the next kind's, and the objects of one kind together (at most
/// [`APPLY_BATCH`] at once), as Helm sends them. A failure stops at the end of its kind.
/// Each is applied only where the cache shows it is not in place (Helm's ownership rules
/// let a record written by Helm's library — operator-sdk — vouch for the objects carrying its
/// release annotations).
async fn apply_all(host: &Ctx, owner: &ReleaseOwner, items: &[Item]) -> Result<Written, Error> {
    let mut wrote = Written::default();
    for batch in items.chunk_by(|a, b| a.desired.gvk == b.desired.gvk) {
        let applies: Vec<_> = batch.iter().map(|it| apply_one(host, owner, it)).collect();
        let results: Vec<Result<Option<bool>, Error>> = futures::stream::iter(applies)
            .buffered(APPLY_BATCH)
            .collect()
            .await;
        for (it, r) in batch.iter().zip(results) {
            if let Some(created) = r? {
                wrote.0.insert(key_of(&it.desired), created);
            }
        }
    }
    Ok(wrote)
}

/// One object applied where the cache shows it drifted (or absent); `Some(created)` when it
/// was written.
async fn apply_one(host: &Ctx, owner: &ReleaseOwner, it: &Item) -> Result<Option<bool>, Error> {
    let mut wrote = None;
    let d = &it.desired;
    let api = api_of(host, &it.resolved, d.namespace());
    let ns = d.namespace().unwrap_or("");
    let cached = if host.children.covers(ns) {
        let cache = host.children.cache(&d.gvk).await?;
        cache.meta(ns, d.name())
    } else {
        // Outside the watched namespaces (review L2): read, or every reconcile would
        // rewrite it.
        api.get_metadata_opt(d.name())
            .await
            .map_err(|e| write_error(&d.describe(), e))?
            .map(|p| p.metadata)
    };
    if let Some(meta) = &cached {
        if let Some(msg) = objects::ownership_conflict(meta, owner, &d.describe()) {
            return Err(Error::Conflict(msg));
        }
    }
    let res = host
        .applier
        .apply_with(&api, &it.resolved.resource, &d.object, cached.as_ref())
        .await;
    if matches!(res, Ok(bosun_runtime::apply::Outcome::Applied)) {
        wrote = Some(cached.is_none());
        tracing::debug!(
            object = %d.describe(),
            cached_hash = ?cached.as_ref().and_then(|m| m.annotations.as_ref()).and_then(|a| a.get(bosun_runtime::apply::HASH_ANNOTATION)),
            cached_generation = ?cached.as_ref().and_then(|m| m.generation),
            desired_hash = ?bosun_runtime::apply::desired_hash(&d.object).ok(),
            "applied"
        );
    }
    match res {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 && cached.is_none() => {
            // An object of that name the cache cannot show (it lacks bosun's label): as
            // Helm does, write over it only when it belongs to this release — Helm's
            // release annotations (a release being taken over from operator-sdk) or this
            // custom resource as its controller.
            let live = api
                .get_metadata_opt(d.name())
                .await
                .map_err(|e| write_error(&d.describe(), e))?;
            if let Some(live) = &live {
                if let Some(msg) = objects::ownership_conflict(&live.metadata, owner, &d.describe())
                {
                    return Err(Error::Conflict(msg));
                }
            }
            host.applier
                .adopt_with(&api, &it.resolved.resource, &d.object)
                .await
                .map_err(|e| write_error(&d.describe(), e))?;
            wrote = Some(false);
        }
        Err(kube::Error::Api(s)) if s.code == 422 && cached.is_some() && owner.force => {
            // upgrade-force: an immutable field changed; replace the object.
            tracing::info!(object = %d.describe(), "upgrade-force: recreating after {}", s.message);
            delete_object(&api, d.name()).await?;
            host.applier
                .apply_with(&api, &it.resolved.resource, &d.object, None)
                .await
                .map_err(|e| write_error(&d.describe(), e))?;
        }
        Err(e) => return Err(write_error(&d.describe(), e)),
    }
    Ok(wrote)
}

/// The objects a reconcile wrote, and whether it created them: their cached status is stale
/// until their watch event.
#[derive(Debug, Default)]
struct Written(BTreeMap<(String, String, Option<String>, String), bool>);

async fn delete_object(api: &Api<DynamicObject>, name: &str) -> Result<(), Error> {
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// An object of the previous revision.
struct Old {
    gvk: GroupVersionKind,
    namespace: Option<String>,
    name: String,
    keep: bool,
}

impl Old {
    fn from_inventory(i: &InventoryItem) -> Old {
        Old {
            gvk: objects::gvk_of(&i.api_version, &i.kind),
            namespace: i.namespace.clone(),
            name: i.name.clone(),
            keep: i.keep,
        }
    }

    fn key(&self) -> (String, String, Option<String>, String) {
        (
            self.gvk.group.clone(),
            self.gvk.kind.clone(),
            self.namespace.clone(),
            self.name.clone(),
        )
    }
}

fn key_of(d: &Desired) -> (String, String, Option<String>, String) {
    (
        d.gvk.group.clone(),
        d.gvk.kind.clone(),
        d.namespace().map(str::to_string),
        d.name().to_string(),
    )
}

/// The objects of a recorded manifest; documents that no longer parse or whose kind is no
/// longer served are left alone.
async fn old_objects(host: &Ctx, owner: &ReleaseOwner, manifest: &str) -> Vec<Old> {
    let mut out = Vec::new();
    for doc in split_documents(manifest) {
        let m = Manifest {
            path: String::new(),
            content: doc,
            api_version: String::new(),
            kind: String::new(),
            name: String::new(),
            hook: None,
        };
        let Ok(it) = item(host, owner, &m).await else {
            continue;
        };
        out.push(Old {
            namespace: it.desired.namespace().map(str::to_string),
            name: it.desired.name().to_string(),
            keep: it.desired.keep,
            gvk: it.desired.gvk,
        });
    }
    out
}

/// `records` is the release's history as read before deciding (empty without records) and
/// its deployed revision: reconciles of one custom resource never run at once, so it is still
/// the history, and the records written or deleted here keep it so — no LIST again.
#[allow(clippy::too_many_arguments)]
async fn install_or_upgrade(
    cr: &DynamicObject,
    host: &Ctx,
    owner: &ReleaseOwner,
    vals: &Data,
    plan: &Plan,
    records: (Vec<Release>, Option<&Release>),
    old: &[Old],
    upgrade: bool,
) -> Result<Written, Error> {
    let (mut history, deployed) = records;
    let store = (host.flavor.storage == Storage::Secrets)
        .then(|| Secrets::new(host.client.clone(), &owner.namespace));
    // Like helm-operator, a release with no deployed revision starts over: failed and
    // pending records of earlier attempts go, so retries never pile records up.
    if let (Some(s), None) = (&store, deployed) {
        for r in history
            .iter()
            .filter(|r| r.info.status != release::status::DEPLOYED)
        {
            s.delete(r).await?;
        }
        history.retain(|r| r.info.status == release::status::DEPLOYED);
    }
    // The record is written once, when the outcome is known (Helm writes a pending record
    // first, then updates it: a second write per revision that only another Helm client
    // racing this one would read; a crash in between leaves no record here, and the next
    // reconcile simply installs or upgrades again over its own objects).
    let mut rec = new_record(host, owner, vals, plan, deployed, upgrade);
    let result = run_release(host, owner, plan, old, upgrade, &mut rec).await;
    if result.is_err() {
        remove_added(host, owner, plan, old).await;
    }
    let Some(s) = store else { return result };
    match &result {
        Ok(_) => {
            rec.info.status = release::status::DEPLOYED.into();
            rec.info.description = if upgrade {
                "Upgrade complete"
            } else {
                "Install complete"
            }
            .into();
            s.create(&rec, Some(&owner.owner)).await?;
            if let Some(prev) = deployed {
                let mut prev = prev.clone();
                prev.info.status = release::status::SUPERSEDED.into();
                prev.info.description = "Superseded".into();
                s.update(&prev, Some(&owner.owner)).await?;
                if let Some(slot) = history.iter_mut().find(|r| r.version == prev.version) {
                    *slot = prev;
                }
            }
            history.push(rec);
            for r in beyond_history(&history, host.flavor.max_history) {
                s.delete(r).await?;
            }
        }
        Err(e) => {
            for r in beyond_history(&history, host.flavor.max_history.saturating_sub(1)) {
                s.delete(r).await?;
            }
            rec.info.status = release::status::FAILED.into();
            rec.info.description = format!(
                "{} \"{}\" failed: {e}",
                if upgrade { "Upgrade" } else { "Release" },
                owner.release
            );
            s.create(&rec, Some(&owner.owner)).await?;
        }
    }
    let _ = cr;
    result
}

fn new_record(
    host: &Ctx,
    owner: &ReleaseOwner,
    vals: &Data,
    plan: &Plan,
    deployed: Option<&Release>,
    upgrade: bool,
) -> Release {
    let t = now();
    let config = match crate::crd::data_json(vals) {
        serde_json::Value::Object(m) => m,
        _ => Default::default(),
    };
    Release {
        name: owner.release.clone(),
        info: release::Info {
            first_deployed: deployed
                .map(|d| d.info.first_deployed.clone())
                .unwrap_or_else(|| t.clone()),
            last_deployed: t,
            deleted: release::ZERO_TIME.into(),
            description: if upgrade {
                "Preparing upgrade"
            } else {
                "Initial install underway"
            }
            .into(),
            status: if upgrade {
                release::status::PENDING_UPGRADE
            } else {
                release::status::PENDING_INSTALL
            }
            .into(),
            notes: plan.notes.clone(),
            other: Default::default(),
        },
        chart: host.flavor.chart_record.clone(),
        config,
        manifest: plan.manifest.clone(),
        hooks: hooks::records(&plan.hooks),
        version: plan.revision,
        namespace: owner.namespace.clone(),
        other: Default::default(),
    }
}

async fn run_release(
    host: &Ctx,
    owner: &ReleaseOwner,
    plan: &Plan,
    old: &[Old],
    upgrade: bool,
    rec: &mut Release,
) -> Result<Written, Error> {
    if host.entry.upgrade_crds {
        crate::chart_crds::apply(&host.client, &plan.crds).await?;
    } else {
        crate::chart_crds::create_missing(&host.client, &plan.crds).await?;
    }
    let runner = hooks::Runner {
        client: &host.client,
        discovery: &host.discovery,
        owner,
        timeout: hooks::TIMEOUT,
    };
    let (pre, post) = if upgrade {
        (Event::PreUpgrade, Event::PostUpgrade)
    } else {
        (Event::PreInstall, Event::PostInstall)
    };
    runner.run(&plan.hooks, pre, &mut rec.hooks).await?;
    let written = apply_all(host, owner, &plan.items).await?;
    prune(host, owner, plan, old).await?;
    runner.run(&plan.hooks, post, &mut rec.hooks).await?;
    Ok(written)
}

/// After a failed install or upgrade, deletes what the attempt added to the last deployed
/// revision (all of it for an install) — what helm-operator's uninstall of a failed install
/// and rollback of a failed upgrade remove — so no object of a failed revision is left that
/// no record tracks (a revert to the deployed spec only syncs; a retry recreates them). The
/// objects both revisions render keep the attempt's values until the next success; objects
/// kept by policy or owned by someone else stay. Failures here are logged: the attempt's own
/// error is the one reported.
async fn remove_added(host: &Ctx, owner: &ReleaseOwner, plan: &Plan, old: &[Old]) {
    let before: BTreeSet<_> = old.iter().map(Old::key).collect();
    for it in plan
        .items
        .iter()
        .filter(|i| !i.desired.keep && !before.contains(&key_of(&i.desired)))
    {
        let d = &it.desired;
        let api = api_of(host, &it.resolved, d.namespace());
        let removed = match api.get_metadata_opt(d.name()).await {
            Ok(Some(live))
                if objects::ownership_conflict(&live.metadata, owner, d.name()).is_none() =>
            {
                delete_object(&api, d.name()).await
            }
            Ok(_) => Ok(()),
            Err(e) => Err(e.into()),
        };
        if let Err(e) = removed {
            tracing::warn!(release = %owner.release, object = %d.describe(), error = %e, "could not remove an object of the failed revision");
        }
    }
}

/// Deletes the objects of the previous revision the new one no longer renders (never those
/// kept by policy, never objects the release does not own).
async fn prune(host: &Ctx, owner: &ReleaseOwner, plan: &Plan, old: &[Old]) -> Result<(), Error> {
    let now: BTreeSet<_> = plan.items.iter().map(|i| key_of(&i.desired)).collect();
    for o in old.iter().filter(|o| !o.keep && !now.contains(&o.key())) {
        let Ok(resolved) = host.discovery.resolve(&o.gvk).await else {
            continue;
        };
        let cache = host.children.cache(&o.gvk).await?;
        let Some(meta) = cache.meta(o.namespace.as_deref().unwrap_or(""), &o.name) else {
            continue;
        };
        if objects::ownership_conflict(&meta, owner, &o.name).is_some() {
            continue;
        }
        let api = api_of(host, &resolved, o.namespace.as_deref());
        delete_object(&api, &o.name).await?;
    }
    Ok(())
}

/// Step 6: None when every rendered workload is rolled out and ready.
async fn readiness(host: &Ctx, items: &[Item], written: &Written) -> Result<Option<String>, Error> {
    let mut waiting = Vec::new();
    for it in items.iter().filter(|i| ready::is_tracked(&i.desired.gvk)) {
        let d = &it.desired;
        let ns = d.namespace().unwrap_or("");
        if !host.children.covers(ns) {
            // No cache and no event for it (review L2): read it; a resync looks again.
            let api = api_of(host, &it.resolved, d.namespace());
            match api.get_opt(d.name()).await? {
                Some(obj) => {
                    if let Some(why) = ready::not_ready(&d.gvk, &obj) {
                        waiting.push(why);
                    }
                }
                None => waiting.push(format!("{} not created yet", d.describe())),
            }
            continue;
        }
        match written.0.get(&key_of(d)) {
            Some(true) => {
                // Just created: it is at generation 1 with an empty status (a create ignores
                // the status), which is all its readiness can say — the same as its cached
                // copy will say until its controller acts, so the reconcile its watch event
                // brings writes no status again (one status write per install, not two).
                if let Some(why) = ready::not_ready(&d.gvk, &ready::created(&d.object)) {
                    waiting.push(why);
                }
                continue;
            }
            Some(false) => {
                // Applied over: the cache still shows the old object; its event brings the
                // next reconcile, which sees the new one.
                waiting.push(format!(
                    "{} was updated; waiting for its controller",
                    d.describe()
                ));
                continue;
            }
            None => {}
        }
        let cache = host.children.cache(&d.gvk).await?;
        match cache.get(ns, d.name()) {
            Some(obj) => {
                if let Some(why) = ready::not_ready(&d.gvk, &obj) {
                    waiting.push(why);
                }
            }
            None => waiting.push(format!("{} not created yet", d.describe())),
        }
    }
    Ok((!waiting.is_empty()).then(|| waiting.join("; ")))
}

/// The values of a custom resource as JSON (for tests and `bosun render`-style checks).
pub fn values_json(
    spec: Option<&serde_json::Value>,
    overrides: &BTreeMap<String, String>,
) -> Result<serde_json::Value, Error> {
    let v = values::with_overrides(values::from_spec(spec)?, overrides)?;
    Ok(crate::crd::data_json(&v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(status: &HelmStatus) -> Vec<(String, String, String)> {
        let mut v: Vec<_> = status
            .conditions
            .iter()
            .filter(|c| c.type_ == "ReleaseFailed" || c.type_ == "Irreconcilable")
            .map(|c| {
                (
                    c.type_.clone(),
                    c.reason.clone().unwrap_or_default(),
                    c.message.clone().unwrap_or_default(),
                )
            })
            .collect();
        v.sort();
        v
    }

    /// A plan of these manifests (each `(yaml, namespaced)`), marked for release "shop" in
    /// namespace "ns", with these hooks' manifests.
    fn plan_of(objects: &[(&str, bool)], hooks: &[&str]) -> Plan {
        let owner = objects::tests::owner();
        let manifest = |yaml: &str, hook: Option<&str>| Manifest {
            name: "x".into(),
            path: "c/templates/x.yaml".into(),
            content: yaml.into(),
            kind: String::new(),
            api_version: String::new(),
            hook: hook.map(str::to_string),
        };
        let items = objects
            .iter()
            .map(|(yaml, namespaced)| {
                let (gvk, mut object) = objects::parse(&manifest(yaml, None)).expect("a manifest");
                let keep = objects::mark(&mut object, *namespaced, &owner);
                Item {
                    desired: Desired {
                        path: "c/templates/x.yaml".into(),
                        gvk: gvk.clone(),
                        object,
                        keep,
                    },
                    resolved: Resolved {
                        resource: kube::core::ApiResource::from_gvk(&gvk),
                        namespaced: *namespaced,
                    },
                }
            })
            .collect();
        let hooks: Vec<Manifest> = hooks
            .iter()
            .map(|events| {
                manifest(
                    &format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: h\n  annotations:\n    helm.sh/hook: {events:?}\n"),
                    Some(events),
                )
            })
            .collect();
        Plan {
            revision: 1,
            manifest: String::new(),
            items,
            hooks: hooks::parse(&hooks).expect("hooks"),
            notes: String::new(),
            crds: Vec::new(),
            digest: String::new(),
            nondeterministic: Vec::new(),
            written: Written::default(),
        }
    }

    #[test]
    fn the_finalizer_only_when_uninstalling_has_work_the_garbage_collector_cannot_do() {
        let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n";
        let elsewhere =
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  namespace: other\n";
        let kept = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: k\n  annotations:\n    helm.sh/resource-policy: keep\n";
        let role =
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: r\n";
        let cr = |wait: Option<&str>| {
            let mut o = DynamicObject::new(
                "shop",
                &kube::core::ApiResource::from_gvk(&GroupVersionKind::gvk(
                    "charts.example.com",
                    "v1alpha1",
                    "BookStore",
                )),
            )
            .within("ns");
            if let Some(v) = wait {
                o.metadata.annotations =
                    Some([(UNINSTALL_WAIT_ANNOTATION.to_string(), v.to_string())].into());
            }
            o
        };
        // (objects, hooks' events, uninstall-wait, finalizer wanted, why)
        type Case<'a> = (
            &'a [(&'a str, bool)],
            &'a [&'a str],
            Option<&'a str>,
            bool,
            &'a str,
        );
        let cases: &[Case] = &[
            (&[(cm, true)], &[], None, false, "owner references cover it"),
            (
                &[(cm, true), (kept, true)],
                &["post-install"],
                None,
                false,
                "kept objects stay anyway; install hooks are not uninstall's",
            ),
            (
                &[(cm, true)],
                &["pre-delete"],
                None,
                true,
                "a pre-delete hook to run",
            ),
            (
                &[(cm, true)],
                &["post-install,post-delete"],
                None,
                true,
                "a post-delete hook to run",
            ),
            (
                &[(cm, true), (role, false)],
                &[],
                None,
                true,
                "a cluster-scoped object to delete",
            ),
            (
                &[(elsewhere, true)],
                &[],
                None,
                true,
                "an object in another namespace",
            ),
            (
                &[(cm, true)],
                &[],
                Some("true"),
                true,
                "uninstall-wait asked for",
            ),
            (
                &[(cm, true)],
                &[],
                Some("false"),
                false,
                "uninstall-wait off",
            ),
        ];
        for (objects, hooks, wait, want, why) in cases {
            assert_eq!(
                needs_finalizer(&cr(*wait), &plan_of(objects, hooks)),
                *want,
                "{why}"
            );
        }
    }

    #[test]
    fn one_failure_condition_at_a_time_with_the_current_message() {
        let mut previous = HelmStatus::default();
        record_failure(
            &mut previous,
            &HelmStatus::default(),
            &Error::Values(values::ValuesError::Spec("not a map".into())),
            "t0",
        );
        assert_eq!(
            failed(&previous),
            [(
                "Irreconcilable".into(),
                "ReconcileError".into(),
                "spec is not a map of values: not a map".into()
            )]
        );
        // The values are fixed; then a hook fails: only ReleaseFailed, with its message.
        let mut status = previous.clone();
        record_failure(
            &mut status,
            &previous,
            &Error::Render("hook x failed".into()),
            "t1",
        );
        assert_eq!(
            failed(&status),
            [(
                "ReleaseFailed".into(),
                "InstallError".into(),
                "hook x failed".into()
            )]
        );
        // A conflict while keeping a deployed release in place is no failed upgrade.
        let mut synced = status.clone();
        synced.deployed_release = Some(DeployedRelease {
            name: "r".into(),
            revision: 2,
            digest: "d".into(),
            values_digest: String::new(),
        });
        let before = synced.clone();
        record_failure(
            &mut synced,
            &before,
            &Error::Sync(Box::new(Error::Conflict("owned by someone else".into()))),
            "t2",
        );
        assert_eq!(
            failed(&synced),
            [(
                "Irreconcilable".into(),
                "ReconcileError".into(),
                "owned by someone else".into()
            )]
        );
        let mut upgrading = before.clone();
        record_failure(&mut upgrading, &before, &Error::Render("boom".into()), "t3");
        assert_eq!(failed(&upgrading)[0].1, "UpgradeError");
    }
}
