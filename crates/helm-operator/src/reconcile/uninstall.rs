//! Step 1: uninstall, as Helm's `uninstall` does it under helm-operator.
//!
//! 1. **read the stored release** — its last record (or, with `--release-storage=none`, the
//!    status's inventory): its objects and its hooks come from there, never from a fresh
//!    render of the spec (the spec may no longer render, or render other hooks). No record
//!    left (the namespace's deletion took the Secrets first, or it was never installed):
//!    nothing to run, the finalizer goes — Helm's "release not found", which helm-operator
//!    ignores;
//! 2. run the **pre-delete hooks**, unless they already ran (the record says `uninstalled`);
//!    in a namespace being deleted the API server refuses every new object: the delete hooks
//!    are skipped, the objects are going with the namespace anyway;
//! 3. **delete** the release's objects but those kept by policy, and count those still there;
//! 4. run the **post-delete hooks** (same rules as 2);
//! 5. with `uninstall-wait` and objects still there (finalizers of their own), mark the record
//!    `uninstalled` so later passes only poll the objects, and come back in 2 s;
//! 6. otherwise remove the records and release the finalizer.
use std::time::Duration;

use bosun_helm::render::manifest::Manifest;
use kube::api::Api;
use kube::core::DynamicObject;
use kube::{Resource, ResourceExt};

use super::{
    annotation_true, api_of, delete_object, now, old_objects, owner_of, render, Ctx, Old,
    FINALIZER, LEGACY_FINALIZER, UNINSTALL_WAIT_ANNOTATION,
};
use crate::error::Error;
use crate::hooks::{self, Event, Hook, HookError};
use crate::objects::{self, ReleaseOwner};
use crate::release::{self, Release};
use crate::status::{ConditionType as C, HelmStatus, Reason as R};
use crate::storage::{records, Records, Storage};
use crate::values;
use bosun_watches::host::Next;

/// `Deployed`'s message while `uninstall-wait` holds the custom resource.
pub const WAITING: &str = "Waiting until all resources are deleted.";

/// How often an uninstall that waits for its objects looks again.
const WAIT_POLL: Duration = Duration::from_secs(2);

/// The release as stored: what uninstalling it removes and runs.
struct Stored {
    /// The release's records, all of them (Secrets storage).
    records: Option<(Box<dyn Records>, Vec<Release>)>,
    objects: Vec<Old>,
    hooks: Vec<Hook>,
    /// The delete hooks already ran (an earlier pass that is now waiting for objects).
    hooks_done: bool,
}

pub(super) async fn uninstall(
    cr: &DynamicObject,
    host: &Ctx,
    api: &Api<DynamicObject>,
    previous: &HelmStatus,
) -> Result<Next, Error> {
    let ours = cr
        .finalizers()
        .iter()
        .any(|f| f == FINALIZER || f == LEGACY_FINALIZER);
    if !ours {
        return Ok(Next::AwaitChange);
    }
    let t = now();
    let wait = annotation_true(cr, UNINSTALL_WAIT_ANNOTATION);
    let mut status = previous.clone();
    let remaining = match remove_release(cr, host, previous, wait).await {
        Ok(n) => n,
        Err(e) => {
            status.set(
                previous,
                C::ReleaseFailed,
                true,
                Some(R::UninstallError),
                Some(e.to_string()),
                &t,
            );
            host.status
                .write_if_changed_with(api, &host.resource, cr, Some(previous), &status)
                .await?;
            // The error keeps its category: a failed hook or an API error backs off and is
            // retried, it is not "invalid spec" waiting for a change that will not come.
            return Err(e);
        }
    };
    if remaining > 0 && wait {
        status.set(
            previous,
            C::Deployed,
            false,
            Some(R::UninstallSuccessful),
            // helm-operator's words, which scripts and dashboards already match on.
            Some(WAITING.to_string()),
            &t,
        );
        host.status
            .write_if_changed_with(api, &host.resource, cr, Some(previous), &status)
            .await?;
        return Ok(Next::After(WAIT_POLL));
    }
    status.remove(C::ReleaseFailed);
    status.set(
        previous,
        C::Deployed,
        false,
        Some(R::UninstallSuccessful),
        None,
        &t,
    );
    status.deployed_release = None;
    match host
        .status
        .write_if_changed_with(api, &host.resource, cr, Some(previous), &status)
        .await
    {
        // The object may be going already (its namespace is): the status is a courtesy.
        Ok(_) | Err(kube::Error::Api(_)) => {}
        Err(e) => return Err(e.into()),
    }
    bosun_runtime::owner::set_finalizer(api, cr, LEGACY_FINALIZER, false).await?;
    if let Some(fresh) = api.get_opt(&cr.name_any()).await? {
        bosun_runtime::owner::set_finalizer(api, &fresh, FINALIZER, false).await?;
    }
    Ok(Next::AwaitChange)
}

/// Steps 1-6 but the finalizer; returns how many of the release's objects still exist.
async fn remove_release(
    cr: &DynamicObject,
    host: &Ctx,
    previous: &HelmStatus,
    wait: bool,
) -> Result<usize, Error> {
    let owner = owner_of(cr, host)?;
    let stored = stored(cr, host, &owner, previous).await?;
    let runner = hooks::Runner {
        client: &host.client,
        discovery: &host.discovery,
        owner: &owner,
        timeout: hooks::TIMEOUT,
    };
    let mut recs = hooks::records(&stored.hooks);
    let mut run_hooks = !stored.hooks_done;
    if run_hooks {
        run_hooks = run_delete_hooks(&runner, &stored.hooks, Event::PreDelete, &mut recs).await?;
    }
    let remaining = delete_objects(host, &owner, &stored.objects).await?;
    if run_hooks {
        run_delete_hooks(&runner, &stored.hooks, Event::PostDelete, &mut recs).await?;
    }
    let Some((secrets, history)) = stored.records else {
        return Ok(remaining);
    };
    if remaining > 0 && wait {
        if !stored.hooks_done {
            if let Some(last) = last_record(&history) {
                let mut marked = last.clone();
                marked.info.status = release::status::UNINSTALLED.into();
                marked.info.deleted = now();
                marked.info.description = "Uninstallation complete; waiting for objects".into();
                marked.hooks = merge_runs(marked.hooks, &recs);
                secrets.update(&marked, Some(&owner.owner)).await?;
            }
        }
        return Ok(remaining);
    }
    for r in &history {
        secrets.delete(r).await?;
    }
    Ok(remaining)
}

/// Runs the hooks of a delete event; false when the namespace is being deleted (the hooks of
/// the other delete event are then skipped too).
async fn run_delete_hooks(
    runner: &hooks::Runner<'_>,
    hooks: &[Hook],
    event: Event,
    recs: &mut [release::Hook],
) -> Result<bool, Error> {
    match runner.run(hooks, event, recs).await {
        Ok(()) => Ok(true),
        Err(HookError::NamespaceTerminating { name }) => {
            tracing::info!(
                release = %runner.owner.release,
                hook = %name,
                "the namespace is being deleted: delete hooks skipped"
            );
            Ok(false)
        }
        Err(e) => Err(e.into()),
    }
}

/// The record an uninstall works from: the last deployed one, else the latest.
fn last_record(history: &[Release]) -> Option<&Release> {
    history
        .iter()
        .rev()
        .find(|r| r.info.status == release::status::DEPLOYED)
        .or(history.last())
}

/// The record's hooks with the last runs of this uninstall.
fn merge_runs(mut recorded: Vec<release::Hook>, ran: &[release::Hook]) -> Vec<release::Hook> {
    for r in recorded.iter_mut() {
        if let Some(run) = ran
            .iter()
            .find(|h| h.name == r.name && h.kind == r.kind && h.path == r.path)
            .filter(|h| !h.last_run.phase.is_empty())
        {
            r.last_run = run.last_run.clone();
        }
    }
    recorded
}

async fn stored(
    cr: &DynamicObject,
    host: &Ctx,
    owner: &ReleaseOwner,
    previous: &HelmStatus,
) -> Result<Stored, Error> {
    match host.flavor.storage {
        Storage::Secrets | Storage::ConfigMaps => {
            let s = records(host.flavor.storage, host.client.clone(), &owner.namespace);
            let history = s.lookup(&owner.release, &owner.owner).await?.history;
            let Some(last) = last_record(&history).cloned() else {
                return Ok(Stored {
                    records: Some((s, history)),
                    objects: Vec::new(),
                    hooks: Vec::new(),
                    hooks_done: true,
                });
            };
            Ok(Stored {
                objects: old_objects(host, owner, &last.manifest).await,
                hooks: recorded_hooks(&last),
                hooks_done: last.info.status == release::status::UNINSTALLED,
                records: Some((s, history)),
            })
        }
        Storage::None => {
            // No record: the inventory in the status names the objects, and the hooks are
            // those the spec renders (the only place they can come from). A pass that is
            // waiting for objects has already run them.
            let hooks_done = previous.condition(C::Deployed).is_some_and(|c| {
                c.reason.as_deref() == Some(R::UninstallSuccessful.as_str())
                    && c.message
                        .as_deref()
                        .is_some_and(|m| m.starts_with("waiting for"))
            });
            let hooks = if hooks_done {
                Vec::new()
            } else {
                fresh_hooks(cr, host, owner, previous).await
            };
            Ok(Stored {
                records: None,
                objects: previous.inventory.iter().map(Old::from_inventory).collect(),
                hooks,
                hooks_done,
            })
        }
    }
}

/// The delete hooks a release record carries (a hook that no longer parses is skipped, and
/// said so).
fn recorded_hooks(rec: &Release) -> Vec<Hook> {
    let manifests: Vec<Manifest> = rec
        .hooks
        .iter()
        .filter(|h| {
            h.events
                .iter()
                .any(|e| e == "pre-delete" || e == "post-delete")
        })
        .map(|h| Manifest {
            path: h.path.clone(),
            content: h.manifest.clone(),
            api_version: String::new(),
            kind: h.kind.clone(),
            name: h.name.clone(),
            hook: Some(h.events.join(",")),
        })
        .collect();
    let mut out = Vec::new();
    for m in manifests {
        match hooks::parse(std::slice::from_ref(&m)) {
            Ok(mut h) => out.append(&mut h),
            Err(e) => {
                tracing::warn!(release = %rec.name, hook = %m.name, error = %e, "a recorded hook does not parse; skipped")
            }
        }
    }
    out.sort_by(|a, b| {
        a.weight
            .cmp(&b.weight)
            .then_with(|| a.object.metadata.name.cmp(&b.object.metadata.name))
    });
    out
}

async fn fresh_hooks(
    cr: &DynamicObject,
    host: &Ctx,
    owner: &ReleaseOwner,
    previous: &HelmStatus,
) -> Vec<Hook> {
    let Ok(vals) = values::set_overrides(
        values::from_spec(cr.data.get("spec")).unwrap_or_default(),
        &host.flavor.overrides,
    ) else {
        return Vec::new();
    };
    let revision = previous
        .deployed_release
        .as_ref()
        .map(|d| d.revision)
        .unwrap_or(1);
    render(host, owner, &vals, revision, true)
        .await
        .map(|p| p.hooks)
        .unwrap_or_default()
}

/// Deletes the release's objects (never those kept by policy or owned by someone else);
/// returns how many are still there (finalizers of their own).
async fn delete_objects(host: &Ctx, owner: &ReleaseOwner, objects: &[Old]) -> Result<usize, Error> {
    let mut remaining = 0;
    for o in objects.iter().filter(|o| !o.keep) {
        let Ok(resolved) = host.discovery.resolve(&o.gvk).await else {
            continue;
        };
        let api = api_of(host, &resolved, o.namespace.as_deref());
        match api.get_opt(&o.name).await? {
            Some(live) if objects::ownership_conflict(&live.metadata, owner, &o.name).is_none() => {
                if live.meta().deletion_timestamp.is_none() {
                    delete_object(&api, &o.name).await?;
                }
                if api.get_opt(&o.name).await?.is_some() {
                    remaining += 1;
                }
            }
            _ => {}
        }
    }
    Ok(remaining)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(version: i64, status: &str) -> Release {
        Release {
            name: "r".into(),
            info: release::Info {
                status: status.into(),
                ..Default::default()
            },
            chart: serde_json::Value::Null,
            config: Default::default(),
            manifest: String::new(),
            hooks: Vec::new(),
            version,
            namespace: "ns".into(),
            other: Default::default(),
        }
    }

    #[test]
    fn the_last_deployed_record_is_uninstalled_else_the_latest() {
        let h = [
            rec(1, release::status::SUPERSEDED),
            rec(2, release::status::DEPLOYED),
            rec(3, release::status::FAILED),
        ];
        assert_eq!(last_record(&h).map(|r| r.version), Some(2));
        assert_eq!(last_record(&h[2..]).map(|r| r.version), Some(3));
        assert!(last_record(&[]).is_none());
    }

    #[test]
    fn delete_hooks_come_from_the_record_in_helm_order() {
        let hook = |name: &str, events: &str, weight: i64| {
            release::Hook {
            name: name.into(),
            kind: "ConfigMap".into(),
            path: format!("c/templates/{name}.yaml"),
            manifest: format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  annotations:\n    helm.sh/hook: {events}\n    helm.sh/hook-weight: \"{weight}\"\n"),
            events: events.split(',').map(str::to_string).collect(),
            last_run: Default::default(),
            weight,
            delete_policies: Vec::new(),
        }
        };
        let mut r = rec(1, release::status::DEPLOYED);
        r.hooks = vec![
            hook("late", "pre-delete", 5),
            hook("install", "pre-install", 0),
            hook("early", "post-delete,pre-delete", -1),
            hook("broken", "pre-delete", 0),
        ];
        r.hooks[3].manifest = "not: [an object".into();
        let names: Vec<String> = recorded_hooks(&r)
            .iter()
            .map(|h| h.object.name_any())
            .collect();
        assert_eq!(names, ["early", "late"]);
    }

    #[test]
    fn an_uninstall_records_the_runs_of_the_hooks_it_ran() {
        let mut ran = release::Hook {
            name: "a".into(),
            kind: "Job".into(),
            path: "p".into(),
            ..Default::default()
        };
        ran.last_run.phase = "Succeeded".into();
        let recorded = vec![
            release::Hook {
                name: "a".into(),
                kind: "Job".into(),
                path: "p".into(),
                ..Default::default()
            },
            release::Hook {
                name: "b".into(),
                kind: "Job".into(),
                path: "q".into(),
                ..Default::default()
            },
        ];
        let merged = merge_runs(recorded, &[ran]);
        assert_eq!(merged[0].last_run.phase, "Succeeded");
        assert_eq!(merged[1].last_run.phase, "");
    }
}
