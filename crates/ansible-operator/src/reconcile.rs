//! One custom resource, reconciled as ansible-operator does:
//!
//! 1. a reconcile-period annotation that does not parse is reported (`markError`);
//! 2. being deleted with the entry's finalizer: the **finalizer** role or playbook runs (or
//!    the entry's own, with the finalizer's vars), and the finalizer is removed only after
//!    it succeeded; without our finalizer there is nothing to do;
//! 3. otherwise the finalizer is added first (before the first run, so a delete during the
//!    run cannot orphan anything), then the role **runs** with the extra vars
//!    ansible-operator passes, owner references on what it creates;
//! 4. each kind the run manages gets a **dependent watch** (unless `watchDependentResources:
//!    false`, blacklisted, or cluster-scoped without `watchClusterScopedResources`);
//! 5. the **status** — conditions and `k8s_status` requests on the CR — is written once, only
//!    when it changed, with an update guarded by the resourceVersion (a conflict re-reads
//!    the object and recomputes the status from it: no other writer's update is lost); a failure publishes a Warning Event when its message is new and is
//!    returned for the backoff; `requeue_after` asks for the next run.
use std::sync::Arc;

use bosun_ansible::extra_vars::{for_cr, ExtraVarsOptions};
use bosun_ansible::modules::k8s_status;
use bosun_ansible::{status, ObjectCache, Outcome, Owner, Role, RunContext};
use bosun_runtime::owner::set_finalizer;
use bosun_watches::{Host, Next};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::DynamicObject;
use kube::{Resource, ResourceExt};
use serde_json::{json, Value};

use crate::error::Error;
use crate::latest::View;
use crate::{AnsibleFlavor, FinalizerRun};

pub const PERIOD_ANNOTATION: &str = "ansible.sdk.operatorframework.io/reconcile-period";

type Ctx = Host<AnsibleFlavor>;

pub async fn reconcile(cr: Arc<DynamicObject>, host: Arc<Ctx>) -> Result<Next, Error> {
    let api = host.api_of(&cr);
    let view = host.flavor.latest.view(&cr);
    if let Err(msg) = host.period(&cr) {
        if host.entry.ansible.manage_status {
            let now = status::transition_time(chrono::Utc::now());
            let desired = |current: Option<&Value>| status::mark_error(current, &msg, &now);
            write_status(&host, &api, &cr, &view, desired).await?;
        }
        warn(&host, &cr, &msg).await;
        return Err(Error::Annotation(msg));
    }
    let finalizer = host.flavor.finalizer.as_ref();
    if cr.meta().deletion_timestamp.is_some() {
        return match finalizer.filter(|f| view.finalizers.contains(&f.name)) {
            Some(f) => finalize(&cr, &host, &api, &view, f).await,
            None => Ok(Next::AwaitChange),
        };
    }
    let mut view = view;
    if let Some(f) = finalizer.filter(|f| !view.finalizers.contains(&f.name)) {
        let mut finalizers = view.finalizers.clone();
        finalizers.push(f.name.clone());
        // Guarded by the resourceVersion: concurrent finalizer edits by others are not lost.
        let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": view.resource_version}});
        let written = api
            .patch(
                &cr.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
        host.flavor.latest.wrote(&written);
        view = View::of(&written);
    }
    let outcome = run(
        &host,
        &host.flavor.role,
        &object_json(&cr, &host, &view),
        None,
    )
    .await;
    host.watch_touched_kinds(&outcome.touched).await;
    record(&cr, &host, &api, &view, &outcome).await?;
    if !outcome.succeeded() {
        return Err(Error::Run(status::failure_message(
            &outcome.failure_messages(),
        )));
    }
    Ok(requeue(&outcome).map_or(Next::AwaitChange, Next::After))
}

/// A custom resource of an entry no engine can run: `why` in its `Failure` condition (as
/// ansible-operator's `markError`) and a Warning Event; nothing runs, and a resource being
/// deleted is left to go (the entry adds no finalizer).
pub async fn refused(cr: Arc<DynamicObject>, host: Arc<Ctx>, why: Arc<str>) -> Result<Next, Error> {
    if cr.meta().deletion_timestamp.is_some() {
        return Ok(Next::AwaitChange);
    }
    let msg = format!("this kind's role or playbook cannot run: {why}");
    if host.entry.ansible.manage_status {
        let api = host.api_of(&cr);
        let view = host.flavor.latest.view(&cr);
        let now = status::transition_time(chrono::Utc::now());
        let desired = |current: Option<&Value>| status::mark_error(current, &msg, &now);
        write_status(&host, &api, &cr, &view, desired).await?;
    }
    warn(&host, &cr, &msg).await;
    Err(Error::Refused(msg))
}

/// The period `requeue_after` asked for, as controller-runtime honours `RequeueAfter`: only
/// when it is positive (`0s` and negative periods, which parse to zero, mean no requeue).
fn requeue(outcome: &Outcome) -> Option<std::time::Duration> {
    outcome.requeue_after.filter(|d| !d.is_zero())
}

/// Step 2.
async fn finalize(
    cr: &DynamicObject,
    host: &Ctx,
    api: &Api<DynamicObject>,
    view: &View,
    f: &FinalizerRun,
) -> Result<Next, Error> {
    let role = f.role.as_ref().unwrap_or(&host.flavor.role);
    let outcome = run(host, role, &object_json(cr, host, view), Some(&f.vars)).await;
    if outcome.succeeded() && requeue(&outcome).is_none() {
        if let Some(fresh) = api.get_opt(&cr.name_any()).await? {
            set_finalizer(api, &fresh, &f.name, false).await?;
        }
        if let Some(uid) = cr.uid() {
            host.flavor.latest.forget(&uid);
        }
        return Ok(Next::AwaitChange);
    }
    record(cr, host, api, view, &outcome).await?;
    match requeue(&outcome) {
        _ if !outcome.succeeded() => Err(Error::Run(status::failure_message(
            &outcome.failure_messages(),
        ))),
        Some(d) => Ok(Next::After(d)),
        None => Ok(Next::AwaitChange),
    }
}

/// The CR as the role sees it (`_<group>_<kind>`): with its apiVersion and kind even when
/// the list it came from left them out, and with the status and finalizers this operator
/// last wrote.
fn object_json(cr: &DynamicObject, host: &Ctx, view: &View) -> Value {
    let mut v = serde_json::to_value(cr).unwrap_or_else(|_| json!({}));
    if let Some(o) = v.as_object_mut() {
        o.insert("apiVersion".into(), json!(host.resource.api_version));
        o.insert("kind".into(), json!(host.resource.kind));
        match &view.status {
            Some(s) => o.insert("status".into(), s.clone()),
            None => o.remove("status"),
        };
        if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
            if !view.finalizers.is_empty() {
                m.insert("finalizers".into(), json!(view.finalizers));
            }
            if let Some(rv) = &view.resource_version {
                m.insert("resourceVersion".into(), json!(rv));
            }
        }
    }
    v
}

/// Step 3: the role run, with ansible-operator's extra vars.
async fn run(
    host: &Ctx,
    role: &Role,
    cr: &Value,
    finalizer_vars: Option<&serde_json::Map<String, Value>>,
) -> Outcome {
    let opts = &host.entry.ansible;
    let vars = for_cr(
        cr,
        &ExtraVarsOptions {
            snake_case: opts.snake_case_parameters,
            mark_unsafe: opts.mark_unsafe,
            watch_vars: Some(&opts.vars),
            finalizer_vars,
            group: &host.entry.gvk.group,
            kind: &host.entry.gvk.kind,
        },
    );
    let mut ctx = RunContext::new(
        Some(host.client.clone()),
        host.flavor.discovery.clone(),
        Owner::from_object(cr).map(|o| o.labelling(bosun_runtime::shard::labels_in_scope())),
    );
    ctx.run_timeout = run_timeout();
    // The reconcile reads failures, stats and status requests, never the tasks' results.
    ctx.keep_results = false;
    ctx.cache = Some(Arc::new(ChildCaches(host.children.clone())));
    role.run(&ctx, &vars).await
}

/// The entry's dependent watches, as the engine's [`ObjectCache`]: they hold every object of
/// their kind in the watched namespaces (the flavour's child watches select no label, see
/// [`AnsibleFlavor`]), so a name missing from a synced one is an object that does not exist —
/// or that was created so recently the watch has not shown it, which the engine's create
/// then finds (409) and reads. Only kinds already watched answer: a kind's first run reads.
struct ChildCaches(bosun_runtime::dynamic::DynamicChildren<DynamicObject>);

impl ObjectCache for ChildCaches {
    fn known_absent<'a>(
        &'a self,
        api_version: &'a str,
        kind: &'a str,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> futures::future::BoxFuture<'a, bool> {
        Box::pin(async move {
            let ns = namespace.unwrap_or_default();
            let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
            let gvk = kube::core::GroupVersionKind::gvk(group, version, kind);
            if !self.0.covers(ns) || !self.0.kinds().await.contains(&gvk) {
                return false;
            }
            match self.0.cache(&gvk).await {
                Ok(c) => c.meta(ns, name).is_none(),
                Err(_) => false,
            }
        })
    }
}

/// The environment variable that sets a run's deadline (a Go duration, `90m`); one hour
/// when unset.
pub const RUN_TIMEOUT_ENV: &str = "BOSUN_ANSIBLE_RUN_TIMEOUT";

/// Each run's deadline: [`RUN_TIMEOUT_ENV`], else [`bosun_ansible::engine::DEFAULT_RUN_TIMEOUT`].
fn run_timeout() -> std::time::Duration {
    static TIMEOUT: std::sync::OnceLock<std::time::Duration> = std::sync::OnceLock::new();
    *TIMEOUT.get_or_init(|| {
        let default = bosun_ansible::engine::DEFAULT_RUN_TIMEOUT;
        match std::env::var(RUN_TIMEOUT_ENV) {
            Err(_) => default,
            Ok(v) => match bosun_ansible::modules::basic::parse_go_duration(&v) {
                Ok(d) if !d.is_zero() => d,
                _ => {
                    tracing::warn!(value = %v, "{RUN_TIMEOUT_ENV} is not a positive duration (say 90m); runs end after {} s", default.as_secs());
                    default
                }
            },
        }
    })
}

/// Step 5: the one status write, and the Event of a new failure.
async fn record(
    cr: &DynamicObject,
    host: &Ctx,
    api: &Api<DynamicObject>,
    view: &View,
    outcome: &Outcome,
) -> Result<(), Error> {
    let current = view.status.as_ref();
    let failed = !outcome.succeeded();
    let msg = status::failure_message(&outcome.failure_messages());
    if failed && status::previous_failure(current) != Some(msg.as_str()) {
        warn(host, cr, &msg).await;
    }
    if host.entry.ansible.manage_status {
        let capped;
        let outcome = if failed {
            // One failure carrying the joined, capped messages (the condition joins them).
            let mut o = outcome.clone();
            o.failures.truncate(1);
            if let Some(f) = o.failures.first_mut() {
                f.msg = msg;
            }
            capped = o;
            &capped
        } else {
            outcome
        };
        let now = chrono::Utc::now();
        let desired = |current: Option<&Value>| status::after_run(current, outcome, now);
        write_status(host, api, cr, view, desired).await
    } else {
        match &outcome.status {
            Some(req) => {
                let desired = |current: Option<&Value>| k8s_status::apply(current, req);
                write_status(host, api, cr, view, desired).await
            }
            None => Ok(()),
        }
    }
}

/// Step 5's write: the status `desired` makes of the current one, unless that is what the
/// object holds, with the written object recorded in [`crate::latest`].
async fn write_status(
    host: &Ctx,
    api: &Api<DynamicObject>,
    cr: &DynamicObject,
    view: &View,
    desired: impl Fn(Option<&Value>) -> Value,
) -> Result<(), Error> {
    let mut obj = cr.clone();
    obj.types = Some(kube::core::TypeMeta {
        api_version: host.resource.api_version.clone(),
        kind: host.resource.kind.clone(),
    });
    if let Some(written) = update_status(api, &obj, view, desired).await? {
        host.flavor.latest.wrote(&written);
    }
    Ok(())
}

/// Most conflicts one status write retries before it is reported (and the reconcile retried).
const MAX_CONFLICTS: usize = 5;

/// Writes the status `desired` makes of the object's current one with an update guarded by
/// the resourceVersion (`PUT /status`, as ansible-operator's `Status().Update`): a write
/// made from a stale read gets a conflict instead of overwriting what another writer
/// changed since, and is made again from a fresh read, so another writer's update is never
/// lost. `view` is what the caller read (status and resourceVersion); nothing is sent when
/// `desired` is already there. Returns the written object; None when nothing was written
/// or the object is gone (or was replaced by another of the same name).
pub async fn update_status(
    api: &Api<DynamicObject>,
    obj: &DynamicObject,
    view: &View,
    desired: impl Fn(Option<&Value>) -> Value,
) -> Result<Option<DynamicObject>, Error> {
    let name = obj.name_any();
    let mut current = view.status.clone();
    let mut rv = view.resource_version.clone();
    for _ in 0..MAX_CONFLICTS {
        let want = desired(current.as_ref());
        if current.as_ref() == Some(&want) {
            return Ok(None);
        }
        let mut body = obj.clone();
        body.data["status"] = want;
        body.metadata.resource_version = rv.clone();
        body.metadata.managed_fields = None;
        let pp = PostParams {
            field_manager: Some(<AnsibleFlavor as bosun_watches::Flavor>::MANAGER.into()),
            ..Default::default()
        };
        match api.replace_status(&name, &pp, &body).await {
            Ok(written) => return Ok(Some(written)),
            // Deleted while the role ran.
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(None),
            Err(kube::Error::Api(s)) if s.code == 409 => match api.get_opt(&name).await? {
                Some(fresh) if fresh.uid() == obj.uid() => {
                    current = fresh.data.get("status").cloned();
                    rv = fresh.resource_version();
                }
                _ => return Ok(None),
            },
            Err(e) => return Err(e.into()),
        }
    }
    Err(Error::Conflict(format!(
        "the status of {name} changed under {MAX_CONFLICTS} writes in a row"
    )))
}

async fn warn(host: &Ctx, cr: &DynamicObject, note: &str) {
    host.events
        .publish(
            &cr.object_ref(&host.resource),
            true,
            "Failed",
            "Reconcile",
            note,
        )
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn only_a_positive_requeue_after_requeues() {
        let mut o = Outcome::default();
        assert_eq!(requeue(&o), None);
        // `0s`, and a negative period (which the module parses to zero, as Go's
        // time.ParseDuration gives a negative Duration), mean no requeue.
        for time in ["0s", "-5s", "0"] {
            o.requeue_after =
                Some(bosun_ansible::modules::basic::parse_go_duration(time).expect("parses"));
            assert_eq!(requeue(&o), None, "{time}");
        }
        o.requeue_after = Some(Duration::from_secs(30));
        assert_eq!(requeue(&o), Some(Duration::from_secs(30)));
    }
}
