//! The VmGroup reconcile pipeline, one named step each:
//!
//! 1. **finalize** a VmGroup being deleted ([`finalize`]): power off and destroy the VMs
//!    that carry its mark ([`crate::owner`]), then its folder only if nothing else is left in
//!    it, then release the finalizer; vCenter unreachable or refusing, or the credentials
//!    gone → the finalizer stays, the status says why, the runtime retries with backoff.
//!    Nothing is orphaned silently: to give the VMs up, remove the finalizer by hand. What
//!    the group did not create is never touched, and a Warning Event names it;
//! 2. **validate** the spec into the [`Plan`] (pure);
//! 3. **keep the finalizer**;
//! 4. **connect** with the credentials Secret ([`crate::connect`]);
//! 5. **ensure the folder**: the one recorded in `status.folder`, else
//!    `<parent>/<namespace>_<name>`, created and marked with the VmGroup's UID; a folder
//!    there without that mark stops the group (`FolderNotOwned`);
//! 6. **read the group**: every VM in the folder, name, shape, power and marks, in one
//!    property retrieval, sorted into the group's own and foreign ones;
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
use bosun_vsphere::{Client, CloneOptions, FaultKind, FolderInfo, MoRef, PowerState, VmInfo};
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
use crate::owner::{Mark, Members, OWNER_FIELD, OWNER_KEY};
use crate::reason::{ConditionType, EventReason, Reason};
use crate::status::{compute, Foreign, Outcome};
use crate::validate::{validate, Identity, Plan};

/// The finalizer that removes the VMs and the folder before the VmGroup goes.
pub const FINALIZER: &str = "vm.codeconnect.vmworld.com/finalizer";

pub async fn reconcile(vg: Arc<VmGroup>, ctx: Arc<Context>) -> Result<Action, Error> {
    if vg.meta().deletion_timestamp.is_some() {
        return finalize(&vg, &ctx).await;
    }
    let result = match validate(
        &vg,
        &ctx.settings.parent_folder,
        ctx.settings.template_roots.as_deref(),
    ) {
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
    crate::migrate::set_finalizers(&api, vg, true).await?;
    let vc = ctx
        .vcenter
        .client(&ctx.client, &ctx.settings, &plan.id.namespace)
        .await?;
    let mark = mark_of(&vc, &plan.id.uid).await?;
    let folder = match crate::migrate::adopt_path(vg) {
        Some(path) => {
            let (folder, vms) = crate::migrate::adopt(&vc, &plan.id.name, &mark, path).await?;
            let note = format!(
                "took over the seed operator's folder {path} and its VMs: {}",
                if vms.is_empty() {
                    "none".to_string()
                } else {
                    vms.join(", ")
                }
            );
            event(ctx, vg, false, EventReason::Adopted.as_str(), &note).await;
            folder
        }
        None => ensure_folder(vg, &vc, plan, &mark, &ctx.settings.parent_folder).await?,
    };
    let (members, others) = read_group(&vc, &folder, &mark).await?;
    let foreign_names: Vec<String> = members.foreign.iter().map(|v| v.name.clone()).collect();
    let actions = diff::decide(plan, &members.owned, &foreign_names);
    let mut foreign = Foreign {
        objects: foreign_names.into_iter().chain(others).collect(),
        blocked: actions.blocked.clone(),
    };
    foreign.objects.sort();
    announce_foreign(vg, ctx, &foreign).await;
    let labelled = label(&vc, &mark, &members.unlabelled).await;
    let done = |current| Outcome::Converged {
        current,
        message: summary(plan, current, &folder.name, &foreign),
        folder: folder.folder.value.clone(),
        foreign: foreign.clone(),
    };
    if actions.is_empty() {
        labelled?;
        return Ok(done(diff::current(plan, &members.owned)));
    }
    let acted = act(vg, plan, ctx, &vc, &mark, &folder.folder, &actions).await;
    labelled?;
    acted?;
    let (members, _) = read_group(&vc, &folder, &mark).await?;
    Ok(done(diff::current(plan, &members.owned)))
}

fn summary(plan: &Plan, current: u32, folder: &str, foreign: &Foreign) -> String {
    let mut m = format!(
        "{current} of {} VMs running in the folder {folder}",
        plan.replicas
    );
    if !foreign.is_empty() {
        m.push_str(&format!(
            "; objects this VmGroup did not create, left alone: {}",
            foreign.objects.join(", ")
        ));
    }
    m
}

/// This group's mark in this vCenter (the custom field is defined on first use).
async fn mark_of(vc: &Client, uid: &str) -> Result<Mark, Error> {
    let field_key = vc
        .custom_field(OWNER_FIELD)
        .await
        .map_err(|e| Error::vsphere(&format!("reading the custom field {OWNER_FIELD}"), &e))?;
    Ok(Mark {
        field_key,
        uid: uid.to_string(),
    })
}

fn not_owned(what: &str, uid: &str) -> Error {
    Error::VCenter(Problem::new(
        Reason::FolderNotOwned,
        format!(
            "{what} was not created by this VmGroup (it lacks the custom field {OWNER_FIELD} = {uid}): \
             bosun changes nothing in it. Rename or move it, or give the VmGroup another name"
        ),
    ))
}

/// The group's folder as recorded in the status, if it still exists and is the group's.
async fn recorded_folder(
    vg: &VmGroup,
    vc: &Client,
    mark: &Mark,
) -> Result<Option<FolderInfo>, Error> {
    let Some(r) = vg.status.as_ref().and_then(|s| s.folder.as_deref()) else {
        return Ok(None);
    };
    let moref = MoRef::new("Folder", r);
    match vc.folder_info(&moref).await {
        Ok(Some(f)) if mark.owns_folder(&f) => Ok(Some(f)),
        Ok(Some(f)) => Err(not_owned(
            &format!("the folder {} ({r}) recorded in the status", f.name),
            &mark.uid,
        )),
        // Deleted in vCenter: made again at the path.
        Ok(None) => Ok(None),
        Err(e) => Err(Error::vsphere(&format!("reading the folder {r}"), &e)),
    }
}

/// Step 5.
async fn ensure_folder(
    vg: &VmGroup,
    vc: &Client,
    plan: &Plan,
    mark: &Mark,
    parent_path: &str,
) -> Result<FolderInfo, Error> {
    if let Some(f) = recorded_folder(vg, vc, mark).await? {
        return Ok(f);
    }
    let path = &plan.id.folder_path;
    let lookup =
        |e: bosun_vsphere::Error| Error::vsphere(&format!("looking up the folder {path}"), &e);
    if let Some(found) = vc.find_by_inventory_path(path).await.map_err(lookup)? {
        return match vc.folder_info(&found).await.map_err(lookup)? {
            Some(f) if mark.owns_folder(&f) => Ok(f),
            _ => Err(not_owned(&format!("{path} ({found})"), &mark.uid)),
        };
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
    let created = match vc.create_folder(&parent, &plan.id.folder_name).await {
        Ok(f) => f,
        // Created meanwhile by someone: only taken if it carries the mark (next reconcile).
        Err(e) if e.fault_kind() == Some(&FaultKind::DuplicateName) => {
            return Err(not_owned(path, &mark.uid))
        }
        Err(e) => return Err(Error::vsphere(&format!("creating the folder {path}"), &e)),
    };
    if let Err(e) = vc.set_field(&created, mark.field_key, &mark.uid).await {
        // An unmarked folder would never be taken again: remove it while it is empty.
        let _ = vc.destroy(&created).await;
        return Err(Error::vsphere(&format!("marking the folder {path}"), &e));
    }
    vc.folder_info(&created)
        .await
        .map_err(lookup)?
        .ok_or_else(|| not_owned(path, &mark.uid))
}

/// Step 6: one retrieval for the group's VMs, sorted by their marks; and the names of other
/// objects (not VMs) in the folder.
async fn read_group(
    vc: &Client,
    folder: &FolderInfo,
    mark: &Mark,
) -> Result<(Members, Vec<String>), Error> {
    let vms = vc
        .vms_in_folder(&folder.folder)
        .await
        .map_err(|e| Error::vsphere("reading the group's VMs", &e))?;
    let others: Vec<MoRef> = folder
        .children
        .iter()
        .filter(|c| c.kind != "VirtualMachine")
        .cloned()
        .collect();
    let others = if others.is_empty() {
        Vec::new()
    } else {
        vc.names(&others)
            .await
            .map_err(|e| Error::vsphere("reading the folder's other objects", &e))?
    };
    Ok((mark.sort(vms), others))
}

/// Sets the custom field on VMs marked only through extraConfig (a clone whose operator
/// stopped before marking it), so a vSphere admin sees whose they are.
async fn label(vc: &Client, mark: &Mark, vms: &[VmInfo]) -> Result<(), Error> {
    for v in vms {
        vc.set_field(&v.vm, mark.field_key, &mark.uid)
            .await
            .map_err(|e| Error::vsphere(&format!("marking VM {}", v.name), &e))?;
    }
    Ok(())
}

/// A Warning Event when foreign objects appear or change; the condition says it meanwhile.
async fn announce_foreign(vg: &VmGroup, ctx: &Context, foreign: &Foreign) {
    if foreign.is_empty() {
        return;
    }
    let message = foreign.message();
    let same = vg
        .status
        .as_ref()
        .and_then(|s| find(&s.conditions, ConditionType::ForeignObjects.as_str()))
        .is_some_and(|c| c.status == "True" && c.message == message);
    if !same {
        let reason = Reason::ForeignObjectsLeftAlone.as_str();
        event(ctx, vg, true, reason, &message).await;
    }
}

/// Step 7. Every operation of a kind runs (bounded in parallel) even when one fails; the
/// first failure is returned after, and the next reconcile starts from what vCenter shows.
async fn act(
    vg: &VmGroup,
    plan: &Plan,
    ctx: &Context,
    vc: &Client,
    mark: &Mark,
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
        let options = CloneOptions {
            pool: pool_for(vc, ctx, &template).await?,
            extra_config: vec![(OWNER_KEY.to_string(), mark.uid.clone())],
        };
        let (template, options) = (&template, &options);
        let results = bounded(actions.clone.clone(), bound, |name| {
            Box::pin(
                async move { clone_one(vc, plan, mark, template, options, folder, &name).await },
            )
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

/// The pool clones go in: the configured one, else the template's (or for a vSphere
/// template, which has none, its host's cluster pool) — a template clones with a pool only.
async fn pool_for(vc: &Client, ctx: &Context, template: &MoRef) -> Result<Option<MoRef>, Error> {
    if let Some(path) = &ctx.settings.resource_pool {
        return match vc.find_by_inventory_path(path).await {
            Ok(Some(p)) => Ok(Some(p)),
            Ok(None) => Err(Error::VCenter(Problem::new(
                Reason::VCenterRefused,
                format!("the resource pool {path} (BOSUN_VMGROUP_RESOURCE_POOL) does not exist in vCenter; create it or correct the setting"),
            ))),
            Err(e) => Err(Error::vsphere(&format!("looking up the resource pool {path}"), &e)),
        };
    }
    vc.default_pool(template)
        .await
        .map_err(|e| Error::vsphere("finding the template's resource pool", &e))
}

async fn clone_one(
    vc: &Client,
    plan: &Plan,
    mark: &Mark,
    template: &MoRef,
    options: &CloneOptions,
    folder: &MoRef,
    name: &str,
) -> Result<String, Error> {
    let vm = match vc
        .clone_vm_with(template, folder, name, plan.shape, options)
        .await
    {
        Ok(vm) => vm,
        // Cloned before (a crash or a race): taken only when it carries the mark.
        Err(e) if e.fault_kind() == Some(&FaultKind::DuplicateName) => {
            let lookup =
                |e: bosun_vsphere::Error| Error::vsphere(&format!("looking up VM {name}"), &e);
            let vm = vc.require_path(&plan.vm_path(name)).await.map_err(lookup)?;
            let seen = vc.vms(std::slice::from_ref(&vm)).await.map_err(lookup)?;
            if mark.sort(seen).owned.is_empty() {
                return Err(Error::VCenter(Problem::new(
                    Reason::ForeignObjectsLeftAlone,
                    format!("VM {name} exists in the group's folder and was not created by this VmGroup: left alone"),
                )));
            }
            vm
        }
        Err(e) => return Err(Error::vsphere(&format!("cloning VM {name}"), &e)),
    };
    vc.set_field(&vm, mark.field_key, &mark.uid)
        .await
        .map_err(|e| Error::vsphere(&format!("marking VM {name}"), &e))?;
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

/// Step 1: the group's VMs and (when nothing else is in it) its folder go first; the
/// finalizer only after.
async fn finalize(vg: &VmGroup, ctx: &Context) -> Result<Action, Error> {
    let api: Api<VmGroup> =
        Api::namespaced(ctx.client.clone(), &vg.namespace().unwrap_or_default());
    if !vg.finalizers().iter().any(|f| f == FINALIZER) {
        crate::migrate::set_finalizers(&api, vg, false).await?;
        return Ok(Action::await_change());
    }
    let id = Identity::of(vg, &ctx.settings.parent_folder);
    let left = match delete_group(vg, ctx, &id).await {
        Ok(left) => left,
        Err(e) => {
            let Some(p) = e.problem().cloned() else {
                return Err(e);
            };
            let outcome = Outcome::Deleting(p);
            publish_status(vg, ctx, &outcome).await?;
            return Err(e);
        }
    };
    let note = match &left {
        None => format!("deleted its VMs and the folder {}", id.folder_path),
        Some(why) => {
            let reason = Reason::ForeignObjectsLeftAlone.as_str();
            event(ctx, vg, true, reason, why).await;
            format!("deleted its VMs; {why}")
        }
    };
    crate::migrate::set_finalizers(&api, vg, false).await?;
    event(ctx, vg, false, EventReason::Deleted.as_str(), &note).await;
    ctx.status.forget(&id.uid);
    Ok(Action::await_change())
}

/// Every VM in the group's folder that carries its mark (powered off first), then the
/// folder if that left it empty. Some(what was left alone, in words) when anything was.
async fn delete_group(vg: &VmGroup, ctx: &Context, id: &Identity) -> Result<Option<String>, Error> {
    let vc = ctx
        .vcenter
        .client(&ctx.client, &ctx.settings, &id.namespace)
        .await?;
    let mark = mark_of(&vc, &id.uid).await?;
    let path = &id.folder_path;
    let lookup =
        |e: bosun_vsphere::Error| Error::vsphere(&format!("looking up the folder {path}"), &e);
    let folder = match recorded_folder(vg, &vc, &mark).await {
        Ok(Some(f)) => f,
        Err(e)
            if e.problem()
                .is_some_and(|p| p.reason == Reason::FolderNotOwned) =>
        {
            return Ok(Some(format!(
                "{}: nothing in it was touched",
                e.problem().map(|p| p.message.clone()).unwrap_or_default()
            )));
        }
        Err(e) => return Err(e),
        Ok(None) => {
            let Some(found) = vc.find_by_inventory_path(path).await.map_err(lookup)? else {
                return Ok(None);
            };
            match vc.folder_info(&found).await.map_err(lookup)? {
                Some(f) if mark.owns_folder(&f) => f,
                _ => {
                    return Ok(Some(format!(
                        "{path} was not created by this VmGroup (no {OWNER_FIELD} mark with its UID): nothing in it was touched"
                    )))
                }
            }
        }
    };
    let (members, _) = read_group(&vc, &folder, &mark).await?;
    // A group pointed (without the validating webhook) at one of its own VMs as its template:
    // that VM is the template now, and outlives the group.
    let template = crate::validate::normalize_path(&crate::webhook::resolve_template(
        &vg.spec.template,
        &ctx.settings.parent_folder,
    ))
    .ok();
    let folder_path = crate::validate::normalize_path(path).ok();
    let is_template = |v: &bosun_vsphere::VmInfo| match (&template, &folder_path) {
        (Some(t), Some(f)) => *t == format!("{f}/{}", v.name),
        _ => false,
    };
    let (kept, owned): (Vec<_>, Vec<_>) = members.owned.into_iter().partition(is_template);
    let bound = ctx.settings.parallel.max(1);
    let vc = &vc;
    let results = bounded(owned, bound, |v| {
        Box::pin(async move { remove_one(vc, &v).await })
    })
    .await;
    results.into_iter().collect::<Result<Vec<()>, Error>>()?;
    let Some(now) = vc.folder_info(&folder.folder).await.map_err(lookup)? else {
        return Ok(None);
    };
    if !now.children.is_empty() {
        let mut names = vc
            .names(&now.children)
            .await
            .map_err(|e| Error::vsphere("reading the folder's other objects", &e))?;
        names.retain(|n| !kept.iter().any(|k| &k.name == n));
        let mut why = vec![];
        if let Some(t) = kept.first() {
            why.push(format!(
                "{}, the group's own template (spec.template)",
                t.name
            ));
        }
        if !names.is_empty() {
            why.push(format!(
                "{} that this VmGroup did not create",
                names.join(", ")
            ));
        }
        return Ok(Some(format!(
            "left the folder {path} in place: it holds {}",
            why.join(", and ")
        )));
    }
    match vc.destroy(&folder.folder).await {
        Err(e) if e.fault_kind() != Some(&FaultKind::NotFound) => {
            Err(Error::vsphere(&format!("destroying the folder {path}"), &e))
        }
        _ => Ok(None),
    }
}
