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
//! 3. build the **values** (`valuesFrom` sources, the spec, the watch's overrides) and **render** the chart (parsed
//!    once per watch entry) at the deployed revision;
//! 4. if the rendered release is what was deployed (its digest, kept in the status), **sync**:
//!    every object applied only where the cache shows drift — no release record is read,
//!    nothing is written when nothing changed;
//! 5. otherwise **install or upgrade**: a new revision recorded once its outcome is known
//!    (deployed or failed), CRDs of `crds/` created first (or applied, `upgradeCRDs`), pre
//!    hooks, every object applied in Helm's order, objects the release no longer renders
//!    pruned (never those with `helm.sh/resource-policy: keep`), post hooks. A failure
//!    removes what the attempt added to the last deployed revision (helm-operator uninstalls
//!    a failed install and rolls a failed upgrade back), leaves the rest in place, and says
//!    so;
//! 6. compute **Ready** from the rendered workloads' status and write the **status** once,
//!    only if it changed.
//!
//! The layers, one file each: [`render`] (what was rendered: the plan of a revision),
//! [`decide`] (pure: sync, refuse again, or release — and which revision), [`apply`] (what
//! was applied: objects, prune, rollback of a failed attempt's additions, readiness),
//! [`revision`] (a new revision carried out and recorded through
//! [`crate::storage::Records`]), [`uninstall`]; this file is the pipeline and the status.
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
use crate::storage::{beyond_history, records, Records, Storage};
use crate::values;
use crate::HelmFlavor;
use bosun_runtime::error::{Categorized, ErrorCategory};

pub const FINALIZER: &str = "helm.sdk.operatorframework.io/uninstall-release";
/// operator-sdk's older finalizer name, still honoured on deletion.
pub const LEGACY_FINALIZER: &str = "uninstall-helm-release";
pub const PERIOD_ANNOTATION: &str = "helm.sdk.operatorframework.io/reconcile-period";
pub const UPGRADE_FORCE_ANNOTATION: &str = "helm.sdk.operatorframework.io/upgrade-force";
pub const UNINSTALL_WAIT_ANNOTATION: &str = "helm.sdk.operatorframework.io/uninstall-wait";

mod apply;
mod decide;
mod render;
mod revision;
mod uninstall;

use apply::*;
pub use render::RELEASE_OUTPUT_LIMIT;
use render::*;
use revision::*;

type Ctx = Host<HelmFlavor>;

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
        // The same decision the applier takes for the release's other objects.
        shard_labels: bosun_runtime::shard::labels_in_scope(),
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

/// What one release attempt works with: the custom resource, its host, the release's owner
/// and the values it renders with.
struct Attempt<'a> {
    cr: &'a DynamicObject,
    host: &'a Ctx,
    owner: ReleaseOwner,
    vals: Data,
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
    let attempt = plan.digest.clone();
    match decide::step(previous, &attempt) {
        decide::Step::Sync { revision } => {
            // Step 4: what is deployed is what the spec asks for.
            keep_finalizer(cr, host, &plan).await?;
            plan.written = apply_all(host, &owner, &plan.items)
                .await
                .map_err(|e| Error::Sync(Box::new(e)))?;
            set_deployed(status, previous, revision > 1, &plan.notes, &t);
            status.remove(C::Nondeterministic);
            return Ok(plan);
        }
        decide::Step::RefuseAgain { message } => {
            status.failed_digest = Some(attempt);
            return Err(Error::FailedBefore(message));
        }
        decide::Step::Release => {}
    }
    let a = Attempt {
        cr,
        host,
        owner,
        vals,
    };
    let (owner, vals) = (&a.owner, &a.vals);
    let values_digest = values_digest(vals);
    if let Some(d) = deployed
        .as_ref()
        .filter(|d| !plan.nondeterministic.is_empty() && d.values_digest == values_digest)
    {
        if unstable(&a, &plan, d.revision, previous, status).await? {
            return Ok(plan);
        }
    }
    status.remove(C::Nondeterministic);
    // Step 5: read the record before deciding.
    // One LIST of the release's records: whom the name belongs to, and its history
    // (install_or_upgrade goes on from this list rather than reading it again).
    let store = records(host.flavor.storage, host.client.clone(), &owner.namespace);
    let found = store.lookup(&owner.release, &owner.owner).await?;
    if let Some(other) = found.foreign_owner {
        return Err(Error::Conflict(format!(
            "release name {:?} is in use by {other} (the same chart under another kind): \
             give one of the two custom resources another name",
            owner.release
        )));
    }
    let history = found.history;
    if let Some(foreign) = history.iter().rev().find(|r| r.chart_name() != owner.chart) {
        return Err(Error::Conflict(format!(
            "duplicate release name: found existing release with name {:?} for chart {:?}",
            owner.release,
            foreign.chart_name()
        )));
    }
    let deployed_rec = history
        .iter()
        .rev()
        .find(|r| r.info.status == release::status::DEPLOYED)
        .cloned();
    if let Some(rec) = &deployed_rec {
        // Taken over (or the status was lost): the recorded release may already be this one.
        let mut same = render(host, owner, vals, rec.version, rec.version > 1).await?;
        // Helm 3 and 4 lay the manifest out slightly differently (a leading newline):
        // compare document by document.
        let recorded_values = serde_json::Value::Object(rec.config.clone());
        if !same_documents(&same.manifest, &rec.manifest)
            && !same.nondeterministic.is_empty()
            && recorded_values == crate::crd::data_json(vals)
            && unstable(&a, &same, rec.version, previous, status).await?
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
            same.written = apply_all(host, owner, &same.items)
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
    let decide::Next { revision, upgrade } = decide::next(
        host.flavor.storage,
        deployed_rec
            .as_ref()
            .and_then(|_| history.iter().map(|r| r.version).max()),
        deployed.as_ref().map(|d| d.revision),
    );
    let mut plan = if plan.revision == revision && upgrade == (revision > 1) {
        plan
    } else {
        render(host, owner, vals, revision, upgrade).await?
    };
    let old: Vec<Old> = match (&deployed_rec, host.flavor.storage) {
        (Some(rec), _) => old_objects(host, owner, &rec.manifest).await,
        (None, Storage::None) => previous.inventory.iter().map(Old::from_inventory).collect(),
        (None, Storage::Secrets | Storage::ConfigMaps) => Vec::new(),
    };
    keep_finalizer(cr, host, &plan).await?;
    plan.written = install_or_upgrade(
        &a,
        store.as_ref(),
        &plan,
        (history, deployed_rec.as_ref()),
        (&old, upgrade),
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

/// Whether the chart's output changes on every render with these values (`plan` was
/// rendered at `revision` and differs from what is deployed, though the values are the
/// deployed ones): a second render that differs again says so. Then what is deployed stays —
/// upgrading would rotate the random values on every reconcile, and each upgrade's writes
/// bring the next reconcile — and the `Nondeterministic` condition says why (its Event once).
async fn unstable(
    a: &Attempt<'_>,
    plan: &Plan,
    revision: i64,
    previous: &HelmStatus,
    status: &mut HelmStatus,
) -> Result<bool, Error> {
    let (cr, host) = (a.cr, a.host);
    let again = render(host, &a.owner, &a.vals, revision, revision > 1).await?;
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

fn inventory_item(d: &Desired) -> InventoryItem {
    InventoryItem {
        api_version: d.gvk.api_version(),
        kind: d.gvk.kind.clone(),
        namespace: d.namespace().map(str::to_string),
        name: d.name().to_string(),
        keep: d.keep,
    }
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
