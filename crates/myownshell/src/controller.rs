//! Pipeline: finalizer wrapper → build the Deployment → guard ownership → apply (skipped
//! when in place) → status. A Deployment of that name MyOwnShell did not create is never
//! written: seen in the cache, it is reported (an Event, NameConflict); unseen (no
//! MyOwnShell labels), the applier's create fails with 409 and that is reported too.
use std::sync::Arc;

use bosun_runtime::apply::Applier;
use bosun_runtime::cache::{scoped_api, PackedCache};
use bosun_runtime::error::{Categorized, ErrorCategory};
use bosun_runtime::events::Events;
use bosun_runtime::manager::{ControllerContext, Operator, OperatorError};
use bosun_runtime::owner::{holder, Holder};
use bosun_runtime::rbac::{rule, Rbac};
use bosun_runtime::status::StatusWriter;
use bosun_runtime::{Primary, Wiring};
use futures::future::BoxFuture;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{finalizer, Event};
use kube::{Client, CustomResourceExt, Resource, ResourceExt};

use crate::api::{MyOwnShell, MyOwnShellStatus};
use crate::build;

pub const FIELD_MANAGER: &str = "bosun-myownshell";
/// The seed's finalizer name.
pub const FINALIZER: &str = "myownshell.my-first-operator.jgato.io/finalizer";

pub struct MyOwnShellOperator;

struct Context {
    client: Client,
    applier: Applier,
    status: StatusWriter,
    events: Events,
    deployments: PackedCache<Deployment>,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("finalizer: {0}")]
    Finalizer(String),
    /// The Deployment's name is held by an object MyOwnShell did not create.
    #[error("name conflict: {0}")]
    Conflict(String),
}

impl Categorized for Error {
    fn category(&self) -> ErrorCategory {
        match self {
            Error::Conflict(_) => ErrorCategory::Conflict,
            _ => ErrorCategory::Api,
        }
    }
}

/// The Deployment as the reconcile reads it: identity, owners, ready replicas.
fn strip(d: &mut Deployment) {
    d.spec = None;
    d.metadata.annotations = None;
    d.metadata.labels = None;
    d.metadata.creation_timestamp = None;
    d.status = d
        .status
        .take()
        .map(|s| k8s_openapi::api::apps::v1::DeploymentStatus {
            ready_replicas: s.ready_replicas,
            ..Default::default()
        });
}

impl Operator for MyOwnShellOperator {
    fn name(&self) -> &str {
        "myownshell"
    }

    fn crds(&self) -> Vec<CustomResourceDefinition> {
        vec![MyOwnShell::crd()]
    }

    fn rbac(&self) -> Rbac {
        Rbac {
            namespaced: vec![
                // The primary cache; kube-runtime's finalizer() patches.
                rule(
                    "my-first-operator.jgato.io",
                    &["myownshells"],
                    &["list", "watch", "patch"],
                ),
                rule(
                    "my-first-operator.jgato.io",
                    &["myownshells/status"],
                    &["patch"],
                ),
                rule(
                    "my-first-operator.jgato.io",
                    &["myownshells/finalizers"],
                    &["update"],
                ),
                rule(
                    "apps",
                    &["deployments"],
                    &["get", "list", "watch", "create", "patch"],
                ),
            ],
            cluster: vec![],
        }
    }

    fn run(&self, ctx: ControllerContext) -> BoxFuture<'static, Result<(), OperatorError>> {
        Box::pin(async move {
            let client = ctx.client.clone();
            ctx.run_controller(|ns| wire(&client, ns), reconcile).await;
            Ok(())
        })
    }
}

/// The caches and triggers of one namespace (or all).
fn wire(client: &Client, ns: Option<&str>) -> Wiring<MyOwnShell, Context> {
    let applier = Applier::new(FIELD_MANAGER);
    let status = StatusWriter::new(FIELD_MANAGER);
    let primary = Primary::watch(scoped_api(client.clone(), ns), (), Default::default())
        .forgetting(&status)
        .skip_status_only();
    let (deployments, dep_stream) =
        PackedCache::watch_owned(client.clone(), ns, "app=myownshell", strip, &applier);
    let context = Arc::new(Context {
        client: client.clone(),
        applier,
        status,
        events: Events::new(client.clone(), "bosun-myownshell"),
        deployments: deployments.clone(),
    });
    Wiring::new(primary, context).owns(dep_stream, deployments.synced())
}

async fn reconcile(m: Arc<MyOwnShell>, ctx: Arc<Context>) -> Result<Action, Error> {
    let api: Api<MyOwnShell> =
        Api::namespaced(ctx.client.clone(), &m.namespace().unwrap_or_default());
    finalizer(&api, FINALIZER, m.clone(), |event| async {
        match event {
            Event::Apply(m) => apply(&m, &ctx).await,
            Event::Cleanup(m) => {
                // The seed's finalizer only logs; the Deployment goes by owner reference.
                tracing::info!(name = %m.name_any(), "Successfully finalized MyOwnShell");
                ctx.status.forget(&m.uid().unwrap_or_default());
                Ok(Action::await_change())
            }
        }
    })
    .await
    .map_err(|e| match e {
        kube::runtime::finalizer::Error::ApplyFailed(e)
        | kube::runtime::finalizer::Error::CleanupFailed(e) => e,
        other => Error::Finalizer(other.to_string()),
    })
}

async fn apply(m: &MyOwnShell, ctx: &Context) -> Result<Action, Error> {
    let ns = m.namespace().unwrap_or_default();
    let desired = build::deployment(m);
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), &ns);
    let cached = ctx.deployments.meta(&ns, &m.name_any());
    let conflict = match holder(cached.as_ref(), &m.uid().unwrap_or_default()) {
        Holder::Absent | Holder::Us => None,
        Holder::Other { kind, name } => Some(format!("owned by {kind} {name}")),
        Holder::Unowned => Some("not created by this MyOwnShell".to_string()),
    };
    let applied = match conflict {
        Some(c) => Err(Error::Conflict(format!(
            "Deployment {} exists, {c}; it is never taken over",
            m.name_any()
        ))),
        None => match ctx
            .applier
            .apply(&deployments, &desired, cached.as_ref())
            .await
        {
            Err(kube::Error::Api(s)) if s.is_already_exists() => Err(Error::Conflict(format!(
                "Deployment {} exists, not created by this MyOwnShell; it is never taken over",
                m.name_any()
            ))),
            other => other.map_err(Error::from),
        },
    };
    if let Err(Error::Conflict(message)) = &applied {
        ctx.events
            .publish(
                &m.object_ref(&()),
                true,
                "NameConflict",
                "Reconcile",
                message.clone(),
            )
            .await;
    }
    applied?;
    let ready = ctx
        .deployments
        .get(&ns, &m.name_any())
        .and_then(|d| d.status.as_ref().and_then(|s| s.ready_replicas))
        .unwrap_or(0);
    let status = MyOwnShellStatus {
        observed_generation: m.metadata.generation,
        ready_replicas: ready,
    };
    let api: Api<MyOwnShell> = Api::namespaced(ctx.client.clone(), &ns);
    ctx.status
        .write_if_changed(&api, m, m.status.as_ref(), &status)
        .await?;
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};

    /// Every verb granted is one the code calls (tests/e2e.rs runs the operator as a
    /// ServiceAccount holding exactly these rules, so a missing one fails there).
    #[test]
    fn grants_exactly_what_the_code_calls() {
        let mut granted: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for rule in MyOwnShellOperator.rbac().namespaced {
            for res in rule.resources.iter().flatten() {
                granted
                    .entry(res.clone())
                    .or_default()
                    .extend(rule.verbs.iter().cloned());
            }
        }
        let want: &[(&str, &[&str])] = &[
            // Primary cache (list, watch); kube-runtime's finalizer() (JSON patch).
            ("myownshells", &["list", "patch", "watch"]),
            // Status: server-side apply.
            ("myownshells/status", &["patch"]),
            // Owner references with blockOwnerDeletion.
            ("myownshells/finalizers", &["update"]),
            // Cache; apply and apply that creates; the applier's lookup by name.
            ("deployments", &["create", "get", "list", "patch", "watch"]),
        ];
        let want: BTreeMap<String, BTreeSet<String>> = want
            .iter()
            .map(|(r, v)| (r.to_string(), v.iter().map(|s| s.to_string()).collect()))
            .collect();
        assert_eq!(granted, want);
    }
}
