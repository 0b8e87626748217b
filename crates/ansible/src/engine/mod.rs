//! Running a loaded role: the play's roles and tasks in order, Ansible's variable precedence,
//! `block`/`rescue`/`always`, loops, conditionals, `register`, `until`, and the stats
//! ansible-operator turns into `ansibleResult`.
//!
//! Layers of a task's variables, lowest first (Ansible's precedence, for one host):
//! role defaults (dependencies first) < play vars < role vars < role params < block vars <
//! task vars < `include_vars`/`set_fact`/registered < magic vars < extra vars < loop vars.
mod errors;
mod exec;
mod loops;
mod outcome;
mod sequence;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

pub(crate) use exec::OMIT;
pub use outcome::{FailedTask, Outcome, Stats, StatusRequest, TaskResult, TaskStatus, CENSORED};
/// Re-exported for the modules.
pub(crate) mod outcome_types {
    pub use super::outcome::StatusRequest;
}

use crate::kube_api::{Discovery, Owner};
use crate::role::Role;
use crate::template::{value, VarLayer};

/// What a run needs from its host.
#[derive(Clone)]
pub struct RunContext {
    /// The client the Kubernetes modules use (`None`: they fail, for pure runs).
    pub client: Option<kube::Client>,
    /// Shared resolver of apiVersion/kind to resources, cached across runs.
    pub discovery: Arc<Discovery>,
    /// The custom resource the run is for: owner of what `k8s` creates, and the object whose
    /// `k8s_status` requests are collected for the host's single status write.
    pub owner: Option<Owner>,
    /// Most task executions one run may make (loops and includes count): a hostile role ends
    /// in an error instead of running forever.
    pub max_tasks: usize,
    /// Longest a run may take: no task starts after it, and no wait (`pause`, `until`
    /// delays, loop pauses, `k8s` waits) reaches past it. One hour by default.
    pub run_timeout: Duration,
    /// When the run must end (set when it starts, from `run_timeout`).
    pub deadline: Option<tokio::time::Instant>,
    /// What `k8s_status` asked so far for the run's own CR (the host writes it at the end):
    /// what `k8s_info` and `lookup('k8s')` show of the CR meanwhile, as if written.
    pub(crate) own_status: Arc<std::sync::Mutex<Option<StatusRequest>>>,
    /// Whether [`Outcome::tasks`] keeps each task's result (true by default). A host that
    /// reads only the failures, stats and status turns it off: a run then holds no copy of
    /// what its tasks returned (objects, lists) beyond what it registers.
    pub keep_results: bool,
    /// Where `osdk_metric` records (the process-wide set by default).
    pub metrics: &'static crate::metrics::UserMetrics,
    /// The host's caches, asked before `k8s` reads an object it is about to create (none by
    /// default: every `k8s` task reads first, as kubernetes.core does).
    pub cache: Option<Arc<dyn ObjectCache>>,
}

/// What a host's caches know of the objects a run writes. ansible-operator's proxy serves a
/// role's reads of the kinds it watches from its informer cache; bosun's child caches hold
/// metadata only, so they answer the one question that saves a request: is the object
/// certainly absent? A `k8s` task then creates it without reading it first (and reads it
/// after all when the create meets an object the cache had not shown yet).
pub trait ObjectCache: Send + Sync {
    /// True only when a synced cache that would hold the object (`namespace` None for a
    /// cluster-scoped kind) holds no object of that name.
    fn known_absent<'a>(
        &'a self,
        api_version: &'a str,
        kind: &'a str,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> futures::future::BoxFuture<'a, bool>;
}

impl RunContext {
    pub fn new(
        client: Option<kube::Client>,
        discovery: Arc<Discovery>,
        owner: Option<Owner>,
    ) -> RunContext {
        RunContext {
            client,
            discovery,
            owner,
            max_tasks: 100_000,
            run_timeout: DEFAULT_RUN_TIMEOUT,
            deadline: None,
            own_status: Default::default(),
            metrics: crate::metrics::UserMetrics::global(),
            keep_results: true,
            cache: None,
        }
    }
}

impl Role {
    /// Runs the role with `extra_vars` (see [`crate::extra_vars::for_cr`]).
    pub async fn run(
        &self,
        ctx: &RunContext,
        extra_vars: &serde_json::Map<String, serde_json::Value>,
    ) -> Outcome {
        if let Some((k, _)) = extra_vars
            .iter()
            .find(|(_, v)| crate::extra_vars::depth(v) > MAX_VAR_NESTING)
        {
            let mut o = Outcome::default();
            o.stats.failures = 1;
            o.failures.push(FailedTask {
                name: "extra vars".into(),
                msg: format!("variable '{k}' nests deeper than {MAX_VAR_NESTING} levels"),
                location: String::new(),
            });
            o.completed = Some(chrono::Utc::now());
            return o;
        }
        let extra: VarLayer = extra_vars
            .iter()
            .map(|(k, v)| (k.clone(), value::from_json(v)))
            .collect();
        let mut ctx = ctx.clone();
        ctx.deadline = Some(tokio::time::Instant::now() + ctx.run_timeout);
        ctx.own_status = Default::default();
        let mut run = exec::Run::new(ctx, self.templar.clone(), Arc::new(extra), &self.path);
        for play in &self.plays {
            if run.play(play).await == exec::Flow::EndPlay {
                continue;
            }
        }
        run.finish()
    }
}

/// `objects`, the one with `uid` given the status `pending` asks for.
pub(crate) fn overlay(
    uid: &str,
    pending: &std::sync::Mutex<Option<StatusRequest>>,
    objects: &mut [serde_json::Value],
) {
    let pending = pending.lock().unwrap_or_else(|e| e.into_inner());
    let Some(req) = pending.as_ref() else { return };
    for o in objects {
        if !uid.is_empty() && o["metadata"]["uid"].as_str() == Some(uid) {
            let status = crate::modules::k8s_status::apply(o.get("status"), req);
            o["status"] = status;
        }
    }
}

/// A run's default deadline: generous (ansible-operator sets none; a role that retries for
/// many minutes is legitimate), but a run that hangs ends.
pub const DEFAULT_RUN_TIMEOUT: Duration = Duration::from_secs(3600);

impl RunContext {
    /// `objects` as the run sees them: the run's own CR with the status `k8s_status` has
    /// asked for so far (ansible-operator writes it at once; bosun at the end of the run).
    pub(crate) fn overlay_own_status(&self, objects: &mut [serde_json::Value]) {
        if let Some(owner) = &self.owner {
            overlay(&owner.uid, &self.own_status, objects);
        }
    }

    /// The status of the run's own CR with what `k8s_status` asked so far.
    pub(crate) fn own_status_now(&self) -> Option<serde_json::Value> {
        let owner = self.owner.as_ref()?;
        let pending = self.own_status.lock().unwrap_or_else(|e| e.into_inner());
        match pending.as_ref() {
            Some(req) => Some(crate::modules::k8s_status::apply(
                owner.status.as_ref(),
                req,
            )),
            None => owner.status.clone(),
        }
    }

    /// What is left of the run's time.
    pub fn remaining(&self) -> Duration {
        match self.deadline {
            Some(d) => d.saturating_duration_since(tokio::time::Instant::now()),
            None => self.run_timeout,
        }
    }
}

/// Deepest extra var a run takes (serde_json's parser stops at 128 anyway).
const MAX_VAR_NESTING: usize = 128;

/// The kinds `k8s` tasks touched, for dependent watches: `(apiVersion, kind)`.
pub type TouchedKinds = BTreeSet<(String, String)>;
