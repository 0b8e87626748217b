//! Pipeline: finalizer wrapper → build the Deployment → apply (skipped when in place) → status.
use std::sync::Arc;
use std::time::Duration;

use bosun_runtime::apply::Applier;
use bosun_runtime::cache::{reflect, ChildCache, Synced};
use bosun_runtime::error::{Categorized, ErrorCategory};
use bosun_runtime::manager::{log_unobserved, observe, ControllerContext, Operator, OperatorError};
use bosun_runtime::metrics::ControllerMetrics;
use bosun_runtime::status::StatusWriter;
use futures::future::BoxFuture;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use kube::runtime::controller::{Action, Config as CtrlConfig, Controller};
use kube::runtime::finalizer::{finalizer, Event};
use kube::{Client, ResourceExt};

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
    metrics: ControllerMetrics,
    deployments: ChildCache<Deployment>,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("finalizer: {0}")]
    Finalizer(String),
}

impl Categorized for Error {
    fn category(&self) -> ErrorCategory {
        ErrorCategory::Api
    }
}

fn strip(d: &mut Deployment) {
    d.spec = None;
}

impl Operator for MyOwnShellOperator {
    fn name(&self) -> &str {
        "myownshell"
    }

    fn run(&self, ctx: ControllerContext) -> BoxFuture<'static, Result<(), OperatorError>> {
        Box::pin(async move {
            ctx.run_per_namespace(|ns| controller(&ctx, ns)).await;
            Ok(())
        })
    }
}

/// One kube-runtime Controller for one namespace (or all).
fn controller(
    ctx: &ControllerContext,
    ns: Option<String>,
) -> (BoxFuture<'static, ()>, Vec<Synced>) {
    let api: Api<MyOwnShell> = match &ns {
        Some(n) => Api::namespaced(ctx.client.clone(), n),
        None => Api::all(ctx.client.clone()),
    };
    let (store, stream, s1) = reflect(api, Default::default());
    let (deployments, dep_stream) =
        ChildCache::watch(ctx.client.clone(), ns.as_deref(), "app=myownshell", strip);
    let synced = vec![s1, deployments.synced().clone()];
    let context = Arc::new(Context {
        client: ctx.client.clone(),
        applier: Applier::new(FIELD_MANAGER),
        status: StatusWriter::new(FIELD_MANAGER),
        metrics: ctx.metrics.clone(),
        deployments,
    });
    let metrics = ctx.metrics.clone();
    let cached = store.clone();
    let run = Controller::for_stream(stream, store)
        .owns_stream(dep_stream)
        .with_config(CtrlConfig::default().concurrency(ctx.concurrency))
        .graceful_shutdown_on(ctx.shutdown_signal())
        .run(reconcile, error_policy, context)
        .for_each(move |res| {
            metrics.set_cached_objects(cached.len());
            log_unobserved(&res);
            async {}
        });
    (Box::pin(run), synced)
}

async fn reconcile(m: Arc<MyOwnShell>, ctx: Arc<Context>) -> Result<Action, Error> {
    observe(&ctx.metrics, m.as_ref(), async {
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
    })
    .await
}

async fn apply(m: &MyOwnShell, ctx: &Context) -> Result<Action, Error> {
    let ns = m.namespace().unwrap_or_default();
    let desired = build::deployment(m);
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), &ns);
    ctx.applier
        .apply(
            &deployments,
            &desired,
            ctx.deployments.meta(&ns, &m.name_any()).as_ref(),
        )
        .await?;
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

fn error_policy(_: Arc<MyOwnShell>, _: &Error, _: Arc<Context>) -> Action {
    Action::requeue(Duration::from_secs(5))
}

/// The RBAC rules this controller needs (no wildcards).
pub fn rbac_rules() -> Vec<k8s_openapi::api::rbac::v1::PolicyRule> {
    let rule =
        |group: &str, resources: &[&str], verbs: &[&str]| k8s_openapi::api::rbac::v1::PolicyRule {
            api_groups: Some(vec![group.to_string()]),
            resources: Some(resources.iter().map(|s| s.to_string()).collect()),
            verbs: verbs.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        };
    vec![
        rule(
            "my-first-operator.jgato.io",
            &["myownshells"],
            &["get", "list", "watch", "patch", "update"],
        ),
        rule(
            "my-first-operator.jgato.io",
            &["myownshells/status"],
            &["get", "patch", "update"],
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
    ]
}
