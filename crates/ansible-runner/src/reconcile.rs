//! One custom resource of a fallback entry, reconciled as ansible-operator does — the same
//! steps and conditions as the native engine's reconcile (`bosun-ansible-operator`), with
//! ansible-runner in place of the in-process run:
//!
//! 1. a reconcile-period annotation that does not parse is reported (`markError`);
//! 2. being deleted with the entry's finalizer: the finalizer's role or playbook runs (or
//!    the entry's own with the finalizer's vars); the finalizer is removed after it
//!    succeeded, and the CR's run directory with it;
//! 3. otherwise the finalizer is added first, then ansible-runner **runs** with
//!    ansible-operator's extra vars, talking to the API server through the loopback
//!    [`crate::proxy`] (owner references injected on create);
//! 4. each kind the run created or changed gets a **dependent watch**;
//! 5. the **status** is written once after the run, from the CR as it is then (what
//!    `k8s_status` wrote during the run is kept), and only when it differs; a failure
//!    publishes a Warning Event when its message is new and is returned for the backoff;
//!    `requeue_after` asks for the next run.
//!
//! Like the native engine (and unlike ansible-operator) there is no `Running` write before
//! the run: a restart over converged resources writes no status.
use std::sync::Arc;

use bosun_ansible::extra_vars::{for_cr, ExtraVarsOptions};
use bosun_ansible::{status, Outcome, Owner};
use bosun_runtime::owner::set_finalizer;
use bosun_watches::{Flavor, Host, Next};
use kube::api::{Api, Patch, PatchParams};
use kube::core::DynamicObject;
use kube::{Resource, ResourceExt};
use serde_json::{json, Map, Value};

use crate::run::{run, Invocation};
use crate::target::Target;
use crate::{Error, Fallback};

/// The per-CR annotation overriding `maxRunnerArtifacts`.
pub const MAX_ARTIFACTS_ANNOTATION: &str = "ansible.sdk.operatorframework.io/max-runner-artifacts";

pub async fn reconcile<F: Flavor>(
    cr: Arc<DynamicObject>,
    host: Arc<Host<F>>,
    fb: Arc<Fallback>,
) -> Result<Next, Error> {
    let api = host.api_of(&cr);
    if let Err(msg) = host.period(&cr) {
        if host.entry.ansible.manage_status {
            let now = status::transition_time(chrono::Utc::now());
            let desired = status::mark_error(cr.data.get("status"), &msg, &now);
            write_status(&host, &api, &cr, cr.data.get("status"), &desired).await?;
        }
        warn(&host, &cr, &msg).await;
        return Err(Error::Annotation(msg));
    }
    let dir = fb.run_dir(&host.entry, cr.namespace().as_deref(), &cr.name_any());
    let finalizer = host.entry.ansible.finalizer.as_ref();
    if cr.meta().deletion_timestamp.is_some() {
        let Some(f) = finalizer.filter(|f| cr.finalizers().contains(&f.name)) else {
            let _ = std::fs::remove_dir_all(&dir);
            return Ok(Next::AwaitChange);
        };
        let target = fb.finalizer.as_ref().unwrap_or(&fb.main);
        let outcome = run_once(&host, &fb, &cr, target, Some(&f.vars)).await?;
        if outcome.succeeded() && outcome.requeue_after.is_none() {
            if let Some(fresh) = api.get_opt(&cr.name_any()).await? {
                set_finalizer(&api, &fresh, &f.name, false).await?;
            }
            let _ = std::fs::remove_dir_all(&dir);
            return Ok(Next::AwaitChange);
        }
        record(&host, &api, &cr, &outcome).await?;
        return match outcome.requeue_after {
            _ if !outcome.succeeded() => Err(Error::Run(status::failure_message(
                &outcome.failure_messages(),
            ))),
            Some(d) => Ok(Next::After(d)),
            None => Ok(Next::AwaitChange),
        };
    }
    let mut cr = cr;
    if let Some(f) = finalizer.filter(|f| !cr.finalizers().contains(&f.name)) {
        let mut finalizers = cr.finalizers().to_vec();
        finalizers.push(f.name.clone());
        let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": cr.resource_version()}});
        let written = api
            .patch(
                &cr.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
        cr = Arc::new(written);
    }
    let outcome = run_once(&host, &fb, &cr, &fb.main, None).await?;
    record(&host, &api, &cr, &outcome).await?;
    if !outcome.succeeded() {
        return Err(Error::Run(status::failure_message(
            &outcome.failure_messages(),
        )));
    }
    Ok(outcome.requeue_after.map_or(Next::AwaitChange, Next::After))
}

/// The CR as the role sees it, with its apiVersion and kind.
fn object_json<F: Flavor>(cr: &DynamicObject, host: &Host<F>) -> Value {
    let mut v = serde_json::to_value(cr).unwrap_or_else(|_| json!({}));
    if let Some(o) = v.as_object_mut() {
        o.insert("apiVersion".into(), json!(host.resource.api_version));
        o.insert("kind".into(), json!(host.resource.kind));
    }
    v
}

fn rotate<F: Flavor>(host: &Host<F>, cr: &DynamicObject) -> u32 {
    cr.annotations()
        .get(MAX_ARTIFACTS_ANNOTATION)
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(host.entry.ansible.max_runner_artifacts)
}

/// Step 3 (and the finalizer's run): ansible-runner with ansible-operator's extra vars.
async fn run_once<F: Flavor>(
    host: &Host<F>,
    fb: &Fallback,
    cr: &DynamicObject,
    target: &Target,
    finalizer_vars: Option<&Map<String, Value>>,
) -> Result<Outcome, Error> {
    let opts = &host.entry.ansible;
    let obj = object_json(cr, host);
    let vars = for_cr(
        &obj,
        &ExtraVarsOptions {
            snake_case: opts.snake_case_parameters,
            mark_unsafe: opts.mark_unsafe,
            watch_vars: Some(&opts.vars),
            finalizer_vars,
            group: &host.entry.gvk.group,
            kind: &host.entry.gvk.kind,
        },
    );
    let started = fb
        .started(&host.client)
        .await
        .map_err(|e| Error::Setup(format!("starting the Ansible runs' proxy: {e}")))?;
    let scope = started
        .proxy
        .register(
            Owner::from_object(&obj).map(|o| o.labelling(bosun_runtime::shard::labels_in_scope())),
        )
        .map_err(|e| Error::Setup(format!("a token for the run: {e}")))?;
    let dir = fb.run_dir(&host.entry, cr.namespace().as_deref(), &cr.name_any());
    let namespace = cr.namespace();
    let url = started.proxy.url();
    let inv = Invocation {
        install: &fb.install,
        target,
        dir: &dir,
        extra_vars: &vars,
        server: &url,
        token: scope.token(),
        namespace: namespace.as_deref(),
        collections_paths: &started.collections_paths,
        roles_paths: &fb.roles_paths,
        rotate: rotate(host, cr),
        deadline: fb.deadline,
    };
    let done = run(&inv).await.map_err(|e| Error::Setup(e.to_string()))?;
    let touched = scope.touched();
    drop(scope);
    tracing::info!(
        name = %cr.name_any(),
        namespace = namespace.as_deref().unwrap_or_default(),
        ident = %done.ident,
        elapsed_ms = done.elapsed.as_millis() as u64,
        ok = done.outcome.stats.ok,
        changed = done.outcome.stats.changed,
        failures = done.outcome.stats.failures,
        "ran under real Ansible"
    );
    host.watch_touched_kinds(&touched).await;
    Ok(done.outcome)
}

/// Step 5: from the CR as it is after the run.
async fn record<F: Flavor>(
    host: &Host<F>,
    api: &Api<DynamicObject>,
    cr: &DynamicObject,
    outcome: &Outcome,
) -> Result<(), Error> {
    let Some(fresh) = api.get_opt(&cr.name_any()).await? else {
        return Ok(());
    };
    let current = fresh.data.get("status");
    let failed = !outcome.succeeded();
    let msg = status::failure_message(&outcome.failure_messages());
    if failed && status::previous_failure(current) != Some(msg.as_str()) {
        warn(host, cr, &msg).await;
    }
    if !host.entry.ansible.manage_status {
        return Ok(());
    }
    let failures = if failed { vec![msg] } else { Vec::new() };
    let desired = status::mark_done(
        current,
        &outcome.ansible_result(),
        &failures,
        &status::transition_time(chrono::Utc::now()),
    );
    write_status(host, api, &fresh, current, &desired).await
}

/// Server-side apply of the status with the flavour's field manager, unless unchanged.
async fn write_status<F: Flavor>(
    host: &Host<F>,
    api: &Api<DynamicObject>,
    cr: &DynamicObject,
    current: Option<&Value>,
    desired: &Value,
) -> Result<(), Error> {
    if current == Some(desired) {
        return Ok(());
    }
    let patch = json!({
        "apiVersion": host.resource.api_version,
        "kind": host.resource.kind,
        "status": desired,
    });
    let pp = PatchParams::apply(F::MANAGER).force();
    match api
        .patch_status(&cr.name_any(), &pp, &Patch::Apply(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

async fn warn<F: Flavor>(host: &Host<F>, cr: &DynamicObject, note: &str) {
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
