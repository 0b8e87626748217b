//! The VmGroup reconcile pipeline, one named step each:
//!
//! 1. **finalize** a VmGroup being deleted ([`finalize`]): power off and destroy its VMs and
//!    its folder (every VM in it), then release the finalizer; vCenter unreachable or
//!    refusing, or the credentials gone → the finalizer stays, the status says why, the
//!    runtime retries with backoff. Nothing is orphaned silently: to give the VMs up, remove
//!    the finalizer by hand;
//! 2. **validate** the spec into the [`Plan`] (pure);
//! 3. **keep the finalizer**;
//! 4. **connect** with the credentials Secret ([`crate::connect`]);
//! 5. **ensure the folder** `<parent>/<namespace>-<name>`;
//! 6. **read the group**: every VM in the folder, name, shape and power, in one property
//!    retrieval;
//! 7. **decide** ([`crate::diff`], pure) and **act**: clone the missing numbers in parallel
//!    (bounded), each then reconfigured to the shape (vcsim's clone ignores it) and powered
//!    on; reconfigure VMs of another shape (power off, reconfigure, power on); power on VMs
//!    found off; remove the highest numbers above `replicas` (power off, destroy);
//! 8. **publish the status** (only on change) and Events: the VMs created or removed, a
//!    problem when it appears, its resolution.
//!
//! Clone names are deterministic: a clone interrupted by a crash left a VM of that name,
//! which the next read counts (and shapes and powers on); a clone racing it fails with
//! DuplicateName on vCenter and takes the existing VM. A server that lets the name repeat
//! (vcsim) ends with two VMs of one number: the next read removes the extra one
//! ([`crate::diff`]).
use std::sync::Arc;

use bosun_runtime::conditions::find;
use bosun_runtime::owner::set_finalizer;
use bosun_vsphere::{Client, FaultKind, MoRef, PowerState, VmInfo};
use futures::future::BoxFuture;
use futures::stream::{self, StreamExt};
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use crate::api::VmGroup;
use crate::diff::{self, Actions};
use crate::error::{Error, Problem};
use crate::operator::Context;
use crate::reason::{ConditionType, EventReason, Reason};
use crate::status::{compute, Outcome};
use crate::validate::{validate, Identity, Plan};

/// The finalizer that removes the VMs and the folder before the VmGroup goes.
pub const FINALIZER: &str = "vm.codeconnect.vmworld.com/finalizer";

pub async fn reconcile(vg: Arc<VmGroup>, ctx: Arc<Context>) -> Result<Action, Error> {
    if vg.meta().deletion_timestamp.is_some() {
        return finalize(&vg, &ctx).await;
    }
    let result = match validate(&vg, &ctx.settings.parent_folder) {
        Ok(plan) => converge(&vg, &plan, &ctx).await,
        Err(problem) => Err(Error::InvalidSpec(problem)),
    };
    let (outcome, failure) = match result {
        Ok(o) => (o, None),
        Err(e) => match e.problem().cloned() {
            Some(p) => (Outcome::Problem(p), Some(e)),
            None => return Err(e),
        },
    };
    let status = publish_status(&vg, &ctx, &outcome).await?;
    match failure {
        Some(e) => Err(e),
        // Not yet all there (a VM vanished between act and read): look again soon.
        None if status.current_replicas != status.desired_replicas => {
            Ok(Action::requeue(std::time::Duration::from_secs(5)))
        }
        // vCenter sends no events here: read the group again to repair changes made there.
        None => Ok(Action::requeue(ctx.settings.resync)),
    }
}

/// Steps 3-7.
async fn converge(vg: &VmGroup, plan: &Plan, ctx: &Context) -> Result<Outcome, Error> {
    let api: Api<VmGroup> = Api::namespaced(ctx.client.clone(), &plan.id.namespace);
    set_finalizer(&api, vg, FINALIZER, true).await?;
    let vc = ctx
        .vcenter
        .client(&ctx.client, &ctx.settings, &plan.id.namespace)
        .await?;
    let folder = ensure_folder(&vc, plan, &ctx.settings.parent_folder).await?;
    let seen = read_group(&vc, &folder).await?;
    let actions = diff::decide(plan, &seen);
    if actions.is_empty() {
        let current = diff::current(plan, &seen);
        return Ok(Outcome::Converged {
            current,
            message: summary(plan, current, &actions),
        });
    }
    act(vg, plan, ctx, &vc, &folder, &actions).await?;
    let seen = read_group(&vc, &folder).await?;
    let current = diff::current(plan, &seen);
    Ok(Outcome::Converged {
        current,
        message: summary(plan, current, &actions),
    })
}

fn summary(plan: &Plan, current: u32, actions: &Actions) -> String {
    let mut m = format!(
        "{current} of {} VMs running in {}",
        plan.replicas, plan.id.folder_path
    );
    if !actions.foreign.is_empty() {
        m.push_str(&format!(
            "; other VMs in the folder, left alone: {}",
            actions.foreign.join(", ")
        ));
    }
    m
}

/// Step 5.
async fn ensure_folder(vc: &Client, plan: &Plan, parent_path: &str) -> Result<MoRef, Error> {
    let path = &plan.id.folder_path;
    let found = vc
        .find_by_inventory_path(path)
        .await
        .map_err(|e| Error::vsphere(&format!("looking up the folder {path}"), &e))?;
    if let Some(f) = found {
        return Ok(f);
    }
    let parent = match vc.find_by_inventory_path(parent_path).await {
        Ok(Some(p)) => p,
        Ok(None) => {
            return Err(Error::VCenter(Problem::new(
                Reason::ParentFolderNotFound,
                format!("the operator's parent folder {parent_path} does not exist in vCenter; create it or set BOSUN_VMGROUP_PARENT_FOLDER"),
            )))
        }
        Err(e) => return Err(Error::vsphere(&format!("looking up the folder {parent_path}"), &e)),
    };
    match vc.create_folder(&parent, &plan.id.folder_name).await {
        Ok(f) => Ok(f),
        // Created meanwhile (another reconcile, or a lagging inventory path search).
        Err(e) if e.fault_kind() == Some(&FaultKind::DuplicateName) => vc
            .require_path(path)
            .await
            .map_err(|e| Error::vsphere(&format!("looking up the folder {path}"), &e)),
        Err(e) => Err(Error::vsphere(&format!("creating the folder {path}"), &e)),
    }
}

/// Step 6: one retrieval for the whole group.
async fn read_group(vc: &Client, folder: &MoRef) -> Result<Vec<VmInfo>, Error> {
    vc.vms_in_folder(folder)
        .await
        .map_err(|e| Error::vsphere("reading the group's VMs", &e))
}

/// Step 7. Every operation of a kind runs (bounded in parallel) even when one fails; the
/// first failure is returned after, and the next reconcile starts from what vCenter shows.
async fn act(
    vg: &VmGroup,
    plan: &Plan,
    ctx: &Context,
    vc: &Client,
    folder: &MoRef,
    actions: &Actions,
) -> Result<(), Error> {
    let bound = ctx.settings.parallel.max(1);
    let mut first_error: Option<Error> = None;
    let mut keep = |r: Result<(), Error>| {
        if let Err(e) = r {
            first_error.get_or_insert(e);
        }
    };
    if !actions.clone.is_empty() {
        let template = match vc.find_by_inventory_path(&plan.template_path).await {
            Ok(Some(t)) => t,
            Ok(None) => {
                return Err(Error::VCenter(Problem::new(
                    Reason::TemplateNotFound,
                    format!(
                        "the template {} does not exist in vCenter (spec.template {:?}); create it or correct spec.template",
                        plan.template_path, vg.spec.template
                    ),
                )))
            }
            Err(e) => {
                return Err(Error::vsphere(
                    &format!("looking up the template {}", plan.template_path),
                    &e,
                ))
            }
        };
        let template = &template;
        let results = bounded(actions.clone.clone(), bound, |name| {
            Box::pin(async move { clone_one(vc, plan, template, folder, &name).await })
        })
        .await;
        let mut created = Vec::new();
        for r in results {
            match r {
                Ok(name) => created.push(name),
                Err(e) => keep(Err(e)),
            }
        }
        if !created.is_empty() {
            created.sort();
            let note = format!("created {}", created.join(", "));
            event(ctx, vg, false, EventReason::VmCreated.as_str(), &note).await;
        }
    }
    let reshaped = bounded(actions.reshape.clone(), bound, |v| {
        Box::pin(async move { (v.name.clone(), reshape_one(vc, plan, &v).await) })
    })
    .await;
    let done = succeeded(reshaped, &mut keep);
    if !done.is_empty() {
        let note = format!(
            "reconfigured {} to {} CPU(s), {} MB",
            done.join(", "),
            plan.shape.num_cpus,
            plan.shape.memory_mb
        );
        event(ctx, vg, false, EventReason::VmReconfigured.as_str(), &note).await;
    }
    let powered = bounded(actions.power_on.clone(), bound, |v| {
        Box::pin(async move { (v.name.clone(), power_on_ref(vc, &v.vm, &v.name).await) })
    })
    .await;
    let done = succeeded(powered, &mut keep);
    if !done.is_empty() {
        let note = format!("powered on {}, found off", done.join(", "));
        event(ctx, vg, false, EventReason::VmPoweredOn.as_str(), &note).await;
    }
    // A second VM of a number (a clone repeated after a crash) goes first; then the highest
    // numbers, one at a time: an interrupted scale-down leaves no gap.
    let removals = actions
        .duplicates
        .iter()
        .map(|v| {
            (
                v,
                "a second VM of that name, from a clone repeated after a crash".to_string(),
            )
        })
        .chain(
            actions
                .remove
                .iter()
                .map(|v| (v, format!("scale down to {}", plan.replicas))),
        );
    for (v, why) in removals {
        let r = remove_one(vc, v).await;
        let failed = r.is_err();
        keep(r);
        if failed {
            break;
        }
        let note = format!("removed {} ({why})", v.name);
        event(ctx, vg, false, EventReason::VmRemoved.as_str(), &note).await;
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// `f` of every item, at most `bound` at a time.
async fn bounded<'a, T, R>(
    items: Vec<T>,
    bound: usize,
    f: impl Fn(T) -> BoxFuture<'a, R>,
) -> Vec<R> {
    stream::iter(items.into_iter().map(f))
        .buffer_unordered(bound)
        .collect()
        .await
}

/// The names whose operation succeeded, sorted; failures go to `keep`.
fn succeeded(
    results: Vec<(String, Result<(), Error>)>,
    keep: &mut impl FnMut(Result<(), Error>),
) -> Vec<String> {
    let mut done = Vec::new();
    for (name, r) in results {
        match r {
            Ok(()) => done.push(name),
            Err(e) => keep(Err(e)),
        }
    }
    done.sort();
    done
}

async fn clone_one(
    vc: &Client,
    plan: &Plan,
    template: &MoRef,
    folder: &MoRef,
    name: &str,
) -> Result<String, Error> {
    let vm = match vc.clone_vm(template, folder, name, plan.shape).await {
        Ok(vm) => vm,
        // Cloned before (a crash or a race): take it.
        Err(e) if e.fault_kind() == Some(&FaultKind::DuplicateName) => vc
            .require_path(&plan.vm_path(name))
            .await
            .map_err(|e| Error::vsphere(&format!("looking up VM {name}"), &e))?,
        Err(e) => return Err(Error::vsphere(&format!("cloning VM {name}"), &e)),
    };
    vc.reconfigure(&vm, plan.shape)
        .await
        .map_err(|e| Error::vsphere(&format!("reconfiguring VM {name}"), &e))?;
    power_on_ref(vc, &vm, name).await?;
    Ok(name.to_string())
}

async fn reshape_one(vc: &Client, plan: &Plan, v: &VmInfo) -> Result<(), Error> {
    if v.power_state == Some(PowerState::PoweredOn) {
        power_off_ref(vc, &v.vm, &v.name).await?;
    }
    vc.reconfigure(&v.vm, plan.shape)
        .await
        .map_err(|e| Error::vsphere(&format!("reconfiguring VM {}", v.name), &e))?;
    power_on_ref(vc, &v.vm, &v.name).await
}

/// Powered on already (by someone else meanwhile) is what was wanted.
async fn power_on_ref(vc: &Client, vm: &MoRef, name: &str) -> Result<(), Error> {
    match vc.power_on(vm).await {
        Err(e) if e.fault_kind() != Some(&FaultKind::InvalidState) => {
            Err(Error::vsphere(&format!("powering on VM {name}"), &e))
        }
        _ => Ok(()),
    }
}

async fn power_off_ref(vc: &Client, vm: &MoRef, name: &str) -> Result<(), Error> {
    match vc.power_off(vm).await {
        Err(e) if e.fault_kind() != Some(&FaultKind::InvalidState) => {
            Err(Error::vsphere(&format!("powering off VM {name}"), &e))
        }
        _ => Ok(()),
    }
}

/// Power off and destroy; a VM already gone is what was wanted.
async fn remove_one(vc: &Client, v: &VmInfo) -> Result<(), Error> {
    if v.power_state != Some(PowerState::PoweredOff) {
        power_off_ref(vc, &v.vm, &v.name).await?;
    }
    match vc.destroy(&v.vm).await {
        Err(e) if e.fault_kind() != Some(&FaultKind::NotFound) => {
            Err(Error::vsphere(&format!("destroying VM {}", v.name), &e))
        }
        _ => Ok(()),
    }
}

/// Step 8: computes and writes the status.
async fn publish_status(
    vg: &VmGroup,
    ctx: &Context,
    outcome: &Outcome,
) -> Result<crate::api::VmGroupStatus, Error> {
    let status = compute(
        vg.metadata.generation,
        vg.spec.replicas,
        vg.status.as_ref(),
        outcome,
        Timestamp::now(),
    );
    announce_problem(vg, ctx, outcome).await;
    let api: Api<VmGroup> =
        Api::namespaced(ctx.client.clone(), &vg.namespace().unwrap_or_default());
    ctx.status
        .write_if_changed(&api, vg, vg.status.as_ref(), &status)
        .await?;
    Ok(status)
}

/// An Event when a problem appears or changes, and when it is resolved; not on every retry.
async fn announce_problem(vg: &VmGroup, ctx: &Context, outcome: &Outcome) {
    let before = vg
        .status
        .as_ref()
        .and_then(|s| find(&s.conditions, ConditionType::Degraded.as_str()))
        .filter(|c| c.status == "True");
    match outcome {
        Outcome::Problem(p) | Outcome::Deleting(p) => {
            let same = before
                .is_some_and(|c| c.reason == p.reason.as_str() && c.message.contains(&p.message));
            if !same {
                event(ctx, vg, true, p.reason.as_str(), &p.message).await;
            }
        }
        Outcome::Converged { .. } if before.is_some() => {
            let note = "the earlier problem is resolved";
            event(ctx, vg, false, EventReason::Recovered.as_str(), note).await;
        }
        Outcome::Converged { .. } => {}
    }
}

async fn event(ctx: &Context, vg: &VmGroup, warning: bool, reason: &str, note: &str) {
    ctx.events
        .publish(&vg.object_ref(&()), warning, reason, "Reconcile", note)
        .await;
}

/// Step 1: the VMs and the folder go first; the finalizer only after.
async fn finalize(vg: &VmGroup, ctx: &Context) -> Result<Action, Error> {
    if !vg.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(Action::await_change());
    }
    let id = Identity::of(vg, &ctx.settings.parent_folder);
    if let Err(e) = delete_group(ctx, &id).await {
        let Some(p) = e.problem().cloned() else {
            return Err(e);
        };
        let outcome = Outcome::Deleting(p);
        publish_status(vg, ctx, &outcome).await?;
        return Err(e);
    }
    let api: Api<VmGroup> = Api::namespaced(ctx.client.clone(), &id.namespace);
    set_finalizer(&api, vg, FINALIZER, false).await?;
    let note = format!("deleted its VMs and the folder {}", id.folder_path);
    event(ctx, vg, false, EventReason::Deleted.as_str(), &note).await;
    ctx.status.forget(&id.uid);
    Ok(Action::await_change())
}

/// Every VM in the group's folder (powered off first), then the folder.
async fn delete_group(ctx: &Context, id: &Identity) -> Result<(), Error> {
    let vc = ctx
        .vcenter
        .client(&ctx.client, &ctx.settings, &id.namespace)
        .await?;
    let path = &id.folder_path;
    let Some(folder) = vc
        .find_by_inventory_path(path)
        .await
        .map_err(|e| Error::vsphere(&format!("looking up the folder {path}"), &e))?
    else {
        return Ok(());
    };
    let vms = read_group(&vc, &folder).await?;
    let bound = ctx.settings.parallel.max(1);
    let vc = &vc;
    let results = bounded(vms, bound, |v| {
        Box::pin(async move { remove_one(vc, &v).await })
    })
    .await;
    results.into_iter().collect::<Result<Vec<()>, Error>>()?;
    match vc.destroy(&folder).await {
        Err(e) if e.fault_kind() != Some(&FaultKind::NotFound) => {
            Err(Error::vsphere(&format!("destroying the folder {path}"), &e))
        }
        _ => Ok(()),
    }
}
