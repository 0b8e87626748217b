//! Helm hooks, run as Helm runs them: the objects whose `helm.sh/hook` annotation names the
//! event, in Helm's order (kind order, then `helm.sh/hook-weight`, then name), each created
//! after its `before-hook-creation` predecessor is gone, then waited for — a Job until it
//! completes, a Pod until it succeeds, anything else at once — and deleted afterwards as its
//! `helm.sh/hook-delete-policy` says. `test` hooks are never run (they are `helm test`'s).
use std::time::Duration;

use bosun_helm::render::manifest::Manifest;
use kube::api::{Api, DeleteParams, PostParams};
use kube::core::{DynamicObject, GroupVersionKind};
use kube::Client;

use crate::objects::{self, ReleaseOwner};
use crate::release;

pub const HOOK_ANNOTATION: &str = "helm.sh/hook";
pub const WEIGHT_ANNOTATION: &str = "helm.sh/hook-weight";
pub const DELETE_POLICY_ANNOTATION: &str = "helm.sh/hook-delete-policy";

/// The events bosun runs hooks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    PreInstall,
    PostInstall,
    PreUpgrade,
    PostUpgrade,
    PreDelete,
    PostDelete,
}

impl Event {
    pub fn as_str(self) -> &'static str {
        match self {
            Event::PreInstall => "pre-install",
            Event::PostInstall => "post-install",
            Event::PreUpgrade => "pre-upgrade",
            Event::PostUpgrade => "post-upgrade",
            Event::PreDelete => "pre-delete",
            Event::PostDelete => "post-delete",
        }
    }
}

/// A hook of a render.
#[derive(Clone, Debug)]
pub struct Hook {
    pub manifest: Manifest,
    pub gvk: GroupVersionKind,
    pub object: DynamicObject,
    pub events: Vec<String>,
    pub weight: i64,
    pub delete_policies: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error("{0}")]
    Object(#[from] objects::ObjectError),
    #[error("hook {name}: {message}")]
    Failed { name: String, message: String },
    #[error("hook {name}: {source}")]
    Api { name: String, source: kube::Error },
    /// The hook's namespace is being deleted: the API server creates nothing new there.
    #[error("hook {name}: its namespace is being deleted")]
    NamespaceTerminating { name: String },
}

/// The API server's refusal to create anything in a namespace being deleted (the
/// NamespaceLifecycle admission plugin: 403 with the `NamespaceTerminating` cause, or, on
/// servers that do not set the cause, its message).
pub fn namespace_terminating(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) if s.code == 403 => {
            s.message.contains("because it is being terminated")
                || s.details
                    .as_ref()
                    .is_some_and(|d| d.causes.iter().any(|c| c.reason == "NamespaceTerminating"))
        }
        _ => false,
    }
}

fn list(v: Option<&String>) -> Vec<String> {
    v.map(|s| {
        s.split(',')
            .map(|e| e.trim().to_string())
            .filter(|e| !e.is_empty())
            .collect()
    })
    .unwrap_or_default()
}

/// The hooks of a render, in Helm's order (the manifests come sorted by kind).
pub fn parse(manifests: &[Manifest]) -> Result<Vec<Hook>, HookError> {
    let mut hooks = Vec::new();
    for m in manifests {
        let (gvk, object) = objects::parse(m)?;
        let ann = object.metadata.annotations.clone().unwrap_or_default();
        let weight = ann
            .get(WEIGHT_ANNOTATION)
            .and_then(|w| w.trim().parse().ok())
            .unwrap_or(0);
        hooks.push(Hook {
            manifest: m.clone(),
            gvk,
            object,
            events: list(ann.get(HOOK_ANNOTATION)),
            weight,
            delete_policies: list(ann.get(DELETE_POLICY_ANNOTATION)),
        });
    }
    hooks.sort_by(|a, b| {
        a.weight
            .cmp(&b.weight)
            .then_with(|| a.object.metadata.name.cmp(&b.object.metadata.name))
    });
    Ok(hooks)
}

/// The hooks as Helm records them in a release.
pub fn records(hooks: &[Hook]) -> Vec<release::Hook> {
    hooks
        .iter()
        .map(|h| release::Hook {
            name: h.object.metadata.name.clone().unwrap_or_default(),
            kind: h.gvk.kind.clone(),
            path: h.manifest.path.clone(),
            manifest: h.manifest.content.clone(),
            events: h.events.clone(),
            last_run: release::HookExecution::default(),
            weight: h.weight,
            delete_policies: h.delete_policies.clone(),
        })
        .collect()
}

/// How long a hook may take (Helm's default `--timeout`).
pub const TIMEOUT: Duration = Duration::from_secs(300);

/// What running hooks needs.
pub struct Runner<'a> {
    pub client: &'a Client,
    pub discovery: &'a bosun_runtime::dynamic::Discovery,
    pub owner: &'a ReleaseOwner,
    pub timeout: Duration,
}

impl Runner<'_> {
    /// Runs every hook of `event`; records their last run in `records` (same order as
    /// `hooks`). Stops at the first failure.
    pub async fn run(
        &self,
        hooks: &[Hook],
        event: Event,
        records: &mut [release::Hook],
    ) -> Result<(), HookError> {
        for (hook, record) in hooks.iter().zip(records.iter_mut()) {
            if !hook.events.iter().any(|e| e == event.as_str()) {
                continue;
            }
            record.last_run.started_at = release::go_time(k8s_openapi::jiff::Timestamp::now());
            record.last_run.phase = "Running".into();
            let outcome = self.run_one(hook).await;
            record.last_run.completed_at = release::go_time(k8s_openapi::jiff::Timestamp::now());
            record.last_run.phase = if outcome.is_ok() {
                "Succeeded"
            } else {
                "Failed"
            }
            .into();
            outcome?;
        }
        Ok(())
    }

    async fn api(&self, hook: &Hook) -> Result<(Api<DynamicObject>, DynamicObject), HookError> {
        let name = hook.object.metadata.name.clone().unwrap_or_default();
        let resolved =
            self.discovery
                .resolve(&hook.gvk)
                .await
                .map_err(|source| HookError::Api {
                    name: name.clone(),
                    source,
                })?;
        let mut obj = hook.object.clone();
        objects::mark_hook(&mut obj, resolved.namespaced, self.owner);
        let api = match obj.metadata.namespace.as_deref() {
            Some(ns) if resolved.namespaced => {
                Api::namespaced_with(self.client.clone(), ns, &resolved.resource)
            }
            _ => Api::all_with(self.client.clone(), &resolved.resource),
        };
        Ok((api, obj))
    }

    async fn run_one(&self, hook: &Hook) -> Result<(), HookError> {
        let name = hook.object.metadata.name.clone().unwrap_or_default();
        let api_err = |source| HookError::Api {
            name: name.clone(),
            source,
        };
        let (api, obj) = self.api(hook).await?;
        let policies = &hook.delete_policies;
        // Helm's default when no policy is given is before-hook-creation.
        if policies.is_empty() || policies.iter().any(|p| p == "before-hook-creation") {
            self.delete_and_wait(&api, &name).await.map_err(api_err)?;
        }
        match api.create(&PostParams::default(), &obj).await {
            Ok(_) => {}
            Err(e) if namespace_terminating(&e) => {
                return Err(HookError::NamespaceTerminating { name })
            }
            Err(e) => return Err(api_err(e)),
        }
        let result = self.wait(&api, hook, &name).await;
        let delete_now = match &result {
            Ok(()) => policies.iter().any(|p| p == "hook-succeeded"),
            Err(_) => policies.iter().any(|p| p == "hook-failed"),
        };
        if delete_now {
            self.delete_and_wait(&api, &name).await.map_err(api_err)?;
        }
        result
    }

    async fn delete_and_wait(
        &self,
        api: &Api<DynamicObject>,
        name: &str,
    ) -> Result<(), kube::Error> {
        let dp = DeleteParams::background();
        match api.delete(name, &dp).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
            Err(e) => return Err(e),
        }
        let deadline = tokio::time::Instant::now() + self.timeout;
        while api.get_opt(name).await?.is_some() {
            if tokio::time::Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        Ok(())
    }

    /// Until a Job completes or a Pod succeeds; other kinds are done once created.
    async fn wait(
        &self,
        api: &Api<DynamicObject>,
        hook: &Hook,
        name: &str,
    ) -> Result<(), HookError> {
        let kind = hook.gvk.kind.as_str();
        if kind != "Job" && kind != "Pod" {
            return Ok(());
        }
        let deadline = tokio::time::Instant::now() + self.timeout;
        loop {
            let live = api.get(name).await.map_err(|source| HookError::Api {
                name: name.to_string(),
                source,
            })?;
            match done(kind, &live.data) {
                Some(Ok(())) => return Ok(()),
                Some(Err(message)) => {
                    return Err(HookError::Failed {
                        name: name.to_string(),
                        message,
                    })
                }
                None => {}
            }
            if tokio::time::Instant::now() > deadline {
                return Err(HookError::Failed {
                    name: name.to_string(),
                    message: format!(
                        "timed out after {:?} waiting for the {kind} to finish",
                        self.timeout
                    ),
                });
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// Whether a Job or Pod has finished, and how.
fn done(kind: &str, data: &serde_json::Value) -> Option<Result<(), String>> {
    let status = data.get("status")?;
    if kind == "Pod" {
        return match status.get("phase").and_then(|p| p.as_str()) {
            Some("Succeeded") => Some(Ok(())),
            Some("Failed") => Some(Err("pod failed".into())),
            _ => None,
        };
    }
    for c in status.get("conditions")?.as_array()? {
        let is_true = c.get("status").and_then(|s| s.as_str()) == Some("True");
        match c.get("type").and_then(|t| t.as_str()) {
            Some("Complete") if is_true => return Some(Ok(())),
            Some("Failed") if is_true => {
                let reason = c.get("reason").and_then(|r| r.as_str()).unwrap_or("");
                let message = c.get("message").and_then(|r| r.as_str()).unwrap_or("");
                return Some(Err(format!("job failed: {reason} {message}")
                    .trim()
                    .to_string()));
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn manifest(name: &str, annotations: &str) -> Manifest {
        Manifest {
            path: format!("c/templates/{name}.yaml"),
            content: format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  annotations:\n{annotations}"),
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: name.into(),
            hook: Some(String::new()),
        }
    }

    #[test]
    fn hooks_sort_by_weight_then_name_and_read_their_policies() {
        let hooks = parse(&[
            manifest("b", "    helm.sh/hook: pre-install,pre-upgrade\n    helm.sh/hook-weight: \"5\"\n"),
            manifest("a", "    helm.sh/hook: post-install\n    helm.sh/hook-weight: \"5\"\n    helm.sh/hook-delete-policy: hook-succeeded , hook-failed\n"),
            manifest("z", "    helm.sh/hook: pre-install\n    helm.sh/hook-weight: \"-3\"\n"),
        ])
        .expect("hooks");
        let names: Vec<&str> = hooks.iter().map(|h| h.manifest.name.as_str()).collect();
        assert_eq!(names, ["z", "a", "b"]);
        assert_eq!(hooks[2].events, ["pre-install", "pre-upgrade"]);
        assert_eq!(hooks[1].delete_policies, ["hook-succeeded", "hook-failed"]);
        let recs = records(&hooks);
        assert_eq!((recs[0].weight, recs[0].kind.as_str()), (-3, "ConfigMap"));
    }

    #[test]
    fn jobs_and_pods_finish_by_their_status() {
        assert_eq!(
            done(
                "Job",
                &json!({"status": {"conditions": [{"type": "Complete", "status": "True"}]}})
            ),
            Some(Ok(()))
        );
        assert!(
            matches!(done("Job", &json!({"status": {"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}})), Some(Err(m)) if m.contains("BackoffLimitExceeded"))
        );
        assert_eq!(done("Job", &json!({"status": {"active": 1}})), None);
        assert_eq!(
            done("Pod", &json!({"status": {"phase": "Succeeded"}})),
            Some(Ok(()))
        );
        assert_eq!(done("Pod", &json!({"status": {"phase": "Running"}})), None);
    }
}
